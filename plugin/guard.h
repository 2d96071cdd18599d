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

#endif							/* DBLOG_GUARD_H */
