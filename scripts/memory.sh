#!/usr/bin/env bash
# Memory of the running bot, read as VmRSS from /proc/PID/status (kB).
#
#   scripts/memory.sh
#
# Four fresh release processes (MCP on, auth on, RUST_LOG=warn unless said, pinned to
# SERVER_CPU), each measured after a warm-up so one-time allocations are not charged:
#   hi    MCP_MAX_SESSIONS=1000000 MCP_SESSION_IDLE_SECS=30: N x initialize (+ initialized);
#         RSS per live session; then wait for the idle housekeeping (every 30 s) to
#         evict them all and the allocator sweep (every 10 s) to hand the memory back,
#         and read RSS again.
#   cap   MCP_MAX_SESSIONS=100: N x initialize; all but 100 are evicted as they come.
#   ring  MCP_LOG_BUFFER_SIZE=10000, RUST_LOG=info: RING_CALLS x tools/call, each adding
#         one audit line, so the buffer ends full.
#   ring10  the same with MCP_LOG_BUFFER_SIZE=10: the control; the difference between
#         the two is the buffer's own memory.
# `cargo bench --bench memory` counts the same things as exact heap bytes.
#
# Environment: N=10000  RING_CALLS=12000  SERVER_CPU=0  CARGO  CARGO_TARGET_DIR  SKIP_BUILD=1
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
N=${N:-10000}
RING_CALLS=${RING_CALLS:-12000}
SERVER_CPU=${SERVER_CPU:-0}
LOG_LEVEL=warn
CARGO=${CARGO:-cargo}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
CLIENT="$ROOT/scripts/bench/mcp_client.py"
# shellcheck source=bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"

if [[ -z "${SKIP_BUILD:-}" ]]; then
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" $CARGO build --release --bin porthole)
fi
PORTHOLE="$TARGET_DIR/release/porthole"
command -v python3 >/dev/null || { echo "python3 is required" >&2; exit 1; }

url() { local v="PORT_$1"; echo "http://127.0.0.1:${!v}/mcp"; }
pid() { local v="PID_$1"; echo "${!v}"; }
client() { python3 "$CLIENT" "$(url "$1")" "$TOKEN" "${@:2}"; }
per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN{printf "%.2f", (b-a)/n}'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%+.1f%%", (b-a)*100/a}'; }

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
echo "N=$N sessions, RING_CALLS=$RING_CALLS; RSS in kB from /proc/PID/status"
echo

start_porthole hi true MCP_MAX_SESSIONS=1000000 MCP_SESSION_IDLE_SECS=30
start_porthole cap true MCP_MAX_SESSIONS=100
echo "startup VmRSS: $(vm VmRSS "$(pid hi)") kB (MCP on, nothing served yet)"

# ---- sessions, high cap ---------------------------------------------------------------
client hi init 50 >/dev/null
sleep 1
hi0=$(vm VmRSS "$(pid hi)")
r=$(client hi init "$N" "$WORK/ids")
sleep 1
hi1=$(vm VmRSS "$(pid hi)")
hwm1=$(vm VmHWM "$(pid hi)")
echo "## sessions, MCP_MAX_SESSIONS=1000000"
echo "client: $r"
echo "VmRSS before $hi0, after $N initializes $hi1: $(per "$hi0" "$hi1" "$N") KiB per session (target <= 4); peak so far (VmHWM) $hwm1 kB"
ended_at=$(date +%s)

# ---- sessions, cap 100 (runs while `hi` waits for its housekeeping) ------------------
client cap init 50 >/dev/null
sleep 1
cap0=$(vm VmRSS "$(pid cap)")
r=$(client cap init "$N")
sleep 1
cap1=$(vm VmRSS "$(pid cap)")
echo
echo "## sessions, MCP_MAX_SESSIONS=100 (evicted as new ones arrive)"
echo "client: $r"
echo "VmRSS before $cap0, after $N initializes $cap1: $(pct "$cap0" "$cap1") vs baseline, $(per "$cap0" "$cap1" "$N") KiB per initialize (target: within 10%)"

# ---- ring buffer -----------------------------------------------------------------------
LOG_LEVEL=info start_porthole ring true MCP_LOG_BUFFER_SIZE=10000
LOG_LEVEL=info start_porthole ring10 true MCP_LOG_BUFFER_SIZE=10
echo
echo "## log ring buffer, RUST_LOG=info (one audit line per tools/call)"
for name in ring ring10; do
  client "$name" call 200 list_agents >/dev/null
  sleep 1
  r0=$(vm VmRSS "$(pid "$name")")
  r=$(client "$name" call "$RING_CALLS" list_agents)
  sleep 1
  r1=$(vm VmRSS "$(pid "$name")")
  printf -v "RING_$name" '%s' "$((r1 - r0))"
  echo "$name: VmRSS before $r0, after $RING_CALLS calls $r1 (+$((r1 - r0)) kB); client: $r"
done
echo "buffer of 10,000 lines vs 10 lines: $((RING_ring - RING_ring10)) kB of RSS"

# ---- sessions, high cap, after idle eviction ------------------------------------------
# Idle after 30 s, housekeeping every 30 s, allocator sweep every 10 s: 75 s is enough.
wait_until=$((ended_at + 75))
now=$(date +%s)
if (( now < wait_until )); then
  echo
  echo "(waiting $((wait_until - now)) s for the idle housekeeping to evict the $N sessions)"
  sleep $((wait_until - now))
fi
hi2=$(vm VmRSS "$(pid hi)")
echo
echo "## sessions, MCP_MAX_SESSIONS=1000000, after idle eviction (MCP_SESSION_IDLE_SECS=30)"
alive=$(curl -sS -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' -H "Authorization: Bearer $TOKEN" \
  -H "Mcp-Session-Id: $(tail -1 "$WORK/ids")" -H 'MCP-Protocol-Version: 2025-11-25' \
  -d '{"jsonrpc":"2.0","id":9,"method":"ping"}' "$(url hi)")
echo "last session now answers HTTP $alive (404 = evicted)"
echo "VmRSS baseline $hi0, with sessions $hi1, after eviction $hi2: $(pct "$hi0" "$hi2") vs baseline (target: within 10%); peak (VmHWM) $hwm1 kB before the eviction, $(vm VmHWM "$(pid hi)") kB after"
echo "VmHWM: hi $(vm VmHWM "$(pid hi)"), cap $(vm VmHWM "$(pid cap)"), ring $(vm VmHWM "$(pid ring)") kB"
