/* plugin/dblog--0.3--0.4.sql: upgrade of the dblog extension from 0.3 to 0.4.
 *
 * 0.4: an event trigger tells dblogd of the tables a DDL moves: ALTER TABLE ... RENAME TO,
 * ALTER TABLE ... SET SCHEMA, ALTER SCHEMA ... RENAME TO and ALTER TABLE ... SET LOGGED write,
 * in the DDL's transaction, one transactional logical message with prefix 'dblog.ddl' per
 * permanent ordinary table (plugin/ddl_trigger.c), so that a table entering a consumer's scope this way is copied
 * (docs/operations.md, "Schema changes"). The function runs as the role that ran the DDL, with
 * search_path pinned; it never fails the DDL (an error inside becomes a WARNING).
 *
 * A new version of the extension only ever adds a script like this one: shipped scripts are
 * never edited (docs/operations.md, "Upgrading").
 */

\echo Use "ALTER EXTENSION dblog UPDATE TO '0.4'" to load this file. \quit

CREATE FUNCTION _ddl_trigger() RETURNS event_trigger
AS 'MODULE_PATHNAME', 'dblog_ddl_trigger'
LANGUAGE C SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION _ddl_trigger() FROM PUBLIC;

CREATE EVENT TRIGGER dblog_ddl ON ddl_command_end
  WHEN TAG IN ('ALTER TABLE', 'ALTER SCHEMA')
  EXECUTE FUNCTION _ddl_trigger();
