#!/usr/bin/env bash
# Scale-out (issue 6 item 6): 1, 2 and 4 queuebox replicas on one PostgreSQL database draining the
# same backlog to one local HTTP sink (nginx answering 204, keep-alive, one worker logging every
# request in arrival order). Every run is checked by bench/verify_delivery.py: every row id
# received (zero loss), each key's rows first received in sequence order; duplicates counted. A
# failed check fails the script and no figure is written.
#
#   flock /tmp/queuebox-bench.lock bash bench/scaleout_bench.sh     # BUILD_DIR=build
#   QB_SVC_DIR=/tmp/qb-durable PG_DURABLE=1 PG_PORT=54339 QB_BIN=... ...    # fsync on (own cluster)
#   REPLICAS="1 2 4" ROUNDS=3 ROWS=60000 KEYS=1000 BATCH=500 CONCURRENCY=1000 POOL=4 ...
#   QB_BINS="A=/tmp/old B=/tmp/new" ...   # an A/B in one run, figures per binary (nothing built)
#
# What is timed: from just before the N processes are started (together) to the last row's
# acknowledgement (max(updated_at), database clock = this host's clock), so start-up is inside.
# The replicas run WITHOUT --until-idle: a replica whose claim finds every key head held by the
# others (1,000 keys, per-key order) sees an empty claim with nothing in flight and would stop
# early, leaving fewer replicas than N for the rest of the drain. The script polls the database
# until no row is pending or processing, reads each replica's /metrics, then sends SIGTERM.
# Rounds alternate the order of N (1 2 4, then 4 2 1, ...) so a load drift does not favour one N;
# the figure per N is the median over the rounds.
#
# Writes bench/results/scaleout.json (figures + machine description) and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
REPLICAS=${REPLICAS:-"1 2 4"}
ROUNDS=${ROUNDS:-3}
ROWS=${ROWS:-60000}
KEYS=${KEYS:-1000}
BATCH=${BATCH:-500}
CONCURRENCY=${CONCURRENCY:-1000}
POOL=${POOL:-4}
LEASE_MS=${LEASE_MS:-300000}  # far above a run's length: no lease expires, no reclaim
PAD=${PAD:-960}                # payload ~1 KiB with the other fields
PORT=${PORT:-18471}            # the sink; replica i's admin port is PORT + i
TIMEOUT_S=${TIMEOUT_S:-300}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/scaleout.json}
PREFIX=${PREFIX:-qb_scaleout}

