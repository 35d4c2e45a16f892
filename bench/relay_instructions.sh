#!/usr/bin/env bash
# The relay's instructions per delivered message, binary A against binary B, counted by
# valgrind's callgrind (repeatable whatever else the machine does; throughput pairs on this
# machine spread 0.7-1.4). Each side drains two backlogs through defaults_ab.sh (the http sink,
# nginx answering 204; fsync off), SMALL and LARGE rows; the difference divided by LARGE - SMALL
# is the instructions per message, without start-up and shutdown.
#
#   flock /tmp/queuebox-bench.lock bash bench/relay_instructions.sh <queuebox A> <queuebox B>
#   SMALL=2000 LARGE=20000 OUTBOX="{concurrency: 64, batchSize: 500}" ...   # tuned
#   ENV_A="QUEUEBOX_TELEMETRY_ENABLED=true ..." ENV_B=... ...   # environment of one side
#   SINK=rabbitmq RMQ_QUEUE_TYPE=quorum ...   # another sink of defaults_ab.sh (http: nginx)
#
# Prints instructions per message for A and B, B/A, and each side's costliest functions
# (inclusive, callgrind_annotate); keeps the callgrind files in $OUTDIR (/tmp/qb-relay-insn).
set -euo pipefail
cd "$(dirname "$0")/.."
A=$(realpath "$1")
B=$(realpath "$2")
SMALL=${SMALL:-2000}
LARGE=${LARGE:-20000}
OUTDIR=${OUTDIR:-/tmp/qb-relay-insn}
TOP=${TOP:-30}
SINK=${SINK:-http}
mkdir -p "$OUTDIR"
rm -f "$OUTDIR"/*.out
WORK=$(mktemp -d /tmp/qb-relay-insn.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
CG="valgrind --tool=callgrind --callgrind-out-file=$OUTDIR/rows@ROWS@-@RUN@.out"

for rows in "$SMALL" "$LARGE"; do
  ROWS=$rows SINKS=$SINK DURABILITY=off ROUNDS=1 OUT="$WORK/ab-$rows.json" \
    WRAP_A="${ENV_A:-} ${CG//@ROWS@/$rows}" WRAP_B="${ENV_B:-} ${CG//@ROWS@/$rows}" \
    bash bench/defaults_ab.sh "$A" "$B" >"$WORK/ab-$rows.log" 2>&1 ||
    { tail -20 "$WORK/ab-$rows.log"; exit 1; }
done

total() {  # callgrind file -> instructions (Ir) of the whole process
  callgrind_annotate "$1" 2>/dev/null | sed -n 's/^\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,
}
per_message() {  # side
  local small large
  small=$(total "$OUTDIR/rows$SMALL-off-$SINK-$1.out")
  large=$(total "$OUTDIR/rows$LARGE-off-$SINK-$1.out")
  echo $(((large - small) / (LARGE - SMALL)))
}
IA=$(per_message A)
IB=$(per_message B)
echo "instructions per message: A $IA, B $IB, B/A $(awk -v a="$IA" -v b="$IB" 'BEGIN{printf "%.4f", b/a}')"
for side in A B; do
  echo "$side's costliest functions, inclusive ($OUTDIR/rows$LARGE-off-$SINK-$side.out):"
  callgrind_annotate --inclusive=yes "$OUTDIR/rows$LARGE-off-$SINK-$side.out" 2>/dev/null |
    sed -n '/^Ir/,$p' | head -"$TOP" || true  # head ends the pipe early
done
