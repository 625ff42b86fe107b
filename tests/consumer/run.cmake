# Installs rex from BUILD into WORK/prefix, then configures, builds and runs the outside project
# in SOURCE against it (cmake -P; CTest's consumer.find_package). Any step failing fails it.
foreach(var BUILD SOURCE WORK)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run.cmake: ${var} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})

function(step what)
  message(STATUS "consumer: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "consumer: ${what} failed (${result})")
  endif()
endfunction()

step("install rex" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/prefix)
step("configure the outside project" ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/build -G Ninja
     -DCMAKE_PREFIX_PATH=${WORK}/prefix -DCMAKE_BUILD_TYPE=Release)
step("build it" ${CMAKE_COMMAND} --build ${WORK}/build)
step("run it" ${WORK}/build/consumer)
