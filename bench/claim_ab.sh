#!/usr/bin/env bash
# A/B of the PostgreSQL claim between two checkouts (e.g. before and after a refactor), in one
# run: bench/claim_backlog_bench.sh of each checkout alternately (A B A B ...), then
# bench/scaleout_bench.sh with each checkout's queuebox binary alternately, with PostgreSQL's
# durability off (the test cluster) and on (a second cluster, PG_DURABLE=1). Each checkout needs
# its targets built: claim_backlog and queuebox in <tree>/$BUILD_A (resp. $BUILD_B; default
# build), with the same CMAKE_BUILD_TYPE on both sides.
#
#   flock /tmp/queuebox-bench.lock bash bench/claim_ab.sh /path/to/old /path/to/new
#   PAIRS=2 ROUNDS=5 DURABILITY="off on" SCALEOUT=1 ...
#
# Writes bench/results/claim_ab.json: per durability and checkout, the median over the pairs of
# each backlog's rows/s and PostgreSQL backend CPU ms per claim, and scale-out rows/s per N.
set -euo pipefail
cd "$(dirname "$0")/.."
A=$(realpath "$1")
B=$(realpath "$2")
BUILD_A=${BUILD_A:-build}
BUILD_B=${BUILD_B:-build}
PAIRS=${PAIRS:-2}
ROUNDS=${ROUNDS:-5}
DURABILITY=${DURABILITY:-"off on"}
SCALEOUT=${SCALEOUT:-1}
OUT=${OUT:-bench/results/claim_ab.json}
work=$(mktemp -d /tmp/qb-claim-ab.XXXXXX)

for mode in $DURABILITY; do
  if [ "$mode" = on ]; then
    export QB_SVC_DIR=/tmp/queuebox-svc-durable PG_PORT=54339 PG_DURABLE=1
  else
    unset QB_SVC_DIR PG_PORT PG_DURABLE
  fi
  bash scripts/services.sh start pg >/dev/null
  for pair in $(seq 1 "$PAIRS"); do
    for side in A B; do
      tree=$A bdir=$BUILD_A
      [ $side = B ] && tree=$B bdir=$BUILD_B
      (cd "$tree" && ROUNDS=$ROUNDS BUILD_DIR=$bdir PREFIX="qb_ab_${side,,}" \
        OUT="$work/claim_${mode}_${side}_${pair}.json" bash bench/claim_backlog_bench.sh >/dev/null)
      echo "claim_backlog fsync=$mode pair $pair side $side done" >&2
    done
    if [ "$SCALEOUT" = 1 ]; then
      for side in A B; do
        tree=$A bdir=$BUILD_A
        [ $side = B ] && tree=$B bdir=$BUILD_B
        BUILD_DIR=$BUILD_B QB_BIN="$tree/$bdir/apps/queuebox/queuebox" REPLICAS="1 4" ROUNDS=1 \
          OUT="$work/scaleout_${mode}_${side}_${pair}.json" bash bench/scaleout_bench.sh >/dev/null
        echo "scaleout fsync=$mode pair $pair side $side done" >&2
      done
    fi
  done
  if [ "$mode" = on ]; then bash scripts/services.sh stop pg >/dev/null; fi
done

python3 - "$work" "$A" "$B" "$OUT" <<'EOF'
import glob, json, os, statistics, subprocess, sys
work, a, b, out = sys.argv[1:]
def rev(tree):
    return subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
res = {"benchmark": "claim A/B (bench/claim_ab.sh): claim_backlog_bench + scaleout_bench, "
                    "checkouts alternated in one run",
       "A": {"tree": a, "commit": rev(a)}, "B": {"tree": b, "commit": rev(b)},
       "load_average": open("/proc/loadavg").read().split()[:3], "fsync": {}}
for mode in ("off", "on"):
    m = {}
    for side in ("A", "B"):
        files = sorted(glob.glob(f"{work}/claim_{mode}_{side}_*.json"))
        if not files:
            continue
        runs = [json.load(open(f)) for f in files]
        s = {}
        for backlog in ("small", "uniform", "skewed"):
            s[backlog] = {
                "rows_per_s": statistics.median(r[backlog]["rows_per_s"] for r in runs),
                "backend_cpu_ms_per_claim":
                    statistics.median(r[backlog]["backend_cpu_ms_per_claim"] for r in runs)}
        sc = [json.load(open(f)) for f in sorted(glob.glob(f"{work}/scaleout_{mode}_{side}_*.json"))]
        if sc:
            s["scaleout_msg_per_s"] = {
                n: statistics.median(r["summary"][n]["msg_per_s_median"] for r in sc)
                for n in sc[0]["summary"]}
        m[side] = s
    if "A" in m and "B" in m:
        m["B_over_A"] = {k: round(m["B"][k]["rows_per_s"] / m["A"][k]["rows_per_s"], 3)
                         for k in ("small", "uniform", "skewed")}
        if "scaleout_msg_per_s" in m["A"] and "scaleout_msg_per_s" in m["B"]:
            m["B_over_A_scaleout"] = {n: round(m["B"]["scaleout_msg_per_s"][n] /
                                               m["A"]["scaleout_msg_per_s"][n], 3)
                                      for n in m["A"]["scaleout_msg_per_s"]}
        m["B_over_A_backend_cpu"] = {
            k: round(m["B"][k]["backend_cpu_ms_per_claim"] / m["A"][k]["backend_cpu_ms_per_claim"], 3)
            for k in ("small", "uniform", "skewed")}
    if m:
        res["fsync"][mode] = m
os.makedirs(os.path.dirname(out), exist_ok=True)
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res, indent=1))
EOF
