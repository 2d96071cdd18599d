#!/usr/bin/env bash
# bench/failover.sh: a failover of a PostgreSQL 15 source under a fixed-rate workload with
# `dblog apply` as the sink: dblogd's reconcile (--on-slot-lost=reconcile) against a new
# bootstrap, same run (bench/failover.py says what is measured; results in
# docs/benchmarks.md, "Failover").
#
#   bench/failover.sh [ROWS] [REPETITIONS]      (default 1000000 3)
#   DBLOG_BENCH_RATE=500 DBLOG_BENCH_HALF=10    workload transactions/s, seconds before and after
#                                               the promotion
#
# Needs PostgreSQL 15 with the extension installed (make install), pgbench, and the build in
# build/ (or $DBLOG_BUILD_DIR: dblogd, dblog). Starts and stops its own clusters
# (tests/pg-cluster.sh). Measures; judges nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 bench/failover.py "$@"
