/* plugin/dblog--0.1--0.2.sql: upgrade of the dblog extension from 0.1 to 0.2.
 *
 * 0.2 closes holes of the SQL API (docs/operations.md, "Security model"):
 * - no user-definable code runs with the extension owner's privileges: key values are checked
 *   by the caller's own function call (SECURITY INVOKER), and the key types dblog casts to are
 *   base types, never domains (a domain's CHECK is its owner's code);
 * - every function pins search_path, so an operator or function a role defines in a schema on
 *   the caller's search_path is never picked up;
 * - repairs of dblog's own tables, of unlogged and of temporary tables are refused at the call;
 * - a primary key mixing plain and quoted names ((a, "zZ")) accepts its valid keys;
 * - dblog.requests shows a request only to roles that may read its table or manage repairs;
 * - check_setup() names tables with row-level security that dblogd could not read whole.
 *
 * A new version of the extension only ever adds a script like this one: shipped scripts are
 * never edited (docs/operations.md, "Upgrading the extension").
 */

\echo Use "ALTER EXTENSION dblog UPDATE TO '0.2'" to load this file. \quit

-- A key value read by its type's input function (as 'value'::type), never by a cast: a cast
-- from text is looked up in pg_cast, where a type's owner may have put code of its own.
-- dblogd reads repair bounds and keys with it: dblog._key_in(value, NULL::type).
CREATE FUNCTION _key_in(value text, template anyelement) RETURNS anyelement
AS 'MODULE_PATHNAME', 'dblog_key_in'
LANGUAGE C STABLE PARALLEL SAFE;

-- The type dblog casts a key value of type `typ` (with `typmod`) to: the type itself when it
-- runs no user-definable code on input, its base type for a domain (recursively, also for an
-- array of a domain), and NULL when the type contains a domain that cannot be stripped (a
-- composite, range or multirange with a domain inside): such keys are refused for repairs.
CREATE FUNCTION _key_cast_type(typ oid, typmod integer) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  t record;
  inner_type text;
BEGIN
  SELECT ty.oid, ty.typtype, ty.typbasetype, ty.typtypmod, ty.typelem, ty.typsubscript,
         ty.typrelid
    INTO t FROM pg_catalog.pg_type ty WHERE ty.oid OPERATOR(pg_catalog.=) typ;
  IF NOT FOUND THEN
    RETURN NULL;
  END IF;
  IF t.typtype OPERATOR(pg_catalog.=) 'd' THEN
    RETURN dblog._key_cast_type(t.typbasetype,
                                CASE WHEN t.typtypmod OPERATOR(pg_catalog.>=) 0
                                     THEN t.typtypmod ELSE typmod END);
  END IF;
  IF t.typsubscript OPERATOR(pg_catalog.=) 'pg_catalog.array_subscript_handler'::regproc
     AND t.typelem OPERATOR(pg_catalog.<>) 0 THEN
    inner_type := dblog._key_cast_type(t.typelem, typmod);
    RETURN CASE WHEN inner_type IS NULL THEN NULL ELSE inner_type OPERATOR(pg_catalog.||) '[]' END;
  END IF;
  IF t.typtype OPERATOR(pg_catalog.=) ANY (ARRAY['c', 'r', 'm']::"char"[])
     AND dblog._contains_domain(typ) THEN
    RETURN NULL;
  END IF;
  RETURN pg_catalog.format_type(typ, typmod);
END
$$;

