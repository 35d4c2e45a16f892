#!/usr/bin/env bash
# Soak (issue 38 item 5): steady producers at LOAD (70 %) of the measured drain rate for MINUTES
# with retention AGE on, PostgreSQL -> HTTP (nginx, 204) at QueueBox's defaults, sampled every
# SAMPLE_S seconds; fsync off and on.
#
#   flock /tmp/queuebox-bench.lock env -u PG_PORT bash bench/soak_bench.sh
#   MINUTES=3 DURABILITY=off bash bench/soak_bench.sh        # a short trial
#   WARMUP=10 ... bash bench/soak_bench.sh   # 10 minutes of the same load before the 20 judged
#   RATE=2598 ... bash bench/soak_bench.sh    # the producers' rate given (an earlier run's), no drains
#   OUTBOX="{notify: {enabled: true}}" ...     # outbox settings (default: none, QueueBox's defaults)
#
# Per durability (off: the test cluster, fsync off; on: a second cluster with fsync,
# synchronous_commit and full_page_writes on, PG_DURABLE=1 on port 54339, as defaults_ab.sh):
# 1. drain rate: DRAIN_ROWS rows inserted before the relay starts, `run --until-idle`; rows/s on
#    the database clock (sent rows / (last updated_at - first claimed_at));
# 2. drain rate under inserts: the relay's rows/s while the producers insert at that idle rate
#    (SAT_S s; bench/README.md "Soak" says why the load is a share of this one);
# 3. soak: a fresh database, the relay with retention.outbox AGE (maxAge MAX_AGE, cleanupInterval
#    CLEANUP), PRODUCERS latency_producer processes inserting one row per transaction at LOAD x
#    the drain rate under inserts, for MINUTES; every SAMPLE_S s one sample: rows sent in the window
#    (the relay's queuebox_outbox_messages_total{status="sent"}), insert-to-sent p50/p99 of the
#    rows sent in the window (updated_at - created_at, database clock), pending rows, the outbox
#    table's heap and index bytes, live and dead tuples, HOT updates, autovacuum runs, the
#    relay's RSS and the database's CPU.
# WARMUP (minutes, default 0): the producers and the relay run that long before the MINUTES that
# are judged; those samples are recorded and plotted, marked "warmup", and left out of the verdict.
# Acceptance (in the JSON, bench/soak_report.py): the last 5 samples' mean rows sent within 10 %
# of the first 5; the median of their minutes' p99 no more than 10 % (or 5 ms) above the first
# 5's; the table bounded: heap + indexes at most 10 % above the largest size of the middle
# third; and keeping up: at most five seconds of production pending at each of the last 5.
# Writes $OUT (bench/results/soak.json) and $PLOT (bench/results/soak.png, drawn by gnuplot-nox,
# installed from Debian if missing: one small package, where matplotlib is not on the machine).
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${MINUTES:-20}
WARMUP=${WARMUP:-0}
SAMPLE_S=${SAMPLE_S:-60}
LOAD=${LOAD:-0.7}
PRODUCERS=${PRODUCERS:-4}
KEYS=${KEYS:-1000}
DRAIN_ROWS=${DRAIN_ROWS:-200000}
MAX_AGE=${MAX_AGE:-2m}
CLEANUP=${CLEANUP:-30s}
DURABILITY=${DURABILITY:-"off on"}
PORT=${PORT:-18291}  # nginx; PORT + 1: the relay's admin port
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/soak.json}
PLOT=${PLOT:-bench/results/soak.png}
QB="$BUILD_DIR/apps/queuebox/queuebox"
PRODUCER="$BUILD_DIR/bench/latency_producer"
WORK=$(mktemp -d /tmp/qb-soak.XXXXXX)
source bench/nginx_sink.sh
source bench/proc_cpu.sh
source bench/pg_durability.sh
RELAY_PID=""
PRODUCER_PIDS=()
SAT_S=${SAT_S:-90}
cleanup() {
  [ -n "$RELAY_PID" ] && kill -TERM "$RELAY_PID" 2>/dev/null
  pkill -f "$PRODUCER" 2>/dev/null || true
  nginx_sink_stop "$WORK/ngx"
  durability_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
for f in "$QB" "$PRODUCER"; do
  [ -x "$f" ] || { echo "soak_bench.sh: build $f first (cmake --build $BUILD_DIR)" >&2; exit 2; }
done
command -v gnuplot >/dev/null ||
  apt-get install -y -q --no-install-recommends --no-upgrade gnuplot-nox >/dev/null
nginx_sink_start "$WORK/ngx" "$PORT"
SAMPLES="$WORK/samples.jsonl" DRAINS="$WORK/drains.jsonl"
: >"$SAMPLES"
: >"$DRAINS"

config() {  # db retention(true|false) -> $WORK/<db>.yml
  cat >"$WORK/$1.yml" <<YAML
database: {type: postgresql, url: "$PGBASE/$1"}
server: {address: 127.0.0.1, httpPort: $((PORT + 1))}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$PORT", path: /events}}
retention: {enabled: $2, outbox: {policy: AGE, maxAge: $MAX_AGE, cleanupInterval: $CLEANUP}}
logging: {format: json, level: info}
YAML
  if [ -n "${OUTBOX:-}" ]; then echo "outbox: $OUTBOX" >>"$WORK/$1.yml"; fi
}

fresh_db() {  # db retention
  psql -q "$PGURL" -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
  psql -q "$PGBASE/$1" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"  # the samples' statements
  config "$1" "$2"
  "$QB" --config "$WORK/$1.yml" migrate >/dev/null 2>&1
}

# Rows/s of a backlog drained at the defaults, on the database clock; payloads as the producer's.
drain_rate() {  # mode -> rows/s on stdout
  local db=qb_soak_drain
  fresh_db "$db" false
  psql -q "$PGBASE/$db" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.latency', 'key-' || (i % $KEYS),
           jsonb_build_object('ts', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, 'i', i)
    FROM generate_series(1, $DRAIN_ROWS) AS i" -c "ANALYZE outbox" -c "CHECKPOINT"
  "$QB" --config "$WORK/$db.yml" run --until-idle 2>"$WORK/drain.log"
  local rate
  rate=$(psql -Atq "$PGBASE/$db" -c "SELECT round(count(*) / GREATEST(EXTRACT(EPOCH FROM
    max(updated_at) - min(claimed_at)), 0.001)) FROM outbox WHERE state = 'sent'")
  printf '{"fsync":"%s","rows":%s,"drain_rows_per_s":%s}\n' "$1" "$DRAIN_ROWS" "$rate" >>"$DRAINS"
  psql -q "$PGURL" -c "DROP DATABASE $db WITH (FORCE)"
  echo "$rate"
}

