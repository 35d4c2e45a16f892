#!/usr/bin/env bash
# QueueBox's defaults (outbox.batchSize 100, outbox.concurrency 8, no outbox settings at all in the
# configuration), two queuebox binaries side by side in one run: for each sink, the floor
# (bench_floor: the relay's claim + fenced ack statements back to back, no publishing, batch
# 100), then binary A, then binary B, each on a fresh database with the same backlog (ROWS rows
# of ~1 KiB over KEYS keys, inserted before the relay starts). Sinks: http (local nginx answering
# 204 with keep-alive, bench/nginx_sink.sh), nats (JetStream, PubAck per message), rabbitmq
# (publisher confirms), kafka (librdkafka's mock cluster, 3 brokers, 12 partitions, run by
# broker_fixture in its own process, as in run_broker_bench.sh). Durability: off = the test cluster (fsync off), on = a second cluster
# with fsync, synchronous_commit and full_page_writes on (PG_DURABLE=1 on port 54339; started if
# it is not running, and stopped again only if this script started it).
#
#   flock /tmp/queuebox-bench.lock bash bench/defaults_ab.sh <queuebox A> <queuebox B>
#   ROWS=200000 SINKS="http nats rabbitmq kafka" DURABILITY="off on" DURABLE_SINKS="http" ...
#   OUTBOX="{concurrency: 64}" SINKS=rabbitmq DURABILITY=off ...   # other outbox settings
#   RMQ_QUEUE_TYPE=quorum SINKS=rabbitmq ...   # the queue's type: classic (default), cqv2, quorum
#   ROUNDS=3 ...   # three A/B pairs per sink, in the order A B, B A, A B (medians summarised)
#   NATS_URL=nats://127.0.0.1:54249 ...   # a private nats-server instead of the shared one
#   OFF_SVC_DIR=/tmp/qb-svc-x OFF_PG_PORT=55009 ...  # a running fsync-off PostgreSQL of one's own
#   NATS_PID=<pid of that nats-server>: its CPU seconds per run (sink_server_cpu_s); RabbitMQ's
#   (the Erlang VM, beam.smp, of the shared broker, or RMQ_PID) are always counted
#   WRAP_B="perf record -g -o /tmp/b.perf --" ...   # a command that runs binary B (WRAP_A: A);
#                                                  # @RUN@ in it becomes <fsync>-<sink>-<side>
#   TRACE_DIR=/tmp/t ...   # QB_PHASE_TRACE=$TRACE_DIR/<fsync>-<sink>-<side>.csv for each relay run
#                          # (a binary built with bench/phase_trace.patch writes its phase timings)
#
# bench_floor and broker_fixture come from $BUILD_DIR (default build; build them first).
# Writes $OUT (bench/results/defaults_ab.json): per durability and sink, the floor and each
# binary's rows/s (database clock: sent rows / (last updated_at - first claimed_at)), wall rate,
# ratio to the floor, insert-to-sent p50/p99, peak RSS, relay CPU seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
A=$(realpath "$1")
B=$(realpath "$2")
ROWS=${ROWS:-200000}
KEYS=${KEYS:-1000}
PAD=${PAD:-960}  # payload ~1 KiB with the other fields
SINKS=${SINKS:-"http nats rabbitmq"}
DURABILITY=${DURABILITY:-"off on"}
DURABLE_SINKS=${DURABLE_SINKS:-"http"}
PORT=${PORT:-18281}  # nginx; PORT + 1: the relay's admin port
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/defaults_ab.json}
ROUNDS=${ROUNDS:-1}  # A/B pairs per sink, alternated; the summary holds each side's median
OUTBOX=${OUTBOX:-}  # an outbox block (YAML flow map); empty: QueueBox's defaults
FLOOR_BIN="$BUILD_DIR/bench/bench_floor"
FIX="$BUILD_DIR/bench/broker_fixture"
WORK=$(mktemp -d /tmp/qb-defaults-ab.XXXXXX)
source bench/nginx_sink.sh
source bench/proc_cpu.sh
source bench/pg_durability.sh
KAFKA_PID=""
cleanup() {
  [ -n "$KAFKA_PID" ] && kill -TERM "$KAFKA_PID" 2>/dev/null
  nginx_sink_stop "$WORK/ngx"
  durability_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
eval "$(bash scripts/services.sh env)"  # brokers' URLs (and the fsync-off PostgreSQL)
QB_TEST_NATS_URL=${NATS_URL:-$QB_TEST_NATS_URL}  # NATS_URL: another nats-server (a private one)
TAG=$$
EXCHANGE="qb.defaults.$TAG" QUEUE="qb.defaults.$TAG.q"
STREAM="QBDEFAULTS$TAG" SUBJECT="qbdefaults$TAG.events"
KTOPIC="qb.defaults.$TAG"
nginx_sink_start "$WORK/ngx" "$PORT"
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"

prepare() {  # db name, destination (YAML flow map) -> $WORK/<db>.yml and the backlog
  local db=$1 dest=$2
  psql -q "$PGURL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  cat >"$WORK/$db.yml" <<YAML
database: {type: postgresql, url: "$PGBASE/$db"}
server: {address: 127.0.0.1, httpPort: $((PORT + 1))}
${OUTBOX:+outbox: $OUTBOX}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: $dest}
logging: {format: json, level: info}
YAML
  "$A" --config "$WORK/$db.yml" migrate 2>/dev/null
  psql -q "$PGBASE/$db" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $KEYS),
           jsonb_build_object('i', i, 'pad', repeat('x', $PAD))
    FROM generate_series(1, $ROWS) AS i" -c "ANALYZE outbox" -c "CHECKPOINT"
}

