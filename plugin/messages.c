/*-------------------------------------------------------------------------
 *
 * messages.c
 *		  Binary and text writers for the dblog output plugin's events.
 *
 * Binary: each function appends one `Batch.events` entry (a dblog.v1.Event),
 * so a plugin message is any run of them.  Text: each function appends one
 * line without its newline; the text format sends one event per message.
 *
 * IDENTIFICATION
 *		  plugin/messages.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "fmgr.h"
#include "utils/memutils.h"
#include "utils/relcache.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/lsyscache.h"

#include "messages.h"
#include "pbwire.h"

/* dblog.v1.Event oneof members */
#define EVENT_BEGIN		1
#define EVENT_RELATION	2
#define EVENT_CHANGE	3
#define EVENT_TRUNCATE	4
#define EVENT_MESSAGE	5
#define EVENT_COMMIT	6

#define UNIX_TO_PG_EPOCH_USECS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

typedef struct EventPos
{
	int			outer;
	int			inner;
} EventPos;

static EventPos
event_begin(StringInfo out, int member)
{
	EventPos	pos;

	pos.outer = pb_begin(out, 1);	/* Batch.events */
	pos.inner = pb_begin(out, member);
	return pos;
}

static void
event_end(StringInfo out, EventPos pos)
{
	pb_end(out, pos.inner);
	pb_end(out, pos.outer);
}

static int64
unix_micros(TimestampTz t)
{
	return t + UNIX_TO_PG_EPOCH_USECS;
}

static void
append_lsn(StringInfo out, const char *label, XLogRecPtr lsn)
{
	appendStringInfo(out, " %s=%X/%X", label, LSN_FORMAT_ARGS(lsn));
}

static const char *
qualified(const RelInfo *info)
{
	return quote_qualified_identifier(info->schema, info->name);
}

static const char *
identity_name(char replident)
{
	switch (replident)
	{
		case 'd':
			return "default";
		case 'f':
			return "full";
		case 'i':
			return "index";
		default:
			return "nothing";
	}
}

static void
deform(HeapTuple tuple, Relation rel, Datum **values, bool **nulls)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			n = Max(desc->natts, 1);

	*values = palloc(sizeof(Datum) * n);
	*nulls = palloc(sizeof(bool) * n);
	heap_deform_tuple(tuple, desc, *values, *nulls);
}

/* BEGIN */
void
write_begin(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn)
{
	EventPos	pos;

	if (fmt->text)
	{
		appendStringInfoString(out, "BEGIN");
		if (fmt->coordinates)
		{
			appendStringInfo(out, " xid=" UINT64_FORMAT, txn->xid);
			append_lsn(out, "commit_lsn", txn->commit_lsn);
			append_lsn(out, "end_lsn", txn->end_lsn);
			appendStringInfo(out, " commit_time=%s", timestamptz_to_str(txn->commit_time));
		}
		if (txn->origin_id != 0)
			appendStringInfo(out, " origin=%u", txn->origin_id);
		return;
	}
	pos = event_begin(out, EVENT_BEGIN);
	pb_uint_field(out, 1, txn->xid);
	pb_uint_field(out, 2, txn->commit_lsn);
	pb_sint_field(out, 3, unix_micros(txn->commit_time));
	pb_uint_field(out, 4, txn->end_lsn);
	pb_uint_field(out, 5, txn->origin_id);
	event_end(out, pos);
}

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

/* The body of a dblog.v1.Relation message. */
static void
write_relation_body(StringInfo out, Relation rel, const RelInfo *info, const uint32 *keys)
{
	TupleDesc	desc = RelationGetDescr(rel);
	char		ident[2] = {info->replident, '\0'};

	pb_uint_field(out, 1, info->relid);
	pb_string_field(out, 2, to_utf8(info->schema));
	pb_string_field(out, 3, to_utf8(info->name));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		int			col;

		if (att->attisdropped)
			continue;
		col = pb_begin(out, 4);
		pb_string_field(out, 1, to_utf8(NameStr(att->attname)));
		pb_uint_field(out, 2, att->atttypid);
		pb_string_field(out, 3, to_utf8(format_type_with_typemod(att->atttypid, att->atttypmod)));
		pb_sint_field(out, 4, att->atttypmod);
		pb_bool_field(out, 5, att->attnotnull);
		pb_uint_field(out, 6, att->attnum);
		pb_end(out, col);
	}
	pb_packed_uint32(out, 5, keys, info->plan->nkeys);
	pb_string_field(out, 6, ident);
}

