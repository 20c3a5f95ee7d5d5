#!/usr/bin/env bash
# Where a `tools/call` spends its CPU: a call-graph profile of the bench-release bot (or of the
# ceiling) under wrk, and a breakdown of the samples by function.
#
#   scripts/profile.sh                 the modern stateless request
#   KIND=legacy scripts/profile.sh     the 2025-11-25 request inside one session
#   KIND=ceiling scripts/profile.sh    examples/bare_axum.rs answering the bot's result
#
# It builds the bench-release binaries (SKIP_BUILD=1 to reuse them), starts the server as
# scripts/bench.sh does (pinned to SERVER_CPU, wrk on CLIENT_CPU, c=16), records
# `perf record --call-graph dwarf` for SECS seconds once the load runs, and prints
# scripts/bench/breakdown.py's split for FRAMES. DWARF unwinding works on the LTO binary
# (no frame pointers needed); perf slows the server while it records, so the shares
# matter here, not the rps. Needs `perf` (Debian: linux-perf). The recording stays in
# OUT_DIR (default: a temporary directory, printed).
#
# Environment: KIND, SECS=4, SERVER_CPU=0, CLIENT_CPU=1, TOOL=list_agents, OUT_DIR,
#   BOT_ENV (one VAR=value for the bot, e.g. TRACE_ENABLED=false to profile it untraced),
#   FRAMES (default: the /mcp handler, the tool call, the reply), SKIP_BUILD, CARGO.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
KIND=${KIND:-modern}
SECS=${SECS:-4}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
TOOL=${TOOL:-list_agents}
LOG_LEVEL=warn
CARGO=${CARGO:-cargo}
FRAMES=${FRAMES:-"Handler<(M,T1,T2),S>>::call::{{closure}} handle_post::{{closure}} Call::run::{{closure}} invoke_tool::{{closure}} final_reply"}
command -v perf >/dev/null || { echo "perf is required (Debian: apt-get install linux-perf)" >&2; exit 1; }
[[ $KIND == modern || $KIND == legacy || $KIND == ceiling ]] || { echo "KIND must be modern, legacy or ceiling" >&2; exit 2; }

# shellcheck source=bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"
ensure_wrk
OUT_DIR=${OUT_DIR:-$(mktemp -d)}
mkdir -p "$OUT_DIR"

if [[ -z "${SKIP_BUILD:-}" ]]; then
  (cd "$ROOT" && $CARGO build --profile bench-release --bin porthole --example bare_axum)
fi
PORTHOLE="$ROOT/target/bench-release/porthole"

start_porthole main true ${BOT_ENV:-}
URL="http://127.0.0.1:$PORT_main/mcp"
PID=$PID_main
SESSION=""
[[ $KIND == legacy ]] && SESSION=$(open_session "$URL")
if [[ $KIND == ceiling ]]; then
  save_bot_result "$URL" "$TOOL" "$WORK/result.json"
  start_ceiling "$ROOT/target/bench-release/examples/bare_axum" "$WORK/result.json"
  PID=$CEILING_PID
  URL=$CEILING_URL
  FRAMES=${FRAMES_CEILING:-"Handler<(M,T1,T2),S>>::call::{{closure}} bare_axum::json_reply"}
fi

export BENCH_KIND=$KIND BENCH_TOOL=$TOOL BENCH_TOKEN=$TOKEN BENCH_SESSION=$SESSION
taskset -c "$CLIENT_CPU" wrk -t1 -c16 -d1s -s "$ROOT/scripts/bench/mcp_call.lua" "$URL" >/dev/null
taskset -c "$CLIENT_CPU" wrk -t1 -c16 -d"$((SECS + 2))"s -s "$ROOT/scripts/bench/mcp_call.lua" "$URL" >"$WORK/wrk.txt" &
LOAD=$!
sleep 1
perf record -q -F 2999 --call-graph dwarf,16384 -p "$PID" -o "$OUT_DIR/perf.data" -- sleep "$SECS" >/dev/null 2>&1
wait "$LOAD"
perf script -i "$OUT_DIR/perf.data" -F ip,sym,dso >"$OUT_DIR/stacks.txt" 2>/dev/null
echo "$KIND, c=16, $SECS s recorded; profile in $OUT_DIR"
# shellcheck disable=SC2086
python3 "$ROOT/scripts/bench/breakdown.py" "$OUT_DIR/stacks.txt" $FRAMES
