# A build without gRPC: rex linked from the same objects with the backend table that has no modal
# line (CMakeLists.txt, rex_without_modal) must link without the modal module, carry nothing of
# gRPC, and say that modal is not in it.
# cmake -DBUILD=<build tree> -DREX=<rex_without_modal> -P without_modal.cmake
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD} --target rex_without_modal
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "rex without the modal backend does not build:\n${out}")
endif()

execute_process(COMMAND nm -C ${REX} OUTPUT_FILE ${BUILD}/without_modal.symbols
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm ${REX} failed")
endif()
file(STRINGS ${BUILD}/without_modal.symbols grpc REGEX "grpc::|ModalDeployment|modal_entry")
file(REMOVE ${BUILD}/without_modal.symbols)
if(grpc)
  list(LENGTH grpc count)
  list(GET grpc 0 first)
  message(FATAL_ERROR "rex without the modal backend still has ${count} symbols of it or of gRPC, "
                      "such as: ${first}")
endif()

execute_process(COMMAND ${REX} backends RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "modal +not in this build: this rex was built without gRPC")
  message(FATAL_ERROR "`rex backends` does not say that modal is missing (exit ${rc}):\n${out}${err}")
endif()
if(out MATCHES "modal +a Modal sandbox")
  message(FATAL_ERROR "`rex backends` lists modal:\n${out}")
endif()

execute_process(COMMAND ${REX} run --deployment modal --image python:3.11 -- true
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "modal backend is not in this build")
  message(FATAL_ERROR "`rex run --deployment modal` is not refused as missing (exit ${rc}):\n"
                      "${out}${err}")
endif()
message(STATUS "rex without modal: builds, no gRPC, says so")
