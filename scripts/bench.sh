#!/usr/bin/env bash
# Porthole's /mcp under load, against a bare axum ceiling measured in the same run.
#
#   scripts/bench.sh                 build release, run the sweep, print the verdict
#   scripts/bench.sh --api-info      also: GET /api/info with MCP off vs on (c=16)
#   scripts/bench.sh --api-info-only only that comparison
#   scripts/bench.sh --peers         also: rmcp, the official Rust SDK, serving the same
#                                    fixed result as the ceiling (scripts/peers/rmcp, built
#                                    on first use), driven with the modern request
#
# What it does (docs/performance.md has the figures and how to read them):
#   1. cargo build --release --bin porthole --example bare_axum
#   2. starts Porthole (MCP on, bearer auth on, PORT=0, DATABASE_PATH=:memory:,
#      SCHEDULER_ENABLED=false, RUST_LOG=warn) and the ceiling (examples/bare_axum.rs:
#      parses the same JSON-RPC body, returns a fixed result), both on 127.0.0.1,
#      both pinned to SERVER_CPU; wrk runs pinned to CLIENT_CPU;
#   3. for each concurrency in CONNS, runs (after a warm-up) the ceiling, the modern
#      stateless `tools/call` and the legacy in-session `tools/call`;
#   4. prints rps, p50, p99 and errors per point, the Porthole/ceiling ratios, and
#      whether the targets at c=16 were met. Exit status 0 either way (it is a
#      measurement, not a test); 1 only if the harness itself failed.
#
# Environment (all optional):
#   CONNS="1 16 64"  DURATION=10s  WARMUP=2s  ROUNDS=1 (medians over rounds)
#   SERVER_CPU=0  CLIENT_CPU=1  TOOL=list_agents  RUST_LOG=warn
#   CARGO="cargo"  (e.g. CARGO="nice -n 10 cargo")  CARGO_TARGET_DIR  SKIP_BUILD=1
#   OUT=file.jsonl  (every point appended as JSON)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONNS=${CONNS:-"1 16 64"}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
ROUNDS=${ROUNDS:-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
TOOL=${TOOL:-list_agents}
LOG_LEVEL=${RUST_LOG:-warn}
CARGO=${CARGO:-cargo}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=${OUT:-}
API_INFO=0
PEERS=0
for arg in "$@"; do
  case "$arg" in
    --peers) PEERS=1 ;;
    --api-info) API_INFO=1 ;;
    --api-info-only) API_INFO=1; CONNS="" ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

LUA="$ROOT/scripts/bench/mcp_call.lua"

# shellcheck source=bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"

# ---- load generator ----------------------------------------------------------------
ensure_wrk
command -v taskset >/dev/null || { echo "taskset (util-linux) is required" >&2; exit 1; }

# ---- build --------------------------------------------------------------------------
if [[ -z "${SKIP_BUILD:-}" ]]; then
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" $CARGO build --release --bin porthole --example bare_axum)
fi
PORTHOLE="$TARGET_DIR/release/porthole"
CEILING="$TARGET_DIR/release/examples/bare_axum"
RMCP="$TARGET_DIR/peers/release/rmcp-peer"
if [[ $PEERS == 1 && -z "${SKIP_BUILD:-}" ]]; then
  (cd "$ROOT/scripts/peers/rmcp" && CARGO_TARGET_DIR="$TARGET_DIR/peers" $CARGO build --release)
fi

# ---- servers ------------------------------------------------------------------------
# wait_for FILE REGEX: echoes the first capture group of REGEX once FILE has it.
wait_for() {
  local file=$1 regex=$2
  for _ in $(seq 1 200); do
    if [[ -s "$file" ]] && grep -Eq "$regex" "$file"; then
      grep -Eo "$regex" "$file" | head -1 | sed -E "s#$regex#\\1#"
      return 0
    fi
    sleep 0.05
  done
  echo "server did not start; its output:" >&2
  cat "$file" >&2
  return 1
}

