#!/usr/bin/env bash
# Starts / stops the test servers on loopback, as root, without systemd:
#   PostgreSQL 15 (throw-away trust cluster), RabbitMQ, NATS with JetStream.
# Usage: scripts/services.sh start|stop|status|env [pg|rabbitmq|nats ...]
#   start/stop with no names act on all three. `env` prints the QB_TEST_* exports.
#   scripts/services.sh rabbitmqctl ARGS...  runs rabbitmqctl against the test node (tests use
#   it to close connections: `rabbitmqctl close_all_connections reason`).
# Ports come from the environment (defaults avoid the usual ones so a machine's own servers
# do not collide). State lives under $QB_SVC_DIR.
set -euo pipefail
QB_SVC_DIR=${QB_SVC_DIR:-/tmp/queuebox-svc}
PG_PORT=${PG_PORT:-54329}
AMQP_PORT=${AMQP_PORT:-56729}
RMQ_DIST_PORT=${RMQ_DIST_PORT:-56739}
EPMD_PORT=${EPMD_PORT:-4369}
NATS_PORT=${NATS_PORT:-54229}
NATS_MON_PORT=${NATS_MON_PORT:-58229}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
# PG_DURABLE=1: fsync, synchronous_commit and full_page_writes on (as production runs), for
# benchmarks that report figures both ways; start it in its own QB_SVC_DIR and PG_PORT.
PG_DURABLE=${PG_DURABLE:-0}
# PG_SETTINGS: more server settings for a cluster of one's own, e.g. "-c shared_buffers=1GB"
# (read when the cluster starts).

rmq_env() {
  export RABBITMQ_NODENAME=queuebox@localhost RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
  export RABBITMQ_NODE_PORT=$AMQP_PORT RABBITMQ_DIST_PORT=$RMQ_DIST_PORT
  export ERL_EPMD_PORT=$EPMD_PORT ERL_EPMD_ADDRESS=127.0.0.1
  export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
  export RABBITMQ_MNESIA_BASE=$QB_SVC_DIR/rmq/mnesia RABBITMQ_LOG_BASE=$QB_SVC_DIR/rmq/log
  export RABBITMQ_PID_FILE=$QB_SVC_DIR/rmq/rabbit.pid
  export RABBITMQ_ENABLED_PLUGINS_FILE=$QB_SVC_DIR/rmq/enabled_plugins
  export HOME=$QB_SVC_DIR/rmq
}

pg_up() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" >/dev/null 2>&1; }
nats_up() { curl -fsS "http://127.0.0.1:$NATS_MON_PORT/healthz?js-enabled-only=true" >/dev/null 2>&1; }
rmq_up() { (rmq_env; rabbitmq-diagnostics -q -n queuebox@localhost ping >/dev/null 2>&1); }

start_pg() {
  local durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
  [ "$PG_DURABLE" = 1 ] && durability="-c fsync=on -c synchronous_commit=on -c full_page_writes=on"
  if pg_up; then echo "pg: already up on 127.0.0.1:$PG_PORT"; return; fi
  install -d -o postgres -g postgres "$QB_SVC_DIR/pg"
  if [ ! -f "$QB_SVC_DIR/pg/data/PG_VERSION" ]; then
    runuser -u postgres -- "$PG_BIN/initdb" -D "$QB_SVC_DIR/pg/data" -U postgres -A trust \
      --no-sync >"$QB_SVC_DIR/pg/initdb.log"
  fi
  runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$QB_SVC_DIR/pg/data" -l "$QB_SVC_DIR/pg/server.log" \
    -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $QB_SVC_DIR/pg $durability \
    -c max_connections=300 \
    -c shared_preload_libraries=pg_stat_statements -c wal_level=logical ${PG_SETTINGS:-}" start >/dev/null \
    3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
  echo "pg: up on 127.0.0.1:$PG_PORT"
}

# The servers are daemons: they close descriptors 3-9 so that a caller's lock (a benchmark run
# under `flock`) is not held by a server for as long as it lives.