relay_run() {  # mode sink side binary dest
  local mode=$1 sink=$2 side=$3 bin=$4 dest=$5 db=qb_defaults_${3,,}
  prepare "$db" "$dest"
  local start end pg_pid sink_pids
  # CPU seconds of the cluster (all its backends; the shared fsync-off cluster also serves
  # others) and of the sink's server (nginx and its worker; nats: NATS_PID, a private server).
  pg_pid=$(head -1 "${QB_SVC_DIR:-/tmp/queuebox-svc}/pg/data/postmaster.pid" 2>/dev/null || true)
  case $sink in
    http) sink_pids="$(cat "$WORK/ngx/nginx.pid") $(pgrep -P "$(cat "$WORK/ngx/nginx.pid")" | tr '\n' ' ')" ;;
    nats) sink_pids=${NATS_PID:-} ;;
    rabbitmq) sink_pids=${RMQ_PID:-$(pgrep -f beam.smp | tr '\n' ' ')} ;;  # the shared broker
    *) sink_pids="" ;;
  esac
  local pg0 sink0 pg1 sink1
  pg0=$([ -n "$pg_pid" ] && cluster_ticks "$pg_pid" || echo 0)
  sink0=$(cpu_ticks $sink_pids)
  TIMEFORMAT='%U %S'
  start=$(date +%s.%N)
  local wrap=${WRAP_A:-}
  [ "$side" = B ] && wrap=${WRAP_B:-}
  wrap=${wrap//@RUN@/$mode-$sink-$side}
  # shellcheck disable=SC2086
  { time env ${TRACE_DIR:+QB_PHASE_TRACE=$TRACE_DIR/$mode-$sink-$side.csv} $wrap "$bin" --config "$WORK/$db.yml" run --until-idle --idle-timeout-ms 1800000 \
    2>"$WORK/relay.log"; } 2>"$WORK/relay.time"
  end=$(date +%s.%N)
  pg1=$([ -n "$pg_pid" ] && cluster_ticks "$pg_pid" || echo 0)
  sink1=$(cpu_ticks $sink_pids)
  local tck
  tck=$(getconf CLK_TCK)
  local db_json rss cpu
  db_json=$(psql -Atq "$PGBASE/$db" -c "SELECT json_build_object(
      'sent', count(*) FILTER (WHERE state = 'sent'),
      'not_sent', count(*) FILTER (WHERE state <> 'sent'),
      'rate', count(*) FILTER (WHERE state = 'sent')
          / GREATEST(EXTRACT(EPOCH FROM max(updated_at) - min(claimed_at)), 0.001),
      'p50_ms', 1000 * EXTRACT(EPOCH FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY updated_at - created_at) FILTER (WHERE state = 'sent')),
      'p99_ms', 1000 * EXTRACT(EPOCH FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY updated_at - created_at) FILTER (WHERE state = 'sent')))
    FROM outbox")
  rss=$(grep -o '"max_rss_kb":"[0-9]*"' "$WORK/relay.log" | tail -1 | grep -o '[0-9]*' || echo 0)
  cpu=$(awk '{print $1 + $2}' "$WORK/relay.time")
  python3 - "$mode" "$sink" "$side" "$bin" "$db_json" "$start" "$end" "$rss" "$cpu" \
    "$(echo "scale=2; ($pg1 - $pg0) / $tck" | bc)" "$(echo "scale=2; ($sink1 - $sink0) / $tck" | bc)" \
    >>"$RESULTS" <<'PY'
