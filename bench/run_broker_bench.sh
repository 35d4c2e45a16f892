#!/usr/bin/env bash
# PostgreSQL -> broker (RabbitMQ, NATS JetStream, Kafka = librdkafka's mock cluster): throughput,
# insert-to-sent latency and peak RSS of the queuebox binary, next to the database's floor
# (bench_floor: the relay's own claim + fenced ack, no publishing) on an identical backlog,
# measured just before each broker's relay run.
#
#   bash bench/run_broker_bench.sh                      # all three, 30,000 rows of ~1 KiB
#   BROKERS="nats" ROWS=20000 bash bench/run_broker_bench.sh
#
# Writes bench/results/relay_pg_<broker>.json per broker and prints each.
# Brokers: rabbitmq and nats are the servers of scripts/services.sh; kafka is librdkafka's mock
# cluster (3 brokers) run by bench/broker_fixture in its own process on 127.0.0.1, so the relay
# talks the Kafka protocol over TCP to it like to a real cluster (no disk, no replication: the
# Kafka figure is the relay + client + mock, not a Kafka cluster's).
set -euo pipefail
cd "$(dirname "$0")/.."
BROKERS=${BROKERS:-"rabbitmq nats kafka"}
ROWS=${ROWS:-30000}
KEYS=${KEYS:-1000}
BATCH=${BATCH:-500}
CONCURRENCY=${CONCURRENCY:-1000}
PAD=${PAD:-960}  # payload ~1 KiB with the other fields
PORT=${PORT:-18191}  # the relay's admin port (unused by the benchmark, must be free)
BUILD_DIR=${BUILD_DIR:-build}

