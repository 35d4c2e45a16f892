#!/usr/bin/env bash
# Builds engine_probe and runs a probe script against the build tree's engine script.
#   bash bench/transform/probe/run.sh [probe.js] [gc|jit KEY VALUE]...   # BUILD_DIR=build-rwdi
# e.g. the reshape with the nursery fixed at 1 MiB (allocation per evaluation):
#   bash bench/transform/probe/run.sh bench/transform/probe/reshape_probe.js gc 31 1048576 gc 2 1048576
# PAYLOAD, RESHAPE and the route stage's BINDINGS come from bench/transform/transform_bench.cc.
set -euo pipefail
cd "$(dirname "$0")/../../.."
BUILD_DIR=${BUILD_DIR:-build-rwdi}
probe=${1:-bench/transform/probe/reshape_probe.js}
shift || true
bundle="$BUILD_DIR/src/transform/jsonata-sync.js"
[ -f "$bundle" ] || { echo "no $bundle: build qb_transform in $BUILD_DIR first" >&2; exit 1; }
out="$BUILD_DIR/bench/transform/probe"
mkdir -p "$out"
if [ ! -x "$out/engine_probe" ] || [ bench/transform/probe/engine_probe.cc -nt "$out/engine_probe" ]; then
  # shellcheck disable=SC2046
  c++ -O2 -std=c++20 $(pkg-config --cflags mozjs-102) bench/transform/probe/engine_probe.cc \
    -o "$out/engine_probe" $(pkg-config --libs mozjs-102) -lpthread
fi
python3 - "$out/inputs.js" <<'PY'
import json, re, sys
src = open("bench/transform/transform_bench.cc").read()
payload = "".join(re.findall(r'R"\((.*?)\)"', src[src.index("kPayload[]"):src.index("kPath[]")], re.S))
reshape = re.search(r'kReshape\[\] = R"\((.*?)\)";', src, re.S).group(1)
bindings = {"messageId": "6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f", "topic": "order.created",
            "attempt": 0, "timestamp": "2024-05-01T10:30:00.000Z"}  # Stages()'s route
with open(sys.argv[1], "w") as f:
    f.write("var PAYLOAD = %s;\nvar RESHAPE = %s;\nvar BINDINGS = %s;\n" %
            (json.dumps(payload), json.dumps(reshape), json.dumps(json.dumps(bindings, separators=(",", ":")))))
PY
cat "$out/inputs.js" "$probe" > "$out/probe.js"
"$out/engine_probe" src/transform/js/driver.js "$bundle" "$out/probe.js" "$@"
