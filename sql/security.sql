-- security: the SQL API never runs user-definable code with the extension owner's privileges
-- (a domain's CHECK, an operator a role defined in public), refuses tables it must not repair,
-- shows a request only to roles that may read its table, and accepts keys with quoted names.
\set VERBOSITY terse
SET synchronous_commit = on;

CREATE ROLE regress_appowner;
CREATE ROLE regress_reader;
CREATE SCHEMA app AUTHORIZATION regress_appowner;
GRANT CREATE ON SCHEMA public TO regress_appowner;
GRANT USAGE ON SCHEMA app TO regress_reader;
INSERT INTO dblog.consumers (name, slot_name, scope)
  VALUES ('sec', 'dblog_sec', 'app.*,public.*,dblog.*');

-- the owner of a table in scope, and nothing more, sets a trap: a domain whose CHECK tries to
-- make its owner a superuser and notes who ran it
SET SESSION AUTHORIZATION regress_appowner;
CREATE TABLE app.seen (who name, via text);
GRANT INSERT ON app.seen TO PUBLIC;
CREATE FUNCTION app.note(via text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO app.seen VALUES (current_user, via);
  BEGIN
    ALTER ROLE regress_appowner SUPERUSER;
  EXCEPTION WHEN insufficient_privilege THEN NULL;
  END;
  RETURN true;
END
$$;
CREATE DOMAIN app.trapped_int AS int CHECK (app.note('domain check'));
CREATE TABLE app.trap (id app.trapped_int PRIMARY KEY, v text);
TRUNCATE app.seen;
-- and an operator = (oid, regclass) in public, which 0.1's helpers resolved through the
-- caller's search_path
CREATE FUNCTION public.trap_eq(oid, regclass) RETURNS boolean LANGUAGE sql
  AS $$ SELECT app.note('operator') AND $1 OPERATOR(pg_catalog.=) $2::oid $$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = public.trap_eq);

-- the owner asks for repairs of its table: allowed, and its key is checked as the owner
SELECT dblog.repair_range('app.trap', '{"id": 1}', NULL) > 0 AS queued;
SELECT dblog.repair_keys('app.trap', '[{"id": 1}, {"id": 2}]') > 0 AS queued;
SELECT dblog.repair_range('app.trap', '{"id": "x"}', NULL);
RESET SESSION AUTHORIZATION;
SELECT rolsuper AS owner_became_superuser FROM pg_roles WHERE rolname = 'regress_appowner';
SELECT who, via FROM app.seen WHERE who <> 'regress_appowner';
-- what dblogd compares keys as: the domain's base type, never the domain
SELECT key_types FROM dblog.request_queue WHERE table_name = 'app.trap' ORDER BY id LIMIT 1;

-- the helpers dblogd calls as its own role, with the caller's search_path
SELECT dblog._scope_holds('app.*', 'app.trap') AS in_scope;
SELECT key_columns, key_types FROM dblog._identity_key('app.trap');
SELECT who, via FROM app.seen WHERE who <> 'regress_appowner';

-- a key type with a domain inside that cannot be compared as a base type: refused
CREATE TYPE app.pair AS (x app.trapped_int, y int);
CREATE TABLE app.bypair (k app.pair PRIMARY KEY);
SELECT dblog.repair('app.bypair');
-- a domain over a domain, and an array of a domain: their base types
CREATE DOMAIN app.short_text AS varchar(10) CHECK (app.note('short text'));
CREATE DOMAIN app.shorter_text AS app.short_text;
CREATE TABLE app.bytext (k app.shorter_text, a app.trapped_int[], PRIMARY KEY (k, a));
SELECT key_columns, key_types FROM dblog._identity_key('app.bytext');
SELECT dblog.repair_keys('app.bytext', '[{"k": "x", "a": "{1,2}"}]') > 0 AS queued;

-- tables dblog must not repair
CREATE UNLOGGED TABLE public.scratch (id int PRIMARY KEY);
CREATE TEMPORARY TABLE tmp_rows (id int PRIMARY KEY);
SELECT dblog.repair('dblog.consumers');
SELECT dblog.repair('dblog.request_queue');
SELECT dblog.repair('public.scratch');
SELECT dblog.repair('tmp_rows');
SELECT dblog.repair('pg_catalog.pg_class');

-- dblogd reads key values with the type's input function, never a cast (a type's owner may
-- add casts from text to it)
SELECT dblog._key_in('42', NULL::integer) AS int_key, dblog._key_in('{1,2}', NULL::int[]) AS arr,
       dblog._key_in(NULL, NULL::text) IS NULL AS null_in;
SELECT dblog._key_in('1', NULL::app.trapped_int);

-- a key of a plain and a quoted name
CREATE TABLE public.mixed (a int, "zZ" text, v text, PRIMARY KEY (a, "zZ"));
SELECT dblog.repair_keys('mixed', '[{"a": 1, "zZ": "x"}]') > 0 AS queued;
SELECT dblog.repair_range('mixed', '{"zZ": "x", "a": 1}', '{"a": 5, "zZ": ""}') > 0 AS queued;
SELECT dblog.repair_range('mixed', '{"zz": "x", "a": 1}', NULL);

-- who sees which requests
GRANT USAGE ON SCHEMA public TO regress_reader;
GRANT SELECT ON public.mixed TO regress_reader;
SET SESSION AUTHORIZATION regress_reader;
SELECT table_name, kind, keys FROM dblog.requests ORDER BY id;
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_appowner;
SELECT table_name, count(*) FROM dblog.requests GROUP BY 1 ORDER BY 1;
RESET SESSION AUTHORIZATION;

-- check_setup() names a table whose policies would hide rows from a replication role
CREATE ROLE regress_repl LOGIN REPLICATION;
CREATE TABLE public.guarded (id int PRIMARY KEY);
ALTER TABLE public.guarded ENABLE ROW LEVEL SECURITY;
SELECT ok, detail FROM dblog.check_setup() WHERE check_name = 'row_level_security';
ALTER ROLE regress_repl BYPASSRLS;
SELECT ok FROM dblog.check_setup() WHERE check_name = 'row_level_security';
DROP TABLE public.guarded;
DROP ROLE regress_repl;

-- every function of the extension pins its search_path
SELECT p.proname
  FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dblog')
   AND p.prolang <> (SELECT oid FROM pg_language WHERE lanname = 'c')
   AND NOT coalesce(p.proconfig::text[] @> ARRAY['search_path=pg_catalog, pg_temp'], false)
 ORDER BY 1;
-- and only _enqueue and cancel run as the extension's owner
SELECT p.proname
  FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.classid = 'pg_proc'::regclass
 WHERE d.refclassid = 'pg_extension'::regclass
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'dblog')
   AND p.prosecdef
 ORDER BY 1;

DELETE FROM dblog.request_queue;
DELETE FROM dblog.consumers;
DROP TABLE public.scratch, public.mixed, tmp_rows;
DROP OPERATOR public.= (oid, regclass);
DROP FUNCTION public.trap_eq(oid, regclass);
DROP SCHEMA app CASCADE;
REVOKE CREATE ON SCHEMA public FROM regress_appowner;
REVOKE USAGE ON SCHEMA public FROM regress_reader;
DROP ROLE regress_appowner, regress_reader;