-- Does type `typ` contain a domain anywhere (itself, an element, a field, a range's subtype)?
CREATE FUNCTION _contains_domain(typ oid) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  WITH RECURSIVE parts(oid) AS (
    SELECT typ
    UNION
    SELECT inner_oid
      FROM parts p JOIN pg_catalog.pg_type ty ON ty.oid OPERATOR(pg_catalog.=) p.oid,
           LATERAL (
             SELECT ty.typelem AS inner_oid WHERE ty.typelem OPERATOR(pg_catalog.<>) 0
             UNION ALL
             SELECT ty.typbasetype WHERE ty.typbasetype OPERATOR(pg_catalog.<>) 0
             UNION ALL
             SELECT a.atttypid FROM pg_catalog.pg_attribute a
              WHERE a.attrelid OPERATOR(pg_catalog.=) ty.typrelid
                AND ty.typrelid OPERATOR(pg_catalog.<>) 0
                AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
             UNION ALL
             SELECT r.rngsubtype FROM pg_catalog.pg_range r
              WHERE r.rngtypid OPERATOR(pg_catalog.=) ty.oid
                 OR r.rngmultitypid OPERATOR(pg_catalog.=) ty.oid) AS x)
  SELECT EXISTS (SELECT 1 FROM parts p JOIN pg_catalog.pg_type ty
                   ON ty.oid OPERATOR(pg_catalog.=) p.oid
                  WHERE ty.typtype OPERATOR(pg_catalog.=) 'd')
$$;

-- The identity key: as in 0.1, but key_types are the types dblog casts key values to
-- (_key_cast_type; NULL for a key column dblog cannot compare without running user code).
CREATE OR REPLACE FUNCTION _identity_key(tbl regclass, OUT key_columns text[], OUT key_types text[])
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT pg_catalog.array_agg(pg_catalog.quote_ident(a.attname) ORDER BY k.ord),
         pg_catalog.array_agg(dblog._key_cast_type(a.atttypid, a.atttypmod) ORDER BY k.ord)
    FROM pg_catalog.pg_class c, pg_catalog.pg_index x,
         pg_catalog.unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord), pg_catalog.pg_attribute a
   WHERE c.oid OPERATOR(pg_catalog.=) tbl
     AND x.indrelid OPERATOR(pg_catalog.=) tbl
     AND a.attrelid OPERATOR(pg_catalog.=) tbl
     AND a.attnum OPERATOR(pg_catalog.=) k.attnum
     AND k.ord OPERATOR(pg_catalog.<=) x.indnkeyatts
     AND CASE WHEN c.relreplident OPERATOR(pg_catalog.=) 'i' THEN x.indisreplident
              WHEN c.relreplident OPERATOR(pg_catalog.=) ANY (ARRAY['d', 'f']::"char"[])
                THEN x.indisprimary
              ELSE false END
$$;

CREATE OR REPLACE FUNCTION _scope_holds(scope text, tbl regclass) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT EXISTS (
    SELECT 1
      FROM pg_catalog.pg_class c
           JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace,
           pg_catalog.unnest(pg_catalog.string_to_array(scope, ',')) AS p(pattern)
     WHERE c.oid OPERATOR(pg_catalog.=) tbl
       AND pg_catalog.split_part(pg_catalog.btrim(p.pattern), '.', 1)
           OPERATOR(pg_catalog.=) ANY (ARRAY['*', n.nspname::text])
       AND pg_catalog.split_part(pg_catalog.btrim(p.pattern), '.', 2)
           OPERATOR(pg_catalog.=) ANY (ARRAY['*', c.relname::text]))
$$;

-- check_setup: also the tables whose row-level security dblogd's role would not bypass
CREATE OR REPLACE FUNCTION check_setup(
    OUT check_name text, OUT ok boolean, OUT detail text)
