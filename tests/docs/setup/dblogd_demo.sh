# tests/docs/setup/dblogd_demo.sh (sourced by the docs session, tests/docs/test_snippets.py):
# dblogd from the README's "Run dblogd" section, on its default port with consumer demo, over
# table items (one row) in the scratch database. The session's cleanup stops it.
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION dblog;
CREATE TABLE items (id int PRIMARY KEY, name text);
INSERT INTO items VALUES (1, 'one');
SQL
build/sidecar/dblogd --source "dbname=$PGDATABASE" --consumer demo='public.*' &
for _ in $(seq 1 100); do
  (exec 3<>/dev/tcp/127.0.0.1/7654) 2>/dev/null && break
  sleep 0.1
done
