#!/usr/bin/env bash
# Porthole's /mcp under load, against a bare axum ceiling measured in the same run.
#
#   scripts/bench.sh                 build (profile bench-release), run the sweep, print the verdict
#   scripts/bench.sh --api-info      also: GET /api/info with MCP off vs on (c=16)
#   scripts/bench.sh --api-info-only only that comparison
#   scripts/bench.sh --peers         also: rmcp, the official Rust SDK (scripts/peers/rmcp,
#                                    built on first use), stateless with the modern request
#                                    and with sessions with the legacy one; and once, at
#                                    c=16, the TypeScript and Python SDKs (scripts/peers/ts,
#                                    scripts/peers/python); all answer the bot's result
#   scripts/bench.sh --release-too   also: the bot as users build it (`cargo build --release`,
#                                    Cargo's default profile) beside the bench-release bot,
#                                    interleaved with it, against a ceiling built the same
#                                    way (kinds modern_rel and legacy_rel against
#                                    ceiling_rel: a ratio compares two builds of one profile)
#   scripts/bench.sh --untraced-too  also: the same bot with TRACE_ENABLED=false (kinds
#                                    modern_untr and legacy_untr), so the cost of the span
#                                    every tools/call records is read in the same run: its
#                                    share of a call's CPU, against issue 50's 10 %
#
# What it does (docs/performance.md has the figures and how to read them):
#   1. cargo build --profile bench-release --bin porthole --example bare_axum (the
#      profile in Cargo.toml kept for figures: fat LTO, one codegen unit; both use
#      mimalloc; the Rust peer is built in a profile of the same settings);
#   2. starts Porthole (MCP on, bearer auth on, PORT=0, DATABASE_PATH=:memory:,
#      SCHEDULER_ENABLED=false, RUST_LOG=warn) and the ceiling (examples/bare_axum.rs:
#      parses the same JSON-RPC body and answers the very result Porthole answered,
#      saved from one real call), both on 127.0.0.1, both pinned to SERVER_CPU; wrk
#      runs pinned to CLIENT_CPU;
#   3. for each concurrency in CONNS, runs ROUNDS rounds; each round runs every kind
#      once (the ceiling, the modern stateless `tools/call`, the legacy in-session
#      `tools/call`, peers), each ceiling next to the kinds read against it (the ceiling
#      first in odd rounds, last in even ones), so the two sides of a ratio are measured
#      seconds apart and drift hits both;
#   4. prints every point (rps, p50, p99, errors, the server's CPU time per request, and
#      wrk's own CPU use: near 100 % means the load generator, not the server, is the
#      limit), then per concurrency the median of the per-round ratios with their
#      range, and whether the targets were met. Exit status 0 either way (it is a
#      measurement, not a test); 1 only if the harness itself failed.
#
# Environment (all optional):
#   SHAPE=both (default) | claude-code | plain: the `tools/call` as Claude Code 2.1.337
#     sends it (`_meta` with its tool use id, a progress token and, 2026-07-28, its
#     clientInfo), the plain one, or both: then every kind also runs with the plain call
#     as KIND_plain (modern_plain, legacy_plain, …), against the same ceiling reading the
#     same plain body (ceiling_plain), in the same rounds (scripts/bench/mcp_call.lua)
#   CONNS="1 16 64"  DURATION=5s  WARMUP=1s  ROUNDS=5
#   SERVER_CPU=0  CLIENT_CPU=1  TOOL=list_agents  RUST_LOG=warn
#   CARGO="cargo"  (e.g. CARGO="nice -n 10 cargo")  CARGO_TARGET_DIR  SKIP_BUILD=1
#   OUT=file.jsonl  (every point appended as JSON)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SHAPE=${SHAPE:-both}
[[ $SHAPE == both || $SHAPE == claude-code || $SHAPE == plain ]] || { echo "SHAPE must be both, claude-code or plain" >&2; exit 2; }
CONNS=${CONNS:-"1 16 64"}
DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
ROUNDS=${ROUNDS:-5}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
TOOL=${TOOL:-list_agents}
LOG_LEVEL=${RUST_LOG:-warn}
CARGO=${CARGO:-cargo}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=${OUT:-}
API_INFO=0
PEERS=0
RELEASE_TOO=0
UNTRACED_TOO=0
for arg in "$@"; do
  case "$arg" in
    --peers) PEERS=1 ;;
    --release-too) RELEASE_TOO=1 ;;
    --untraced-too) UNTRACED_TOO=1 ;;
    --api-info) API_INFO=1 ;;
    --api-info-only) API_INFO=1; CONNS="" ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
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
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" $CARGO build --profile bench-release --bin porthole --example bare_axum)
fi
PORTHOLE="$TARGET_DIR/bench-release/porthole"
CEILING="$TARGET_DIR/bench-release/examples/bare_axum"
RMCP="$TARGET_DIR/peers/bench-release/rmcp-peer"
RMCP_VERSION=$(grep -o 'rmcp = { version = "=[0-9.]*' "$ROOT/scripts/peers/rmcp/Cargo.toml" | grep -o '[0-9.]*$')
if [[ $RELEASE_TOO == 1 && -z "${SKIP_BUILD:-}" ]]; then
  (cd "$ROOT" && CARGO_TARGET_DIR="$TARGET_DIR" $CARGO build --release --bin porthole --example bare_axum)
