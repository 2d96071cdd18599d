/* plugin/dblog--0.2--0.3.sql: upgrade of the dblog extension from 0.2 to 0.3.
 *
 * 0.3: the repair API reads a consumer's scope with the matcher the plugin and dblogd share
 * (plugin/scope_match.c; the grammar is docs/operations.md, "Consumers and scopes"): * anywhere
 * in a name (public.order_*), "Quoted" names, exclusions (public.*,!public.audit_log). 0.2 split
 * the string itself, so a repair of an excluded table was accepted, and a quoted name held
 * nothing.
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