import json, sys
mode, sink, side, binary, db, start, end, rss, cpu, pg_cpu, sink_cpu = sys.argv[1:12]
db = json.loads(db)
wall = float(end) - float(start)
print(json.dumps({"fsync": mode, "sink": sink, "side": side, "binary": binary,
                  "rows_per_s": round(db["rate"], 1),
                  "rows_per_s_wall": round(db["sent"] / wall, 1) if wall > 0 else None,
                  "rows_sent": db["sent"], "rows_not_sent": db["not_sent"],
                  "insert_to_sent_p50_ms": round(db["p50_ms"] or 0, 1),
                  "insert_to_sent_p99_ms": round(db["p99_ms"] or 0, 1),
                  "peak_rss_mb": round(int(rss) / 1024, 1), "relay_cpu_s": float(cpu),
                  "pg_cpu_s": float(pg_cpu), "sink_server_cpu_s": float(sink_cpu),
                  "wall_s": round(wall, 2),
                  "loadavg": open("/proc/loadavg").read().split()[:3]}))
PY
  tail -1 "$RESULTS" >&2
}

for mode in $DURABILITY; do
  if [ "$mode" = on ]; then
    use_durability on
    sinks=$DURABLE_SINKS
  elif [ -n "${OFF_PG_PORT:-}" ]; then  # a fsync-off cluster of one's own (OFF_SVC_DIR, port)
    export QB_SVC_DIR=$OFF_SVC_DIR PG_PORT=$OFF_PG_PORT
    unset PG_DURABLE
    sinks=$SINKS
  else
    unset QB_SVC_DIR PG_PORT PG_DURABLE
    sinks=$SINKS
  fi
  PGURL=$(bash scripts/services.sh env | sed -n 's/^export QB_TEST_PG_URL=//p' | tr -d "'\"")
  PGBASE=${PGURL%/*}
  for sink in $sinks; do
    case $sink in
      http)
        DEST="{type: http, baseUrl: \"http://127.0.0.1:$PORT\", path: /events}"
        ;;
      nats)
        "$FIX" nats setup --url "$QB_TEST_NATS_URL" --stream "$STREAM" --subject "$SUBJECT"
        DEST="{type: nats, servers: \"$QB_TEST_NATS_URL\", subject: \"$SUBJECT\", jetStream: true}"
        ;;
      rabbitmq)
        "$FIX" rabbitmq setup --url "$QB_TEST_AMQP_URL" --exchange "$EXCHANGE" --queue "$QUEUE" \
          --queue-type "${RMQ_QUEUE_TYPE:-classic}"
        DEST="{type: rabbitmq, url: \"$QB_TEST_AMQP_URL\", exchange: \"$EXCHANGE\", exchangeType: topic}"
        ;;
      kafka)
        "$FIX" kafka serve --topic "$KTOPIC" --partitions 12 >"$WORK/kafka.out" &
        KAFKA_PID=$!
        for _ in $(seq 100); do [ -s "$WORK/kafka.out" ] && break; sleep 0.1; done
        DEST="{type: kafka, bootstrapServers: \"$(head -1 "$WORK/kafka.out")\", topic: \"$KTOPIC\"}"
        ;;
      *) echo "unknown sink $sink" >&2; exit 2 ;;
    esac
    prepare qb_defaults_floor "$DEST"
    FLOOR=$(env ${TRACE_DIR:+QB_PHASE_TRACE=$TRACE_DIR/$mode-$sink-floor.csv} "$FLOOR_BIN" --config "$WORK/qb_defaults_floor.yml")
    python3 -c 'import json,sys; f=json.loads(sys.argv[3]); print(json.dumps({"fsync": sys.argv[1], "sink": sys.argv[2], "side": "floor", "rows_per_s": round(f["rows_per_s"], 1), "loadavg": open("/proc/loadavg").read().split()[:3]}))' \
      "$mode" "$sink" "$FLOOR" >>"$RESULTS"
    tail -1 "$RESULTS" >&2
    for round in $(seq "$ROUNDS"); do  # alternated: A B, B A, A B, ...
      if [ $((round % 2)) = 1 ]; then
        relay_run "$mode" "$sink" A "$A" "$DEST"
        relay_run "$mode" "$sink" B "$B" "$DEST"
      else
        relay_run "$mode" "$sink" B "$B" "$DEST"
        relay_run "$mode" "$sink" A "$A" "$DEST"
      fi
    done
    case $sink in
      nats) "$FIX" nats delete --url "$QB_TEST_NATS_URL" --stream "$STREAM" ;;
      rabbitmq) "$FIX" rabbitmq delete --url "$QB_TEST_AMQP_URL" --exchange "$EXCHANGE" --queue "$QUEUE" ;;
      kafka) kill -TERM "$KAFKA_PID"; wait "$KAFKA_PID" || true; KAFKA_PID="" ;;
    esac
    for db in floor a b; do psql -q "$PGURL" -c "DROP DATABASE IF EXISTS qb_defaults_$db WITH (FORCE)"; done
  done
done

python3 - "$RESULTS" "$A" "$B" "$ROWS" "$KEYS" "$OUT" "$OUTBOX" "$ROUNDS" <<'PY'
import json, os, platform, statistics, subprocess, sys
results, a, b, rows, keys, out, outbox, rounds = sys.argv[1:9]
runs = [json.loads(l) for l in open(results) if l.strip()]
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
summary = {}
for r in runs:
    s = summary.setdefault(f"fsync_{r['fsync']}", {}).setdefault(r["sink"], {})
    s.setdefault(r["side"], []).append(r["rows_per_s"])
for mode in summary.values():
    for s in mode.values():
        for side in ("floor", "A", "B"):
            if side in s:
                if len(s[side]) > 1:
                    s[f"{side}_runs"] = s[side]
                s[side] = statistics.median(s[side])
        if "floor" in s:
            for side in ("A", "B"):
                if side in s:
                    s[f"{side}_vs_floor"] = round(s[side] / s["floor"], 3)
        if "A" in s and "B" in s:
            s["B_over_A"] = round(s["B"] / s["A"], 3)
res = {"benchmark": "bench/defaults_ab.sh: QueueBox's defaults (batchSize 100, concurrency 8), "
                    "backlog drain, floor then A/B pairs per sink (alternated), one run",
       "rounds": int(rounds),
       "outbox": outbox or "QueueBox's defaults (batchSize 100, concurrency 8)",
       "A": a, "B": b, "rows": int(rows), "keys": int(keys), "payload_bytes": 1024,
       "rabbitmq_queue_type": os.environ.get("RMQ_QUEUE_TYPE", "classic"),
       "summary": summary, "runs": runs,
       "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
                   "postgres": "15; fsync_off: the test cluster; fsync_on: fsync, "
                               "synchronous_commit and full_page_writes on"}}
os.makedirs(os.path.dirname(out), exist_ok=True)
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res["summary"], indent=1))
PY