fi
# The rmcp peer is built on first use, SKIP_BUILD or not (nothing else builds it).
if [[ $PEERS == 1 && ( -z "${SKIP_BUILD:-}" || ! -x "$RMCP" ) ]]; then
  (cd "$ROOT/scripts/peers/rmcp" && CARGO_TARGET_DIR="$TARGET_DIR/peers" $CARGO build --profile bench-release)
fi

# ---- servers ------------------------------------------------------------------------
start_porthole main true
PORT=$PORT_main
MCP_URL="http://127.0.0.1:$PORT/mcp"
# The ceiling answers exactly what the bot answers: one real modern call, saved.
save_bot_result "$MCP_URL" "$TOOL" "$WORK/result.json"
start_ceiling "$CEILING" "$WORK/result.json"
CEILINGS="ceiling"
KINDS="modern legacy"
if [[ $RELEASE_TOO == 1 ]]; then
  # The users' build, started like the other: the same settings, its own process; and
  # its ceiling, the same example built by the same profile.
  PORTHOLE="$TARGET_DIR/release/porthole" start_porthole rel true
  REL_URL="http://127.0.0.1:$PORT_rel/mcp"
  start_ceiling "$TARGET_DIR/release/examples/bare_axum" "$WORK/result.json" ceiling_rel
  CEILINGS+=" ceiling_rel"
  KINDS+=" modern_rel legacy_rel"
fi
if [[ $UNTRACED_TOO == 1 ]]; then
  # The same build with tracing off: the difference is what recording spans costs.
  start_porthole untr true TRACE_ENABLED=false
  UNTR_URL="http://127.0.0.1:$PORT_untr/mcp"
  KINDS+=" modern_untr legacy_untr"
fi
if [[ $SHAPE == both ]]; then
  # The plain call beside Claude Code's: each kind and each ceiling once more, as KIND_plain.
  for kind in $CEILINGS; do CEILINGS+=" ${kind}_plain"; done
  for kind in $KINDS; do KINDS+=" ${kind}_plain"; done
fi
if [[ $PEERS == 1 ]]; then
  # rmcp twice: stateless (the modern request) and with sessions (the legacy request).
  for mode in 0 1; do
    ( exec env -i PATH="$PATH" PORT=0 BENCH_TOKEN="$TOKEN" BENCH_RESULT_FILE="$WORK/result.json" RMCP_SESSIONS=$mode taskset -c "$SERVER_CPU" "$RMCP" \
        >"$WORK/rmcp$mode.log" 2>&1 ) &
    PIDS+=("$!")
    printf -v "RMCP${mode}_PID" '%s' "$!"
    printf -v "RMCP${mode}_URL" '%s' "http://127.0.0.1:$(wait_for "$WORK/rmcp$mode.log" 'listening on 127\.0\.0\.1:([0-9]+)')/mcp"
  done
  KINDS+=" rmcp rmcp_legacy"
  # The TypeScript and Python SDKs: slower by far, so measured once, at c=16.
  # shellcheck source=bench/sdk_peers.sh
  source "$ROOT/scripts/bench/sdk_peers.sh"
  start_sdk_peers
  KINDS+=" ts python"
