-- messages: pg_logical_emit_message, transactional (in order, with a seq) and not.
\set VERBOSITY terse
SET synchronous_commit = on;
CREATE TABLE m (id int PRIMARY KEY);

SELECT 'init' FROM pg_create_logical_replication_slot('regression_slot', 'dblog');

BEGIN;
INSERT INTO m VALUES (1);
SELECT 'msg1' FROM pg_logical_emit_message(true, 'dblog', 'watermark-like');
INSERT INTO m VALUES (2);
COMMIT;
SELECT 'msg2' FROM pg_logical_emit_message(false, 'other', 'non-transactional');
-- a transactional message in a rolled-back transaction is never seen
BEGIN;
SELECT 'msg3' FROM pg_logical_emit_message(true, 'dblog', 'rolled back');
ROLLBACK;
-- a transaction with only a message is sent on its own
SELECT 'msg4' FROM pg_logical_emit_message(true, 'dblog', 'alone');

SELECT data FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0');

-- message_prefixes: only messages whose prefix starts with one of them; message_max_bytes:
-- longer contents are left out, their length said
SELECT 'msg5' FROM pg_logical_emit_message(true, 'app.audit', 'kept');
SELECT 'msg6' FROM pg_logical_emit_message(false, 'app.audit.big', repeat('x', 100));
-- (a non-transactional message is flushed by the next commit)
SELECT 'msg8' FROM pg_logical_emit_message(false, 'dblog.watermark/a', 'lo:1');
SELECT 'msg7' FROM pg_logical_emit_message(true, 'other', 'dropped');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0',
    'message_prefixes', 'app.audit,dblog.watermark/a', 'message_max_bytes', '10');
SELECT count(*) AS no_messages FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'message_prefixes', '')
 WHERE data LIKE 'MESSAGE%';
SELECT count(*) AS all_messages FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0')
 WHERE data LIKE 'MESSAGE%';
-- bad values
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'message_prefixes', 'a,,b');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'message_max_bytes', '-1');

SELECT 'stop' FROM pg_drop_replication_slot('regression_slot');
DROP TABLE m;