start_rabbitmq() {
  if rmq_up; then echo "rabbitmq: already up on 127.0.0.1:$AMQP_PORT"; return; fi
  install -d -o rabbitmq -g rabbitmq "$QB_SVC_DIR/rmq" "$QB_SVC_DIR/rmq/mnesia" "$QB_SVC_DIR/rmq/log"
  echo '[].' >"$QB_SVC_DIR/rmq/enabled_plugins"
  chown rabbitmq:rabbitmq "$QB_SVC_DIR/rmq/enabled_plugins"
  (rmq_env; rabbitmq-server -detached >/dev/null 2>&1 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-)
  (rmq_env; rabbitmqctl -q -n queuebox@localhost wait --timeout 180 "$RABBITMQ_PID_FILE" >/dev/null)
  echo "rabbitmq: up on 127.0.0.1:$AMQP_PORT"
}

start_nats() {
  if nats_up; then echo "nats: already up on 127.0.0.1:$NATS_PORT"; return; fi
  mkdir -p "$QB_SVC_DIR/nats"
  # Its own session: nats-server does not daemonize, and a caller's process group being killed
  # (a finished CI step, a tool's job) would otherwise take the shared server down with it.
  setsid nats-server -a 127.0.0.1 -p "$NATS_PORT" -m "$NATS_MON_PORT" -js -sd "$QB_SVC_DIR/nats/js" \
    -l "$QB_SVC_DIR/nats/nats.log" -P "$QB_SVC_DIR/nats/nats.pid" </dev/null >/dev/null 2>&1 \
    3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&- &
  for _ in $(seq 1 100); do nats_up && break; sleep 0.1; done
  nats_up || { echo "nats: did not start; see $QB_SVC_DIR/nats/nats.log" >&2; exit 1; }
  echo "nats: up on 127.0.0.1:$NATS_PORT"
}

stop_pg() {
  if [ -f "$QB_SVC_DIR/pg/data/postmaster.pid" ]; then
    runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$QB_SVC_DIR/pg/data" -m fast -w stop >/dev/null || true
  fi
}
stop_rabbitmq() {
  if [ -f "$QB_SVC_DIR/rmq/rabbit.pid" ]; then
    (rmq_env; rabbitmqctl -q -n queuebox@localhost stop "$RABBITMQ_PID_FILE" >/dev/null 2>&1) || true
    epmd -port "$EPMD_PORT" -kill >/dev/null 2>&1 || true
  fi
}
stop_nats() {
  if [ -f "$QB_SVC_DIR/nats/nats.pid" ]; then
    kill -TERM "$(cat "$QB_SVC_DIR/nats/nats.pid")" 2>/dev/null || true
    for _ in $(seq 1 50); do nats_up || break; sleep 0.1; done
    rm -f "$QB_SVC_DIR/nats/nats.pid"
  fi
}

print_env() {
  echo "export QB_TEST_PG_URL=postgresql://postgres@127.0.0.1:$PG_PORT/postgres"
  echo "export QB_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:$AMQP_PORT/"
  echo "export QB_TEST_NATS_URL=nats://127.0.0.1:$NATS_PORT"
  echo "export QB_TEST_NATS_MON_PORT=$NATS_MON_PORT"
  echo "export QB_SVC_DIR=$QB_SVC_DIR PG_PORT=$PG_PORT AMQP_PORT=$AMQP_PORT NATS_PORT=$NATS_PORT"
}

cmd=${1:-status}
shift || true
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(pg rabbitmq nats)
case "$cmd" in
  start) mkdir -p "$QB_SVC_DIR"; for n in "${names[@]}"; do "start_$n"; done ;;
  stop) for n in "${names[@]}"; do "stop_$n"; done ;;
  status)
    pg_up && echo "pg: up" || echo "pg: down"
    rmq_up && echo "rabbitmq: up" || echo "rabbitmq: down"
    nats_up && echo "nats: up" || echo "nats: down" ;;
  env) print_env ;;
  rabbitmqctl) (rmq_env; rabbitmqctl -q -n queuebox@localhost "${names[@]}") ;;
  *) echo "usage: $0 start|stop|status|env [pg|rabbitmq|nats ...] | rabbitmqctl ARGS..." >&2; exit 2 ;;
esac
