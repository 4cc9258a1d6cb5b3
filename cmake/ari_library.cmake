# ari_library: one CMake library per source folder, dependencies one way.
#
#   ari_library(<target> DIR <folder> [SOURCES <file>... | HEADERS_ONLY]
#               [DEPS <ari library>...] [LINK <other library>...]
#               [PRIVATE_LINK <other library>...])
#
# Layering, enforced twice:
#  - At configure time, every DEPS entry must be an ari_library declared *before* this one.
#    Folders are added bottom-up (runtime/core first, component/node last), so a library
#    can only depend on a lower layer and the graph has no cycle (CMake itself would accept
#    a cycle of static libraries).
#  - At compile time, a library's sources see only the headers of their own folder and of
#    the libraries they depend on (transitively). Headers are included from the project
#    root ("runtime/gguf/gguf.h"), but the root is not on any library's include path:
#    each library publishes an include view, <build>/include/<target>/<folder> -> the
#    source folder (a symlink), and gets the views of its DEPS through CMake's usage
#    requirements. An include that points up or sideways to a library not depended on
#    fails with "fatal error: <header>: No such file or directory" (docs/architecture.md).
#
# SOURCES default to <folder>/*.cc (not subfolders). HEADERS_ONLY (or no sources) makes an
# INTERFACE library: the folder's headers and its DEPS.
function(ari_library target)
  cmake_parse_arguments(A "HEADERS_ONLY" "DIR" "SOURCES;DEPS;LINK;PRIVATE_LINK" ${ARGN})
  if(NOT A_DIR)
    message(FATAL_ERROR "ari_library(${target}): DIR <folder> is required")
  endif()
  foreach(dep ${A_DEPS})
    if(NOT TARGET ${dep})
      message(FATAL_ERROR "ari_library(${target}) in ${A_DIR}: dependency '${dep}' is not "
              "declared yet. A library may depend only on libraries of lower layers, which "
              "are declared before it (see the add_subdirectory order).")
    endif()
    get_target_property(dep_dir ${dep} ARI_LAYER_DIR)
    if(NOT dep_dir)
      message(FATAL_ERROR "ari_library(${target}): '${dep}' is not an ari_library; "
              "external libraries go in LINK / PRIVATE_LINK")
    endif()
  endforeach()
  if(A_HEADERS_ONLY)
    set(A_SOURCES "")
  elseif(NOT DEFINED A_SOURCES)
    file(GLOB A_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${A_DIR}/*.cc)
  endif()

  # The include view: <build>/include/<target>/<DIR> -> <source>/<DIR>.
  set(view ${CMAKE_BINARY_DIR}/include/${target})
  get_filename_component(parent ${A_DIR} DIRECTORY)
  file(MAKE_DIRECTORY ${view}/${parent})
  if(NOT EXISTS ${view}/${A_DIR})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${A_DIR} ${view}/${A_DIR} SYMBOLIC)
  endif()

  if(A_SOURCES)
    add_library(${target} STATIC ${A_SOURCES})
    set(scope PUBLIC)
  else()
    add_library(${target} INTERFACE)
    set(scope INTERFACE)
  endif()
  target_include_directories(${target} ${scope} $<BUILD_INTERFACE:${view}>)
  target_link_libraries(${target} ${scope} ${A_DEPS} ${A_LINK})
  if(A_PRIVATE_LINK)
    target_link_libraries(${target} PRIVATE ${A_PRIVATE_LINK})
  endif()
  set_target_properties(${target} PROPERTIES ARI_LAYER_DIR ${A_DIR})
  set_property(GLOBAL APPEND PROPERTY ARI_LIBRARIES ${target})
endfunction()

# ari_tool(<exe> SOURCES <file>... LIBS <library>... [NO_INSTALL]): a command-line tool;
# it sees the headers of the libraries it links, nothing else.
function(ari_tool exe)
  cmake_parse_arguments(A "NO_INSTALL" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${exe} ${A_SOURCES})
  target_link_libraries(${exe} PRIVATE ${A_LIBS})
  if(NOT A_NO_INSTALL)
    install(TARGETS ${exe} RUNTIME DESTINATION bin)
  endif()
endfunction()
