/*-------------------------------------------------------------------------
 *
 * text.c
 *		  The text twin of the dblog output plugin's events (format 'text'),
 *		  printed as test_decoding prints: each function appends one line
 *		  without its newline.  Rows go through the shared encoder
 *		  (write_row_text), so a value reads as it is encoded in protobuf.
 *
 * IDENTIFICATION
 *		  plugin/text.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "messages.h"

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
text_begin(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn)
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
}

static void
text_relation(StringInfo out, const WriteFormat *fmt, Relation rel, const RelInfo *info)
{
	TupleDesc	desc = RelationGetDescr(rel);
	const RowPlan *plan = info->plan;
	int			live = 0;

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
}

static void
text_change(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
			uint32 seq, XLogRecPtr lsn, ChangeKind kind, Relation rel,
			const RelInfo *info, const ChangeRows *rows)
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
		write_row_text(out, info->plan, desc, rows->keyv, rows->keyn, NULL, NULL, true,
					   rows->key_may_be_unchanged);
		appendStringInfoChar(out, ')');
	}
	if (rows->newv != NULL)
	{
		appendStringInfoString(out, " new(");
		write_row_text(out, info->plan, desc, rows->newv, rows->newn,
					   rows->full ? rows->oldv : NULL, rows->oldn, false, true);
		appendStringInfoChar(out, ')');
	}
	if (rows->full)
	{
		appendStringInfoString(out, " old(");
		write_row_text(out, info->plan, desc, rows->oldv, rows->oldn, NULL, NULL, false, true);
		appendStringInfoChar(out, ')');
	}
}

static void
text_truncate(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
			  uint32 seq, XLogRecPtr lsn, int nrelations, RelInfo **infos,
			  bool cascade, bool restart_identity)
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
}

static void
text_message(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn,
			 uint32 seq, XLogRecPtr lsn, bool transactional,
			 const char *prefix, const char *content, Size size, Size omitted)
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
}

static void
text_commit(StringInfo out, const WriteFormat *fmt, const TxnCoords *txn, uint32 seq)
{
	appendStringInfo(out, "COMMIT seq=%u", seq);
	if (fmt->coordinates)
	{
		append_lsn(out, "commit_lsn", txn->commit_lsn);
		append_lsn(out, "end_lsn", txn->end_lsn);
	}
}

const EventWriter text_writer = {
	.begin = text_begin,
	.relation = text_relation,
	.change = text_change,
	.truncate = text_truncate,
	.message = text_message,
	.commit = text_commit,
};
