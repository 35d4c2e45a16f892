#!/usr/bin/env bash
# image_bench.sh: the container image's figures (issue 33 item 6): its size, start to ready
# inside the container, RSS at the defaults idle and after a backlog, SIGTERM to exit.
#
#   bash scripts/services.sh start; eval "$(bash scripts/services.sh env)"
#   bash packaging/image/build.sh && podman load -i build/queuebox-image.tar
#   flock /tmp/queuebox-bench.lock bash bench/image_bench.sh   # RUNS=5 ROWS=20000 IMAGE=...
#
# Each run: a fresh database, `podman run -d` (host network, runc, read-only) with QueueBox's
# three variables and one route to a loopback receiver; ready = the first 200 from /health/ready
# (polled every 10 ms), measured from `podman run` and, inside, from the relay's first log line
# to "QueueBox C++ is delivering". Then ROWS rows of ~1 KiB are inserted and delivered (TRANSFORM=1
# puts a route transform on them, so the JSONata engine loads), and VmRSS / VmHWM of the
# container's process are read from /proc. Writes bench/results/image.json (OUT=...).
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-queuebox-cpp:latest}
RUNS=${RUNS:-5}
ROWS=${ROWS:-20000}
OUT=${OUT:-bench/results/image.json}
PORT=${PORT:-18480}
RPORT=${RPORT:-18481}
: "${QB_TEST_PG_URL:?start the servers: eval \"\$(bash scripts/services.sh env)\"}"
PG_HOSTPORT=$(sed -E 's|.*@([^/]+)/.*|\1|' <<<"$QB_TEST_PG_URL")
FLAGS=(--runtime runc --network host --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --read-only)
now() { date +%s.%N; }

python3 - "$RPORT" <<'PY' &
import http.server, sys
class R(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), R).serve_forever()
PY
receiver=$!
name=qb-image-bench-$$
trap 'kill $receiver 2>/dev/null; podman rm -f -v $name >/dev/null 2>&1 || true' EXIT

size=$(podman image inspect "$IMAGE" --format '{{.Size}}')
results=()
for run in $(seq 1 "$RUNS"); do
  db=qb_image_bench_$run
  psql "$QB_TEST_PG_URL" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
  transform=()
  [ "${TRANSFORM:-0}" = 1 ] &&
    transform=(-e 'QUEUEBOX_ROUTES_0_TRANSFORM_EXPRESSION={"i": i, "len": $length(pad)}')
  t0=$(now)
  podman run -d --name "$name" "${FLAGS[@]}" \
    -e "QUEUEBOX_DATABASE_URL=jdbc:postgresql://$PG_HOSTPORT/$db" \
    -e QUEUEBOX_DATABASE_USERNAME=postgres -e QUEUEBOX_DATABASE_PASSWORD=x \
    -e QUEUEBOX_SERVER_HTTPPORT=$PORT -e 'QUEUEBOX_ROUTES_0_TOPICPATTERN=**' \
    -e QUEUEBOX_ROUTES_0_DESTINATION=sink -e QUEUEBOX_DESTINATIONS_SINK_TYPE=http \
    -e "QUEUEBOX_DESTINATIONS_SINK_BASEURL=http://127.0.0.1:$RPORT" "${transform[@]}" \
    "$IMAGE" >/dev/null 2>&1
  until curl -sf "http://127.0.0.1:$PORT/health/ready" >/dev/null; do sleep 0.01; done
  t_ready=$(now)
  pid=$(podman inspect --format '{{.State.Pid}}' "$name")
  sleep 1
  idle_rss=$(awk '/^VmRSS/{print $2}' "/proc/$pid/status")
  inside=$(podman logs "$name" 2>/dev/null | python3 -c '
import json, sys, datetime
t = {}
for line in sys.stdin:
    try: e = json.loads(line)
    except ValueError: continue
    t.setdefault(e["message"], datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00")))
first = min(t.values())
print(round((t["QueueBox C++ is delivering"] - first).total_seconds() * 1000, 1))')
  psql "postgresql://postgres@$PG_HOSTPORT/$db" -qc "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'k' || (i % 1000), json_build_object('i', i, 'pad', repeat('x', 1000))
    FROM generate_series(1, $ROWS) i" >/dev/null
  t_load=$(now)
  until [ "$(psql "postgresql://postgres@$PG_HOSTPORT/$db" -tAc \
    "SELECT count(*) FROM outbox WHERE state = 'sent'")" = "$ROWS" ]; do sleep 0.2; done
  t_sent=$(now)
  read -r rss hwm < <(awk '/^VmRSS/{r=$2} /^VmHWM/{h=$2} END{print r, h}' "/proc/$pid/status")
  t_stop=$(now)
  podman kill --signal TERM "$name" >/dev/null
  code=$(podman wait "$name")
  t_exit=$(now)
  podman rm -v "$name" >/dev/null
  psql "$QB_TEST_PG_URL" -qc "DROP DATABASE $db" >/dev/null
  r=$(python3 -c "print({'run': $run, 'podman_run_to_ready_ms': round(($t_ready - $t0) * 1000),
    'first_log_to_delivering_ms': $inside, 'idle_rss_kb': $idle_rss,
    'rows': $ROWS, 'msg_per_s': round($ROWS / ($t_sent - $t_load)), 'rss_after_kb': $rss,
    'peak_rss_kb': $hwm, 'sigterm_to_exit_ms': round(($t_exit - $t_stop) * 1000),
    'exit_code': $code})")
  echo "$r"
  results+=("$r")
done
python3 - "$OUT" "$IMAGE" "$size" "${TRANSFORM:-0}" "${results[@]}" <<'PY'
import ast, json, statistics, sys
out, image, size, transform, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", [ast.literal_eval(r) for r in sys.argv[5:]]
med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k not in ("run", "exit_code")}
doc = {"image": image, "image_bytes": size, "transform": transform, "median": med, "runs": runs}
json.dump(doc, open(out, "w"), indent=1)
print(json.dumps({"image_bytes": size, "median": med}, indent=1))
PY
