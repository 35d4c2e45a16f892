#!/usr/bin/env bash
# The relay's CPU per message against the least any relay of this design spends, in one run
# (issue 38 item 2). First the relay drains (bench/relay_cpu_ab.sh with the one binary on both
# sides: ROUNDS × 2 drains per configuration, tuned and at the defaults, into nginx answering
# 204). Then, REPEATS times per configuration, the relay's two halves without the relay, at once:
#   - bench/http_ceiling.c, the relay's HTTP requests to the same kind of nginx, one at a time
#     per kept connection, paced at the relay's own median rate and in its shape
#       defaults  8 connections (concurrency 8), bursts of 100 (batchSize 100)
#       tuned     256 connections (the http destination's maxInFlight), bursts of 500
#   - bench_floor, the relay's own claim and fenced acknowledgement statements with no
#     publishing, draining FLOOR_ROWS rows of ~1 KiB over 1,000 keys (the relay's backlog) with
#     the configuration's batch size on a private PostgreSQL (FSYNC)
# so that PostgreSQL and both clients load the two cores as a relay's drain does (a client alone
# on an idle machine pays more for waking idle cores). The floor a message is the HTTP client's
# CPU a message plus bench_floor's CPU a row; then the same with 16 requests pipelined per
# connection (what the relay does not do).
#
#   flock /tmp/queuebox-bench.lock env -u PG_PORT bash bench/http_ceiling.sh <queuebox>
#   ROWS=50000 ROUNDS=1 REPEATS=3 FLOOR_ROWS=120000 FSYNC=off N=40000 ...
#
# Writes $OUT (bench/results/http_ceiling.json): the relay's runs and medians, every pair of
# client runs, and per configuration the medians and the relay's CPU over the floor's.
set -euo pipefail
cd "$(dirname "$0")/.."
QB=$(realpath "$1")
ROWS=${ROWS:-50000}
ROUNDS=${ROUNDS:-1}
REPEATS=${REPEATS:-3}
FSYNC=${FSYNC:-off}
N=${N:-40000}
FLOOR_ROWS=${FLOOR_ROWS:-120000}  # more than the client sends: the load outlasts it
KEYS=${KEYS:-1000}
PAD=${PAD:-960}
PORT=${PORT:-18481}
PG_PORT=${FLOOR_PG_PORT:-18493}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
BUILD_DIR=${BUILD_DIR:-build}
FLOOR_BIN=$BUILD_DIR/bench/bench_floor
OUT=${OUT:-bench/results/http_ceiling.json}
export PGOPTIONS="-c client_min_messages=warning"
source bench/private_pg.sh  # WORK, BASE, start_pg; cleanup on exit
source bench/nginx_sink.sh
trap 'nginx_sink_stop "$WORK/ngx"; private_pg_cleanup' EXIT

# The relay first, alone (its own private PostgreSQL and nginx, stopped when it ends).
ROWS=$ROWS ROUNDS=$ROUNDS FSYNC=$FSYNC OUT="$WORK/relay.json" bash bench/relay_cpu_ab.sh "$QB" "$QB"

CLIENT=$BUILD_DIR/bench/http_ceiling  # built with the benches, or compiled here
if [ ! -x "$CLIENT" ]; then
  CLIENT="$WORK/http_ceiling"
  gcc -O2 -Wall -o "$CLIENT" bench/http_ceiling.c
fi
start_pg "$FSYNC"
nginx_sink_start "$WORK/ngx" "$PORT"

rate_of() {  # config: the median of the relay's rates
  python3 -c "import json,statistics,sys
d=json.load(open(sys.argv[1]))
print(round(statistics.median([r['rows_per_s'] for r in d['runs'] if r['config']==sys.argv[2]])))" \
    "$WORK/relay.json" "$1"
}

