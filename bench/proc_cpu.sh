# CPU accounting from /proc for the benchmark scripts (sourced: source bench/proc_cpu.sh).

cpu_ticks() {  # pids... -> summed utime+stime clock ticks of those that are still running
  local total=0 p
  for p in "$@"; do
    if [[ -r /proc/$p/stat ]]; then
      total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
    fi
  done
  echo "$total"
}

cluster_ticks() {  # postmaster pid -> ticks of it, its live children and its reaped ones
  # shellcheck disable=SC2046
  echo $(($(awk '{print $16 + $17}' "/proc/$1/stat") + $(cpu_ticks "$1" $(pgrep -P "$1"))))
}
