/*-------------------------------------------------------------------------
 *
 * proto.c
 *		  The protobuf writer of the dblog output plugin's events: each
 *		  function appends one `Batch.events` entry (a dblog.v1.Event,
 *		  proto/dblog/v1/change.proto), so a plugin message is any run of
 *		  them.  Rows go through the shared encoder (write_row).
 *
 * IDENTIFICATION
 *		  plugin/proto.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "messages.h"
#include "pbwire.h"

/* dblog.v1.Event oneof members */
#define EVENT_BEGIN		1
#define EVENT_RELATION	2
#define EVENT_CHANGE	3
#define EVENT_TRUNCATE	4
#define EVENT_MESSAGE	5
#define EVENT_COMMIT	6
#define EVENT_VALUE_PIECE	7

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
proto_begin(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn)
{
	EventPos	pos = event_begin(out, EVENT_BEGIN);

	pb_uint_field(out, 1, txn->xid);
	pb_uint_field(out, 2, txn->commit_lsn);
	pb_sint_field(out, 3, unix_micros(txn->commit_time));
	pb_uint_field(out, 4, txn->end_lsn);
	pb_uint_field(out, 5, txn->origin_id);
	event_end(out, pos);
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

/* The body of a dblog.v1.Relation message. */
void
proto_relation_body(StringInfo out, Relation rel, const RelInfo *info)
{
	TupleDesc	desc = RelationGetDescr(rel);
	uint32	   *keys = live_key_positions(rel, info->plan);
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

static void
proto_relation(StringInfo out, const WriteFormat *fmt, Relation rel, const RelInfo *info)
{
	EventPos	pos = event_begin(out, EVENT_RELATION);

	proto_relation_body(out, rel, info);
	event_end(out, pos);
}

static void
proto_change(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
			 uint32 seq, XLogRecPtr lsn, ChangeKind kind, Relation rel,
			 const RelInfo *info, const ChangeRows *rows)
{
	EventPos	pos = event_begin(out, EVENT_CHANGE);

	pb_uint_field(out, 1, kind);
	pb_uint_field(out, 2, info->relid);
	pb_uint_field(out, 3, txn->commit_lsn);
	pb_uint_field(out, 4, seq);
	pb_uint_field(out, 5, lsn);
	pb_uint_field(out, 6, txn->xid);
	pb_sint_field(out, 7, unix_micros(txn->commit_time));
	if (rows->newv != NULL)
		write_row(out, 8, info->plan, rows->newv, rows->newn,
				  rows->full ? rows->oldv : NULL, rows->oldn, false, true, fmt->pieces);
	if (kind != CHANGE_INSERT)
		write_row(out, 9, info->plan, rows->keyv, rows->keyn, NULL, NULL, true,
				  rows->key_may_be_unchanged, NULL);
	if (rows->full)
		write_row(out, 10, info->plan, rows->oldv, rows->oldn, NULL, NULL, false, true, NULL);
	event_end(out, pos);
}

static void
proto_truncate(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
			   uint32 seq, XLogRecPtr lsn, int nrelations, RelInfo **infos,
			   bool cascade, bool restart_identity)
{
	uint32	   *oids = palloc(sizeof(uint32) * Max(nrelations, 1));
	EventPos	pos;

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

static void
proto_message(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
			  uint32 seq, XLogRecPtr lsn, bool transactional,
			  const char *prefix, const char *content, Size size, Size omitted)
{
	EventPos	pos = event_begin(out, EVENT_MESSAGE);

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

static void
proto_commit(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn, uint32 seq)
{
	EventPos	pos = event_begin(out, EVENT_COMMIT);

	pb_uint_field(out, 1, txn->commit_lsn);
	pb_uint_field(out, 2, txn->end_lsn);
	pb_sint_field(out, 3, unix_micros(txn->commit_time));
	pb_uint_field(out, 4, seq);
	pb_uint_field(out, 5, txn->xid);
	event_end(out, pos);
}

/*
 * One piece of a split value (dblog.v1.ValuePiece) as a whole Batch, its
 * lengths written up front: the piece is copied once.
 */
void
proto_value_piece(StringInfo out, const char *data, Size len)
{
	Size		piece = 1 + pb_varint_size(len) + len;	/* ValuePiece{data} */
	Size		event = 1 + pb_varint_size(piece) + piece;	/* Event{value_piece} */

	Assert(len > 0);
	pb_tag(out, 1, PB_LEN);		/* Batch.events */
	pb_varint(out, event);
	pb_tag(out, EVENT_VALUE_PIECE, PB_LEN);
	pb_varint(out, piece);
	pb_bytes_always(out, 1, data, len);
}

const EventWriter proto_writer = {
	.begin = proto_begin,
	.relation = proto_relation,
	.change = proto_change,
	.truncate = proto_truncate,
	.message = proto_message,
	.commit = proto_commit,
};
