#!/usr/bin/env bash
# End-to-end test of the web chat page in real headless Chromium.
#
# Usage: scripts/browser-e2e.sh [out-dir]
#   PORTHOLE_BIN  bot binary to start (default: target/debug/porthole)
#   out-dir       where screenshots and the bot log go (default: target/e2e,
#                 or $E2E_OUT_DIR)
#   E2E_TIMEOUT_SECS  limit for the browser part (default: 300)
#
# Installs Debian's chromium (if /usr/bin/chromium is missing) and a pinned
# playwright-core into scripts/.e2e/, starts the bot on a free port with a
# throwaway database, a clean environment and its MCP server enabled (random
# secret), and a second one on a fake provider (scripts/browser-e2e-fake-llm.mjs)
# for the Replay button, then runs scripts/browser-e2e.mjs against them.
set -euo pipefail

PLAYWRIGHT_CORE_VERSION="1.65.1"
NODE_MAJOR_MIN=20

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

OUT_DIR="${1:-${E2E_OUT_DIR:-target/e2e}}"
BIN="${PORTHOLE_BIN:-target/debug/porthole}"
E2E_TIMEOUT_SECS="${E2E_TIMEOUT_SECS:-300}"

log() { printf '[browser-e2e] %s\n' "$*"; }
die() { printf '[browser-e2e] FAIL: %s\n' "$*" >&2; exit 1; }

# --- system packages (Debian) ----------------------------------------------
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || die "not root and sudo is missing: cannot apt-get install what is needed"
  SUDO="sudo -n"
fi
APT_UPDATED=""
apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install $* by hand (this script expects Debian)"
  if [ -z "$APT_UPDATED" ]; then
    log "apt-get update"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
    APT_UPDATED=1
  fi
  log "apt-get install -y $*"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@"
}

have_fonts() {
  [ -d /usr/share/fonts ] && [ -n "$(find /usr/share/fonts -type f \( -name '*.ttf' -o -name '*.otf' \) 2>/dev/null | head -n1)" ]
}

if [ ! -x /usr/bin/chromium ]; then
  # fonts-liberation is only a Recommends of chromium (skipped on images that turn
  # off recommends); without any font the screenshots show empty boxes.
  apt_install chromium fonts-liberation fonts-dejavu-core
elif ! have_fonts; then
  apt_install fonts-liberation fonts-dejavu-core
fi
[ -x /usr/bin/chromium ] || die "/usr/bin/chromium is still missing after install"

# --- playwright-core (pinned) ----------------------------------------------
command -v node >/dev/null 2>&1 || die "node (>= $NODE_MAJOR_MIN) is required"
command -v npm >/dev/null 2>&1 || die "npm is required"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge "$NODE_MAJOR_MIN" ] ||
  die "node $(node --version) is too old: playwright-core $PLAYWRIGHT_CORE_VERSION needs node >= $NODE_MAJOR_MIN"

E2E_DIR="scripts/.e2e"
mkdir -p "$E2E_DIR"
if [ ! -f "$E2E_DIR/package.json" ] || ! grep -q "\"playwright-core\": \"$PLAYWRIGHT_CORE_VERSION\"" "$E2E_DIR/package.json"; then
  cat >"$E2E_DIR/package.json" <<JSON
{
  "name": "porthole-browser-e2e",
  "private": true,
  "description": "Dependencies of scripts/browser-e2e.mjs (installed by scripts/browser-e2e.sh)",
  "dependencies": {
    "playwright-core": "$PLAYWRIGHT_CORE_VERSION"
  }
}
JSON
fi
installed_version=""
if [ -f "$E2E_DIR/node_modules/playwright-core/package.json" ]; then
  installed_version="$(cd "$E2E_DIR" && node -p "require('./node_modules/playwright-core/package.json').version" 2>/dev/null || true)"
fi
if [ "$installed_version" != "$PLAYWRIGHT_CORE_VERSION" ]; then
  # playwright-core downloads no browser on install; it drives /usr/bin/chromium.
  export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
  if [ -f "$E2E_DIR/package-lock.json" ] &&
     grep -q "\"node_modules/playwright-core\"" "$E2E_DIR/package-lock.json" &&
     grep -A1 "\"node_modules/playwright-core\"" "$E2E_DIR/package-lock.json" | grep -q "\"version\": \"$PLAYWRIGHT_CORE_VERSION\""; then
    log "installing playwright-core@$PLAYWRIGHT_CORE_VERSION into $E2E_DIR (npm ci)"
    (cd "$E2E_DIR" && npm ci --no-audit --no-fund --loglevel=error)
  else
    log "installing playwright-core@$PLAYWRIGHT_CORE_VERSION into $E2E_DIR (npm install)"
    (cd "$E2E_DIR" && npm install --no-audit --no-fund --loglevel=error)
  fi
  installed_version="$(cd "$E2E_DIR" && node -p "require('./node_modules/playwright-core/package.json').version" 2>/dev/null || true)"
  [ "$installed_version" = "$PLAYWRIGHT_CORE_VERSION" ] ||
    die "playwright-core $PLAYWRIGHT_CORE_VERSION did not install into $E2E_DIR (found '${installed_version:-nothing}')"
fi

# --- bot --------------------------------------------------------------------
[ -x "$BIN" ] || die "bot binary '$BIN' not found or not executable (build it first: cargo build --bin porthole, or set PORTHOLE_BIN)"
BIN_ABS="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
if [ -z "${PORTHOLE_BIN:-}" ] && [ -d src ] && [ -n "$(find src -newer "$BIN_ABS" -type f 2>/dev/null | head -n1)" ]; then
  log "warning: $BIN is older than files under src/; the test runs the old build"
