# Lists a test binary's Catch tests matching SPEC and writes CTEST_FILE, which registers each
# as "<PREFIX>: <name>" running that one test with ENV set (one VAR=value). Catch's own
# discovery cannot name them so: its prefix goes through `cmake -D`, which drops a trailing
# space. Tests whose names match HEAVY (a regex) start first (COST 60): one started last
# ran alone on one core for a minute.
execute_process(COMMAND "${EXE}" "${SPEC}" --list-test-names-only
  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(rc LESS 0)
  message(FATAL_ERROR "${EXE} --list-test-names-only failed: ${out}")
endif()
string(REPLACE "\n" ";" names "${out}")
set(script "")
foreach(name ${names})
  if(name STREQUAL "")
    continue()
  endif()
  set(filter "${name}")
  foreach(c , [ ])
    string(REPLACE "${c}" "\\${c}" filter "${filter}")
  endforeach()
  string(APPEND script
    "add_test([==[${PREFIX}: ${name}]==] [==[${EXE}]==] [==[${filter}]==] --rng-seed time --warn NoTests)\n"
    "set_tests_properties([==[${PREFIX}: ${name}]==] PROPERTIES ENVIRONMENT [==[${ENV}]==]")
  if(HEAVY AND name MATCHES "${HEAVY}")
    string(APPEND script " COST 60")
  endif()
  string(APPEND script ")\n")
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
