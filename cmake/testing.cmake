# qb_test(name LABELS unit|contract|integration|e2e SOURCES ... DEPS ...)
# One GoogleTest binary, registered with ctest under its labels. Tests that need a server read
# its address from the environment that scripts/test.sh exports (QB_TEST_PG_URL, ...).
function(qb_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS;SOURCES;DEPS" ${ARGN})
  if(NOT QUEUEBOX_BUILD_TESTS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  # Test programs compile at -Og whatever the build type: the code under test (the libraries they
  # link, the binary the e2e tests start) keeps the build type's level, and a test's own code
  # compiles in about half the time of -O3 (docs/testing.md, "Build time").
  target_compile_options(${name} PRIVATE -Og)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} qb_testing GTest::gtest_main GTest::gmock
                        qb_warnings)
  # Tests are white-box: they may include the private headers of the libraries they link.
  qb_white_box(${name} ${ARG_DEPS})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()

# qb_npm_judges(target DIR <build dir> [SOURCE_DIR <dir>] FILES <files beside node_modules>
#               COMMENT <text>)
# The providers' own npm libraries as test judges: copies package.json, package-lock.json and
# FILES from SOURCE_DIR (default: the calling source directory) into DIR, then `npm ci` installs exactly the lock
# file's versions there (integrity checked, no install scripts). `target` is a custom target
# that is built once the install is done; node resolves the libraries from DIR.
function(qb_npm_judges target)
  cmake_parse_arguments(ARG "" "DIR;SOURCE_DIR;COMMENT" "FILES" ${ARGN})
  find_program(QB_NPM npm REQUIRED)
  set(src ${CMAKE_CURRENT_SOURCE_DIR})
  if(ARG_SOURCE_DIR)
    set(src ${ARG_SOURCE_DIR})
  endif()
  set(inputs ${src}/package.json ${src}/package-lock.json)
  foreach(f ${ARG_FILES})
    list(APPEND inputs ${src}/${f})
  endforeach()
  add_custom_command(
    OUTPUT ${ARG_DIR}/npm-ci.stamp
    COMMAND ${CMAKE_COMMAND} -E make_directory ${ARG_DIR}
    COMMAND ${CMAKE_COMMAND} -E copy ${inputs} ${ARG_DIR}
    COMMAND ${QB_NPM} ci --prefix ${ARG_DIR} --ignore-scripts --no-audit --no-fund
            --prefer-offline --loglevel=error
    COMMAND ${CMAKE_COMMAND} -E touch ${ARG_DIR}/npm-ci.stamp
    DEPENDS ${inputs}
    COMMENT "npm ci: ${ARG_COMMENT}"
    VERBATIM)
  add_custom_target(${target} DEPENDS ${ARG_DIR}/npm-ci.stamp)
endfunction()
