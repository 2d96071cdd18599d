#!/usr/bin/env bash
# bench/publish.sh: `dblog publish` throughput into a local single-node NATS JetStream, against
# reading the same stream directly from dblogd (bench/consumer.cc, the discarding consumer), on
# the same WAL: docs/benchmarks.md, "dblog publish".
#
#   bench/publish.sh [ROWS] [ROWS_PER_TRANSACTION]     (default 200000 1000)
#
# Needs a PostgreSQL with the extension (tests/cluster.sh cluster_start: PG* exported), the build
# in build/ (dblogd, dblog, dblog_bench_consumer) and nats-server. Both readers are consumers of
# one dblogd with the same scope, created (bootstrapped, empty) before the workload is written,
# so each then reads the same transactions from its own slot: the time is from the reader's
# start to its catching up with the marker transaction written last. The publisher counts as
# caught up when JetStream holds every message of the workload (its monitoring endpoint).
# Prints one line per reader: events, seconds, events/s. Measures; judges nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
rows=${1:-200000} per_txn=${2:-1000}
export PATH="$PATH:/usr/sbin"
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000)) nats_port=$((40000 + RANDOM % 10000)) mon_port=$((50000 + RANDOM % 10000))
cleanup() { for p in $(jobs -pr); do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION IF NOT EXISTS dblog;
DROP SCHEMA IF EXISTS pubbench CASCADE;
CREATE SCHEMA pubbench;
CREATE TABLE pubbench.t (id int PRIMARY KEY, v int, s text);
CREATE TABLE pubbench.marker (id int PRIMARY KEY);
SQL
for c in pb_direct pb_publish; do
  psql -X -q -c "SELECT pg_drop_replication_slot('dblog_$c') FROM pg_replication_slots WHERE slot_name = 'dblog_$c'" >/dev/null
done
build/sidecar/dblogd --source "dbname=$PGDATABASE" --listen "127.0.0.1:$port" --metrics-listen off \
  --consumer pb_direct='pubbench.*' --consumer pb_publish='pubbench.*' 2>"$work/dblogd.log" &
nats-server -js -a 127.0.0.1 -p "$nats_port" -m "$mon_port" -sd "$work/nats" >"$work/nats.log" 2>&1 &
nats=$!
cpu_s() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$1/stat"; }   # user + system, 100 Hz ticks
sleep 1
# create both slots (empty bootstraps)
build/bench/dblog_bench_consumer --port "$port" --consumer pb_direct --until-bootstrap-end >/dev/null
build/client/dblog publish --consumer pb_publish --port "$port" --to "nats://127.0.0.1:$nats_port" \
  --stream PUBBENCH 2>"$work/publish.log" &
pub=$!
stream_messages() {
  curl -s "http://127.0.0.1:$mon_port/jsz?streams=true" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(s["state"]["messages"] for a in d.get("account_details",[]) for s in a.get("stream_detail",[])))'
}
until [ "$(stream_messages)" -ge 4 ] 2>/dev/null; do sleep 0.2; done   # the empty bootstrap
kill -TERM $pub; wait $pub || true
before=$(stream_messages)

txns=$((rows / per_txn))
psql -X -q -v ON_ERROR_STOP=1 <<SQL
SELECT 1;
DO \$\$ BEGIN FOR i IN 0..$((txns - 1)) LOOP
  INSERT INTO pubbench.t SELECT g, g, 'row ' || g FROM generate_series(i * $per_txn, (i + 1) * $per_txn - 1) g;
  COMMIT;
END LOOP; END \$\$;
INSERT INTO pubbench.marker VALUES (1);
SQL
events=$((rows + 2 * txns + 3))   # each transaction's Begin and Commit; the marker's three

direct=$(build/bench/dblog_bench_consumer --port "$port" --consumer pb_direct --until-marker pubbench.marker)
direct_s=$(echo "$direct" | python3 -c 'import json,sys; print(json.load(sys.stdin)["wall_s"])')

want=$((before + events + 2))     # + the two tables' Relations of the new session
nats_cpu0=$(cpu_s $nats)
start=$(date +%s.%N)
build/client/dblog publish --consumer pb_publish --port "$port" --to "nats://127.0.0.1:$nats_port" \
  --stream PUBBENCH 2>>"$work/publish.log" &
pub=$!
until [ "$(stream_messages)" -ge "$want" ]; do sleep 0.05; done
end=$(date +%s.%N)
pub_cpu=$(cpu_s $pub) nats_cpu=$(python3 -c "print(round($(cpu_s $nats) - $nats_cpu0, 2))")
kill -TERM $pub; wait $pub || true
got=$(stream_messages)
publish_s=$(python3 -c "print($end - $start)")
python3 - "$events" "$direct_s" "$publish_s" "$got" "$want" "$pub_cpu" "$nats_cpu" <<'PY'
import sys
events, direct_s, publish_s, got, want = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
pub_cpu, nats_cpu = sys.argv[6], sys.argv[7]
print(f"direct (dblog_bench_consumer): {events} events in {direct_s:.2f} s: {events / direct_s:,.0f} events/s")
print(f"dblog publish -> JetStream:    {events} events in {publish_s:.2f} s: {events / publish_s:,.0f} events/s ({100 * direct_s / publish_s:.0f}% of direct); CPU: dblog publish {pub_cpu} s, nats-server {nats_cpu} s")
if got != want:
    print(f"note: the stream holds {got} messages, expected {want}")
PY
