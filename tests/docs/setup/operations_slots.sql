-- tests/docs/setup/operations_slots.sql: two consumers as dblogd leaves them ("Slots and WAL
-- retention" in docs/operations.md): slots dblog_ops and dblog_demo, registered in
-- dblog.consumers, for the doc's snippets to watch and drop.
SELECT slot_name AS created FROM pg_create_logical_replication_slot('dblog_ops', 'dblog');
SELECT slot_name AS created FROM pg_create_logical_replication_slot('dblog_demo', 'dblog');
INSERT INTO dblog.consumers (name, slot_name, scope)
VALUES ('ops', 'dblog_ops', 'app.*,public.items'), ('demo', 'dblog_demo', 'public.*');
