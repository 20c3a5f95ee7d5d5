# Shared by scripts/bench.sh, scripts/memory.sh and scripts/soak.sh (sourced, not run).
# Sourcing it sets TOKEN (random), WORK (a scratch dir) and PIDS, and removes both the
# started processes and WORK on exit. The functions expect LOG_LEVEL, SERVER_CPU, PORTHOLE.

TOKEN="bench-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# listen_port PID LOG: the TCP port PID listens on (RUST_LOG=warn hides the log line).
listen_port() {
  local pid=$1 log=$2 port
  for _ in $(seq 1 200); do
    port=$(ss -ltnpH 2>/dev/null | grep "pid=$pid," | awk '{print $4}' | sed -E 's/.*:([0-9]+)$/\1/' | head -1)
    if [[ -n "$port" ]]; then echo "$port"; return 0; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "porthole did not start listening; its output:" >&2
  cat "$log" >&2
  return 1
}

# start_porthole NAME MCP_ENABLED [VAR=value...]: a fresh bot in its own folder, pinned
# to SERVER_CPU, environment cleared (no .env, no stray MCP_* variables). Sets
# PORT_<NAME> and PID_<NAME>.
start_porthole() {
  local name=$1 enabled=$2; shift 2
  local dir="$WORK/$name"
  mkdir -p "$dir"
  (cd "$dir" && exec env -i PATH="$PATH" HOME="$HOME" \
      HOST=127.0.0.1 PORT=0 DATABASE_PATH=:memory: SCHEDULER_ENABLED=false \
      RUST_LOG="$LOG_LEVEL" MCP_SERVER_ENABLED="$enabled" MCP_SERVER_SECRET="$TOKEN" \
      WORKSPACE_DIR="$dir/workspace" USER_TOOLS_DIR="$dir/user-tools" \
      SKILLS_DIR="$dir/skills" MCP_SERVERS_CONFIG="$dir/mcp.json" "$@" \
      taskset -c "$SERVER_CPU" "$PORTHOLE" >"$dir/out.log" 2>&1) &
  local pid=$!
  PIDS+=("$pid")
  local port
  port=$(listen_port "$pid" "$dir/out.log")
  printf -v "PORT_$name" '%s' "$port"
  printf -v "PID_$name" '%s' "$pid"
}

# vm KEY PID: a /proc/PID/status value in kB (VmRSS, VmHWM, ...).
vm() { awk -v k="$1:" '$1==k{print $2}' "/proc/$2/status"; }

# ensure_wrk: installs wrk from Debian if it is missing.
ensure_wrk() {
  command -v wrk >/dev/null && return 0
  echo "wrk not found; installing the Debian package" >&2
  local sudo=""
  [[ $(id -u) == 0 ]] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq wrk >/dev/null
}