bash scripts/services.sh start pg >/dev/null
eval "$(bash scripts/services.sh env)"
if [ -z "${QB_BIN:-}" ] && [ -z "${QB_BINS:-}" ]; then  # QB_BIN(S) given: used as they are
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD_DIR" --target queuebox >/dev/null
fi
python3 bench/verify_delivery.py --self-test >/dev/null
QB=${QB_BIN:-$BUILD_DIR/apps/queuebox/queuebox}  # QB_BIN: compare another build
# QB_BINS="A=/path/a B=/path/b": an A/B in one run; each round runs every N with each binary,
# the binaries' order alternating with the round. Figures per binary.
QB_BINS=${QB_BINS:-"default=$QB"}
QB_LABEL=default
base=${QB_TEST_PG_URL%/*}
psql -q "$QB_TEST_PG_URL" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"
# pg_stat_statements normalizes constants ('sent' becomes $3), so statements are matched by shape.
CLAIM="s.query LIKE 'WITH RECURSIVE qb_now%'"
# The ack: MarkSent's fenced UPDATE, bare or (attempt history on, the default) inside the CTE
# that also records the attempt; not the retry's, which sets last_error.
ACK="(s.query LIKE 'UPDATE %SET \"state\" = \$%unnest%'
  OR s.query LIKE 'WITH qb_w AS (UPDATE %SET \"state\" = \$%unnest%')
  AND s.query NOT LIKE '%last_error%'"
kind() {  # pg_stat_activity alias -> SQL naming its statement: claim, ack, other
  echo "(CASE WHEN $1.query LIKE 'WITH RECURSIVE qb_now%' THEN 'claim' WHEN $1.query LIKE
    'UPDATE %unnest%' THEN 'ack' ELSE 'other' END)"
}
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  nginx_sink_stop "$WORK/ngx"
  rm -rf "$WORK"
}
trap cleanup EXIT
source bench/nginx_sink.sh

start_sink() {  # access log path
  # Written when each request completes, that is after the 204, before the relay can
  # acknowledge the row and claim the key's next one.
  nginx_sink_start "$WORK/ngx" "$PORT" "log_format qb '\$msec \$http_x_message_id \
\$http_x_message_key \$http_x_attempt \$status'; access_log $1 qb buffer=256k;"
}

stop_sink() { nginx_sink_quit "$WORK/ngx"; }

cpu_busy() {  # jiffies the machine's CPUs were not idle (all cores), from /proc/stat
  awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat
}

proc_cpu() {  # pids -> their user + system CPU seconds so far
  local p t=0
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    # The process may exit between the test and the read: count it as 0.
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$t $(getconf CLK_TCK)" | awk '{printf "%.2f", $1 / $2}'
}

prepare() {  # db, replicas: fresh database, migrated, backlog, one config per replica
  local db=$1 n=$2 i
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  for ((i = 1; i <= n; i++)); do
    cat >"$WORK/$db.$i.yml" <<YAML
database: {type: postgresql, url: "$base/$db", poolSize: $POOL, migrate: false}
server: {address: 127.0.0.1, httpPort: $((PORT + i))}
outbox: {pollIntervalMs: 50, batchSize: $BATCH, concurrency: $CONCURRENCY, claimTimeoutMs: $LEASE_MS}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$PORT", path: /events, timeoutMs: 30000}}
logging: {format: json, level: info}
YAML
  done
  "$QB" --config "$WORK/$db.1.yml" migrate >/dev/null 2>&1
  psql -q "$base/$db" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $KEYS),
           jsonb_build_object('i', i, 'pad', repeat('x', $PAD))
    FROM generate_series(1, $ROWS) AS i" -c "VACUUM ANALYZE outbox" \
    -c "\\copy (SELECT id, coalesce(key, ''), sequence FROM outbox) TO '$WORK/$db.rows.tsv'"
}

run_once() {  # replicas, round -> one JSON line on stdout
  local n=$1 round=$2 db="${PREFIX}_n$1" i remaining sample samples=0 active active_total=0 waits w
  echo "== round $round, $n replica(s): loading $ROWS rows" >&2
  prepare "$db" "$n"
  rm -f "$WORK/$db.access.log"  # nginx appends; a log from an earlier round must not remain
  start_sink "$WORK/$db.access.log"
  PIDS=()
  local start end_poll busy0 busy1
  busy0=$(cpu_busy)
  start=$(date +%s.%N)
  for ((i = 1; i <= n; i++)); do
    "$QB" --config "$WORK/$db.$i.yml" run 2>"$WORK/$db.$i.log" 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
    PIDS+=($!)
  done
  # Until nothing is pending or processing; meanwhile sample what this database's other active
  # sessions wait on (pg_stat_activity wait_event_type:wait_event, one word per waiting session;
  # for a lock: which statement waits on which, e.g. Lock:transactionid(ack<-claim)).
  : >"$WORK/$db.waits"
  while true; do
    sample=$(psql -Atq -F ' ' "$base/$db" -c "SELECT
        (SELECT count(*) FROM outbox WHERE state IN ('pending', 'processing')),
        (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
           AND pid <> pg_backend_pid() AND state = 'active'),
        (SELECT string_agg(a.wait_event_type || ':' || a.wait_event || CASE
             WHEN a.wait_event_type = 'Lock' THEN '(' || $(kind a) || '<-' || coalesce((SELECT
               $(kind b) FROM pg_stat_activity b WHERE b.pid = (pg_blocking_pids(a.pid))[1]
               LIMIT 1),
               '?') || ')' ELSE '' END, ' ')
           FROM pg_stat_activity a WHERE a.datname = current_database()
           AND a.pid <> pg_backend_pid() AND a.state = 'active' AND a.wait_event IS NOT NULL)")
    read -r remaining active waits <<<"$sample"
    samples=$((samples + 1))
    active_total=$((active_total + active))
    for w in $waits; do echo "$w"; done >>"$WORK/$db.waits"
    [ "$remaining" -eq 0 ] && break
    for p in "${PIDS[@]}"; do
      kill -0 "$p" 2>/dev/null || { echo "a replica exited early:" >&2; cat "$WORK/$db".*.log >&2; exit 1; }
    done
    if (($(date +%s) - ${start%.*} > TIMEOUT_S)); then
      echo "not drained after ${TIMEOUT_S}s ($remaining rows left)" >&2
      exit 1
    fi
    sleep 0.2
  done
  end_poll=$(date +%s.%N)
  busy1=$(cpu_busy)
  # CPU seconds of the replicas, of the PostgreSQL backends serving this database, of nginx.
  local relay_cpu pg_cpu ngx_cpu
  relay_cpu=$(proc_cpu "${PIDS[@]}")
  # shellcheck disable=SC2046
  pg_cpu=$(proc_cpu $(psql -Atq "$base/$db" -c "SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()"))
  # shellcheck disable=SC2046
  ngx_cpu=$(proc_cpu $(pgrep -P "$(cat "$WORK/ngx/nginx.pid")"))
  # Per replica: messages sent (its /metrics), then stop it and read its peak RSS.
  local sent_by=() rss=()
  for ((i = 1; i <= n; i++)); do
    sent_by+=("$(curl -s "http://127.0.0.1:$((PORT + i))/metrics" |
      awk '/^queuebox_outbox_messages_total\{status="sent"\}/ {n = int($2)} END {print n + 0}')")
  done
  for p in "${PIDS[@]}"; do kill -TERM "$p"; done
  for p in "${PIDS[@]}"; do wait "$p"; done
  PIDS=()
  for ((i = 1; i <= n; i++)); do
    rss+=("$(grep -o '"max_rss_kb":"[0-9]*"' "$WORK/$db.$i.log" | tail -1 | grep -o '[0-9]*' || echo 0)")
  done
  stop_sink
  local verdict
  if ! verdict=$(python3 bench/verify_delivery.py "$WORK/$db.rows.tsv" "$WORK/$db.access.log"); then
    echo "VERIFICATION FAILED ($n replicas, round $round): $verdict" >&2
    exit 1
  fi
  # Database side: states, the drain's span on the database clock, the claim statement's figures
  # (pg_stat_statements, per database; pg_stat_statements normalizes constants).
  local db_json
  db_json=$(psql -Atq "$base/$db" -c "SELECT json_build_object(
      'sent', count(*) FILTER (WHERE state = 'sent'),
      'not_sent', count(*) FILTER (WHERE state <> 'sent'),
      'max_attempt', max(attempt),
      'last_sent_epoch', EXTRACT(EPOCH FROM max(updated_at) FILTER (WHERE state = 'sent')),
      'first_claim_epoch', EXTRACT(EPOCH FROM min(claimed_at)))
    FROM outbox")
  # pg_stat_statements lives in the server's first database; figures per database.
  local claim_json
  claim_json=$(psql -Atq "$QB_TEST_PG_URL" -c "SELECT json_build_object(
      'claims', coalesce(sum(calls) FILTER (WHERE $CLAIM), 0),
      'claimed_rows', coalesce(sum(s.rows) FILTER (WHERE $CLAIM), 0),
      'claim_mean_ms', coalesce(sum(total_exec_time) FILTER (WHERE $CLAIM)
                                / nullif(sum(calls) FILTER (WHERE $CLAIM), 0), 0),
      'claim_buffers_per_call', coalesce(sum(shared_blks_hit + shared_blks_read) FILTER (WHERE $CLAIM)
                                / nullif(sum(calls) FILTER (WHERE $CLAIM), 0), 0),
      'acks', coalesce(sum(calls) FILTER (WHERE $ACK), 0),
      'ack_mean_ms', coalesce(sum(total_exec_time) FILTER (WHERE $ACK)
                              / nullif(sum(calls) FILTER (WHERE $ACK), 0), 0))
    FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '$db'")
  # Every statement of this database (pg_stat_statements): calls, rows, execution ms.
  local stmt_json sizes_json
  stmt_json=$(psql -Atq "$QB_TEST_PG_URL" -c "SELECT coalesce(json_agg(x ORDER BY x.total_ms DESC), '[]')
    FROM (SELECT left(regexp_replace(s.query, '\s+', ' ', 'g'), 70) AS statement,
                 sum(calls)::bigint AS calls, sum(s.rows)::bigint AS rows,
                 round(sum(total_exec_time)::numeric, 1) AS total_ms
          FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
          WHERE d.datname = '$db' GROUP BY 1) AS x")
  # Claim sizes: every row of one claim keeps the claim's claimed_at (the acknowledgement keeps it).
  sizes_json=$(psql -Atq "$base/$db" -c "SELECT json_build_object(
      'claims_seen', count(*), 'le_10', count(*) FILTER (WHERE c <= 10),
      'le_50', count(*) FILTER (WHERE c <= 50), 'le_100', count(*) FILTER (WHERE c <= 100),
      'le_250', count(*) FILTER (WHERE c <= 250), 'median', percentile_disc(0.5) WITHIN GROUP (ORDER BY c))
    FROM (SELECT count(*) AS c FROM outbox WHERE state = 'sent' GROUP BY claimed_at) AS g")
  python3 - "$n" "$round" "$start" "$end_poll" "$verdict" "$db_json" "$claim_json" "${sent_by[*]}" "${rss[*]}" \
    "$samples" "$active_total" "$WORK/$db.waits" "$busy0" "$busy1" "$(getconf CLK_TCK)" "$relay_cpu" \
    "$pg_cpu" "$ngx_cpu" "$stmt_json" "$sizes_json" "$QB_LABEL" <<'PY'
import json, os, sys
n, rnd, start, end_poll = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
verdict, db = json.loads(sys.argv[5]), json.loads(sys.argv[6])
db.update(json.loads(sys.argv[7]))
sent_by = [int(x) for x in sys.argv[8].split()]
rss = [int(x) for x in sys.argv[9].split()]
samples, active_total = int(sys.argv[10]), int(sys.argv[11])
waits = {}
for w in open(sys.argv[12]).read().split():
    waits[w] = waits.get(w, 0) + 1
busy0, busy1, tck = (int(x) for x in sys.argv[13:16])
relay_cpu, pg_cpu, ngx_cpu = (float(x) for x in sys.argv[16:19])
seconds = float(db["last_sent_epoch"]) - start
stmts, sizes, label = json.loads(sys.argv[19]), json.loads(sys.argv[20]), sys.argv[21]
per10k = 10000 / max(1, db["sent"])
statements = [{"statement": x["statement"], "calls_per_10k": round(x["calls"] * per10k, 1),
               "rows_per_call": round(x["rows"] / x["calls"], 1) if x["calls"] else 0,
               "ms_per_10k": round(float(x["total_ms"]) * per10k, 1)} for x in stmts[:8]]
print(json.dumps({
  "binary": label, "replicas": n, "round": rnd,
  "msg_per_s": round(db["sent"] / seconds, 1), "seconds": round(seconds, 3),
  "msg_per_s_db_clock": round(db["sent"] / (float(db["last_sent_epoch"]) - float(db["first_claim_epoch"])), 1),
  "drain_seen_by_poll_s": round(end_poll - start, 3),
  "delivered": verdict["delivered_distinct"], "receipts": verdict["receipts"],
  "duplicates": verdict["duplicates"], "verifier": verdict["verdict"],
  "missing": verdict["missing"], "order_violations": verdict["order_violations"],
  "rows_not_sent": db["not_sent"], "max_attempt": db["max_attempt"],
  "sent_per_replica": sent_by, "peak_rss_mb_per_replica": [round(r / 1024, 1) for r in rss],
  "claims": int(db["claims"]), "rows_per_claim": round(db["claimed_rows"] / db["claims"], 1) if db["claims"] else 0,
  "claim_mean_ms": round(db["claim_mean_ms"], 2),
  "claim_buffers_per_call": round(db["claim_buffers_per_call"]),
  "acks": int(db["acks"]), "ack_mean_ms": round(db["ack_mean_ms"], 2),
  "activity_samples": samples, "active_sessions_per_sample": round(active_total / samples, 2),
  "wait_events_seen": dict(sorted(waits.items(), key=lambda kv: -kv[1])),
  "machine_cpu_busy_s": round((busy1 - busy0) / tck, 2),
  "machine_cpu_busy_fraction": round((busy1 - busy0) / tck / ((end_poll - start) * os.cpu_count()), 3),
  "cpu_s": {"replicas": relay_cpu, "postgres_backends": pg_cpu, "nginx": ngx_cpu},
  "claim_sizes": sizes, "empty_claims": int(db["claims"]) - int(sizes["claims_seen"]),
  "statements_per_10k_msgs": statements,
}))
PY
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
}

: >"$WORK/runs.jsonl"
for ((r = 1; r <= ROUNDS; r++)); do
  order=$REPLICAS
  if ((r % 2 == 0)); then order=$(echo "$REPLICAS" | tr ' ' '\n' | tac | tr '\n' ' '); fi
  bins=$QB_BINS
  if ((r % 2 == 0)); then bins=$(echo "$QB_BINS" | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for n in $order; do
    for b in $bins; do
      QB_LABEL=${b%%=*}
      QB=${b#*=}
      run_once "$n" "$r" >>"$WORK/runs.jsonl"  # not in a pipeline: a failure must reach the trap
      tail -1 "$WORK/runs.jsonl" >&2
    done
  done
done

PG_DURABILITY=$(psql -qAt "$QB_TEST_PG_URL" -c "SELECT 'fsync ' || current_setting('fsync')
  || ', synchronous_commit ' || current_setting('synchronous_commit')")
python3 - "$WORK/runs.jsonl" "$ROWS" "$KEYS" "$BATCH" "$CONCURRENCY" "$POOL" "$LEASE_MS" \
  "$PG_DURABILITY" >"$OUT" <<'PY'
import json, os, platform, statistics, subprocess, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows, keys, batch, conc, pool, lease = (int(x) for x in sys.argv[2:8])
labels = sorted({r["binary"] for r in runs})
def summarize(runs):
  per_n = {}
  for r in runs:
    per_n.setdefault(r["replicas"], []).append(r)
  summary = {}
  for n, rs in sorted(per_n.items()):
    summary[str(n)] = {
        "msg_per_s_median": round(statistics.median(r["msg_per_s"] for r in rs), 1),
        "seconds_median": round(statistics.median(r["seconds"] for r in rs), 3),
        "msg_per_s_runs": [r["msg_per_s"] for r in rs],
        "delivered": [r["delivered"] for r in rs],
        "duplicates": [r["duplicates"] for r in rs],
        "verifier": "pass" if all(r["verifier"] == "pass" for r in rs) else "fail",
        "peak_rss_mb_per_replica_max": max(max(r["peak_rss_mb_per_replica"]) for r in rs),
        "claims_median": statistics.median(r["claims"] for r in rs),
        "acks_median": statistics.median(r["acks"] for r in rs),
        "postgres_cpu_s_median": statistics.median(r["cpu_s"]["postgres_backends"] for r in rs),
    }
  one = summary.get("1", {}).get("msg_per_s_median")
  ratios = {f"{n}/1": round(s["msg_per_s_median"] / one, 3)
            for n, s in summary.items() if one and n != "1"}
  return summary, ratios
if labels == ["default"]:
  summary, ratios = summarize(runs)
else:
  summary, ratios = {}, {}
  for l in labels:
    summary[l], ratios[l] = summarize([r for r in runs if r["binary"] == l])
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
print(json.dumps({
  "benchmark": "Scale-out: N queuebox replicas (run, SIGTERM once drained) on one PostgreSQL database "
               "-> one HTTP sink (nginx 204, keep-alive, 1 worker logging arrivals); "
               "msg/s = rows / (last acknowledgement - start of the N processes); "
               "each run verified by bench/verify_delivery.py (every id received, per-key first "
               "receipts in sequence order)",
  "rows": rows, "keys": keys, "payload_bytes": 1024,
  "per_replica": {"batch_size": batch, "concurrency": conc, "pool_size": pool,
                  "claim_timeout_ms": lease, "poll_interval_ms": 50},
  "rounds": max(r["round"] for r in runs),
  "summary": summary, "ratios": ratios,
  "runs": runs,
  "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
              "loadavg_after": open("/proc/loadavg").read().split()[:3],
              "postgres": "15, " + sys.argv[8]},
}, indent=2))
PY
cat "$OUT"