# A fresh database with the relay's backlog, for bench_floor.
backlog() {  # config
  local batch=""
  [ "$1" = tuned ] && batch="outbox: {batchSize: 500}"
  psql -q "$BASE/postgres" -c "DROP DATABASE IF EXISTS qb_hc WITH (FORCE)" -c "CREATE DATABASE qb_hc"
  printf 'database: {type: postgresql, url: "%s"}\n%s\n' "$BASE/qb_hc" "$batch" >"$WORK/floor.yml"
  "$QB" --config "$WORK/floor.yml" migrate 2>/dev/null
  psql -q "$BASE/qb_hc" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $KEYS), jsonb_build_object('i', i, 'pad', repeat('x', $PAD))
    FROM generate_series(1, $FLOOR_ROWS) AS i" -c "ANALYZE outbox" -c "CHECKPOINT"
  sleep 1
}

: >"$WORK/pairs.jsonl"
for config in tuned defaults; do
  if [ "$config" = tuned ]; then shape="-c 256 --burst 500"; else shape="-c 8 --burst 100"; fi
  rate=$(rate_of "$config")
  for repeat in $(seq "$REPEATS"); do
    for depth in 1 16; do
      backlog "$config"
      TIMEFORMAT='%U %S'
      { time "$FLOOR_BIN" --config "$WORK/floor.yml" >"$WORK/floor.out"; } 2>"$WORK/floor.time" &
      floor_pid=$!
      # shellcheck disable=SC2086 # the shape is a word list
      client=$("$CLIENT" --port "$PORT" -n "$N" $shape -d "$depth" --peek --rate "$rate")
      wait "$floor_pid"
      python3 - "$config" "$repeat" "$client" "$(cat "$WORK/floor.out")" \
        "$(cat "$WORK/floor.time")" >>"$WORK/pairs.jsonl" <<'PY'
import json, sys
config, repeat, client, floor, cpu = sys.argv[1:6]
client, floor = json.loads(client), json.loads(floor)
user, system = (float(x) for x in cpu.split())
rows = max(floor["rows"], 1)
print(json.dumps({"config": config, "repeat": int(repeat), "client": client,
                  "floor": {**floor, "user_us": round(1e6 * user / rows, 2),
                            "system_us": round(1e6 * system / rows, 2),
                            "cpu_us": round(1e6 * (user + system) / rows, 2)},
                  "loadavg": open("/proc/loadavg").read().split()[:3]}))
PY
      tail -1 "$WORK/pairs.jsonl" >&2
    done
  done
done

python3 - "$WORK/relay.json" "$WORK/pairs.jsonl" "$OUT" <<'PY'
import json, statistics, sys
relay = json.load(open(sys.argv[1]))
pairs = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
med = statistics.median
summary = {}
for config in ("tuned", "defaults"):
    runs = [r for r in relay["runs"] if r["config"] == config]
    mine = {k: round(med(r[k] for r in runs), 1) for k in
            ("relay_us_per_msg", "relay_user_us", "relay_sys_us", "rows_per_s", "nginx_us_per_msg")}
    one = [p for p in pairs if p["config"] == config and p["client"]["depth"] == 1]
    piped = [p for p in pairs if p["config"] == config and p["client"]["depth"] > 1]
    floor_one = [p["client"]["cpu_us"] + p["floor"]["cpu_us"] for p in one]
    floor_piped = [p["client"]["cpu_us"] + p["floor"]["cpu_us"] for p in piped]
    summary[config] = {
        "relay": mine,
        "client_cpu_us": [p["client"]["cpu_us"] for p in one],
        "client_system_us": [p["client"]["system_us"] for p in one],
        "bench_floor_cpu_us_per_row": [p["floor"]["cpu_us"] for p in one + piped],
        "floor_one_at_a_time_us": [round(x, 2) for x in floor_one],
        "floor_pipelined_16_us": [round(x, 2) for x in floor_piped],
        "floor_one_at_a_time_median_us": round(med(floor_one), 2),
        "floor_pipelined_16_median_us": round(med(floor_piped), 2),
        "relay_over_floor": round(mine["relay_us_per_msg"] / med(floor_one), 2)}
    print(config, json.dumps(summary[config]), file=sys.stderr)
json.dump({"benchmark": "http_ceiling", "binary": relay["A"], "fsync": relay["fsync"],
           "rows": relay["rows"], "summary": summary, "relay_runs": relay["runs"],
           "pairs": pairs}, open(sys.argv[3], "w"), indent=1)
PY
echo "wrote $OUT" >&2
