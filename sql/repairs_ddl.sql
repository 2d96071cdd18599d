-- repairs_ddl: DDL that changes the values of existing rows without writing them (so the log
-- never carries the new values) queues, in its own transaction, a whole-table repair of every
-- table it changed that a consumer's scope holds (extension 0.5, plugin/ddl_trigger.c): ADD
-- COLUMN with a default, a generation expression or an identity, ALTER COLUMN .. TYPE, ALTER
-- TYPE .. RENAME VALUE of an enum held by a column (directly, in an array, a domain, a
-- composite, a range). dblog.requests shows the reason. What does not change a row's value
-- queues nothing; nor does a table no scope holds; nor a DDL the trigger does not see.
\set VERBOSITY terse
SET synchronous_commit = on;
CREATE SCHEMA ddlr;
CREATE SCHEMA ddlr_out;
INSERT INTO dblog.consumers (name, slot_name, scope)
  VALUES ('ddlr', 'dblog_ddlr', 'ddlr.*,!ddlr.excluded');
CREATE TYPE ddlr.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN ddlr.mood_d AS ddlr.mood;
CREATE TYPE ddlr.pair AS (n int, m ddlr.mood_d);
CREATE TYPE ddlr.mood_range AS RANGE (subtype = ddlr.mood);
CREATE DOMAIN ddlr.filled AS int DEFAULT 7;
CREATE TABLE ddlr.a (id int PRIMARY KEY, v text, n int);
INSERT INTO ddlr.a SELECT g, 'v' || g, g FROM generate_series(1, 5) g;
CREATE TABLE ddlr.excluded (id int PRIMARY KEY);
CREATE TABLE ddlr_out.o (id int PRIMARY KEY);
CREATE TABLE ddlr.keyless (v text);
CREATE UNLOGGED TABLE ddlr.unlogged (id int PRIMARY KEY);
CREATE TABLE ddlr.parted (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE ddlr.part1 PARTITION OF ddlr.parted FOR VALUES FROM (0) TO (10);
CREATE TABLE ddlr.part2 PARTITION OF ddlr.parted FOR VALUES FROM (10) TO (20);
CREATE TABLE ddlr.parent (id int PRIMARY KEY);
CREATE TABLE ddlr.child () INHERITS (ddlr.parent);
ALTER TABLE ddlr.child ADD PRIMARY KEY (id);
CREATE TABLE ddlr.e_direct (id int PRIMARY KEY, m ddlr.mood);
CREATE TABLE ddlr.e_array (id int PRIMARY KEY, ms ddlr.mood[]);
CREATE TABLE ddlr.e_domain (id int PRIMARY KEY, m ddlr.mood_d);
CREATE TABLE ddlr.e_composite (id int PRIMARY KEY, p ddlr.pair);
CREATE TABLE ddlr.e_range (id int PRIMARY KEY, r ddlr.mood_range);
CREATE TABLE ddlr.e_key (m ddlr.mood PRIMARY KEY);
CREATE TABLE ddlr.e_none (id int PRIMARY KEY, t text);
CREATE TABLE ddlr_out.e_out (id int PRIMARY KEY, m ddlr.mood);

-- queued: each with its reason
ALTER TABLE ddlr.a ADD COLUMN w text DEFAULT 'x';
ALTER TABLE ddlr.a ALTER COLUMN n TYPE bigint USING n * 10;
ALTER TABLE ddlr.a ADD COLUMN r float8 DEFAULT random();
ALTER TABLE ddlr.a ADD COLUMN g int GENERATED ALWAYS AS (n * 2) STORED;
ALTER TABLE ddlr.a ADD COLUMN i int GENERATED ALWAYS AS IDENTITY;
ALTER TABLE ddlr.a ADD COLUMN s serial;
ALTER TABLE ddlr.a ADD COLUMN f ddlr.filled;
ALTER TABLE ddlr.a ALTER COLUMN v TYPE varchar(20);
-- several of one statement: one request
ALTER TABLE ddlr.a ADD COLUMN w2 text DEFAULT 'y', ADD COLUMN w3 int DEFAULT 3;
ALTER TABLE ddlr.a ALTER COLUMN id TYPE bigint;
-- through a partitioned or an inheritance parent: its tables
ALTER TABLE ddlr.parted ADD COLUMN w text DEFAULT 'p';
ALTER TABLE ddlr.parent ADD COLUMN w text DEFAULT 'i';
ALTER TYPE ddlr.mood RENAME VALUE 'ok' TO 'fine';
SELECT table_name, kind, consumer, state, reason FROM dblog.requests ORDER BY id;
DELETE FROM dblog.request_queue;

-- not queued: no existing value changes, or no scope holds the table, or dblog cannot copy it
ALTER TABLE ddlr.a ADD COLUMN z text;
ALTER TABLE ddlr.a ADD COLUMN z2 text DEFAULT NULL;
ALTER TABLE ddlr.a ALTER COLUMN v SET DEFAULT 'd';
ALTER TABLE ddlr.a RENAME COLUMN z TO z3;
ALTER TABLE ddlr.a ALTER COLUMN g DROP EXPRESSION;
ALTER TABLE ddlr.a SET ACCESS METHOD heap;
ALTER TABLE ddlr.a SET TABLESPACE pg_default;
CLUSTER ddlr.a USING a_pkey;
VACUUM FULL ddlr.a;
ALTER TYPE ddlr.mood ADD VALUE 'meh';
ALTER DOMAIN ddlr.mood_d SET DEFAULT 'sad';
ALTER TABLE ddlr.excluded ADD COLUMN w text DEFAULT 'x';
ALTER TABLE ddlr_out.o ADD COLUMN w text DEFAULT 'x';
ALTER TABLE ddlr.keyless ADD COLUMN w text DEFAULT 'x';
ALTER TABLE ddlr.unlogged ADD COLUMN w text DEFAULT 'x';
CREATE TEMP TABLE tmp (id int PRIMARY KEY);
ALTER TABLE tmp ADD COLUMN w text DEFAULT 'x';
ALTER TABLE dblog.request_queue ALTER COLUMN reason SET DEFAULT NULL;
-- rolled back with the DDL
BEGIN;
SAVEPOINT s;
ALTER TABLE ddlr.a ADD COLUMN rolled text DEFAULT 'x';
ROLLBACK TO SAVEPOINT s;
COMMIT;
-- DDL the trigger does not see: a manual repair (docs/operations.md)
SET session_replication_role = replica;
ALTER TABLE ddlr.a ADD COLUMN unseen text DEFAULT 'x';
RESET session_replication_role;
-- an error inside the trigger: a WARNING, the DDL done, nothing queued
SET dblog.test_ddl_trigger_error = on;
ALTER TABLE ddlr.a ADD COLUMN warned text DEFAULT 'x';
RESET dblog.test_ddl_trigger_error;
SELECT count(*) AS nothing_queued FROM dblog.request_queue;

-- the request is in the DDL's transaction, after what the transaction wrote before the DDL
SELECT 'init' FROM pg_create_logical_replication_slot('regression_ddlr', 'dblog');
BEGIN;
UPDATE ddlr.a SET v = 'before' WHERE id = 1;
ALTER TABLE ddlr.a ADD COLUMN later text DEFAULT 'l';
UPDATE ddlr.a SET v = 'after' WHERE id = 2;
COMMIT;
SELECT regexp_replace(regexp_replace(data, 'INSERT dblog.request_queue.*reason=', 'INSERT dblog.request_queue ... reason='),
                      'UPDATE ddlr.a seq=\d+: key\(id=int:(\d+)\).*', 'UPDATE ddlr.a \1')
  FROM pg_logical_slot_get_changes('regression_ddlr', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'control', 'on')
 WHERE data ~ '^(BEGIN|COMMIT|UPDATE ddlr.a|INSERT dblog.request_queue)';
DELETE FROM dblog.request_queue;

-- another role's DDL queues too, recorded as its session's; it cannot queue one by hand
CREATE ROLE regress_ddlr_owner;
GRANT USAGE, CREATE ON SCHEMA ddlr TO regress_ddlr_owner;
ALTER TYPE ddlr.mood OWNER TO regress_ddlr_owner;
SET SESSION AUTHORIZATION regress_ddlr_owner;
CREATE TABLE ddlr.mine (id int PRIMARY KEY);
INSERT INTO ddlr.mine VALUES (1);
ALTER TABLE ddlr.mine ADD COLUMN w text DEFAULT 'x';
SELECT dblog._ddl_repair('ddlr.a'::regclass, 'forged');
-- the type's owner renames a label: every table holding it changed, whoever owns it
ALTER TYPE ddlr.mood RENAME VALUE 'happy' TO 'glad';
SELECT table_name, requested_by, reason FROM dblog.requests ORDER BY id;
RESET SESSION AUTHORIZATION;
SELECT table_name, requested_by, reason FROM dblog.requests ORDER BY id;
-- a user's request has no reason
SELECT dblog.repair('ddlr.a') > 0 AS queued;
SELECT table_name, reason IS NULL AS by_a_user FROM dblog.requests
 WHERE table_name = 'ddlr.a';

SELECT 'stop' FROM pg_drop_replication_slot('regression_ddlr');
DELETE FROM dblog.request_queue;
DELETE FROM dblog.consumers WHERE name = 'ddlr';
DROP SCHEMA ddlr, ddlr_out CASCADE;
DROP ROLE regress_ddlr_owner;