start_porthole main true
PORT=$PORT_main
( exec env -i PATH="$PATH" PORT=0 BENCH_TOKEN="$TOKEN" taskset -c "$SERVER_CPU" "$CEILING" \
    >"$WORK/ceiling.log" 2>&1 ) &
PIDS+=("$!")
CEILING_PID=$!
CEILING_PORT=$(wait_for "$WORK/ceiling.log" 'listening on 127\.0\.0\.1:([0-9]+)')
MCP_URL="http://127.0.0.1:$PORT/mcp"
CEILING_URL="http://127.0.0.1:$CEILING_PORT/mcp"
KINDS="ceiling modern legacy"
if [[ $PEERS == 1 ]]; then
  ( exec env -i PATH="$PATH" PORT=0 BENCH_TOKEN="$TOKEN" taskset -c "$SERVER_CPU" "$RMCP" \
      >"$WORK/rmcp.log" 2>&1 ) &
  PIDS+=("$!")
  RMCP_PID=$!
  RMCP_URL="http://127.0.0.1:$(wait_for "$WORK/rmcp.log" 'listening on 127\.0\.0\.1:([0-9]+)')/mcp"
  KINDS+=" rmcp"
fi
# url_of KIND: where that kind of request goes (rmcp gets the modern request).
url_of() {
  case $1 in
    ceiling) echo "$CEILING_URL" ;;
    rmcp) echo "$RMCP_URL" ;;
    *) echo "$MCP_URL" ;;
  esac
}

# ---- legacy session -----------------------------------------------------------------
H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
   -H "Authorization: Bearer $TOKEN")
curl -sS -m 10 -D "$WORK/init.hdr" -o "$WORK/init.body" "${H[@]}" \
  -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}' \
  "$MCP_URL"
SESSION=$(grep -i '^mcp-session-id:' "$WORK/init.hdr" | cut -d: -f2 | tr -d ' \r')
[[ -n "$SESSION" ]] || { echo "initialize gave no Mcp-Session-Id:" >&2; cat "$WORK/init.hdr" "$WORK/init.body" >&2; exit 1; }
code=$(curl -sS -m 10 -o /dev/null -w '%{http_code}' "${H[@]}" -H "Mcp-Session-Id: $SESSION" \
  -H 'MCP-Protocol-Version: 2025-11-25' -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$MCP_URL")
[[ "$code" == 202 ]] || { echo "notifications/initialized answered $code" >&2; exit 1; }

# ---- one point ----------------------------------------------------------------------
# run_point KIND URL CONNS -> prints the JSON line from the Lua script.
run_point() {
  local kind=$1 url=$2 c=$3 threads=1
  local env=(BENCH_KIND="$kind" BENCH_TOOL="$TOOL" BENCH_TOKEN="$TOKEN" BENCH_SESSION="$SESSION")
  if [[ "$WARMUP" != 0 && "$WARMUP" != 0s ]]; then
    env "${env[@]}" taskset -c "$CLIENT_CPU" wrk -t"$threads" -c"$c" -d"$WARMUP" -s "$LUA" "$url" >/dev/null 2>&1 || true
  fi
  rm -f "$WORK/point.json"
  env "${env[@]}" BENCH_OUT="$WORK/point.json" taskset -c "$CLIENT_CPU" \
    wrk -t"$threads" -c"$c" -d"$DURATION" --timeout 5s -s "$LUA" "$url" >"$WORK/wrk.txt" 2>&1 || true
  if [[ ! -s "$WORK/point.json" ]]; then
    echo "wrk failed for $kind c=$c:" >&2; cat "$WORK/wrk.txt" >&2; exit 1
  fi
  cat "$WORK/point.json"
}
field() { grep -o "\"$1\":[0-9.]*" <<<"$2" | cut -d: -f2; }

# Probe: one request of each kind must pass the body check before anything is timed.
for kind in $KINDS; do
  probe=$(DURATION=1s WARMUP=0 run_point "$kind" "$(url_of "$kind")" 1)
  if [[ $(field errors "$probe") != 0 ]]; then
    echo "probe failed for $kind: $probe" >&2; exit 1
  fi
done

PORTHOLE_PID=$PID_main

cat <<EOF
machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)
servers pinned to CPU $SERVER_CPU, wrk (1 thread) to CPU $CLIENT_CPU; $DURATION per point after a $WARMUP warm-up; $ROUNDS round(s)
porthole $MCP_URL (tool $TOOL, RUST_LOG=$LOG_LEVEL)   ceiling $CEILING_URL
load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (anything else busy on this machine skews every figure)

