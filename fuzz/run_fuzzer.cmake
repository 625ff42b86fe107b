# Runs one fuzz target for a short while, as CTest does (cmake -P): FUZZER, CORPUS (the
# committed seeds), WORK (a scratch folder, replaced), SECONDS. The seeds are copied first, so
# what the run adds stays in the build tree; a crash, leak or hang fails the test and leaves
# its input in WORK/artifacts/.
foreach(var FUZZER CORPUS WORK SECONDS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzzer.cmake: ${var} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
file(GLOB seeds ${CORPUS}/*)
if(seeds)
  file(COPY ${seeds} DESTINATION ${WORK}/corpus)
endif()
execute_process(
  COMMAND ${FUZZER} ${WORK}/corpus -max_total_time=${SECONDS} -timeout=20 -rss_limit_mb=2048
          -max_len=65536 -print_final_stats=1 -artifact_prefix=${WORK}/artifacts/
  RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${result}); its input is in ${WORK}/artifacts/")
endif()
