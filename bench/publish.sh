#!/usr/bin/env bash
# bench/publish.sh: `dblog publish` into a local single-node NATS JetStream, side by side with
# direct dblogd consumers on the same WAL, in one run: publish throughput (events/s) against
# reading dblogd directly, and the source server's CPU with 1 and with 4 readers of JetStream
# against 4 dblogd consumers with their own slots (bench/publish.py says how; results in
# docs/benchmarks.md, "dblog publish").
#
#   bench/publish.sh [ROWS] [ROWS_PER_TRANSACTION] [REPETITIONS]     (default 200000 1000 3)
#
# Needs a PostgreSQL with the extension (tests/cluster.sh cluster_start: PG* exported; the
# cluster's processes must be this user's, for /proc), the build in build/ (or
# $DBLOG_BUILD_DIR: dblogd, dblog, dblog_bench_consumer, dblog_bench_nats_reader), nats-server
# and curl. Measures; judges nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/sbin"
exec python3 bench/publish.py "$@"
