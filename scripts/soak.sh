#!/usr/bin/env bash
# Soak test: 64 concurrent clients mixing both protocol eras against one release bot for
# a long stretch (default 10 minutes), sampling its memory and open file descriptors.
# A script to run by hand, not in CI.
#
#   scripts/soak.sh                      10 minutes, 64 connections (32 modern, 32 legacy)
#   SOAK_SECS=60 scripts/soak.sh         a short run
#
# Every SAMPLE_SECS it prints the bot's VmRSS and open fd count; at the end the growth
# from the first sample after warm-up to the last, and the errors wrk saw. It fails
# (exit 1) on any error, or when RSS grows more than MAX_RSS_GROWTH_PCT (default 20) or
# the fd count more than MAX_FD_GROWTH (default 16) over the run.
#
# Environment: SOAK_SECS=600 CONNS=64 SAMPLE_SECS=30 TOOL=list_agents RUST_LOG=warn
#   SERVER_CPU=0 CLIENT_CPU=1 CARGO=cargo CARGO_TARGET_DIR SKIP_BUILD=1
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SOAK_SECS=${SOAK_SECS:-600}
CONNS=${CONNS:-64}
SAMPLE_SECS=${SAMPLE_SECS:-30}
TOOL=${TOOL:-list_agents}
LOG_LEVEL=${RUST_LOG:-warn}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CARGO=${CARGO:-cargo}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
MAX_RSS_GROWTH_PCT=${MAX_RSS_GROWTH_PCT:-20}
MAX_FD_GROWTH=${MAX_FD_GROWTH:-16}

LUA="$ROOT/scripts/bench/mcp_call.lua"

# shellcheck source=bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"
ensure_wrk
command -v taskset >/dev/null || { echo "taskset (util-linux) is required" >&2; exit 1; }

if [[ -z "${SKIP_BUILD:-}" ]]; then
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" $CARGO build --release --bin porthole)
fi
PORTHOLE="$TARGET_DIR/release/porthole"

start_porthole soak true
URL="http://127.0.0.1:$PORT_soak/mcp"
BOT=$PID_soak

# One legacy session for the legacy half.
curl -s -D "$WORK/init.hdr" -o /dev/null "$URL" -H "Authorization: Bearer $TOKEN" \
  -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
  -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}}'
SESSION=$(awk 'tolower($1)=="mcp-session-id:"{print $2}' "$WORK/init.hdr" | tr -d '\r')
[[ -n "$SESSION" ]] || { echo "initialize gave no Mcp-Session-Id" >&2; exit 1; }
curl -s -o /dev/null "$URL" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' -H "Mcp-Session-Id: $SESSION" \
  -H 'MCP-Protocol-Version: 2025-11-25' -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'

half=$((CONNS / 2))
run_load() { # kind conns out
  env BENCH_KIND="$1" BENCH_TOOL="$TOOL" BENCH_TOKEN="$TOKEN" BENCH_SESSION="$SESSION" \
    BENCH_OUT="$3" taskset -c "$CLIENT_CPU" \
    wrk -t1 -c"$2" -d"${SOAK_SECS}s" --timeout 5s -s "$LUA" "$URL" >"$3.txt" 2>&1
}
run_load modern "$half" "$WORK/modern.json" &
MODERN=$!
run_load legacy "$((CONNS - half))" "$WORK/legacy.json" &
LEGACY=$!

fds() { find "/proc/$BOT/fd" -maxdepth 1 -type l 2>/dev/null | wc -l; }
echo "soak: ${SOAK_SECS}s, $CONNS connections ($half modern, $((CONNS - half)) legacy), tool $TOOL, bot pid $BOT"
printf '%8s %10s %6s\n' elapsed rss_kB fds
first_rss="" first_fds="" last_rss="" last_fds=""
start=$SECONDS
while kill -0 "$MODERN" 2>/dev/null || kill -0 "$LEGACY" 2>/dev/null; do
  sleep "$SAMPLE_SECS"
  kill -0 "$BOT" 2>/dev/null || { echo "the bot died" >&2; exit 1; }
  rss=$(vm VmRSS "$BOT"); fd=$(fds)
  printf '%8s %10s %6s\n' "$((SECONDS - start))s" "$rss" "$fd"
  # The first sample is the post-warm-up baseline.
  if [[ -z "$first_rss" ]]; then first_rss=$rss; first_fds=$fd; fi
  last_rss=$rss; last_fds=$fd
done
wait "$MODERN" "$LEGACY" || true

errors=0
for kind in modern legacy; do
  line=$(cat "$WORK/$kind.json" 2>/dev/null || echo '{}')
  echo "$kind: $line"
  e=$(echo "$line" | sed -nE 's/.*"errors": *([0-9]+).*/\1/p')
  errors=$((errors + ${e:-1}))
done
growth=$(( (last_rss - first_rss) * 100 / first_rss ))
echo "RSS ${first_rss} -> ${last_rss} kB (${growth}%), fds ${first_fds} -> ${last_fds}, errors $errors"
status=0
[[ $errors -eq 0 ]] || { echo "FAIL: $errors errors"; status=1; }
[[ $growth -le $MAX_RSS_GROWTH_PCT ]] || { echo "FAIL: RSS grew more than ${MAX_RSS_GROWTH_PCT}%"; status=1; }
[[ $((last_fds - first_fds)) -le $MAX_FD_GROWTH ]] || { echo "FAIL: open fds grew by more than $MAX_FD_GROWTH"; status=1; }
[[ $status -eq 0 ]] && echo "PASS: no errors, bounded memory and fds"
exit $status
