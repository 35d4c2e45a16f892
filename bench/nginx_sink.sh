# nginx_sink.sh: the benchmarks' HTTP sink, nginx answering 204 with keep-alive on loopback.
# Source it, then:
#   nginx_sink_start <dir> <port> [log]  # writes <dir>/nginx.conf, starts nginx (installs it if
#                                        # missing); [log]: log_format/access_log directives
#   nginx_sink_quit <dir>                # graceful stop, waits (the worker flushes its log)
#   nginx_sink_stop <dir>                # stops it (safe when it never started)
# One worker (so an access log is in arrival order), no access log unless given, keep-alive
# without a request cap: the sink costs little next to the relay it measures (bench/README.md
# says why nginx and not bench_receiver).
nginx_sink_start() {
  local dir=$1 port=$2 log=${3:-access_log off;}
  command -v nginx >/dev/null ||
    apt-get install -y -q --no-install-recommends --no-upgrade nginx >/dev/null
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<NGX
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 8192; }
http {
  $log
  keepalive_requests 10000000;
  client_body_temp_path $dir;
  server { listen 127.0.0.1:$port; location / { return 204; } }
}
NGX
  # Not holding a caller's lock descriptor (flock's, usually 3) while the daemon lives.
  nginx -c "$dir/nginx.conf" 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
}

nginx_sink_quit() {
  local pid
  pid=$(cat "$1/nginx.pid")
  nginx -c "$1/nginx.conf" -s quit 2>/dev/null
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}

nginx_sink_stop() {
  [ -f "$1/nginx.pid" ] && nginx -c "$1/nginx.conf" -s stop 2>/dev/null
  return 0
}
