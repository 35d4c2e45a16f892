#!/usr/bin/env bash
# Records/s from Kafka (librdkafka's mock cluster) into the inbox through the kafka source, on the
# shared test PostgreSQL (fsync off, PG_PORT 54329) and the fsync-on one (PG_DURABLE=1, port
# 54339; see scripts/services.sh), for maxPollRecords 100 (the default) and 500. Each case: a
# fresh database, RECORDS records on a 4-partition topic, read once as new rows and once again by
# a second group as duplicates (bench/kafka_source_bench.cc). One JSON line per case.
# E2E=1: instead, kafka -> inbox -> outbox -> HTTP with the queuebox binary (default maxPollRecords,
# inbox relay and outbox relay at their defaults) into bench_receiver (204; it reports the latency
# from each record's produce time); E2E_RECORDS records (default 20000).
#
#   flock /tmp/queuebox-bench.lock bash bench/kafka_source_bench.sh   # RECORDS=100000
set -euo pipefail
cd "$(dirname "$0")/.."
RECORDS=${RECORDS:-100000}
BUILD_DIR=${BUILD_DIR:-build}
BENCH="$BUILD_DIR/bench/kafka_source_bench"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
if [ "${E2E:-0}" = 1 ]; then
  E2E_RECORDS=${E2E_RECORDS:-20000}
  SINK_PORT=${SINK_PORT:-18612}
  for port in 54329 54339; do
    base="postgresql://postgres@127.0.0.1:$port"
    fsync=$(psql -qtAX "$base/postgres" -c "SHOW fsync")
    psql -qtAX "$base/postgres" -c "DROP DATABASE IF EXISTS qb_kafka_bench" \
      -c "CREATE DATABASE qb_kafka_bench" >/dev/null 2>&1
    recv=$(mktemp)
    "$BUILD_DIR/bench/bench_receiver" --port "$SINK_PORT" --expect "$E2E_RECORDS" >"$recv" &
    rpid=$!
    line=$("$BENCH" --db-url "$base/qb_kafka_bench" --records "$E2E_RECORDS" --max-poll-records 100 \
      --e2e-binary "$BUILD_DIR/apps/queuebox/queuebox" --sink-url "http://127.0.0.1:$SINK_PORT")
    wait "$rpid" || true
    echo "{\"fsync\":\"$fsync\",\"result\":$line,\"receiver\":$(cat "$recv")}"
    rm -f "$recv"
    psql -qtAX "$base/postgres" -c "DROP DATABASE IF EXISTS qb_kafka_bench" >/dev/null 2>&1
  done
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  exit 0
fi
for port in 54329 54339; do
  base="postgresql://postgres@127.0.0.1:$port"
  fsync=$(psql -qtAX "$base/postgres" -c "SHOW fsync")
  for poll in 100 500; do
    psql -qtAX "$base/postgres" -c "DROP DATABASE IF EXISTS qb_kafka_bench" \
      -c "CREATE DATABASE qb_kafka_bench" >/dev/null 2>&1
    line=$("$BENCH" --db-url "$base/qb_kafka_bench" --records "$RECORDS" --max-poll-records "$poll")
    echo "{\"fsync\":\"$fsync\",\"result\":$line}"
  done
  psql -qtAX "$base/postgres" -c "DROP DATABASE IF EXISTS qb_kafka_bench" >/dev/null 2>&1
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
