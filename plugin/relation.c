/*-------------------------------------------------------------------------
 *
 * relation.c
 *		  Relation info for the dblog writers, from the catalog: the names,
 *		  the replica identity, the row plan and the identity key
 *		  (build_rel_info); and dblog.relation_info(regclass), the Relation
 *		  message the plugin sends, for the copy path.
 *
 * IDENTIFICATION
 *		  plugin/relation.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "fmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/relcache.h"

#include "messages.h"
#include "relation.h"

PG_FUNCTION_INFO_V1(dblog_relation_info);

/*
 * The identity key: the primary key, or the replica identity index when
 * REPLICA IDENTITY USING INDEX says the WAL carries that one instead.
 * Tables with neither, or with REPLICA IDENTITY NOTHING (deletes carry no
 * key), have none.  The index is read without a lock, as
 * RelationGetIdentityKeyBitmap does during decoding.
 */
static void
fill_identity_key(Relation relation, RowPlan *plan, MemoryContext mcxt)
{
	char		replident = relation->rd_rel->relreplident;
	Oid			indexoid = InvalidOid;
	Relation	index;

	if (replident == REPLICA_IDENTITY_INDEX)
		indexoid = RelationGetReplicaIndex(relation);
	else if (replident == REPLICA_IDENTITY_DEFAULT || replident == REPLICA_IDENTITY_FULL)
		indexoid = RelationGetPrimaryKeyIndex(relation);
	if (!OidIsValid(indexoid))
		return;

	index = RelationIdGetRelation(indexoid);
	if (!RelationIsValid(index))
		elog(ERROR, "could not open index with OID %u", indexoid);
	plan->nkeys = index->rd_index->indnkeyatts;
	plan->keys = MemoryContextAlloc(mcxt, sizeof(AttrNumber) * plan->nkeys);
	for (int i = 0; i < plan->nkeys; i++)
		plan->keys[i] = index->rd_index->indkey.values[i] - 1;
	RelationClose(index);
}

/* What the writers need to know about a relation, built in mcxt. */
void
build_rel_info(Relation rel, RelInfo *info, MemoryContext mcxt)
{
	info->relid = RelationGetRelid(rel);
	info->schema = MemoryContextStrdup(mcxt, get_namespace_name(RelationGetNamespace(rel)));
	info->name = MemoryContextStrdup(mcxt, RelationGetRelationName(rel));
	info->replident = rel->rd_rel->relreplident;
	info->plan = build_row_plan(RelationGetDescr(rel), mcxt);
	fill_identity_key(rel, info->plan, mcxt);
}

/*
 * dblog.relation_info(regclass) RETURNS bytea: the serialized dblog.v1.Relation
 * the plugin sends for this table, for the copy path.
 */
Datum
dblog_relation_info(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel;
	RelInfo		info;
	StringInfoData buf;
	bytea	   *result;

	check_database_encoding();
	rel = table_open(relid, AccessShareLock);
	build_rel_info(rel, &info, CurrentMemoryContext);
	initStringInfo(&buf);
	appendStringInfoSpaces(&buf, VARHDRSZ);
	proto_relation_body(&buf, rel, &info);
	table_close(rel, AccessShareLock);
	result = (bytea *) buf.data;
	SET_VARSIZE(result, buf.len);
	PG_RETURN_BYTEA_P(result);
}
