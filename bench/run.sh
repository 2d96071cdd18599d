#!/usr/bin/env bash
# bench/run.sh: the one benchmark command (docs/benchmarks.md has the method and the results).
#
#   bench/run.sh [--smoke] [--reps N] [--only SECTION[,SECTION...]] [--no-docs]
#                [--baseline-dblogd PATH [--baseline-consumer PATH]]
#
# Builds and installs the extension, builds dblogd and the bench consumer (cmake, in $DBLOG_BUILD_DIR,
# default build/), starts its own throwaway PostgreSQL cluster (tests/cluster.sh, plus
# bench/postgresql.bench.conf), runs every contender on the same WAL, alternating them over
# repetitions, prints markdown tables of medians (min-max) and writes them, with this exact
# command, to docs/benchmarks.md. Sections: bulk, oltp, memory, latency, bootstrap, repair,
# fanout.
#
#   --smoke     small sizes, one repetition, a few minutes once built; prints, does not
#               write docs/benchmarks.md (add --docs to write anyway)
#   --reps N    repetitions of every section (default: 5 for log throughput, 3 otherwise)
#   --only S    run only these sections (does not write docs/benchmarks.md unless --docs)
#   --no-docs / --docs   never / always write docs/benchmarks.md
#   --quiet-wait S   before each timed run, wait up to S seconds (default 30, smoke 0) for the
#               shared machine to be quiet (others' load under 0.3 cores)
#   --contenders K,K  log throughput: only these contenders (keys as in
#               bench/dblog_bench/sections/log_throughput.py)
#   --repair-chunk-size N   repair: dblogd --chunk-size (default: dblogd's default, 2000)
#   --fanout-scale F   fanout: the published scenarios' phase lengths times F (default 0.1,
#               about 12 minutes; 1: their full length, about 2 hours; smoke 0.01)
#   --fanout-reps N    fanout: repetitions (default 1; --reps does not change it)
#   --baseline-dblogd PATH   bulk, oltp, bootstrap, repair: also run this older dblogd (bench/baseline.sh
#               COMMIT builds one) as a contender of its own, with its own slots, in the rotating
#               order, measured as dblogd is; the report adds the same-run ratios current /
#               baseline (wall time, dblogd CPU, peak RSS). Issue 14's check of a refactoring:
#                 bench/baseline.sh e836aed
#                 bench/run.sh --only bulk,oltp,bootstrap \
#                   --baseline-dblogd /tmp/dblog-baseline-e836aed/dblogd
#   --baseline-consumer PATH   the bench consumer for the baseline's runs (default: the current
#               one, so that both dblogds are measured by the same consumer)
#
# Needs the anchors' plugins (postgresql-15-decoderbufs, postgresql-15-wal2json): bench/setup.sh.
# Environment: DBLOG_JOBS (build parallelism, default 1: the machine is shared),
# DBLOG_BUILD_DIR, DBLOG_BENCH_LOGDIR (dblogd logs etc., default a temp dir),
# DBLOG_KEEP_CLUSTER=1 (leave the cluster running).
set -euo pipefail
start_dir=$PWD
cd "$(dirname "$0")/.."
command_line="bench/run.sh${*:+ $*}"
# settings that change what is built or how long it waits are part of the exact command
for v in DBLOG_BUILD_DIR DBLOG_JOBS; do
  [ -n "${!v:-}" ] && command_line="$v=${!v} $command_line"
done

smoke=0 only="" docs=auto pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1; pass+=(--smoke) ;;
    --reps) pass+=(--reps "$2"); shift ;;
    --only) only="$2"; pass+=(--only "$2"); shift ;;
    --contenders) pass+=(--contenders "$2"); shift ;;
    --quiet-wait) pass+=(--quiet-wait "$2"); shift ;;
    --repair-chunk-size) pass+=(--repair-chunk-size "$2"); shift ;;
    --fanout-scale|--fanout-reps) pass+=("$1" "$2"); shift ;;
    --baseline-dblogd|--baseline-consumer)
      path=$2; [ "${path#/}" = "$path" ] && path="$start_dir/$path"
      [ -x "$path" ] || { echo "bench/run.sh: $1 $2: not an executable file" >&2; exit 2; }
      pass+=("$1" "$path"); shift ;;
    --docs) docs=yes ;;
    --no-docs) docs=no ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "bench/run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$docs" = auto ]; then
  if [ $smoke = 1 ] || [ -n "$only" ]; then docs=no; else docs=yes; fi
fi

for lib in decoderbufs wal2json; do
  if [ ! -f "$(pg_config --pkglibdir)/$lib.so" ]; then
    echo "bench/run.sh: the $lib output plugin is not installed: run bench/setup.sh" >&2
    exit 1
  fi
done

jobs=${DBLOG_JOBS:-1}
build=${DBLOG_BUILD_DIR:-build}
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)

echo "== build and install the extension"
make -s -j"$jobs"
"${sudo_cmd[@]}" make -s install

echo "== build dblogd and the bench consumers ($build)"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs" --target dblogd dblog_bench_consumer dblog_bench_fanout_receiver

source tests/cluster.sh
logdir=${DBLOG_BENCH_LOGDIR:-$(mktemp -d /tmp/dblog-bench.XXXXXX)}
trap cluster_stop EXIT
cluster_start
# Later lines of postgresql.conf win: the bench settings override the test ones.
as_pg tee -a "$CLUSTER_DIR/data/postgresql.conf" <bench/postgresql.bench.conf >/dev/null
as_pg "$PG_BINDIR/pg_ctl" -D "$CLUSTER_DIR/data" -l "$CLUSTER_DIR/server.log" -w -t 60 restart \
  >/dev/null

docs_args=()
[ "$docs" = yes ] && docs_args=(--docs docs/benchmarks.md)
echo "== measuring (logs in $logdir)"
python3 bench/bench.py "${pass[@]}" "${docs_args[@]}" \
  --dblogd "$build/sidecar/dblogd" --consumer "$build/bench/dblog_bench_consumer" \
  --logdir "$logdir" --json "$logdir/results.json" --command "$command_line"
