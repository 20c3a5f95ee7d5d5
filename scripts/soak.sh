#!/usr/bin/env bash
# The mixed soak: what users really do, for a long stretch (default 10 minutes), against
# one release bot with a file database, turn tracing on, one MCP server configured in
# mcp.json (the Python stdio fixture of tests/fixtures) and a fake OpenAI-compatible
# model (scripts/soak/fake_openai.py, a real HTTP server). A script to run by hand, not
# in CI.
#
#   scripts/soak.sh                      10 minutes, 64 clients, 8 held streams
#   SOAK_SECS=60 scripts/soak.sh         a short run
#
# The load (scripts/soak/driver.py): 64 clients, half 2026-07-28 and half 2025-11-25 in
# sessions, each looping over send_message, send_message as a task polled to completion,
# db_query, server_log read with its cursor, list_traces/get_trace, get_llm_calls,
# tools/list and (legacy) sessions deleted and created; 8 streams held open 20-40 s at a
# time (subscriptions/listen and legacy GET); the MCP server toggled off and on every
# 20 s. Every reply is checked.
#
# Every SAMPLE_SECS it prints the bot's VmRSS, open fds, the database's size (with its
# WAL) and the row counts of trace_spans, conversations and messages. It fails (exit 1)
# on any error; when RSS grows more than MAX_RSS_GROWTH_PCT (default 25) or the fd count
# more than MAX_FD_GROWTH (default 24) from the first sample to the last; or when
# trace_spans grows in the second half of the run while TRACE_MAX_TURNS caps it.
#
# Environment: SOAK_SECS=600 CLIENTS=64 STREAMS=8 SAMPLE_SECS=30 RUST_LOG=warn
#   TRACE_MAX_TURNS=200 SERVER_CPU=0-1 CARGO=cargo CARGO_TARGET_DIR SKIP_BUILD=1
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SOAK_SECS=${SOAK_SECS:-600}
CLIENTS=${CLIENTS:-64}
STREAMS=${STREAMS:-8}
SAMPLE_SECS=${SAMPLE_SECS:-30}
LOG_LEVEL=${RUST_LOG:-warn}
TRACE_MAX_TURNS=${TRACE_MAX_TURNS:-200}
SERVER_CPU=${SERVER_CPU:-0-1}
CARGO=${CARGO:-cargo}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
MAX_RSS_GROWTH_PCT=${MAX_RSS_GROWTH_PCT:-25}
MAX_FD_GROWTH=${MAX_FD_GROWTH:-24}

# shellcheck source=bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"
command -v taskset >/dev/null || { echo "taskset (util-linux) is required" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }

if [[ -z "${SKIP_BUILD:-}" ]]; then
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" $CARGO build --release --bin porthole)
fi
PORTHOLE="$TARGET_DIR/release/porthole"

# The fake model.
python3 "$ROOT/scripts/soak/fake_openai.py" --stats "$WORK/llm.json" >"$WORK/llm.out" 2>&1 &
PIDS+=("$!")
for _ in $(seq 1 100); do grep -q '^PORT ' "$WORK/llm.out" 2>/dev/null && break; sleep 0.05; done
LLM_PORT=$(awk '/^PORT /{print $2}' "$WORK/llm.out")
[[ -n "$LLM_PORT" ]] || { echo "the fake model did not start" >&2; cat "$WORK/llm.out" >&2; exit 1; }

# The bot, with one MCP server in its mcp.json.
mkdir -p "$WORK/soak"
cat >"$WORK/soak/mcp.json" <<JSON
{"mcpServers": {"fixture": {"command": "python3", "args": ["$ROOT/tests/fixtures/stdio_mcp_server.py"]}}}
JSON
DB="$WORK/soak/soak.db"
start_porthole soak true DATABASE_PATH="$DB" TRACE_ENABLED=true \
  TRACE_MAX_TURNS="$TRACE_MAX_TURNS" LLM_PROVIDER=openai \
  LLM_BASE_URL="http://127.0.0.1:$LLM_PORT/v1" LLM_API_KEY=sk-soak-0123456789abcdef \
  LLM_MODEL=fake-model
BOT=$PID_soak