/* key_columns index the live columns, not attribute numbers */
static uint32 *
live_key_positions(Relation rel, const RowPlan *plan)
{
	TupleDesc	desc = RelationGetDescr(rel);
	uint32	   *keys = palloc(sizeof(uint32) * Max(plan->nkeys, 1));

	for (int k = 0; k < plan->nkeys; k++)
	{
		keys[k] = 0;
		for (int i = 0; i < plan->keys[k]; i++)
			if (!TupleDescAttr(desc, i)->attisdropped)
				keys[k]++;
	}
	return keys;
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
	write_relation_body(&buf, rel, &info, live_key_positions(rel, info.plan));
	table_close(rel, AccessShareLock);
	result = (bytea *) buf.data;
	SET_VARSIZE(result, buf.len);
	PG_RETURN_BYTEA_P(result);
}

/* RELATION: sent before a relation's first change, and after it changed */
void
write_relation(StringInfo out, const WriteFormat *fmt, Relation rel, const RelInfo *info)
{
	TupleDesc	desc = RelationGetDescr(rel);
	const RowPlan *plan = info->plan;
	EventPos	pos;
	int			live = 0;

	if (fmt->text)
	{
		appendStringInfo(out, "RELATION %s", qualified(info));
		if (fmt->coordinates)
			appendStringInfo(out, " oid=%u", info->relid);
		appendStringInfoString(out, ":");
		for (int i = 0; i < desc->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);

			if (att->attisdropped)
				continue;
			appendStringInfo(out, "%s %s %s%s", live++ ? "," : "",
							 quote_identifier(NameStr(att->attname)),
							 format_type_with_typemod(att->atttypid, att->atttypmod),
							 att->attnotnull ? " not null" : "");
			appendStringInfo(out, " [%s]", column_kind_name(plan->cols[i].kind));
		}
		appendStringInfoString(out, "; key (");
		for (int k = 0; k < plan->nkeys; k++)
			appendStringInfo(out, "%s%s", k ? ", " : "",
							 quote_identifier(NameStr(TupleDescAttr(desc, plan->keys[k])->attname)));
		appendStringInfo(out, "); replica identity %s", identity_name(info->replident));
		return;
	}

	pos = event_begin(out, EVENT_RELATION);
	write_relation_body(out, rel, info, live_key_positions(rel, plan));
	event_end(out, pos);
}

/* INSERT, UPDATE, DELETE */
void
write_change(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
			 uint32 seq, XLogRecPtr lsn, ChangeKind kind, Relation rel,
			 const RelInfo *info, HeapTuple newtuple, HeapTuple oldtuple)
{
	Datum	   *newv = NULL,
			   *oldv = NULL;
	bool	   *newn = NULL,
			   *oldn = NULL;
	bool		full = info->replident == 'f' && oldtuple != NULL;
	EventPos	pos;

	if (newtuple != NULL)
		deform(newtuple, rel, &newv, &newn);
	if (oldtuple != NULL)
		deform(oldtuple, rel, &oldv, &oldn);

	if (fmt->text)
	{
		static const char *const names[] = {"", "INSERT", "UPDATE", "DELETE"};
		TupleDesc	desc = RelationGetDescr(rel);

		appendStringInfo(out, "%s %s seq=%u", names[kind], qualified(info), seq);
		if (fmt->coordinates)
			append_lsn(out, "lsn", lsn);
		appendStringInfoChar(out, ':');
		if (kind != CHANGE_INSERT)
		{
			appendStringInfoString(out, " key(");
			if (oldtuple != NULL)
				write_row_text(out, info->plan, desc, oldv, oldn, NULL, NULL, true, false);
			else
				write_row_text(out, info->plan, desc, newv, newn, NULL, NULL, true, true);
			appendStringInfoChar(out, ')');
		}
		if (newtuple != NULL)
		{
			appendStringInfoString(out, " new(");
			write_row_text(out, info->plan, desc, newv, newn,
						   full ? oldv : NULL, oldn, false, true);
			appendStringInfoChar(out, ')');
		}
		if (full)
		{
			appendStringInfoString(out, " old(");
			write_row_text(out, info->plan, desc, oldv, oldn, NULL, NULL, false, true);
			appendStringInfoChar(out, ')');
		}
		return;
	}

	pos = event_begin(out, EVENT_CHANGE);
	pb_uint_field(out, 1, kind);
	pb_uint_field(out, 2, info->relid);
	pb_uint_field(out, 3, txn->commit_lsn);
	pb_uint_field(out, 4, seq);
	pb_uint_field(out, 5, lsn);
	pb_uint_field(out, 6, txn->xid);
	pb_sint_field(out, 7, unix_micros(txn->commit_time));
	if (newtuple != NULL)
		write_row(out, 8, info->plan, newv, newn, full ? oldv : NULL, oldn, false, true);
	if (kind != CHANGE_INSERT)
	{
		if (oldtuple != NULL)
			write_row(out, 9, info->plan, oldv, oldn, NULL, NULL, true, false);
		else
			write_row(out, 9, info->plan, newv, newn, NULL, NULL, true, true);
	}
	if (full)
		write_row(out, 10, info->plan, oldv, oldn, NULL, NULL, false, true);
	event_end(out, pos);
}

