/* plugin/dblog--0.1.sql: SQL objects of the dblog extension. */

\echo Use "CREATE EXTENSION dblog" to load this file. \quit

-- The row encoder of the output plugin, for the copy path: the serialized
-- dblog.v1.Row of a row, byte-identical to what the plugin writes for it.
CREATE FUNCTION encode_row(record)
RETURNS bytea
AS 'MODULE_PATHNAME', 'dblog_encode_row'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

COMMENT ON FUNCTION encode_row(record) IS
  'dblog.v1.Row encoding of a row, byte-identical to the output plugin''s';

-- The plugin's description of a table (the Relation event it sends), for the copy path:
-- the serialized dblog.v1.Relation. Empty key_columns mean the table has no identity key.
CREATE FUNCTION relation_info(regclass)
RETURNS bytea
AS 'MODULE_PATHNAME', 'dblog_relation_info'
LANGUAGE C STRICT STABLE PARALLEL SAFE;

-- dblogd's bookkeeping of consumers: which slot, and whether its bootstrap finished. A
-- bootstrap counts as done only once the consumer acknowledged its end, so an interrupted
-- one is never mistaken for a finished one. Not user data: the plugin never emits it.
CREATE TABLE consumers (
    name text PRIMARY KEY,
    slot_name text NOT NULL,
    scope text NOT NULL,
    bootstrap_state text NOT NULL DEFAULT 'pending'
        CHECK (bootstrap_state IN ('pending', 'copying', 'done', 'skipped')),
    consistent_point pg_lsn,
    rows_copied bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    bootstrap_started_at timestamptz,
    bootstrap_done_at timestamptz
);
SELECT pg_catalog.pg_extension_config_dump('consumers', '');

-- What a server needs before dblog can run; one row per check.
CREATE FUNCTION check_setup(
    OUT check_name text, OUT ok boolean, OUT detail text)
RETURNS SETOF record
LANGUAGE sql STABLE
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
$$;

COMMENT ON FUNCTION check_setup() IS
  'Checks the server settings dblog depends on; one row per check';

-- ---------------------------------------------------------------------------------------
-- Repairs: DBLog watermark windows requested from SQL (docs/repairs.md).
--
-- A request is a row of request_queue. Its INSERT reaches dblogd through the WAL, in commit
-- order, decoded by the plugin as a control event (option control=on), so a rolled-back request
-- never runs and dblogd never polls. dblogd records each consumer's progress in
-- request_progress; dblog.requests shows both.
-- ---------------------------------------------------------------------------------------

DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'dblog_operator') THEN
    CREATE ROLE dblog_operator NOLOGIN;
  END IF;
END
$$;

CREATE TABLE request_queue (
    id bigserial PRIMARY KEY,
    table_oid oid NOT NULL,
    table_name text NOT NULL,
    kind text NOT NULL CHECK (kind IN ('table', 'range', 'keys')),
    consumer text,
    from_key jsonb,
    to_key jsonb,
    keys jsonb,
    key_columns text[] NOT NULL,
    key_types text[] NOT NULL,
    cancelled boolean NOT NULL DEFAULT false,
    requested_at timestamptz NOT NULL DEFAULT now(),
    requested_by name NOT NULL DEFAULT session_user
);

CREATE TABLE request_progress (
    -- no foreign key: dblogd records progress for a request it decoded from the log, whose
    -- row can still be invisible to other snapshots for a moment (WAL order is not visibility
    -- order), and a foreign key check would fail then
    request_id bigint NOT NULL,
    consumer text NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'done', 'failed', 'cancelled')),
    chunks_done integer NOT NULL DEFAULT 0,
    rows_emitted bigint NOT NULL DEFAULT 0,
    deletes_emitted bigint NOT NULL DEFAULT 0,
    resume_key jsonb,             -- key values (as text) of the last acknowledged chunk's end
    keys_done integer NOT NULL DEFAULT 0,  -- key-list requests: keys covered
    started_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    error text,
    PRIMARY KEY (request_id, consumer)
);

SELECT pg_catalog.pg_extension_config_dump('request_queue', '');
SELECT pg_catalog.pg_extension_config_dump('request_progress', '');

CREATE VIEW requests AS
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
 GROUP BY q.id;

GRANT USAGE ON SCHEMA dblog TO PUBLIC;
GRANT SELECT ON requests TO PUBLIC;
REVOKE ALL ON request_queue, request_progress, consumers FROM PUBLIC;

