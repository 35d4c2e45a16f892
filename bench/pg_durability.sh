# pg_durability.sh: the two PostgreSQL clusters a benchmark script runs against (sourced after
# `cd` to the repository). off: the test cluster of scripts/services.sh (fsync off). on: a second
# cluster with fsync, synchronous_commit and full_page_writes on (PG_DURABLE=1, port 54339),
# started here when it is not running, and then stopped by durability_cleanup.
#   use_durability off|on   # exports QB_SVC_DIR, PG_PORT, PG_DURABLE; sets PGURL and PGBASE
#   durability_cleanup      # from the caller's EXIT trap
STARTED_DURABLE=0

use_durability() {
  if [ "$1" = on ]; then
    export QB_SVC_DIR=/tmp/queuebox-svc-durable PG_PORT=54339 PG_DURABLE=1
    if ! pg_isready -q -h 127.0.0.1 -p 54339; then
      bash scripts/services.sh start pg >/dev/null
      STARTED_DURABLE=1
    fi
  else
    unset QB_SVC_DIR PG_PORT PG_DURABLE
  fi
  PGURL=$(bash scripts/services.sh env | sed -n 's/^export QB_TEST_PG_URL=//p' | tr -d "'\"")
  PGBASE=${PGURL%/*}
}

durability_cleanup() {
  if [ "$STARTED_DURABLE" = 1 ]; then
    QB_SVC_DIR=/tmp/queuebox-svc-durable PG_PORT=54339 PG_DURABLE=1 \
      bash scripts/services.sh stop pg >/dev/null || true
  fi
}
