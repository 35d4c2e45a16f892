# qb_test(name LABELS unit|contract|integration|e2e SOURCES ... DEPS ...)
# One GoogleTest binary, registered with ctest under its labels. Tests that need a server read
# its address from the environment that scripts/test.sh exports (QB_TEST_PG_URL, ...).
function(qb_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "LABELS;SOURCES;DEPS" ${ARGN})
  if(NOT QUEUEBOX_BUILD_TESTS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
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
