# A private PostgreSQL 15 cluster in a temporary folder, for a benchmark script. Source it after
# PG_PORT and PG_BIN are set; needs root (the cluster runs as user postgres). Sets WORK, PGDATA
# and BASE; defines pg_ctl, start_pg <fsync on|off> (synchronous_commit on) and stop_pg. On exit
# it stops the cluster and a relay whose pid is in $WORK/relay.pid (a relay started in a
# pipeline's subshell, `case | tee`, is invisible to the script's own variables), then removes
# WORK.
# scripts/services.sh env exports PG_PORT for the shared test cluster: a script that inherits it
# would start its private cluster on a taken port.
if pg_isready -q -h 127.0.0.1 -p "$PG_PORT" 2>/dev/null; then
  echo "private_pg.sh: port $PG_PORT already has a PostgreSQL (an exported PG_PORT, e.g. from" \
    "scripts/services.sh env?): unset PG_PORT or set a free one" >&2
  exit 2
fi
WORK=$(mktemp -d)
chown postgres:postgres "$WORK"
chmod 755 "$WORK"
PGDATA="$WORK/pg"
BASE="postgresql://postgres@127.0.0.1:$PG_PORT"
pg_ctl() { runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PGDATA" "$@"; }
private_pg_cleanup() {
  [ -f "$WORK/relay.pid" ] && kill "$(cat "$WORK/relay.pid")" 2>/dev/null
  pg_ctl -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap private_pg_cleanup EXIT
runuser -u postgres -- "$PG_BIN/initdb" -D "$PGDATA" -U postgres -A trust >/dev/null

start_pg() {  # fsync on|off
  pg_ctl -l "$WORK/pg.log" -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $WORK \
    -c fsync=$1 -c synchronous_commit=on -c max_connections=100" start \
    >/dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
}
stop_pg() { pg_ctl -m fast -w stop >/dev/null; }
