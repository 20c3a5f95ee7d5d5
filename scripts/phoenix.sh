#!/usr/bin/env bash
# Proves the OpenTelemetry export against Arize Phoenix, a backend LLM developers use:
# installs `arize-phoenix` from PyPI into a venv under target/ (cached between runs),
# starts `phoenix serve` offline on free loopback ports, and runs tests/it/phoenix.rs, which
# sends a traced turn to it and reads the spans back from Phoenix's REST API.
#
# Usage: scripts/phoenix.sh [--install-only | --serve]
#   (no option)     install if needed, start Phoenix, run the test, stop Phoenix
#   --install-only  install and exit
#   --serve         install, start Phoenix and keep it running (Ctrl-C stops it);
#                   point a bot at it with OTEL_EXPORTER_OTLP_ENDPOINT=<printed URL>
# Environment:
#   PHOENIX_VERSION   the arize-phoenix version (default 20.26.1)
#   PHOENIX_VENV      where to install it (default target/phoenix-venv)
#   PHOENIX_START_SECS  how long Phoenix may take to start (default 120)
# Phoenix keeps its database and its PID file in a temporary folder removed at exit.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

PHOENIX_VERSION="${PHOENIX_VERSION:-20.26.1}"
VENV="${PHOENIX_VENV:-target/phoenix-venv}"
START_SECS="${PHOENIX_START_SECS:-120}"
MODE="${1:-test}"

log() { printf '[phoenix] %s\n' "$*"; }
die() { printf '[phoenix] FAIL: %s\n' "$*" >&2; exit 1; }

case "$MODE" in
  test|--install-only|--serve) ;;
  *) die "unknown option '$MODE'; use --install-only, --serve or nothing" ;;
esac

# --- install (cached) --------------------------------------------------------
installed_version() {
  "$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("arize-phoenix"))' 2>/dev/null || true
}
if [ "$(installed_version)" != "$PHOENIX_VERSION" ]; then
  command -v python3 >/dev/null 2>&1 || die "python3 is missing (Phoenix needs Python 3.10 or newer)"
  log "installing arize-phoenix==$PHOENIX_VERSION into $VENV (about 70 s and 855 MB the first time)"
  python3 -m venv "$VENV" || die "cannot create a venv at $VENV (on Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "arize-phoenix==$PHOENIX_VERSION" \
    || die "pip could not install arize-phoenix==$PHOENIX_VERSION"
fi
[ -x "$VENV/bin/phoenix" ] || die "$VENV/bin/phoenix is missing after the install"
log "arize-phoenix $(installed_version) in $VENV"
[ "$MODE" = "--install-only" ] && exit 0

# --- start ---------------------------------------------------------------------
free_port() {
  "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
WORK="$(mktemp -d "${TMPDIR:-/tmp}/porthole-phoenix.XXXXXX")"
HTTP_PORT="$(free_port)"
# Phoenix always opens its gRPC port on every interface: pick a free one too.
GRPC_PORT="$(free_port)"
while [ "$GRPC_PORT" = "$HTTP_PORT" ]; do GRPC_PORT="$(free_port)"; done
PHOENIX_PID=""
cleanup() {
  if [ -n "$PHOENIX_PID" ] && kill -0 "$PHOENIX_PID" 2>/dev/null; then
    kill "$PHOENIX_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$PHOENIX_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$PHOENIX_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

log "starting phoenix serve on 127.0.0.1:$HTTP_PORT (gRPC $GRPC_PORT; log: $WORK/phoenix.log)"
env TMPDIR="$WORK" \
  PHOENIX_HOST=127.0.0.1 \
  PHOENIX_PORT="$HTTP_PORT" \
  PHOENIX_GRPC_PORT="$GRPC_PORT" \
  PHOENIX_WORKING_DIR="$WORK/data" \
  PHOENIX_ALLOW_EXTERNAL_RESOURCES=false \
  PHOENIX_TELEMETRY_ENABLED=false \
  "$VENV/bin/phoenix" serve >"$WORK/phoenix.log" 2>&1 &
PHOENIX_PID=$!
URL="http://127.0.0.1:$HTTP_PORT"
deadline=$((SECONDS + START_SECS))
until curl -fsS -o /dev/null "$URL/healthz" 2>/dev/null; do
  if ! kill -0 "$PHOENIX_PID" 2>/dev/null; then
    tail -n 40 "$WORK/phoenix.log" >&2 || true
    die "phoenix serve exited before it answered"
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    tail -n 40 "$WORK/phoenix.log" >&2 || true
    die "Phoenix did not answer $URL/healthz within $START_SECS s (raise PHOENIX_START_SECS)"
  fi
  sleep 0.5
done
log "Phoenix is up at $URL"

if [ "$MODE" = "--serve" ]; then
  log "export to it with OTEL_EXPORTER_OTLP_ENDPOINT=$URL; Ctrl-C stops it"
  wait "$PHOENIX_PID"
  exit 0
fi

# --- the test -------------------------------------------------------------------
log "cargo test --test it phoenix:: -- --ignored"
PHOENIX_URL="$URL" cargo test --test it phoenix:: -- --ignored
log "a traced turn, and calls joined to their caller's trace, were read back from Phoenix"