fi
# shape_of KIND: the call shape a kind sends (KIND_plain: the plain one).
shape_of() { if [[ $1 == *_plain ]]; then echo plain; elif [[ $SHAPE == both ]]; then echo claude-code; else echo "$SHAPE"; fi; }
# ceiling_of KIND: the ceiling a kind's ratios are taken against (the one of its profile,
# reading the same call shape).
ceiling_of() {
  local base
  case ${1%_plain} in *_rel) base=ceiling_rel ;; *) base=ceiling ;; esac
  if [[ $1 == *_plain ]]; then echo "${base}_plain"; else echo "$base"; fi
}
# untraced_of KIND: its twin with tracing off (modern_plain's is modern_untr_plain); a kind
# whose twin is not measured has no span share.
untraced_of() { if [[ $1 == *_plain ]]; then echo "${1%_plain}_untr_plain"; else echo "${1}_untr"; fi; }
# round_order ROUND: every ceiling next to the kinds read against it, the ceiling first in
# odd rounds and last in even ones: a ratio's two sides a few seconds apart, however many
# kinds a run has.
round_order() {
  local base kind group order=""
  for base in $CEILINGS; do
    group=""
    for kind in $KINDS; do [[ $(ceiling_of "$kind") == "$base" ]] && group+=" $kind"; done
    if (( $1 % 2 )); then order+=" $base$group"; else order+="$group $base"; fi
  done
  echo "$order"
}
# once_only KIND: the kinds measured in one round at c=16 only.
once_only() { [[ $1 == ts || $1 == python ]]; }
# url_of KIND: where that kind of request goes (KIND_plain: where KIND goes).
url_of() {
  case ${1%_plain} in
    ceiling) echo "$CEILING_URL" ;;
    ceiling_rel) echo "$CEILING_REL_URL" ;;
    rmcp) echo "$RMCP0_URL" ;;
    rmcp_legacy) echo "$RMCP1_URL" ;;
    ts) echo "$TS_URL" ;;
    python) echo "$PY_URL" ;;
    modern_rel|legacy_rel) echo "$REL_URL" ;;
    modern_untr|legacy_untr) echo "$UNTR_URL" ;;
    *) echo "$MCP_URL" ;;
  esac
}
# pid_of KIND: the server process that answers that kind.
pid_of() {
  case ${1%_plain} in
    ceiling) echo "$CEILING_PID" ;;
    ceiling_rel) echo "$CEILING_REL_PID" ;;
    rmcp) echo "$RMCP0_PID" ;;
    rmcp_legacy) echo "$RMCP1_PID" ;;
    ts) echo "$TS_PID" ;;
    python) echo "$PY_PID" ;;
    modern_rel|legacy_rel) echo "$PID_rel" ;;
    modern_untr|legacy_untr) echo "$PID_untr" ;;
    *) echo "$PID_main" ;;
  esac
}
# request_of KIND: which request the Lua script sends (the ceiling gets the modern one).
request_of() { case ${1%_plain} in legacy|legacy_rel|legacy_untr|rmcp_legacy) echo legacy ;; *) echo modern ;; esac; }
# cpu_ticks PID: user + system CPU time of a process, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICKS_PER_SEC=$(getconf CLK_TCK)

# ---- legacy sessions ----------------------------------------------------------------
SESSION=$(open_session "$MCP_URL")
if [[ $PEERS == 1 ]]; then RMCP_SESSION=$(open_session "$RMCP1_URL"); fi
if [[ $RELEASE_TOO == 1 ]]; then REL_SESSION=$(open_session "$REL_URL"); fi
if [[ $UNTRACED_TOO == 1 ]]; then UNTR_SESSION=$(open_session "$UNTR_URL"); fi
session_of() {
  case ${1%_plain} in
    rmcp_legacy) echo "$RMCP_SESSION" ;; legacy_rel) echo "$REL_SESSION" ;;
    legacy_untr) echo "$UNTR_SESSION" ;; *) echo "$SESSION" ;;
  esac
}

