# Shared by scripts/bench.sh, scripts/profile.sh, scripts/memory.sh and scripts/soak.sh
# (sourced, not run).
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

# wait_for FILE REGEX: echoes the first capture group of REGEX once FILE has it.
wait_for() {
  local file=$1 regex=$2
  for _ in $(seq 1 200); do
    if [[ -s "$file" ]] && grep -Eq "$regex" "$file"; then
      grep -Eo "$regex" "$file" | head -1 | sed -E "s#$regex#\\1#"
      return 0
    fi
    sleep 0.05
  done
  echo "server did not start; its output:" >&2
  cat "$file" >&2
  return 1
}

# The headers every request to a bot carries.
H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
   -H "Authorization: Bearer $TOKEN")

# save_bot_result URL TOOL FILE: one real modern `tools/call` of TOOL, its reply saved in
# FILE (for the ceiling and the peers, which answer exactly what the bot answered).
save_bot_result() {
  local url=$1 tool=$2 file=$3
  curl -sS -m 10 -o "$file" "${H[@]}" \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H "Mcp-Name: $tool" \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"'"$tool"'","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' \
    "$url"
  grep -q '"result"' "$file" || { echo "the bot gave no result for $tool:" >&2; cat "$file" >&2; exit 1; }
}

# trace_counters URL: the bot's `health` → `traces.counters`, one line: what its writer
# recorded, dropped and left unwritten over the run (a traced figure covers its spans only
# if none was dropped).
trace_counters() {
  curl -sS -m 10 "${H[@]}" \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: health' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"health","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' \
    "$1" | python3 -c '
import json, sys
c = json.load(sys.stdin)["result"]["structuredContent"]["traces"]["counters"]
per_span = c["writer_cpu_us"] / max(1, c["spans_recorded"])
print(", ".join(f"{k} {v}" for k, v in sorted(c.items())) + f"; writer CPU per span {per_span:.2f} us")'
}

# start_ceiling BINARY RESULT_FILE [NAME]: the ceiling (examples/bare_axum.rs) answering
# that result, pinned to SERVER_CPU, its output in $WORK/NAME.log. NAME (default: ceiling)
# also names what it sets: CEILING_PID and CEILING_URL, or e.g. CEILING_REL_PID and
# CEILING_REL_URL for ceiling_rel.
start_ceiling() {
  local name=${3:-ceiling}
  local log="$WORK/$name.log" var=${name^^}
  ( exec env -i PATH="$PATH" PORT=0 BENCH_TOKEN="$TOKEN" BENCH_RESULT_FILE="$2" \
      taskset -c "$SERVER_CPU" "$1" >"$log" 2>&1 ) &
  printf -v "${var}_PID" '%s' "$!"
  PIDS+=("$!")
  printf -v "${var}_URL" '%s' "http://127.0.0.1:$(wait_for "$log" 'listening on 127\.0\.0\.1:([0-9]+)')/mcp"
}

# open_session URL: initializes a 2025-11-25 session there and prints its id.
open_session() {
  local url=$1 id code
  curl -sS -m 10 -D "$WORK/init.hdr" -o "$WORK/init.body" "${H[@]}" \
    -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}' \
    "$url"
  id=$(grep -i '^mcp-session-id:' "$WORK/init.hdr" | cut -d: -f2 | tr -d ' \r')
  [[ -n "$id" ]] || { echo "initialize at $url gave no Mcp-Session-Id:" >&2; cat "$WORK/init.hdr" "$WORK/init.body" >&2; exit 1; }
  code=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' "${H[@]}" -H "Mcp-Session-Id: $id" \
    -H 'MCP-Protocol-Version: 2025-11-25' -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$url")
  [[ "$code" == 202 ]] || { echo "notifications/initialized at $url answered $code" >&2; exit 1; }
  echo "$id"
}

# ensure_wrk: installs wrk from Debian if it is missing.
ensure_wrk() {
  command -v wrk >/dev/null && return 0
  echo "wrk not found; installing the Debian package" >&2
  local sudo=""
  [[ $(id -u) == 0 ]] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq wrk >/dev/null
}