sent_counter() {  # the relay's sent counter, 0 before its first scrape
  curl -s "http://127.0.0.1:$((PORT + 1))/metrics" |
    awk '/^queuebox_outbox_messages_total\{.*status="sent"/ {print $2; f=1} END {if (!f) print 0}'
}

sample() {  # mode minute db sent_before -> one JSON line (CPU: since the previous sample)
  local db_json
  db_json=$(psql -Atq "$PGBASE/$3" -c "WITH w AS (SELECT updated_at - created_at AS lat FROM outbox
      WHERE state = 'sent' AND updated_at > clock_timestamp() - make_interval(secs => $SAMPLE_S))
    SELECT json_build_object(
      'p50_ms', (SELECT 1000 * EXTRACT(EPOCH FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY lat)) FROM w),
      'p99_ms', (SELECT 1000 * EXTRACT(EPOCH FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY lat)) FROM w),
      'pending', (SELECT count(*) FROM outbox WHERE state = 'pending'),
      'heap_bytes', pg_relation_size('outbox'), 'index_bytes', pg_indexes_size('outbox'),
      'live_tuples', n_live_tup, 'dead_tuples', n_dead_tup, 'hot_updates', n_tup_hot_upd,
      'updates', n_tup_upd, 'deletes', n_tup_del, 'autovacuums', autovacuum_count,
      'index_sizes', (SELECT json_object_agg(indexrelname, pg_relation_size(indexrelid))
                      FROM pg_stat_user_indexes WHERE relname = 'outbox'),
      'attempts_bytes', (SELECT coalesce(sum(pg_total_relation_size(relid)), 0)
                         FROM pg_stat_user_tables WHERE relname = 'outbox_attempts'),
      'wal_bytes', (SELECT wal_bytes FROM pg_stat_wal),
      'wal_fpi', (SELECT wal_fpi FROM pg_stat_wal),
      'checkpoints', (SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter),
      'statements', (SELECT json_agg(t) FROM (
          SELECT left(regexp_replace(query, '\s+', ' ', 'g'), 60) AS query, calls,
                 round(mean_exec_time::numeric, 2) AS mean_ms, round(max_exec_time::numeric, 1) AS max_ms
          FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database
                                                WHERE datname = current_database())
          ORDER BY total_exec_time DESC LIMIT 5) t))
    FROM pg_stat_user_tables WHERE relname = 'outbox'")
  # Per sample: the statements' figures above cover the window since the previous sample.
  psql -Atq "$PGBASE/$3" -c "SELECT pg_stat_statements_reset()" >/dev/null 2>&1 || true
  local sent rss pg relay
  sent=$(sent_counter)
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$RELAY_PID/status" 2>/dev/null || echo 0)
  pg=$(cluster_ticks "$PG_PID")
  relay=$(cpu_ticks "$RELAY_PID")
  python3 - "$1" "$2" "${db_json:-null}" "$sent" "$4" "$rss" "$((pg - PG_TICKS))" \
    "$((relay - RELAY_TICKS))" "$(getconf CLK_TCK)" "$SAMPLE_S" <<'PY'