# ---- one point ----------------------------------------------------------------------
# run_point KIND URL CONNS -> prints the Lua script's JSON line, plus the server's CPU
# time per request (server_cpu_us) and wrk's own CPU use over the point (wrk_cpu_pct).
run_point() {
  local kind=$1 url=$2 c=$3 threads=1 pid before after
  local env=(BENCH_KIND="$(request_of "$kind")" BENCH_SHAPE="$(shape_of "$kind")" BENCH_TOOL="$TOOL" BENCH_TOKEN="$TOKEN"
             BENCH_SESSION="$(session_of "$kind")")
  if [[ "$WARMUP" != 0 && "$WARMUP" != 0s ]]; then
    env "${env[@]}" taskset -c "$CLIENT_CPU" wrk -t"$threads" -c"$c" -d"$WARMUP" -s "$LUA" "$url" >/dev/null 2>&1 || true
  fi
  rm -f "$WORK/point.json"
  pid=$(pid_of "$kind")
  before=$(cpu_ticks "$pid")
  TIMEFORMAT='%R %U %S'
  { time env "${env[@]}" BENCH_OUT="$WORK/point.json" taskset -c "$CLIENT_CPU" \
      wrk -t"$threads" -c"$c" -d"$DURATION" --timeout 5s -s "$LUA" "$url" >"$WORK/wrk.txt" 2>&1 || true; } 2>"$WORK/time.txt"
  after=$(cpu_ticks "$pid")
  if [[ ! -s "$WORK/point.json" ]]; then
    echo "wrk failed for $kind c=$c:" >&2; cat "$WORK/wrk.txt" >&2; exit 1
  fi
  local requests wrk_cpu server_cpu
  requests=$(grep -o '"requests":[0-9]*' "$WORK/point.json" | cut -d: -f2)
  wrk_cpu=$(awk '{ if ($1 > 0) printf "%.0f", 100 * ($2 + $3) / $1; else print 0 }' "$WORK/time.txt")
  server_cpu=$(awk -v t=$((after - before)) -v hz="$TICKS_PER_SEC" -v n="$requests" \
    'BEGIN{ if (n > 0) printf "%.1f", 1e6 * t / hz / n; else print 0 }')
  sed -E "s/}\s*$/,\"server_cpu_us\":$server_cpu,\"wrk_cpu_pct\":$wrk_cpu}/" "$WORK/point.json"
}
field() { grep -o "\"$1\":[0-9.]*" <<<"$2" | cut -d: -f2; }

# Probe: one request of each kind must pass the body check before anything is timed.
for kind in $CEILINGS $KINDS; do
  probe=$(DURATION=1s WARMUP=0 run_point "$kind" "$(url_of "$kind")" 1)
  if [[ $(field errors "$probe") != 0 ]]; then
    echo "probe failed for $kind: $probe" >&2; exit 1
  fi
done

PORTHOLE_PID=$PID_main

cat <<EOF
machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)
servers pinned to CPU $SERVER_CPU, wrk (1 thread) to CPU $CLIENT_CPU; $DURATION per point after a $WARMUP warm-up; $ROUNDS round(s)
porthole $MCP_URL (tool $TOOL, call shape $SHAPE, RUST_LOG=$LOG_LEVEL)   ceiling $CEILING_URL${CEILING_REL_URL:+   ceiling_rel $CEILING_REL_URL}
load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (anything else busy on this machine skews every figure)

