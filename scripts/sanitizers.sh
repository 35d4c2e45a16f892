#!/usr/bin/env bash
# The sanitizer builds (issue 17 item 5, issue 39 item 3), each in its own build directory, in two
# scopes (QB_SANITIZER_SCOPE):
#   ci (default, what .ci/run runs)
#     asan  AddressSanitizer + UndefinedBehaviorSanitizer (leaks included): the unit, contract and
#           integration tests
#     tsan  ThreadSanitizer: the relay's unit tests (unit_core) and every contract test, where the
#           poller, the workers and the lease keeper share state
#   wide (issue 39 item 3; too long for CI's 60 minutes, docs/testing.md "Cost, and what CI runs")
#     asan  also the e2e tests: the Release tree's e2e programs running the asan tree's binary
#     tsan  also unit_transform, unit_admin, unit_sources and every integration test (the broker
#           libraries' callback threads)
# Only the targets a job runs are built. The servers must be up and their env exported (as
# scripts/test.sh does). A finding fails the job: ASan and TSan exit non-zero, UBSan halts, and
# a report of the binary under test fails its e2e test (tests/testing/process.h).
#
#   bash scripts/sanitizers.sh            # both
#   bash scripts/sanitizers.sh asan       # one; extra arguments go to ctest
#   bash scripts/sanitizers.sh build all  # only build (asan, tsan or all); no servers needed
#   QB_SANITIZER_SCOPE=wide bash scripts/sanitizers.sh tsan
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
shift || true
SUPP="$PWD/scripts/sanitizers"
JOBS=$(nproc)
# Tests that run no C++ of ours (the npm JSONata package under Node): nothing to instrument.
NOT_CXX='^transform_golden_node$'
# Tests run at once: 2 in CI's scope, as the Release run; 3 in the wide one, whose added tests
# mostly wait on the servers and their timers. RESOURCE_LOCK and RUN_SERIAL still hold.
SCOPE=${QB_SANITIZER_SCOPE:-ci}
case $SCOPE in
ci) default_jobs=2 ;;
wide) default_jobs=3 ;;
*)
  echo "QB_SANITIZER_SCOPE must be ci or wide, not '$SCOPE'" >&2
  exit 2
  ;;
esac
TEST_JOBS=${QB_SANITIZER_TEST_JOBS:-$default_jobs}

# A unity build, as scripts/test.sh's (docs/testing.md, "Build time"); QB_SANITIZER_UNITY_BUILD=OFF
# for a build directory edited incrementally.
configure() {  # dir sanitizers
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQUEUEBOX_SANITIZE="$2" \
    -DQUEUEBOX_BUILD_BENCH=OFF -DCMAKE_UNITY_BUILD="${QB_SANITIZER_UNITY_BUILD:-ON}" \
    -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 >/dev/null
}

# The executables ctest would run for a label regex and a name regex, so nothing else builds.
# ctest names each one, as "Could not find executable <path>" before it is built and as
# "Test command: <path>" after (both, so a rebuilt tree relinks what changed); the file name is
# its target's name (a test's name need not be: example_sdk_status runs sdk_status_example).
targets() {  # dir label-regex name-regex
  ctest --test-dir "$1" -N -V -L "$2" -R "$3" -E "$NOT_CXX" |
    sed -n -e 's|^Could not find executable .*/||p' \
      -e 's|^[0-9]*: Test command: [^ ]*/\([^ /]*\).*$|\1|p' | sort -u
}

