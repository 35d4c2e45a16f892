#!/usr/bin/env bash
# Tracing's cost (issue 37), through defaults_ab.sh (the http sink: local nginx): the same binary
# with telemetry off (A) and with every span exported to the local collector stand-in (B:
# tests/judges/otel/collector.js, answering 200 without decoding unless DECODE=on), at QueueBox's defaults and tuned
# (TUNED, an outbox block), fsync off and on, in one run. With a second binary (a build of main),
# a third pass: that binary (A) against this one with telemetry off (B): free when off.
#
#   flock /tmp/queuebox-bench.lock bash bench/tracing_ab.sh <queuebox> [<queuebox of main>]
#   ROWS=50000 TUNED="{concurrency: 64, batchSize: 500}" DURABILITY="off on" OUTDIR=bench/results ...
# fsync off runs on the default test cluster (scripts/services.sh with its default ports).
#
# Writes $OUTDIR/tracing_defaults.json, tracing_tuned.json and tracing_off_vs_main.json
# (defaults_ab.sh's records: rows/s on the database clock, relay CPU, peak RSS).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "$1")
BEFORE=${2:+$(realpath "$2")}
BUILD_DIR=${BUILD_DIR:-build}
OUTDIR=${OUTDIR:-bench/results}
TUNED=${TUNED:-"{concurrency: 64, batchSize: 500}"}
export ROWS=${ROWS:-50000} SINKS=http DURABILITY=${DURABILITY:-"off on"} DURABLE_SINKS=http BUILD_DIR
COLLECTOR="$BUILD_DIR/tests/judges/otel/npm/collector.js"  # cmake --build build --target otel_collector
WORK=$(mktemp -d /tmp/qb-tracing-ab.XXXXXX)
# DECODE=on: the stand-in decodes every export (as the tests' judge does), on the same two cores.
node "$COLLECTOR" --port-file "$WORK/port" --out /dev/null --decode "${DECODE:-off}" &
COLLECTOR_PID=$!
trap 'kill $COLLECTOR_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
ON="QUEUEBOX_TELEMETRY_ENABLED=true QUEUEBOX_TELEMETRY_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$WORK/port")/v1/traces"

WRAP_B="$ON" OUT="$OUTDIR/tracing_defaults.json" bash bench/defaults_ab.sh "$BIN" "$BIN"
WRAP_B="$ON" OUTBOX="$TUNED" OUT="$OUTDIR/tracing_tuned.json" bash bench/defaults_ab.sh "$BIN" "$BIN"
if [ -n "$BEFORE" ]; then
  OUT="$OUTDIR/tracing_off_vs_main.json" bash bench/defaults_ab.sh "$BEFORE" "$BIN"
fi
