#!/usr/bin/env bash
# The README's first command from a fresh clone: how long `cargo run --release` takes until
# the bot answers, with the crates already downloaded and an empty target directory
# (docs/performance.md, "The first build").
#
#   scripts/first-build.sh            clone HEAD into a temporary folder, fetch the crates
#                                     (not timed), then time `PORT=0 cargo run --release`
#                                     until the bot's page answers 200
#   KEEP=1 scripts/first-build.sh     keep the clone (its target/cargo-timings/ report too)
#   REV=<commit> scripts/first-build.sh   the same for an earlier commit (an A/B pair: run
#                                     both back to back; the machine's speed drifts)
#
# Run it with nothing else busy on the machine: the build uses every core.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/porthole-first-build.XXXXXX)
BOT_PID=""
cleanup() {
  if [[ -n "$BOT_PID" ]]; then kill -- "-$BOT_PID" 2>/dev/null || kill "$BOT_PID" 2>/dev/null || true; fi
  if [[ -z "${KEEP:-}" ]]; then rm -rf "$WORK"; else echo "kept: $WORK"; fi
}
trap cleanup EXIT

git clone -q "$ROOT" "$WORK/clone"
cd "$WORK/clone"
if [[ -n "${REV:-}" ]]; then git checkout -q "$REV"; fi
echo "commit $(git rev-parse --short HEAD); $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
cargo fetch -q
export PORT=0 HOST=127.0.0.1
start=$(date +%s.%N)
# Its own process group, so the cleanup stops cargo and the bot together.
setsid bash -c 'exec cargo run --release --timings' >"$WORK/run.log" 2>&1 &
BOT_PID=$!
address=""
while kill -0 "$BOT_PID" 2>/dev/null; do
  if [[ -z "$address" ]]; then
    address=$(grep -so 'listening on http://127\.0\.0\.1:[0-9]*' "$WORK/run.log" | head -1 | sed 's/listening on //' || true)
  fi
  if [[ -n "$address" ]] && [[ $(curl -s -o /dev/null -w '%{http_code}' "$address/") == 200 ]]; then
    end=$(date +%s.%N)
    build=$(grep -o 'Finished .* in [0-9ms. ]*' "$WORK/run.log" | head -1 || true)
    printf 'answered after %.1f s (cargo: %s)\n' "$(echo "$end - $start" | bc)" "$build"
    exit 0
  fi
  sleep 0.2
done
echo "cargo run --release ended without the bot answering; its output:" >&2
tail -30 "$WORK/run.log" >&2
exit 1
