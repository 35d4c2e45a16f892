#!/usr/bin/env bash
# The relay's CPU per message against a bare HTTP client's in one run (issue 38 item 2): what the
# kernel and nginx leave for the relay's own work on this machine. First the relay drains
# (bench/relay_cpu_ab.sh with the one binary on both sides: ROUNDS × 2 drains per configuration,
# tuned and at the defaults, nginx answering 204); then bench/http_ceiling.c, the same requests
# to the same kind of nginx with no relay and no PostgreSQL, paced at the relay's own median
# rate and in its shape:
#   defaults  8 connections (concurrency 8), bursts of 100 (batchSize 100)
#   tuned     256 connections (the http destination's maxInFlight), bursts of 500
# each one request per connection at a time with the peek before reuse (what the relay does),
# then 16 pipelined requests per connection (what it does not do), and unpaced.
#
#   flock /tmp/queuebox-bench.lock bash bench/http_ceiling.sh <queuebox>
#   ROWS=50000 ROUNDS=1 FSYNC=off N=100000 ...
#
# Writes $OUT (bench/results/http_ceiling.json): the relay's medians, every client run, and the
# relay's CPU a message over the paced one-at-a-time client's.
set -euo pipefail
cd "$(dirname "$0")/.."
QB=$(realpath "$1")
ROWS=${ROWS:-50000}
ROUNDS=${ROUNDS:-1}
FSYNC=${FSYNC:-off}
N=${N:-100000}
PORT=${PORT:-18481}
OUT=${OUT:-bench/results/http_ceiling.json}
WORK=$(mktemp -d /tmp/qb-http-ceiling.XXXXXX)
source bench/nginx_sink.sh
trap 'nginx_sink_stop "$WORK/ngx"; rm -rf "$WORK"' EXIT

ROWS=$ROWS ROUNDS=$ROUNDS FSYNC=$FSYNC OUT="$WORK/relay.json" bash bench/relay_cpu_ab.sh "$QB" "$QB"
CLIENT=${BUILD_DIR:-build}/bench/http_ceiling  # built with the benches, or compiled here
if [ ! -x "$CLIENT" ]; then
  CLIENT="$WORK/http_ceiling"
  gcc -O2 -Wall -o "$CLIENT" bench/http_ceiling.c
fi
nginx_sink_start "$WORK/ngx" "$PORT"
sleep 0.5

rate_of() {  # config: the median of both sides' rates
  python3 -c "import json,statistics,sys
d=json.load(open(sys.argv[1]))
print(round(statistics.median([r['rows_per_s'] for r in d['runs'] if r['config']==sys.argv[2]])))" \
    "$WORK/relay.json" "$1"
}

: >"$WORK/client.jsonl"
for config in tuned defaults; do
  if [ "$config" = tuned ]; then shape="-c 256 --burst 500"; else shape="-c 8 --burst 100"; fi
  rate=$(rate_of "$config")
  for args in "-d 1 --peek --rate $rate" "-d 16 --peek --rate $rate" "-d 1 --peek"; do
    # shellcheck disable=SC2086 # the shape and args are word lists
    line=$("$CLIENT" --port "$PORT" -n "$N" $shape $args)
    echo "{\"config\": \"$config\", \"client\": $line}" | tee -a "$WORK/client.jsonl" >&2
  done
done

python3 - "$WORK/relay.json" "$WORK/client.jsonl" "$OUT" <<'PY'
import json, statistics, sys
relay = json.load(open(sys.argv[1]))
clients = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
summary = {}
for config in ("tuned", "defaults"):
    runs = [r for r in relay["runs"] if r["config"] == config]
    med = lambda k: round(statistics.median(r[k] for r in runs), 1)
    mine = {k: med(k) for k in ("relay_us_per_msg", "relay_user_us", "relay_sys_us",
                                "rows_per_s", "nginx_us_per_msg")}
    c = [x["client"] for x in clients if x["config"] == config]
    paced = next(x for x in c if x["depth"] == 1 and x["paced"] > 0)
    piped = next(x for x in c if x["depth"] > 1)
    summary[config] = {"relay": mine, "client_paced_cpu_us": paced["cpu_us"],
                       "client_paced_system_us": paced["system_us"],
                       "client_pipelined_cpu_us": piped["cpu_us"],
                       "relay_over_client": round(mine["relay_us_per_msg"] / paced["cpu_us"], 2)}
    print(config, json.dumps(summary[config]), file=sys.stderr)
json.dump({"benchmark": "http_ceiling", "binary": relay["A"], "fsync": relay["fsync"],
           "rows": relay["rows"], "summary": summary, "relay_runs": relay["runs"],
           "client_runs": clients}, open(sys.argv[3], "w"), indent=1)
PY
echo "wrote $OUT" >&2
