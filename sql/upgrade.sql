-- upgrade: ALTER EXTENSION dblog UPDATE from every earlier version ends where a fresh
-- CREATE EXTENSION does, keeping the bookkeeping rows (docs/operations.md, "Upgrading the
-- extension"). Each earlier version gets its own database.
\set VERBOSITY terse
\set regress_db :DBNAME
-- The catalog signature: the same functions (bodies, security settings), tables, views,
-- columns and event triggers give the same md5. Each database runs it (:catalog_signature)
-- after its update, and the last compares each with a fresh install's.
SELECT $sig$
SELECT md5(string_agg(x, ';' ORDER BY x)) AS sig
  FROM (SELECT p.oid::regprocedure::text || p.prosecdef || coalesce(p.proconfig::text, '')
               || coalesce(p.proacl::text, '') || p.prosrc AS x
          FROM pg_proc p WHERE p.pronamespace = 'dblog'::regnamespace
        UNION ALL
        SELECT c.relname::text || c.relkind::text || coalesce(pg_get_viewdef(c.oid), '')
               || coalesce(c.reloptions::text, '')
          FROM pg_class c WHERE c.relnamespace = 'dblog'::regnamespace
        UNION ALL
        SELECT a.attrelid::regclass::text || a.attname::text || format_type(a.atttypid, a.atttypmod)
          FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
         WHERE c.relnamespace = 'dblog'::regnamespace AND a.attnum > 0
           AND NOT a.attisdropped
        UNION ALL
        SELECT e.evtname::text || e.evtevent::text || e.evtenabled::text || coalesce(e.evttags::text, '')
               || e.evtfoid::regprocedure::text
          FROM pg_event_trigger e) s
$sig$ AS catalog_signature \gset
CREATE DATABASE regress_dblog_upgrade_0_1;
\c regress_dblog_upgrade_0_1
CREATE EXTENSION dblog VERSION '0.1';
CREATE TABLE items (id int PRIMARY KEY);
INSERT INTO dblog.consumers (name, slot_name, scope) VALUES ('up', 'dblog_up', 'public.*');
SELECT dblog.repair('items') > 0 AS queued_in_0_1;
SELECT extversion FROM pg_extension WHERE extname = 'dblog';
ALTER EXTENSION dblog UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'dblog';
-- the request queued before the update is still there, and new ones are queued by the update
SELECT table_name, kind, state FROM dblog.requests ORDER BY id;
SELECT dblog.repair_keys('items', '[{"id": 1}]') > 0 AS queued_in_0_2;
-- the same functions, tables and views as a fresh install (compared at the end)
:catalog_signature \gset upgraded_0_1_
-- 0.2 to 0.3: the repair API reads scopes with the shared matcher (0.2 split the text itself)
CREATE DATABASE regress_dblog_upgrade_0_2;
\c regress_dblog_upgrade_0_2
CREATE EXTENSION dblog VERSION '0.2';
CREATE TABLE items (id int PRIMARY KEY);
CREATE TABLE audit_log (id int PRIMARY KEY);
INSERT INTO dblog.consumers (name, slot_name, scope)
  VALUES ('up', 'dblog_up', 'public.*,!public.audit_log');
SELECT dblog._scope_holds('public.*,!public.audit_log', 'audit_log') AS excluded_held_in_0_2;
ALTER EXTENSION dblog UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'dblog';
SELECT dblog._scope_holds('public.*,!public.audit_log', 'audit_log') AS excluded_held_after_0_2,
       dblog._scope_holds('public.*,!public.audit_log', 'items') AS items_held_after_0_2;
SELECT dblog.repair('audit_log', 'up');
SELECT dblog.repair('items', 'up') > 0 AS queued_after_0_2;
:catalog_signature \gset upgraded_0_2_
-- 0.3 to 0.4: the event trigger that tells dblogd of renames (there was none in 0.3)
CREATE DATABASE regress_dblog_upgrade_0_3;
\c regress_dblog_upgrade_0_3
CREATE EXTENSION dblog VERSION '0.3';
CREATE TABLE items (id int PRIMARY KEY);
INSERT INTO dblog.consumers (name, slot_name, scope) VALUES ('up', 'dblog_up', 'public.*');
SELECT count(*) AS event_triggers_in_0_3 FROM pg_event_trigger;
ALTER EXTENSION dblog UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'dblog';
SELECT evtname, evtevent, evttags, evtfoid::regprocedure FROM pg_event_trigger;
-- the trigger fires after the update: a rename writes its message
SELECT 'init' FROM pg_create_logical_replication_slot('regress_upgrade_0_3', 'dblog');
ALTER TABLE items RENAME TO items2;
SELECT regexp_replace(data, '"oid":[0-9]+', '"oid":N') AS data
  FROM pg_logical_slot_get_changes('regress_upgrade_0_3', NULL, NULL,
       'format', 'text', 'include_coordinates', '0');
SELECT pg_drop_replication_slot('regress_upgrade_0_3');
SELECT dblog.repair('items2', 'up') > 0 AS queued_after_0_3;
:catalog_signature \gset upgraded_0_3_
-- 0.4 to 0.5: dblog._bind_relation(oid), the guard of dblogd's statements on a table
CREATE DATABASE regress_dblog_upgrade_0_4;
\c regress_dblog_upgrade_0_4
CREATE EXTENSION dblog VERSION '0.4';
CREATE TABLE items (id int PRIMARY KEY);
INSERT INTO dblog.consumers (name, slot_name, scope) VALUES ('up', 'dblog_up', 'public.*');
SELECT count(*) AS bind_functions_in_0_4 FROM pg_proc WHERE proname = '_bind_relation';
-- 0.4 with the new library: a DDL that fills a column queues nothing, and warns of nothing
ALTER TABLE items ADD COLUMN w text DEFAULT 'x';
SELECT count(*) AS queued_in_0_4 FROM dblog.request_queue;
ALTER EXTENSION dblog UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'dblog';
BEGIN;
SELECT dblog._bind_relation('items'::regclass) AS bound_after_0_4;
ROLLBACK;
-- and 0.5 queues its repair, with the reason
ALTER TABLE items ADD COLUMN w2 text DEFAULT 'y';
SELECT table_name, kind, reason FROM dblog.requests ORDER BY id;
:catalog_signature \gset upgraded_0_4_
-- 0.5 to 0.6: a consumer's timeline and its last failover (dblog.consumers, consumer_status)
CREATE DATABASE regress_dblog_upgrade_0_5;
\c regress_dblog_upgrade_0_5
CREATE EXTENSION dblog VERSION '0.5';
INSERT INTO dblog.consumers (name, slot_name, scope) VALUES ('up', 'dblog_up', 'public.*');
ALTER EXTENSION dblog UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'dblog';
-- the consumer registered before is there, with no timeline yet (dblogd writes it)
SELECT name, slot_state, timeline, failed_over_at, failover FROM dblog.consumer_status;
SELECT has_table_privilege('dblog_operator', 'dblog.consumer_status', 'SELECT')
       AS operator_reads_status;
:catalog_signature \gset upgraded_0_5_
CREATE DATABASE regress_dblog_fresh;
\c regress_dblog_fresh
CREATE EXTENSION dblog;
:catalog_signature \gset fresh_
SELECT :'upgraded_0_1_sig' = :'fresh_sig' AS upgrade_from_0_1_equals_fresh_install;
SELECT :'upgraded_0_2_sig' = :'fresh_sig' AS upgrade_from_0_2_equals_fresh_install;
SELECT :'upgraded_0_3_sig' = :'fresh_sig' AS upgrade_from_0_3_equals_fresh_install;
SELECT :'upgraded_0_4_sig' = :'fresh_sig' AS upgrade_from_0_4_equals_fresh_install;
SELECT :'upgraded_0_5_sig' = :'fresh_sig' AS upgrade_from_0_5_equals_fresh_install;
\c :regress_db
DROP DATABASE regress_dblog_upgrade_0_1;
DROP DATABASE regress_dblog_upgrade_0_2;
DROP DATABASE regress_dblog_upgrade_0_3;
DROP DATABASE regress_dblog_upgrade_0_4;
DROP DATABASE regress_dblog_upgrade_0_5;
DROP DATABASE regress_dblog_fresh;
