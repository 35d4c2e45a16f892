# nginx_sink.sh: the benchmarks' HTTP sink, nginx answering 204 with keep-alive on loopback.
# Source it, then:
#   nginx_sink_start <dir> <port>   # writes <dir>/nginx.conf, starts nginx (installs it if missing)
#   nginx_sink_stop <dir>           # stops it (safe when it never started)
# One worker, no access log, keep-alive without a request cap: the sink costs little next to
# the relay it measures (bench/README.md says why nginx and not bench_receiver).
nginx_sink_start() {
  local dir=$1 port=$2
  command -v nginx >/dev/null ||
    apt-get install -y -q --no-install-recommends --no-upgrade nginx >/dev/null
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<NGX
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 8192; }
http {
  access_log off;
  keepalive_requests 10000000;
  client_body_temp_path $dir;
  server { listen 127.0.0.1:$port; location / { return 204; } }
}
NGX
  nginx -c "$dir/nginx.conf" 9>&-  # not holding a caller's lock descriptor
}

nginx_sink_stop() {
  [ -f "$1/nginx.pid" ] && nginx -c "$1/nginx.conf" -s stop 2>/dev/null
  return 0
}
