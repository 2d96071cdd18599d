-- tests/docs/setup/operations_app.sql: the application schema docs/operations.md grants dblogd
-- SELECT on ("The role dblogd uses"): schema app with a table. The extension is already there
-- (the doc's own "Preparing the source server" snippet created it).
CREATE SCHEMA app;
CREATE TABLE app.orders (id bigint PRIMARY KEY, customer text NOT NULL, total numeric NOT NULL);
