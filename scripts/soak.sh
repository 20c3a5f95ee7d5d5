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
# The bot keeps its tables within limits, set small here so each reaches its steady
# state early in the run: TRACE_MAX_TURNS=200 for the traces, CONVERSATION_MAX_COUNT=1000
# for the conversations every send_message starts (with their messages),
# MCP_SESSION_MAX_AGE_SECS=120 for the ended session ids the ledger keeps (by default a
# day's worth, up to 100,000), LOG_DB_MAX_EVENTS (default) for log_events, and
# MCP_TASK_TTL_SECS=60 for /mcp tasks (2026-07-28 tasks name no ttl, so the bot's default,
# an hour, would hold every task of a 10-minute run; expired ones are purged every 30 s).
#
# Every SAMPLE_SECS it prints the bot's VmRSS, open fds, the database's size (the bot's
# file and the traces' file beside it, each with its WAL; and the WALs alone) and the row counts of trace_turns, conversations, messages,
# mcp_tasks and mcp_ended_sessions. It fails (exit 1) on any error; when RSS grows more
# than MAX_RSS_GROWTH_PCT (default 25) or the fd count more than MAX_FD_GROWTH (default
# 24) from the first sample to the last; when trace_turns, conversations, messages or mcp_tasks
# grow by half again in the second half of the run (mid-run sample to the last) while
# their limits cap them; or when the database with its WAL grows more than
# MAX_DB_GROWTH_PCT (default 20) in the second half (SQLite reuses the pages a prune
# frees, so a bounded store stops growing once its tables are full). The database is
# judged only when the mid-run sample comes after STEADY_SECS (default 120): before
# that, /mcp tasks are still filling up to their TTL.
#
# Environment: SOAK_SECS=600 CLIENTS=64 STREAMS=8 SAMPLE_SECS=30 RUST_LOG=warn
#   TRACE_MAX_TURNS=200 CONVERSATION_MAX_COUNT=1000 SERVER_CPU=0-1 CARGO=cargo
#   CARGO_TARGET_DIR SKIP_BUILD=1 MCP_SESSION_MAX_AGE_SECS=120 MCP_TASK_TTL_SECS=60
#   MAX_DB_GROWTH_PCT=20
#   STEADY_SECS=120
#   PORTHOLE_BIN=path (run this binary instead of building the release one; a debug
#   build is far slower, so only for checking the script)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SOAK_SECS=${SOAK_SECS:-600}
CLIENTS=${CLIENTS:-64}
STREAMS=${STREAMS:-8}
SAMPLE_SECS=${SAMPLE_SECS:-30}
LOG_LEVEL=${RUST_LOG:-warn}
TRACE_MAX_TURNS=${TRACE_MAX_TURNS:-200}
CONVERSATION_MAX_COUNT=${CONVERSATION_MAX_COUNT:-1000}
MCP_SESSION_MAX_AGE_SECS=${MCP_SESSION_MAX_AGE_SECS:-120}
MCP_TASK_TTL_SECS=${MCP_TASK_TTL_SECS:-60}
SERVER_CPU=${SERVER_CPU:-0-1}
CARGO=${CARGO:-cargo}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
MAX_RSS_GROWTH_PCT=${MAX_RSS_GROWTH_PCT:-25}
MAX_FD_GROWTH=${MAX_FD_GROWTH:-24}
MAX_DB_GROWTH_PCT=${MAX_DB_GROWTH_PCT:-20}
STEADY_SECS=${STEADY_SECS:-120}

# shellcheck source=bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"
command -v taskset >/dev/null || { echo "taskset (util-linux) is required" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }

if [[ -n "${PORTHOLE_BIN:-}" ]]; then
  PORTHOLE=$PORTHOLE_BIN
else
  if [[ -z "${SKIP_BUILD:-}" ]]; then
    (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" $CARGO build --release --bin porthole)
  fi
  PORTHOLE="$TARGET_DIR/release/porthole"
fi
[[ -x "$PORTHOLE" ]] || { echo "no bot binary at $PORTHOLE" >&2; exit 1; }

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
  TRACE_MAX_TURNS="$TRACE_MAX_TURNS" CONVERSATION_MAX_COUNT="$CONVERSATION_MAX_COUNT" \
  MCP_SESSION_MAX_AGE_SECS="$MCP_SESSION_MAX_AGE_SECS" MCP_TASK_TTL_SECS="$MCP_TASK_TTL_SECS" \
  LLM_PROVIDER=openai \
  LLM_BASE_URL="http://127.0.0.1:$LLM_PORT/v1" LLM_API_KEY=sk-soak-0123456789abcdef \
  LLM_MODEL=fake-model
BOT=$PID_soak

python3 "$ROOT/scripts/soak/driver.py" --port "$PORT_soak" --token "$TOKEN" \
  --secs "$SOAK_SECS" --clients "$CLIENTS" --streams "$STREAMS" --mcp-server fixture \
  --out "$WORK/driver.json" >"$WORK/driver.out" 2>&1 &
DRIVER=$!
PIDS+=("$DRIVER")

# The traces live in a file of their own beside the bot's (docs/traces.md); sizes count both.
TRACES_DB="$WORK/soak/soak.traces.db"
fds() { find "/proc/$BOT/fd" -maxdepth 1 -type l 2>/dev/null | wc -l; }
db_bytes() { cat "$DB" "$DB-wal" "$TRACES_DB" "$TRACES_DB-wal" 2>/dev/null | wc -c; }
wal_bytes() { cat "$DB-wal" "$TRACES_DB-wal" 2>/dev/null | wc -c; }
TABLES=(trace_turns conversations messages mcp_tasks mcp_ended_sessions)
rows() { # the row count of each of TABLES, read-only, in one connection to both files
  python3 - "$DB" "$TRACES_DB" "${TABLES[@]}" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, timeout=10)
db.execute("ATTACH DATABASE ? AS traces", (f"file:{sys.argv[2]}?mode=ro",))
print(" ".join(str(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in sys.argv[3:]))
PY
}
ops() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["total_ops"], d["total_errors"])' "$WORK/driver.json" 2>/dev/null || echo "0 0"; }

