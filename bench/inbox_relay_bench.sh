#!/usr/bin/env bash
# The inbox relay's forwarding rate against the outbox relay's drain rate (issue 14: forwarding
# at least 70 % of the outbox drain), in one run, on a private PostgreSQL 15 cluster started
# twice: fsync on (synchronous_commit on, what users run), then fsync off. For each setting:
#
#   outbox   ROWS outbox rows over KEYS keys (a backlog); the queuebox binary drains them into
#            nginx (204, keep-alive). Rate: ROWS / (last updated_at - first claimed_at), database
#            clock.
#   inbox    ROWS pending push rows in the inbox over KEYS aggregates (a backlog); the same binary
#            and settings forward them to the outbox (the inbox relay) and deliver them (the outbox
#            relay, running at the same time, as it does in production). Forward rate: ROWS /
#            (last processed_at - first claimed_at of the inbox); end to end: ROWS / (last outbox
#            updated_at - first inbox claimed_at).
#
# Settings: QueueBox's defaults (outbox batchSize 100, concurrency 8; inbox.relay.batchSize 100),
# or BATCH/CONCURRENCY/INBOX_BATCH to compare others; WORKERS sets inbox.relay.workers (builds
# with lanes only).
#
# A/B in one run: QB_BIN_BEFORE=<binary> measures that binary too (outbox and inbox case, label
# "before", without WORKERS), right before QB_BIN ("after") at each fsync setting.
#
#   bash bench/inbox_relay_bench.sh      # ROWS=50000 KEYS=1000 PAD=960
#
# Needs root (the cluster runs as user postgres). Writes bench/results/inbox_relay.json and prints
# it. On a shared machine: flock /tmp/queuebox-bench.lock bash bench/inbox_relay_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-50000}
KEYS=${KEYS:-1000}
PAD=${PAD:-960}
BATCH=${BATCH:-100}
CONCURRENCY=${CONCURRENCY:-8}
INBOX_BATCH=${INBOX_BATCH:-100}
PORT=${PORT:-18481}
PG_PORT=${PG_PORT:-18491}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/inbox_relay.json}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

cmake -S . -B "$BUILD_DIR" -G Ninja >/dev/null
cmake --build "$BUILD_DIR" --target queuebox >/dev/null
QB="${QB_BIN:-$BUILD_DIR/apps/queuebox/queuebox}"
QB_BEFORE="${QB_BIN_BEFORE:-}"
WORKERS=${WORKERS:-}
WORK=$(mktemp -d)
chown postgres:postgres "$WORK"
PGDATA="$WORK/pg"
BASE="postgresql://postgres@127.0.0.1:$PG_PORT"
DB=qb_bench_inbox
RELAY_PID=
pg_ctl() { runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PGDATA" "$@"; }
source bench/nginx_sink.sh
cleanup() {
  # The relay may run in a pipeline's subshell (case | tee): its pid is in a file
  [ -f "$WORK/relay.pid" ] && kill "$(cat "$WORK/relay.pid")" 2>/dev/null
  nginx_sink_stop "$WORK/nginx"
  pg_ctl -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
runuser -u postgres -- "$PG_BIN/initdb" -D "$PGDATA" -U postgres -A trust >/dev/null
nginx_sink_start "$WORK/nginx" "$PORT"

start_pg() {  # fsync on|off
  pg_ctl -l "$WORK/pg.log" -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $WORK \
    -c fsync=$1 -c synchronous_commit=on -c max_connections=100" start \
    >/dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
}
stop_pg() { pg_ctl -m fast -w stop >/dev/null; }
q() { psql -qtAX "$BASE/$DB" -c "$1"; }

write_config() {  # file, extra inbox.relay settings
  cat >"$1" <<YAML
database: {type: postgresql, url: "$BASE/$DB", poolSize: 10}
server: {address: 127.0.0.1, httpPort: $((PORT + 1))}
outbox: {batchSize: $BATCH, concurrency: $CONCURRENCY}
inbox: {relay: {batchSize: $INBOX_BATCH$2}}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$PORT", path: /events}}
logging: {format: json, level: warn}
YAML
}
write_config "$WORK/after.yml" "${WORKERS:+, workers: $WORKERS}"
write_config "$WORK/before.yml" ""
LABEL=after
CFG="$WORK/after.yml"

fresh_db() {
  psql -q "$BASE/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
  "$QB" --config "$CFG" migrate >/dev/null 2>&1
}

# Runs the relay until every outbox row is sent (ROWS of them), then stops it.
relay_until_sent() {
  "$QB" --config "$CFG" run >"$WORK/relay.log" 2>&1 &
  RELAY_PID=$!
  echo "$RELAY_PID" >"$WORK/relay.pid"
  local deadline=$((SECONDS + 600))
  while [ "$(q "SELECT count(*) FROM outbox WHERE state = 'sent'")" != "$ROWS" ]; do
    if [ $SECONDS -gt $deadline ] || ! kill -0 "$RELAY_PID" 2>/dev/null; then
      echo "the relay did not finish; its log:" >&2
      tail -20 "$WORK/relay.log" >&2
      exit 1
    fi
    sleep 0.2
  done
  kill -TERM "$RELAY_PID"
  wait "$RELAY_PID" || true
  rm -f "$WORK/relay.pid"
  RELAY_PID=
}

outbox_case() {  # fsync -> JSON line
  fresh_db
  q "INSERT INTO outbox (topic, key, payload)
     SELECT 'bench.event', 'key-' || (i % $KEYS), jsonb_build_object('i', i, 'pad', repeat('x', $PAD))
     FROM generate_series(1, $ROWS) AS i; ANALYZE outbox" >/dev/null
  relay_until_sent
  q "SELECT json_build_object('fsync', '$1', 'case', 'outbox', 'bin', '$LABEL', 'rows', count(*),
       'drain_per_s', round((count(*) / extract(epoch FROM max(updated_at) - min(claimed_at)))::numeric, 1))
     FROM outbox"
}

inbox_case() {  # fsync -> JSON line
  fresh_db
  q "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, consumption)
     SELECT 'bench', 'idem-' || i, 'key-' || (i % $KEYS), 'bench.event',
            jsonb_build_object('i', i, 'pad', repeat('x', $PAD)), 'push'
     FROM generate_series(1, $ROWS) AS i; ANALYZE inbox" >/dev/null
  relay_until_sent
  q "SELECT json_build_object('fsync', '$1', 'case', 'inbox', 'bin', '$LABEL', 'rows', (SELECT count(*) FROM inbox WHERE state = 'processed'),
       'forward_per_s', round(($ROWS / extract(epoch FROM (SELECT max(processed_at) - min(claimed_at) FROM inbox)))::numeric, 1),
       'end_to_end_per_s', round(($ROWS / extract(epoch FROM (SELECT max(updated_at) FROM outbox) - (SELECT min(claimed_at) FROM inbox)))::numeric, 1))"
}

