# Sourced by the relay benches that compare two variants at the defaults into nginx
# (transform_relay_bench.sh, signing_relay_bench.sh): waits for a quiet machine, starts the shared
# PostgreSQL, builds or takes the queuebox binary (QB), starts the nginx sink on PORT (WORK holds
# its files and is removed on exit) and defines start_private_pg (an fsync-on cluster).
# Expects PORT, BUILD_DIR and PG_BIN to be set.
# Measure only on a quiet machine: wait (up to WAIT_S) for the 1-minute load to drop below
# LOAD_MAX, then go; the load before each run is in the JSON.
LOAD_MAX=${LOAD_MAX:-3}
WAIT_S=${WAIT_S:-3600}
waited=0
until python3 -c "import sys; sys.exit(0 if float(open('/proc/loadavg').read().split()[0]) < $LOAD_MAX else 1)"; do
  if [ "$waited" -ge "$WAIT_S" ]; then
    echo "load average stayed at or above $LOAD_MAX for $WAIT_S s; not measuring" >&2
    exit 3
  fi
  sleep 30
  waited=$((waited + 30))
done

bash scripts/services.sh start pg >/dev/null
eval "$(bash scripts/services.sh env)"
# QB_BIN: a binary already built (e.g. the Release build); else build one in BUILD_DIR.
if [ -z "${QB_BIN:-}" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD_DIR" --target queuebox >/dev/null
fi
QB="${QB_BIN:-$BUILD_DIR/apps/queuebox/queuebox}"
WORK=$(mktemp -d)
chmod 755 "$WORK"
source bench/nginx_sink.sh
PRIVATE_PG=""
cleanup() {
  nginx_sink_stop "$WORK/ngx"
  if [ -n "$PRIVATE_PG" ]; then
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PRIVATE_PG/data" -m fast -w stop >/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
nginx_sink_start "$WORK/ngx" "$PORT"

# A private cluster with the durability settings a production server has (fsync, synchronous
# commit and full page writes on); the shared test cluster runs with them off.
start_private_pg() {  # sets PRIVATE_PG and PRIVATE_URL
  PRIVATE_PG="$WORK/pg"
  install -d -o postgres -g postgres "$PRIVATE_PG"
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  runuser -u postgres -- "$PG_BIN/initdb" -D "$PRIVATE_PG/data" -U postgres -A trust >/dev/null
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PRIVATE_PG/data" -l "$PRIVATE_PG/server.log" -w \
    -t 60 -o "-c listen_addresses=127.0.0.1 -p $port -k $PRIVATE_PG -c fsync=on \
    -c synchronous_commit=on -c full_page_writes=on -c max_connections=100" start >/dev/null \
    3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
  PRIVATE_URL="postgresql://postgres@127.0.0.1:$port"
}
