#!/usr/bin/env bash
# Stored webhook requests/s of two queuebox binaries, alternating in one run, with the CPU each
# component spends per stored request (issue 14). The `new` case of webhook_bench.sh (hmac over
# the body, every request a new event id, wrk keep-alive on loopback) on one private PostgreSQL 15
# cluster; each round runs A then B (odd rounds) or B then A (even rounds) on a fresh database.
#
#   QB_A=/tmp/qb-a QB_B=/tmp/qb-b flock /tmp/queuebox-bench.lock bash bench/webhook_ab.sh
#   # ROUNDS=3 DURATION=10s CONNS=64 THREADS=2 FSYNC=off POOL_SIZE=10 OUT=bench/results/webhook_ab.json
#
# AUTH_A and AUTH_B (default hmac) pick each side's source auth: hmac, none (no auth, the key from
# $.id), standard-webhooks (webhook-id/-timestamp/-signature, the key from webhook-id) or stripe
# (Stripe-Signature, the key from $.id). With AUTH_B set and QB_B unset, B is QB_A: one binary,
# signed against unsigned (issue 36):
#   QB_A=build/apps/queuebox/queuebox AUTH_A=none AUTH_B=standard-webhooks \
#     flock /tmp/queuebox-bench.lock bash bench/webhook_ab.sh
#
# Per run: wrk's requests/s, the rows stored, and CPU microseconds per stored row of the queuebox
# process (all its threads), the PostgreSQL cluster (postmaster, its live children and the reaped
# ones), wrk (/usr/bin/time), and the whole machine (/proc/stat busy time; "other" is what none of
# the three accounts for), plus the machine's idle share. QB_B may be unset (A only). PERF_OUT=file
# records `perf record -a -g` over the middle of each run of A (the figures of that run are then
# perturbed; use it for profiles, not for the A/B).
#
# Needs root (the cluster runs as user postgres), wrk (apt-get install wrk) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${QB_A:?set QB_A to a queuebox binary}"
AUTH_A=${AUTH_A:-hmac}
AUTH_B=${AUTH_B:-}
QB_B=${QB_B:-}
if [ -n "$AUTH_B" ] && [ -z "$QB_B" ]; then QB_B=$QB_A; fi
AUTH_B=${AUTH_B:-hmac}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
FSYNC=${FSYNC:-off}
POOL_SIZE=${POOL_SIZE:-10}
EVENTS=${EVENTS:-400000}
PORT=${PORT:-18582}
PG_PORT=${PG_PORT:-18592}
OUT=${OUT:-bench/results/webhook_ab.json}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
PERF_OUT=${PERF_OUT:-}
SECRET=bench-secret
SW_SECRET=whsec_YmVuY2ggc3RhbmRhcmQgd2ViaG9va3Mga2V5  # base64 of "bench standard webhooks key"
HZ=$(getconf CLK_TCK)
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }

source bench/private_pg.sh
DB=qb_bench_webhook
RELAY_PID=
start_pg "$FSYNC"
POSTMASTER=$(head -1 "$PGDATA/postmaster.pid")
q() { psql -qtAX "$BASE/$DB" -c "$1"; }

cat >"$WORK/qb.yml" <<YAML
database: {type: postgresql, url: "$BASE/$DB", poolSize: $POOL_SIZE}
server: {address: 127.0.0.1, httpPort: $PORT}
inbox: {relay: {enabled: false}}
sources:
  signed:
    path: /signed
    topic: "{{ source }}"
    idempotencyKeyPath: \$.id
    auth: {type: hmac, secret: $SECRET, headerName: X-Signature}
  plain:
    path: /plain
    topic: "{{ source }}"
    idempotencyKeyPath: \$.id
  sw:
    path: /sw
    topic: "{{ source }}"
    auth: {type: standard-webhooks, secret: $SW_SECRET}
  stripe:
    path: /stripe
    topic: "{{ source }}"
    auth: {type: stripe, secret: $SECRET}
