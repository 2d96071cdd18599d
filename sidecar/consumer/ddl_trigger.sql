-- sidecar/consumer/ddl_trigger.sql: pgoutput mode's DDL trigger (docs/pgoutput.md, "DDL that
-- changes rows without writing them"), plain PL/pgSQL, no C: event triggers that note, in the
-- DDL's own transaction, every table of a dblog publication whose existing rows a statement
-- changed without writing them, which the log therefore never carries:
-- - ALTER TABLE ... ADD COLUMN with a non-null default that needs no rewrite (PostgreSQL stores
--   it as the column's missing value: every existing row reads it, none is written): a column
--   with a missing value at the statement's end that had none at its start;
-- - a table rewrite (the event table_rewrite, once per table rewritten, partitions included)
--   for anything but the persistence alone: ALTER COLUMN ... TYPE (the values converted, USING
--   or not), ADD COLUMN with a volatile default, an identity or a stored generated column, SET
--   ACCESS METHOD (with an ADD COLUMN ... DEFAULT in the same statement, the only sign of it);
-- - ALTER TYPE ... RENAME VALUE of an enum: a label row that had another label at the
--   statement's start; every table with a column whose type holds the enum (itself, an array,
--   a domain, a composite, a range of it).
-- dblogd reads the notes (dblog_ddl.changed_tables) once a second and queues a whole-table
-- repair of each table a consumer's publication holds (Bookkeeping::TakeDdlRepairs), so the
-- consumer converges with nothing run by hand, as the extension's event trigger does.
--
-- It also keeps each such table's columns (dblog_ddl.layouts), which pgoutput's Relation
-- message leaves without attnums: noted at the end of every ALTER TABLE (and ALTER TYPE of a
-- typed table's type, CREATE TABLE of a partition), and when a table enters a dblog publication
-- or this file is run, with the WAL insert position then ("not known" when it cannot be). A layout
-- DDL holds the table's ACCESS EXCLUSIVE lock from its catalog change to its commit, so no
-- other transaction writes the table in between: a change at LSN P was written under the
-- layout of the last note before P (the DDL's own later changes come after its note). dblogd
-- maps a Relation message through that note while the last note is the catalog (docs/pgoutput.md,
-- "Identity across DDL"), so a
-- column dropped, added again or retyped before dblogd read the table's earlier changes keeps
-- its attnum, as the extension's historic catalog gives it.
--
-- Creating an event trigger needs a superuser (or the service's administrator role: RDS's
-- rds_superuser, Cloud SQL's cloudsqlsuperuser, Supabase's postgres, Neon's owner). dblogd runs
-- this file itself when its role is a superuser; otherwise an administrator runs what
-- `dblogd --ddl-trigger-sql` prints (psql -v ON_ERROR_STOP=1; it is one transaction), in each
-- source database, and again after upgrading dblogd (the file replaces what it made).
--
-- Trust: everything here belongs to the administrator who runs it, in schema dblog_ddl, which it
-- refuses to reuse when another role owns it. The functions run as that administrator
-- (SECURITY DEFINER: the notes table is theirs), with search_path pinned, reading catalogs only
-- and calling no user-definable code; a function returning event_trigger cannot be called
-- directly (PostgreSQL refuses: "trigger functions can only be called as triggers"), and no
-- role but the administrator may write the table, so no role can note a table without making
-- the DDL. dblogd reads the notes only while the table, its schema and the two event
-- triggers all belong to one role (a role that may own event triggers), so a schema of that
-- name made by anyone else is ignored. Whatever fails inside becomes a WARNING: the trigger
-- never fails the user's DDL (the table is then repaired by hand, as without the trigger).
-- Not seen: DDL made while event triggers do not fire (session_replication_role = replica, the
-- triggers disabled) and, on Supabase, DDL run by a superuser or a reserved role.

-- One transaction, whatever runs this file (psql with or without -1 or ON_ERROR_STOP): after
-- the refusal below nothing else takes effect.
BEGIN;

-- Made first, then checked: a schema of that name another role made (before, or between a
-- check and the CREATE) is refused, since its owner could drop and replace what the event
-- triggers call.
CREATE SCHEMA IF NOT EXISTS dblog_ddl;
DO $$
BEGIN
  IF (SELECT n.nspowner FROM pg_catalog.pg_namespace n
       WHERE n.nspname OPERATOR(pg_catalog.=) 'dblog_ddl')
     OPERATOR(pg_catalog.<>) (SELECT r.oid FROM pg_catalog.pg_roles r
                               WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER) THEN
    RAISE EXCEPTION 'dblog: schema dblog_ddl exists and belongs to another role than %',
      CURRENT_USER
      USING HINT = 'Whoever owns it could replace what the event triggers call. Drop it (as its '
                   'owner) or run this as its owner, a role that may create event triggers.';
  END IF;
END
$$;
REVOKE ALL ON SCHEMA dblog_ddl FROM PUBLIC;
GRANT USAGE ON SCHEMA dblog_ddl TO PUBLIC;

-- One row per table and transaction (reasons joined): dblogd reads it (SELECT is every role's:
-- a table's oid and the DDL's kind, which the catalogs show anyway) and never writes it.
CREATE TABLE IF NOT EXISTS dblog_ddl.changed_tables (
    id pg_catalog.int8 GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid pg_catalog.xid8 NOT NULL DEFAULT pg_catalog.pg_current_xact_id(),
    table_oid pg_catalog.oid NOT NULL,
    reason pg_catalog.text NOT NULL,
    ddl_by pg_catalog.name NOT NULL DEFAULT SESSION_USER,
    noted_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX IF NOT EXISTS changed_tables_xid ON dblog_ddl.changed_tables (xid, table_oid);
REVOKE ALL ON TABLE dblog_ddl.changed_tables FROM PUBLIC;
GRANT SELECT ON TABLE dblog_ddl.changed_tables TO PUBLIC;

-- The layouts (above): kRelationQuery's rows of the table (dblog_ddl.layout_of), NULL when
-- they could not be read exactly (a DDL in a REPEATABLE READ or SERIALIZABLE transaction reads
-- catalogs through a snapshot older than its lock); dblogd reads them (SELECT is every role's,
-- as the catalogs are) only while this table belongs to dblog_ddl's owner.
CREATE TABLE IF NOT EXISTS dblog_ddl.layouts (
    id pg_catalog.int8 GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    table_oid pg_catalog.oid NOT NULL,
    at_lsn pg_catalog.pg_lsn NOT NULL,
    columns pg_catalog.jsonb,
    noted_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX IF NOT EXISTS layouts_table ON dblog_ddl.layouts (table_oid, at_lsn);
REVOKE ALL ON TABLE dblog_ddl.layouts FROM PUBLIC;
GRANT SELECT ON TABLE dblog_ddl.layouts TO PUBLIC;

-- What the trigger has seen, so that a statement's end is compared with the catalog as the
-- trigger last left it (tables no other role may write, unlike a setting, which code running
-- inside the statement could change): the columns with a missing value, and every enum label
-- by its row's oid (RENAME VALUE keeps the oid). Filled with the catalog as it is now.
CREATE TABLE IF NOT EXISTS dblog_ddl.missing_seen (
    attrelid pg_catalog.oid NOT NULL,
    attnum pg_catalog.int2 NOT NULL,
    PRIMARY KEY (attrelid, attnum)
);
CREATE TABLE IF NOT EXISTS dblog_ddl.labels_seen (
    enum_row pg_catalog.oid PRIMARY KEY,
    enumtypid pg_catalog.oid NOT NULL,
    label pg_catalog.name NOT NULL
);
CREATE INDEX IF NOT EXISTS labels_seen_type ON dblog_ddl.labels_seen (enumtypid);
REVOKE ALL ON TABLE dblog_ddl.missing_seen, dblog_ddl.labels_seen FROM PUBLIC;
INSERT INTO dblog_ddl.missing_seen
SELECT a.attrelid, a.attnum FROM pg_catalog.pg_attribute a WHERE a.atthasmissing
ON CONFLICT DO NOTHING;
INSERT INTO dblog_ddl.labels_seen
SELECT e.oid, e.enumtypid, e.enumlabel FROM pg_catalog.pg_enum e
ON CONFLICT (enum_row) DO UPDATE SET label = EXCLUDED.label;

-- Whether a publication of dblogd's (dblog_<consumer>, FOR TABLE) holds `tbl`, as itself or
-- as a partition.
CREATE OR REPLACE FUNCTION dblog_ddl.published(tbl pg_catalog.oid) RETURNS pg_catalog.bool
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT EXISTS (SELECT 1 FROM (SELECT tbl::pg_catalog.regclass  -- the table, and a partition's
                                UNION ALL                            -- ancestors
                                SELECT p.relid
                                  FROM pg_catalog.pg_partition_ancestors(tbl) AS p(relid)) AS a(relid)
                   JOIN pg_catalog.pg_publication_rel pr
                     ON pr.prrelid OPERATOR(pg_catalog.=) a.relid
                   JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) pr.prpubid
                  WHERE p.pubname OPERATOR(pg_catalog.~~) 'dblog\_%')
$$;

-- Notes table `tbl` for a repair, once per transaction (reasons joined, at most about 2 kB):
-- only an ordinary permanent table that a publication of dblogd's (dblog_<consumer>) holds, as
-- itself or as a partition, so that the notes stay few.
CREATE OR REPLACE FUNCTION dblog_ddl.note(tbl pg_catalog.oid, why pg_catalog.text)
RETURNS void
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
  UPDATE dblog_ddl.changed_tables d
     SET reason = d.reason OPERATOR(pg_catalog.||) ', ' OPERATOR(pg_catalog.||) why
   WHERE d.xid OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id()
     AND d.table_oid OPERATOR(pg_catalog.=) tbl
     AND pg_catalog.strpos(d.reason, why) OPERATOR(pg_catalog.=) 0
     AND pg_catalog.octet_length(d.reason) OPERATOR(pg_catalog.<) 2048;
  INSERT INTO dblog_ddl.changed_tables (table_oid, reason)
  SELECT tbl, pg_catalog.left(why, 2048)
    FROM pg_catalog.pg_class c
   WHERE c.oid OPERATOR(pg_catalog.=) tbl
     AND c.relkind OPERATOR(pg_catalog.=) 'r'
     AND c.relpersistence OPERATOR(pg_catalog.=) 'p'
     AND dblog_ddl.published(tbl)
     AND NOT EXISTS (SELECT 1 FROM dblog_ddl.changed_tables d
                      WHERE d.xid OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id()
                        AND d.table_oid OPERATOR(pg_catalog.=) tbl);
$$;

-- `tbl` and every table under it: its partitions and inheritance children, recursively.
CREATE OR REPLACE FUNCTION dblog_ddl.tree(tbl pg_catalog.oid) RETURNS SETOF pg_catalog.oid
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  WITH RECURSIVE tree(relid) AS (
    SELECT tbl
    UNION
    SELECT i.inhrelid FROM pg_catalog.pg_inherits i
      JOIN tree ON i.inhparent OPERATOR(pg_catalog.=) tree.relid)
  SELECT relid FROM tree
$$;

-- `tbl`'s columns as dblogd's kRelationQuery reads them (the query is pasted in from
-- sidecar/pgoutput/translate.cc when dblogd prints this file): a JSON array of its rows, each
-- an array of its 13 cells as libpq's text (NULL as null), in attnum order; NULL for no table.
CREATE OR REPLACE FUNCTION dblog_ddl.layout_of(pg_catalog.oid) RETURNS pg_catalog.jsonb
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp SET quote_all_identifiers = off
AS $layout$
  SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_array(
           r.c0::pg_catalog.text, r.c1::pg_catalog.text, r.c2::pg_catalog.text,
           r.c3::pg_catalog.text, r.c4::pg_catalog.text, r.c5::pg_catalog.text,
           r.c6::pg_catalog.text, r.c7::pg_catalog.text,
           CASE WHEN r.c8 THEN 't' ELSE 'f' END, r.c9::pg_catalog.text, r.c10::pg_catalog.text,
           r.c11::pg_catalog.text, r.c12::pg_catalog.text) ORDER BY r.c7)
    FROM (@RELATION_QUERY@) AS r(c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12)
$layout$;

-- Notes `tbl`'s layout as it is now, at the WAL insert position now, unless its last note says
-- the same: only a table of a dblog publication, and under a lock that waits for any DDL on it
-- still running (whose own note comes at its end; a DDL calling this holds a stronger lock
-- already). Read exactly only in READ COMMITTED: under an older snapshot the note says "not
-- known" (NULL), and dblogd maps the table's next Relation messages by the catalog alone.
CREATE OR REPLACE FUNCTION dblog_ddl.note_layout(tbl pg_catalog.oid) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp SET lock_timeout = '5s'
AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                  WHERE c.oid OPERATOR(pg_catalog.=) tbl
                    AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}'::"char"[])
                    AND c.relpersistence OPERATOR(pg_catalog.=) 'p')
     OR NOT dblog_ddl.published(tbl) THEN
    RETURN;
  END IF;
  EXECUTE pg_catalog.format('LOCK TABLE ONLY %s IN ACCESS SHARE MODE', tbl::pg_catalog.regclass);
  INSERT INTO dblog_ddl.layouts (table_oid, at_lsn, columns)
  SELECT tbl, pg_catalog.pg_current_wal_insert_lsn(), l.columns
    FROM (SELECT CASE WHEN pg_catalog.current_setting('transaction_isolation')
                           OPERATOR(pg_catalog.=) 'read committed'
                      THEN dblog_ddl.layout_of(tbl) END AS columns) AS l
   WHERE l.columns IS DISTINCT FROM (SELECT d.columns FROM dblog_ddl.layouts d
                                      WHERE d.table_oid OPERATOR(pg_catalog.=) tbl
                                      ORDER BY d.at_lsn DESC, d.id DESC LIMIT 1);
END
$$;

-- A note that says "not known from here on" (columns NULL), written when a layout could not
-- be noted: an older note must not map what comes after (dblogd falls back to the catalog).
CREATE OR REPLACE FUNCTION dblog_ddl.note_unknown(tbl pg_catalog.oid) RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  INSERT INTO dblog_ddl.layouts (table_oid, at_lsn, columns)
  VALUES (tbl, pg_catalog.pg_current_wal_insert_lsn(), NULL);
EXCEPTION WHEN OTHERS THEN
  RAISE WARNING 'dblog: the DDL trigger could not note that the columns of % are not known: %',
    tbl, SQLERRM;
END
$$;

-- ddl_command_end: the layout of every table an ALTER TABLE changed (and the tables under it),
-- and of every table a CREATE or ALTER PUBLICATION put into a publication; each on its own, a
-- failure a WARNING (dblogd then maps that table by the catalog alone, as without the trigger).
CREATE OR REPLACE FUNCTION dblog_ddl.note_layouts() RETURNS void
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  rels pg_catalog.oid[];
  rel pg_catalog.oid;
BEGIN
  -- which tables, in a block of its own: a failure later must not undo the notes written
  BEGIN
    SELECT pg_catalog.array_agg(DISTINCT tree.relid) INTO rels
      FROM pg_catalog.pg_event_trigger_ddl_commands() c,
           LATERAL (SELECT c.objid  -- a table altered, or created (a partition of one)
                     WHERE c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                       AND c.command_tag OPERATOR(pg_catalog.=) ANY ('{ALTER TABLE,CREATE TABLE}')
                    UNION ALL
                    -- typed tables: ALTER TYPE ... ADD/DROP/ALTER/RENAME ATTRIBUTE (CASCADE)
                    -- reports the composite's pg_class row
                    SELECT tt.oid FROM pg_catalog.pg_class ct, pg_catalog.pg_class tt
                     WHERE c.command_tag OPERATOR(pg_catalog.=) 'ALTER TYPE'
                       AND c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
                       AND ct.oid OPERATOR(pg_catalog.=) c.objid
                       AND tt.reloftype OPERATOR(pg_catalog.=) ct.reltype
                    UNION ALL
                    SELECT pr.prrelid FROM pg_catalog.pg_publication_rel pr
                     WHERE (c.classid OPERATOR(pg_catalog.=)
                              'pg_catalog.pg_publication_rel'::pg_catalog.regclass
                            AND pr.oid OPERATOR(pg_catalog.=) c.objid)
                        OR (c.classid OPERATOR(pg_catalog.=)
                              'pg_catalog.pg_publication'::pg_catalog.regclass
                            AND c.command_tag OPERATOR(pg_catalog.=) 'CREATE PUBLICATION'
                            AND pr.prpubid OPERATOR(pg_catalog.=) c.objid)) AS o(relid),
           LATERAL dblog_ddl.tree(o.relid) AS tree(relid);
  EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'dblog: the DDL trigger could not find the tables whose columns to note: %',
      SQLERRM;
    RETURN;
  END;
  FOREACH rel IN ARRAY COALESCE(rels, '{}') LOOP
    BEGIN
      PERFORM dblog_ddl.note_layout(rel);
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'dblog: the DDL trigger could not note the columns of %: %', rel, SQLERRM;
      PERFORM dblog_ddl.note_unknown(rel);
    END;
  END LOOP;
END
$$;

-- table_rewrite: every rewrite but one for the persistence alone (reason bit 1: SET LOGGED makes
-- the table join the scope, and dblogd copies it as such): a column's type changed (4), a
-- default filled in (2), and the access method (8), which keeps the values unless a column
-- added with a default in the same statement fills them in.
CREATE OR REPLACE FUNCTION dblog_ddl.on_rewrite() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  bits pg_catalog.int4;
BEGIN
  bits := pg_catalog.pg_event_trigger_table_rewrite_reason();
  IF (bits OPERATOR(pg_catalog.&) 14) OPERATOR(pg_catalog.<>) 0 THEN
    PERFORM dblog_ddl.note(pg_catalog.pg_event_trigger_table_rewrite_oid(),
                           CASE WHEN (bits OPERATOR(pg_catalog.&) 4) OPERATOR(pg_catalog.<>) 0
                                THEN 'ALTER TABLE ALTER COLUMN TYPE (rewrite)'
                                WHEN (bits OPERATOR(pg_catalog.&) 2) OPERATOR(pg_catalog.<>) 0
                                THEN 'ALTER TABLE ADD COLUMN DEFAULT (rewrite)'
                                ELSE 'ALTER TABLE SET ACCESS METHOD (rewrite)' END);
  END IF;
EXCEPTION WHEN OTHERS THEN
  RAISE WARNING 'dblog: the DDL trigger could not note a rewritten table: %', SQLERRM
    USING HINT = 'Repair the table by hand: SELECT dblog.repair(''<table>'')';
END
$$;

-- ddl_command_end of ALTER TABLE, ALTER TYPE and CREATE TYPE: columns with a missing value the
-- trigger had not seen (ADD COLUMN with a default that needs no rewrite), and enum label rows
-- whose label is not the one it saw (RENAME VALUE); then what it has seen becomes the catalog
-- as it is now (a new enum's labels too, from CREATE TYPE).
CREATE OR REPLACE FUNCTION dblog_ddl.on_ddl_end() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  cmd record;
  t record;
BEGIN
  -- first, and outside the block below, whose failure would undo the notes with it
  PERFORM dblog_ddl.note_layouts();
  BEGIN
  FOR cmd IN
    SELECT DISTINCT c.command_tag, c.objid FROM pg_catalog.pg_event_trigger_ddl_commands() c
     WHERE (c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
            -- not a temporary or unlogged table (never published; maybe a read-only transaction)
            AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class x
                             WHERE x.oid OPERATOR(pg_catalog.=) c.objid
                               AND x.relpersistence OPERATOR(pg_catalog.<>) 'p'))
        OR c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass
  LOOP
    IF cmd.command_tag OPERATOR(pg_catalog.=) 'ALTER TABLE' THEN
      -- the table and every table under it (ADD COLUMN recurses to partitions and children)
      FOR t IN
        SELECT a.attrelid,
               pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY a.attnum)
                 AS columns
          FROM dblog_ddl.tree(cmd.objid) AS tree(relid)
          JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) tree.relid
         WHERE a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped AND a.atthasmissing
           AND NOT EXISTS (SELECT 1 FROM dblog_ddl.missing_seen m
                            WHERE m.attrelid OPERATOR(pg_catalog.=) a.attrelid
                              AND m.attnum OPERATOR(pg_catalog.=) a.attnum)
         GROUP BY a.attrelid
      LOOP
        PERFORM dblog_ddl.note(t.attrelid, 'ALTER TABLE ADD COLUMN ' OPERATOR(pg_catalog.||)
                                           t.columns OPERATOR(pg_catalog.||) ' DEFAULT');
      END LOOP;
      -- seen: the tree's columns with a missing value now, and no others (a rewrite clears it)
      DELETE FROM dblog_ddl.missing_seen m USING dblog_ddl.tree(cmd.objid) AS tree(relid)
       WHERE m.attrelid OPERATOR(pg_catalog.=) tree.relid;
      DELETE FROM dblog_ddl.missing_seen m  -- of tables dropped since (their oids may return)
       WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                          WHERE c.oid OPERATOR(pg_catalog.=) m.attrelid);
      INSERT INTO dblog_ddl.missing_seen
      SELECT a.attrelid, a.attnum
        FROM dblog_ddl.tree(cmd.objid) AS tree(relid)
        JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) tree.relid
       WHERE a.atthasmissing
      ON CONFLICT DO NOTHING;
    ELSIF cmd.command_tag OPERATOR(pg_catalog.=) ANY ('{ALTER TYPE,CREATE TYPE}'::pg_catalog.text[])
          AND EXISTS (SELECT 1 FROM pg_catalog.pg_type ty
                       WHERE ty.oid OPERATOR(pg_catalog.=) cmd.objid
                         AND ty.typtype OPERATOR(pg_catalog.=) 'e') THEN
      -- a label row the trigger saw with another label: RENAME VALUE
      IF EXISTS (SELECT 1 FROM pg_catalog.pg_enum e JOIN dblog_ddl.labels_seen l
                   ON l.enum_row OPERATOR(pg_catalog.=) e.oid
                  WHERE e.enumtypid OPERATOR(pg_catalog.=) cmd.objid
                    AND l.label OPERATOR(pg_catalog.<>) e.enumlabel) THEN
        FOR t IN
          WITH RECURSIVE holders(typ) AS (
            SELECT cmd.objid
            UNION
            SELECT ty.oid FROM holders h JOIN pg_catalog.pg_type ty ON
                   (ty.typelem OPERATOR(pg_catalog.=) h.typ
                    AND ty.typcategory OPERATOR(pg_catalog.=) 'A')
                OR (ty.typtype OPERATOR(pg_catalog.=) 'd'
                    AND ty.typbasetype OPERATOR(pg_catalog.=) h.typ)
                OR (ty.typtype OPERATOR(pg_catalog.=) 'c'
                    AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
                                 WHERE a.attrelid OPERATOR(pg_catalog.=) ty.typrelid
                                   AND a.atttypid OPERATOR(pg_catalog.=) h.typ
                                   AND a.attnum OPERATOR(pg_catalog.>) 0
                                   AND NOT a.attisdropped))
                OR (ty.typtype OPERATOR(pg_catalog.=) ANY ('{r,m}'::"char"[])
                    AND EXISTS (SELECT 1 FROM pg_catalog.pg_range r
                                 WHERE (r.rngtypid OPERATOR(pg_catalog.=) ty.oid
                                        OR r.rngmultitypid OPERATOR(pg_catalog.=) ty.oid)
                                   AND r.rngsubtype OPERATOR(pg_catalog.=) h.typ)))
          SELECT DISTINCT a.attrelid
            FROM holders h JOIN pg_catalog.pg_attribute a
              ON a.atttypid OPERATOR(pg_catalog.=) h.typ
           WHERE a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
        LOOP
          PERFORM dblog_ddl.note(t.attrelid, 'ALTER TYPE ' OPERATOR(pg_catalog.||)
                                             cmd.objid::pg_catalog.regtype::pg_catalog.text
                                             OPERATOR(pg_catalog.||) ' RENAME VALUE');
        END LOOP;
      END IF;
      DELETE FROM dblog_ddl.labels_seen l
       WHERE l.enumtypid OPERATOR(pg_catalog.=) cmd.objid
          OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_type ty  -- types dropped since
                          WHERE ty.oid OPERATOR(pg_catalog.=) l.enumtypid);
      INSERT INTO dblog_ddl.labels_seen
      SELECT e.oid, e.enumtypid, e.enumlabel FROM pg_catalog.pg_enum e
       WHERE e.enumtypid OPERATOR(pg_catalog.=) cmd.objid
      ON CONFLICT (enum_row) DO UPDATE SET label = EXCLUDED.label;
    END IF;
  END LOOP;
  EXCEPTION WHEN OTHERS THEN
    RAISE WARNING 'dblog: the DDL trigger could not note the tables this statement changed: %',
      SQLERRM
      USING HINT = 'Repair them by hand: SELECT dblog.repair(''<table>'')';
  END;
