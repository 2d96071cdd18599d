/* plugin/dblog--0.2--0.3.sql: upgrade of the dblog extension from 0.2 to 0.3.
 *
 * 0.3: the repair API reads a consumer's scope with the matcher the plugin and dblogd share
 * (plugin/scope_match.c; the grammar is docs/operations.md, "Consumers and scopes"): * anywhere
 * in a name (public.order_*), "Quoted" names, exclusions (public.*,!public.audit_log). 0.2 split
 * the string itself, so a repair of an excluded table was accepted, and a quoted name held
 * nothing.
 * 0.3 also adds dblog.consumer_status: each consumer with the state of its slot, so that a slot
 * PostgreSQL invalidated (max_slot_wal_keep_size) shows as 'lost' with what to do.
 *
 * A new version of the extension only ever adds a script like this one: shipped scripts are
 * never edited (docs/operations.md, "Upgrading").
 */

\echo Use "ALTER EXTENSION dblog UPDATE TO '0.3'" to load this file. \quit

-- Whether a scope (as dblogd writes dblog.consumers.scope: unquoted names as spelled) holds
-- schema_name.table_name. A scope that does not parse is an error saying where and why.
CREATE FUNCTION _scope_match(scope text, schema_name name, table_name name) RETURNS boolean
AS 'MODULE_PATHNAME', 'dblog_scope_match'
LANGUAGE C STRICT IMMUTABLE PARALLEL SAFE;

CREATE OR REPLACE FUNCTION _scope_holds(scope text, tbl regclass) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
AS $$
  SELECT EXISTS (
    SELECT 1
      FROM pg_catalog.pg_class c
           JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
     WHERE c.oid OPERATOR(pg_catalog.=) tbl
       AND dblog._scope_match(scope, n.nspname, c.relname))
$$;

-- Each consumer dblogd registered, with its slot as PostgreSQL sees it: slot_state is 'active'
-- (a dblogd is streaming it), 'inactive', 'unreserved' (behind by more than
-- max_slot_wal_keep_size: invalidated at the next checkpoint unless it catches up), 'lost'
-- (invalidated: its unacknowledged changes are gone) or 'missing' (dropped: the next connection
-- bootstraps); action says what to do about it.
CREATE VIEW consumer_status AS
  SELECT c.name, c.slot_name, c.bootstrap_state, s.confirmed_flush_lsn,
         pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.confirmed_flush_lsn)
           AS behind_bytes,
         s.wal_status,
         CASE WHEN s.slot_name IS NULL THEN 'missing'
              WHEN s.wal_status = 'lost' THEN 'lost'
              WHEN s.wal_status = 'unreserved' THEN 'unreserved'
              WHEN s.active THEN 'active'
              ELSE 'inactive' END AS slot_state,
         CASE WHEN s.slot_name IS NULL
                THEN 'none: the next connection creates the slot and bootstraps'
              WHEN s.wal_status = 'lost'
                THEN pg_catalog.format('the slot was invalidated (max_slot_wal_keep_size): SELECT pg_drop_replication_slot(%L); the next connection bootstraps again (restarted)', c.slot_name)
              WHEN s.wal_status = 'unreserved'
                THEN 'the consumer must catch up (acknowledge) before the next checkpoint invalidates the slot'
              ELSE 'none' END AS action
    FROM dblog.consumers c
         LEFT JOIN pg_catalog.pg_replication_slots s
           ON s.slot_name OPERATOR(pg_catalog.=) c.slot_name
          AND s.database OPERATOR(pg_catalog.=) pg_catalog.current_database();
REVOKE ALL ON consumer_status FROM PUBLIC;
GRANT SELECT ON consumer_status TO dblog_operator;
