#!/usr/bin/env bash
# The operator console's latency on a big outbox (issue 34 item 3: with 1,000,000 outbox rows,
# 100,000 of them dead, a page of dead letters in at most 100 ms p95 and the overview in at most
# 50 ms p95, without scanning the table).
#
#   flock /tmp/queuebox-bench.lock env -u PG_PORT bash bench/console_latency_bench.sh \
#     QUEUEBOX_BIN [ROWS] [REQUESTS] [DIALECTS]
#
# ROWS (default 1000000) outbox rows over 12 topics and 5,000 keys, created over the last 7 days:
# 10 % dead with one of eight error texts (HTTP answers, timeouts, broker refusals), 1 % pending
# (retries due in a day, so the relay has nothing due), 0.1 % processing under a live lease, the
# rest sent; one attempt-history row per dead row. Then ANALYZE (PostgreSQL: VACUUM ANALYZE), and
# `queuebox run` with admin.enabled and its routes to an HTTP destination on a closed port: the
# relay runs as in production (polling, heartbeats), with nothing due. Fair to the console: the
# relay's claims run beside the requests but deliver nothing.
#
# REQUESTS (default 200) requests of each kind, one after another on one keep-alive connection,
# after 10 unmeasured ones: the dead-letter page (50 rows) first and 50,000 rows deep (keyset
# cursor), each also with a topic filter and with an error-text filter; the overview; one dead
# message whole (payload, headers, attempts). Prints p50/p95/max per kind and writes
# bench/results/console_latency_<dialect>.json; the plan of each console statement goes to
# bench/results/console_plans_<dialect>.txt (PostgreSQL: EXPLAIN (ANALYZE, BUFFERS); SQLite:
# EXPLAIN QUERY PLAN). The statements in the plans are the console's (src/store/console_sql.cc,
# console_reads.cc, console_activity.cc) with the parameters written in.
#
# DIALECTS: "pg sqlite" (default). PostgreSQL is a private cluster (bench/private_pg.sh, fsync
# off: the reads do not write), PG_PORT (default 18437) and PG_BIN as there.
set -euo pipefail
BIN=$(realpath "$1")
ROWS=${2:-1000000}
REQUESTS=${3:-200}
DIALECTS=${4:-pg sqlite}
PG_PORT=${PG_PORT:-18437}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
HERE=$(cd "$(dirname "$0")" && pwd)
RESULTS="$HERE/results"
HTTP_PORT=${HTTP_PORT:-18438}
TOKEN=bench-token
source "$HERE/private_pg.sh"  # WORK, BASE, start_pg, stop_pg; cleanup on exit
chmod 777 "$WORK"

config() {  # url
  cat <<YAML
database:
  url: $1
server:
  address: 127.0.0.1
  httpPort: $HTTP_PORT
admin:
  enabled: true
  auth:
    type: bearer
    token: $TOKEN
routes:
  - topicPattern: "payment.**"
    destination: payments-web
  - topicPattern: "**"
    destination: orders-web
destinations:
  orders-web:
    type: http
    baseUrl: http://127.0.0.1:9
  payments-web:
    type: http
    baseUrl: http://127.0.0.1:9
logging:
  level: warn
YAML
}

# The row mix, the same on both dialects: row i has topic i % 12, key i % 5000, error i % 8.
TOPICS="'order.created','order.paid','order.shipped','order.cancelled','payment.captured',
'payment.refunded','invoice.issued','invoice.paid','customer.created','customer.updated',
'inventory.reserved','inventory.released'"
ERRORS="'HTTP 503: upstream unavailable','HTTP 500: internal server error',
'timeout after 10000 ms waiting for the response','HTTP 422: {\"error\":\"invalid order id\"}',
'connection refused (127.0.0.1:9)','HTTP 429: rate limited, retry after 30 s',
'TLS handshake failed: certificate has expired','HTTP 404: no such endpoint /hooks/orders'"
STATE="CASE WHEN i % 10 = 3 THEN 'dead' WHEN i % 100 = 5 THEN 'pending'
            WHEN i % 1000 = 9 THEN 'processing' ELSE 'sent' END"

