-- ddl_forgery: any role may write a 'dblog.ddl' message (pg_logical_emit_message), and one
-- that reaches dblogd makes it copy a table. The plugin forwards one only when it says what
-- the DDL of its own transaction did to that table, as the catalog shows it at the message's
-- place: the table (permanent, ordinary) has the new names now, an earlier version of its
-- pg_class row (or of its schema's pg_namespace row) written over by this transaction had the
-- old ones, and the change of the kind happened. Writing some catalog row (a temporary table,
-- a GRANT, a foreign key) authenticates nothing; a message too big to be the trigger's, or not
-- written as the trigger writes it, is dropped before anything is looked up.
\set VERBOSITY terse
SET synchronous_commit = on;
CREATE ROLE regress_forger;
CREATE SCHEMA fg_app AUTHORIZATION regress_forger;
CREATE SCHEMA fg_out;
SELECT current_database() AS db \gset
GRANT CREATE ON DATABASE :"db" TO regress_forger;
CREATE TABLE fg_app.victim (id int PRIMARY KEY);
CREATE TABLE fg_app.granted (id int PRIMARY KEY);
GRANT SELECT ON fg_app.granted TO regress_forger WITH GRANT OPTION;
CREATE TABLE fg_app.referenced (id int PRIMARY KEY);
GRANT REFERENCES ON fg_app.referenced TO regress_forger;
CREATE TABLE fg_out.p (id int PRIMARY KEY);
CREATE UNLOGGED TABLE fg_out.u (id int PRIMARY KEY);
-- a message as the trigger writes it (plugin/ddl_trigger.c), for forging one
CREATE FUNCTION fg_msg(relid bigint, kind text, old_schema text, old_name text,
                       new_schema text, new_name text, tail text DEFAULT '')
RETURNS text LANGUAGE sql IMMUTABLE
AS $$ SELECT format('{"oid":%s,"kind":%s,"old_schema":%s,"old_name":%s,"new_schema":%s,'
                    '"new_name":%s%s}', relid, to_json(kind), to_json(old_schema),
                    to_json(old_name), to_json(new_schema), to_json(new_name), tail) $$;
-- the text of what the plugin sends, oids hidden
CREATE FUNCTION fg_changes(OUT data text) RETURNS SETOF text LANGUAGE sql
AS $$ SELECT regexp_replace(data, '"oid":[0-9]+', '"oid":N')
        FROM pg_logical_slot_get_changes('regression_forgery', NULL, NULL,
             'format', 'text', 'include_coordinates', '0') $$;
SELECT 'fg_app.victim'::regclass::oid AS victim \gset
SELECT 'fg_app.granted'::regclass::oid AS granted \gset
SELECT 'fg_app.referenced'::regclass::oid AS referenced \gset

SELECT 'init' FROM pg_create_logical_replication_slot('regression_forgery', 'dblog');

SET SESSION AUTHORIZATION regress_forger;
-- the forger owns the schema, not the table: it may not ask for a copy of it
SELECT dblog.repair('fg_app.victim');

-- a temporary table is created in the transaction (a pg_class row written): a message naming
-- it, small or with 100 kB of padding, one or a thousand of them, is dropped
BEGIN;
CREATE TEMP TABLE tt (id int);
SELECT nspname AS temp_schema FROM pg_namespace WHERE oid = pg_my_temp_schema() \gset
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg('tt'::regclass::bigint, 'rename', 'fg_out', 'x', :'temp_schema', 'tt'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg('tt'::regclass::bigint, 'rename', 'fg_out', 'x', :'temp_schema', 'tt',
         format(',"pad":"%s"', repeat('a', 100000))));
SELECT count(*) AS forged FROM generate_series(1, 1000) g,
  LATERAL pg_logical_emit_message(true, 'dblog.ddl',
    fg_msg('tt'::regclass::bigint, 'rename', 'fg_out', 'x' || g, :'temp_schema', 'tt'));
COMMIT;
RESET SESSION AUTHORIZATION;
SELECT * FROM fg_changes();
SET SESSION AUTHORIZATION regress_forger;

-- a GRANT on the schema writes its pg_namespace row; a GRANT on a table with the grant
-- option, or a foreign key to it, writes its pg_class row: none makes a message naming it
-- (as if it came from elsewhere) authentic
BEGIN;
GRANT USAGE ON SCHEMA fg_app TO PUBLIC;
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:victim, 'rename_schema', 'fg_out', 'victim', 'fg_app', 'victim'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:victim, 'rename_schema', 'fg_app', 'victim', 'fg_app', 'victim'));
COMMIT;
BEGIN;
GRANT SELECT ON fg_app.granted TO PUBLIC;
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:granted, 'rename', 'fg_app', 'out', 'fg_app', 'granted'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:granted, 'set_schema', 'fg_out', 'granted', 'fg_app', 'granted'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:granted, 'set_logged', 'fg_app', 'granted', 'fg_app', 'granted'));
COMMIT;
BEGIN;
CREATE TABLE fg_app.referencing (r int REFERENCES fg_app.referenced);
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:referenced, 'rename', 'fg_app', 'out', 'fg_app', 'referenced'));
COMMIT;
RESET SESSION AUTHORIZATION;
SELECT * FROM fg_changes();
SET SESSION AUTHORIZATION regress_forger;