import json, sys
mode, minute, db, sent, before, rss, pg, relay, tck, window = sys.argv[1:11]
db = json.loads(db) or {}
sent_n = int(float(sent) - float(before))
row = {"fsync": mode, "sample": int(minute), "elapsed_min": round(int(minute) * int(window) / 60, 2),
       "sent_in_window": sent_n, "sent_per_s": round(sent_n / int(window), 1),
       "relay_rss_mb": round(int(rss or 0) / 1024, 1),
       "db_cpu_cores": round(int(pg) / int(tck) / int(window), 2),
       "relay_cpu_cores": round(int(relay) / int(tck) / int(window), 2)}
for k in ("p50_ms", "p99_ms"):
    row[k] = round(db[k], 1) if db.get(k) is not None else None
for k in ("pending", "heap_bytes", "index_bytes", "live_tuples", "dead_tuples", "hot_updates",
          "updates", "deletes", "autovacuums", "index_sizes", "attempts_bytes", "wal_bytes",
          "wal_fpi", "checkpoints", "statements"):
    row[k] = db.get(k)
print(json.dumps(row))
PY
  PG_TICKS=$pg RELAY_TICKS=$relay SENT_LAST=$sent
}

start_relay() {  # db -> RELAY_PID, once it is delivering
  : >"$WORK/relay.log"
  "$QB" --config "$WORK/$1.yml" run 2>"$WORK/relay.log" &
  RELAY_PID=$!
  local end=$((SECONDS + 30))
  until grep -q "is delivering" "$WORK/relay.log"; do
    ((SECONDS < end)) || { cat "$WORK/relay.log" >&2; exit 1; }
    sleep 0.1
  done
}

stop_relay() {
  kill -TERM "$RELAY_PID"
  wait "$RELAY_PID" || true
  RELAY_PID=""
}

start_producers() {  # db rate seconds -> PRODUCER_PIDS
  local each=$((($2 + PRODUCERS - 1) / PRODUCERS)) p
  PRODUCER_PIDS=()
  for p in $(seq "$PRODUCERS"); do
    "$PRODUCER" --url "$PGBASE/$1" --rate "$each" --seconds "$3" --keys "$KEYS" \
      >"$WORK/producer$p.json" &
    PRODUCER_PIDS+=($!)
  done
}

