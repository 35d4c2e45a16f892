#!/usr/bin/env bash
# EXPLAIN ANALYZE of the PostgreSQL claim as one of N replicas sees it (key affinity), on a
# backlog below the size where the planner's choice of window plan flips (docs/claim-plans.md,
# "Window under key affinity"). Prints the claim's total buffers and time and the window's plan
# node, for share 0 of REPLICAS.
#
#   bash bench/affinity_window_plan.sh   # BUILD_DIR=build ROWS=60000 KEYS=1000 REPLICAS=4
#
# The claim's text is the relay's own: bench_floor runs one claim with log_min_duration_statement
# = 0 on the database and the statement is read back from the server log (PG_LOG). The EXPLAIN
# runs in a transaction that is rolled back, with the parameters of a first claim (window from
# the beginning, no walk rest, share key count unknown).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
ROWS=${ROWS:-60000}
KEYS=${KEYS:-1000}
REPLICAS=${REPLICAS:-4}
LOG=${PG_LOG:-/tmp/queuebox-svc/pg/server.log}
DB=qb_affinity_plan

bash scripts/services.sh start pg >/dev/null
eval "$(bash scripts/services.sh env)"
cmake --build "$BUILD_DIR" --target queuebox bench_floor >/dev/null
base=${QB_TEST_PG_URL%/*}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"; psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"' EXIT
cat >"$WORK/c.yml" <<YAML
database: {type: postgresql, url: "$base/$DB", poolSize: 1}
outbox: {batchSize: 500}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:9", path: /x}}
YAML
psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
"$BUILD_DIR/apps/queuebox/queuebox" --config "$WORK/c.yml" migrate 2>/dev/null
fill() {
  psql -q "$base/$DB" -c "TRUNCATE outbox" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $KEYS), jsonb_build_object('i', i, 'pad', repeat('x', 960))
    FROM generate_series(1, $ROWS) AS i" -c "VACUUM ANALYZE outbox"
}
fill
# One claim with every statement logged; the claim's text is the last "WITH RECURSIVE qb_now".
from=$(wc -c <"$LOG")
psql -q "$base/$DB" -c "ALTER DATABASE $DB SET log_min_duration_statement = 0"
"$BUILD_DIR/bench/bench_floor" --config "$WORK/c.yml" >/dev/null 2>&1 &
sleep 1
kill $! 2>/dev/null || true
wait 2>/dev/null || true
psql -q "$base/$DB" -c "ALTER DATABASE $DB RESET log_min_duration_statement"
tail -c +"$((from + 1))" "$LOG" | python3 -c '
import re, sys
log = sys.stdin.read()
i = log.rfind("WITH RECURSIVE qb_now")
stmt = log[i:]
end = re.search(r"\n\d{4}-\d\d-\d\d ", stmt)
print(stmt[:end.start()] if end else stmt)' >"$WORK/claim.sql"
fill
{
  echo "BEGIN; PREPARE c AS $(cat "$WORK/claim.sql");"
  echo "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY ON)"
  echo "  EXECUTE c(500, 60000, 1000, '-infinity', 0, '', true, $REPLICAS, 0, true, -1);"
  echo "ROLLBACK;"
} | psql -q "$base/$DB" >"$WORK/plan.txt"
echo "claim as replica 0 of $REPLICAS over $ROWS rows, $KEYS keys:"
grep -E "^ Update on" "$WORK/plan.txt"
grep -E "^   Buffers" "$WORK/plan.txt" | head -1
grep -E "Execution Time" "$WORK/plan.txt"
echo "its window:"
awk '/CTE qb_win/{p=1} p&&/CTE qb_fast/{exit} p' "$WORK/plan.txt" | grep -E "Scan|Sort|Limit|Buffers" | head -8