ASAN_DIR=build-asan ASAN_LABELS='^(unit|contract|integration)$'
# The e2e tests test the binary, so under asan they are the Release tree's test programs (built by
# scripts/test.sh) running the asan tree's queuebox (QB_QUEUEBOX_BIN): only the binary is compiled
# twice. Skipped (docs/testing.md, "Sanitizer builds" says why): the package and image tests ship
# the binary (a .deb, a container) without the sanitizer runtime, and the browser test is Python
# driving Chromium (the relay it starts is not a ChildProcess: no report reaches it).
RELEASE_DIR=${BUILD_DIR:-build}
E2E_SKIP='^(package_deb|e2e_image_e2e_test|e2e_console_browser_test)$'
TSAN_DIR=build-tsan TSAN_LABELS='^(unit|contract|integration)$'
TSAN_NAMES='^(unit_core|contract_)'
[ "$SCOPE" = wide ] && TSAN_NAMES='^(unit_(core|transform|admin|sources)|contract_|integration_)'

# Each step says how long it took, for docs/testing.md's figures and CI's log.
timed() {  # what command...
  local what=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  echo "sanitizers.sh: $what took $((SECONDS - start)) s (exit $rc)"
  return "$rc"
}

build_asan() {
  configure "$ASAN_DIR" "address;undefined"
  mapfile -t t < <(targets "$ASAN_DIR" "$ASAN_LABELS" .)
  [ "$SCOPE" = wide ] && t+=(queuebox)  # the binary the e2e tests run
  timed "asan build" cmake --build "$ASAN_DIR" -j "$JOBS" --target "${t[@]}"
}

# The Release tree's e2e test programs, configured as scripts/test.sh does when it is not yet;
# nothing to do in CI, where scripts/test.sh has built them. Never while another build writes
# that tree (CI's background `build asan` does not call this).
build_release_e2e() {
  [ -f "$RELEASE_DIR/CMakeCache.txt" ] ||
    cmake -S . -B "$RELEASE_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON \
      -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 >/dev/null
  mapfile -t t < <(NOT_CXX=$E2E_SKIP targets "$RELEASE_DIR" '^e2e$' .)
  cmake --build "$RELEASE_DIR" -j "$JOBS" --target "${t[@]}"
}

build_tsan() {
  configure "$TSAN_DIR" "thread"
  mapfile -t t < <(targets "$TSAN_DIR" "$TSAN_LABELS" "$TSAN_NAMES")
  timed "tsan build" cmake --build "$TSAN_DIR" -j "$JOBS" --target "${t[@]}"
}

run_asan() {
  build_asan
  [ "$SCOPE" = wide ] && build_release_e2e
  export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1"
  export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  local rc=0
  timed "asan tests" ctest --test-dir "$ASAN_DIR" -L "$ASAN_LABELS" -E "$NOT_CXX" \
    --output-on-failure --timeout 1800 -j "$TEST_JOBS" "$@" || rc=$?
  [ "$SCOPE" = wide ] || return "$rc"
  QB_QUEUEBOX_BIN="$PWD/$ASAN_DIR/apps/queuebox/queuebox" QB_SANITIZED_CHILDREN=1 \
    timed "asan e2e tests (Release test programs, asan binary)" ctest --test-dir "$RELEASE_DIR" \
    -L '^e2e$' -E "$E2E_SKIP" --output-on-failure --timeout 1800 -j "$TEST_JOBS" "$@" || rc=$?
  return "$rc"
}

run_tsan() {
  build_tsan
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp" \
    timed "tsan tests" ctest --test-dir "$TSAN_DIR" -L "$TSAN_LABELS" -R "$TSAN_NAMES" \
    -E "$NOT_CXX" --output-on-failure --timeout 1800 -j "$TEST_JOBS" "$@"
}

case $which in
build)
  case ${1:-all} in
  asan) build_asan ;;
  tsan) build_tsan ;;
  all)
    build_asan
    build_tsan
    ;;
  *)
    echo "usage: $0 build [asan|tsan|all]" >&2
    exit 2
    ;;
  esac
  ;;
asan) run_asan "$@" ;;
tsan) run_tsan "$@" ;;
all)
  run_asan "$@"
  run_tsan "$@"
  ;;
*)
  echo "usage: $0 [asan|tsan|all] [ctest arguments] | $0 build [asan|tsan|all]" >&2
  exit 2
  ;;
esac
