# Warnings are errors in our own code (not in outside headers, which are SYSTEM includes).
# -Wnull-dereference is left out: g++ 12 at -O2 reports it inside inlined libstdc++ code
# (basic_string, streambuf), false positives that no change of ours can remove.
add_library(qb_warnings INTERFACE)
# The C++-only ones only for C++: cc1 warns about them on C sources (bench/rabbitmq_ceiling.c).
# The order is the one C++ command lines always had, so ccache keeps its entries.
set(QB_CXX "$<COMPILE_LANGUAGE:CXX>")
target_compile_options(qb_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow
                       "$<${QB_CXX}:-Wnon-virtual-dtor>" "$<${QB_CXX}:-Wold-style-cast>"
                       -Wcast-align -Wunused "$<${QB_CXX}:-Woverloaded-virtual>"
                       -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough -Werror)
# g++ 12 at -O3 (Release) reports impossible overlapping memcpy calls inside inlined std::string
# code (GCC bug 105329, "Bogus restrict warning when assigning 1-char string literal to
# std::string"). It also reports a moved std::optional<std::string> as maybe uninitialized when
# the optional is empty (GCC bug 80635, "std::optional and bogus -Wmaybe-uninitialized warning").
# -O2 (RelWithDebInfo, the README's quickstart build) reports the same two: the quickstart broke
# on one on 2026-12-01. Only that compiler at -O2/-O3 loses these two; every other build keeps
# them.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION MATCHES "^12\\.")
  target_compile_options(qb_warnings INTERFACE
                         $<$<CONFIG:Release,RelWithDebInfo>:-Wno-restrict -Wno-maybe-uninitialized>)
endif()
# A unity build (CMAKE_UNITY_BUILD, as CI builds) compiles each source as an include of a
# generated file, so g++ takes a source's anonymous-namespace types for a header's and reports
# every class of that source that holds one (-Wsubobject-linkage). One by one, the same code
# compiles clean, and every other build keeps the warning.
if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(qb_warnings INTERFACE "$<${QB_CXX}:-Wno-subobject-linkage>")
endif()
