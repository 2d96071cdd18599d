#!/usr/bin/env bash
# tests/pg-cluster.sh: tests/cluster.sh as a command, for tests that start their own clusters
# of a given major (tests/cpp/pgoutput/).
#
#   tests/pg-cluster.sh start MAJOR   prints two lines: the cluster's directory, its conninfo
#   tests/pg-cluster.sh stop DIR      stops it and removes DIR
#   tests/pg-cluster.sh restart DIR   restarts its server (fast shutdown), same port and data
#   tests/pg-cluster.sh standby DIR SLOT   a hot standby of the cluster in DIR, streaming through
#                                     its physical slot SLOT (made here), with what slot
#                                     synchronization needs (17+: hot_standby_feedback,
#                                     primary_slot_name, dbname in primary_conninfo; slots are
#                                     synchronized by pg_sync_replication_slots()): a copy of
#                                     DIR's data taken while it is stopped; prints the standby's
#                                     directory and conninfo, as start does
#   tests/pg-cluster.sh kill DIR      stops its server at once (immediate: a crash)
#   tests/pg-cluster.sh promote DIR   promotes the standby in DIR and waits for it
#   tests/pg-cluster.sh bindir MAJOR  prints the server's bin directory (exit 1: not there)
#
# Exit status 3 from start: that major's binaries are absent (scripts/fetch-postgres.sh).
set -euo pipefail
source "$(dirname "$0")/cluster.sh"

case "${1:-}" in
  start)
    pg_bindir "$2" >/dev/null || exit 3
    unset CLUSTER_PORT
    cluster_start "$2" >&2
    echo "$CLUSTER_DIR"
    echo "$DBLOG_TEST_CONNINFO"
    ;;
  stop)
    case "$2" in /tmp/dblog-cluster.*) ;; *) echo "pg-cluster: not a cluster dir: $2" >&2; exit 2 ;; esac
    CLUSTER_DIR=$2
    PG_BINDIR=$(cat "$CLUSTER_DIR/bindir" 2>/dev/null || echo "$DEBIAN_PG_BINDIR")
    cluster_stop
    ;;
  restart)
    case "$2" in /tmp/dblog-cluster.*) ;; *) echo "pg-cluster: not a cluster dir: $2" >&2; exit 2 ;; esac
    PG_BINDIR=$(cat "$2/bindir" 2>/dev/null || echo "$DEBIAN_PG_BINDIR")
    as_pg "$PG_BINDIR/pg_ctl" -D "$2/data" -l "$2/server.log" -w -t 60 -m fast restart >/dev/null
    ;;
  standby)
    case "$2" in /tmp/dblog-cluster.*) ;; *) echo "pg-cluster: not a cluster dir: $2" >&2; exit 2 ;; esac
    PG_BINDIR=$(cat "$2/bindir" 2>/dev/null || echo "$DEBIAN_PG_BINDIR")
    primary_port=$(sed -n 's/^port = //p' "$2/data/postgresql.conf" | tail -n 1)
    # Debian's psql (15) speaks to 16-18 fine; their binaries ship no psql
    psql -h "$2/sock" -p "$primary_port" -U postgres -d postgres -XAtq \
      -c "SELECT 1 FROM pg_create_physical_replication_slot('$3')" >/dev/null
    as_pg "$PG_BINDIR/pg_ctl" -D "$2/data" -w -t 60 -m fast stop >/dev/null
    dir=$(mktemp -d /tmp/dblog-cluster.XXXXXX)
    chmod 755 "$dir"
    cp -a "$2/data" "$dir/data"
    rm -f "$dir/data/postmaster.pid"
    mkdir -p "$dir/sock"
    echo "$PG_BINDIR" >"$dir/bindir"
    [ "$(id -u)" -eq 0 ] && chown -R postgres: "$dir"
    port=$(free_port)
    {
      echo "port = $port"
      echo "unix_socket_directories = '$dir/sock'"
      echo "primary_conninfo = 'host=$2/sock port=$primary_port user=postgres dbname=postgres'"
      echo "primary_slot_name = '$3'"
      echo "hot_standby_feedback = on"
    } | as_pg tee -a "$dir/data/postgresql.conf" >/dev/null
    as_pg touch "$dir/data/standby.signal"
    as_pg "$PG_BINDIR/pg_ctl" -D "$2/data" -l "$2/server.log" -w -t 60 start >/dev/null
    as_pg "$PG_BINDIR/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null \
      || { cat "$dir/server.log" >&2; exit 1; }
    echo "$dir"
    echo "host=$dir/sock port=$port user=postgres dbname=postgres"
    ;;
  kill)
    case "$2" in /tmp/dblog-cluster.*) ;; *) echo "pg-cluster: not a cluster dir: $2" >&2; exit 2 ;; esac
    PG_BINDIR=$(cat "$2/bindir" 2>/dev/null || echo "$DEBIAN_PG_BINDIR")
    as_pg "$PG_BINDIR/pg_ctl" -D "$2/data" -m immediate stop >/dev/null
    ;;
  promote)
    case "$2" in /tmp/dblog-cluster.*) ;; *) echo "pg-cluster: not a cluster dir: $2" >&2; exit 2 ;; esac
    PG_BINDIR=$(cat "$2/bindir" 2>/dev/null || echo "$DEBIAN_PG_BINDIR")
    as_pg "$PG_BINDIR/pg_ctl" -D "$2/data" -w -t 60 promote >/dev/null
    ;;
  bindir)
    pg_bindir "$2"
    ;;
  *)
    echo "usage: $0 start MAJOR | stop DIR | restart DIR | standby DIR SLOT | kill DIR | promote DIR | bindir MAJOR" >&2
    exit 2
    ;;
esac
