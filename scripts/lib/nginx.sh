# Shared by the scripts that put nginx in front of bot replicas (replicas.sh, the
# benchmark): Debian's package installed when missing, the configuration docs/deploy.md
# shows, and a foreground nginx whose pid the caller stops. Source it after defining
# `log` and `die`.
#
# ensure_nginx_installed            apt-get install nginx when missing; sets NGINX
# write_nginx_conf FILE WORK LOGS LISTEN_PORT REPLICA_PORT...
#                                   the configuration, listening on 127.0.0.1:LISTEN_PORT,
#                                   temp files in WORK, logs in LOGS
# start_nginx FILE LOG              starts it in the background; sets NGINX_PID

ensure_nginx_installed() {
  if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    log "installing nginx (apt-get)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >/dev/null \
      || die "cannot install nginx with apt-get"
  fi
  NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
}

write_nginx_conf() {
  local conf="$1" work="$2" logs="$3" listen="$4" servers="" port
  shift 4
  for port in "$@"; do
    servers+="    server 127.0.0.1:$port max_fails=1 fail_timeout=3s;"$'\n'
  done
  mkdir -p "$work"
  chmod 1777 "$work"   # nginx's workers may run as another user
  cat >"$conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $logs/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log $logs/nginx-access.log;
  client_body_temp_path $work/body;
  proxy_temp_path $work/proxy;
  fastcgi_temp_path $work/fastcgi;
  uwsgi_temp_path $work/uwsgi;
  scgi_temp_path $work/scgi;

  # Legacy-era requests carry Mcp-Session-Id: hash on it, so a session's GET stream and
  # its POSTs reach the same replica. Requests without one (the stateless 2026 era,
  # initialize) hash on the request's random id instead, and so spread over all.
  map \$http_mcp_session_id \$porthole_affinity {
    ""      \$request_id;
    default \$http_mcp_session_id;
  }

  upstream porthole {
    hash \$porthole_affinity consistent;
$servers    keepalive 32;
  }

  server {
    listen 127.0.0.1:$listen;
    location / {
      proxy_pass http://porthole;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host \$host;
      # SSE: pass events on as they come, and keep long streams open.
      proxy_buffering off;
      proxy_cache off;
      proxy_read_timeout 1h;
      # A replica that is down is skipped (nginx retries a POST only when it was not sent).
      proxy_next_upstream error timeout http_502 http_503;
    }
    # The chat page's WebSocket: pass the upgrade on.
    location /ws {
      proxy_pass http://porthole;
      proxy_http_version 1.1;
      proxy_set_header Upgrade \$http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_set_header Host \$host;
      proxy_read_timeout 1h;
    }
  }
}
CONF
}

start_nginx() {
  local conf="$1" log_file="$2"
  "$NGINX" -t -c "$conf" >/dev/null 2>&1 || { "$NGINX" -t -c "$conf"; die "nginx rejects $conf"; }
  "$NGINX" -c "$conf" -g 'daemon off;' >"$log_file" 2>&1 &
  NGINX_PID=$!
}
