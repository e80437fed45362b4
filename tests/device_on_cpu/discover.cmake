# Lists a test binary's Catch tests matching SPEC and writes CTEST_FILE, which registers each
# as "<PREFIX>: <name>" running that one test with ENV set (one VAR=value). Catch's own
# discovery cannot name them so: its prefix goes through `cmake -D`, which drops a trailing
# space. Tests whose names match HEAVY (a regex) start first (COST 60): one started last
# ran alone on one core for a minute. LAUNCHER ('|'-separated words, such as mpirun and its
# options) goes before the binary, with a 5-minute timeout; a name that already starts with "<PREFIX>: " keeps it.
execute_process(COMMAND "${EXE}" "${SPEC}" --list-test-names-only
  OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(rc LESS 0)
  message(FATAL_ERROR "${EXE} --list-test-names-only failed: ${out}")
endif()
string(REPLACE "\n" ";" names "${out}")
set(launch "")
if(LAUNCHER)
  string(REPLACE "|" "]==] [==[" launch "${LAUNCHER}")
  set(launch "[==[${launch}]==] ")
endif()
set(script "")
foreach(name ${names})
  if(name STREQUAL "")
    continue()
  endif()
  set(filter "${name}")
  set(full "${PREFIX}: ${name}")
  string(FIND "${name}" "${PREFIX}: " at)
  if(at EQUAL 0)
    set(full "${name}")
  endif()
  foreach(c , [ ])
    string(REPLACE "${c}" "\\${c}" filter "${filter}")
  endforeach()
  string(APPEND script
    "add_test([==[${full}]==] ${launch}[==[${EXE}]==] [==[${filter}]==] --rng-seed time --warn NoTests)\n"
    "set_tests_properties([==[${full}]==] PROPERTIES ENVIRONMENT [==[${ENV}]==]")
  if(LAUNCHER)
    string(APPEND script " TIMEOUT 300") # a rank left waiting in a collective fails, not hangs
  endif()
  if(HEAVY AND name MATCHES "${HEAVY}")
    string(APPEND script " COST 60")
  endif()
  string(APPEND script ")\n")
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
