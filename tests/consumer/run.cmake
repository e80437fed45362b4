# Installs the kiln build tree to a scratch prefix, then configures, builds and runs
# tests/consumer against it with find_package(kiln CONFIG REQUIRED), and checks its output.
#   cmake -D BUILD_DIR=<kiln build> -D WORK_DIR=<scratch> -D SOURCE_DIR=<tests/consumer>
#         -D CXX=<compiler> -D GENERATOR=<generator> [-D CXX_FLAGS=...] [-D LINK_FLAGS=...]
#         -P run.cmake
# CXX_FLAGS and LINK_FLAGS are the kiln build's own: its installed runtime library was
# compiled with them (a sanitizer build needs the sanitizer's runtime in the consumer too).
foreach(var BUILD_DIR WORK_DIR SOURCE_DIR CXX GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run.cmake: -D ${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
separate_arguments(cxx_flags UNIX_COMMAND "${CXX_FLAGS}")
separate_arguments(link_flags UNIX_COMMAND "${LINK_FLAGS}")

function(step)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

set(prefix "${WORK_DIR}/prefix")
step(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
if(NOT EXISTS "${prefix}/include/kiln/kiln.hpp")
  message(FATAL_ERROR "the install did not lay out include/kiln/kiln.hpp")
endif()
# lib/cmake/kiln, or lib/<multiarch>/cmake/kiln when configured for the prefix /usr.
file(GLOB_RECURSE config "${prefix}/lib*/kilnConfig.cmake")
if(NOT config)
  message(FATAL_ERROR "the install did not lay out a CMake package (kilnConfig.cmake)")
endif()

# Only the install prefix is on the search path: not the source tree, not the build tree.
step(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
     "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${CXX}" -DCMAKE_BUILD_TYPE=Release
     "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${LINK_FLAGS}"
     -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
step(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
function(check_output program)
  step("${program}")
  string(STRIP "${step_output}" printed)
  message(STATUS "${program}: ${printed}")
  if(NOT printed STREQUAL "kiln consumer: 338350 33.835000")
    message(FATAL_ERROR "unexpected output from ${program}: '${printed}'")
  endif()
endfunction()
check_output("${WORK_DIR}/build/app")

# Without CMake, header-only: the same program, and one more file that includes the
# implementation (the README's one line), compiled against the installed headers. At -O0:
# what these check is the layout and the link, and the implementation's file was 45 s of
# this test at -O1 (33 s at -O0), twice.
file(WRITE "${WORK_DIR}/kiln_impl.cpp" "#include <kiln/jit/src.hpp>\n")
step(${CXX} -std=c++20 -O0 ${cxx_flags} "-I${prefix}/include" "${SOURCE_DIR}/main.cpp"
     "${WORK_DIR}/kiln_impl.cpp" -o "${WORK_DIR}/app_header_only" ${link_flags} -ldl -pthread)
check_output("${WORK_DIR}/app_header_only")
# The same, with kiln's non-template functions compiled once too (KILN_COMPILED_CORE in
# every file, as kiln::kiln sets it): main.cpp only declares them, kiln_impl.cpp defines them.
step(${CXX} -std=c++20 -O0 -DKILN_COMPILED_CORE ${cxx_flags} "-I${prefix}/include"
     "${SOURCE_DIR}/main.cpp" "${WORK_DIR}/kiln_impl.cpp" -o "${WORK_DIR}/app_compiled_core"
     ${link_flags} -ldl -pthread)
check_output("${WORK_DIR}/app_compiled_core")
