# QUEUEBOX_SANITIZE: a list for -fsanitize= ("address;undefined" or "thread"), applied to every
# target of the project, so our code, the tests and the binary are instrumented together (the
# Debian libraries are not; ASan and TSan intercept their allocations and threads). UBSan
# findings stop the test (-fno-sanitize-recover), so a finding fails ctest instead of scrolling
# by. scripts/sanitizers.sh builds and runs them; docs/testing.md says what each build covers.
set(QUEUEBOX_SANITIZE "" CACHE STRING "Sanitizers: address;undefined, or thread (empty: none)")
if(QUEUEBOX_SANITIZE)
  list(JOIN QUEUEBOX_SANITIZE "," qb_sanitizers)
  # -O1 -g1 (line tables) whatever the build type: the sanitizer builds are the slowest part of
  # CI, and -O1 with line tables compiles in about half the time of -O2 -g while the reports
  # keep file:line stacks (figures in docs/testing.md).
  add_compile_options(-fsanitize=${qb_sanitizers} -fno-omit-frame-pointer -O1 -g1)
  add_link_options(-fsanitize=${qb_sanitizers})
  # g++ 12 with -fsanitize=address reports moves and copies of std::variant and std::function
  # inside inlined libstdc++ code (std::regex, variant temporaries) as maybe uninitialized:
  # false positives that no change of ours removes (the same code builds clean without ASan).
  # The Release build already drops this warning on g++ 12 (cmake/warnings.cmake), so the
  # sanitizer builds lose nothing CI had.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION MATCHES "^12\\.")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  if("undefined" IN_LIST QUEUEBOX_SANITIZE)
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()
