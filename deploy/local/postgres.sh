#!/usr/bin/env bash
# postgres.sh start|stop [fast|immediate]|restart|env|status — a private PostgreSQL 15
# cluster for statecast.
#
# start: installs the Debian package if the binaries are missing, runs initdb into
# /tmp/statecast-pg-<checkout hash> (owned by the 'postgres' user: the server refuses to run as root), picks a free
# port, sets wal_level=logical, starts the server and waits until it accepts connections.
# Idempotent: a running cluster is reused. Prints the variables the tests read.
# A stopped cluster starts again with its data on the port it had (a new one, with a
# warning, only if another process took it). stop is a fast shutdown; stop immediate is a
# crash (recovery from the WAL at the next start). restart = stop + start.
# STATECAST_PG_EXTRA_CONF: more postgresql.conf lines (tests that need another setting).
source "$(dirname "$0")/common.sh"
PGBIN=${PGBIN:-/usr/lib/postgresql/15/bin}
# The server runs as the 'postgres' user, who may not be able to enter the checkout's folders
# (a CI clone under a private home), so the data directory lives in /tmp, one per checkout.
DATA=${STATECAST_PGDATA:-/tmp/statecast-pg-$(echo "$RUN" | md5sum | cut -c1-10)}
PORTFILE=$RUN/pg.port

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

ensure_binaries() {
  [ -x "$PGBIN/postgres" ] && return
  log "PostgreSQL 15 binaries missing: installing postgresql-15"
  [ "$(id -u)" = 0 ] || die "need root to apt-get install postgresql-15"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
}

running() { [ -f "$PORTFILE" ] && as_pg "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

env_out() {
  local port; port=$(cat "$PORTFILE")
  echo "export STATECAST_PG_DSN='postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable'"
}

start() {
  ensure_binaries
  if running; then env_out; return; fi
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  fi
  if [ ! -f "$DATA/PG_VERSION" ]; then
    rm -rf "$DATA"; mkdir -p "$DATA"
    [ "$(id -u)" = 0 ] && chown postgres "$DATA"
    as_pg "$PGBIN/initdb" -D "$DATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$DATA.initdb.log" 2>&1 \
      || { cat "$DATA.initdb.log" >&2; die "initdb failed"; }
  fi
  local port; port=$(saved_port); echo "$port" >"$PORTFILE"
  cat >"$DATA/postgresql.auto.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$DATA'
wal_level = logical
max_connections = 200
max_wal_senders = 64
max_replication_slots = 64
shared_buffers = 256MB
${STATECAST_PG_EXTRA_CONF:-}
CONF
  as_pg "$PGBIN/pg_ctl" -D "$DATA" -l "$DATA/postgres.log" -w -t 60 start >/dev/null \
    || { tail -20 "$DATA/postgres.log" >&2; die "postgres did not start"; }
  for _ in $(seq 1 60); do
    as_pg "$PGBIN/pg_isready" -h 127.0.0.1 -p "$port" -q && break; sleep 0.5
  done
  as_pg "$PGBIN/pg_isready" -h 127.0.0.1 -p "$port" -q || die "postgres not ready on $port"
  log "PostgreSQL ready on 127.0.0.1:$port (data $DATA, log $DATA/postgres.log)"
  env_out
}

# saved_port prints the port of the cluster's previous start when it has one that is still
# free, so that clients find the server where it was; a free port otherwise.
saved_port() {
  local p; p=$(cat "$PORTFILE" 2>/dev/null || true)
  if [ -n "$p" ] && [ -f "$DATA/PG_VERSION" ]; then
    port_open 127.0.0.1 "$p" || { echo "$p"; return; }
    log "warning: port $p is taken by another process: starting on a new port"
  fi
  free_port
}

stop() {
  local mode=${1:-fast}
  case "$mode" in fast|immediate) ;; *) die "stop mode: fast or immediate, not $mode" ;; esac
  running && as_pg "$PGBIN/pg_ctl" -D "$DATA" -m "$mode" -w stop >/dev/null || true
}

case "${1:-start}" in
  start) start ;;
  stop) stop "${2:-fast}" ;;
  restart) stop fast; start ;;
  env) running || die "not running"; env_out ;;
  status) running && echo running || { echo stopped; exit 1; } ;;
  *) die "usage: $0 start|stop [fast|immediate]|restart|env|status" ;;
esac
