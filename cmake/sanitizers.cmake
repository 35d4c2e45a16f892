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

# ThreadSanitizer only: glibc's C11 threads on pthreads (cmake/tsan_c11_threads.c says why),
# whose objects qb_sanitizer_executables() links into every executable.
if("thread" IN_LIST QUEUEBOX_SANITIZE)
  add_library(qb_tsan_c11_threads OBJECT ${CMAKE_CURRENT_LIST_DIR}/tsan_c11_threads.c)
  target_compile_options(qb_tsan_c11_threads PRIVATE -Wall -Wextra -Wpedantic -Werror)
  set_target_properties(qb_tsan_c11_threads PROPERTIES C_STANDARD 11 UNITY_BUILD OFF)
endif()

# Called once every target is defined (the end of CMakeLists.txt): an object library's files
# reach only the targets that link it directly, so each executable of every folder links it.
function(qb_sanitizer_executables)
  if(NOT TARGET qb_tsan_c11_threads)
    return()
  endif()
  set(dirs ${PROJECT_SOURCE_DIR})
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(sub DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${sub})
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t ${targets})
      get_target_property(type ${t} TYPE)
      if(type STREQUAL "EXECUTABLE")
        target_link_libraries(${t} PRIVATE qb_tsan_c11_threads)
      endif()
    endforeach()
  endwhile()
endfunction()
