#!/usr/bin/env bash
# The relay's CPU per message, two queuebox binaries in one run: PostgreSQL -> local nginx
# (204, keep-alive), a backlog drain (ROWS rows of ~1 KiB over KEYS keys, inserted before the
# relay starts) on a private PostgreSQL 15 cluster, a fresh database per run. Per run: the
# relay's utime+stime (its rusage, `time`) / rows sent, the cluster's and nginx's CPU per row
# (/proc ticks, bench/proc_cpu.sh), and the rate on the database clock (sent rows / (last
# updated_at - first claimed_at)). Configurations: tuned (batchSize 500, concurrency 1000) and
# QueueBox's defaults (no outbox block: batchSize 100, concurrency 8). Rounds alternate the
# order (A B, B A, ...).
#
#   flock /tmp/queuebox-bench.lock bash bench/relay_cpu_ab.sh <queuebox A> <queuebox B>
#   ROWS=100000 ROUNDS=2 CONFIGS="tuned defaults" FSYNC=off ...
#   PERF_SIDE=B PERF_OUT=/tmp/relay.perf ...  # perf record -g of that side's relay (each run
#                                              # overwrites it: use ROUNDS=1 CONFIGS=tuned)
#   STRACE_SIDE=B STRACE_OUT=/tmp/relay.strace ...  # strace -c -f of that side's relay instead
#                                              # (syscalls per message; slows the relay down)
#   SINK_OPTS_B="maxInFlight: 64" ...          # options added to side A's / B's destination
#                                              # (SINK_OPTS_A, SINK_OPTS_B): one binary, two settings
#
# Writes $OUT (bench/results/relay_cpu_ab.json): every run and per configuration the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
A=$(realpath "$1")
B=$(realpath "$2")
ROWS=${ROWS:-100000}
KEYS=${KEYS:-1000}
PAD=${PAD:-960}  # payload ~1 KiB with the other fields
ROUNDS=${ROUNDS:-2}
CONFIGS=${CONFIGS:-"tuned defaults"}
FSYNC=${FSYNC:-off}
PORT=${PORT:-18381}  # nginx; PORT + 1: the relay's admin port
PG_PORT=${PG_PORT:-18393}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PERF_SIDE=${PERF_SIDE:-}
PERF_OUT=${PERF_OUT:-/tmp/relay_cpu_ab.perf}
STRACE_SIDE=${STRACE_SIDE:-}
STRACE_OUT=${STRACE_OUT:-/tmp/relay_cpu_ab.strace}
SINK_OPTS_A=${SINK_OPTS_A:-}
SINK_OPTS_B=${SINK_OPTS_B:-}
OUT=${OUT:-bench/results/relay_cpu_ab.json}
source bench/proc_cpu.sh
source bench/private_pg.sh  # WORK, BASE, start_pg, stop_pg; cleanup on exit
source bench/nginx_sink.sh
trap 'nginx_sink_stop "$WORK/ngx"; private_pg_cleanup' EXIT
start_pg "$FSYNC"
nginx_sink_start "$WORK/ngx" "$PORT"
NGINX_PIDS="$(cat "$WORK/ngx/nginx.pid") $(pgrep -P "$(cat "$WORK/ngx/nginx.pid")" | tr '\n' ' ')"
PG_PID=$(head -1 "$PGDATA/postmaster.pid")
HZ=$(getconf CLK_TCK)
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"

outbox_block() {
  case $1 in
    tuned) echo "outbox: {batchSize: 500, concurrency: 1000}" ;;
    defaults) echo "" ;;
    *) echo "unknown configuration $1" >&2; exit 2 ;;
  esac
}