fi

mkdir -p "$OUT_DIR"
OUT_DIR_ABS="$(cd "$OUT_DIR" && pwd)"
# Leftovers of an earlier run would pass for this run's output.
rm -f "$OUT_DIR_ABS"/chat-*.png "$OUT_DIR_ABS"/trace-*.png "$OUT_DIR_ABS"/failure.png
TMP_DIR="$(mktemp -d "${TMPDIR:-/tmp}/porthole-e2e.XXXXXX")"
BOT_LOG="$OUT_DIR_ABS/bot.log"
REPLAY_BOT_LOG="$OUT_DIR_ABS/replay-bot.log"
# Every process this script starts (bots, the fake provider), stopped on exit.
PIDS=()

stop_pid() {
  local pid="$1"
  kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid" 2>/dev/null || true
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local status=$?
  local pid
  for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
  rm -rf "$TMP_DIR"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A fresh secret for the bot's MCP server; it reaches the test through the
# environment only (never argv, never the log).
MCP_SECRET="$(node -e 'process.stdout.write(require("crypto").randomBytes(32).toString("hex"))')"
[ "${#MCP_SECRET}" -eq 64 ] || die "could not generate an MCP secret"

strip_ansi() { sed -E 's/\x1b\[[0-9;]*[A-Za-z]//g'; }

# start_porthole LOG_FILE DATABASE [NAME=VALUE ...]
# Starts the bot in a clean environment (no LLM_*, MCP_*, LOG_FILE, … from the caller
# or CI), run from the temp dir so no project .env or mcp.json is picked up, with the
# database DATABASE in the temp dir, its MCP server enabled and the NAME=VALUE pairs
# given; without LLM_* pairs it uses its offline provider. Waits up to 30 s for it to
# listen. Sets STARTED_URL.
start_porthole() {
  local log_file="$1" database="$2" pid line deadline
  shift 2
  : >"$log_file"
  log "starting $BIN (log: $log_file)"
  (
    cd "$TMP_DIR"
    exec env -i \
      PATH="$PATH" \
      HOME="$TMP_DIR" \
      LANG=C.UTF-8 \
      PORT=0 \
      HOST=127.0.0.1 \
      DATABASE_PATH="$TMP_DIR/$database" \
      WEB_CONSOLE_FORWARDING=false \
      MCP_SERVER_ENABLED=true \
      MCP_SERVER_SECRET="$MCP_SECRET" \
      RUST_LOG=info \
      NO_COLOR=1 \
      "$@" \
      "$BIN_ABS"
  ) >"$log_file" 2>&1 </dev/null &
  pid=$!
  PIDS+=("$pid")
  STARTED_URL=""
  deadline=$((SECONDS + 30))
  while [ "$SECONDS" -lt "$deadline" ]; do
    line="$(strip_ansi <"$log_file" | grep -m1 'listening on http://' || true)"
    if [ -n "$line" ]; then
      STARTED_URL="$(printf '%s\n' "$line" | grep -oE 'http://[^[:space:]"'"'"',;)]+' | head -n1)"
      STARTED_URL="${STARTED_URL%/}"
      log "bot is listening on $STARTED_URL"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      log "bot exited early; last log lines:"
      tail -n 40 "$log_file" >&2 || true
      die "bot exited before it was listening"
    fi
    sleep 0.2
  done
  log "last log lines:"
  tail -n 40 "$log_file" >&2 || true
  die "no 'listening on http://' line within 30 s"
}

# The chat steps run against a bot on its offline provider.
start_porthole "$BOT_LOG" e2e.db
URL="$STARTED_URL"

# The Replay step needs a real provider (the offline one has nothing to replay): a
# second bot on a fake OpenAI-compatible server.
FAKE_LLM_OUT="$TMP_DIR/fake-llm.out"
node scripts/browser-e2e-fake-llm.mjs >"$FAKE_LLM_OUT" 2>&1 </dev/null &
PIDS+=("$!")
FAKE_LLM_PORT=""
deadline=$((SECONDS + 10))
while [ -z "$FAKE_LLM_PORT" ] && [ "$SECONDS" -lt "$deadline" ]; do
  FAKE_LLM_PORT="$(sed -nE 's/^PORT ([0-9]+)$/\1/p' "$FAKE_LLM_OUT" | head -n1)"
  [ -n "$FAKE_LLM_PORT" ] || sleep 0.1
done
[ -n "$FAKE_LLM_PORT" ] || die "the fake provider did not start: $(cat "$FAKE_LLM_OUT")"
# A key of the fake provider only; the replay step types it to see it redacted.
FAKE_LLM_KEY="sk-e2e-fake-provider-key-0123456789"
start_porthole "$REPLAY_BOT_LOG" e2e-replay.db \
  LLM_PROVIDER=openai \
  LLM_BASE_URL="http://127.0.0.1:$FAKE_LLM_PORT/v1" \
  LLM_API_KEY="$FAKE_LLM_KEY" \
  LLM_MODEL=e2e-fake-model
REPLAY_URL="$STARTED_URL"

status=0
E2E_MCP_SECRET="$MCP_SECRET" E2E_TIMEOUT_SECS="$E2E_TIMEOUT_SECS" E2E_REPLAY_URL="$REPLAY_URL" \
  E2E_FAKE_LLM_KEY="$FAKE_LLM_KEY" \
  node scripts/browser-e2e.mjs "$URL" "$BOT_LOG" "$OUT_DIR_ABS" || status=$?
if [ "$status" -ne 0 ]; then
  log "FAILED (exit $status); screenshots, bot.log and replay-bot.log in $OUT_DIR_ABS"
fi
exit "$status"
