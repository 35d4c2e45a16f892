#!/usr/bin/env bash
# Claim cost against backlog size (issue 6 item 1) and statements per 10,000 messages (item 8).
# Drains PostgreSQL outboxes with the relay's own claim + fenced MarkSent, no publishing
# (bench/claim_backlog.cc), batch 500, from three backlogs with the minimum payload ('{}'):
#   small:   10,000 rows over 1,000 keys (round-robin), a fresh database each round
#   uniform: 1,000,000 rows over 1,000 keys (round-robin)
#   skewed:  100,000 rows of key 'hot' inserted first, then 900,000 rows over 999 other keys
# interleaved: each of ROUNDS rounds drains CHUNK rows from each backlog in turn, so a noisy
# moment on the shared machine falls on all three alike (20 x 10,000 = 200,000 rows drained from
# each 1M backlog, which stays above 800,000 rows deep). Reports rows/s, each backlog's rate over
# the small one's, the PostgreSQL backends' CPU time per claim + acknowledgement (and the small
# one's over it: the same ratio measured without the waits for a core), and from
# pg_stat_statements the statements issued per 10,000 messages (each
# backlog has its own database, so the counts are read per database without resetting the view).
#
#   bash bench/claim_backlog_bench.sh                 # writes bench/results/claim_backlog.json
#   ROUNDS=10 BATCH=200 bash bench/claim_backlog_bench.sh
#   VACUUM=1 OUT=bench/results/claim_backlog_vacuum.json bash bench/claim_backlog_bench.sh
#   AB_ID=1 ROUNDS=10 OUT=bench/results/claim_backlog_id_ab.json bash bench/claim_backlog_bench.sh
# AB_ID=1: A/B of the id default in one run: every backlog twice, `<name>_rand` with the id
# default set back to gen_random_uuid() after the migrations (before V21) and `<name>_v7` with
# the migrations' own (V21's time-ordered queuebox_uuid_v7()), drained side by side each round;
# each variant's ratios are over its own small backlog.
set -euo pipefail
cd "$(dirname "$0")/.."
BATCH=${BATCH:-500}
ROUNDS=${ROUNDS:-20}
CHUNK=${CHUNK:-10000}
# VACUUM=1: VACUUM the two 1M backlogs after each round (not timed), as autovacuum would in a
# running system; shows what the claim costs without the dead index entries of the rows sent.
VACUUM=${VACUUM:-0}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/claim_backlog.json}
PREFIX=${PREFIX:-qb_claim_bench}
AB_ID=${AB_ID:-0}
if [ "$AB_ID" = 1 ]; then VARIANTS="_rand _v7"; else VARIANTS="-"; fi

bash scripts/services.sh start pg >/dev/null
eval "$(bash scripts/services.sh env)"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
# CLAIM_BACKLOG_BIN: another build's bench/claim_backlog (an A/B of the claim), used as it is.
if [ -z "${CLAIM_BACKLOG_BIN:-}" ]; then
  cmake --build "$BUILD_DIR" --target claim_backlog >/dev/null
