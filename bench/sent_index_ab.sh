#!/usr/bin/env bash
# What V26's idx_outbox_sent_updated costs the claim + ack path: bench_floor (the relay's claim
# and fenced ack statements back to back, batch 100, no publishing) on a fresh backlog with the
# index (B) and with it dropped (A), alternated ROUNDS times, fsync off and on.
#
#   flock /tmp/queuebox-bench.lock env -u PG_PORT bash bench/sent_index_ab.sh
#   ROWS=200000 KEYS=1000 ROUNDS=3 DURABILITY="off on" ...
# Prints one JSON line per run and the median ratio B/A per durability.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-200000}
KEYS=${KEYS:-1000}
ROUNDS=${ROUNDS:-3}
DURABILITY=${DURABILITY:-"off on"}
BUILD_DIR=${BUILD_DIR:-build}
QB="$BUILD_DIR/apps/queuebox/queuebox"
WORK=$(mktemp -d /tmp/qb-sent-index.XXXXXX)
source bench/pg_durability.sh
trap 'durability_cleanup; rm -rf "$WORK"' EXIT

run() {  # mode side(A: dropped, B: kept) -> one JSON line
  local db=qb_sent_index
  psql -q "$PGURL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  printf 'database: {type: postgresql, url: "%s/%s"}\nroutes: [{topicPattern: "**", destination: s}]\ndestinations: {s: {type: http, baseUrl: "http://127.0.0.1:9"}}\n' \
    "$PGBASE" "$db" >"$WORK/qb.yml"
  "$QB" --config "$WORK/qb.yml" migrate >/dev/null 2>&1
  [ "$2" = A ] && psql -q "$PGBASE/$db" -c "DROP INDEX idx_outbox_sent_updated"
  psql -q "$PGBASE/$db" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $KEYS), jsonb_build_object('i', i, 'pad', repeat('x', 960))
    FROM generate_series(1, $ROWS) AS i" -c "ANALYZE outbox" -c "CHECKPOINT"
  local floor
  floor=$("$BUILD_DIR/bench/bench_floor" --config "$WORK/qb.yml")
  python3 -c 'import json,sys; f=json.loads(sys.argv[3]); print(json.dumps({"fsync": sys.argv[1], "side": sys.argv[2], "rows_per_s": round(f["rows_per_s"], 1)}))' \
    "$1" "$2" "$floor"
}

for mode in $DURABILITY; do
  use_durability "$mode"
  for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then run "$mode" A; run "$mode" B; else run "$mode" B; run "$mode" A; fi
  done
done | tee "$WORK/runs.jsonl"
python3 - "$WORK/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
for mode in sorted({r["fsync"] for r in runs}):
    a = [r["rows_per_s"] for r in runs if r["fsync"] == mode and r["side"] == "A"]
    b = [r["rows_per_s"] for r in runs if r["fsync"] == mode and r["side"] == "B"]
    print(json.dumps({"fsync": mode, "without_index_median": statistics.median(a),
                      "with_index_median": statistics.median(b),
                      "with_over_without": round(statistics.median(b) / statistics.median(a), 3)}))
PY