-- Does a consumer's scope (comma-separated schema.table patterns, * for any part) hold tbl?
CREATE FUNCTION _scope_holds(scope text, tbl regclass) RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (
    SELECT 1
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace,
           unnest(string_to_array(scope, ',')) AS p(pattern)
     WHERE c.oid = tbl
       AND split_part(trim(p.pattern), '.', 1) IN ('*', n.nspname)
       AND split_part(trim(p.pattern), '.', 2) IN ('*', c.relname))
$$;

-- The identity key of a table (primary key, or the replica identity index when the table uses
-- REPLICA IDENTITY USING INDEX): quoted column names and their types, in key order. NULLs when
-- it has none.
CREATE FUNCTION _identity_key(tbl regclass, OUT key_columns text[], OUT key_types text[])
LANGUAGE sql STABLE AS $$
  SELECT array_agg(quote_ident(a.attname) ORDER BY k.ord),
         array_agg(format_type(a.atttypid, a.atttypmod) ORDER BY k.ord)
    FROM pg_catalog.pg_class c, pg_catalog.pg_index x,
         unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord), pg_catalog.pg_attribute a
   WHERE c.oid = tbl AND x.indrelid = tbl AND a.attrelid = tbl AND a.attnum = k.attnum
     AND k.ord <= x.indnkeyatts
     AND CASE WHEN c.relreplident = 'i' THEN x.indisreplident
              WHEN c.relreplident IN ('d', 'f') THEN x.indisprimary
              ELSE false END
$$;

-- Validates a request and queues it; the SQL-facing functions below call it.
CREATE FUNCTION _enqueue(tbl regclass, kind text, consumer text,
                         from_key jsonb, to_key jsonb, keys jsonb)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  caller name := session_user;
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
  IF NOT (EXISTS (SELECT 1 FROM pg_roles WHERE rolname = caller AND rolsuper)
          OR pg_has_role(caller, (SELECT relowner FROM pg_class WHERE oid = tbl), 'USAGE')
          OR pg_has_role(caller, 'dblog_operator', 'USAGE')) THEN
    RAISE EXCEPTION 'dblog: permission denied to request a repair of table %', tbl
      USING ERRCODE = 'insufficient_privilege',
            HINT = 'Only the table''s owner, a superuser or members of dblog_operator may.';
  END IF;
  IF (SELECT relkind FROM pg_class WHERE oid = tbl) = 'p' THEN
    RAISE EXCEPTION 'dblog: % is a partitioned table', tbl
      USING ERRCODE = 'wrong_object_type',
            HINT = 'Its rows live in, and are logged for, its partitions: repair those.';
  END IF;
  IF (SELECT relkind FROM pg_class WHERE oid = tbl) <> 'r' THEN
    RAISE EXCEPTION 'dblog: % is not a table', tbl USING ERRCODE = 'wrong_object_type';
  END IF;

  SELECT k.key_columns, k.key_types INTO key_cols, key_types FROM dblog._identity_key(tbl) AS k;
  IF key_cols IS NULL THEN
    RAISE EXCEPTION 'dblog: table % has no primary key or replica identity index', tbl
      USING ERRCODE = 'object_not_in_prerequisite_state';
  END IF;

  IF consumer IS NOT NULL THEN
    IF NOT EXISTS (SELECT 1 FROM dblog.consumers c WHERE c.name = consumer) THEN
      RAISE EXCEPTION 'dblog: unknown consumer "%"', consumer
        USING ERRCODE = 'undefined_object',
              HINT = 'Consumers are known once they connected to dblogd; see dblog.consumers.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM dblog.consumers c
                    WHERE c.name = consumer AND dblog._scope_holds(c.scope, tbl)) THEN
      RAISE EXCEPTION 'dblog: table % is not in the scope of consumer "%"', tbl, consumer
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
  ELSIF NOT EXISTS (SELECT 1 FROM dblog.consumers c WHERE dblog._scope_holds(c.scope, tbl)) THEN
    RAISE EXCEPTION 'dblog: no consumer''s scope holds table %', tbl
      USING ERRCODE = 'invalid_parameter_value';
  END IF;

  -- every key object: exactly the key columns, each value valid for its column's type
  FOR obj IN
    SELECT o FROM unnest(ARRAY[from_key, to_key]) AS o WHERE o IS NOT NULL
    UNION ALL
    SELECT e FROM jsonb_array_elements(CASE WHEN jsonb_typeof(keys) = 'array' THEN keys END) AS e
  LOOP
    IF jsonb_typeof(obj) <> 'object' THEN
      RAISE EXCEPTION 'dblog: a key must be a JSON object of the key columns, not %', obj
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (SELECT array_agg(quote_ident(k) ORDER BY k) FROM jsonb_object_keys(obj) AS k)
       IS DISTINCT FROM (SELECT array_agg(c ORDER BY c) FROM unnest(key_cols) AS c) THEN
      RAISE EXCEPTION 'dblog: key % must name exactly the key columns of %: %',
        obj, tbl, array_to_string(key_cols, ', ')
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR i IN 1 .. array_length(key_cols, 1) LOOP
      col := key_cols[i];
      IF jsonb_typeof(obj -> (SELECT k FROM jsonb_object_keys(obj) AS k
                               WHERE quote_ident(k) = col)) = 'null' THEN
        RAISE EXCEPTION 'dblog: key % has a null value for %', obj, col
          USING ERRCODE = 'invalid_parameter_value';
      END IF;
      BEGIN
        EXECUTE format('SELECT %L::%s',
                       obj ->> (SELECT k FROM jsonb_object_keys(obj) AS k
                                 WHERE quote_ident(k) = col),
                       key_types[i]);
      EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'dblog: key %: value for % is not a valid %', obj, col, key_types[i]
          USING ERRCODE = 'invalid_parameter_value';
      END;
    END LOOP;
  END LOOP;
  IF kind = 'keys' AND (jsonb_typeof(keys) IS DISTINCT FROM 'array'
                        OR jsonb_array_length(keys) = 0) THEN
    RAISE EXCEPTION 'dblog: keys must be a non-empty JSON array of key objects'
      USING ERRCODE = 'invalid_parameter_value';
  END IF;

  INSERT INTO dblog.request_queue
         (table_oid, table_name, kind, consumer, from_key, to_key, keys, key_columns, key_types)
  VALUES (tbl, tbl::text, kind, consumer, from_key, to_key, keys, key_cols, key_types)
  RETURNING request_queue.id INTO id;
  RETURN id;
