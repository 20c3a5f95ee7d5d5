#!/usr/bin/env bash
# Two builds of the bot side by side: the same `tools/call` under wrk against each, in
# rounds whose order alternates (A B, B A, …), so that the drift of the machine hits both
# alike. What it is for: whether a change makes the call faster, read as a ratio of two
# builds measured together (the ceiling of scripts/bench.sh is not needed for that).
#
#   scripts/bench-ab.sh BIN_A BIN_B [ROUNDS]      e.g. two copies of target/bench-release/porthole
#
# Build each commit with `cargo build --profile bench-release --bin porthole` and copy the
# binary aside. Each bot runs traced (as by default), pinned to SERVER_CPU, wrk (one
# thread) to CLIENT_CPU; each point has a 2 s warm-up. It prints each point's rps and
# p99, the mean rps of each build and B / A, then both bots' trace counters (`health`).
#
# Environment: KIND=legacy|modern (default legacy), C=16 connections, DURATION=5s,
#   TOOL=list_agents, SERVER_CPU=0, CLIENT_CPU=1.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
[[ $# -ge 2 && -x $1 && -x $2 ]] || { echo "usage: $0 BIN_A BIN_B [ROUNDS] (two executable bot builds)" >&2; exit 2; }
# Absolute: each bot starts in a folder of its own.
A=$(realpath "$1") B=$(realpath "$2") ROUNDS=${3:-4}
KIND=${KIND:-legacy} C=${C:-16} DURATION=${DURATION:-5s} TOOL=${TOOL:-list_agents}
[[ $KIND == legacy || $KIND == modern ]] || { echo "KIND must be legacy or modern" >&2; exit 2; }
LOG_LEVEL=warn SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1}
LUA="$ROOT/scripts/bench/mcp_call.lua"

# shellcheck source=bench/lib.sh
source "$ROOT/scripts/bench/lib.sh"
ensure_wrk
H=(-H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json'
   -H 'Accept: application/json, text/event-stream')
PORTHOLE=$A start_porthole a true
PORTHOLE=$B start_porthole b true
# shellcheck disable=SC2154 # set by start_porthole
SESSION_a=$(open_session "http://127.0.0.1:$PORT_a/mcp")
# shellcheck disable=SC2154
SESSION_b=$(open_session "http://127.0.0.1:$PORT_b/mcp")

# point NAME: one warmed-up wrk run against build NAME (a or b); prints "rps p99_ms".
point() {
  local port_var="PORT_$1" session_var="SESSION_$1"
  local url="http://127.0.0.1:${!port_var}/mcp"
  local env=(BENCH_KIND="$KIND" BENCH_TOOL="$TOOL" BENCH_TOKEN="$TOKEN" BENCH_SESSION="${!session_var}")
  env "${env[@]}" taskset -c "$CLIENT_CPU" wrk -t1 -c"$C" -d2s -s "$LUA" "$url" >/dev/null 2>&1 || true
  rm -f "$WORK/point.json"
  env "${env[@]}" BENCH_OUT="$WORK/point.json" taskset -c "$CLIENT_CPU" \
    wrk -t1 -c"$C" -d"$DURATION" --timeout 5s -s "$LUA" "$url" >"$WORK/wrk.txt" 2>&1 || true
  [[ -s "$WORK/point.json" ]] || { echo "wrk failed against $1:" >&2; cat "$WORK/wrk.txt" >&2; exit 1; }
  if ! grep -q '"errors":0' "$WORK/point.json"; then
    echo "errors against $1: $(cat "$WORK/point.json")" >&2; exit 1
  fi
  python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); print(p["rps"], p["p99_ms"])' "$WORK/point.json"
}

echo "A = $A"
echo "B = $B"
echo "$KIND tools/call $TOOL, c=$C, $DURATION per point, $ROUNDS rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
SUM_a=0 SUM_b=0
for round in $(seq 1 "$ROUNDS"); do
  order="a b"; (( round % 2 )) || order="b a"
  for name in $order; do
    read -r rps p99 < <(point "$name")
    printf 'round %d  %s  rps %9.1f  p99 %6.3f ms\n' "$round" "${name^^}" "$rps" "$p99"
    if [[ $name == a ]]; then SUM_a=$(python3 -c "print($SUM_a + $rps)"); else SUM_b=$(python3 -c "print($SUM_b + $rps)"); fi
  done
done
python3 -c "a=$SUM_a/$ROUNDS; b=$SUM_b/$ROUNDS; print(f'mean rps: A {a:.0f}, B {b:.0f}; B / A {b/a:.3f}')"
echo "A trace counters: $(trace_counters "http://127.0.0.1:$PORT_a/mcp")"
echo "B trace counters: $(trace_counters "http://127.0.0.1:$PORT_b/mcp")"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