echo "soak: ${SOAK_SECS}s, $CLIENTS clients ($((CLIENTS / 2)) modern, $((CLIENTS - CLIENTS / 2)) legacy), $STREAMS streams, bot pid $BOT"
# One sample: the columns below, in this order (read back by name with `field`).
COLUMNS=(elapsed rss_kB fds db_bytes wal_bytes "${TABLES[@]}" ops errors)
FORMAT='%7ss %10s %5s %12s %10s %12s %13s %9s %9s %18s %8s %7s\n'
# shellcheck disable=SC2059
printf "${FORMAT/\%7ss/%8s}" "${COLUMNS[@]}"
samples=()
start=$SECONDS
while kill -0 "$DRIVER" 2>/dev/null; do
  sleep "$SAMPLE_SECS"
  kill -0 "$BOT" 2>/dev/null || { echo "the bot died" >&2; tail -20 "$WORK/soak/out.log" >&2; exit 1; }
  kill -0 "$DRIVER" 2>/dev/null || break
  read -r total errs <<<"$(ops)"
  line="$((SECONDS - start)) $(vm VmRSS "$BOT") $(fds) $(db_bytes) $(wal_bytes) $(rows) $total $errs"
  samples+=("$line")
  # shellcheck disable=SC2059,SC2086
  printf "$FORMAT" $line
done
wait "$DRIVER" || true

echo "driver: $(cat "$WORK/driver.json")"
echo "fake model: $(cat "$WORK/llm.json" 2>/dev/null)"
(( ${#samples[@]} >= 2 )) || { echo "FAIL: fewer than two samples (SOAK_SECS too short for SAMPLE_SECS)"; exit 1; }
# field SAMPLE COLUMN: that column of a sample line.
field() {
  local -a values
  read -r -a values <<<"$1"
  local i
  for i in "${!COLUMNS[@]}"; do
    [[ ${COLUMNS[$i]} == "$2" ]] && { echo "${values[$i]}"; return; }
  done
  echo "no column $2" >&2; exit 1
}
first=${samples[0]}
mid=${samples[$(( ${#samples[@]} / 2 ))]}
last=${samples[-1]}
first_rss=$(field "$first" rss_kB); last_rss=$(field "$last" rss_kB)
first_fds=$(field "$first" fds); last_fds=$(field "$last" fds)
read -r total errors <<<"$(ops)"
growth=$(( (last_rss - first_rss) * 100 / first_rss ))
echo "operations $total, errors $errors; RSS ${first_rss} -> ${last_rss} kB (${growth}%), fds ${first_fds} -> ${last_fds}"
status=0
[[ $errors -eq 0 ]] || { echo "FAIL: $errors errors"; status=1; }
[[ $total -gt 0 ]] || { echo "FAIL: no operations"; status=1; }
[[ $growth -le $MAX_RSS_GROWTH_PCT ]] || { echo "FAIL: RSS grew more than ${MAX_RSS_GROWTH_PCT}%"; status=1; }
[[ $((last_fds - first_fds)) -le $MAX_FD_GROWTH ]] || { echo "FAIL: open fds grew by more than $MAX_FD_GROWTH"; status=1; }
# The capped tables: at most half again in the second half (they hover around their cap
# plus what arrives between two prunes), never the steady climb of an uncapped table.
for table in trace_turns conversations messages mcp_tasks; do
  at_mid=$(field "$mid" "$table"); at_end=$(field "$last" "$table")
  echo "$table: ${at_mid} (mid-run) -> ${at_end}"
  if (( at_mid > 0 && at_end > at_mid * 3 / 2 )); then
    echo "FAIL: $table still growing in the second half (TRACE_MAX_TURNS=$TRACE_MAX_TURNS, CONVERSATION_MAX_COUNT=$CONVERSATION_MAX_COUNT, MCP_TASK_TTL_SECS=$MCP_TASK_TTL_SECS, MCP_SESSION_MAX_AGE_SECS=$MCP_SESSION_MAX_AGE_SECS)"; status=1
  fi
done
mid_db=$(field "$mid" db_bytes); last_db=$(field "$last" db_bytes)
echo "database with WAL: ${mid_db} (mid-run) -> ${last_db} bytes; WAL $(field "$mid" wal_bytes) -> $(field "$last" wal_bytes) bytes"
db_judged=true
if (( $(field "$mid" elapsed) < STEADY_SECS )); then
  db_judged=false
  echo "database size not judged: the mid-run sample is before ${STEADY_SECS}s, when /mcp tasks are still filling up (run longer)"
elif (( last_db > mid_db * (100 + MAX_DB_GROWTH_PCT) / 100 )); then
  echo "FAIL: the database grew more than ${MAX_DB_GROWTH_PCT}% in the second half"; status=1
fi
if [[ $status -eq 0 ]]; then
  if $db_judged; then
    echo "PASS: no errors; RSS, fds, trace tables, conversations and the database size bounded"
  else
    echo "PASS: no errors; RSS, fds, trace tables and conversations bounded (database size not judged)"
  fi
fi
exit $status
