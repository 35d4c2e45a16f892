#!/usr/bin/env bash
# Tracing's relay CPU per message (issue 37): bench/relay_cpu_ab.sh with one binary, telemetry
# off (A) and every span exported to the local collector stand-in (B: tests/judges/otel/
# collector.js, answering 200 without decoding unless DECODE=on). CPU time per message is the
# measure that holds on a shared machine (throughput A/Bs need a quiet one: tracing_ab.sh).
#
#   flock /tmp/queuebox-bench.lock bash bench/tracing_cpu_ab.sh <queuebox>
#   ROWS=30000 ROUNDS=2 CONFIGS="tuned defaults" FSYNC=off ...   # relay_cpu_ab.sh's settings
#
# Writes $OUT (bench/results/tracing_cpu_ab.json), relay_cpu_ab.sh's record.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "$1")
BUILD_DIR=${BUILD_DIR:-build}
COLLECTOR=${COLLECTOR:-$BUILD_DIR/tests/judges/otel/npm/collector.js}  # target otel_collector
WORK=$(mktemp -d /tmp/qb-tracing-cpu.XXXXXX)
node "$COLLECTOR" --port-file "$WORK/port" --out /dev/null --decode "${DECODE:-off}" &
COLLECTOR_PID=$!
trap 'kill $COLLECTOR_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
# Side B: the same binary with export on (relay_cpu_ab.sh runs a command, not an environment).
cat >"$WORK/queuebox-traced" <<SH
#!/bin/sh
QUEUEBOX_TELEMETRY_ENABLED=true \
QUEUEBOX_TELEMETRY_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$WORK/port")/v1/traces exec "$BIN" "\$@"
SH
chmod +x "$WORK/queuebox-traced"
OUT=${OUT:-bench/results/tracing_cpu_ab.json} \
  bash bench/relay_cpu_ab.sh "$BIN" "$WORK/queuebox-traced"