EOF
printf '%-17s %5s %6s %10s %9s %9s %7s %10s %8s\n' kind conns round rps p50_ms p99_ms errors cpu_us/req wrk_cpu
declare -A RPS P99 CPU ERR RATIO P99X TRACED SPAN_SHARE
median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{v[NR]=$1} END{print (NR%2)? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
lowest() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | head -1; }
highest() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b>0) printf "%.2f", a/b; else print "n/a" }'; }
# share UNTRACED_CPU TRACED_CPU: the span's share of a traced call's CPU, in %.
share() { awk -v u="$1" -v t="$2" 'BEGIN{ if (t>0) printf "%.1f", 100 * (t - u) / t; else print "n/a" }'; }
for c in $CONNS; do
  for round in $(seq 1 "$ROUNDS"); do
    order=$(round_order "$round")
    declare -A THIS_RPS=() THIS_P99=() THIS_CPU=()
    for kind in $order; do
      if once_only "$kind" && { [[ $c != 16 ]] || [[ $round != 1 ]]; }; then continue; fi
      # The TypeScript peer keeps getting faster for seconds (its JIT): a longer warm-up.
      if [[ $kind == ts ]]; then r=$(WARMUP=10s run_point "$kind" "$(url_of "$kind")" "$c")
      else r=$(run_point "$kind" "$(url_of "$kind")" "$c"); fi
      key="$kind/$c"
      THIS_RPS[$kind]=$(field rps "$r"); THIS_P99[$kind]=$(field p99_ms "$r")
      THIS_CPU[$kind]=$(field server_cpu_us "$r")
      RPS[$key]+="$(field rps "$r") "
      P99[$key]+="$(field p99_ms "$r") "
      CPU[$key]+="$(field server_cpu_us "$r") "
      ERR[$key]=$(( ${ERR[$key]:-0} + $(field errors "$r") ))
      printf '%-17s %5s %6s %10s %9s %9s %7s %10s %7s%%\n' "$kind" "$c" "$round" "$(field rps "$r")" \
        "$(field p50_ms "$r")" "$(field p99_ms "$r")" "$(field errors "$r")" \
        "$(field server_cpu_us "$r")" "$(field wrk_cpu_pct "$r")"
      [[ $(field errors "$r") == 0 ]] || echo "   first bad reply: $(sed -E 's/.*"sample":"([^"]*)".*/\1/' <<<"$r")"
      if [[ -n "$OUT" ]]; then
        echo "{\"kind\":\"$kind\",\"conns\":$c,\"round\":$round,\"wrk\":$r}" >>"$OUT"
      fi
    done
    for kind in $KINDS; do
      [[ -n "${THIS_RPS[$kind]:-}" ]] || continue
      base=$(ceiling_of "$kind")
      RATIO[$kind/$c]+="$(ratio "${THIS_RPS[$kind]}" "${THIS_RPS[$base]}") "
      P99X[$kind/$c]+="$(ratio "${THIS_P99[$kind]}" "${THIS_P99[$base]}") "
    done
    for kind in $KINDS; do
      untr=$(untraced_of "$kind")
      [[ -n "${THIS_RPS[$untr]:-}" ]] || continue
      TRACED[$kind/$c]+="$(ratio "${THIS_RPS[$kind]}" "${THIS_RPS[$untr]}") "
      SPAN_SHARE[$kind/$c]+="$(share "${THIS_CPU[$untr]}" "${THIS_CPU[$kind]}") "
    done
  done
done

if [[ -n "$CONNS" ]]; then
echo
echo "summary over $ROUNDS interleaved round(s): each ratio is taken within one round (Porthole"
echo "rps / ceiling rps, Porthole p99 / ceiling p99), then the median [lowest–highest] of them"
printf '%-17s %5s | %10s %9s | %-18s | %-18s | %10s\n' kind conns med_rps med_p99 "rps ratio" "p99 ratio" cpu_us/req
for c in $CONNS; do
  for base in $CEILINGS; do
    printf '%-17s %5s | %10.0f %9.3f | %-18s | %-18s | %10s\n' "$base" "$c" "$(median "${RPS[$base/$c]}")" \
      "$(median "${P99[$base/$c]}")" "1" "1" "$(median "${CPU[$base/$c]}")"
  done
  for kind in $KINDS; do
    [[ -n "${RPS[$kind/$c]:-}" ]] || continue
    printf '%-17s %5s | %10.0f %9.3f | %-18s | %-18s | %10s\n' "$kind" "$c" "$(median "${RPS[$kind/$c]}")" \
      "$(median "${P99[$kind/$c]}")" \
      "$(median "${RATIO[$kind/$c]}") [$(lowest "${RATIO[$kind/$c]}")–$(highest "${RATIO[$kind/$c]}")]" \
      "$(median "${P99X[$kind/$c]}") [$(lowest "${P99X[$kind/$c]}")–$(highest "${P99X[$kind/$c]}")]" \
      "$(median "${CPU[$kind/$c]}")"
  done
done

echo
echo "targets (auth and guards on), on the medians of the per-round ratios:"
verdict() { if [[ $1 == 1 ]]; then echo "MET"; else echo "MISSED"; fi; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN{print (a>=b)?1:0}'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN{print (a<=b)?1:0}'; }
# rps at c=16 and 64; p99 at every concurrency (one client's tail at c=1: issue 50).
for c in 1 16 64; do
  [[ " $CONNS " == *" $c "* ]] || { echo "  c=$c: not measured (CONNS has no $c)"; continue; }
  for kind in $KINDS; do
    [[ $kind == modern* || $kind == legacy* ]] || continue
    rr=$(median "${RATIO[$kind/$c]}"); pr=$(median "${P99X[$kind/$c]}")
    rps_target=""
    [[ $c == 1 ]] || rps_target="tools/call >= 0.80 x ceiling rps: $rr  $(verdict "$(ge "$rr" 0.8)");  "
    echo "  c=$c $kind ${rps_target}p99 <= 1.5 x ceiling p99: $pr  $(verdict "$(le "$pr" 1.5)")"
  done
done
total=0
for key in "${!ERR[@]}"; do total=$(( total + ${ERR[$key]} )); done
echo "  zero errors over every point: $total errors  $(verdict "$([[ $total == 0 ]] && echo 1 || echo 0)")"
echo "  porthole VmRSS $(vm VmRSS "$PORTHOLE_PID") kB, VmHWM $(vm VmHWM "$PORTHOLE_PID") kB; ceiling VmHWM $(vm VmHWM "$CEILING_PID") kB"
echo "  porthole trace counters: $(trace_counters "$MCP_URL")"
if [[ $UNTRACED_TOO == 1 ]]; then
  for c in $CONNS; do
    for kind in $KINDS; do
      [[ -n "${TRACED[$kind/$c]:-}" ]] || continue
      echo "  c=$c $kind traced / untraced rps (per round, median [lowest–highest]): $(median "${TRACED[$kind/$c]}") [$(lowest "${TRACED[$kind/$c]}")–$(highest "${TRACED[$kind/$c]}")]"
      sh=$(median "${SPAN_SHARE[$kind/$c]}")
      echo "  c=$c $kind: the span's share of a call's CPU (1 - untraced / traced CPU per request) <= 10 %: $sh % [$(lowest "${SPAN_SHARE[$kind/$c]}")–$(highest "${SPAN_SHARE[$kind/$c]}")]  $(verdict "$(le "$sh" 10)")"
    done
  done
fi
if [[ $PEERS == 1 ]]; then
  echo "  rmcp VmHWM $(vm VmHWM "$RMCP0_PID") kB stateless, $(vm VmHWM "$RMCP1_PID") kB with sessions"
  for c in $CONNS; do
    echo "  c=$c Porthole / rmcp $RMCP_VERSION rps: modern $(ratio "$(median "${RPS[modern/$c]}")" "$(median "${RPS[rmcp/$c]}")")x stateless," \
      "legacy $(ratio "$(median "${RPS[legacy/$c]}")" "$(median "${RPS[rmcp_legacy/$c]}")")x with sessions"
  done
  if [[ -n "${RPS[ts/16]:-}" ]]; then
    echo "  c=16 Porthole modern / TypeScript SDK $TS_SDK_VERSION: $(ratio "$(median "${RPS[modern/16]}")" "$(median "${RPS[ts/16]}")")x;" \
      "/ Python SDK $PY_SDK_VERSION: $(ratio "$(median "${RPS[modern/16]}")" "$(median "${RPS[python/16]}")")x (one round each)"
  fi
fi
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