LINES="$WORK/lines.jsonl"
for fsync in on off; do
  start_pg "$fsync"
  echo "== fsync=$fsync" >&2
  if [ -n "$QB_BEFORE" ]; then
    AFTER_QB=$QB QB=$QB_BEFORE LABEL=before CFG="$WORK/before.yml"
    outbox_case "$fsync" | tee -a "$LINES" >&2
    inbox_case "$fsync" | tee -a "$LINES" >&2
    QB=$AFTER_QB LABEL=after CFG="$WORK/after.yml"
  fi
  outbox_case "$fsync" | tee -a "$LINES" >&2
  inbox_case "$fsync" | tee -a "$LINES" >&2
  stop_pg
done

python3 - "$LINES" "$OUT" <<PY
import json, platform, subprocess, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ratios = {}
for b in sorted({l["bin"] for l in lines}):
    for f in ("on", "off"):
        o = next(l for l in lines if l["fsync"] == f and l["case"] == "outbox" and l["bin"] == b)
        i = next(l for l in lines if l["fsync"] == f and l["case"] == "inbox" and l["bin"] == b)
        ratios[b + " fsync " + f] = {
            "forward_over_outbox_drain": round(i["forward_per_s"] / o["drain_per_s"], 3),
            "end_to_end_over_outbox_drain": round(i["end_to_end_per_s"] / o["drain_per_s"], 3)}
out = {
    "benchmark": "inbox relay forwarding vs outbox drain, PostgreSQL 15 -> nginx (204, keep-alive)",
    "rows": $ROWS, "keys": $KEYS, "payload_pad_bytes": $PAD,
    "settings": {"outbox.batchSize": $BATCH, "outbox.concurrency": $CONCURRENCY,
                 "inbox.relay.batchSize": $INBOX_BATCH, "inbox.relay.workers": "${WORKERS:-default}"},
    "before": "$QB_BEFORE",
    "goal": "forward_over_outbox_drain >= 0.70",
    "results": lines, "ratios": ratios,
    "machine": {"cpus": subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip(),
                "kernel": platform.release()},
}
json.dump(out, open(sys.argv[2], "w"), indent=2)
print(json.dumps(out, indent=2))
PY
