# qb_library(name SOURCES ... PUBLIC_HEADERS ... DEPS ... PRIVATE_DEPS ...)
# A static library of ours, warnings as errors, that exposes only its own public headers.
#
# PUBLIC_HEADERS are the headers other code may include, named as they are included
# ("queuebox/relay.h" lives in include/, "core/log.h" in src/). They are linked into
# <build>/include/<name>/, the library's only PUBLIC include folder, so a consumer compiles only
# against the public headers of what it links (like the include folders Bazel builds for a
# cc_library). The library's own sources also see their folder, linked as <build>/private/<name>/
# <folder> ("store/common.h" inside qb_store); no library sees src/ or include/ whole.
function(qb_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_HEADERS;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  qb_link_headers(${CMAKE_BINARY_DIR}/include/${name} ${ARG_PUBLIC_HEADERS})
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
  set(private_root ${CMAKE_BINARY_DIR}/private/${name})
  file(REMOVE_RECURSE ${private_root})
  get_filename_component(parent ${private_root}/${folder} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR} ${private_root}/${folder} SYMBOLIC)
  target_include_directories(${name} PUBLIC ${CMAKE_BINARY_DIR}/include/${name}
                             PRIVATE ${private_root})
  set_target_properties(${name} PROPERTIES QB_PRIVATE_INCLUDE ${private_root})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS} PRIVATE qb_warnings ${ARG_PRIVATE_DEPS})
endfunction()

# qb_link_headers(root header...): root/<header> -> include/<header> or src/<header>.
function(qb_link_headers root)
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root})
  foreach(h ${ARGN})
    if(EXISTS ${PROJECT_SOURCE_DIR}/include/${h})
      set(file ${PROJECT_SOURCE_DIR}/include/${h})
    elseif(EXISTS ${PROJECT_SOURCE_DIR}/src/${h})
      set(file ${PROJECT_SOURCE_DIR}/src/${h})
    else()
      message(FATAL_ERROR "Public header ${h} is in neither include/ nor src/")
    endif()
    get_filename_component(dir ${root}/${h} DIRECTORY)
    file(MAKE_DIRECTORY ${dir})
    file(CREATE_LINK ${file} ${root}/${h} SYMBOLIC)
  endforeach()
endfunction()

# qb_white_box(target lib...): a test or benchmark may include the private headers of the
# libraries it examines.
function(qb_white_box target)
  foreach(lib ${ARGN})
    if(TARGET ${lib})
      get_target_property(root ${lib} QB_PRIVATE_INCLUDE)
      if(root)
        target_include_directories(${target} PRIVATE ${root})
      endif()
    endif()
  endforeach()
endfunction()
