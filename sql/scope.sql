-- scope: the scope patterns of include_tables and exclude_tables (plugin/scope_match.c, the
-- matcher dblogd and the SQL API share): * anywhere in a name, exclusions, quoted names, and
-- the errors that say where and why.
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE SCHEMA shop;
CREATE TABLE shop.order_a (id int PRIMARY KEY);
CREATE TABLE shop.order_b (id int PRIMARY KEY);
CREATE TABLE shop.orders (id int PRIMARY KEY);
CREATE TABLE shop.audit_log (id int PRIMARY KEY);
CREATE TABLE shop."Order*" (id int PRIMARY KEY);

SELECT 'init' FROM pg_create_logical_replication_slot('scope_slot', 'dblog');
INSERT INTO shop.order_a VALUES (1);
INSERT INTO shop.order_b VALUES (1);
INSERT INTO shop.orders VALUES (1);
INSERT INTO shop.audit_log VALUES (1);
INSERT INTO shop."Order*" VALUES (1);

-- a star in a name: order_a and order_b, not orders
SELECT data FROM pg_logical_slot_peek_changes('scope_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'include_tables', 'shop.order_*')
 WHERE data LIKE 'INSERT%';
-- an exclusion inside the scope, in either order
SELECT data FROM pg_logical_slot_peek_changes('scope_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'include_tables', 'shop.*,!shop.audit_log')
 WHERE data LIKE 'INSERT%';
SELECT data FROM pg_logical_slot_peek_changes('scope_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'include_tables', '!shop.audit_log, SHOP.*')
 WHERE data LIKE 'INSERT%';
-- exclude_tables takes globs too; a quoted star is a star
SELECT data FROM pg_logical_slot_peek_changes('scope_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'include_tables', 'shop.*',
    'exclude_tables', 'shop.order*,shop."Order*"')
 WHERE data LIKE 'INSERT%';
SELECT data FROM pg_logical_slot_peek_changes('scope_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'include_tables', '*."Order"*')
 WHERE data LIKE 'INSERT%';

-- errors name the option and its value, and say where and why
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT data FROM pg_logical_slot_peek_changes('scope_slot', NULL, NULL,
    'format', 'text', 'include_tables', 'shop.order_*,');
SELECT data FROM pg_logical_slot_peek_changes('scope_slot', NULL, NULL,
    'format', 'text', 'include_tables', '!shop.audit_log');
SELECT data FROM pg_logical_slot_peek_changes('scope_slot', NULL, NULL,
    'format', 'text', 'include_tables', 'shop."order');
SELECT data FROM pg_logical_slot_peek_changes('scope_slot', NULL, NULL,
    'format', 'text', 'exclude_tables', '*.*,!shop.orders');
\set VERBOSITY terse
\set SHOW_CONTEXT errors

-- the SQL API reads a consumer's scope with the same matcher, as dblogd writes it (unquoted
-- names as spelled): dblog._scope_match, and through it _scope_holds and the repair API
SELECT s AS scope, dblog._scope_match(s, 'shop', 'order_a') AS order_a,
       dblog._scope_match(s, 'shop', 'orders') AS orders,
       dblog._scope_match(s, 'shop', 'audit_log') AS audit_log,
       dblog._scope_match(s, 'shop', 'Order*') AS "Order*"
  FROM unnest(ARRAY['shop.order_*', 'shop.*,!shop.audit_log', '!shop.audit_log,shop.*',
                    'shop."Order*"', 'shop.Order*', '*.*,!*.order*', 'shop.orders']) AS s;
INSERT INTO dblog.consumers (name, slot_name, scope)
  VALUES ('scoped', 'dblog_scoped', 'shop.*,!shop.audit_log');
SELECT dblog._scope_holds('shop.*,!shop.audit_log', 'shop.audit_log') AS audit_log_held,
       dblog._scope_holds('shop.*,!shop.audit_log', 'shop.orders') AS orders_held;
SELECT dblog.repair('shop.audit_log', 'scoped');
SELECT dblog.repair('shop.audit_log');
SELECT dblog.repair('shop.orders', 'scoped') > 0 AS queued;
DELETE FROM dblog.request_queue WHERE consumer = 'scoped';
DELETE FROM dblog.consumers WHERE name = 'scoped';
-- a scope that does not parse is an error saying where and why
\set VERBOSITY default
SELECT dblog._scope_match('shop.*,', 'shop', 'orders');
\set VERBOSITY terse

SELECT 'stop' FROM pg_drop_replication_slot('scope_slot');
DROP SCHEMA shop CASCADE;
