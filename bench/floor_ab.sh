#!/usr/bin/env bash
# Two bench_floor binaries (the relay's claim + fenced ack statements back to back, no
# publishing) on the same backlog, alternated A B, B A, ... in one run: an A/B of the claim
# statement at QueueBox's defaults (batch 100). For each KEYS value, ROUNDS pairs, each run on a
# fresh database with ROWS rows of ~1 KiB over KEYS keys (inserted round-robin, as
# defaults_ab.sh does). fsync off (the test cluster) unless PG_DURABLE=1 with its own
# QB_SVC_DIR and PG_PORT (bench/pg_durability.sh's cluster).
#
#   flock /tmp/queuebox-bench.lock env -u PG_PORT bash bench/floor_ab.sh <bench_floor A> <bench_floor B>
#   KEYS_LIST="10 1000" ROWS=50000 ROUNDS=3 BATCH=100 OUT=bench/results/floor_ab.json ...
#
# Writes $OUT: every run, and per KEYS the median rows/s of each side and B over A.
set -euo pipefail
cd "$(dirname "$0")/.."
A=$(realpath "$1")
B=$(realpath "$2")
KEYS_LIST=${KEYS_LIST:-"10 1000"}
ROWS=${ROWS:-50000}
ROUNDS=${ROUNDS:-3}
BATCH=${BATCH:-100}
PAD=${PAD:-960}
OUT=${OUT:-bench/results/floor_ab.json}
QB=${QB_BIN:-build/apps/queuebox/queuebox}  # migrates each database
WORK=$(mktemp -d /tmp/qb-floor-ab.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
bash scripts/services.sh start pg >/dev/null
eval "$(bash scripts/services.sh env)"
base=${QB_TEST_PG_URL%/*}
export PGOPTIONS="-c client_min_messages=warning"
: >"$WORK/runs.jsonl"

run() {  # side binary keys
  local db=qb_floor_ab
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  cat >"$WORK/floor.yml" <<YAML
database: {type: postgresql, url: "$base/$db"}
outbox: {batchSize: $BATCH}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:9", path: /events}}
YAML
  "$QB" --config "$WORK/floor.yml" migrate >/dev/null 2>&1
  psql -q "$base/$db" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $3), jsonb_build_object('i', i, 'pad', repeat('x', $PAD))
    FROM generate_series(1, $ROWS) AS i" -c "ANALYZE outbox" -c "CHECKPOINT"
  local out
  out=$("$2" --config "$WORK/floor.yml")
  python3 -c 'import json,sys; r=json.loads(sys.argv[3]); r.update({"side": sys.argv[1], "keys": int(sys.argv[2]), "loadavg": open("/proc/loadavg").read().split()[:3]}); print(json.dumps(r))' \
    "$1" "$3" "$out" | tee -a "$WORK/runs.jsonl" >&2
}

for keys in $KEYS_LIST; do
  for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) = 1 ]; then run A "$A" "$keys"; run B "$B" "$keys"
    else run B "$B" "$keys"; run A "$A" "$keys"; fi
  done
done
psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS qb_floor_ab WITH (FORCE)"

python3 - "$WORK/runs.jsonl" "$OUT" "$A" "$B" "$ROWS" "$BATCH" <<'PY'
import json, platform, statistics, sys
runs_file, out, a, b, rows, batch = sys.argv[1:7]
runs = [json.loads(l) for l in open(runs_file) if l.strip()]
summary = {}
for keys in dict.fromkeys(r["keys"] for r in runs):
    side = {s: [r["rows_per_s"] for r in runs if r["keys"] == keys and r["side"] == s] for s in "AB"}
    ma, mb = statistics.median(side["A"]), statistics.median(side["B"])
    summary[str(keys)] = {"A_runs": side["A"], "B_runs": side["B"], "A": round(ma, 1),
                          "B": round(mb, 1), "B_over_A": round(mb / ma, 3)}
res = {"benchmark": "bench/floor_ab.sh: two bench_floor binaries alternated on fresh backlogs",
       "A": a, "B": b, "rows": int(rows), "batch": int(batch), "summary": summary, "runs": runs,
       "machine": {"host": platform.node(), "cpus": __import__("os").cpu_count()}}
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