python3 "$ROOT/scripts/soak/driver.py" --port "$PORT_soak" --token "$TOKEN" \
  --secs "$SOAK_SECS" --clients "$CLIENTS" --streams "$STREAMS" --mcp-server fixture \
  --out "$WORK/driver.json" >"$WORK/driver.out" 2>&1 &
DRIVER=$!
PIDS+=("$DRIVER")

fds() { find "/proc/$BOT/fd" -maxdepth 1 -type l 2>/dev/null | wc -l; }
db_bytes() { cat "$DB" "$DB-wal" 2>/dev/null | wc -c; }
rows() { # table: its row count, read-only
  python3 - "$DB" "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, timeout=10)
print(db.execute(f"SELECT count(*) FROM {sys.argv[2]}").fetchone()[0])
PY
}
ops() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["total_ops"], d["total_errors"])' "$WORK/driver.json" 2>/dev/null || echo "0 0"; }

echo "soak: ${SOAK_SECS}s, $CLIENTS clients ($((CLIENTS / 2)) modern, $((CLIENTS - CLIENTS / 2)) legacy), $STREAMS streams, bot pid $BOT"
printf '%8s %10s %5s %12s %12s %13s %9s %8s %7s\n' elapsed rss_kB fds db_bytes trace_spans conversations messages ops errors
samples=()
start=$SECONDS
while kill -0 "$DRIVER" 2>/dev/null; do
  sleep "$SAMPLE_SECS"
  kill -0 "$BOT" 2>/dev/null || { echo "the bot died" >&2; tail -20 "$WORK/soak/out.log" >&2; exit 1; }
  kill -0 "$DRIVER" 2>/dev/null || break
  read -r total errs <<<"$(ops)"
  line="$((SECONDS - start)) $(vm VmRSS "$BOT") $(fds) $(db_bytes) $(rows trace_spans) $(rows conversations) $(rows messages) $total $errs"
  samples+=("$line")
  # shellcheck disable=SC2086
  printf '%7ss %10s %5s %12s %12s %13s %9s %8s %7s\n' $line
done
wait "$DRIVER" || true

echo "driver: $(cat "$WORK/driver.json")"
echo "fake model: $(cat "$WORK/llm.json" 2>/dev/null)"
(( ${#samples[@]} >= 2 )) || { echo "FAIL: fewer than two samples (SOAK_SECS too short for SAMPLE_SECS)"; exit 1; }
read -r _ first_rss first_fds _ _ _ _ _ _ <<<"${samples[0]}"
read -r _ last_rss last_fds _ _ _ _ _ _ <<<"${samples[-1]}"
mid=$(( ${#samples[@]} / 2 ))
read -r _ _ _ _ mid_spans _ _ _ _ <<<"${samples[$mid]}"
read -r _ _ _ _ last_spans _ _ _ _ <<<"${samples[-1]}"
read -r total errors <<<"$(ops)"
growth=$(( (last_rss - first_rss) * 100 / first_rss ))
echo "operations $total, errors $errors; RSS ${first_rss} -> ${last_rss} kB (${growth}%), fds ${first_fds} -> ${last_fds}, trace_spans ${mid_spans} (mid-run) -> ${last_spans}"
status=0
[[ $errors -eq 0 ]] || { echo "FAIL: $errors errors"; status=1; }
[[ $total -gt 0 ]] || { echo "FAIL: no operations"; status=1; }
[[ $growth -le $MAX_RSS_GROWTH_PCT ]] || { echo "FAIL: RSS grew more than ${MAX_RSS_GROWTH_PCT}%"; status=1; }
[[ $((last_fds - first_fds)) -le $MAX_FD_GROWTH ]] || { echo "FAIL: open fds grew by more than $MAX_FD_GROWTH"; status=1; }
if (( mid_spans > 0 && last_spans > mid_spans * 3 / 2 )); then
  echo "FAIL: trace_spans still growing in the second half (TRACE_MAX_TURNS=$TRACE_MAX_TURNS)"; status=1
fi
[[ $status -eq 0 ]] && echo "PASS: no errors; RSS, fds and trace tables bounded"
exit $status
