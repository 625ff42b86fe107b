# The layers of DESIGN.md as libraries. Each folder src/<layer>/ (with include/rex/<layer>/ for
# its public face) is the static library rex_lib_<layer> (alias rex::<layer>), which links only the
# layers it names, all of them below it.
#
# The compiler holds the layering: a layer's sources and headers find only its own headers and
# those of the layers it links. Each layer has a staged include root in the build tree,
# layers/<layer>/{include/rex/<layer>,src/<layer>}, symlinks to its two folders, and that root is
# all it exports; the real include/ and src/ are never on a layer's include path. So an include
# that points up ("rex/server/server.hpp" from the session layer) is "No such file", and tests/
# layers/ shows it. A definition that sits in a higher layer than its declaration fails the
# layer's whole-archive link check there too.
include_guard(GLOBAL)

# rex_layer(<name> [DEPENDS <lower layer>...] [LINKS <other target>...] [PRIVATE_LINKS ...]
#           [EXCLUDE <file of the folder left out>...])
function(rex_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 L "" "" "DEPENDS;LINKS;PRIVATE_LINKS;EXCLUDE")
  set(target rex_lib_${name})
  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  foreach(excluded IN LISTS L_EXCLUDE)
    list(REMOVE_ITEM sources ${PROJECT_SOURCE_DIR}/src/${name}/${excluded})
  endforeach()
  add_library(${target} STATIC ${sources})
  add_library(rex::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME rex_${name} EXPORT_NAME ${name}
                                             UNITY_BUILD ${REX_UNITY_BUILD}
                                             UNITY_BUILD_BATCH_SIZE ${REX_UNITY_BATCH})

  set(stage ${PROJECT_BINARY_DIR}/layers/${name})
  file(MAKE_DIRECTORY ${stage}/include/rex ${stage}/src)
  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/include/rex/${name})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/rex/${name} ${stage}/include/rex/${name}
         SYMBOLIC)
  endif()
  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/src/${name})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${name} ${stage}/src/${name} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${stage}/include>
                                              $<BUILD_INTERFACE:${stage}/src>
                                              $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  list(TRANSFORM L_DEPENDS PREPEND rex_lib_ OUTPUT_VARIABLE lower)
  target_link_libraries(${target} PUBLIC ${lower} ${L_LINKS} PRIVATE ${L_PRIVATE_LINKS})
  target_compile_features(${target} PUBLIC cxx_std_20)
  rex_set_warnings(${target})
  set_property(GLOBAL APPEND PROPERTY REX_LAYERS ${name})  # lowest first
endfunction()