# The relay's rows/s while the producers insert at the idle drain rate (SAT_S s, the first third
# skipped): what it drains when the producers' commits share the database with it.
loaded_drain_rate() {  # mode idle_rate -> rows/s on stdout
  local db=qb_soak_loaded
  fresh_db "$db" false
  start_relay "$db"
  start_producers "$db" "$2" "$SAT_S"
  sleep $((SAT_S / 3))
  local t0=$SECONDS s0 s1
  s0=$(sent_counter)
  sleep $((SAT_S - SAT_S / 3 - 1))
  s1=$(sent_counter)
  local rate=$(((${s1%.*} - ${s0%.*}) / (SECONDS - t0)))
  local p
  for p in "${PRODUCER_PIDS[@]}"; do wait "$p" || true; done
  stop_relay
  psql -q "$PGURL" -c "DROP DATABASE $db WITH (FORCE)"
  printf '{"fsync":"%s","producers_rows_per_s":%s,"loaded_drain_rows_per_s":%s}\n' "$1" "$2" \
    "$rate" >>"$DRAINS"
  echo "$rate"
}

soak() {  # mode rate
  local mode=$1 rate=$2 db=qb_soak
  fresh_db "$db" true
  start_relay "$db"
  start_producers "$db" "$rate" $(((WARMUP + MINUTES) * 60))
  echo "== soak fsync $mode: $PRODUCERS producers at $rate rows/s in all for $WARMUP + $MINUTES min" >&2
  local minute before next=$SECONDS
  before=$(sent_counter)
  PG_PID=$(head -1 "${QB_SVC_DIR:-/tmp/queuebox-svc}/pg/data/postmaster.pid")
  PG_TICKS=$(cluster_ticks "$PG_PID") RELAY_TICKS=$(cpu_ticks "$RELAY_PID")
  for minute in $(seq $(((WARMUP + MINUTES) * 60 / SAMPLE_S))); do
    next=$((next + SAMPLE_S))
    sleep $((next - SECONDS))
    sample "$mode" "$minute" "$db" "$before" >"$WORK/line"
    echo "$(cat "$WORK/line")" >>"$SAMPLES"
    echo "   $(cat "$WORK/line")" >&2
    before=$SENT_LAST
  done
  local p
  for p in "${PRODUCER_PIDS[@]}"; do wait "$p" || echo "soak_bench.sh: a producer fell short" >&2; done
  cat "$WORK"/producer*.json >&2
  stop_relay
  cp "$WORK/relay.log" "${RELAY_LOG_DIR:-/tmp}/soak-relay-$mode.log"
  psql -q "$PGURL" -c "DROP DATABASE $db WITH (FORCE)"
}

eval "$(bash scripts/services.sh env)"
for mode in $DURABILITY; do
  use_durability "$mode"
  if [ -n "${RATE:-}" ]; then  # an A/B against an earlier run: its load, not this day's drains
    rate=$RATE
    python3 -c "print('{\"fsync\":\"$mode\",\"loaded_drain_rows_per_s\":' + str($RATE / $LOAD) + '}')" \
      >>"$DRAINS"
    echo "== fsync $mode: producers at the given $rate rows/s" >&2
  else
    drain=$(drain_rate "$mode")
    loaded=$(loaded_drain_rate "$mode" "$drain")
    rate=$(python3 -c "print(int($loaded * $LOAD))")
    echo "== fsync $mode: drain $drain rows/s idle, $loaded rows/s under inserts at that rate;" \
      "producers at $rate rows/s" >&2
  fi
  soak "$mode" "$rate"
done

python3 bench/soak_report.py "$DRAINS" "$SAMPLES" "$LOAD" "$MINUTES" "$MAX_AGE" "$CLEANUP" \
  "$PRODUCERS" "$OUT" "$PLOT" "$WARMUP"
cat "$OUT"
