#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, -DQUEUEBOX_FUZZ=ON, clang 14) in build-fuzz and runs each
# over its seed corpus (fuzz/corpus/<target>/) for a while. Fails on the first crash, leak,
# undefined behaviour, timeout or broken property; the input that failed is kept in
# $FUZZ_OUT/<target>/ and printed in base64. docs/testing.md, "Fuzzing", says what each target
# covers and how to reproduce a finding.
#
#   bash scripts/fuzz.sh [seconds per target] [target...]   (default: 20 s, every target)
#   FUZZ_RUNS=1000000 bash scripts/fuzz.sh 0 envelope       (a number of runs instead)
#   FUZZ_BUILD_ONLY=1 bash scripts/fuzz.sh                   (build, run nothing)
#   FUZZ_JOBS=2 bash scripts/fuzz.sh 30                      (two targets at a time)
#   FUZZ_TRANSFORMS=OFF bash scripts/fuzz.sh                 (without the JSONata engine, so
#                                                              without transform_engine)
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-20}
shift || true
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
OUT=${FUZZ_OUT:-$BUILD_DIR/fuzz-out}
NICE=(nice -n "${FUZZ_NICE:-19}")

# A unity build, as the others (docs/testing.md, "Build time"); FUZZ_UNITY_BUILD=OFF to edit.
cmake -S . -B "$BUILD_DIR" -G Ninja -DQUEUEBOX_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_UNITY_BUILD="${FUZZ_UNITY_BUILD:-ON}" -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 \
  -DQUEUEBOX_FUZZ_TRANSFORMS="${FUZZ_TRANSFORMS:-ON}" >/dev/null
"${NICE[@]}" cmake --build "$BUILD_DIR" -j "$(nproc)" --target fuzzers
[ -n "${FUZZ_BUILD_ONLY:-}" ] && exit 0

if [ "$#" -gt 0 ]; then
  TARGETS=("$@")
else
  TARGETS=()
  for d in fuzz/corpus/*/; do TARGETS+=("$(basename "$d")"); done
  if [ "${FUZZ_TRANSFORMS:-ON}" = OFF ]; then
    for i in "${!TARGETS[@]}"; do
      if [ "${TARGETS[$i]}" = transform_engine ]; then unset 'TARGETS[i]'; fi
    done
    TARGETS=("${TARGETS[@]}")
  fi
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/scripts/sanitizers/lsan.supp}
# One target: its result line, and its findings when it fails, on stdout in one piece (so parallel
# runs do not interleave); the exit status says whether it failed.
run_one() {  # target
  local t=$1 bin="$BUILD_DIR/fuzz/${1}_fuzz" work="$OUT/$1" start rc took runs limit report extra flags
  # The repo's seeds stay untouched: the run grows a copy.
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  if ! cp fuzz/corpus/"$t"/* "$work/corpus/"; then
    printf '%-16s %12s %8s %s\n' "$t" - - "FAILED (no seeds in fuzz/corpus/$t/)"
    return 1
  fi
  # A target's dictionary of tokens (fuzz/<target>.dict) and libFuzzer flags of its own
  # (fuzz/<target>.flags, one line), when it has them.
  extra=()
  if [ -f "fuzz/$t.dict" ]; then extra=(-dict="fuzz/$t.dict"); fi
  if [ -f "fuzz/$t.flags" ]; then read -ra flags <"fuzz/$t.flags"; extra+=("${flags[@]}"); fi
  limit=(-max_total_time="$SECONDS_PER_TARGET")
  [ -n "${FUZZ_RUNS:-}" ] && limit=(-runs="$FUZZ_RUNS")
  start=$(date +%s)
  rc=0
  "${NICE[@]}" "$bin" "${limit[@]}" "${extra[@]}" -timeout=10 -rss_limit_mb=2560 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1 ||
    rc=$?
  took=$(($(date +%s) - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  if [ "$rc" -eq 0 ]; then
    printf '%-16s %12s %8s %s\n' "$t" "${runs:-?}" "$took" ok
    return 0
  fi
  report=$(printf '%-16s %12s %8s %s\n' "$t" "${runs:-?}" "$took" "FAILED (exit $rc)"
    grep -E 'ERROR|SUMMARY|fuzz property|runtime error|#[0-9]+ 0x' "$work/log" | head -40 || true
    for a in "$work"/artifacts/*; do
      if [ -f "$a" ]; then echo "input $(basename "$a") (base64): $(base64 -w0 "$a")"; fi
    done)
  echo "$report"
  return 1
}

for t in "${TARGETS[@]}"; do
  [ -x "$BUILD_DIR/fuzz/${t}_fuzz" ] || { echo "fuzz.sh: no target $t" >&2; exit 2; }
done
# FUZZ_JOBS targets at a time (default 1). Each run's limit is wall time, so on a busy machine a
# run at nice 19 does fewer executions in its seconds, never more seconds.
JOBS_AT_ONCE=${FUZZ_JOBS:-1}
[[ $JOBS_AT_ONCE =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: FUZZ_JOBS must be 1 or more" >&2; exit 2; }
printf '%-16s %12s %8s %s\n' target executions seconds result
failed=0
running=0
for t in "${TARGETS[@]}"; do
  if [ "$running" -ge "$JOBS_AT_ONCE" ]; then
    wait -n || failed=$((failed + 1))
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || failed=$((failed + 1))
  running=$((running - 1))
done
if [ "$failed" -gt 0 ]; then
  echo "fuzz.sh: $failed target(s) failed (FAILED above); logs and inputs in $OUT/<target>/" >&2
  exit 1
fi