/* TRUNCATE */
void
write_truncate(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
			   uint32 seq, XLogRecPtr lsn, int nrelations, RelInfo **infos,
			   bool cascade, bool restart_identity)
{
	EventPos	pos;
	uint32	   *oids;

	if (fmt->text)
	{
		appendStringInfo(out, "TRUNCATE seq=%u", seq);
		if (fmt->coordinates)
			append_lsn(out, "lsn", lsn);
		appendStringInfoChar(out, ':');
		for (int i = 0; i < nrelations; i++)
			appendStringInfo(out, "%s %s", i ? "," : "", qualified(infos[i]));
		if (cascade)
			appendStringInfoString(out, " cascade");
		if (restart_identity)
			appendStringInfoString(out, " restart identity");
		return;
	}
	oids = palloc(sizeof(uint32) * Max(nrelations, 1));
	for (int i = 0; i < nrelations; i++)
		oids[i] = infos[i]->relid;
	pos = event_begin(out, EVENT_TRUNCATE);
	pb_packed_uint32(out, 1, oids, nrelations);
	pb_uint_field(out, 2, txn->commit_lsn);
	pb_uint_field(out, 3, seq);
	pb_uint_field(out, 4, lsn);
	pb_bool_field(out, 5, cascade);
	pb_bool_field(out, 6, restart_identity);
	event_end(out, pos);
}

/* MESSAGE: pg_logical_emit_message(); txn is NULL when non-transactional */
void
write_message(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
			  uint32 seq, XLogRecPtr lsn, bool transactional,
			  const char *prefix, const char *content, Size size, Size omitted)
{
	EventPos	pos;

	if (fmt->text)
	{
		appendStringInfo(out, "MESSAGE %s", transactional ? "transactional" : "non-transactional");
		if (transactional)
			appendStringInfo(out, " seq=%u", seq);
		if (fmt->coordinates)
			append_lsn(out, "lsn", lsn);
		appendStringInfo(out, " prefix=%s: %s", quote_literal_cstr(prefix),
						 quote_literal_cstr(pnstrdup(content, size)));
		if (omitted > 0)
			appendStringInfo(out, " (%zu bytes omitted)", omitted);
		return;
	}
	pos = event_begin(out, EVENT_MESSAGE);
	pb_bool_field(out, 1, transactional);
	pb_string_field(out, 2, to_utf8(prefix));
	pb_bytes_field(out, 3, content, size);
	pb_uint_field(out, 4, lsn);
	if (transactional)
	{
		pb_uint_field(out, 5, txn->commit_lsn);
		pb_uint_field(out, 6, seq);
		pb_uint_field(out, 7, txn->xid);
	}
	pb_uint_field(out, 8, omitted);
	event_end(out, pos);
}

/* COMMIT */
void
write_commit(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn, uint32 seq)
{
	EventPos	pos;

	if (fmt->text)
	{
		appendStringInfo(out, "COMMIT seq=%u", seq);
		if (fmt->coordinates)
		{
			append_lsn(out, "commit_lsn", txn->commit_lsn);
			append_lsn(out, "end_lsn", txn->end_lsn);
		}
		return;
	}
	pos = event_begin(out, EVENT_COMMIT);
	pb_uint_field(out, 1, txn->commit_lsn);
	pb_uint_field(out, 2, txn->end_lsn);
	pb_sint_field(out, 3, unix_micros(txn->commit_time));
	pb_uint_field(out, 4, seq);
	pb_uint_field(out, 5, txn->xid);
	event_end(out, pos);
}
