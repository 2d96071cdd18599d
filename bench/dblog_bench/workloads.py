"""The workloads: the bench schema, the mixed-type table every section uses, and the changes
the sections generate (bulk, OLTP, the repair's update load). Nothing here measures."""
import re

from .harness import sql, sql_with_notices

TABLE_DDL = """
CREATE TABLE {name} (
  id bigint PRIMARY KEY,
  k integer NOT NULL,
  qty smallint,
  amount numeric(12,2),
  price double precision,
  flag boolean,
  name text,
  code varchar(32),
  created timestamptz,
  day date,
  uid uuid,
  attrs jsonb
);"""

def row_expr(i):
    """The select list of one row of the mixed-type table, for the bigint expression i."""
    return (f"{i}, ({i} * 7919 % 100000)::int, ({i} % 1000)::int2, "
            f"(({i} % 100000) / 100.0)::numeric(12,2), {i} * 0.001, {i} % 2 = 0, "
            f"'name-' || md5({i}::text), 'code-' || ({i} % 5000), "
            f"timestamptz '2024-01-01 00:00:00+00' + {i} * interval '1 second', "
            f"date '2024-01-01' + ({i} % 3650)::int, md5({i}::text)::uuid, "
            f"jsonb_build_object('n', {i}, 'tag', 't' || ({i} % 17), 'ok', {i} % 3 = 0)")

OLTP_PROC = """
CREATE OR REPLACE PROCEDURE bench.oltp(ntx int, npre bigint) LANGUAGE plpgsql AS $$
DECLARE
  n int; r int; cnt bigint := 0; rc bigint;
  next_id bigint := npre + 1;   -- ids of new rows
  del_id bigint := npre + 1;    -- the oldest new row not yet deleted
BEGIN
  FOR i IN 1..ntx LOOP
    n := 1 + i % 5;
    FOR j IN 1..n LOOP
      r := (i * 31 + j * 17) % 20;
      IF r >= 17 AND del_id < next_id THEN
        DELETE FROM bench.o WHERE id = del_id;
        del_id := del_id + 1;
      ELSIF r >= 10 THEN
        UPDATE bench.o SET k = k + 1, price = price + 1, created = clock_timestamp()
         WHERE id = 1 + (i::bigint * 7919 + j) % npre;
      ELSE
        INSERT INTO bench.o SELECT ROW_EXPR_NEXT_ID;
        next_id := next_id + 1;
      END IF;
      GET DIAGNOSTICS rc = ROW_COUNT;
      cnt := cnt + rc;
    END LOOP;
    COMMIT;
  END LOOP;
  RAISE NOTICE 'bench changes=%', cnt;
END $$;
""".replace("ROW_EXPR_NEXT_ID", row_expr("next_id"))

def setup_database():
    sql("""
CREATE EXTENSION IF NOT EXISTS dblog;
DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench;
CREATE TABLE bench.marker (id bigserial PRIMARY KEY, at timestamptz DEFAULT clock_timestamp());
DROP PUBLICATION IF EXISTS bench_pub;
CREATE PUBLICATION bench_pub FOR ALL TABLES;
""")

def next_marker():
    """Commits a marker row; returns the WAL insert position inside its transaction (the marker's
    commit record comes after it, every earlier transaction's before it)."""
    out = sql("BEGIN; INSERT INTO bench.marker DEFAULT VALUES;"
              " SELECT pg_current_wal_insert_lsn(); COMMIT;")
    return out.strip().splitlines()[-1]

def gen_bulk(n):
    ins = (2 * n) // 5
    upd = ins
    dele = n - ins - upd

    def generate():
        sql(f"INSERT INTO bench.t SELECT {row_expr('i')} FROM generate_series(1::bigint, {ins}) i;")
        sql(f"UPDATE bench.t SET k = k + 1, price = price * 1.01, name = 'upd-' || md5(id::text),"
            f" attrs = attrs || '{{\"u\": 1}}' WHERE id <= {upd};")
        sql(f"DELETE FROM bench.t WHERE id <= {dele};")
        return ins + upd + dele
    return generate

def gen_oltp(ntx, npre):
    def generate():
        _, notices = sql_with_notices(f"CALL bench.oltp({ntx}, {npre});")
        m = re.search(r"bench changes=(\d+)", notices)
        return int(m.group(1))
    return generate

REPAIR_SCRIPT = """\\set id random(1, :n)
UPDATE bench.r SET k = k + 1, price = price + 1, created = clock_timestamp() WHERE id = :id;
"""
