-- types: how each type is encoded (the text twin shows the encoding: kind:value), NULLs,
-- and the copy path's dblog.encode_row() producing the very bytes the log path wrote.
\set VERBOSITY terse
SET synchronous_commit = on;
-- the encoder uses canonical output settings whatever the session's are
SET datestyle = 'german';
SET intervalstyle = 'sql_standard';
SET extra_float_digits = 0;
SET timezone = 'America/New_York';

CREATE DOMAIN posint AS int CHECK (VALUE > 0);
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE TYPE pt AS (x int, y text);
CREATE TABLE typed (
    id int PRIMARY KEY,
    c_bool bool, c_int2 int2, c_int4 int4, c_int8 int8, c_oid oid,
    c_float4 float4, c_float8 float8,
    c_text text, c_varchar varchar(10), c_bpchar char(5), c_name name,
    c_bytea bytea, c_uuid uuid,
    c_date date, c_ts timestamp, c_tstz timestamptz,
    c_numeric numeric, c_json json, c_jsonb jsonb,
    c_interval interval, c_int4arr int4[], c_textarr text[], c_inet inet,
    c_domain posint, c_enum mood, c_composite pt, c_tsarr timestamptz[]
);

SELECT 'init' FROM pg_create_logical_replication_slot('regression_slot', 'dblog');

INSERT INTO typed VALUES (1,
    true, -32768, 2147483647, -9223372036854775808, 4294967295,
    1.5, 0.1,
    'hé ''quoted''', 'varchar', 'ab', 'a_name',
    '\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
    '2024-02-29', '2024-02-29 13:14:15.123456', '1970-01-01 00:00:01+00',
    '12345678901234567890.123456789012345678901234567890', '{"b": 1, "a": [1, 2]}', '{"b": 1, "a": [1, 2]}',
    '1 day 02:03:04.5', '{1,NULL,3}', '{"a b","c,d"}', '192.168.0.1/24',
    7, 'happy', ROW(1, 'x'), '{"2024-01-01 00:00:00+00"}');
INSERT INTO typed VALUES (2,
    false, 0, 0, 0, 0,
    'NaN', '-Infinity',
    '', '', '', '',
    '\x', '00000000-0000-0000-0000-000000000000',
    'infinity', '-infinity', 'infinity',
    'NaN', 'null', '[]',
    '-1 mon', '{}', '{}', '::1',
    1, 'sad', ROW(NULL, NULL), '{}');
INSERT INTO typed (id) VALUES (3);
INSERT INTO typed VALUES (4, NULL, NULL, NULL, NULL, NULL, '-0', '1e308', NULL, NULL, NULL,
    NULL, NULL, NULL, '1970-01-01', '1969-12-31 23:59:59.999999', NULL);

SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0');

-- one encoder: each row's dblog.encode_row() bytes occur verbatim in the binary change
-- the plugin wrote for it (the Row message is embedded as Change.new_row)
WITH changes AS (
    SELECT string_agg(data, '\x'::bytea) AS wal
    FROM pg_logical_slot_get_binary_changes('regression_slot', NULL, NULL, 'format', 'binary'))
SELECT t.id, length(dblog.encode_row(t)) > 0 AS encoded,
       position(dblog.encode_row(t) IN changes.wal) > 0 AS identical_in_log,
       position(dblog.relation_info('typed') IN changes.wal) > 0 AS relation_identical
FROM typed t, changes ORDER BY t.id;

-- a dropped column is skipped by both paths, and the relation is sent again after the change
ALTER TABLE typed DROP COLUMN c_int2;
UPDATE typed SET c_int4 = 5 WHERE id = 3;
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0') WHERE data LIKE 'RELATION%';
WITH changes AS (
    SELECT string_agg(data, '\x'::bytea) AS wal
    FROM pg_logical_slot_get_binary_changes('regression_slot', NULL, NULL, 'format', 'binary'))
SELECT t.id, position(dblog.encode_row(t) IN changes.wal) > 0 AS identical_in_log
FROM typed t, changes WHERE t.id = 3;

-- relation_info: keyless tables have no key columns (field 5 absent); bad input is refused
CREATE TABLE keyless (v int);
SELECT position('\x2a'::bytea IN dblog.relation_info('keyless')) = 0 AS no_key_columns;
SELECT dblog.relation_info('no_such_table');
SELECT dblog.relation_info(0);
DROP TABLE keyless;

-- encode_row works on any row value, and is strict
SELECT encode(dblog.encode_row(ROW(1, 'a'::text)), 'hex') AS anonymous_row;
SELECT dblog.encode_row(NULL::typed) IS NULL AS strict;

SELECT 'stop' FROM pg_drop_replication_slot('regression_slot');
DROP TABLE typed;
DROP TYPE pt;
DROP TYPE mood;
DROP DOMAIN posint;
