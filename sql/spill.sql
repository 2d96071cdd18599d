-- spill: a transaction larger than logical_decoding_work_mem (64kB in the test cluster)
-- spills to disk in the server and still comes out whole and in order; the plugin writes
-- it in bounded batches rather than holding it.
\set VERBOSITY terse
SET synchronous_commit = on;
SHOW logical_decoding_work_mem;
CREATE TABLE big (id int PRIMARY KEY, payload text);

SELECT 'init' FROM pg_create_logical_replication_slot('regression_slot', 'dblog');
INSERT INTO big SELECT g, repeat('p', 100) FROM generate_series(1, 20000) g;

-- text format: one message per event, all 20000 inserts in order between BEGIN and COMMIT
SELECT count(*) AS events,
       count(*) FILTER (WHERE data LIKE 'INSERT%') AS inserts,
       bool_and(data NOT LIKE 'INSERT%' OR
                substring(data from 'seq=(\d+)')::int = substring(data from 'id=int:(\d+)')::int)
         AS seq_follows_order
FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0');

-- binary format: cut into several batches of about batch_bytes each
SELECT count(*) > 10 AS several_batches, max(length(data)) < 2 * 16384 AS bounded
FROM pg_logical_slot_get_binary_changes('regression_slot', NULL, NULL, 'batch_bytes', '16384');

SELECT spill_txns > 0 AS spilled FROM pg_stat_replication_slots WHERE slot_name = 'regression_slot';

SELECT 'stop' FROM pg_drop_replication_slot('regression_slot');
DROP TABLE big;
