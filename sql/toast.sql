-- toast: an unchanged TOASTed column is never invented. Without REPLICA IDENTITY FULL it is
-- marked unchanged-toast; with FULL it is filled from the old row. Changed TOAST values arrive whole.
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE TABLE docs (id int PRIMARY KEY, title text, body text);
ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL;  -- no compression: always out of line
CREATE TABLE docs_full (id int PRIMARY KEY, title text, body text);
ALTER TABLE docs_full ALTER COLUMN body SET STORAGE EXTERNAL;
ALTER TABLE docs_full REPLICA IDENTITY FULL;

SELECT 'init' FROM pg_create_logical_replication_slot('regression_slot', 'dblog');

INSERT INTO docs VALUES (1, 'a', repeat('x', 10000));
UPDATE docs SET title = 'b' WHERE id = 1;          -- body unchanged: not in the WAL
UPDATE docs SET body = repeat('y', 10000) WHERE id = 1;  -- body changed: carried whole
DELETE FROM docs WHERE id = 1;

INSERT INTO docs_full VALUES (1, 'a', repeat('x', 10000));
UPDATE docs_full SET title = 'b' WHERE id = 1;     -- body unchanged, filled from the old row
DELETE FROM docs_full WHERE id = 1;

SELECT data FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0');

SELECT md5(repeat('x', 10000)) AS x_md5, md5(repeat('y', 10000)) AS y_md5;

SELECT 'stop' FROM pg_drop_replication_slot('regression_slot');
DROP TABLE docs, docs_full;
