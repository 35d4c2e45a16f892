#!/usr/bin/env bash
# What RabbitMQ allows on this machine without the relay and without PostgreSQL, against the
# database's floor, in one run. For each PostgreSQL durability (off: the test cluster, fsync off;
# on: the fsync-on cluster of bench/pg_durability.sh), the floor as bench/defaults_ab.sh measures
# it (bench_floor: the relay's claim + fenced ack statements back to back, no publishing, batch
# 100, on a backlog of ROWS rows of ~1 KiB over KEYS keys), then bench/rabbitmq_ceiling.c (one
# bare publisher, confirms, persistent ~1 KiB messages into a fresh durable queue, at most W
# unconfirmed) for each queue type and W, then the floor again. RabbitMQ's durability does not
# depend on PostgreSQL's: the publisher runs are the same both times (two samples); the two
# durabilities give two floors. Ratios: ceiling msg/s over the median floor of that durability.
#
#   flock /tmp/queuebox-bench.lock env -u PG_PORT bash bench/rabbitmq_ceiling.sh
#   N=40000 WINDOWS="8 100 1000" TYPES="classic cqv2 quorum" DURABILITY="off on" ROWS=20000 ...
#   BUILD_DIR=/work/main/build ...   # bench_floor and queuebox (it migrates the floor's database)
#                                    # from there; rabbitmq_ceiling from there or, when it is not
#                                    # built, compiled here with gcc
#
# Waits (up to WAIT_S) for the 1-minute load to drop below LOAD_MAX first. RabbitMQ's CPU is
# beam.smp's utime + stime; IDLE_S seconds of it at rest are recorded first (its idle rate).
# Writes $OUT (bench/results/rabbitmq_bare_ceiling.json).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-40000}
WINDOWS=${WINDOWS:-"8 100 1000"}
TYPES=${TYPES:-"classic cqv2 quorum"}
DURABILITY=${DURABILITY:-"off on"}
SIZE=${SIZE:-1024}
ROWS=${ROWS:-20000}
KEYS=${KEYS:-1000}
PAD=${PAD:-960}  # payload ~1 KiB with the other fields, as in defaults_ab.sh
IDLE_S=${IDLE_S:-5}
LOAD_MAX=${LOAD_MAX:-2}
WAIT_S=${WAIT_S:-900}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/rabbitmq_bare_ceiling.json}
FLOOR_BIN="$BUILD_DIR/bench/bench_floor"
QB="${QB_BIN:-$BUILD_DIR/apps/queuebox/queuebox}"
CEILING_BIN=${CEILING_BIN:-$BUILD_DIR/bench/rabbitmq_ceiling}
WORK=$(mktemp -d /tmp/qb-rmq-ceiling.XXXXXX)
export PGOPTIONS="-c client_min_messages=warning"
source bench/proc_cpu.sh
source bench/pg_durability.sh
cleanup() {
  if [ -n "${PGURL:-}" ]; then
    psql -q "$PGURL" -c "DROP DATABASE IF EXISTS qb_ceiling_floor WITH (FORCE)" 2>/dev/null || true
  fi
  durability_cleanup
  rm -rf "$WORK"
}
trap cleanup EXIT
if [ ! -x "$CEILING_BIN" ]; then
  gcc -O2 -Wall -Wextra -Wpedantic -Wshadow -Werror bench/rabbitmq_ceiling.c -lrabbitmq \
    -o "$WORK/rabbitmq_ceiling"
  CEILING_BIN="$WORK/rabbitmq_ceiling"
fi
eval "$(bash scripts/services.sh env)"  # the broker's URL and pid file (the test services)
BEAM_PID=$(cat "$QB_SVC_DIR/rmq/rabbit.pid" 2>/dev/null || pgrep -f -o beam.smp)
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"

waited=0
until python3 -c "import sys; sys.exit(0 if float(open('/proc/loadavg').read().split()[0]) < $LOAD_MAX else 1)"; do
  if [ "$waited" -ge "$WAIT_S" ]; then
    echo "load average stayed at or above $LOAD_MAX for $WAIT_S s; measuring anyway" >&2
    break
  fi
  sleep 15
  waited=$((waited + 15))
done

record() {  # fsync kind json-object -> a line of $RESULTS with the load
  python3 -c 'import json,sys; r={"fsync": sys.argv[1], "kind": sys.argv[2]}; r.update(json.loads(sys.argv[3])); r["loadavg"]=open("/proc/loadavg").read().split()[:3]; print(json.dumps(r))' \
    "$1" "$2" "$3" >>"$RESULTS"
  tail -1 "$RESULTS" >&2
}