logging: {format: json, level: warn}
YAML

# The request file of one auth ($WORK/<auth>.tsv), made just before its run: the signed ones carry
# the time they were made (the tolerance is 5 min; a whole A/B takes longer).
make_requests() {  # auth
  python3 - "$EVENTS" "$WORK/$1.tsv" "$1" "$SECRET" "$SW_SECRET" <<'PY'
import base64, hashlib, hmac, sys, time
n, path, auth, secret, sw = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].encode(), sys.argv[5]
sw_key = base64.b64decode(sw[len("whsec_"):])
ts = str(int(time.time()))
mac = lambda key, text: hmac.new(key, text.encode(), hashlib.sha256)
with open(path, "w") as f:
    for i in range(n):
        body = '{"id":"new-%d","type":"invoice.paid","data":{"amount":%d,"currency":"eur"}}' % (i, i)
        if auth == "hmac":
            f.write("sha256=" + mac(secret, body).hexdigest() + "\t" + body + "\n")
        elif auth == "none":
            f.write(body + "\n")
        elif auth == "standard-webhooks":
            mid = "msg_new-%d" % i
            sig = base64.b64encode(mac(sw_key, "%s.%s.%s" % (mid, ts, body)).digest()).decode()
            f.write("webhook-id: %s\twebhook-timestamp: %s\twebhook-signature: v1,%s\t%s\n"
                    % (mid, ts, sig, body))
        else:
            f.write("Stripe-Signature: t=%s,v1=%s\t%s\n" % (ts, mac(secret, ts + "." + body).hexdigest(), body))
PY
}
route_of() {  # auth -> source path
  case $1 in hmac) echo signed ;; none) echo plain ;; standard-webhooks) echo sw ;; stripe) echo stripe ;;
    *) echo "unknown auth $1" >&2; exit 1 ;; esac
}


source bench/proc_cpu.sh
machine_ticks() {  # busy idle (all CPUs)
  awk '/^cpu / {print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat
}

run_one() {  # label binary round auth -> JSON line
  local label=$1 qb=$2 round=$3 auth=$4
  make_requests "$auth"
  psql -q "$BASE/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
  "$qb" --config "$WORK/qb.yml" migrate >/dev/null 2>&1
  psql -q "$BASE/postgres" -c "CHECKPOINT" >/dev/null
  "$qb" --config "$WORK/qb.yml" run >"$WORK/relay.log" 2>&1 &
  RELAY_PID=$!
  echo "$RELAY_PID" >"$WORK/relay.pid"
  local ok=
  for _ in $(seq 1 100); do
    if curl -fs "http://127.0.0.1:$PORT/health/live" >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.1
  done
  [ -n "$ok" ] || { echo "the relay did not start:" >&2; tail -20 "$WORK/relay.log" >&2; exit 1; }
  local qb0 pg0 m0 qb1 pg1 m1 perf_pid=
  qb0=$(cpu_ticks "$RELAY_PID")
  pg0=$(cluster_ticks "$POSTMASTER")
  m0=$(machine_ticks)
  if [ -n "$PERF_OUT" ] && [ "$label" = A ]; then
    (sleep 2 && perf record -a -g -o "$PERF_OUT" -- sleep 5 >/dev/null 2>&1) &
    perf_pid=$!
  fi
  /usr/bin/time -f '%U %S' -o "$WORK/wrk.time" wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" \
    -s bench/webhook_post.lua "http://127.0.0.1:$PORT/inbox/$(route_of "$auth")" -- \
    "$WORK/$auth.tsv" "$THREADS" \
    >"$WORK/wrk.out"
  qb1=$(cpu_ticks "$RELAY_PID")
  pg1=$(cluster_ticks "$POSTMASTER")
  m1=$(machine_ticks)
  [ -n "$perf_pid" ] && wait "$perf_pid"
  kill -TERM "$RELAY_PID"
  wait "$RELAY_PID" || true
  rm -f "$WORK/relay.pid"
  RELAY_PID=
  local rps non2xx rows
  rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.out")
  non2xx=$(awk '/Non-2xx/ {print $NF}' "$WORK/wrk.out")
  rows=$(q "SELECT count(*) FROM inbox")
  python3 - "$label" "$qb" "$round" "$rps" "${non2xx:-0}" "$rows" "$HZ" "$qb0" "$qb1" "$pg0" "$pg1" \
    "$m0" "$m1" "$(cat "$WORK/wrk.time")" "$auth" <<'PY'
import json, sys
a = sys.argv[1:]
auth = a[14]
label, qb, rnd, rps, non2xx, rows, hz = a[0], a[1], int(a[2]), float(a[3]), int(a[4]), int(a[5]), int(a[6])
qb_t = int(a[8]) - int(a[7]); pg_t = int(a[10]) - int(a[9])
b0, i0 = map(int, a[11].split()); b1, i1 = map(int, a[12].split())
wu, ws = map(float, a[13].split())
us = lambda ticks: round(1e6 * ticks / hz / rows, 1) if rows else None
busy, idle = b1 - b0, i1 - i0
wrk_t = (wu + ws) * hz
print(json.dumps({"binary": label, "path": qb, "auth": auth, "round": rnd, "requests_per_s": rps, "non_2xx": non2xx,
                  "rows": rows, "cpu_us_per_row": {"queuebox": us(qb_t), "postgres": us(pg_t),
                  "wrk": us(wrk_t), "other": us(busy - qb_t - pg_t - wrk_t), "machine": us(busy)},
                  "idle_share": round(idle / (busy + idle), 3) if busy + idle else None}))
PY
}

