#!/usr/bin/env bash
# tests/soak.sh: the randomized oracle, seed after seed, with every fault it knows, until a
# budget ends (issue 28, item 3). Not part of tests/run.sh: a soak is hours, CI runs two seeds.
#
#   tests/soak.sh [--budget 3h] [--seconds 10] [--publish-every 10] [--failover-every 4]
#                 [--base-seed N] [--logs DIR]
#
# Each seed is one run of OracleTest.RandomizedWorkloadConverges (tests/cpp/oracle): a seeded
# workload on several tables while a consumer bootstraps and `dblog apply` applies its stream
# into a second database, with SIGKILLs of dblogd (also during the bootstrap, after a repair was
# requested) and of `dblog apply`, a PostgreSQL restart, DDL (value-rewriting kinds included),
# tables moved into the scope, repairs of every kind and a damaged target; at the end every table
# is compared with the source. Every --failover-every-th seed runs on a primary of its own with
# an asynchronous standby that is promoted in the middle of the seed, in half of them after the
# primary committed what the standby never received
# (OracleTest.RandomizedWorkloadConvergesThroughAFailover, issue 24). Every --publish-every-th
# seed also runs PublishTest.KilledPublisherAndDblogdLeaveEveryEventOnceInTheLog with that
# seed: `dblog publish`
# into JetStream under SIGKILLs of it and of dblogd, the log replayed by a reader of the whole
# stream and by one per table. A failing seed does not stop the soak: its log is kept under
# --logs (default /tmp/dblog-soak.<date>) and it is listed at the end with the command that
# replays it. One line per seed: the seed, its faults, pass or FAIL; then the totals.
#
# Needs the built tree (./tests/run.sh, or make install + cmake --build build) and nats-server
# (scripts/install-deps.sh); starts its own throwaway cluster, stopped at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

budget=3h
seconds=10
publish_every=10
failover_every=4
base_seed=0
logs=/tmp/dblog-soak.$(date +%Y%m%d-%H%M%S)
while [ $# -gt 0 ]; do
  case $1 in
    --budget) budget=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --publish-every) publish_every=$2; shift 2 ;;
    --failover-every) failover_every=$2; shift 2 ;;
    --base-seed) base_seed=$2; shift 2 ;;
    --logs) logs=$2; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "soak: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

# 90s, 45m, 3h, or plain seconds
to_seconds() {
  local v=$1
  case $v in
    *h) echo $(( ${v%h} * 3600 )) ;;
    *m) echo $(( ${v%m} * 60 )) ;;
    *s) echo "${v%s}" ;;
    *[!0-9]*|'') echo "soak: --budget $v is not a duration (90s, 45m, 3h)" >&2; return 1 ;;
    *) echo "$v" ;;
  esac
}
budget_s=$(to_seconds "$budget")
[ "$base_seed" -gt 0 ] || base_seed=$(( (RANDOM << 15 | RANDOM) % 1000000 + 1 ))

oracle=build/tests/cpp/oracle/oracle_test
publish=build/tests/cpp/publish/publish_jetstream_test
for bin in "$oracle" "$publish"; do
  [ -x "$bin" ] || { echo "soak: $bin is missing: build first (./tests/run.sh)" >&2; exit 2; }
done
command -v nats-server >/dev/null || { echo "soak: nats-server is missing (scripts/install-deps.sh)" >&2; exit 2; }

source tests/cluster.sh
trap cluster_stop EXIT
cluster_start >/dev/null
psql -qc 'CREATE EXTENSION IF NOT EXISTS dblog' >/dev/null
mkdir -p "$logs"

# the number before WHAT in the seed's summary line
n() { sed -nE "s/.* ([0-9]+) $1.*/\1/p" <<<"$line" | head -n1; }

