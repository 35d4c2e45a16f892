#!/usr/bin/env bash
# Broker -> inbox -> outbox -> HTTP end to end (issue 15), beside broker -> inbox alone, in one
# run: for NATS JetStream (batchSize 100) and RabbitMQ (prefetchCount PREFETCH), on the shared test
# PostgreSQL (fsync off, port 54329) and the fsync-on one (PG_DURABLE=1, port 54339; see
# scripts/services.sh). Each case publishes MESSAGES small JSON messages (a backlog), then drains
# them either with the source alone in the bench process (bench/nats_source_bench.cc,
# bench/rabbitmq_source_bench.cc) or with `queuebox run` (one source, the inbox relay, one route to
# an http destination on nginx answering 204), timed until every outbox row is sent
# (bench/e2e_run.h). One JSON line per case.
#
#   flock /tmp/queuebox-bench.lock bash bench/broker_e2e_bench.sh   # MESSAGES=50000 PREFETCH=500
set -euo pipefail
cd "$(dirname "$0")/.."
MESSAGES=${MESSAGES:-50000}
PREFETCH=${PREFETCH:-500}
BUILD_DIR=${BUILD_DIR:-build}
SINK_PORT=${SINK_PORT:-18641}
eval "$(bash scripts/services.sh env)"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
WORK=$(mktemp -d)
source bench/nginx_sink.sh
trap 'nginx_sink_stop "$WORK/nginx"; rm -rf "$WORK"' EXIT
nginx_sink_start "$WORK/nginx" "$SINK_PORT"
QB="$BUILD_DIR/apps/queuebox/queuebox"
for port in 54329 54339; do
  base="postgresql://postgres@127.0.0.1:$port/postgres"
  fsync=$(psql -qtAX "$base" -c "SHOW fsync")
  for mode in source e2e; do
    e2e=()
    [ "$mode" = e2e ] && e2e=(--e2e-binary "$QB" --sink-url "http://127.0.0.1:$SINK_PORT")
    line=$("$BUILD_DIR/bench/nats_source_bench" --nats "$QB_TEST_NATS_URL" --url "$base" \
      --messages "$MESSAGES" --batch 100 "${e2e[@]}" 2>/dev/null | tail -1)
    echo "{\"fsync\":\"$fsync\",\"broker\":\"nats\",\"mode\":\"$mode\",\"result\":$line}"
    line=$("$BUILD_DIR/bench/rabbitmq_source_bench" --pg-url "$base" --amqp-url "$QB_TEST_AMQP_URL" \
      --messages "$MESSAGES" --prefetch "$PREFETCH" --duplicates 0 "${e2e[@]}" 2>/dev/null | tail -1)
    echo "{\"fsync\":\"$fsync\",\"broker\":\"rabbitmq\",\"mode\":\"$mode\",\"result\":$line}"
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