LINES="$WORK/lines.jsonl"
for round in $(seq 1 "$ROUNDS"); do
  order="A B"
  [ $((round % 2)) -eq 0 ] && order="B A"
  for label in $order; do
    bin=$QB_A
    auth=$AUTH_A
    if [ "$label" = B ]; then
      [ -n "$QB_B" ] || continue
      bin=$QB_B
      auth=$AUTH_B
    fi
    run_one "$label" "$bin" "$round" "$auth" | tee -a "$LINES" >&2
  done
done

python3 - "$LINES" "$OUT" <<PY
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def med(label, f):
    v = [f(l) for l in lines if l["binary"] == label]
    return statistics.median(v) if v else None
summary = {}
for label in ("A", "B"):
    if med(label, lambda l: l["requests_per_s"]) is None:
        continue
    summary[label] = {"requests_per_s": med(label, lambda l: l["requests_per_s"]),
                      "cpu_us_per_row": {k: med(label, lambda l, k=k: l["cpu_us_per_row"][k])
                                         for k in ("queuebox", "postgres", "wrk", "other", "machine")}}
if "B" in summary:
    summary["B_over_A_requests_per_s"] = round(summary["B"]["requests_per_s"] / summary["A"]["requests_per_s"], 3)
    summary["B_over_A_queuebox_cpu"] = round(summary["B"]["cpu_us_per_row"]["queuebox"] / summary["A"]["cpu_us_per_row"]["queuebox"], 3)
out = {"benchmark": "webhook new A/B (A: $AUTH_A, B: $AUTH_B), wrk keep-alive -> queuebox -> PostgreSQL 15",
       "settings": {"duration": "$DURATION", "connections": $CONNS, "wrk_threads": $THREADS,
                    "fsync": "$FSYNC", "database.poolSize": $POOL_SIZE, "rounds": $ROUNDS},
       "A": "$QB_A", "B": "$QB_B", "auth_A": "$AUTH_A", "auth_B": "$AUTH_B", "load_before": "$LOAD_BEFORE",
       "runs": lines, "median": summary}
json.dump(out, open(sys.argv[2], "w"), indent=2)
print(json.dumps(summary, indent=2))
PY
