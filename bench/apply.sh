#!/usr/bin/env bash
# bench/apply.sh: `dblog apply` against native logical replication (a subscription), same
# cluster, same tables: the initial copy and the catch-up of a bulk and an OLTP workload, same
# run (bench/apply.py says what is measured; results in docs/benchmarks.md, "dblog apply
# against native logical replication").
#
#   bench/apply.sh [ROWS] [REPETITIONS]          (default 5000000 3)
#   DBLOG_BENCH_BULK=1000000                     row changes of the bulk workload
#   DBLOG_BENCH_OLTP=20000                       transactions of the OLTP workload
#   DBLOG_BENCH_FSYNC=on                         the cluster's fsync (the tests run with off)
#   DBLOG_APPLY_FLAGS='...'                      extra flags for `dblog apply`
#
# Needs PostgreSQL 15 with the extension installed (make install) and the build in build/ (or
# $DBLOG_BUILD_DIR: dblogd, dblog). Starts and stops its own cluster (tests/pg-cluster.sh).
# Measures; judges nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/apply.py "$@"
