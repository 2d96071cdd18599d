-- truncate: one event for all truncated tables in scope, with its options.
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE TABLE t1 (id int PRIMARY KEY);
CREATE TABLE t2 (id int PRIMARY KEY, t1_id int REFERENCES t1);
CREATE TABLE t3 (id serial PRIMARY KEY);
INSERT INTO t1 VALUES (1);
INSERT INTO t2 VALUES (1, 1);
INSERT INTO t3 DEFAULT VALUES;

SELECT 'init' FROM pg_create_logical_replication_slot('regression_slot', 'dblog');

TRUNCATE t1, t2;
TRUNCATE t3 RESTART IDENTITY;
INSERT INTO t1 VALUES (2);
INSERT INTO t2 VALUES (2, 2);
TRUNCATE t1 CASCADE;

SELECT data FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0');

-- a truncate of only excluded tables sends nothing
TRUNCATE t3;
SELECT data FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'exclude_tables', 'public.t3');

SELECT 'stop' FROM pg_drop_replication_slot('regression_slot');
DROP TABLE t2, t1, t3;
