# tests/cluster.sh: start and stop a throwaway PostgreSQL 15 cluster (sourced, not run).
#
#   source tests/cluster.sh; cluster_start; ...; cluster_stop
#
# cluster_start: initdb into a temp dir, settings from tests/postgresql.test.conf, a free port,
# its own socket directory, then exports PGHOST PGPORT PGUSER PGDATABASE and
# DBLOG_TEST_CONNINFO. As root, the server runs as the postgres OS user (it refuses root).
# DBLOG_KEEP_CLUSTER=1 leaves it running for exploring.

DBLOG_ROOT=${DBLOG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
PG_BINDIR=$(pg_config --bindir)

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cluster_start() {
  CLUSTER_DIR=$(mktemp -d /tmp/dblog-cluster.XXXXXX)
  chmod 755 "$CLUSTER_DIR"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$CLUSTER_DIR"
  CLUSTER_PORT=${CLUSTER_PORT:-$(free_port)}
  as_pg "$PG_BINDIR/initdb" -D "$CLUSTER_DIR/data" -U postgres --auth=trust --no-sync \
    -E UTF8 --locale=C >"$CLUSTER_DIR/initdb.log" 2>&1 || {
      cat "$CLUSTER_DIR/initdb.log"; return 1; }
  mkdir -p "$CLUSTER_DIR/sock"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$CLUSTER_DIR/sock"
  {
    cat "$DBLOG_ROOT/tests/postgresql.test.conf"
    echo "port = $CLUSTER_PORT"
    echo "listen_addresses = '127.0.0.1'"
    echo "unix_socket_directories = '$CLUSTER_DIR/sock'"
  } | as_pg tee -a "$CLUSTER_DIR/data/postgresql.conf" >/dev/null
  echo "host replication all 127.0.0.1/32 trust" | as_pg tee -a "$CLUSTER_DIR/data/pg_hba.conf" >/dev/null
  as_pg "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -w -t 60 start \
    >/dev/null || { cat "$CLUSTER_DIR/server.log"; return 1; }
  export PGHOST="$CLUSTER_DIR/sock" PGPORT="$CLUSTER_PORT" PGUSER=postgres PGDATABASE=postgres
  export DBLOG_TEST_CONNINFO="host=$PGHOST port=$PGPORT user=postgres dbname=postgres"
  export DBLOG_TEST_PGDATA="$CLUSTER_DIR/data" DBLOG_TEST_PG_BINDIR="$PG_BINDIR"
  echo "cluster: PostgreSQL on port $CLUSTER_PORT, socket dir $PGHOST, data $CLUSTER_DIR/data"
}

cluster_stop() {
  [ -n "${CLUSTER_DIR:-}" ] || return 0
  if [ "${DBLOG_KEEP_CLUSTER:-0}" = 1 ]; then
    echo "cluster: kept running (DBLOG_KEEP_CLUSTER=1): PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=postgres"
    echo "cluster: stop it with: pg_ctl -D $CLUSTER_DIR/data stop (as postgres)"
    return 0
  fi
  as_pg "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$CLUSTER_DIR"
  CLUSTER_DIR=
}