bash scripts/services.sh start pg rabbitmq nats >/dev/null
eval "$(bash scripts/services.sh env)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" --target queuebox bench_floor broker_fixture >/dev/null
QB="$BUILD_DIR/apps/queuebox/queuebox"
FIX="$BUILD_DIR/bench/broker_fixture"
WORK=$(mktemp -d)
KAFKA_PID=""
cleanup() {
  [ -n "$KAFKA_PID" ] && kill -TERM "$KAFKA_PID" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
base=${QB_TEST_PG_URL%/*}
TAG=$$
EXCHANGE="qb.bench.$TAG" QUEUE="qb.bench.$TAG.q"
STREAM="QBBENCH$TAG" SUBJECT="qbbench$TAG.events"
KTOPIC="qb.bench.$TAG"

prepare() {  # db name, destination block (YAML flow map) -> config at $WORK/<db>.yml, backlog
  local db=$1 dest=$2
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  cat >"$WORK/$db.yml" <<YAML
database: {type: postgresql, url: "$base/$db", poolSize: 4}
server: {address: 127.0.0.1, httpPort: $PORT}
outbox: {pollIntervalMs: 50, batchSize: $BATCH, concurrency: $CONCURRENCY, claimTimeoutMs: 60000}
routes: [{topicPattern: "**", destination: broker}]
destinations: {broker: $dest}
logging: {format: json, level: info}
YAML
  "$QB" --config "$WORK/$db.yml" migrate 2>/dev/null
  psql -q "$base/$db" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $KEYS),
           jsonb_build_object('ts', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
                              'i', i, 'pad', repeat('x', $PAD))
    FROM generate_series(1, $ROWS) AS i" -c "ANALYZE outbox"
}

cpu_ticks() {  # pid -> utime + stime in clock ticks
  awk '{print $14 + $15}' "/proc/$1/stat"
}

for broker in $BROKERS; do
  case $broker in
    rabbitmq)
      "$FIX" rabbitmq setup --url "$QB_TEST_AMQP_URL" --exchange "$EXCHANGE" --queue "$QUEUE"
      DEST="{type: rabbitmq, url: \"$QB_TEST_AMQP_URL\", exchange: \"$EXCHANGE\", exchangeType: topic}"
      ;;
    nats)
      "$FIX" nats setup --url "$QB_TEST_NATS_URL" --stream "$STREAM" --subject "$SUBJECT"
      DEST="{type: nats, servers: \"$QB_TEST_NATS_URL\", subject: \"$SUBJECT\", jetStream: true}"
      ;;
    kafka)
      "$FIX" kafka serve --topic "$KTOPIC" --partitions 12 >"$WORK/kafka.out" &
      KAFKA_PID=$!
      for _ in $(seq 100); do [ -s "$WORK/kafka.out" ] && break; sleep 0.1; done
      DEST="{type: kafka, bootstrapServers: \"$(head -1 "$WORK/kafka.out")\", topic: \"$KTOPIC\"}"
      ;;
    *) echo "unknown broker $broker" >&2; exit 2 ;;
  esac

  echo "== $broker: floor, claim + ack, no publishing ($ROWS rows, batch $BATCH)" >&2
  prepare qb_bench_floor "$DEST"
  FLOOR=$("$BUILD_DIR/bench/bench_floor" --config "$WORK/qb_bench_floor.yml")
  echo "$FLOOR" >&2

  echo "== $broker: relay PostgreSQL -> $broker" >&2
  prepare qb_bench_relay "$DEST"
  case $broker in  # the broker's server process, for its CPU seconds during the relay run
    rabbitmq) BPID=$(pgrep -o beam.smp) ;;
    nats) BPID=$(pgrep -o nats-server) ;;
    kafka) BPID=$KAFKA_PID ;;
  esac
  b0=$(cpu_ticks "$BPID")
  start=$(date +%s.%N)
  TIMEFORMAT='%U %S'
  { time "$QB" --config "$WORK/qb_bench_relay.yml" run --until-idle --idle-timeout-ms 600000 \
    2>"$WORK/relay.log"; } 2>"$WORK/relay.time"
  end=$(date +%s.%N)
  b1=$(cpu_ticks "$BPID")
  RELAY_CPU=$(awk '{print $1 + $2}' "$WORK/relay.time")
  BROKER_CPU=$(awk -v a="$b0" -v b="$b1" -v hz="$(getconf CLK_TCK)" 'BEGIN {print (b - a) / hz}')
  # Insert-to-acknowledgement latency on the database clock: updated_at (sent) - created_at.
  DB=$(psql -Atq "$base/qb_bench_relay" -c "SELECT json_build_object(
      'sent', count(*) FILTER (WHERE state = 'sent'),
      'not_sent', count(*) FILTER (WHERE state <> 'sent'),
      'rate_per_s', count(*) FILTER (WHERE state = 'sent')
          / GREATEST(EXTRACT(EPOCH FROM max(updated_at) - min(claimed_at)), 0.001),
      'p50_ms', 1000 * EXTRACT(EPOCH FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY updated_at - created_at) FILTER (WHERE state = 'sent')),
      'p99_ms', 1000 * EXTRACT(EPOCH FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY updated_at - created_at) FILTER (WHERE state = 'sent')))
    FROM outbox")
  echo "$DB" >&2
  MAX_RSS_KB=$(grep -o '"max_rss_kb":"[0-9]*"' "$WORK/relay.log" | tail -1 | grep -o '[0-9]*' || echo 0)

  case $broker in  # messages the broker holds, then remove the bench's broker objects
    rabbitmq)
      AT_BROKER=$("$FIX" rabbitmq count --url "$QB_TEST_AMQP_URL" --exchange "$EXCHANGE" --queue "$QUEUE")
      "$FIX" rabbitmq delete --url "$QB_TEST_AMQP_URL" --exchange "$EXCHANGE" --queue "$QUEUE"
      WHERE="queue depth of a durable queue bound with '#' to the topic exchange"
      ;;
    nats)
      AT_BROKER=$("$FIX" nats count --url "$QB_TEST_NATS_URL" --stream "$STREAM")
      "$FIX" nats delete --url "$QB_TEST_NATS_URL" --stream "$STREAM"
      WHERE="JetStream stream message count (file storage)"
      ;;
    kafka)
      kill -TERM "$KAFKA_PID"
      wait "$KAFKA_PID"
      KAFKA_PID=""
      AT_BROKER=$(sed -n 2p "$WORK/kafka.out")
      WHERE="sum of high watermarks over the topic's 12 partitions (mock cluster, 3 brokers)"
      ;;
  esac
  echo "$broker holds $AT_BROKER messages" >&2

  OUT=bench/results/relay_pg_$broker.json
  python3 - "$broker" "$FLOOR" "$DB" "$start" "$end" "$MAX_RSS_KB" "$AT_BROKER" "$WHERE" \
    "$ROWS" "$KEYS" "$BATCH" "$CONCURRENCY" "$RELAY_CPU" "$BROKER_CPU" >"$OUT" <<'PY'
import json, os, platform, subprocess, sys
broker, floor, db = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
start, end, rss, at_broker, where, rows, keys, batch, conc, relay_cpu, broker_cpu = sys.argv[4:15]
wall = float(end) - float(start)
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
load = open("/proc/loadavg").read().split()[:3]
print(json.dumps({
  "benchmark": f"PostgreSQL -> {broker}, backlog drain by the queuebox binary (run --until-idle); "
               "latency = insert to sent (database clock)",
  "broker": {"rabbitmq": "rabbitmq-server (scripts/services.sh), mandatory + publisher confirms",
             "nats": "nats-server -js (scripts/services.sh), PubAck per message",
             "kafka": "librdkafka mock cluster, 3 brokers, separate process on 127.0.0.1"}[broker],
  "rows": int(rows), "keys": int(keys), "payload_bytes": 1024, "batch_size": int(batch),
  "concurrency": int(conc),
  "floor_rows_per_s": round(floor["rows_per_s"], 1),
  "relay_rows_per_s": round(db["rate_per_s"], 1),
  "relay_rows_per_s_wall": round(db["sent"] / wall, 1) if wall > 0 else None,
  "relay_vs_floor": round(db["rate_per_s"] / floor["rows_per_s"], 3) if floor["rows_per_s"] else None,
  "insert_to_sent_p50_ms": round(db["p50_ms"], 1) if db["p50_ms"] is not None else None,
  "insert_to_sent_p99_ms": round(db["p99_ms"], 1) if db["p99_ms"] is not None else None,
  "rows_sent": db["sent"], "rows_not_sent": db["not_sent"],
  "messages_at_broker": int(at_broker) if at_broker.isdigit() else None,
  "messages_at_broker_is": where,
  "peak_rss_mb": round(int(rss) / 1024, 1),
  "relay_wall_s": round(wall, 2),
  "relay_cpu_s": float(relay_cpu), "broker_server_cpu_s": round(float(broker_cpu), 2),
  "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
              "loadavg_after": load, "postgres": "15 (fsync off, throw-away cluster)"},
}, indent=2))
PY
  cat "$OUT"
done
