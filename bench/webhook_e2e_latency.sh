#!/usr/bin/env bash
# Webhook -> inbox -> outbox -> HTTP latency at a steady RATE (issue 14: p50/p99 at 1,000 req/s),
# on a private PostgreSQL 15 cluster started twice: fsync on (synchronous_commit on, what users
# run), then fsync off. The queuebox binary runs with QueueBox's defaults: one http source
# (`/orders`, no auth, `idempotencyKeyPath: $.id`, `aggregateIdPath: $.customer`), the inbox relay,
# one route to an http destination on nginx (204, keep-alive). A Python client posts RATE requests
# per second for SECONDS over CONNS keep-alive connections, each a new event id over KEYS
# customers, and times each answer (202).
#
# Latencies:
#   intake       the client's POST -> 202 (client clock)
#   end to end   the inbox row's created_at (receipt) -> its outbox row's updated_at (marked sent
#                after nginx answered), both on the database clock
#
#   bash bench/webhook_e2e_latency.sh     # RATE=1000 SECONDS_=20 CONNS=16 KEYS=1000
#
# Needs root (the cluster runs as user postgres). Writes bench/results/webhook_e2e_latency.json
# and prints it. On a shared machine: flock /tmp/queuebox-bench.lock bash bench/...
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-1000}
SECONDS_=${SECONDS_:-20}
CONNS=${CONNS:-16}
KEYS=${KEYS:-1000}
PORT=${PORT:-18681}
PG_PORT=${PG_PORT:-18691}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/webhook_e2e_latency.json}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)