EOF
printf '%-8s %5s %6s %10s %9s %9s %7s\n' kind conns round rps p50_ms p99_ms errors
declare -A RPS P50 P99 ERR
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{v[NR]=$1} END{print (NR%2)? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b>0) printf "%.2f", a/b; else print "n/a" }'; }
for round in $(seq 1 "$ROUNDS"); do
  for c in $CONNS; do
    for kind in $KINDS; do
      r=$(run_point "$kind" "$(url_of "$kind")" "$c")
      key="$kind/$c"
      RPS[$key]+="$(field rps "$r") "
      P50[$key]+="$(field p50_ms "$r") "
      P99[$key]+="$(field p99_ms "$r") "
      ERR[$key]=$(( ${ERR[$key]:-0} + $(field errors "$r") ))
      printf '%-8s %5s %6s %10s %9s %9s %7s\n' "$kind" "$c" "$round" "$(field rps "$r")" \
        "$(field p50_ms "$r")" "$(field p99_ms "$r")" "$(field errors "$r")"
      [[ $(field errors "$r") == 0 ]] || echo "   first bad reply: $(sed -E 's/.*"sample":"(.*)"}/\1/' <<<"$r")"
      if [[ -n "$OUT" ]]; then
        echo "{\"kind\":\"$kind\",\"conns\":$c,\"round\":$round,\"wrk\":$r}" >>"$OUT"
      fi
    done
  done
done

if [[ -n "$CONNS" ]]; then
echo
echo "summary (median of $ROUNDS round(s)); ratio = Porthole rps / ceiling rps, p99x = Porthole p99 / ceiling p99"
printf '%5s | %10s %8s | %10s %6s %8s %6s | %10s %6s %8s %6s | %6s\n' \
  conns ceil_rps ceil_p99 modern_rps ratio p99 p99x legacy_rps ratio p99 p99x errors
for c in $CONNS; do
  cr=$(median "${RPS[ceiling/$c]}"); cp=$(median "${P99[ceiling/$c]}")
  mr=$(median "${RPS[modern/$c]}");  mp=$(median "${P99[modern/$c]}")
  lr=$(median "${RPS[legacy/$c]}");  lp=$(median "${P99[legacy/$c]}")
  errs=$(( ${ERR[ceiling/$c]} + ${ERR[modern/$c]} + ${ERR[legacy/$c]} + ${ERR[rmcp/$c]:-0} ))
  printf '%5s | %10.0f %8.3f | %10.0f %6s %8.3f %6s | %10.0f %6s %8.3f %6s | %6s\n' "$c" \
    "$cr" "$cp" "$mr" "$(ratio "$mr" "$cr")" "$mp" "$(ratio "$mp" "$cp")" \
    "$lr" "$(ratio "$lr" "$cr")" "$lp" "$(ratio "$lp" "$cp")" "$errs"
done

if [[ $PEERS == 1 ]]; then
  echo
  echo "peer: rmcp 3.9.0 stateless, JSON replies, the modern request (same fixed result as the ceiling)"
  printf '%5s | %10s %6s %8s | %s\n' conns rmcp_rps ratio p99 "Porthole modern / rmcp"
  for c in $CONNS; do
    cr=$(median "${RPS[ceiling/$c]}"); mr=$(median "${RPS[modern/$c]}")
    rr=$(median "${RPS[rmcp/$c]}"); rp=$(median "${P99[rmcp/$c]}")
    printf '%5s | %10.0f %6s %8.3f | %sx\n' "$c" "$rr" "$(ratio "$rr" "$cr")" "$rp" "$(ratio "$mr" "$rr")"
  done
fi

