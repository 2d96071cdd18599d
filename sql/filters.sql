-- filters: include/exclude tables, the extension's own tables, tables without a key,
-- and changes applied by a replication origin.
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE SCHEMA app;
CREATE TABLE app.a (id int PRIMARY KEY);
CREATE TABLE app.b (id int PRIMARY KEY);
CREATE TABLE public.c (id int PRIMARY KEY);
CREATE TABLE public.nokey (v int);
CREATE TABLE public.full_nokey (v int);
ALTER TABLE public.full_nokey REPLICA IDENTITY FULL;
CREATE TABLE public.by_index (id int NOT NULL, code text NOT NULL, v text, PRIMARY KEY (id));
CREATE UNIQUE INDEX by_index_code ON public.by_index (code);
ALTER TABLE public.by_index REPLICA IDENTITY USING INDEX by_index_code;

SELECT 'init' FROM pg_create_logical_replication_slot('regression_slot', 'dblog');

INSERT INTO app.a VALUES (1);
INSERT INTO app.b VALUES (1);
INSERT INTO public.c VALUES (1);

-- include: only app.*
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'include_tables', 'app.*');
-- include and exclude together; whitespace and case-folding as for SQL identifiers
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0',
    'include_tables', 'app.*, PUBLIC.c', 'exclude_tables', 'app.b');
-- any schema, one table name
SELECT data FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'include_tables', '*.b');

-- a table without a key is refused with a clear error...
INSERT INTO public.nokey VALUES (1);
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0');
-- ...that dblogd recognises by its SQLSTATE (55000) and the token its detail starts with
-- (dblog_keyless_table), not by its words (docs/plugin.md)
\set VERBOSITY sqlstate
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0');
\set VERBOSITY default
\set SHOW_CONTEXT never
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0');
\set VERBOSITY terse
\set SHOW_CONTEXT errors
-- ...also with REPLICA IDENTITY FULL (a whole row is not a stable identity)...
INSERT INTO public.full_nokey VALUES (1);
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'exclude_tables', 'public.nokey');
-- ...unless it is left out, or skipped on request
INSERT INTO public.c VALUES (2);
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'exclude_tables', 'public.nokey,public.full_nokey');
SELECT data FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'keyless', 'skip');

-- REPLICA IDENTITY USING INDEX: the key is that index's columns, which the WAL carries
INSERT INTO public.by_index VALUES (1, 'one', 'v');
UPDATE public.by_index SET v = 'w' WHERE id = 1;
DELETE FROM public.by_index WHERE id = 1;
SELECT data FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0');

-- the extension's own schema is not user data
CREATE TABLE dblog.bookkeeping (id int PRIMARY KEY);
INSERT INTO dblog.bookkeeping VALUES (1);
SELECT data FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0');
DROP TABLE dblog.bookkeeping;

-- origin filter: changes applied under a replication origin are skipped with origin=none
SELECT 'origin' FROM pg_replication_origin_create('regress_origin');
SELECT 'session' FROM pg_replication_origin_session_setup('regress_origin');
INSERT INTO public.c VALUES (3);
SELECT 'reset' FROM pg_replication_origin_session_reset();
INSERT INTO public.c VALUES (4);
SELECT data FROM pg_logical_slot_peek_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'origin', 'none');
SELECT regexp_replace(data, 'origin=\d+', 'origin=N') AS data
FROM pg_logical_slot_get_changes('regression_slot', NULL, NULL,
    'format', 'text', 'include_coordinates', '0', 'origin', 'any');
SELECT 'drop' FROM pg_replication_origin_drop('regress_origin');

SELECT 'stop' FROM pg_drop_replication_slot('regression_slot');
DROP TABLE app.a, app.b, public.c, public.nokey, public.full_nokey, public.by_index;
DROP SCHEMA app;