if [ -z "${QB_BIN:-}" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja >/dev/null
  cmake --build "$BUILD_DIR" --target queuebox >/dev/null
fi
QB="${QB_BIN:-$BUILD_DIR/apps/queuebox/queuebox}"
WORK=$(mktemp -d)
chown postgres:postgres "$WORK"
chmod 755 "$WORK"
PGDATA="$WORK/pg"
BASE="postgresql://postgres@127.0.0.1:$PG_PORT"
DB=qb_bench_webhook_e2e
RELAY_PID=
pg_ctl() { runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PGDATA" "$@"; }
source bench/nginx_sink.sh
cleanup() {
  # run_case runs in a pipeline's subshell: its relay's pid is in a file, not in RELAY_PID
  [ -f "$WORK/relay.pid" ] && kill "$(cat "$WORK/relay.pid")" 2>/dev/null
  nginx_sink_stop "$WORK/nginx"
  pg_ctl -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
runuser -u postgres -- "$PG_BIN/initdb" -D "$PGDATA" -U postgres -A trust >/dev/null
nginx_sink_start "$WORK/nginx" "$((PORT + 2))"

start_pg() {  # fsync on|off
  pg_ctl -l "$WORK/pg.log" -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $WORK \
    -c fsync=$1 -c synchronous_commit=on -c max_connections=100" start \
    >/dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
}
stop_pg() { pg_ctl -m fast -w stop >/dev/null; }
q() { psql -qtAX "$BASE/$DB" -c "$1"; }

cat >"$WORK/qb.yml" <<YAML
database: {type: postgresql, url: "$BASE/$DB"}
server: {address: 127.0.0.1, httpPort: $PORT}
sources:
  orders:
    path: /orders
    topic: "{{ source }}"
    idempotencyKeyPath: \$.id
    aggregateIdPath: \$.customer
routes: [{topicPattern: "orders", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$((PORT + 2))", path: /events}}
logging: {format: json, level: warn}
YAML

# Posts RATE/s for SECONDS_ over CONNS keep-alive connections; prints the intake latencies (ms)
# as JSON. Request i is due at start + i / RATE; a late connection sends at once (no coordinated
# omission: latency counts from the due time).
cat >"$WORK/client.py" <<'PY'
import asyncio, json, sys, time
port, rate, seconds, conns, keys, prefix = map(str, sys.argv[1:7])
port, rate, seconds, conns, keys = int(port), int(rate), int(seconds), int(conns), int(keys)
total = rate * seconds
lat, codes = [], {}
async def worker(w, start):
    # Keep-alive; the server ends a connection after its request limit (Connection: close) or
    # when idle: open a new one then, and send again a request that got no answer.
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for i in range(w, total, conns):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        body = '{"id":"%s-%d","customer":"c-%d","type":"order.created","total":%d}' % (
            prefix, i, i % keys, i)
        request = ("POST /inbox/orders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode()
        for attempt in range(3):
            writer.write(request)
            try:
                await writer.drain()
                status = await reader.readline()
            except ConnectionError:
                status = b""
            if status:
                break
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        length, close = 0, False
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            k, _, v = line.decode().partition(":")
            if k.lower() == "content-length":
                length = int(v)
            elif k.lower() == "connection" and v.strip().lower() == "close":
                close = True
        if length:
            await reader.readexactly(length)
        lat.append((time.perf_counter() - due) * 1000)
        code = status.split()[1].decode() if status else "no answer"
        codes[code] = codes.get(code, 0) + 1
        if close:
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.close()
async def main():
    start = time.perf_counter() + 0.2
    await asyncio.gather(*(worker(w, start) for w in range(conns)))
    took = time.perf_counter() - start
    lat.sort()
    pct = lambda p: round(lat[min(len(lat) - 1, int(p * len(lat)))], 2)
    print(json.dumps({"requests": len(lat), "codes": codes, "offered_per_s": rate,
                      "achieved_per_s": round(len(lat) / took, 1),
                      "intake_ms": {"p50": pct(0.50), "p99": pct(0.99), "max": round(lat[-1], 2)}}))
asyncio.run(main())
PY

run_case() {  # fsync -> JSON line
  psql -q "$BASE/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
  "$QB" --config "$WORK/qb.yml" migrate >/dev/null 2>&1
  "$QB" --config "$WORK/qb.yml" run >"$WORK/relay.log" 2>&1 &
  RELAY_PID=$!
  echo "$RELAY_PID" >"$WORK/relay.pid"
  local i=0
  until curl -fsS "http://127.0.0.1:$PORT/health/ready" >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -gt 100 ] && { tail -20 "$WORK/relay.log" >&2; exit 1; }
    sleep 0.1
  done
  local client
  client=$(python3 "$WORK/client.py" "$PORT" "$RATE" "$SECONDS_" "$CONNS" "$KEYS" "e$1")
  local total=$((RATE * SECONDS_)) deadline=$((SECONDS + 120))
  while [ "$(q "SELECT count(*) FROM outbox WHERE state = 'sent'")" -lt "$total" ]; do
    [ $SECONDS -gt $deadline ] && { echo "not every row was sent" >&2; tail -20 "$WORK/relay.log" >&2; exit 1; }
    sleep 0.2
  done
  kill -TERM "$RELAY_PID"
  wait "$RELAY_PID" || true
  rm -f "$WORK/relay.pid"
  RELAY_PID=
  local e2e
  e2e=$(q "SELECT json_build_object('rows', count(*),
       'p50', round(percentile_cont(0.50) WITHIN GROUP (ORDER BY ms)::numeric, 2),
       'p99', round(percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)::numeric, 2),
       'max', round(max(ms)::numeric, 2))
     FROM (SELECT extract(epoch FROM o.updated_at - i.created_at) * 1000 AS ms
           FROM inbox AS i JOIN outbox AS o ON o.headers ->> 'x-inbox-id' = i.id::text
           WHERE o.state = 'sent') AS t")
  python3 -c "import json,sys; c=json.loads(sys.argv[1]); c['fsync']=sys.argv[3]; c['end_to_end_ms']=json.loads(sys.argv[2]); print(json.dumps(c))" \
    "$client" "$e2e" "$1"
}

LINES="$WORK/lines.jsonl"
for fsync in on off; do
  start_pg "$fsync"
  echo "== fsync=$fsync" >&2
  run_case "$fsync" | tee -a "$LINES" >&2
  stop_pg
done

python3 - "$LINES" "$OUT" "$LOAD_BEFORE" "$(cut -d' ' -f1-3 /proc/loadavg)" <<PY
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = {"benchmark": "webhook -> inbox -> outbox -> HTTP (nginx 204) latency at a steady rate, "
                    "PostgreSQL 15, QueueBox's default relay settings",
       "command": "bash bench/webhook_e2e_latency.sh",
       "rate_per_s": $RATE, "seconds": $SECONDS_, "connections": $CONNS, "keys": $KEYS,
       "load_before": sys.argv[3], "load_after": sys.argv[4], "runs": lines}
json.dump(out, open(sys.argv[2], "w"), indent=1)
print(json.dumps(out, indent=1))
PY
