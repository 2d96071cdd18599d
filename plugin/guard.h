/*-------------------------------------------------------------------------
 *
 * guard.h
 *		  dblog._bind_relation(oid) and the parse-analysis hook that holds the
 *		  statements of its transaction to the bound tables (guard.c).
 *
 * IDENTIFICATION
 *		  plugin/guard.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBLOG_GUARD_H
#define DBLOG_GUARD_H

/* Installs the hook; called once, from the library's _PG_init. */
extern void dblog_guard_init(void);

/* A domain anywhere in the type (itself, an array's element, a field, a range's bound). */
extern bool dblog_type_contains_domain(Oid typid);

#endif							/* DBLOG_GUARD_H */