echo
echo "targets at c=16 (auth and guards on):"
verdict() { if [[ $1 == 1 ]]; then echo "MET"; else echo "MISSED"; fi; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN{print (a>=b)?1:0}'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN{print (a<=b)?1:0}'; }
if [[ " $CONNS " == *" 16 "* ]]; then
  cr=$(median "${RPS[ceiling/16]}"); cp=$(median "${P99[ceiling/16]}")
  mr=$(median "${RPS[modern/16]}");  mp=$(median "${P99[modern/16]}")
  lr=$(median "${RPS[legacy/16]}");  lp=$(median "${P99[legacy/16]}")
  echo "  modern stateless tools/call >= 0.80 x ceiling rps: $(ratio "$mr" "$cr")  $(verdict "$(ge "$(ratio "$mr" "$cr")" 0.8)")"
  echo "  legacy in-session tools/call >= 0.60 x ceiling rps: $(ratio "$lr" "$cr")  $(verdict "$(ge "$(ratio "$lr" "$cr")" 0.6)")"
  echo "  modern p99 <= 2 x ceiling p99: ${mp} ms vs ${cp} ms  $(verdict "$(le "$mp" "$(awk -v p="$cp" 'BEGIN{print 2*p}')")")"
  echo "  legacy p99 <= 2 x ceiling p99: ${lp} ms vs ${cp} ms  $(verdict "$(le "$lp" "$(awk -v p="$cp" 'BEGIN{print 2*p}')")")"
else
  echo "  (not evaluated: CONNS has no 16)"
fi
total=0
for key in "${!ERR[@]}"; do total=$(( total + ${ERR[$key]} )); done
echo "  zero errors over every point: $total errors  $(verdict "$([[ $total == 0 ]] && echo 1 || echo 0)")"
echo "  porthole VmRSS $(vm VmRSS "$PORTHOLE_PID") kB, VmHWM $(vm VmHWM "$PORTHOLE_PID") kB; ceiling VmHWM $(vm VmHWM "$CEILING_PID") kB"
if [[ $PEERS == 1 ]]; then echo "  rmcp VmHWM $(vm VmHWM "$RMCP_PID") kB"; fi
fi

# ---- optional: /api/info with MCP off and on ----------------------------------------
if [[ $API_INFO == 1 ]]; then
  start_porthole off false
  start_porthole on true
  echo
  echo "GET /api/info (the web API), c=16, $DURATION per point, two fresh processes: MCP off and MCP on,"
  echo "alternating, $ROUNDS round(s)"
  declare -A INFO_RPS INFO_P99
  for round in $(seq 1 "$ROUNDS"); do
    for name in off on; do
      port_var="PORT_$name"
      url="http://127.0.0.1:${!port_var}/api/info"
      taskset -c "$CLIENT_CPU" wrk -t1 -c16 -d"$WARMUP" "$url" >/dev/null 2>&1 || true
      taskset -c "$CLIENT_CPU" wrk -t1 -c16 -d"$DURATION" --latency "$url" >"$WORK/info.txt" 2>&1
      rps=$(awk '/Requests\/sec/{print $2}' "$WORK/info.txt")
      p50=$(awk '$1=="50%"{print $2}' "$WORK/info.txt")
      p99=$(awk '$1=="99%"{print $2}' "$WORK/info.txt")
      non2xx=$(awk '/Non-2xx/{print $NF}' "$WORK/info.txt")
      INFO_RPS[$name]+="$rps "
      label=$([[ $name == off ]] && echo "MCP off" || echo "MCP on ")
      echo "  round $round  $label  rps $rps  p50 $p50  p99 $p99  non-2xx ${non2xx:-0}"
    done
  done
  off=$(median "${INFO_RPS[off]}"); on=$(median "${INFO_RPS[on]}")
  echo "  median rps: MCP off $off, MCP on $on (on/off $(ratio "$on" "$off"))"
  echo "  VmRSS after: MCP off $(vm VmRSS "$PID_off") kB, MCP on $(vm VmRSS "$PID_on") kB"
fi
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