END
$$;

REVOKE ALL ON FUNCTION _enqueue(regclass, text, text, jsonb, jsonb, jsonb) FROM PUBLIC;

-- The callers' functions: SECURITY DEFINER so they may queue, checking the caller themselves.
CREATE FUNCTION repair(tbl regclass, consumer text DEFAULT NULL) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT dblog._enqueue(tbl, 'table', consumer, NULL, NULL, NULL) $$;

CREATE FUNCTION repair_range(tbl regclass, from_key jsonb, to_key jsonb,
                             consumer text DEFAULT NULL) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT dblog._enqueue(tbl, 'range', consumer, from_key, to_key, NULL) $$;

CREATE FUNCTION repair_keys(tbl regclass, keys jsonb, consumer text DEFAULT NULL) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT dblog._enqueue(tbl, 'keys', consumer, NULL, NULL, keys) $$;

CREATE FUNCTION cancel(request_id bigint) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
  caller name := session_user;
  r dblog.request_queue;
BEGIN
  SELECT * INTO r FROM dblog.request_queue WHERE id = request_id;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'dblog: no repair request %', request_id USING ERRCODE = 'undefined_object';
  END IF;
  IF NOT (r.requested_by = caller
          OR EXISTS (SELECT 1 FROM pg_roles WHERE rolname = caller AND rolsuper)
          OR pg_has_role(caller, 'dblog_operator', 'USAGE')) THEN
    RAISE EXCEPTION 'dblog: permission denied to cancel repair request %', request_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF r.cancelled THEN
    RETURN false;
  END IF;
  UPDATE dblog.request_queue SET cancelled = true WHERE id = request_id;
  RETURN true;
END
$$;

COMMENT ON FUNCTION repair(regclass, text) IS 'Queue a repair of a whole table; returns its id';
COMMENT ON FUNCTION repair_range(regclass, jsonb, jsonb, text) IS
  'Queue a repair of the key range [from_key, to_key); NULL bounds are unbounded';
COMMENT ON FUNCTION repair_keys(regclass, jsonb, text) IS
  'Queue a repair of a JSON array of keys; absent keys are deleted downstream';
COMMENT ON FUNCTION cancel(bigint) IS 'Cancel a repair request';