run_one() {  # config side binary
  local config=$1 side=$2 bin=$3 db=qb_cpu sink_opts
  if [ "$side" = A ]; then sink_opts=$SINK_OPTS_A; else sink_opts=$SINK_OPTS_B; fi
  psql -q "$BASE/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  cat >"$WORK/relay.yml" <<YAML
database: {type: postgresql, url: "$BASE/$db"}
server: {address: 127.0.0.1, httpPort: $((PORT + 1))}
$(outbox_block "$config")
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$PORT", path: /events${sink_opts:+, $sink_opts}}}
logging: {format: json, level: info}
YAML
  "$bin" --config "$WORK/relay.yml" migrate 2>/dev/null
  psql -q "$BASE/$db" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $KEYS), jsonb_build_object('i', i, 'pad', repeat('x', $PAD))
    FROM generate_series(1, $ROWS) AS i" -c "ANALYZE outbox" -c "CHECKPOINT"
  local pg0 ng0 pg1 ng1 start end pid perf_pid=""
  sleep 1  # psql's backends exit and are reaped (their CPU is the postmaster's then)
  pg0=$(cluster_ticks "$PG_PID")
  ng0=$(cpu_ticks $NGINX_PIDS)
  start=$(date +%s.%N)
  TIMEFORMAT='%U %S'
  {
    time {
      "$bin" --config "$WORK/relay.yml" run --until-idle --idle-timeout-ms 1800000 \
        2>"$WORK/relay.log" &
      pid=$!
      echo "$pid" >"$WORK/relay.pid"
      if [ "$side" = "$PERF_SIDE" ]; then
        sleep 0.5  # -p follows the threads that exist when it attaches: after the start-up
        perf record -q ${PERF_ARGS:--g} -p "$pid" -o "$PERF_OUT" 2>/dev/null &
        perf_pid=$!
      elif [ "$side" = "$STRACE_SIDE" ]; then
        sleep 0.5
        strace -c -f -p "$pid" -o "$STRACE_OUT" 2>/dev/null &
        perf_pid=$!
      fi
      wait "$pid"
    }
  } 2>"$WORK/relay.time"
  end=$(date +%s.%N)
  rm -f "$WORK/relay.pid"
  [ -n "$perf_pid" ] && wait "$perf_pid" || true
  sleep 1  # the relay's backends exit and are reaped
  pg1=$(cluster_ticks "$PG_PID")
  ng1=$(cpu_ticks $NGINX_PIDS)
  local db_json
  db_json=$(psql -Atq "$BASE/$db" -c "SELECT json_build_object(
      'sent', count(*) FILTER (WHERE state = 'sent'),
      'rate', count(*) FILTER (WHERE state = 'sent')
          / GREATEST(EXTRACT(EPOCH FROM max(updated_at) - min(claimed_at)), 0.001))
    FROM outbox")
  python3 - "$config" "$side" "$bin" "$db_json" "$start" "$end" "$(cat "$WORK/relay.time")" \
    "$((pg1 - pg0))" "$((ng1 - ng0))" "$HZ" "$FSYNC" >>"$RESULTS" <<'PY'
import json, sys
config, side, binary, db, start, end, cpu, pg, ng, hz, fsync = sys.argv[1:12]
db = json.loads(db)
user, system = (float(x) for x in cpu.split())
sent = max(db["sent"], 1)
print(json.dumps({"config": config, "side": side, "binary": binary, "fsync": fsync,
                  "rows_sent": db["sent"], "rows_per_s": round(db["rate"], 1),
                  "wall_s": round(float(end) - float(start), 2),
                  "relay_us_per_msg": round(1e6 * (user + system) / sent, 1),
                  "relay_user_us": round(1e6 * user / sent, 1),
                  "relay_sys_us": round(1e6 * system / sent, 1),
                  "pg_us_per_msg": round(1e6 * int(pg) / int(hz) / sent, 1),
                  "nginx_us_per_msg": round(1e6 * int(ng) / int(hz) / sent, 1),
                  "loadavg": open("/proc/loadavg").read().split()[:3]}))
PY
  tail -1 "$RESULTS" >&2
}

for round in $(seq 1 "$ROUNDS"); do
  for config in $CONFIGS; do
    if [ $((round % 2)) = 1 ]; then order="A B"; else order="B A"; fi
    for side in $order; do
      if [ "$side" = A ]; then run_one "$config" A "$A"; else run_one "$config" B "$B"; fi
    done
  done
done

python3 - "$RESULTS" "$A" "$B" "$ROWS" "$KEYS" "$FSYNC" "$OUT" <<'PY'
import json, os, statistics, sys
results, a, b, rows, keys, fsync, out = sys.argv[1:8]
runs = [json.loads(l) for l in open(results) if l.strip()]
summary = {}
for config in dict.fromkeys(r["config"] for r in runs):
    s = summary[config] = {}
    for side in ("A", "B"):
        mine = [r for r in runs if r["config"] == config and r["side"] == side]
        if not mine:
            continue
        s[side] = {k: round(statistics.median(r[k] for r in mine), 1)
                   for k in ("relay_us_per_msg", "relay_user_us", "relay_sys_us", "rows_per_s",
                             "pg_us_per_msg", "nginx_us_per_msg")}
    if "A" in s and "B" in s:
        s["B_over_A_cpu"] = round(s["B"]["relay_us_per_msg"] / s["A"]["relay_us_per_msg"], 3)
        s["B_over_A_rate"] = round(s["B"]["rows_per_s"] / s["A"]["rows_per_s"], 3)
res = {"benchmark": "bench/relay_cpu_ab.sh: relay CPU per message, PostgreSQL -> nginx 204, "
                    "backlog drain, A/B alternating in one run (medians)",
       "A": a, "B": b, "rows": int(rows), "keys": int(keys), "fsync": fsync,
       "sink_opts_A": os.environ.get("SINK_OPTS_A", ""),
       "sink_opts_B": os.environ.get("SINK_OPTS_B", ""),
       "summary": summary, "runs": runs}
os.makedirs(os.path.dirname(out), exist_ok=True)
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
