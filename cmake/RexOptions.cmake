# The layers' sources compile a few at a time, as one translation unit per batch (CMake's unity
# builds): the templates each file instantiates from Asio, Beast and Boost.JSON are then compiled
# once per batch instead of once per file. Small batches keep the two processors busy to the end
# and an edit's recompile short.
option(REX_UNITY_BUILD "Compile the layers' sources in batches (unity builds)" ON)
set(REX_UNITY_BATCH 4 CACHE STRING "Sources per batch of a unity build")

# Compiler warnings and sanitizers shared by every rex target.
function(rex_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wnon-virtual-dtor
                                           -Woverloaded-virtual -Wimplicit-fallthrough)
  # g++ reports a coroutine frame holding a type of a source's anonymous namespace once that
  # source is part of a batch (-Wsubobject-linkage is meant for headers).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND REX_UNITY_BUILD)
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
  # g++ 12 at -O2 reports Asio's coroutine frame allocator (aligned new, sized delete) as a
  # mismatch once inlined: a known false positive in the compiler, not in rex.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE -Wno-mismatched-new-delete)
  endif()
  if(REX_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# A sanitized build cannot link rex-server statically, so the suites whose containers and pods
# run the build's rex-server (the tests labelled docker and k8s), the benchmarks and the tests of
# the static executable exist only in a build without sanitizers.
if(REX_SANITIZE OR REX_SANITIZE_THREAD OR REX_FUZZ)
  set(REX_SANITIZED ON)
else()
  set(REX_SANITIZED OFF)
endif()

# The rex-server the tests put into the emulated clouds' sandboxes (the Daytona and Modal
# deployments and E2B's from a template without it upload it, as the real clouds need): this
# build's own when empty. A sanitized build's is 160 MB
# and more (uploads of it take most of those tests' time) and not what users put into sandboxes,
# so the sanitizer presets name the release build's static one (the tests fail naming it when it
# is not built: `cmake --build --preset release --target rex_server`).
set(REX_SANDBOX_SERVER "" CACHE FILEPATH
    "rex-server for the emulated clouds' sandboxes in the tests (empty: this build's)")

if(REX_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "REX_FUZZ needs clang (libFuzzer ships with it): use the `fuzz` preset")
  endif()
  # Coverage feedback and sanitizers in every object; libFuzzer's main() only in fuzz/ targets.
  # clang 14 cannot emit UBSan's function-type check for coroutines ("Cannot represent a
  # difference across sections"): that one check is off.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=function
                      -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
elseif(REX_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=address,undefined)
endif()

# ThreadSanitizer, for the code that hands work to thread pools (file operations) and back.
if(REX_SANITIZE_THREAD)
  # TSan does not model fences; Asio's handler fences are redundant with its scheduler's mutex,
  # which TSan does see.
  add_compile_definitions(BOOST_ASIO_DISABLE_FENCED_BLOCK)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

# clang stamps a precompiled header with its inputs' times, so one restored by ccache would be
# refused after a checkout touches them.
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  add_compile_options("SHELL:-Xclang -fno-pch-timestamp")
endif()

find_program(REX_CCACHE ccache)
if(REX_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${REX_CCACHE} CACHE STRING "" FORCE)
endif()

# Debug info names the checkout as "." rather than its absolute folder: the objects of a clone in
# another folder are then the same, and ccache (with CCACHE_BASEDIR, scripts/common.sh) reuses
# them instead of leaving the working directory in every hash.
add_compile_options(-fdebug-prefix-map=${PROJECT_SOURCE_DIR}=.)

# mold links the test executables, each holding the whole library with gRPC, several times
# faster than the default linker (scripts/common.sh installs it; REX_LINKER=default to opt out).
set(REX_LINKER "mold" CACHE STRING "Linker: mold when it is installed, or default")
if(REX_LINKER STREQUAL "mold")
  find_program(REX_MOLD mold)
  if(REX_MOLD)
    add_link_options(-fuse-ld=mold)
  endif()
endif()
