# QUEUEBOX_FUZZ=ON: a build of the libFuzzer targets (fuzz/) and nothing else. Every library they
# link is compiled with coverage (fuzzer-no-link), AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer. The broker destinations and sources are in (their option tables are
# part of the configuration the config targets load; librdkafka, rabbitmq-c and nats.c link
# uninstrumented). The transforms are in unless QUEUEBOX_FUZZ_TRANSFORMS=OFF: qb_transform and its
# engine module (libqueuebox_jsonata.so) are instrumented like the rest, SpiderMonkey (libmozjs)
# links uninstrumented, and the JSONata bundle is fetched and built as in any build (npm ci, node),
# for transform_engine_fuzz. The binary, the tests and the benchmarks stay out, so the build fits
# a CI job. scripts/fuzz.sh builds and runs it; docs/testing.md lists the targets.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "QUEUEBOX_FUZZ needs clang (libFuzzer): configure with "
                      "-DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14")
endif()
foreach(off QUEUEBOX_BUILD_TESTS QUEUEBOX_BUILD_BENCH)
  set(${off} OFF)
endforeach()
option(QUEUEBOX_FUZZ_TRANSFORMS "Fuzz build: the JSONata engine too (transform_engine_fuzz)" ON)
set(QUEUEBOX_WITH_TRANSFORMS ${QUEUEBOX_FUZZ_TRANSFORMS})

include(cmake/dependencies.cmake)
include(cmake/warnings.cmake)
include(cmake/library.cmake)
include(cmake/glob.cmake)

add_compile_definitions(QUEUEBOX_VERSION="${PROJECT_VERSION}"
                        QUEUEBOX_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# -O1 after the build type's flags: fast enough to fuzz, quick to compile, clear stacks.
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer -g -O1)
add_link_options(-fsanitize=address,undefined)

add_subdirectory(src/status)
add_subdirectory(src/json)
add_subdirectory(src/babelqueue)
add_subdirectory(src/telemetry)
add_subdirectory(src/core)
add_subdirectory(src/store)
add_subdirectory(src/destinations)
add_subdirectory(src/auth)
add_subdirectory(src/sources)
add_subdirectory(src/config)
add_subdirectory(src/admin)
if(QUEUEBOX_WITH_TRANSFORMS)
  add_subdirectory(src/transform)
endif()
add_subdirectory(fuzz)
