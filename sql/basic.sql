-- basic: insert, update, delete, key changes, multi-statement transactions, rollback,
-- savepoints; every change stamped and ordered within its transaction.
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE TABLE items (id int PRIMARY KEY, name text, qty int);
CREATE TABLE pairs (a int, b text, v text, PRIMARY KEY (b, a));

SELECT 'init' FROM pg_create_logical_replication_slot('regression_slot', 'dblog');

INSERT INTO items VALUES (1, 'one', 10);
UPDATE items SET qty = 11 WHERE id = 1;
DELETE FROM items WHERE id = 1;

-- several statements in one transaction: one BEGIN, one COMMIT, seq 1..n
BEGIN;
INSERT INTO items VALUES (2, 'two', 20), (3, 'three', 30);
UPDATE items SET name = 'TWO' WHERE id = 2;
INSERT INTO pairs VALUES (1, 'x', 'first');
COMMIT;

-- a primary-key change carries the old key beside the new row
UPDATE items SET id = 4 WHERE id = 3;
UPDATE pairs SET a = 2 WHERE a = 1;

-- rolled back: nothing emitted
BEGIN;
INSERT INTO items VALUES (5, 'five', 50);
ROLLBACK;

-- savepoints: the rolled-back subtransaction's change is gone, the rest stays in order
BEGIN;
INSERT INTO items VALUES (6, 'six', 60);
SAVEPOINT s1;
INSERT INTO items VALUES (7, 'seven', 70);
ROLLBACK TO SAVEPOINT s1;
SAVEPOINT s2;
INSERT INTO items VALUES (8, 'eight', 80);
RELEASE SAVEPOINT s2;
DELETE FROM items WHERE id = 2;
COMMIT;

SELECT data FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0');

-- coordinates: per transaction, seq counts up from 1 and commit_lsn is the commit record
INSERT INTO items VALUES (9, 'nine', 90);
SELECT count(*) AS lines,
       count(*) FILTER (WHERE data ~ '^BEGIN xid=\d+ commit_lsn=[0-9A-F]+/[0-9A-F]+ end_lsn=[0-9A-F]+/[0-9A-F]+ commit_time=') AS begin_ok,
       count(*) FILTER (WHERE data ~ '^INSERT public.items seq=1 lsn=[0-9A-F]+/[0-9A-F]+:') AS insert_ok,
       count(*) FILTER (WHERE data ~ '^COMMIT seq=2 commit_lsn=') AS commit_ok
FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL, 'format', 'text');

-- the xid is 64-bit and matches the one pg_current_xact_id() reported
BEGIN;
INSERT INTO items VALUES (10, 'ten', 100);
SELECT pg_current_xact_id()::text AS xid \gset
COMMIT;
SELECT count(*) AS begin_with_xid
FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL, 'format', 'text')
WHERE data LIKE 'BEGIN xid=' || :'xid' || ' %';

SELECT 'stop' FROM pg_drop_replication_slot('regression_slot');
DROP TABLE items, pairs;
