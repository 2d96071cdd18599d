/*-------------------------------------------------------------------------
 *
 * scope_sql.c
 *		  dblog._scope_match(scope, schema, table): the scope matcher
 *		  (scope_match.c) for SQL, as dblogd reads a consumer's scope
 *		  (unquoted names as spelled); dblog._scope_holds() calls it for the
 *		  repair API's scope checks.
 *
 * IDENTIFICATION
 *		  plugin/scope_sql.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "scope_match.h"

PG_FUNCTION_INFO_V1(dblog_scope_match);

/* The last scope parsed by one call site (fn_extra), freed with fn_mcxt. */
typedef struct CachedScope
{
	char	   *text;
	DblogScope *scope;
	MemoryContextCallback free_cb;
} CachedScope;

static void
free_cached_scope(void *arg)
{
	dblog_scope_free(((CachedScope *) arg)->scope);
}

static const DblogScope *
cached_scope(FunctionCallInfo fcinfo, const char *scope_text)
{
	CachedScope *cache = fcinfo->flinfo->fn_extra;
	char		err[256];
	DblogScope *scope;

	if (cache != NULL && strcmp(cache->text, scope_text) == 0)
		return cache->scope;
	scope = dblog_scope_parse(scope_text, DBLOG_SCOPE_KEEP_CASE, err, sizeof(err));
	if (scope == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid dblog scope \"%s\"", scope_text),
				 errdetail("%s", err),
				 errhint("A scope is comma-separated schema.table patterns: * anywhere in a name, \"Quoted\" names exact, !schema.table to exclude.")));
	if (cache == NULL)
	{
		cache = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(CachedScope));
		cache->free_cb.func = free_cached_scope;
		cache->free_cb.arg = cache;
		MemoryContextRegisterResetCallback(fcinfo->flinfo->fn_mcxt, &cache->free_cb);
		fcinfo->flinfo->fn_extra = cache;
	}
	else
	{
		dblog_scope_free(cache->scope);
		pfree(cache->text);
	}
	cache->scope = scope;
	cache->text = MemoryContextStrdup(fcinfo->flinfo->fn_mcxt, scope_text);
	return scope;
}

/* _scope_match(scope text, schema_name name, table_name name) RETURNS boolean */
Datum
dblog_scope_match(PG_FUNCTION_ARGS)
{
	char	   *scope_text = text_to_cstring(PG_GETARG_TEXT_PP(0));
	Name		schema = PG_GETARG_NAME(1);
	Name		table = PG_GETARG_NAME(2);

	PG_RETURN_BOOL(dblog_scope_holds(cached_scope(fcinfo, scope_text),
									 NameStr(*schema), NameStr(*table)));
}
