-- tests/docs/setup/repairs_orders.sql: what docs/repairs.md's SQL example repairs: the
-- extension, table app.orders with rows 1..300, a consumer whose scope holds it (registered
-- as dblogd does at its first connection), and request ids starting at 118 as in the doc.
CREATE EXTENSION dblog;
CREATE SCHEMA app;
CREATE TABLE app.orders (id bigint PRIMARY KEY, customer text NOT NULL, total numeric NOT NULL);
INSERT INTO app.orders SELECT g, 'customer ' || g, g * 10 FROM generate_series(1, 300) g;
INSERT INTO dblog.consumers (name, slot_name, scope) VALUES ('search', 'dblog_search', 'app.*');
SELECT setval('dblog.request_queue_id_seq', 117) + 1 AS next_request_id;