fill_pg() {  # url
  psql -q -v ON_ERROR_STOP=1 "$1" <<SQL
INSERT INTO outbox (topic, key, payload, headers, state, attempt, created_at, updated_at,
                    scheduled_at, claimed_at, claim_token, lease_expires_at, last_error)
SELECT (ARRAY[$TOPICS])[i % 12 + 1], 'customer-' || (i % 5000),
       jsonb_build_object('orderId', i, 'amount', (i % 977) * 1.5, 'currency', 'EUR',
                          'lines', jsonb_build_array(jsonb_build_object('sku', 'SKU-' || i % 300))),
       jsonb_build_object('traceparent', '00-' || md5(i::text) || '-0000000000000001-01'),
       $STATE, CASE WHEN i % 10 = 3 THEN 5 ELSE 0 END,
       now() - (($ROWS - i) * interval '600 ms'), now() - (($ROWS - i) * interval '600 ms') + interval '3 s',
       CASE WHEN i % 100 = 5 THEN now() + interval '1 day' ELSE now() - (($ROWS - i) * interval '600 ms') END,
       CASE WHEN i % 1000 = 9 THEN now() END,
       CASE WHEN i % 1000 = 9 THEN gen_random_uuid() END,
       CASE WHEN i % 1000 = 9 THEN now() + interval '1 day' END,
       CASE WHEN i % 10 = 3 OR i % 100 = 5 THEN (ARRAY[$ERRORS])[i % 8 + 1] END
FROM generate_series(0, $ROWS - 1) AS i;
INSERT INTO outbox_attempts (message_id, attempt, destination, outcome, duration_ms, answer, error)
SELECT id, 4, 'orders-web', 'dead', 12, 'HTTP 503', last_error FROM outbox WHERE state = 'dead';
VACUUM ANALYZE;
SQL
}

fill_sqlite() {  # file
  sqlite3 "$1" <<SQL
PRAGMA journal_mode = WAL;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $ROWS - 1),
  t(v) AS (SELECT json_array($TOPICS)), e(v) AS (SELECT json_array($ERRORS))
INSERT INTO outbox (topic, key, payload, headers, state, attempt, created_at, updated_at,
                    scheduled_at, claimed_at, claim_token, lease_expires_at, last_error)
SELECT json_extract(t.v, '\$[' || (i % 12) || ']'), 'customer-' || (i % 5000),
       json_object('orderId', i, 'amount', (i % 977) * 1.5, 'currency', 'EUR',
                   'lines', json_array(json_object('sku', 'SKU-' || i % 300))),
       json_object('traceparent', '00-' || hex(randomblob(16)) || '-0000000000000001-01'),
       $STATE, CASE WHEN i % 10 = 3 THEN 5 ELSE 0 END,
       strftime('%Y-%m-%dT%H:%M:%fZ', 'now', (-($ROWS - i) * 0.6) || ' seconds'),
       strftime('%Y-%m-%dT%H:%M:%fZ', 'now', (3 - ($ROWS - i) * 0.6) || ' seconds'),
       CASE WHEN i % 100 = 5 THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+1 day')
            ELSE strftime('%Y-%m-%dT%H:%M:%fZ', 'now', (-($ROWS - i) * 0.6) || ' seconds') END,
       CASE WHEN i % 1000 = 9 THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END,
       CASE WHEN i % 1000 = 9 THEN '00000000-0000-4000-8000-000000000001' END,
       CASE WHEN i % 1000 = 9 THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+1 day') END,
       CASE WHEN i % 10 = 3 OR i % 100 = 5 THEN json_extract(e.v, '\$[' || (i % 8) || ']') END
FROM n, t, e;
INSERT INTO outbox_attempts (message_id, attempt, destination, outcome, duration_ms, answer, error)
SELECT id, 4, 'orders-web', 'dead', 12, 'HTTP 503', last_error FROM outbox WHERE state = 'dead';
ANALYZE;
SQL
}

