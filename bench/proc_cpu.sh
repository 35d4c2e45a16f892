# CPU accounting from /proc for the benchmark scripts (sourced: source bench/proc_cpu.sh).

cpu_ticks() {  # pids... -> summed utime+stime clock ticks of those that are still running
  local total=0 p t
  for p in "$@"; do
    # A process may exit between the listing and the read: it then counts 0, not an error.
    t=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null) || t=0
    total=$((total + ${t:-0}))
  done
  echo "$total"
}

cluster_ticks() {  # postmaster pid -> ticks of it, its live children and its reaped ones
  local own
  own=$(awk '{print $16 + $17}' "/proc/$1/stat" 2>/dev/null) || own=0
  # shellcheck disable=SC2046
  echo $((${own:-0} + $(cpu_ticks "$1" $(pgrep -P "$1"))))
}
