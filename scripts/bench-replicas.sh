#!/usr/bin/env bash
# The PostgreSQL store and replicas, measured (figures in docs/performance.md):
#   1. the store's per-operation latency on SQLite vs PostgreSQL
#      (examples/store_latency.rs, STORE_LATENCY_OPS of each operation);
#   2. `tools/call list_agents` and `send_message` turns (against a fake OpenAI server,
#      scripts/replicas/fake_openai.py) through nginx, with 1 and then 3 replicas on one
#      PostgreSQL, driven by wrk (scripts/bench/mcp_call.lua, modern stateless requests).
#
# Usage: scripts/bench-replicas.sh
# Environment: CONNS=16  DURATION=10s  WARMUP=2s  STORE_LATENCY_OPS=2000  SKIP_BUILD=1
#              BENCH_OUT (default target/bench-replicas)
#
# A measurement, not a test: it exits 0 unless the harness itself failed. Everything runs
# on this machine and on loopback; everything it starts is stopped on exit.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
CONNS="${CONNS:-16}"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-2s}"
OUT="${BENCH_OUT:-target/bench-replicas}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

log() { printf '[bench-replicas] %s\n' "$*" >&2; }
die() { printf '[bench-replicas] ERROR: %s\n' "$*" >&2; exit 1; }
# shellcheck source=scripts/lib/bot.sh
. "$REPO_ROOT/scripts/lib/bot.sh"
# shellcheck source=scripts/lib/postgres.sh
. "$REPO_ROOT/scripts/lib/postgres.sh"
# shellcheck source=scripts/lib/nginx.sh
. "$REPO_ROOT/scripts/lib/nginx.sh"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/porthole-bench-replicas.XXXXXX")"
chmod 755 "$TMP"
NGINX_PID=""
LLM_PID=""
declare -a PIDS=()
stop_replicas() {
  local pid
  # BOT_PID too: a replica that start_bot gave up on is not in PIDS yet.
  for pid in "${PIDS[@]}" "$NGINX_PID" "${BOT_PID:-}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}" "$NGINX_PID" "${BOT_PID:-}"; do [ -n "$pid" ] && wait "$pid" 2>/dev/null || true; done
  PIDS=()
  NGINX_PID=""
}
cleanup() {
  stop_replicas
  [ -n "$LLM_PID" ] && kill "$LLM_PID" 2>/dev/null || true
  stop_postgres
  rm -rf "$TMP"
}
trap cleanup EXIT

command -v wrk >/dev/null || {
  log "installing wrk (apt-get)"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
}
ensure_nginx_installed
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  log "cargo build --profile bench-release --bin porthole --example store_latency"
  cargo build --profile bench-release --bin porthole --example store_latency 2>&1 | tail -n 1
fi
start_postgres "$TMP/pg"

# --- 1. the store, per operation --------------------------------------------------------------
log "store latency: SQLite vs PostgreSQL"
PORTHOLE_TEST_DATABASE_URL="$PG_URL" target/bench-release/examples/store_latency | tee "$OUT/store-latency.md"

# --- 2. through nginx, 1 vs 3 replicas -------------------------------------------------------------
python3 scripts/replicas/fake_openai.py "$TMP/llm-port" </dev/null &
LLM_PID=$!
for _ in $(seq 1 50); do [ -s "$TMP/llm-port" ] && break; sleep 0.1; done
LLM_PORT="$(cat "$TMP/llm-port")"
TOKEN="$(random_token)"
RESULTS="$OUT/through-nginx.jsonl"
: >"$RESULTS"

run_wrk() { # label tool arguments url [expected text of a good reply]
  local label="$1" tool="$2" arguments="$3" url="$4" expect="${5:-structuredContent}"
  local env=(BENCH_KIND=modern BENCH_TOOL="$tool" BENCH_ARGUMENTS="$arguments" BENCH_TOKEN="$TOKEN"
    BENCH_EXPECT="$expect")
  env "${env[@]}" wrk -t2 -c"$CONNS" -d"$WARMUP" -s scripts/bench/mcp_call.lua "$url" </dev/null >/dev/null 2>&1 || true
  env "${env[@]}" BENCH_OUT="$TMP/point.json" wrk -t2 -c"$CONNS" -d"$DURATION" --timeout 10s \
    -s scripts/bench/mcp_call.lua "$url" </dev/null >/dev/null 2>&1 || die "wrk failed for $label"
  python3 - "$label" "$TMP/point.json" >>"$RESULTS" <<'PY'
import json, sys
point = json.load(open(sys.argv[2]))
point["label"] = sys.argv[1]
print(json.dumps(point))
PY
}

for n in 1 3; do
  ports=()
  for i in $(seq 1 "$n"); do
    mkdir -p "$TMP/r$n-$i"
    start_bot target/bench-release/porthole "$OUT/replica-$n-$i.log" "$TMP/r$n-$i" "$TOKEN" \
      DATABASE_URL="$PG_URL" PORTHOLE_REPLICA_ID="replica-$i" RUST_LOG=warn,porthole::app=info \
      LLM_PROVIDER=openai LLM_BASE_URL="http://127.0.0.1:$LLM_PORT/v1" LLM_MODEL=fake
    PIDS+=("$BOT_PID")
    ports+=("$BOT_PORT")
  done
  NGINX_PORT="$(free_port)"
  write_nginx_conf "$OUT/nginx-$n.conf" "$TMP/nginx-$n" "$OUT" "$NGINX_PORT" "${ports[@]}"
  start_nginx "$OUT/nginx-$n.conf" "$OUT/nginx-$n.log"
  sleep 0.5
  URL="http://127.0.0.1:$NGINX_PORT/mcp"
  log "$n replica(s): tools/call list_agents, c=$CONNS, $DURATION"
  run_wrk "$n replica(s): tools/call list_agents" list_agents '{}' "$URL"
  log "$n replica(s): send_message turns, c=$CONNS, $DURATION"
  # A good turn: the model answered and the reply carries no error.
  run_wrk "$n replica(s): send_message" send_message '{"content":"hello"}' "$URL" '"error":null'

  stop_replicas
done

echo
echo "| through nginx (c=$CONNS, $DURATION, modern stateless) | requests/s | p50 ms | p99 ms | errors |"
echo "|---|---|---|---|---|"
python3 - "$RESULTS" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    p = json.loads(line)
    print(f"| {p['label']} | {p['rps']:.0f} | {p['p50_ms']:.1f} | {p['p99_ms']:.1f} | {p['errors']} |")
PY
log "results in $OUT"
