# Shared by the scripts that need a throwaway PostgreSQL server (.ci/run for the tests,
# replicas.sh, and the benchmark): Debian's package installed when missing, a cluster in
# a temp dir on a free loopback port, password authentication (so the password's
# redaction is exercised).
# Source it after defining `log` and `die`.
#
# start_postgres DIR   initdb + start in DIR (as root, the postgres user must be able to
#                      reach DIR); sets PG_PORT, PG_URL, PG_PASSWORD, PG_DIR, PG_BIN and
#                      PG_RESTART (a shell command that restarts it, as root too)
# export_test_database exports what the PostgreSQL tests read: PORTHOLE_TEST_DATABASE_URL
#                      and PORTHOLE_TEST_PG_RESTART (tests/it/postgres_restart.rs)
# restart_postgres     pg_ctl restart -m fast (in-flight connections are cut)
# stop_postgres        pg_ctl stop -m fast (idempotent)

# Installs Debian's postgresql when initdb cannot be found.
ensure_postgres_installed() {
  if ! pg_bin_dir >/dev/null 2>&1; then
    log "installing postgresql (apt-get)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
      || die "cannot install postgresql with apt-get"
  fi
}

# The folder of initdb/pg_ctl/createdb: Debian's versioned folder (the newest), else
# wherever initdb is on PATH.
pg_bin_dir() {
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)"
  [ -n "$found" ] && [ -x "$found/initdb" ] && { printf '%s' "$found"; return 0; }
  found="$(command -v initdb 2>/dev/null)" && { dirname "$(readlink -f "$found")"; return 0; }
  return 1
}

# A free TCP port on 127.0.0.1 (the kernel picks it).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Runs a PostgreSQL tool as the cluster's owner: postgres refuses to run as root.
as_pg_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start_postgres() {
  PG_DIR="$1"
  mkdir -p "$PG_DIR"
  ensure_postgres_installed
  PG_BIN="$(pg_bin_dir)"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir "$PG_DIR" postgres
    chmod 755 "$PG_DIR"
    runuser -u postgres -- test -x "$PG_DIR" \
      || die "the postgres user cannot reach $PG_DIR: make its parent folders traversable (chmod o+x)"
  fi
  mkdir -p "$PG_DIR/data" "$PG_DIR/socket" "$PG_DIR/log"
  PG_PASSWORD="$(od -An -tx1 -N12 /dev/urandom | tr -d ' \n')"
  printf '%s\n' "$PG_PASSWORD" >"$PG_DIR/pwfile"
  [ "$(id -u)" -eq 0 ] && chown -R postgres "$PG_DIR/data" "$PG_DIR/socket" "$PG_DIR/log" "$PG_DIR/pwfile"
  as_pg_owner "$PG_BIN/initdb" -D "$PG_DIR/data" -U porthole --pwfile="$PG_DIR/pwfile" \
    --auth-local=trust --auth-host=scram-sha-256 --locale=C.UTF-8 -E UTF8 >"$PG_DIR/initdb.log" 2>&1 \
    || { cat "$PG_DIR/initdb.log" >&2; die "initdb failed"; }
  rm -f "$PG_DIR/pwfile"
  PG_PORT="$(free_port)"
  cat >>"$PG_DIR/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_DIR/socket'
max_connections = 200
fsync = off
CONF
  as_pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log/postgres.log" -w -t 30 start >/dev/null \
    || { tail -n 30 "$PG_DIR/log/postgres.log" >&2; die "PostgreSQL did not start"; }
  as_pg_owner "$PG_BIN/createdb" -h "$PG_DIR/socket" -p "$PG_PORT" -U porthole porthole \
    || die "cannot create the database"
  PG_URL="postgres://porthole:$PG_PASSWORD@127.0.0.1:$PG_PORT/porthole"
  PG_RESTART="$PG_BIN/pg_ctl -D $PG_DIR/data -l $PG_DIR/log/postgres.log -m fast -w -t 30 restart"
  [ "$(id -u)" -eq 0 ] && PG_RESTART="runuser -u postgres -- $PG_RESTART"
  log "PostgreSQL on 127.0.0.1:$PG_PORT (data in $PG_DIR/data)"
}

export_test_database() {
  export PORTHOLE_TEST_DATABASE_URL="$PG_URL" PORTHOLE_TEST_PG_RESTART="$PG_RESTART"
}

restart_postgres() {
  as_pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/log/postgres.log" -m fast -w -t 30 restart >/dev/null
}

stop_postgres() {
  [ -n "${PG_DIR:-}" ] && [ -f "$PG_DIR/data/postmaster.pid" ] || return 0
  as_pg_owner "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
}