# The console's statements with their parameters written in (see the header).
plans() {  # dialect cursor_time cursor_sequence message_id
  local d=$1 ts=$2 seq=$3 id=$4 cols id_col time_cursor now_minute
  if [ "$d" = pg ]; then
    id_col="id::text"; time_cursor="'$ts'::timestamptz"
    now_minute="floor(extract(epoch FROM clock_timestamp()) / 60)::bigint"
  else
    id_col="id"; time_cursor="'$ts'"
    now_minute="(CAST(strftime('%s', 'now') AS INTEGER) / 60)"
  fi
  cols="$id_col, state, topic, key, NULL, NULL, attempt, max_attempts, sequence, last_error, created_at, updated_at, scheduled_at"
  local dead="SELECT $cols FROM outbox WHERE state = 'dead'"
  local order="ORDER BY updated_at DESC, sequence DESC LIMIT 51"
  local topic error age
  if [ "$d" = pg ]; then
    topic="topic = ANY('{order.paid}'::text[])"
    error="strpos(lower(last_error), lower('timeout'::text)) > 0"
    age="EXTRACT(EPOCH FROM clock_timestamp() - min(created_at))::float8"
  else
    topic="topic IN (SELECT value FROM json_each('[\"order.paid\"]'))"
    error="instr(lower(last_error), lower('timeout')) > 0"
    age="(julianday('now') - julianday(min(created_at))) * 86400.0"
  fi
  # The console's error search (SqlConsole::SearchErrors): the window once, its matches and its
  # last row with the count read.
  search() {  # extra-where
    echo "WITH scan AS (SELECT $cols, $error AS hit, updated_at AS o1, sequence AS o2 FROM outbox WHERE state = 'dead'$1 ORDER BY updated_at DESC, sequence DESC LIMIT 10000) SELECT * FROM (SELECT *, 0 AS edge, 0 AS done FROM scan WHERE hit ORDER BY o1 DESC, o2 DESC LIMIT 51) m UNION ALL SELECT * FROM (SELECT *, 1, (SELECT count(*) FROM scan) FROM scan ORDER BY o1, o2 LIMIT 1) e;"
  }
  cat <<SQL
-- dead letters: first page
$dead $order;
-- dead letters: 50,000 rows deep
$dead AND (updated_at, sequence) < ($time_cursor, $seq) $order;
-- dead letters: topic filter, first page
$dead AND $topic $order;
-- dead letters: topic filter, deep
$dead AND $topic AND (updated_at, sequence) < ($time_cursor, $seq) $order;
-- dead letters: error-text filter, first page (a window of 10,000 rows, as the console reads it)
$(search "")
-- dead letters: error-text filter, deep
$(search " AND (updated_at, sequence) < ($time_cursor, $seq)")
-- overview: exact counts (PostgreSQL: sent is the planner's estimate, below)
SELECT (SELECT count(*) FROM outbox WHERE state = 'pending'), (SELECT count(*) FROM outbox WHERE state = 'processing'), (SELECT count(*) FROM outbox WHERE state = 'dead')$([ "$d" = pg ] || echo ", (SELECT count(*) FROM outbox WHERE state = 'sent')");
-- overview: oldest pending age
SELECT $age FROM outbox WHERE state = 'pending';
-- overview: sent and dead per minute over every replica
WITH RECURSIVE now_minute(m) AS (SELECT $now_minute), minutes(m) AS (SELECT m - 15 + 1 FROM now_minute UNION ALL SELECT minutes.m + 1 FROM minutes, now_minute WHERE minutes.m < now_minute.m) SELECT minutes.m, coalesce(sum(a.sent), 0), coalesce(sum(a.dead), 0) FROM minutes LEFT JOIN queuebox_console_activity a ON a.outbox_table = 'outbox' AND a.minute = minutes.m GROUP BY minutes.m ORDER BY minutes.m;
-- one message
SELECT $cols, payload, headers FROM outbox WHERE id = '$id';
-- one message: its attempts
SELECT * FROM outbox_attempts WHERE message_id = '$id' ORDER BY recorded_at;
-- one message: rows of its key waiting behind it
SELECT count(*) FROM outbox WHERE key = 'customer-3' AND sequence > $seq AND state IN ('pending', 'processing');
SQL
  [ "$d" = pg ] && cat <<SQL
-- overview: the planner's row estimate
SELECT reltuples::float8 FROM pg_class WHERE oid = to_regclass('"outbox"');
SQL
  true
}

explain() {  # dialect url-or-file out ts seq id
  local d=$1 target=$2 out=$3 label
  : >"$out"
  while IFS= read -r line; do
    case "$line" in
      --*) label=$line ;;
      *)
        { echo "$label"; echo "$line"; } >>"$out"
        if [ "$d" = pg ]; then
          psql -X -q "$target" -c "EXPLAIN (ANALYZE, BUFFERS) ${line%;}" >>"$out" 2>&1 || true
        else
          sqlite3 "$target" "EXPLAIN QUERY PLAN ${line%;}" >>"$out" 2>&1 || true
        fi
        echo >>"$out" ;;
    esac
  done < <(plans "$d" "$4" "$5" "$6")
}

