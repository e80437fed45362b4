# Installs the kiln build tree to a prefix, then configures, builds and runs
# tests/consumer against it with find_package(kiln CONFIG REQUIRED).
# -D BUILD_DIR=<kiln build> -D WORK_DIR=<scratch> -D SOURCE_DIR=<tests/consumer> -D CXX=<compiler>
file(REMOVE_RECURSE "${WORK_DIR}")
function(step)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()
step(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
if(NOT EXISTS "${WORK_DIR}/prefix/include/kiln/kiln.hpp")
  message(FATAL_ERROR "install did not lay out include/kiln/kiln.hpp")
endif()
step(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G Ninja
     "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DCMAKE_CXX_COMPILER=${CXX}")
step(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
step("${WORK_DIR}/build/app")
message(STATUS "${step_output}")
