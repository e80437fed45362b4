# doc_fixture_blocks: runs the runner over fixtures/blocks.md and checks what it reports.
execute_process(COMMAND ${EXE} OUTPUT_VARIABLE out ERROR_VARIABLE out RESULT_VARIABLE rc)
message("${out}")
if(rc EQUAL 0)
  message(FATAL_ERROR "a block threw, yet the runner exited with 0")
endif()
foreach(want
    "blocks.md:11: the block threw: kiln::reshape"
    "--- blocks.md:22\nsum 10\n"
    "SKIPPED blocks.md:27: needs vulkan:7: "
    "blocks.md: 1 block(s) passed, 1 skipped, 1 failed")
  string(FIND "${out}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the runner's output lacks \"${want}\"")
  endif()
endforeach()
