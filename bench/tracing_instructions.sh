#!/usr/bin/env bash
# Tracing's cost in instructions (issue 37): the relay's instructions per delivered message with
# telemetry off (A) and with every span exported to the local collector stand-in (B), counted by
# valgrind's callgrind through bench/relay_instructions.sh (one binary on both sides; the http
# sink, QueueBox's defaults, fsync off; SMALL and LARGE rows, the difference per message).
#
#   flock /tmp/queuebox-bench.lock bash bench/tracing_instructions.sh <queuebox>
#   SMALL=2000 LARGE=20000 OUTBOX="{concurrency: 64, batchSize: 500}" ...
#
# Prints instructions per message for A and B, B/A, and each side's costliest functions;
# keeps the callgrind files in $OUTDIR (default /tmp/qb-tracing-insn).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "$1")
BUILD_DIR=${BUILD_DIR:-build}
export OUTDIR=${OUTDIR:-/tmp/qb-tracing-insn}
COLLECTOR="$BUILD_DIR/tests/judges/otel/npm/collector.js"
WORK=$(mktemp -d /tmp/qb-tracing-insn.XXXXXX)
node "$COLLECTOR" --port-file "$WORK/port" --out /dev/null --decode off &
COLLECTOR_PID=$!
trap 'kill $COLLECTOR_PID 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
ENV_B="QUEUEBOX_TELEMETRY_ENABLED=true QUEUEBOX_TELEMETRY_OTLP_ENDPOINT=http://127.0.0.1:$(cat "$WORK/port")/v1/traces" \
  bash bench/relay_instructions.sh "$BIN" "$BIN"
