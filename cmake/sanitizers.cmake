# QUEUEBOX_SANITIZE: a list for -fsanitize= ("address;undefined" or "thread"), applied to every
# target of the project, so our code, the tests and the binary are instrumented together (the
# Debian libraries are not; ASan and TSan intercept their allocations and threads). UBSan
# findings stop the test (-fno-sanitize-recover), so a finding fails ctest instead of scrolling
# by. scripts/sanitizers.sh builds and runs them; docs/testing.md says what each build covers.
set(QUEUEBOX_SANITIZE "" CACHE STRING "Sanitizers: address;undefined, or thread (empty: none)")
if(QUEUEBOX_SANITIZE)
  list(JOIN QUEUEBOX_SANITIZE "," qb_sanitizers)
  add_compile_options(-fsanitize=${qb_sanitizers} -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${qb_sanitizers})
  if("undefined" IN_LIST QUEUEBOX_SANITIZE)
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()
