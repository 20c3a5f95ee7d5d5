# Shared by the scripts that start a throwaway bot (conformance, interop): a random token,
# a clean environment, and waiting for the "listening on" line. Source it after defining
# `log` and `die`.

strip_ansi() { sed -E 's/\x1b\[[0-9;?]*[A-Za-z]//g'; }

# A random 64-hex-character secret.
random_token() {
  local token
  token="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
  [ ${#token} -eq 64 ] || die "could not generate a random secret"
  printf '%s' "$token"
}

# start_bot BINARY LOG_FILE WORK_DIR TOKEN [NAME=VALUE ...]
# Starts BINARY in WORK_DIR (so no project .env is read) on an ephemeral loopback port,
# with MCP enabled under TOKEN, an in-memory database, no scheduler, and no inherited
# LLM_*, MCP_* or PORTHOLE_* settings; extra NAME=VALUE pairs are added. Waits up to
# 30 s for it to listen. Sets BOT_PID and BOT_PORT.
start_bot() {
  local bin="$1" log_file="$2" work_dir="$3" token="$4"
  shift 4
  local bin_abs unset_args=() name deadline
  bin_abs="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
  while IFS= read -r name; do
    case "$name" in LLM_*|MCP_*|PORTHOLE_*) unset_args+=(-u "$name") ;; esac
  done < <(compgen -e)
  : >"$log_file"
  log "starting $bin (log: $log_file)"
  (
    cd "$work_dir"
    exec env "${unset_args[@]}" PORT=0 HOST=127.0.0.1 DATABASE_PATH=:memory: \
      MCP_SERVER_ENABLED=true MCP_SERVER_SECRET="$token" SCHEDULER_ENABLED=false \
      RUST_LOG=info "$@" "$bin_abs"
  ) >"$log_file" 2>&1 &
  BOT_PID=$!
  BOT_PORT=""
  deadline=$((SECONDS + 30))
  while [ "$SECONDS" -lt "$deadline" ]; do
    BOT_PORT="$(strip_ansi <"$log_file" | sed -nE 's#.*listening on http://127\.0\.0\.1:([0-9]+).*#\1#p' | head -n1)"
    [ -n "$BOT_PORT" ] && return 0
    if ! kill -0 "$BOT_PID" 2>/dev/null; then
      tail -n 40 "$log_file" >&2 || true
      die "the bot exited before it was listening"
    fi
    sleep 0.2
  done
  tail -n 40 "$log_file" >&2 || true
  die "no 'listening on http://127.0.0.1:PORT' line within 30 s"
}