RETURNS SETOF record
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT 'wal_level', current_setting('wal_level') = 'logical',
         'wal_level is ' || current_setting('wal_level')
         || CASE WHEN current_setting('wal_level') = 'logical' THEN ''
                 ELSE '; set wal_level = logical and restart the server' END
  UNION ALL
  SELECT 'output_plugin_libraries',
         current_setting('output_plugin_libraries', true) IS NULL
         OR 'dblog' = ANY (string_to_array(replace(
              current_setting('output_plugin_libraries', true), ' ', ''), ',')),
         CASE WHEN current_setting('output_plugin_libraries', true) IS NULL
              THEN 'this server has no output_plugin_libraries setting: any plugin may be used'
              ELSE 'output_plugin_libraries is ''' || current_setting('output_plugin_libraries', true)
                   || ''''
                   || CASE WHEN 'dblog' = ANY (string_to_array(replace(
                             current_setting('output_plugin_libraries', true), ' ', ''), ','))
                           THEN ''
                           ELSE '; add dblog to it and reload (SELECT pg_reload_conf())' END
         END
  UNION ALL
  SELECT 'max_replication_slots',
         (SELECT count(*) FROM pg_replication_slots) < current_setting('max_replication_slots')::int,
         (SELECT count(*) FROM pg_replication_slots) || ' of '
         || current_setting('max_replication_slots') || ' replication slots in use'
  UNION ALL
  SELECT 'max_wal_senders',
         (SELECT count(*) FROM pg_stat_replication) < current_setting('max_wal_senders')::int,
         (SELECT count(*) FROM pg_stat_replication) || ' of '
         || current_setting('max_wal_senders') || ' WAL senders in use'
  UNION ALL
  SELECT 'max_slot_wal_keep_size',
         current_setting('max_slot_wal_keep_size') <> '-1',
         CASE WHEN current_setting('max_slot_wal_keep_size') = '-1'
              THEN 'unlimited: a stalled consumer can fill the disk with WAL; consider a limit'
              ELSE 'slots may retain at most ' || current_setting('max_slot_wal_keep_size') END
  UNION ALL
  -- dblogd reads with row_security = off: a table whose policies would hide rows from its role
  -- is refused (an error), never copied in part
  SELECT 'row_level_security', s.tables IS NULL,
         CASE WHEN s.tables IS NULL
              THEN 'no table with row-level security hides rows from a replication role'
              ELSE 'row-level security hides rows of ' || s.tables || ' from replication roles '
                   || s.roles || ': dblogd refuses to read them; ALTER ROLE <dblogd''s role> '
                   || 'BYPASSRLS, or leave these tables out of its scope' END
    FROM (SELECT string_agg(DISTINCT format('%I.%I', n.nspname, c.relname), ', ') AS tables,
                 string_agg(DISTINCT quote_ident(r.rolname), ', ') AS roles
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
                 pg_roles r
           WHERE c.relrowsecurity AND c.relkind IN ('r', 'p')
             AND r.rolreplication AND r.rolcanlogin AND NOT r.rolsuper AND NOT r.rolbypassrls
             AND (c.relforcerowsecurity OR NOT pg_has_role(r.oid, c.relowner, 'USAGE'))) s
$$;

-- ---------------------------------------------------------------------------------------
-- Requests: the privileged part checks who asks and what, and inserts; it casts nothing.
-- The key values are checked by _check_key_values, which runs as the caller.
-- ---------------------------------------------------------------------------------------

DROP FUNCTION repair(regclass, text);
DROP FUNCTION repair_range(regclass, jsonb, jsonb, text);
DROP FUNCTION repair_keys(regclass, jsonb, text);
DROP FUNCTION _enqueue(regclass, text, text, jsonb, jsonb, jsonb);

-- Every key object of a request: the range's bounds and the list's elements.
CREATE FUNCTION _key_objects(from_key jsonb, to_key jsonb, keys jsonb) RETURNS SETOF jsonb
LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT o FROM pg_catalog.unnest(ARRAY[from_key, to_key]) AS o WHERE o IS NOT NULL
  UNION ALL
  SELECT e FROM pg_catalog.jsonb_array_elements(
                  CASE WHEN pg_catalog.jsonb_typeof(keys) OPERATOR(pg_catalog.=) 'array'
                       THEN keys END) AS e
$$;

-- Validates a request (who may ask, which table, the keys' shape) and queues it unless
-- dry_run. Runs as the extension's owner: nothing in here may call user-definable code, so it
-- reads catalogs and jsonb only, with every operator qualified, and casts no key value.
CREATE FUNCTION _enqueue(tbl regclass, kind text, consumer text,
                         from_key jsonb, to_key jsonb, keys jsonb, dry_run boolean)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  caller name := session_user;
  rel record;
  key_cols text[];
  key_types text[];
  obj jsonb;
  col text;
  i int;
  id bigint;
BEGIN
  IF tbl IS NULL THEN
    RAISE EXCEPTION 'dblog: table must not be NULL' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  SELECT c.relkind, c.relpersistence, c.relowner, c.relnamespace INTO rel
    FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) tbl;
  IF NOT (EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                   WHERE r.rolname OPERATOR(pg_catalog.=) caller AND r.rolsuper)
          OR pg_catalog.pg_has_role(caller, rel.relowner, 'USAGE')
          OR pg_catalog.pg_has_role(caller, 'dblog_operator', 'USAGE')) THEN
    RAISE EXCEPTION 'dblog: permission denied to request a repair of table %', tbl
      USING ERRCODE = 'insufficient_privilege',
            HINT = 'Only the table''s owner, a superuser or members of dblog_operator may.';
  END IF;
  IF rel.relkind OPERATOR(pg_catalog.=) 'p' THEN
    RAISE EXCEPTION 'dblog: % is a partitioned table', tbl
      USING ERRCODE = 'wrong_object_type',
            HINT = 'Its rows live in, and are logged for, its partitions: repair those.';
  END IF;
  IF rel.relkind OPERATOR(pg_catalog.<>) 'r' THEN
    RAISE EXCEPTION 'dblog: % is not a table', tbl USING ERRCODE = 'wrong_object_type';
  END IF;
  IF rel.relnamespace OPERATOR(pg_catalog.=) (SELECT e.extnamespace FROM pg_catalog.pg_extension e
                                               WHERE e.extname OPERATOR(pg_catalog.=) 'dblog') THEN
    RAISE EXCEPTION 'dblog: % is dblog''s own bookkeeping, not user data', tbl
      USING ERRCODE = 'wrong_object_type';
  END IF;
  IF rel.relnamespace OPERATOR(pg_catalog.=) ANY (ARRAY['pg_catalog'::regnamespace,
                                                        'information_schema'::regnamespace,
                                                        'pg_toast'::regnamespace]) THEN
    RAISE EXCEPTION 'dblog: % is a system catalog', tbl USING ERRCODE = 'wrong_object_type';
  END IF;
  IF rel.relpersistence OPERATOR(pg_catalog.=) 't' THEN
    RAISE EXCEPTION 'dblog: % is a temporary table', tbl
      USING ERRCODE = 'wrong_object_type',
            HINT = 'Temporary tables are not logged and no other session can read them.';
  END IF;
  IF rel.relpersistence OPERATOR(pg_catalog.=) 'u' THEN
    RAISE EXCEPTION 'dblog: % is an unlogged table', tbl
      USING ERRCODE = 'wrong_object_type',
            HINT = 'Its changes are not in the WAL, so dblog never streams it.';
  END IF;

  SELECT k.key_columns, k.key_types INTO key_cols, key_types FROM dblog._identity_key(tbl) AS k;
  IF key_cols IS NULL THEN
    RAISE EXCEPTION 'dblog: table % has no primary key or replica identity index', tbl
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;
  FOR i IN 1 .. pg_catalog.array_length(key_cols, 1) LOOP
    IF key_types[i] IS NULL THEN
      RAISE EXCEPTION 'dblog: key column % of % has a type that contains a domain', key_cols[i], tbl
        USING ERRCODE = 'feature_not_supported',
              HINT = 'dblog compares keys without running a domain''s checks, which it cannot '
                     'do for a composite or range type with a domain inside.';
    END IF;
  END LOOP;

  IF consumer IS NOT NULL THEN
    IF NOT EXISTS (SELECT 1 FROM dblog.consumers c WHERE c.name OPERATOR(pg_catalog.=) consumer) THEN
      RAISE EXCEPTION 'dblog: unknown consumer "%"', consumer
        USING ERRCODE = 'undefined_object',
              HINT = 'Consumers are known once they connected to dblogd; see dblog.consumers.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM dblog.consumers c
                    WHERE c.name OPERATOR(pg_catalog.=) consumer
                      AND dblog._scope_holds(c.scope, tbl)) THEN
      RAISE EXCEPTION 'dblog: table % is not in the scope of consumer "%"', tbl, consumer
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
  ELSIF NOT EXISTS (SELECT 1 FROM dblog.consumers c WHERE dblog._scope_holds(c.scope, tbl)) THEN
    RAISE EXCEPTION 'dblog: no consumer''s scope holds table %', tbl
      USING ERRCODE = 'invalid_parameter_value';
  END IF;

  -- every key object: exactly the key columns, none of them null (the values' types are
  -- checked by _check_key_values, as the caller)
  FOR obj IN
    SELECT k FROM dblog._key_objects(from_key, to_key, keys) AS k
  LOOP
    IF pg_catalog.jsonb_typeof(obj) OPERATOR(pg_catalog.<>) 'object' THEN
      RAISE EXCEPTION 'dblog: a key must be a JSON object of the key columns, not %', obj
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- both sides as quoted names, sorted the same way
    IF (SELECT pg_catalog.array_agg(q ORDER BY q COLLATE "C")
          FROM (SELECT pg_catalog.quote_ident(k) AS q
                  FROM pg_catalog.jsonb_object_keys(obj) AS k) s)
       IS DISTINCT FROM
       (SELECT pg_catalog.array_agg(c ORDER BY c COLLATE "C") FROM pg_catalog.unnest(key_cols) AS c) THEN
      RAISE EXCEPTION 'dblog: key % must name exactly the key columns of %: %',
        obj, tbl, pg_catalog.array_to_string(key_cols, ', ')
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 1 .. pg_catalog.array_length(key_cols, 1) LOOP
      col := key_cols[i];
      IF pg_catalog.jsonb_typeof(obj OPERATOR(pg_catalog.->)
           (SELECT k FROM pg_catalog.jsonb_object_keys(obj) AS k
             WHERE pg_catalog.quote_ident(k) OPERATOR(pg_catalog.=) col))
         OPERATOR(pg_catalog.=) 'null' THEN
        RAISE EXCEPTION 'dblog: key % has a null value for %', obj, col
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
    END LOOP;
  END LOOP;
  IF kind OPERATOR(pg_catalog.=) 'keys'
     AND (pg_catalog.jsonb_typeof(keys) IS DISTINCT FROM 'array'
          OR pg_catalog.jsonb_array_length(keys) OPERATOR(pg_catalog.=) 0) THEN
    RAISE EXCEPTION 'dblog: keys must be a non-empty JSON array of key objects'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF dry_run THEN
    RETURN NULL;
  END IF;

  INSERT INTO dblog.request_queue
         (table_oid, table_name, kind, consumer, from_key, to_key, keys, key_columns, key_types)
  VALUES (tbl, tbl::text, kind, consumer, from_key, to_key, keys, key_cols, key_types)
  RETURNING request_queue.id INTO id;
  RETURN id;
END
$$;

-- Every key value must be valid for its column's (base) type: cast as the caller, so whatever
-- a cast runs, runs with the caller's own privileges.
CREATE FUNCTION _check_key_values(tbl regclass, from_key jsonb, to_key jsonb, keys jsonb)
RETURNS void
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  key_cols text[];
  key_types text[];
  obj jsonb;
  i int;
BEGIN
  SELECT k.key_columns, k.key_types INTO key_cols, key_types FROM dblog._identity_key(tbl) AS k;
  FOR obj IN
    SELECT k FROM dblog._key_objects(from_key, to_key, keys) AS k
  LOOP
    FOR i IN 1 .. pg_catalog.array_length(key_cols, 1) LOOP
      BEGIN
        EXECUTE pg_catalog.format('SELECT %L::%s',
                                  obj OPERATOR(pg_catalog.->>)
                                    (SELECT k FROM pg_catalog.jsonb_object_keys(obj) AS k
                                      WHERE pg_catalog.quote_ident(k) OPERATOR(pg_catalog.=) key_cols[i]),
                                  key_types[i]);
      EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'dblog: key %: value for % is not a valid %', obj, key_cols[i], key_types[i]
          USING ERRCODE = 'invalid_parameter_value';
      END;
    END LOOP;
  END LOOP;
END
$$;

GRANT EXECUTE ON FUNCTION _enqueue(regclass, text, text, jsonb, jsonb, jsonb, boolean) TO PUBLIC;

-- The callers' functions: the shape and permission checks (privileged, no user code), the
-- values (as the caller), then the insert (privileged).
CREATE FUNCTION _request(tbl regclass, kind text, consumer text,
                         from_key jsonb, to_key jsonb, keys jsonb) RETURNS bigint
LANGUAGE plpgsql SECURITY INVOKER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
  PERFORM dblog._enqueue(tbl, kind, consumer, from_key, to_key, keys, true);
  PERFORM dblog._check_key_values(tbl, from_key, to_key, keys);
  RETURN dblog._enqueue(tbl, kind, consumer, from_key, to_key, keys, false);
END
$$;

CREATE FUNCTION repair(tbl regclass, consumer text DEFAULT NULL) RETURNS bigint
LANGUAGE sql SECURITY INVOKER SET search_path = pg_catalog, pg_temp
AS $$ SELECT dblog._request(tbl, 'table', consumer, NULL, NULL, NULL) $$;

CREATE FUNCTION repair_range(tbl regclass, from_key jsonb, to_key jsonb,
                             consumer text DEFAULT NULL) RETURNS bigint
LANGUAGE sql SECURITY INVOKER SET search_path = pg_catalog, pg_temp
AS $$ SELECT dblog._request(tbl, 'range', consumer, from_key, to_key, NULL) $$;

CREATE FUNCTION repair_keys(tbl regclass, keys jsonb, consumer text DEFAULT NULL) RETURNS bigint
LANGUAGE sql SECURITY INVOKER SET search_path = pg_catalog, pg_temp
AS $$ SELECT dblog._request(tbl, 'keys', consumer, NULL, NULL, keys) $$;

COMMENT ON FUNCTION repair(regclass, text) IS 'Queue a repair of a whole table; returns its id';
COMMENT ON FUNCTION repair_range(regclass, jsonb, jsonb, text) IS
  'Queue a repair of the key range [from_key, to_key); NULL bounds are unbounded';
COMMENT ON FUNCTION repair_keys(regclass, jsonb, text) IS
  'Queue a repair of a JSON array of keys; absent keys are deleted downstream';

-- A request is shown to its requester, to roles that may read its table, and to those who
-- manage repairs; its keys are row data of the table.
CREATE OR REPLACE VIEW requests WITH (security_barrier) AS
SELECT q.id, q.table_name, q.kind, q.consumer,
       CASE WHEN q.cancelled THEN 'cancelled'
            WHEN count(p.request_id) = 0 THEN 'queued'
            WHEN bool_or(p.state = 'failed') THEN 'failed'
            WHEN bool_and(p.state = 'done') THEN 'done'
            ELSE 'running' END AS state,
       coalesce(sum(p.chunks_done), 0)::bigint AS chunks_done,
       coalesce(sum(p.rows_emitted), 0)::bigint AS rows_emitted,
       coalesce(sum(p.deletes_emitted), 0)::bigint AS deletes_emitted,
       q.requested_at, min(p.started_at) AS started_at,
       CASE WHEN count(p.request_id) > 0 AND bool_and(p.finished_at IS NOT NULL)
            THEN max(p.finished_at) END AS finished_at,
       string_agg(p.consumer || ': ' || p.error, '; ') FILTER (WHERE p.error IS NOT NULL) AS error,
       q.from_key, q.to_key, q.keys, q.requested_by
  FROM request_queue q LEFT JOIN request_progress p ON p.request_id = q.id
 WHERE q.requested_by = session_user
    OR pg_catalog.pg_has_role('dblog_operator', 'USAGE')
    OR coalesce(pg_catalog.has_table_privilege(q.table_oid, 'SELECT'), false)
 GROUP BY q.id;
