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
