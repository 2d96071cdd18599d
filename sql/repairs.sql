-- repairs: the SQL API that queues repairs (dblog.repair*, dblog.cancel, dblog.requests), its
-- checks, and how a request reaches dblogd: as a control event in the WAL, only when committed.
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE TABLE accounts (id int PRIMARY KEY, v text);
CREATE TABLE pairs (a int, b text, v text, PRIMARY KEY (b, a));
CREATE TABLE nokey (v int);
CREATE TABLE outside (id int PRIMARY KEY);
CREATE TABLE parted (id int PRIMARY KEY) PARTITION BY RANGE (id);
CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (0) TO (100);
CREATE VIEW aview AS SELECT 1 AS id;
CREATE SCHEMA other;
CREATE TABLE other.t (id int PRIMARY KEY);
-- consumers are registered by dblogd when they first connect; pretend two did
INSERT INTO dblog.consumers (name, slot_name, scope) VALUES
  ('search', 'dblog_search', 'public.accounts,public.pairs,public.nokey'),
  ('warehouse', 'dblog_warehouse', 'other.*');

SELECT 'init' FROM pg_create_logical_replication_slot('regression_slot', 'dblog');

-- valid requests return their id
SELECT dblog.repair('accounts') > 0 AS queued;
SELECT dblog.repair('accounts', 'search') > 0 AS queued;
SELECT dblog.repair_range('pairs', '{"a": 1, "b": "x"}', NULL, 'search') > 0 AS queued;
SELECT dblog.repair_range('accounts', NULL, '{"id": 10}') > 0 AS queued;
SELECT dblog.repair_keys('accounts', '[{"id": 1}, {"id": 2}]') > 0 AS queued;
SELECT dblog.repair('other.t') > 0 AS queued;

-- errors, nothing queued
SELECT dblog.repair('no_such_table');
SELECT dblog.repair('nokey');
SELECT dblog.repair('parted');
SELECT dblog.repair('aview');
SELECT dblog.repair('outside');
SELECT dblog.repair('accounts', 'nobody');
SELECT dblog.repair('accounts', 'warehouse');
SELECT dblog.repair_range('accounts', '{"id": "one"}', NULL);
SELECT dblog.repair_range('accounts', '{"identifier": 1}', NULL);
SELECT dblog.repair_range('pairs', '{"a": 1}', NULL);
SELECT dblog.repair_range('accounts', '[1]', NULL);
SELECT dblog.repair_keys('accounts', '[]');
SELECT dblog.repair_keys('accounts', '{"id": 1}');
SELECT dblog.repair_keys('accounts', '[{"id": null}]');
SELECT dblog.repair(NULL);
SELECT count(*) AS queued FROM dblog.requests;

-- a rolled-back request never reaches the log
BEGIN;
SELECT dblog.repair('accounts') > 0 AS queued;
ROLLBACK;

-- the view
SELECT table_name, kind, consumer, state, chunks_done, rows_emitted, deletes_emitted,
       from_key, to_key, keys
  FROM dblog.requests ORDER BY id;

-- cancel
SELECT dblog.cancel(min(id)) FROM dblog.requests;
SELECT dblog.cancel(min(id)) FROM dblog.requests;
SELECT state FROM dblog.requests ORDER BY id LIMIT 1;
SELECT dblog.cancel(-1);

-- permissions: not the owner, not an operator
CREATE ROLE regress_dblog_nobody;
CREATE ROLE regress_dblog_op IN ROLE dblog_operator;
GRANT USAGE ON SCHEMA public TO regress_dblog_nobody, regress_dblog_op;
SELECT max(id) AS last_request FROM dblog.requests \gset
SET SESSION AUTHORIZATION regress_dblog_nobody;
SELECT dblog.repair('accounts');
SELECT dblog.cancel(:last_request);
-- a role that may not read the table sees none of its requests (their keys are its rows)
SELECT count(*) > 0 AS can_read_requests FROM dblog.requests;
SELECT count(*) FROM dblog.request_queue;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_dblog_op;
SELECT dblog.repair('accounts') > 0 AS operator_may;
RESET SESSION AUTHORIZATION;

-- control events: only with control=on, only committed requests, in commit order
SELECT regexp_replace(regexp_replace(data, 'id=int:\d+', 'id=int:N', 'g'),
                      'requested_at=timestamptz:-?\d+', 'requested_at=timestamptz:T', 'g')
  FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'control', 'on')
 WHERE data LIKE 'INSERT dblog.request_queue%' OR data LIKE 'UPDATE dblog.request_queue%'
 LIMIT 3;
SELECT count(*) AS without_control
  FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0')
 WHERE data LIKE '%dblog.%';

SELECT 'stop' FROM pg_drop_replication_slot('regression_slot');
DELETE FROM dblog.request_queue;
DELETE FROM dblog.consumers;
DROP VIEW aview;
DROP TABLE accounts, pairs, nokey, outside, parted, other.t;
DROP SCHEMA other;
REVOKE USAGE ON SCHEMA public FROM regress_dblog_nobody, regress_dblog_op;
DROP ROLE regress_dblog_nobody, regress_dblog_op;