-- its own table, really renamed: the trigger's message passes, and so does a copy of it (it
-- says nothing the DDL did not); one that says otherwise is dropped: other old names, another
-- kind, an oid that wraps around to the table's (2^32 more), other members, other spacing
CREATE TABLE fg_app.mine (id int PRIMARY KEY);
SELECT 'fg_app.mine'::regclass::oid AS mine \gset
BEGIN;
ALTER TABLE fg_app.mine RENAME TO mine2;
SELECT 'copy' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:mine, 'rename', 'fg_app', 'mine', 'fg_app', 'mine2'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:mine, 'rename', 'fg_app', 'never', 'fg_app', 'mine2'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:mine, 'rename', 'fg_out', 'mine', 'fg_app', 'mine2'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:mine, 'set_schema', 'fg_out', 'mine2', 'fg_app', 'mine2'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:mine, 'rename_schema', 'fg_out', 'mine2', 'fg_app', 'mine2'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:mine, 'set_logged', 'fg_app', 'mine2', 'fg_app', 'mine2'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:mine + 4294967296, 'rename', 'fg_app', 'mine', 'fg_app', 'mine2'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:mine, 'rename', 'fg_app', 'mine', 'fg_app', 'mine2', ',"extra":"x"'));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  replace(fg_msg(:mine, 'rename', 'fg_app', 'mine', 'fg_app', 'mine2'), ',', ', '));
SELECT 'forged' FROM pg_logical_emit_message(true, 'dblog.ddl',
  fg_msg(:mine, 'rename', 'fg_app', 'mine', 'fg_app', 'mine2') || ' ');
COMMIT;
RESET SESSION AUTHORIZATION;
SELECT * FROM fg_changes();
SET SESSION AUTHORIZATION regress_forger;

-- the real DDL still passes when a transaction does more than one: a table created and
-- renamed twice, a schema renamed twice, SET SCHEMA after the schema's rename
BEGIN;
CREATE TABLE fg_app.fresh (id int PRIMARY KEY);
ALTER TABLE fg_app.fresh RENAME TO fresh2;
ALTER TABLE fg_app.fresh2 RENAME TO fresh3;
COMMIT;
RESET SESSION AUTHORIZATION;
SELECT * FROM fg_changes();
BEGIN;
ALTER SCHEMA fg_out RENAME TO fg_out2;
ALTER SCHEMA fg_out2 RENAME TO fg_out3;
ALTER TABLE fg_out3.u SET LOGGED;
ALTER TABLE fg_out3.u SET SCHEMA fg_app;
COMMIT;
RESET SESSION AUTHORIZATION;
SELECT * FROM fg_changes();
-- the schema's owner renames its schema: every table in it moves, also one it does not own
-- (a real change of what a scope holds: docs/operations.md, "Security model")
SET SESSION AUTHORIZATION regress_forger;
ALTER SCHEMA fg_app RENAME TO fg_app2;
RESET SESSION AUTHORIZATION;
SELECT regexp_replace(data, 'seq=[0-9]+ ', '') AS data FROM fg_changes() WHERE data LIKE '%victim%';
-- a catalog row updated more than 64 times in one transaction authenticates nothing (matching
-- its versions is quadratic, so no role makes the walsender spend long on it): the last of 40
-- renames back and forth (80 versions) writes its message, which is dropped; one rename more in
-- a transaction of its own passes again
SET SESSION AUTHORIZATION regress_forger;
CREATE TABLE fg_app2.churn (id int PRIMARY KEY);
BEGIN;
DO $$BEGIN FOR i IN 1..40 LOOP
  ALTER TABLE fg_app2.churn RENAME TO churn2; ALTER TABLE fg_app2.churn2 RENAME TO churn;
END LOOP; END$$;
ALTER TABLE fg_app2.churn RENAME TO churned;
COMMIT;
RESET SESSION AUTHORIZATION;
SELECT count(*) AS churn_messages FROM fg_changes() WHERE data LIKE '%churn%';
SET SESSION AUTHORIZATION regress_forger;
ALTER TABLE fg_app2.churned RENAME TO churn_again;
RESET SESSION AUTHORIZATION;
SELECT count(*) AS churn_messages FROM fg_changes() WHERE data LIKE '%churn_again%';

SELECT pg_drop_replication_slot('regression_forgery');
DROP SCHEMA fg_app2 CASCADE;
DROP SCHEMA fg_out3 CASCADE;
DROP TABLE tt;
DROP FUNCTION fg_msg, fg_changes;
REVOKE CREATE ON DATABASE :"db" FROM regress_forger;
DROP ROLE regress_forger;
