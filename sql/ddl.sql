-- ddl: the event trigger (extension 0.4, plugin/ddl_trigger.c) writes one 'dblog.ddl' message
-- per permanent ordinary table that ALTER TABLE ... RENAME TO, ALTER TABLE ... SET SCHEMA or
-- ALTER SCHEMA ... RENAME TO moved, in the DDL's own transaction; nothing else writes one; an
-- error inside never fails the DDL; any role's DDL fires it; the plugin drops a 'dblog.ddl'
-- message that does not say what its transaction's DDL did to the table it names (a forgery;
-- more in ddl_forgery.sql).
\set VERBOSITY terse
SET synchronous_commit = on;
CREATE SCHEMA ddl_a;
CREATE SCHEMA ddl_b;
CREATE SCHEMA ddl_s;
CREATE TABLE ddl_a.t (id int PRIMARY KEY, v text);
CREATE TABLE ddl_s.one (id int PRIMARY KEY);
CREATE TABLE ddl_s."Two words" (id int PRIMARY KEY);
CREATE VIEW ddl_s.a_view AS SELECT 1 AS x;
CREATE UNLOGGED TABLE ddl_s.unlogged (id int PRIMARY KEY);
CREATE TABLE ddl_s.parted (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE ddl_s.part1 PARTITION OF ddl_s.parted FOR VALUES FROM (0) TO (10);
CREATE SEQUENCE ddl_s.seq;

SELECT 'init' FROM pg_create_logical_replication_slot('regression_ddl', 'dblog');

-- the three kinds
ALTER TABLE ddl_a.t RENAME TO t2;
ALTER TABLE ddl_a.t2 SET SCHEMA ddl_b;
ALTER SCHEMA ddl_s RENAME TO "ddl S";
-- nothing for: a column rename, a view, an index, a sequence, an unlogged or temporary table,
-- a table already logged (SET LOGGED again),
-- a partitioned parent (its partition is a table of its own), a missing table, other ALTERs
ALTER TABLE ddl_b.t2 RENAME COLUMN v TO w;
ALTER TABLE "ddl S".a_view RENAME TO a_view2;
ALTER TABLE "ddl S".one_pkey RENAME TO one_key;
ALTER TABLE "ddl S".seq RENAME TO seq2;
ALTER TABLE "ddl S".unlogged RENAME TO unlogged2;
CREATE TEMP TABLE tmp (id int);
ALTER TABLE tmp RENAME TO tmp2;
ALTER TABLE "ddl S".parted RENAME TO parted2;
ALTER TABLE IF EXISTS ddl_a.missing RENAME TO gone;
ALTER TABLE ddl_b.t2 ADD COLUMN n int;
ALTER SCHEMA ddl_b OWNER TO CURRENT_USER;
ALTER TABLE "ddl S".unlogged2 SET UNLOGGED;
-- an unlogged table becoming logged: captured from now on, under the same name
ALTER TABLE "ddl S".unlogged2 SET LOGGED;
ALTER TABLE "ddl S".unlogged2 SET LOGGED;
-- a rename rolled back with its savepoint leaves no message; the one kept does
BEGIN;
SAVEPOINT s;
ALTER TABLE ddl_b.t2 RENAME TO rolled_back;
ROLLBACK TO SAVEPOINT s;
ALTER TABLE ddl_b.t2 RENAME TO t3;
COMMIT;
SELECT regexp_replace(data, '"oid":[0-9]+', '"oid":N') AS data
  FROM pg_logical_slot_get_changes('regression_ddl', NULL, NULL,
       'format', 'text', 'include_coordinates', '0');

-- the message names the table by oid
ALTER TABLE ddl_b.t3 RENAME TO t4;
SELECT data LIKE '%"oid":' || 'ddl_b.t4'::regclass::oid || ',%' AS names_the_oid
  FROM pg_logical_slot_get_changes('regression_ddl', NULL, NULL,
       'format', 'text', 'include_coordinates', '0')
 WHERE data LIKE 'MESSAGE%';

-- an error inside the trigger is a WARNING: the DDL is done, nothing is written
SET dblog.test_ddl_trigger_error = on;
ALTER TABLE ddl_b.t4 RENAME TO t5;
RESET dblog.test_ddl_trigger_error;
SELECT 'ddl_b.t5'::regclass AS renamed_anyway;
SELECT count(*) AS no_message
  FROM pg_logical_slot_get_changes('regression_ddl', NULL, NULL,
       'format', 'text', 'include_coordinates', '0')
 WHERE data LIKE 'MESSAGE%';
-- any role's DDL fires it (no privilege on the extension needed), and the message is written
-- as that role
CREATE ROLE regress_ddl_owner;
CREATE SCHEMA ddl_own AUTHORIZATION regress_ddl_owner;
SELECT 'ddl_b.t5'::regclass::oid AS other_oid \gset
SET SESSION AUTHORIZATION regress_ddl_owner;
CREATE TABLE ddl_own.mine (id int PRIMARY KEY);
ALTER TABLE ddl_own.mine RENAME TO mine2;
-- its forgeries are dropped by the plugin: a message naming a table it did not change in
-- that transaction, whether its own or another's
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  '{"oid":' || 'ddl_own.mine2'::regclass::oid || ',"kind":"rename","old_schema":"x",'
  || '"old_name":"y","new_schema":"ddl_own","new_name":"mine2"}');
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  '{"oid":' || :other_oid || ',"kind":"rename"}');
BEGIN;
CREATE TABLE ddl_own.other (id int);
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  '{"oid":' || :other_oid || ',"kind":"rename"}');
COMMIT;
SELECT 'forged' FROM pg_logical_emit_message(false, 'dblog.ddl',
  '{"oid":' || 'ddl_own.mine2'::regclass::oid || ',"kind":"rename"}');
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl', 'not json');
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl', '{"oid":99999999999999999}');
-- it may not call the function itself, nor turn the failure switch on
SELECT dblog._ddl_trigger();
SET dblog.test_ddl_trigger_error = on;
RESET SESSION AUTHORIZATION;
SELECT regexp_replace(data, '"oid":[0-9]+', '"oid":N') AS data
  FROM pg_logical_slot_get_changes('regression_ddl', NULL, NULL,
       'format', 'text', 'include_coordinates', '0');

-- a message prefix filter passes it like any other message
ALTER SCHEMA ddl_own RENAME TO ddl_own2;
SELECT count(*) AS filtered_out
  FROM pg_logical_slot_peek_changes('regression_ddl', NULL, NULL,
       'format', 'text', 'message_prefixes', 'app.')
 WHERE data LIKE 'MESSAGE%';
-- message_max_bytes never cuts its content (names: small, and useless cut)
SELECT regexp_replace(data, '"oid":[0-9]+', '"oid":N') AS passed_whole
  FROM pg_logical_slot_get_changes('regression_ddl', NULL, NULL,
       'format', 'text', 'include_coordinates', '0', 'message_prefixes', 'dblog.ddl',
       'message_max_bytes', '10')
 WHERE data LIKE 'MESSAGE%';

SELECT pg_drop_replication_slot('regression_ddl');
DROP SCHEMA ddl_own2 CASCADE;
DROP ROLE regress_ddl_owner;
DROP SCHEMA ddl_a, ddl_b, "ddl S" CASCADE;
