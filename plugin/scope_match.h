/*-------------------------------------------------------------------------
 *
 * scope_match.h
 *		  The one scope matcher: which tables a scope string holds.  Shared by
 *		  the output plugin (include_tables, exclude_tables), the SQL API
 *		  (dblog.scope_matches, dblog._scope_holds) and dblogd (--consumer,
 *		  --default-scope).  Plain C with no PostgreSQL dependency, so that
 *		  dblogd links the same object file (CMake target dblog_scope_match).
 *
 * Grammar (docs/operations.md, "Consumers and scopes"):
 *	 scope	   = pattern { "," pattern }
 *	 pattern   = [ "!" ] part "." part		("!" excludes)
 *	 part	   = { "*" | "\"" quoted "\"" | unquoted }+
 *	 "*" matches any run of characters (none included); a quoted run is
 *	 exact ("" is a quote; * inside quotes is literal); an unquoted run is
 *	 folded to lower case (ASCII letters, as PostgreSQL folds identifiers;
 *	 with DBLOG_SCOPE_KEEP_CASE matched as spelled, as dblogd always matched
 *	 its scopes) and ends at white space, '.', ',', '"' or '*'.  The
 *	 canonical text quotes every upper-case letter, so it means the same
 *	 with and without KEEP_CASE.  White space around parts,
 *	 dots, commas and '!' is ignored.  A table is in scope when some positive
 *	 pattern matches it and no exclusion does; the order does not matter.
 *
 * IDENTIFICATION
 *		  plugin/scope_match.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBLOG_SCOPE_MATCH_H
#define DBLOG_SCOPE_MATCH_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C"
{
#endif

typedef struct DblogScope DblogScope;

/* dblog_scope_parse flags */
#define DBLOG_SCOPE_NO_EXCLUSIONS	0x1 /* '!' is an error (exclude_tables) */
#define DBLOG_SCOPE_KEEP_CASE		0x2 /* unquoted names are matched as spelled,
										 * not folded (dblogd's scopes) */

/*
 * Parses `text`.  Returns the scope (free it with dblog_scope_free), or NULL
 * with a message in err (always NUL-terminated when errlen > 0): "at
 * character N: reason", N counting bytes from 1, or "out of memory".
 * A scope of exclusions only is an error (it would hold no table).
 */
extern DblogScope *dblog_scope_parse(const char *text, int flags, char *err, size_t errlen);

extern void dblog_scope_free(DblogScope *scope);

/* Some positive pattern matches schema.table and no exclusion does. */
extern bool dblog_scope_holds(const DblogScope *scope, const char *schema, const char *table);

/* Number of patterns, exclusions included. */
extern int	dblog_scope_size(const DblogScope *scope);

/*
 * The canonical text of pattern i (0 <= i < size), or of the whole scope
 * when i < 0 (patterns joined by ','), as snprintf writes it: returns the
 * length of the whole text, writes at most len - 1 bytes and a NUL.  Parsing
 * the canonical text gives the same scope.  Parts are written unquoted when
 * made of [a-z0-9_] and '*' only, literal runs are quoted otherwise.
 * Returns 0 (and writes "") when out of memory.
 */
extern size_t dblog_scope_format(const DblogScope *scope, int i, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif							/* DBLOG_SCOPE_MATCH_H */
