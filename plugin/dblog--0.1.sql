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
