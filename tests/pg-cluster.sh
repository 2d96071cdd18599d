#!/usr/bin/env bash
# tests/pg-cluster.sh: tests/cluster.sh as a command, for tests that start their own clusters
# of a given major (tests/cpp/pgoutput/).
#
#   tests/pg-cluster.sh start MAJOR   prints two lines: the cluster's directory, its conninfo
#   tests/pg-cluster.sh stop DIR      stops it and removes DIR
#   tests/pg-cluster.sh restart DIR   restarts its server (fast shutdown), same port and data
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
  bindir)
    pg_bindir "$2"
    ;;
  *)
    echo "usage: $0 start MAJOR | stop DIR | restart DIR | bindir MAJOR" >&2
    exit 2
    ;;
esac