END
$$;

DROP EVENT TRIGGER IF EXISTS dblog_ddl_start;  -- made by an earlier version of this file
DROP FUNCTION IF EXISTS dblog_ddl.on_ddl_start();
REVOKE ALL ON FUNCTION dblog_ddl.note(pg_catalog.oid, pg_catalog.text),
  dblog_ddl.tree(pg_catalog.oid), dblog_ddl.published(pg_catalog.oid),
  dblog_ddl.layout_of(pg_catalog.oid), dblog_ddl.note_layout(pg_catalog.oid),
  dblog_ddl.note_unknown(pg_catalog.oid),
  dblog_ddl.note_layouts(), dblog_ddl.on_rewrite(), dblog_ddl.on_ddl_end() FROM PUBLIC;

DROP EVENT TRIGGER IF EXISTS dblog_ddl_rewrite;
DROP EVENT TRIGGER IF EXISTS dblog_ddl_end;
CREATE EVENT TRIGGER dblog_ddl_rewrite ON table_rewrite
  EXECUTE FUNCTION dblog_ddl.on_rewrite();
CREATE EVENT TRIGGER dblog_ddl_end ON ddl_command_end
  WHEN TAG IN ('ALTER TABLE', 'ALTER TYPE', 'CREATE TYPE', 'CREATE TABLE', 'CREATE PUBLICATION',
               'ALTER PUBLICATION')
  EXECUTE FUNCTION dblog_ddl.on_ddl_end();

-- The layouts of the tables dblog publications hold now (a table whose last note says the same
-- is not noted again).
DO $$
DECLARE
  t record;
BEGIN
  FOR t IN
    SELECT DISTINCT tree.relid
      FROM pg_catalog.pg_publication_rel pr
      JOIN pg_catalog.pg_publication p ON p.oid OPERATOR(pg_catalog.=) pr.prpubid
     CROSS JOIN LATERAL dblog_ddl.tree(pr.prrelid) AS tree(relid)
     WHERE p.pubname OPERATOR(pg_catalog.~~) 'dblog\_%'
  LOOP
    BEGIN
      PERFORM dblog_ddl.note_layout(t.relid);
    EXCEPTION WHEN OTHERS THEN
      RAISE WARNING 'dblog: could not note the columns of %: %', t.relid::pg_catalog.regclass,
        SQLERRM;
      PERFORM dblog_ddl.note_unknown(t.relid);
    END;
  END LOOP;
END
$$;

COMMIT;
