/*-------------------------------------------------------------------------
 *
 * relation.h
 *		  What the dblog writers know about a relation (RelInfo): its name,
 *		  replica identity, row plan and identity key, read from the catalog.
 *
 * The output plugin builds one per relation and caches it (dblog.c);
 * dblog.relation_info() builds one for the copy path.
 *
 * IDENTIFICATION
 *		  plugin/relation.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBLOG_RELATION_H
#define DBLOG_RELATION_H

#include "utils/rel.h"

#include "encoder.h"

typedef struct RelInfo
{
	Oid			relid;
	char	   *schema;
	char	   *name;
	char		replident;		/* pg_class.relreplident */
	RowPlan    *plan;			/* keys filled in; nkeys == 0: keyless */
} RelInfo;

/* Reads the catalog; everything it allocates is in mcxt. */
extern void build_rel_info(Relation rel, RelInfo *info, MemoryContext mcxt);

#endif							/* DBLOG_RELATION_H */
