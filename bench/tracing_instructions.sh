#!/usr/bin/env bash
# Tracing's cost in instructions (issue 37): the relay's instructions per delivered message with
# telemetry off (A) and with every span exported to the local collector stand-in (B), counted by
# valgrind's callgrind, which is repeatable whatever else the machine does (throughput pairs on
# this machine spread 0.7-1.4). Each side drains two backlogs through defaults_ab.sh (the http
# sink, QueueBox's defaults, fsync off), SMALL and LARGE rows; the difference divided by
# LARGE - SMALL is the instructions per message, without start-up and shutdown.
#
#   flock /tmp/queuebox-bench.lock bash bench/tracing_instructions.sh <queuebox>
#   SMALL=2000 LARGE=20000 OUTBOX="{concurrency: 64, batchSize: 500}" ...
#
# Prints instructions per message for A and B, B/A, and B's costliest functions (inclusive,
# callgrind_annotate); keeps the callgrind files in $OUTDIR (default /tmp/qb-tracing-insn).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "$1")
BUILD_DIR=${BUILD_DIR:-build}
SMALL=${SMALL:-2000}
LARGE=${LARGE:-20000}
OUTDIR=${OUTDIR:-/tmp/qb-tracing-insn}
mkdir -p "$OUTDIR"
rm -f "$OUTDIR"/*.out
COLLECTOR="$BUILD_DIR/tests/judges/otel/npm/collector.js"
WORK=$(mktemp -d /tmp/qb-tracing-insn.XXXXXX)
node "$COLLECTOR" --port-file "$WORK/port" --out /dev/null --decode off &
COLLECTOR_PID=$!
trap 'kill $COLLECTOR_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
ON="QUEUEBOX_TELEMETRY_ENABLED=true QUEUEBOX_TELEMETRY_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$WORK/port")/v1/traces"
CG="valgrind --tool=callgrind --callgrind-out-file=$OUTDIR/rows@ROWS@-@RUN@.out"

for rows in "$SMALL" "$LARGE"; do
  ROWS=$rows SINKS=http DURABILITY=off ROUNDS=1 OUT="$WORK/ab-$rows.json" \
    WRAP_A="${CG//@ROWS@/$rows}" WRAP_B="$ON ${CG//@ROWS@/$rows}" \
    bash bench/defaults_ab.sh "$BIN" "$BIN" >"$WORK/ab-$rows.log" 2>&1 ||
    { tail -20 "$WORK/ab-$rows.log"; exit 1; }
done

total() {  # callgrind file -> instructions (Ir) of the whole process
  callgrind_annotate "$1" 2>/dev/null | sed -n 's/^\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,
}
per_message() {  # side
  local small large
  small=$(total "$OUTDIR/rows$SMALL-off-http-$1.out")
  large=$(total "$OUTDIR/rows$LARGE-off-http-$1.out")
  echo $(((large - small) / (LARGE - SMALL)))
}
A=$(per_message A)
B=$(per_message B)
echo "instructions per message: A (off) $A, B (export on) $B, B/A $(awk -v a="$A" -v b="$B" 'BEGIN{printf "%.4f", b/a}')"
echo "B's costliest functions, inclusive ($OUTDIR/rows$LARGE-off-http-B.out):"
callgrind_annotate --inclusive=yes "$OUTDIR/rows$LARGE-off-http-B.out" 2>/dev/null | sed -n '/^Ir/,$p' | head -40 || true  # head ends the pipe early
