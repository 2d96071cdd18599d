#!/usr/bin/env bash
# scripts/demo.sh: the one-command demo. Installs what is needed, builds, starts a throwaway
# PostgreSQL cluster with the extension, starts dblogd, bootstraps a consumer that `dblog apply`
# applies into a second database, makes live changes, damages the target and repairs it from
# SQL, and checks that source and target converged. Cleans up after itself;
# DBLOG_KEEP_CLUSTER=1 keeps the cluster (and prints how to reach it).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n== %s\n' "$*"; }

say "installing dependencies and building"
./scripts/install-deps.sh >/dev/null
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
make -s -j"$(nproc)" && "${sudo_cmd[@]}" make -s install
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target dblogd dblog >/dev/null

source tests/cluster.sh
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  cluster_stop
}
trap cleanup EXIT
cluster_start
workdir=$CLUSTER_DIR

say "a source table with 10,000 rows, and an empty target database"
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION dblog;
CREATE SCHEMA demo;
CREATE TABLE demo.accounts (id int PRIMARY KEY, owner text NOT NULL, balance numeric NOT NULL,
                            updated timestamptz NOT NULL DEFAULT now());
INSERT INTO demo.accounts SELECT g, 'owner ' || g, g * 10, now() FROM generate_series(1, 10000) g;
SQL
createdb target

say "dblogd, and a consumer applying into the target"
port=$(free_port)
build/sidecar/dblogd --source "$DBLOG_TEST_CONNINFO" --listen "127.0.0.1:$port" \
  --metrics-listen off --consumer "demo=demo.*" >"$workdir/dblogd.log" 2>&1 &
pids+=($!)
sleep 0.5
build/client/dblog apply --consumer demo --port "$port" --create-tables \
  --target "host=$PGHOST port=$PGPORT user=postgres dbname=target" >"$workdir/apply.log" 2>&1 &
pids+=($!)

target() { psql -X -qAt -d target -c "$1"; }
source_q() { psql -X -qAt -c "$1"; }
wait_for() {  # wait_for DESCRIPTION SHELL-CONDITION
  for _ in $(seq 1 600); do
    if eval "$2"; then return 0; fi
    sleep 0.1
  done
  echo "demo: timed out waiting for $1"
  echo "--- dblogd log"; tail -20 "$workdir/dblogd.log"; echo "--- apply log"; tail -20 "$workdir/apply.log"
  exit 1
}
checksum='SELECT count(*) || '"' rows, md5 '"' || md5(string_agg(a::text, '"','"' ORDER BY id)) FROM demo.accounts a'
converged() { [ "$(source_q "$checksum")" = "$(target "$checksum" 2>/dev/null)" ]; }

wait_for "the bootstrap" '[ "$(target "SELECT count(*) FROM demo.accounts" 2>/dev/null)" = 10000 ]'
echo "bootstrapped: $(target 'SELECT count(*) FROM demo.accounts') rows in the target"

say "live changes: updates, deletes, inserts and a primary-key change"
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
UPDATE demo.accounts SET balance = balance + 1, updated = now() WHERE id % 3 = 0;
DELETE FROM demo.accounts WHERE id % 10 = 0;
INSERT INTO demo.accounts SELECT g, 'new owner ' || g, 0 FROM generate_series(10001, 10500) g;
UPDATE demo.accounts SET id = 20000 WHERE id = 1;
SQL
wait_for "the live changes" converged
echo "live changes applied: $(target "$checksum")"

say "damaging the target (rows lost, changed, invented), then repairing it from SQL"
target "DELETE FROM demo.accounts WHERE id % 7 = 0; UPDATE demo.accounts SET balance = -1 WHERE id % 11 = 0;
        INSERT INTO demo.accounts VALUES (99999, 'nobody', 0, now());" >/dev/null
echo "target now: $(target "$checksum")"
request=$(source_q "SELECT dblog.repair('demo.accounts')")
echo "repair request $request queued (SELECT * FROM dblog.requests)"
wait_for "the repair" '[ "$(source_q "SELECT state FROM dblog.requests WHERE id = $request")" = done ] && converged'
source_q "SELECT 'repair ' || id || ': ' || state || ', ' || chunks_done || ' chunks, ' || rows_emitted || ' rows' FROM dblog.requests WHERE id = $request"

say "result"
echo "source: $(source_q "$checksum")"
echo "target: $(target "$checksum")"
converged
echo "converged: source and target hold the same rows"
if [ "${DBLOG_KEEP_CLUSTER:-0}" = 1 ]; then
  echo "(dblogd and the applier stop now; the cluster stays: psql -h $PGHOST -p $PGPORT -U postgres)"
fi