fi
CLAIM_BACKLOG_BIN=${CLAIM_BACKLOG_BIN:-$BUILD_DIR/bench/claim_backlog}
base=${QB_TEST_PG_URL%/*}
psql -q "$QB_TEST_PG_URL" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"

prepare() {  # db, then INSERT statements
  local db=$1
  shift
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  # The bundled migrations in version order (what `queuebox migrate` applies).
  for f in $(ls src/store/postgres/migrations/V*__*.sql | sort -t V -k2 -n); do
    psql -q -v ON_ERROR_STOP=1 "$base/$db" -f "$f" >/dev/null 2>&1
  done
  case $db in  # AB_ID=1's A side: random ids, as before V21
    *_rand*) psql -q "$base/$db" -c "ALTER TABLE outbox ALTER COLUMN id SET DEFAULT gen_random_uuid()" ;;
  esac
  for sql in "$@"; do psql -q "$base/$db" -c "$sql"; done
  psql -q "$base/$db" -c "VACUUM ANALYZE outbox"
}

statements() {  # db -> JSON {claims, acks, renewals}: calls of the relay's statements in that db
  # pg_stat_statements normalizes constants ('sent' becomes $3), so match on the shape.
  psql -Atq "$QB_TEST_PG_URL" -c "SELECT json_build_object(
      'claims', coalesce(sum(calls) FILTER (WHERE query LIKE 'WITH RECURSIVE qb_now%'), 0),
      'acks', coalesce(sum(calls) FILTER (WHERE query LIKE 'UPDATE %SET \"state\" = \$%unnest%'
                                          AND query NOT LIKE '%last_error%'), 0),
      'renewals', coalesce(sum(calls) FILTER (WHERE query LIKE
                           'UPDATE %SET \"lease_expires_at\" = clock_timestamp()%'), 0))
    FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '$1'"
}

ins() {  # rows, key expression over i
  echo "INSERT INTO outbox (topic, key, payload) SELECT 'bench', $2, '{}'
        FROM generate_series(1, $1) AS i"
}

# Interleaved, so the machine's noise falls on every backlog alike: ROUNDS rounds, each drains
# CHUNK rows from a fresh 10,000-row database (one per round, drained completely, no empty claim
# timed), then CHUNK rows from the uniform 1M backlog, then CHUNK rows from the skewed one.
BACKLOG_ARGS=()
CPU_GROUPS=()
for v in $VARIANTS; do
  [ "$v" = - ] && v=""
  SMALL_URLS=""
  for r in $(seq 1 "$ROUNDS"); do
    echo "== small$v $r: loading" >&2
    prepare "${PREFIX}_small${v}_$r" "$(ins "$CHUNK" "'key-' || (i % 1000)")"
    SMALL_URLS="$SMALL_URLS${SMALL_URLS:+,}$base/${PREFIX}_small${v}_$r"
  done
  echo "== uniform$v: loading" >&2
  prepare "${PREFIX}_uniform$v" "$(ins 1000000 "'key-' || (i % 1000)")"
  echo "== skewed$v: loading" >&2
  prepare "${PREFIX}_skewed$v" "$(ins 100000 "'hot'")" \
    "$(ins 900000 "'key-' || (i % 999)")"
  BACKLOG_ARGS+=(--backlog "small$v=$SMALL_URLS" --backlog "uniform$v=$base/${PREFIX}_uniform$v"
                 --backlog "skewed$v=$base/${PREFIX}_skewed$v")
  CPU_GROUPS+=("small$v=^${PREFIX}_small${v}_[0-9]" "uniform$v=^${PREFIX}_uniform$v\$"
               "skewed$v=^${PREFIX}_skewed$v\$")
done
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== draining: $ROUNDS rounds of $CHUNK rows per backlog (batch $BATCH)" >&2
DRAIN_OUT=$(mktemp)
"$CLAIM_BACKLOG_BIN" --batch "$BATCH" --rounds "$ROUNDS" --chunk "$CHUNK" \
  --hot-key hot $([ "$VACUUM" = 1 ] && echo --vacuum-between-rounds) "${BACKLOG_ARGS[@]}" \
  >"$DRAIN_OUT" &
DRAIN_PID=$!
# CPU seconds of the PostgreSQL backends per backlog while the drain runs (bench/backend_cpu.py):
# steadier than wall time on a shared machine, and it tells the database's cost from the client's.
CPU=$(python3 bench/backend_cpu.py "$DRAIN_PID" "$QB_TEST_PG_URL" "${CPU_GROUPS[@]}")
wait "$DRAIN_PID"
DRAIN=$(cat "$DRAIN_OUT")
rm -f "$DRAIN_OUT"
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
echo "$DRAIN" >&2
STMTS=$(for v in $VARIANTS; do
  [ "$v" = - ] && v=""
  for db in uniform skewed; do echo "\"$db$v\": $(statements "${PREFIX}_$db$v"),"; done
  echo "\"small$v\": $(statements "${PREFIX}_small${v}_1"),"
done)
STMTS="{${STMTS%,}}"
for v in $VARIANTS; do
  [ "$v" = - ] && v=""
  for r in $(seq 1 "$ROUNDS"); do
    psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS ${PREFIX}_small${v}_$r WITH (FORCE)"
  done
  for db in uniform skewed; do
    psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS ${PREFIX}_$db$v WITH (FORCE)"
  done
done

python3 - "$DRAIN" "$STMTS" "$BATCH" "$ROUNDS" "$CHUNK" "$LOAD_START" "$LOAD_END" "$VACUUM" \
  "$CPU" "$VARIANTS" >"$OUT" <<'PY'
import json, os, platform, subprocess, sys
drain, stmts = json.loads(sys.argv[1]), json.loads(sys.argv[2])
backend_cpu = json.loads(sys.argv[9])
batch, rounds, chunk = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
pg = subprocess.run(["psql", "-Atq", os.environ["QB_TEST_PG_URL"], "-c", "SHOW server_version"],
                    capture_output=True, text=True).stdout.strip()
variants = ["" if v == "-" else v for v in sys.argv[10].split()]
def cpu_ms(name):  # backend CPU ms per claim + acknowledgement
    return 1000 * backend_cpu.get(name, 0) / drain[name]["claims"] if drain[name]["claims"] else None
def entry(name, v=""):
    name += v
    small = "small" + v
    base = drain[small]["rows_per_s"]
    d, st = drain[name], stmts[name]
    rows = chunk if name == small else d["rows"]  # statements of one small database
    per = lambda n: round(10000 * n / rows, 1) if rows else None
    return {"rows_drained": d["rows"], "hot_key_rows": d["hot_key_rows"], "claims": d["claims"],
            "seconds": round(d["seconds"], 2), "rows_per_s": round(d["rows_per_s"], 1),
            "ms_per_claim": round(d["ms_per_claim"], 2),
            "vs_small": round(d["rows_per_s"] / base, 3) if base else None,
            "backend_cpu_ms_per_claim": round(cpu_ms(name), 2),
            "backend_cpu_vs_small": round(cpu_ms(small) / cpu_ms(name), 3) if cpu_ms(name) else None,
            "rows_per_s_by_round": d["rows_per_s_by_round"],
            "statements_per_10k_messages": {"claims": per(st["claims"]), "acks": per(st["acks"]),
                                            "renewals": per(st["renewals"])}}
print(json.dumps({
  "benchmark": "claim + fenced MarkSent drain, no publishing (bench/claim_backlog_bench.sh)",
  "batch_size": batch, "payload": "{}",
  "method": f"interleaved: {rounds} rounds; each round drains {chunk} rows from each backlog in turn",
  "backlogs": {
    "small": f"{chunk} rows over 1,000 keys, a fresh database each round, drained completely",
    "uniform": "1,000,000 rows over 1,000 keys",
    "skewed": "100,000 rows of key 'hot' first, then 900,000 over 999 keys",
  },
  **({"small": entry("small"), "uniform": entry("uniform"), "skewed": entry("skewed")}
     if variants == [""] else
     {"id_default_ab": {
        "_rand": "id DEFAULT gen_random_uuid() (before V21)",
        "_v7": "id DEFAULT queuebox_uuid_v7() (V21)",
        **{v: {n: entry(n, v) for n in ("small", "uniform", "skewed")} for v in variants}}}),
  "load_average": {"before_drain": sys.argv[6], "after": sys.argv[7]},
  "vacuum_between_rounds": sys.argv[8] == "1",
  "goal": "uniform.vs_small >= 0.9 and skewed.vs_small >= 0.9 (issue 6 item 1)",
  "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
              "postgres": pg + " (throw-away cluster from scripts/services.sh)"},
}, indent=2))
PY
cat "$OUT"