floor() {  # fsync -> a floor line, on a fresh database with the backlog of defaults_ab.sh
  local db=qb_ceiling_floor
  psql -q "$PGURL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  cat >"$WORK/$db.yml" <<YAML
database: {type: postgresql, url: "$PGBASE/$db"}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: rabbitmq, url: "$QB_TEST_AMQP_URL", exchange: "qb.ceiling"}}
logging: {format: json, level: info}
YAML
  "$QB" --config "$WORK/$db.yml" migrate 2>/dev/null
  psql -q "$PGBASE/$db" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $KEYS),
           jsonb_build_object('i', i, 'pad', repeat('x', $PAD))
    FROM generate_series(1, $ROWS) AS i" -c "ANALYZE outbox" -c "CHECKPOINT"
  record "$1" floor "$("$FLOOR_BIN" --config "$WORK/$db.yml")"
  psql -q "$PGURL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
}

t0=$(cpu_ticks "$BEAM_PID")
sleep "$IDLE_S"
t1=$(cpu_ticks "$BEAM_PID")
record idle broker_idle "{\"seconds\": $IDLE_S, \"broker_cpu_s\": $(awk -v d=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", d / hz }')}"

for mode in $DURABILITY; do
  use_durability "$mode"
  floor "$mode"
  for type in $TYPES; do
    for w in $WINDOWS; do
      out=$("$CEILING_BIN" --url "$QB_TEST_AMQP_URL" --type "$type" -n "$N" -w "$w" \
        --size "$SIZE" --beam-pid "$BEAM_PID") || true
      [ -n "$out" ] || out="{\"error\": \"no output\", \"queue_type\": \"$type\", \"window\": $w}"
      record "$mode" ceiling "$out"
    done
  done
  floor "$mode"
done

python3 - "$RESULTS" "$OUT" "$N" "$SIZE" "$ROWS" "$KEYS" <<'PY'
import json, os, platform, statistics, subprocess, sys
results, out, n, size, rows, keys = sys.argv[1:7]
runs = [json.loads(l) for l in open(results) if l.strip()]
def sh(cmd):
    return subprocess.run(["sh", "-c", cmd], capture_output=True, text=True).stdout.strip()
summary = {}
for mode in dict.fromkeys(r["fsync"] for r in runs if r["kind"] != "broker_idle"):
    floors = [r["rows_per_s"] for r in runs if r["fsync"] == mode and r["kind"] == "floor"]
    floor = statistics.median(floors)
    s = summary[f"fsync_{mode}"] = {"floor_runs": [round(f, 1) for f in floors],
                                    "floor": round(floor, 1), "ceiling": {}}
    for r in runs:
        if r["fsync"] != mode or r["kind"] != "ceiling":
            continue
        c = s["ceiling"].setdefault(r.get("queue_type", "?"), {})
        if "error" in r:
            c[str(r.get("window"))] = {"error": r["error"]}
            continue
        c[str(r["window"])] = {"msg_per_s": r["msg_per_s"],
                               "broker_cpu_us_per_msg": r["broker_cpu_us_per_msg"],
                               "vs_floor": round(r["msg_per_s"] / floor, 3),
                               "nacked": r["nacked"], "returned": r["returned"]}
idle = next((r for r in runs if r["kind"] == "broker_idle"), None)
res = {"benchmark": "bench/rabbitmq_ceiling.sh: one bare rabbitmq-c publisher (bench/rabbitmq_ceiling.c), "
                    "confirms, persistent messages into a fresh durable queue through the default "
                    "exchange, at most W unconfirmed, no relay and no PostgreSQL; against bench_floor "
                    "(claim + ack, batch 100) before and after, per PostgreSQL durability; one run",
       "n": int(n), "message_bytes": int(size), "floor_rows": int(rows), "floor_keys": int(keys),
       "floor_batch": 100,
       "broker_idle_cpu_s_per_s": round(idle["broker_cpu_s"] / idle["seconds"], 3) if idle else None,
       "summary": summary, "runs": runs,
       "machine": {"cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"),
                   "cores": os.cpu_count(), "kernel": platform.release(),
                   "rabbitmq": sh("dpkg-query -W -f='${Version}' rabbitmq-server"),
                   "rabbitmq_c": sh("dpkg-query -W -f='${Version}' librabbitmq4"),
                   "postgres": "15; fsync_off: the test cluster; fsync_on: fsync, "
                               "synchronous_commit and full_page_writes on"}}
os.makedirs(os.path.dirname(out), exist_ok=True)
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res["summary"], indent=1))
PY
