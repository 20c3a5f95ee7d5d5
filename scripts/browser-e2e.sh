#!/usr/bin/env bash
# End-to-end test of the web chat page in real headless Chromium.
#
# Usage: scripts/browser-e2e.sh [out-dir]
#   PORTHOLE_BIN  bot binary to start (default: target/debug/porthole)
#   out-dir       where screenshots and the bot log go (default: target/e2e)
#
# Installs Debian's chromium (if /usr/bin/chromium is missing) and a pinned
# playwright-core into scripts/.e2e/, starts the bot on a free port with a
# throwaway database, then runs scripts/browser-e2e.mjs against it.
set -euo pipefail

PLAYWRIGHT_CORE_VERSION="1.65.1"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

OUT_DIR="${1:-${E2E_OUT_DIR:-target/e2e}}"
BIN="${PORTHOLE_BIN:-target/debug/porthole}"

log() { printf '[browser-e2e] %s\n' "$*"; }
die() { printf '[browser-e2e] FAIL: %s\n' "$*" >&2; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi

# --- Chromium -------------------------------------------------------------
if [ ! -x /usr/bin/chromium ]; then
  log "installing chromium (Debian package)"
  $SUDO apt-get update
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi
[ -x /usr/bin/chromium ] || die "/usr/bin/chromium is still missing after install"

# --- playwright-core (pinned) --------------------------------------------
command -v node >/dev/null 2>&1 || die "node is required"
command -v npm >/dev/null 2>&1 || die "npm is required"

E2E_DIR="scripts/.e2e"
mkdir -p "$E2E_DIR"
if [ ! -f "$E2E_DIR/package.json" ] || ! grep -q "\"playwright-core\": \"$PLAYWRIGHT_CORE_VERSION\"" "$E2E_DIR/package.json"; then
  cat >"$E2E_DIR/package.json" <<EOF
{
  "name": "porthole-browser-e2e",
  "private": true,
  "description": "Dependencies of scripts/browser-e2e.mjs (installed by scripts/browser-e2e.sh)",
  "dependencies": {
    "playwright-core": "$PLAYWRIGHT_CORE_VERSION"
  }
}
EOF
fi
installed_version=""
if [ -f "$E2E_DIR/node_modules/playwright-core/package.json" ]; then
  installed_version="$(node -p "require('./$E2E_DIR/node_modules/playwright-core/package.json').version" 2>/dev/null || true)"
fi
if [ "$installed_version" != "$PLAYWRIGHT_CORE_VERSION" ]; then
  log "installing playwright-core@$PLAYWRIGHT_CORE_VERSION into $E2E_DIR"
  (cd "$E2E_DIR" && npm install --no-audit --no-fund)
fi

# --- bot --------------------------------------------------------------------
[ -x "$BIN" ] || die "bot binary '$BIN' not found or not executable (build it first, or set PORTHOLE_BIN)"
BIN_ABS="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"

mkdir -p "$OUT_DIR"
OUT_DIR_ABS="$(cd "$OUT_DIR" && pwd)"
TMP_DIR="$(mktemp -d "${TMPDIR:-/tmp}/porthole-e2e.XXXXXX")"
BOT_LOG="$OUT_DIR_ABS/bot.log"
: >"$BOT_LOG"
BOT_PID=""

cleanup() {
  local status=$?
  if [ -n "$BOT_PID" ] && kill -0 "$BOT_PID" 2>/dev/null; then
    kill "$BOT_PID" 2>/dev/null || true
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      kill -0 "$BOT_PID" 2>/dev/null || break
      sleep 0.2
    done
    kill -9 "$BOT_PID" 2>/dev/null || true
    wait "$BOT_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP_DIR"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "starting $BIN (log: $BOT_LOG)"
# Run from the temp dir so no project .env is picked up, and without LLM keys
# so the bot uses its offline provider.
(
  cd "$TMP_DIR"
  exec env -u OPENAI_API_KEY -u ANTHROPIC_API_KEY \
    PORT=0 \
    HOST=127.0.0.1 \
    DATABASE_PATH="$TMP_DIR/e2e.db" \
    WEB_CONSOLE_FORWARDING=false \
    RUST_LOG=info \
    "$BIN_ABS"
) >"$BOT_LOG" 2>&1 &
BOT_PID=$!

strip_ansi() { sed -E 's/\x1b\[[0-9;]*[A-Za-z]//g'; }

URL=""
deadline=$((SECONDS + 30))
while [ "$SECONDS" -lt "$deadline" ]; do
  line="$(strip_ansi <"$BOT_LOG" | grep -m1 'listening on http://' || true)"
  if [ -n "$line" ]; then
    URL="$(printf '%s\n' "$line" | grep -oE 'http://[^[:space:]"'"'"',;)]+' | head -n1)"
    URL="${URL%/}"
    break
  fi
  if ! kill -0 "$BOT_PID" 2>/dev/null; then
    log "bot exited early; last log lines:"
    tail -n 40 "$BOT_LOG" >&2 || true
    die "bot exited before it was listening"
  fi
  sleep 0.2
done
if [ -z "$URL" ]; then
  log "last log lines:"
  tail -n 40 "$BOT_LOG" >&2 || true
  die "no 'listening on http://' line within 30 s"
fi
log "bot is listening on $URL"

node scripts/browser-e2e.mjs "$URL" "$BOT_LOG" "$OUT_DIR_ABS"
