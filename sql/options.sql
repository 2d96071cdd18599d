-- options: every error path of option parsing, with core's wording and error codes.
\set VERBOSITY default
SET synchronous_commit = on;
SELECT 'init' FROM pg_create_logical_replication_slot('regression_slot', 'dblog');

SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL, 'nonsense', '1');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL, 'format', 'xml');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'format', 'text');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'proto_version', '2');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'proto_version', 'one');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_tables', 'no_schema');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'exclude_tables', 'a.b.c');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'origin', 'some');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'keyless', 'ignore');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'batch_bytes', '-1');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'value_piece_bytes', '-1');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'value_piece_bytes', '1023');
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', 'maybe');
-- the binary format cannot be read as text, and the text format works
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL);
SELECT count(*) FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'proto_version', '1', 'include_coordinates', 'off', 'batch_bytes', '0',
    'value_piece_bytes', '1024');

SELECT 'stop' FROM pg_drop_replication_slot('regression_slot');
