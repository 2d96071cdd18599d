# tests/cluster.sh: start and stop a throwaway PostgreSQL cluster (sourced, not run).
#
#   source tests/cluster.sh; cluster_start; ...; cluster_stop
#   source tests/cluster.sh; cluster_start 17; ...; cluster_stop     (another major)
#
# cluster_start [MAJOR]: initdb into a temp dir, settings from tests/postgresql.test.conf, a free
# port, its own socket directory, then exports PGHOST PGPORT PGUSER PGDATABASE and
# DBLOG_TEST_CONNINFO. As root, the server runs as the postgres OS user (it refuses root).
# DBLOG_KEEP_CLUSTER=1 leaves it running for exploring. Without MAJOR, or with Debian's (15),
# the server is Debian's (pg_config); 16, 17 and 18 are the binaries scripts/fetch-postgres.sh
# put under $DBLOG_PG_CACHE/<major> (no extension there: they serve pgoutput tests). A setting
# of the conf file that server does not know (Debian 15's output_plugin_libraries) is left out.
# tests/pg-cluster.sh is the same as a command, for tests that start clusters themselves.

DBLOG_ROOT=${DBLOG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
DEBIAN_PG_BINDIR=$(pg_config --bindir)
PG_BINDIR=$DEBIAN_PG_BINDIR
if [ -z "${DBLOG_PG_CACHE:-}" ]; then
  if [ "$(id -u)" -eq 0 ]; then DBLOG_PG_CACHE=/opt/dblog-pg; else DBLOG_PG_CACHE=$HOME/.cache/dblog-pg; fi
fi

# pg_bindir MAJOR: the bin directory of that major's server, or an error saying how to get it.
pg_bindir() {
  local major=$1 debian
  debian=$("$DEBIAN_PG_BINDIR/postgres" --version | sed -E 's/.* ([0-9]+)[.].*/\1/')
  if [ "$major" = "$debian" ]; then echo "$DEBIAN_PG_BINDIR"; return 0; fi
  if [ -x "$DBLOG_PG_CACHE/$major/bin/postgres" ]; then echo "$DBLOG_PG_CACHE/$major/bin"; return 0; fi
  echo "cluster: no PostgreSQL $major under $DBLOG_PG_CACHE (run scripts/fetch-postgres.sh $major)" >&2
  return 1
}

# test_conf BINDIR: tests/postgresql.test.conf less the settings that server does not have.
test_conf() {
  local known name line
  known=" $("$1/postgres" --describe-config | cut -f1 | tr 'A-Z\n' 'a-z ') "
  while IFS= read -r line; do
    name=$(sed -nE 's/^[[:space:]]*([a-z_]+)[[:space:]]*=.*/\1/p' <<<"$line")
    if [ -n "$name" ] && [[ "$known" != *" $name "* ]]; then
      echo "# left out, unknown to this server: $line"
    else
      echo "$line"
    fi
  done <"$DBLOG_ROOT/tests/postgresql.test.conf"
}

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

cluster_start() {
  if [ $# -gt 0 ]; then PG_BINDIR=$(pg_bindir "$1") || return 1; else PG_BINDIR=$DEBIAN_PG_BINDIR; fi
  CLUSTER_DIR=$(mktemp -d /tmp/dblog-cluster.XXXXXX)
  chmod 755 "$CLUSTER_DIR"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$CLUSTER_DIR"
  CLUSTER_PORT=${CLUSTER_PORT:-$(free_port)}
  as_pg "$PG_BINDIR/initdb" -D "$CLUSTER_DIR/data" -U postgres --auth=trust --no-sync \
    -E UTF8 --locale=C >"$CLUSTER_DIR/initdb.log" 2>&1 || {
      cat "$CLUSTER_DIR/initdb.log"; return 1; }
  echo "$PG_BINDIR" >"$CLUSTER_DIR/bindir"
  mkdir -p "$CLUSTER_DIR/sock"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$CLUSTER_DIR/sock"
  {
    test_conf "$PG_BINDIR"
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
