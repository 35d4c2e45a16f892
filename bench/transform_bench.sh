#!/usr/bin/env bash
# JSONata engine benchmark (issue 16): evaluations/s and µs p50/p99 per stage for a path lookup
# and a 30-field reshape of a ~1 KiB payload; RSS before/after the engine loads.
#   bash bench/transform_bench.sh     # BUILD_DIR=build EVALUATIONS=20000 THREADS=2
#   NOJIT=1 OUT=bench/results/transform_nojit.json bash bench/transform_bench.sh
#     the same where memory may not become executable (systemd's MemoryDenyWriteExecute=yes):
#     the engine runs on SpiderMonkey's interpreters
# Writes bench/results/transform.json and prints the table.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
EVALUATIONS=${EVALUATIONS:-20000}
THREADS=${THREADS:-2}
OUT=${OUT:-bench/results/transform.json}
NOJIT=${NOJIT:-0}
cmake --build "$BUILD_DIR" --target transform_bench transform_rss_baseline deny_write_execute \
  >/dev/null
wrap=()
[ "$NOJIT" = 1 ] && wrap=("$BUILD_DIR/bench/transform/deny_write_execute")
baseline_kib=$("$BUILD_DIR/bench/transform/transform_rss_baseline")
tmp=$(mktemp)
"${wrap[@]}" "$BUILD_DIR/bench/transform/transform_bench" --evaluations "$EVALUATIONS" --threads "$THREADS" \
  --out "$tmp"
python3 - "$tmp" "$OUT" "$baseline_kib" "$NOJIT" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
data["rss_at_start_without_engine_library_kib"] = int(sys.argv[3])
data["jit"] = sys.argv[4] != "1"
data["rss_cost_of_linking_engine_kib"] = data["rss_before_engine_kib"] - int(sys.argv[3])
data["rss_cost_of_loading_engine_kib"] = data["rss_after_engine_load_kib"] - data["rss_before_engine_kib"]
with open(sys.argv[2], "w") as f:
    json.dump(data, f, indent=2)
    f.write("\n")
print("RSS at start: %d KiB without the engine library, %d KiB with it linked (not loaded); "
      "loading one engine adds %d KiB" % (int(sys.argv[3]), data["rss_before_engine_kib"],
                                          data["rss_cost_of_loading_engine_kib"]))
PY
rm -f "$tmp"
echo "wrote $OUT"
