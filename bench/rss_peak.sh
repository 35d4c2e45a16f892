#!/usr/bin/env bash
# rss_peak.sh: runs the queuebox binary and keeps /proc/<pid>/smaps_rollup, smaps and the
# thread and descriptor counts of its peak resident set, to see where the memory goes.
#
#   REAL_QB=build/apps/queuebox/queuebox QB_BIN=bench/rss_peak.sh bash bench/run_relay_bench.sh
#   cat /tmp/queuebox-rss-peak/rollup /tmp/queuebox-rss-peak/status
#
# RSS_PEAK_DIR (default /tmp/queuebox-rss-peak) receives rollup, smaps, status and fds, rewritten
# each time VmRSS grows by more than 256 KiB (sampled every 20 ms). Commands other than `run`
# go straight to the binary.
set -uo pipefail
REAL=${REAL_QB:?set REAL_QB to the queuebox binary}
OUT=${RSS_PEAK_DIR:-/tmp/queuebox-rss-peak}
if [[ " $* " != *" run "* ]]; then exec "$REAL" "$@"; fi
mkdir -p "$OUT"
rm -f "$OUT/rollup" "$OUT/smaps" "$OUT/status" "$OUT/fds"
"$REAL" "$@" &
pid=$!
(
  max=0
  while kill -0 "$pid" 2>/dev/null; do
    rss=$(awk '/^VmRSS/{print $2}' "/proc/$pid/status" 2>/dev/null)
    [ -z "$rss" ] && break
    if ((rss > max + 256)); then
      max=$rss
      cat "/proc/$pid/smaps_rollup" >"$OUT/rollup" 2>/dev/null
      cat "/proc/$pid/smaps" >"$OUT/smaps" 2>/dev/null
      grep -E 'VmRSS|RssAnon|RssFile|Threads' "/proc/$pid/status" >"$OUT/status" 2>/dev/null
      ls "/proc/$pid/fd" 2>/dev/null | wc -l >"$OUT/fds"
    fi
    sleep 0.02
  done
) &
sampler=$!
wait "$pid"
rc=$?
wait "$sampler"
exit "$rc"