echo "soak: budget $budget_s s, $seconds s per seed, publish every $publish_every seeds, seeds from $base_seed; logs in $logs"
started=$(date +%s)
runs=0; passed=0; failed=(); publish_runs=0; publish_failed=()
kills=0; boot_kills=0; apply_kills=0; repairs=0; ddl=0; moved=0; pg_restarts=0
failovers=0; failovers_lossy=0
seed=$base_seed
while [ $(( $(date +%s) - started )) -lt "$budget_s" ]; do
  log=$logs/oracle-$seed.log
  t0=$(date +%s)
  test=OracleTest.RandomizedWorkloadConverges
  if [ "$failover_every" -gt 0 ] && [ $(( (runs + 1) % failover_every )) -eq 0 ]; then
    test=OracleTest.RandomizedWorkloadConvergesThroughAFailover
  fi
  if DBLOG_ORACLE_FAILOVER=1 DBLOG_ORACLE_SEED=$seed DBLOG_ORACLE_SECONDS=$seconds "$oracle" \
       --gtest_filter=$test >"$log" 2>&1; then
    verdict=pass; passed=$((passed + 1))
  else
    verdict=FAIL; failed+=("$seed")
  fi
  runs=$((runs + 1))
  # "oracle seed N: K dblogd kills (B during the bootstrap, ...), A apply kills (S starts),
  # R repairs, D DDL statements (table now T, M tables moved into the scope), PostgreSQL
  # restarted: yes|no"
  line=$(grep -m1 '^oracle seed ' "$log" || true)
  if [ -n "$line" ]; then
    kills=$((kills + $(sed -nE 's/^oracle seed [0-9]+: ([0-9]+) dblogd kills.*/\1/p' <<<"$line")))
    boot_kills=$((boot_kills + $(sed -nE 's/.*\(([0-9]+) during the bootstrap.*/\1/p' <<<"$line")))
    apply_kills=$((apply_kills + $(n 'apply kills')))
    repairs=$((repairs + $(n 'repairs')))
    ddl=$((ddl + $(n 'DDL statements')))
    moved=$((moved + $(n 'tables moved')))
    grep -q 'PostgreSQL restarted: yes' <<<"$line" && pg_restarts=$((pg_restarts + 1))
    grep -q 'failover: yes' <<<"$line" && failovers=$((failovers + 1))
    grep -q 'failover: yes, with commits' <<<"$line" && failovers_lossy=$((failovers_lossy + 1))
    faults=${line#oracle seed $seed: }
  else
    faults="(no summary line: see $log)"
  fi
  echo "seed $seed ($(( $(date +%s) - t0 )) s) $verdict: $faults"
  [ "$verdict" = pass ] && rm -f "$log"

  if [ "$publish_every" -gt 0 ] && [ $((runs % publish_every)) -eq 0 ]; then
    plog=$logs/publish-$seed.log
    if DBLOG_PUBLISH_SEED=$seed "$publish" \
         --gtest_filter=PublishTest.KilledPublisherAndDblogdLeaveEveryEventOnceInTheLog >"$plog" 2>&1; then
      echo "seed $seed publish (JetStream, kills of dblog publish and dblogd) pass"
      rm -f "$plog"
    else
      echo "seed $seed publish FAIL (see $plog)"
      publish_failed+=("$seed")
    fi
    publish_runs=$((publish_runs + 1))
  fi
  seed=$((seed + 1))
done

echo "soak: $runs oracle seeds in $(( $(date +%s) - started )) s ($base_seed..$((seed - 1))): $passed passed, ${#failed[@]} failed"
echo "soak: faults: $kills dblogd SIGKILLs ($boot_kills during a bootstrap), $apply_kills dblog apply SIGKILLs, $pg_restarts PostgreSQL restarts, $failovers failovers ($failovers_lossy after commits the standby never received), $repairs repairs, $ddl DDL statements, $moved tables moved into the scope"
echo "soak: publish: $publish_runs runs, ${#publish_failed[@]} failed"
for s in "${failed[@]}"; do
  echo "soak: FAILED oracle seed $s: $logs/oracle-$s.log; replay: DBLOG_ORACLE_FAILOVER=1 DBLOG_ORACLE_SEED=$s DBLOG_ORACLE_SECONDS=$seconds $oracle --gtest_filter=$(sed -n 's/^\[ RUN      \] //p' "$logs/oracle-$s.log" | head -n1)"
done
for s in "${publish_failed[@]}"; do
  echo "soak: FAILED publish seed $s: $logs/publish-$s.log; replay: DBLOG_PUBLISH_SEED=$s $publish --gtest_filter=PublishTest.KilledPublisherAndDblogdLeaveEveryEventOnceInTheLog"
done
[ ${#failed[@]} -eq 0 ] && [ ${#publish_failed[@]} -eq 0 ]