# rex_backend(<name> [DEPENDS <layer or backend_<other>>...] [LINKS ...] [PRIVATE_LINKS ...]
#             [ONLY_IF <variable> MISSING <why>]):
# one backend module, src/backends/<name>/ with include/rex/backends/<name>/, as the static
# library rex_lib_backend_<name> (alias rex::backend_<name>) over the deployment layer. It is a
# layer of its own between deployment and the backend table (the layer `backends`, which links
# every module): its staged root holds its own two folders only, so a module sees neither another
# module's headers nor the table's unless it names that module in DEPENDS. The order of the
# rex_backend() lines is the table's (and the help's). With ONLY_IF, a build whose <variable> is
# false has no such module, and the table names it with <why>.
function(rex_backend name)
  cmake_parse_arguments(PARSE_ARGV 1 B "" "ONLY_IF;MISSING" "DEPENDS;LINKS;PRIVATE_LINKS")
  if(B_ONLY_IF)
    set_property(GLOBAL APPEND PROPERTY REX_OPTIONAL_BACKENDS "${name}")
    set_property(GLOBAL PROPERTY REX_BACKEND_MISSING_${name} "${B_MISSING}")
    if(NOT ${B_ONLY_IF})
      set_property(GLOBAL APPEND PROPERTY REX_MISSING_BACKENDS "${name}")
      return()
    endif()
  endif()
  set_property(GLOBAL APPEND PROPERTY REX_BACKEND_NAMES ${name})
  set(target rex_lib_backend_${name})
  file(GLOB sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backends/${name}/*.cpp)
  add_library(${target} STATIC ${sources})
  add_library(rex::backend_${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME rex_backend_${name}
                                             EXPORT_NAME backend_${name}
                                             UNITY_BUILD ${REX_UNITY_BUILD}
                                             UNITY_BUILD_BATCH_SIZE ${REX_UNITY_BATCH})
  set(stage ${PROJECT_BINARY_DIR}/layers/backend_${name})
  file(MAKE_DIRECTORY ${stage}/include/rex/backends ${stage}/src/backends)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/rex/backends/${name}
       ${stage}/include/rex/backends/${name} SYMBOLIC)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/backends/${name} ${stage}/src/backends/${name}
       SYMBOLIC)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${stage}/include>
                                              $<BUILD_INTERFACE:${stage}/src>
                                              $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  list(TRANSFORM B_DEPENDS PREPEND rex_lib_ OUTPUT_VARIABLE lower)
  target_link_libraries(${target} PUBLIC rex_lib_deployment ${lower} ${B_LINKS}
                                  PRIVATE ${B_PRIVATE_LINKS})
  target_compile_features(${target} PUBLIC cxx_std_20)
  rex_set_warnings(${target})
  set_property(GLOBAL APPEND PROPERTY REX_LAYERS backend_${name})
  set_property(GLOBAL APPEND PROPERTY REX_BACKENDS backend_${name})
endfunction()

# rex_stage_header(<layer> <path under include/rex>): a header of the project's root folder
# (rex/version.hpp, rex/rex.hpp) staged with a layer.
function(rex_stage_header name header)
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/rex/${header}
       ${PROJECT_BINARY_DIR}/layers/${name}/include/rex/${header} SYMBOLIC)
endfunction()

# rex_backend_modules(<dir> [WITHOUT_OPTIONAL]): writes <dir>/rex/backend_modules.hpp, the list of
# this build's modules in the order of their rex_backend() lines, and of those it is built
# without, for the backend table (src/backends/backends.cpp), and <dir>/rex/backend_headers.hpp,
# every public header of those modules, for the umbrella header. WITHOUT_OPTIONAL: as a build
# without any module that has ONLY_IF would have them.
function(rex_backend_modules dir)
  cmake_parse_arguments(PARSE_ARGV 1 M "WITHOUT_OPTIONAL" "" "")
  get_property(names GLOBAL PROPERTY REX_BACKEND_NAMES)
  get_property(optional GLOBAL PROPERTY REX_OPTIONAL_BACKENDS)
  get_property(missing GLOBAL PROPERTY REX_MISSING_BACKENDS)
  if(M_WITHOUT_OPTIONAL)
    list(REMOVE_ITEM names ${optional})
    set(missing ${optional})
  endif()
  set(modules "")
  set(headers "")
  foreach(name IN LISTS names)
    string(APPEND modules " \\\n  X(${name})")
    file(GLOB module_headers RELATIVE ${PROJECT_SOURCE_DIR}/include
         ${PROJECT_SOURCE_DIR}/include/rex/backends/${name}/*.hpp)
    list(SORT module_headers)
    foreach(header IN LISTS module_headers)
      string(APPEND headers "#include <${header}>\n")
    endforeach()
  endforeach()
  set(absent "")
  foreach(name IN LISTS missing)
    get_property(why GLOBAL PROPERTY REX_BACKEND_MISSING_${name})
    string(APPEND absent " \\\n  M(${name}, \"${why}\")")
  endforeach()
  string(CONCAT note "// Generated by CMake (rex_backend_modules in cmake/RexLayers.cmake) from "
                     "the\n// rex_backend() lines of CMakeLists.txt.\n")
  file(CONFIGURE OUTPUT ${dir}/rex/backend_modules.hpp CONTENT
       "${note}// The backend modules of this build, in the table's order: X(name) each; and\n// those it is built without: M(name, why).\n#pragma once\n\n#define REX_BACKEND_MODULES(X)${modules}\n\n#define REX_MISSING_BACKENDS(M)${absent}\n")
  file(CONFIGURE OUTPUT ${dir}/rex/backend_headers.hpp CONTENT
       "${note}// Every public header of this build's backend modules.\n#pragma once\n\n${headers}")
endfunction()
