#!/usr/bin/env bash
# The sanitizer builds (issue 17 item 5), each in its own build directory:
#   asan   AddressSanitizer + UndefinedBehaviorSanitizer (leaks included): the unit, contract
#          and integration tests
#   tsan   ThreadSanitizer: the relay's unit tests (unit_core) and the contract tests, where the
#          poller, the workers and the lease keeper share state
# Only the targets a job runs are built. The servers must be up and their env exported (as
# scripts/test.sh does). A finding fails the job: ASan and TSan exit non-zero, UBSan halts.
#
#   bash scripts/sanitizers.sh            # both
#   bash scripts/sanitizers.sh asan       # one; extra arguments go to ctest
#   bash scripts/sanitizers.sh build all  # only build (asan, tsan or all); no servers needed
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
shift || true
SUPP="$PWD/scripts/sanitizers"
JOBS=$(nproc)
# Tests that run no C++ of ours (the npm JSONata package under Node): nothing to instrument.
NOT_CXX='^transform_golden_node$'

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
TSAN_DIR=build-tsan TSAN_LABELS='^(unit|contract)$' TSAN_NAMES='^(unit_core|contract_)'
# The destination contract suite drives librdkafka's mock cluster, rabbitmq-c and nats.c, whose
# threads ThreadSanitizer does not see (uninstrumented: the mock cluster dies on a SEGV inside
# TSan's runtime); the broker tests run under AddressSanitizer instead, as the integration ones do.
TSAN_SKIP='^(transform_golden_node|contract_destination_contract_test)$'

build_asan() {
  configure "$ASAN_DIR" "address;undefined"
  mapfile -t t < <(targets "$ASAN_DIR" "$ASAN_LABELS" .)
  cmake --build "$ASAN_DIR" -j "$JOBS" --target "${t[@]}"
}

build_tsan() {
  configure "$TSAN_DIR" "thread"
  mapfile -t t < <(NOT_CXX=$TSAN_SKIP targets "$TSAN_DIR" "$TSAN_LABELS" "$TSAN_NAMES")
  cmake --build "$TSAN_DIR" -j "$JOBS" --target "${t[@]}"
}

run_asan() {
  build_asan
  ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1" \
    LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir "$ASAN_DIR" -L "$ASAN_LABELS" -E "$NOT_CXX" --output-on-failure --timeout 1800 \
    -j 2 "$@"
}

run_tsan() {
  build_tsan
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp" \
    ctest --test-dir "$TSAN_DIR" -L "$TSAN_LABELS" -R "$TSAN_NAMES" -E "$TSAN_SKIP" \
    --output-on-failure --timeout 1800 -j 2 "$@"
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