measure() {  # dialect
  python3 - "$1" "$HTTP_PORT" "$TOKEN" "$REQUESTS" "$RESULTS/console_latency_$1.json" "$ROWS" <<'PY'
import http.client, json, statistics, subprocess, sys, time, urllib.parse
dialect, port, token, n, out, rows = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
H = {"Authorization": "Bearer " + token}
def get(path):
    conn.request("GET", path, headers=H)
    r = conn.getresponse()
    body = r.read()
    if r.status != 200:
        raise SystemExit(f"{path}: HTTP {r.status} {body[:200]!r}")
    return json.loads(body)
# The cursor half-way through the dead rows (50,000 in at 100,000 dead), through the API's pages.
dead = get("/admin/api/overview")["outbox"]["rows"]["dead"]
depth = max(1, min(100, dead // 1000))
cursor = None
for _ in range(depth):
    page = get("/admin/api/messages?state=dead&limit=500" + ("&cursor=" + urllib.parse.quote(cursor) if cursor else ""))
    cursor = page["next"]
first = get("/admin/api/messages?state=dead&limit=50")
msg_id = first["rows"][0]["id"]
q = urllib.parse.quote(cursor)
kinds = {
    "dead page 1": "/admin/api/messages?state=dead&limit=50",
    f"dead page {depth * 500:,} deep": "/admin/api/messages?state=dead&limit=50&cursor=" + q,
    "dead page 1, topic": "/admin/api/messages?state=dead&limit=50&topic=order.paid",
    "dead page deep, topic": "/admin/api/messages?state=dead&limit=50&topic=order.paid&cursor=" + q,
    "dead page 1, error text": "/admin/api/messages?state=dead&limit=50&error=timeout",
    "dead page deep, error text": "/admin/api/messages?state=dead&limit=50&error=timeout&cursor=" + q,
    "overview": "/admin/api/overview",
    "one message": "/admin/api/messages/" + msg_id,
}
res = {}
for kind, path in kinds.items():
    for _ in range(10):
        get(path)
    times = []
    for _ in range(n):
        t = time.perf_counter()
        body = get(path)
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    res[kind] = {"p50_ms": round(times[len(times) // 2], 2),
                 "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
                 "max_ms": round(times[-1], 2),
                 "rows": len(body["rows"]) if "rows" in body and isinstance(body["rows"], list) else None}
    print(f"{dialect:6} {kind:28} p50 {res[kind]['p50_ms']:7.2f} ms  p95 {res[kind]['p95_ms']:7.2f} ms  max {res[kind]['max_ms']:7.2f} ms", flush=True)
overview = get("/admin/api/overview")
machine = {"uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(),
           "nproc": subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()}
json.dump({"dialect": dialect, "rows": rows, "requests": n, "deep": depth * 500, "cursor": cursor, "message": msg_id,
           "overview_rows": overview["outbox"]["rows"], "estimated": overview["outbox"]["estimated"],
           "results": res, "machine": machine}, open(out, "w"), indent=1)
print(json.dumps({"cursor": cursor, "message": msg_id}))
PY
}

run_relay() {  # yml
  "$BIN" --config "$1" run >"$WORK/relay.log" 2>&1 &
  echo $! >"$WORK/relay.pid"
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$HTTP_PORT/health/ready" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  cat "$WORK/relay.log" >&2
  return 1
}
stop_relay() {
  kill "$(cat "$WORK/relay.pid")" 2>/dev/null || true
  wait "$(cat "$WORK/relay.pid")" 2>/dev/null || true
  rm -f "$WORK/relay.pid"
}

for d in $DIALECTS; do
  echo "== $d: filling $ROWS rows ($(date -u +%H:%M:%S))"
  if [ "$d" = pg ]; then
    start_pg off
    psql -q "$BASE/postgres" -c "CREATE DATABASE console_bench"
    target="$BASE/console_bench"
    config "$target" >"$WORK/$d.yml"
    "$BIN" --config "$WORK/$d.yml" migrate >/dev/null
    fill_pg "$target"
  else
    target="$WORK/console.db"
    config "$target" >"$WORK/$d.yml"
    "$BIN" --config "$WORK/$d.yml" migrate >/dev/null
    fill_sqlite "$target"
  fi
  echo "== $d: relay up, $REQUESTS requests of each kind ($(date -u +%H:%M:%S)); $(uptime)"
  run_relay "$WORK/$d.yml"
  found=$(measure "$d" | tee /dev/stderr | tail -1)
  stop_relay
  cursor=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["cursor"])' "$found")
  id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["message"])' "$found")
  explain "$d" "$target" "$RESULTS/console_plans_$d.txt" "${cursor%|*}" "${cursor##*|}" "$id"
  echo "== $d: plans in bench/results/console_plans_$d.txt; $(uptime)"
  if [ "$d" = pg ]; then stop_pg; fi  # not `&&`: as the loop's last command it failed the script
done
