/* plugin/dblog--0.4--0.5.sql: upgrade of the dblog extension from 0.4 to 0.5.
 *
 * 0.5: dblog._bind_relation(oid) binds the statements of a transaction to a table by its oid
 * (plugin/guard.c): dblogd calls it before every chunk of a repair and every COPY of a
 * bootstrap, so that a name it resolved earlier cannot make it read a view, another schema's
 * table or a type swapped in since (docs/operations.md, "Security model"). It needs SELECT on
 * the table, as reading it does.
 *
 * A new version of the extension only ever adds a script like this one: shipped scripts are
 * never edited (docs/operations.md, "Upgrading").
 */

\echo Use "ALTER EXTENSION dblog UPDATE TO '0.5'" to load this file. \quit

CREATE FUNCTION _bind_relation(relid oid) RETURNS text
AS 'MODULE_PATHNAME', 'dblog_bind_relation'
LANGUAGE C STRICT VOLATILE SET search_path = pg_catalog, pg_temp;

-- Requests dblog queues itself say why; a user's request has no reason.
ALTER TABLE request_queue ADD COLUMN reason text;

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
       q.from_key, q.to_key, q.keys, q.requested_by, q.reason
  FROM request_queue q LEFT JOIN request_progress p ON p.request_id = q.id
 WHERE q.requested_by = session_user
    OR pg_catalog.pg_has_role('dblog_operator', 'USAGE')
    OR coalesce(pg_catalog.has_table_privilege(q.table_oid, 'SELECT'), false)
 GROUP BY q.id;

-- The repair a DDL's rewrite of values needs: a whole-table request for every consumer (NULL)
-- when some consumer's scope holds the table and it has a key dblog can use; nothing otherwise.
-- Only the event trigger calls it (EXECUTE is the extension owner's alone): dblog._ddl_trigger
-- runs it as the extension's owner, with the table oids of the statement the trigger saw, in
-- the DDL's transaction. It calls no user-definable code.
CREATE FUNCTION _ddl_repair(tbl oid, reason text) RETURNS bigint
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
  INSERT INTO dblog.request_queue (table_oid, table_name, kind, key_columns, key_types, reason)
  SELECT tbl, tbl::pg_catalog.regclass::pg_catalog.text, 'table', k.key_columns, k.key_types,
         reason
    FROM dblog._identity_key(tbl::pg_catalog.regclass) AS k
   WHERE k.key_columns IS NOT NULL
     AND pg_catalog.array_position(k.key_types, NULL) IS NULL
     AND EXISTS (SELECT 1 FROM dblog.consumers c
                  WHERE dblog._scope_holds(c.scope, tbl::pg_catalog.regclass))
  RETURNING request_queue.id
$$;
REVOKE ALL ON FUNCTION _ddl_repair(oid, text) FROM PUBLIC;

-- ALTER TYPE .. RENAME VALUE changes how every row holding the label reads.
DROP EVENT TRIGGER dblog_ddl;
CREATE EVENT TRIGGER dblog_ddl ON ddl_command_end
  WHEN TAG IN ('ALTER TABLE', 'ALTER SCHEMA', 'ALTER TYPE')
  EXECUTE FUNCTION _ddl_trigger();
