/*-------------------------------------------------------------------------
 *
 * dblog.c
 *		  Logical decoding output plugin "dblog": every change stamped with
 *		  its coordinates, in protobuf (proto/dblog/v1/change.proto) or in a
 *		  readable text twin.
 *
 * Options (all optional; parse_output_parameters is the one place):
 *	 format			 'binary' (default) or 'text'
 *	 proto_version	 1 (the only version so far)
 *	 include_tables	 a scope: comma list of schema.table patterns, '*'
 *					 anywhere in a part, '!' to exclude (scope_match.h)
 *	 exclude_tables	 the same without '!': tables left out
 *	 origin			 'any' (default) or 'none': skip changes applied by a
 *					 replication origin
 *	 keyless		 'error' (default) or 'skip': a change to a table with no
 *					 primary key or replica identity index
 *	 batch_bytes	 binary only: cut a Batch once it holds this many bytes
 *					 (default 65536; 0 = one event per message)
 *	 include_coordinates  text only: show xids, LSNs, times, oids (default on)
 *	 control		 on: also send changes to dblog.request_queue (repair requests,
 *					 for dblogd); the extension's other tables are never sent
 *	 message_prefixes  comma list: send only messages whose prefix starts with
 *					 one of these ('' = none; absent = all)
 *	 message_max_bytes  a message with more content is sent without it, with the
 *					 number of bytes left out (default 0 = no limit)
 *
 * Transactions are decoded one at a time (no streaming of in-progress
 * transactions), so the per-transaction state lives in DblogData.
 *
 * This file decides what is sent; how it looks is the writers' (proto.c,
 * text.c, behind messages.h), what is known of a relation is relation.c's.
 *
 * IDENTIFICATION
 *		  plugin/dblog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_index.h"
#include "commands/defrem.h"
#include "common/jsonapi.h"
#include "mb/pg_wchar.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
#include "utils/varlena.h"

#include "ddl_message.h"
#include "messages.h"
#include "scope_match.h"

PG_MODULE_MAGIC;

#define DBLOG_PROTO_VERSION_MIN 1
#define DBLOG_PROTO_VERSION_MAX 1
#define DBLOG_SCHEMA "dblog"
#define DBLOG_CONTROL_TABLE "request_queue"

/*
 * The refusal of a table without a key (keyless=error) has SQLSTATE 55000 and
 * a detail that starts with this token: dblogd recognises the error by both
 * (docs/plugin.md), so the words around them may change, these may not.
 */
#define DBLOG_KEYLESS_TOKEN "dblog_keyless_table"

typedef struct DblogData
{
	MemoryContext context;		/* reset after every callback */
	MemoryContext cachecxt;		/* relation cache */
	WriteFormat fmt;
	const EventWriter *writer;	/* proto_writer or text_writer, as fmt.text says */
	int			proto_version;
	DblogScope *include;		/* NULL: every table */
	DblogScope *exclude;		/* NULL: none */
	bool		skip_origins;
	bool		skip_keyless;
	bool		control;		/* send dblog.request_queue */
	int			batch_bytes;
	bool		filter_messages;	/* message_prefixes given */
	List	   *message_prefixes;	/* of char * */
	Size		message_max_bytes;	/* 0: no limit */
	ValuePieces pieces;			/* value_piece_bytes: threshold 0 when not asked for */

	/* the transaction being decoded */
	bool		began;			/* Begin written */
	uint32		seq;
	TxnCoords	txn;

	StringInfoData batch;		/* events not yet handed to the walsender */
} DblogData;

/* Relation cache entry; RelInfo first so a RelEntry * is a RelInfo *. */
typedef struct RelEntry
{
	RelInfo		info;			/* info.relid is the hash key */
	bool		valid;			/* cleared by relcache invalidation */
	bool		sent;			/* Relation written since it became valid */
	bool		publish;		/* user data that passes the filters */
	bool		bookkeeping;	/* dblog's own (dblog.request_queue) */
	MemoryContext mcxt;
} RelEntry;

static HTAB *RelationCache = NULL;

extern void _PG_output_plugin_init(OutputPluginCallbacks *cb);

static void dblog_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt,
						  bool is_init);
static void dblog_shutdown(LogicalDecodingContext *ctx);
static void dblog_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn);
static void dblog_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						 Relation relation, ReorderBufferChange *change);
static void dblog_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						   int nrelations, Relation relations[],
						   ReorderBufferChange *change);
static void dblog_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						 XLogRecPtr commit_lsn);
static void dblog_message(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						  XLogRecPtr message_lsn, bool transactional,
						  const char *prefix, Size message_size, const char *message);
static bool dblog_filter_origin(LogicalDecodingContext *ctx, RepOriginId origin_id);

static void parse_output_parameters(List *options, DblogData *data);
static bool message_wanted(DblogData *data, const char *prefix);
static bool ddl_message_authentic(const char *message, Size size);
static RelEntry *get_rel_entry(DblogData *data, Relation relation);
static void invalidate_rel_entry(Datum arg, Oid relid);
static void create_relation_cache(DblogData *data);

void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	AssertVariableIsOfType(&_PG_output_plugin_init, LogicalOutputPluginInit);

	cb->startup_cb = dblog_startup;
	cb->shutdown_cb = dblog_shutdown;

	/* transactions and their changes */
	cb->begin_cb = dblog_begin;
	cb->change_cb = dblog_change;
	cb->truncate_cb = dblog_truncate;
	cb->commit_cb = dblog_commit;

	/* generic messages and origins */
	cb->message_cb = dblog_message;
	cb->filter_by_origin_cb = dblog_filter_origin;
}

/*
 * Option parsing
 */
static void
reject_duplicate(bool *seen, DefElem *elem)
{
	if (*seen)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("conflicting or redundant options"),
				 errdetail("Option \"%s\" was given more than once.", elem->defname)));
	*seen = true;
}

static char *
option_string(DefElem *elem)
{
	if (elem->arg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dblog option \"%s\" requires a value", elem->defname)));
	return strVal(elem->arg);
}

static void
bad_value(DefElem *elem, const char *valid)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for dblog option \"%s\": \"%s\"",
					elem->defname, strVal(elem->arg)),
			 errhint("Valid values are %s.", valid)));
}

/*
 * A whole number of bytes from 0 to max, or an error naming the option;
 * with least > 1, a nonzero one is at least that.
 */
static long
byte_count_option(DefElem *elem, long least, long max)
{
	char	   *v = option_string(elem);
	char	   *end;
	long		bytes;

	errno = 0;
	bytes = strtol(v, &end, 10);
	if (errno != 0 || *end != '\0' || end == v || bytes < 0 || bytes > max ||
		(bytes > 0 && bytes < least))
	{
		if (least > 1)
			bad_value(elem, psprintf("0 (off) and whole numbers from %ld to %ld", least, max));
		bad_value(elem, psprintf("whole numbers from 0 to %ld", max));
	}
	return bytes;
}

/* One of two words; returns true for `yes`. */
static bool
option_choice(DefElem *elem, const char *no, const char *yes)
{
	char	   *v = option_string(elem);

	if (pg_strcasecmp(v, no) == 0)
		return false;
	if (pg_strcasecmp(v, yes) == 0)
		return true;
	bad_value(elem, psprintf("\"%s\" and \"%s\"", no, yes));
	return false;				/* keep compiler quiet */
}

/* Frees a scope (malloc'd by scope_match.c) with the memory context it hangs off. */
static void
free_scope(void *arg)
{
	dblog_scope_free(arg);
}

/*
 * A scope option, parsed by the matcher shared with dblogd and the SQL API;
 * freed with the current memory context (ctx->context), errors or not.
 */
static DblogScope *
parse_scope_option(DefElem *elem, int flags)
{
	char		err[256];
	DblogScope *scope = dblog_scope_parse(option_string(elem), flags, err, sizeof(err));
	MemoryContextCallback *cb;

	if (scope == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value for dblog option \"%s\": \"%s\"",
						elem->defname, strVal(elem->arg)),
				 errdetail("%s", err),
				 errhint("A scope is comma-separated schema.table patterns: * anywhere in a name, \"Quoted\" names exact, !schema.table to exclude.")));
	cb = palloc0(sizeof(MemoryContextCallback));
	cb->func = free_scope;
	cb->arg = scope;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, cb);
	return scope;
}

/* A boolean; the option alone means on. */
static bool
bool_option(DefElem *elem)
{
	bool		value;

	if (elem->arg == NULL)
		return true;
	if (!parse_bool(strVal(elem->arg), &value))
		bad_value(elem, "booleans");
	return value;
}

/*
 * proto_version, negotiated against what this plugin speaks.  A missing value
 * is reported before a repeated option, hence `seen` here.
 */
static int
proto_version_option(DefElem *elem, bool *seen)
{
	char	   *v = option_string(elem);
	char	   *end;
	long		version;

	reject_duplicate(seen, elem);
	errno = 0;
	version = strtol(v, &end, 10);
	if (errno != 0 || *end != '\0' || end == v)
		bad_value(elem, "whole numbers");
	if (version < DBLOG_PROTO_VERSION_MIN || version > DBLOG_PROTO_VERSION_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("client sent proto_version=%ld but dblog supports protocol versions %d to %d",
						version, DBLOG_PROTO_VERSION_MIN, DBLOG_PROTO_VERSION_MAX)));
	return (int) version;
}

/*
 * message_prefixes: a comma list of non-empty prefixes.  A missing value is
 * reported before a repeated option, hence `seen` here.
 */
static List *
message_prefixes_option(DefElem *elem, bool *seen)
{
	char	   *p = pstrdup(option_string(elem));
	List	   *prefixes = NIL;

	reject_duplicate(seen, elem);
	/* '' is the empty list: no message passes */
	while (*p != '\0' || prefixes != NIL)
	{
		char	   *comma = strchr(p, ',');

		if (comma)
			*comma = '\0';
		if (*p == '\0')
			bad_value(elem, "a comma-separated list of non-empty message prefixes");
		prefixes = lappend(prefixes, p);
		if (!comma)
			break;
		p = comma + 1;
	}
	return prefixes;
}

/* Long: one short branch per option, as pgoutput's parse_output_parameters. */
static void
parse_output_parameters(List *options, DblogData *data)
{
	ListCell   *lc;
	bool		format_seen = false,
				version_seen = false,
				include_seen = false,
				exclude_seen = false,
				origin_seen = false,
				keyless_seen = false,
				batch_seen = false,
				coordinates_seen = false,
				control_seen = false,
				prefixes_seen = false,
				max_message_seen = false,
				value_piece_seen = false;

	data->fmt.text = false;
	data->fmt.coordinates = true;
	data->proto_version = DBLOG_PROTO_VERSION_MAX;
	data->batch_bytes = 65536;

	foreach(lc, options)
	{
		DefElem    *elem = lfirst(lc);

		Assert(elem->arg == NULL || IsA(elem->arg, String));
		if (strcmp(elem->defname, "format") == 0)
		{
			reject_duplicate(&format_seen, elem);
			data->fmt.text = option_choice(elem, "binary", "text");
		}
		else if (strcmp(elem->defname, "proto_version") == 0)
			data->proto_version = proto_version_option(elem, &version_seen);
		else if (strcmp(elem->defname, "include_tables") == 0)
		{
			reject_duplicate(&include_seen, elem);
			data->include = parse_scope_option(elem, 0);
		}
		else if (strcmp(elem->defname, "exclude_tables") == 0)
		{
			reject_duplicate(&exclude_seen, elem);
			data->exclude = parse_scope_option(elem, DBLOG_SCOPE_NO_EXCLUSIONS);
		}
		else if (strcmp(elem->defname, "origin") == 0)
		{
			reject_duplicate(&origin_seen, elem);
			data->skip_origins = !option_choice(elem, "none", "any");
		}
		else if (strcmp(elem->defname, "keyless") == 0)
		{
			reject_duplicate(&keyless_seen, elem);
			data->skip_keyless = option_choice(elem, "error", "skip");
		}
		else if (strcmp(elem->defname, "batch_bytes") == 0)
		{
			reject_duplicate(&batch_seen, elem);
			data->batch_bytes = (int) byte_count_option(elem, 0, MaxAllocSize / 4);
		}
		else if (strcmp(elem->defname, "include_coordinates") == 0)
		{
			reject_duplicate(&coordinates_seen, elem);
			data->fmt.coordinates = bool_option(elem);
		}
		else if (strcmp(elem->defname, "control") == 0)
		{
			reject_duplicate(&control_seen, elem);
			data->control = bool_option(elem);
		}
		else if (strcmp(elem->defname, "message_prefixes") == 0)
		{
			data->message_prefixes = message_prefixes_option(elem, &prefixes_seen);
			data->filter_messages = true;
		}
		else if (strcmp(elem->defname, "message_max_bytes") == 0)
		{
			reject_duplicate(&max_message_seen, elem);
			data->message_max_bytes = (Size) byte_count_option(elem, 0, MaxAllocSize);
		}
		else if (strcmp(elem->defname, "value_piece_bytes") == 0)
		{
			reject_duplicate(&value_piece_seen, elem);
			data->pieces.threshold = (Size) byte_count_option(elem, 1024, MaxAllocSize / 4);
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unrecognized dblog option: %s", elem->defname)));
	}
}

/* startup callback */
static void
dblog_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt, bool is_init)
{
	DblogData  *data;
	MemoryContext old;

	check_database_encoding();
	data = MemoryContextAllocZero(ctx->context, sizeof(DblogData));

	data->context = AllocSetContextCreate(ctx->context, "dblog change context",
										  ALLOCSET_DEFAULT_SIZES);
	data->cachecxt = AllocSetContextCreate(ctx->context, "dblog relation cache",
										   ALLOCSET_DEFAULT_SIZES);
	ctx->output_plugin_private = data;

	old = MemoryContextSwitchTo(ctx->context);
	parse_output_parameters(ctx->output_plugin_options, data);
	initStringInfo(&data->batch);
	MemoryContextSwitchTo(old);
	data->writer = data->fmt.text ? &text_writer : &proto_writer;

	opt->output_type = data->fmt.text ? OUTPUT_PLUGIN_TEXTUAL_OUTPUT
		: OUTPUT_PLUGIN_BINARY_OUTPUT;
	opt->receive_rewrites = false;

	create_relation_cache(data);
}

/* shutdown callback */
static void
dblog_shutdown(LogicalDecodingContext *ctx)
{
	/* the relation cache goes with ctx->context (see create_relation_cache) */
}

/*
 * Relation cache
 *
 * It lives in the decoding context's memory, so it disappears with the
 * session even when an error skips the shutdown callback; a reset callback
 * forgets the static pointer at the same moment.  The relcache callback is
 * registered once per backend and only clears flags.
 */
static void
forget_relation_cache(void *arg)
{
	RelationCache = NULL;
}

static void
create_relation_cache(DblogData *data)
{
	static bool callback_registered = false;
	MemoryContextCallback *reset = MemoryContextAlloc(data->cachecxt,
													  sizeof(MemoryContextCallback));
	HASHCTL		ctl;

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(RelEntry);
	ctl.hcxt = data->cachecxt;
	RelationCache = hash_create("dblog relation cache", 128, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	reset->func = forget_relation_cache;
	reset->arg = NULL;
	MemoryContextRegisterResetCallback(data->cachecxt, reset);

	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(invalidate_rel_entry, (Datum) 0);
		callback_registered = true;
	}
}

static void
invalidate_rel_entry(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	RelEntry   *entry;

	if (RelationCache == NULL)
		return;
	if (OidIsValid(relid))
	{
		entry = hash_search(RelationCache, &relid, HASH_FIND, NULL);
		if (entry != NULL)
			entry->valid = false;
		return;
	}
	hash_seq_init(&status, RelationCache);
	while ((entry = hash_seq_search(&status)) != NULL)
		entry->valid = false;
}

static RelEntry *
get_rel_entry(DblogData *data, Relation relation)
{
	Oid			relid = RelationGetRelid(relation);
	bool		found;
	RelEntry   *entry = hash_search(RelationCache, &relid, HASH_ENTER, &found);

	if (found && entry->valid)
		return entry;
	if (!found)
		entry->mcxt = NULL;
	if (entry->mcxt != NULL)
		MemoryContextReset(entry->mcxt);
	else
		entry->mcxt = AllocSetContextCreate(data->cachecxt, "dblog relation",
											ALLOCSET_SMALL_SIZES);

	build_rel_info(relation, &entry->info, entry->mcxt);

	if (strcmp(entry->info.schema, DBLOG_SCHEMA) == 0)
	{
		/* bookkeeping, except repair requests for dblogd (never filtered) */
		entry->publish = data->control && strcmp(entry->info.name, DBLOG_CONTROL_TABLE) == 0;
		entry->bookkeeping = true;
		entry->valid = true;
		entry->sent = false;
		return entry;
	}
	entry->publish = (data->include == NULL ||
					  dblog_scope_holds(data->include, entry->info.schema, entry->info.name)) &&
		!(data->exclude != NULL &&
		  dblog_scope_holds(data->exclude, entry->info.schema, entry->info.name));
	if (entry->publish && entry->info.plan->nkeys == 0)
	{
		if (data->skip_keyless)
			entry->publish = false;
		else
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s.%s\" has no primary key or replica identity index",
							entry->info.schema, entry->info.name),
					 errdetail("%s: dblog identifies rows by key; without one, updates and deletes cannot be applied correctly.",
							   DBLOG_KEYLESS_TOKEN),
					 errhint("Add a primary key, use REPLICA IDENTITY USING INDEX on a unique index of NOT NULL columns, or leave the table out with the exclude_tables or keyless option.")));
	}
	entry->bookkeeping = false;
	entry->valid = true;
	entry->sent = false;
	return entry;
}

/*
 * Batching: events accumulate in data->batch and go out as one plugin
 * message when it is full, and always at commit.
 */
static void
flush_batch(LogicalDecodingContext *ctx, DblogData *data, bool last_write)
{
	if (data->batch.len == 0)
		return;
	OutputPluginPrepareWrite(ctx, last_write);
	appendBinaryStringInfo(ctx->out, data->batch.data, data->batch.len);
	OutputPluginWrite(ctx, last_write);

	/* one huge row must not keep its buffer for the rest of the session */
	if (data->batch.maxlen > 4 * Max(data->batch_bytes, 65536))
	{
		pfree(data->batch.data);
		data->batch.data = MemoryContextAlloc(ctx->context, 1024);
		data->batch.maxlen = 1024;
	}
	resetStringInfo(&data->batch);
}

static void
event_written(LogicalDecodingContext *ctx, DblogData *data)
{
	if (data->fmt.text || data->batch.len >= data->batch_bytes)
		flush_batch(ctx, data, false);
}

static uint64
full_xid(TransactionId xid)
{
	FullTransactionId next = ReadNextFullTransactionId();
	uint64		epoch = EpochFromFullTransactionId(next);

	/* decoded transactions are in the past: a larger xid is the last epoch's */
	if (xid > XidFromFullTransactionId(next))
		epoch--;
	return (epoch << 32) | xid;
}

/* Writes the Begin, deferred until the transaction has something to send. */
static void
ensure_begin(LogicalDecodingContext *ctx, DblogData *data, ReorderBufferTXN *txn)
{
	if (data->began)
		return;
	data->began = true;
	data->txn.xid = full_xid(txn->xid);
	data->txn.commit_lsn = txn->final_lsn;
	data->txn.end_lsn = txn->end_lsn;
	data->txn.commit_time = txn->xact_time.commit_time;
	data->txn.origin_id = txn->origin_id;
	data->writer->begin(&data->batch, &data->fmt, &data->txn);
	event_written(ctx, data);
}

static void
ensure_relation(LogicalDecodingContext *ctx, DblogData *data, Relation relation,
				RelEntry *entry)
{
	if (entry->sent)
		return;
	data->writer->relation(&data->batch, &data->fmt, relation, &entry->info);
	entry->sent = true;
	event_written(ctx, data);
}

/*
 * The long values of the Change just written (ValuePieces), after it: each
 * piece a plugin message of its own, written straight from the encoded
 * value, so that neither the batch nor the walsender's buffer holds more
 * than a piece of it.
 */
static void
write_split_values(LogicalDecodingContext *ctx, DblogData *data)
{
	ListCell   *lc;

	flush_batch(ctx, data, false);
	foreach(lc, data->pieces.values)
	{
		const EncodedValue *ev = lfirst(lc);

		for (Size off = 0; off < ev->u.s.len; off += data->pieces.threshold)
		{
			OutputPluginPrepareWrite(ctx, false);
			proto_value_piece(ctx->out, ev->u.s.p + off,
							  Min(data->pieces.threshold, ev->u.s.len - off));
			OutputPluginWrite(ctx, false);
		}
	}
	data->pieces.values = NIL;
}

/* BEGIN callback */
static void
dblog_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
	DblogData  *data = ctx->output_plugin_private;

	data->began = false;
	data->seq = 0;
}

/* COMMIT callback */
static void
dblog_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn, XLogRecPtr commit_lsn)
{
	DblogData  *data = ctx->output_plugin_private;
	MemoryContext old;

	if (!data->began)
	{
		/* nothing in scope: let the walsender report progress anyway */
		OutputPluginUpdateProgress(ctx, true);
		return;
	}
	old = MemoryContextSwitchTo(data->context);
	data->writer->commit(&data->batch, &data->fmt, &data->txn, ++data->seq);
	flush_batch(ctx, data, true);
	MemoryContextSwitchTo(old);
	MemoryContextReset(data->context);
	data->began = false;
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

/*
 * The rows a change sends: the new row, the key (from the old tuple when the
 * WAL carries one, else from the new row), and under REPLICA IDENTITY FULL
 * the whole old row.
 */
static void
change_rows(Relation relation, const RelInfo *info, HeapTuple newtuple, HeapTuple oldtuple,
			ChangeRows *rows)
{
	memset(rows, 0, sizeof(ChangeRows));
	if (newtuple != NULL)
		deform(newtuple, relation, &rows->newv, &rows->newn);
	if (oldtuple != NULL)
		deform(oldtuple, relation, &rows->oldv, &rows->oldn);
	rows->full = info->replident == 'f' && oldtuple != NULL;
	rows->key_may_be_unchanged = oldtuple == NULL;
	rows->keyv = oldtuple != NULL ? rows->oldv : rows->newv;
	rows->keyn = oldtuple != NULL ? rows->oldn : rows->newn;
}

/* CHANGE callback */
static void
dblog_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			 Relation relation, ReorderBufferChange *change)
{
	DblogData  *data = ctx->output_plugin_private;
	MemoryContext old = MemoryContextSwitchTo(data->context);
	RelEntry   *entry = get_rel_entry(data, relation);
	HeapTuple	newtuple = NULL;
	HeapTuple	oldtuple = NULL;
	ChangeKind	kind;
	ChangeRows	rows;

	if (!entry->publish)
		goto done;

	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
			kind = CHANGE_INSERT;
			break;
		case REORDER_BUFFER_CHANGE_UPDATE:
			kind = CHANGE_UPDATE;
			break;
		case REORDER_BUFFER_CHANGE_DELETE:
			kind = CHANGE_DELETE;
			break;
		default:
			Assert(false);
			goto done;
	}
	if (change->data.tp.newtuple != NULL)
		newtuple = &change->data.tp.newtuple->tuple;
	if (change->data.tp.oldtuple != NULL)
		oldtuple = &change->data.tp.oldtuple->tuple;
	if (kind == CHANGE_DELETE && oldtuple == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delete from table \"%s.%s\" carries no old key",
						entry->info.schema, entry->info.name)));

	ensure_begin(ctx, data, txn);
	ensure_relation(ctx, data, relation, entry);
	change_rows(relation, &entry->info, newtuple, oldtuple, &rows);
	/*
	 * Long values of user tables go after the Change in pieces when asked for
	 * (the text twin writes every value whole); dblogd reads requests whole.
	 */
	data->fmt.pieces = data->pieces.threshold > 0 && !data->fmt.text && !entry->bookkeeping
		? &data->pieces : NULL;
	data->pieces.values = NIL;
	data->writer->change(&data->batch, &data->fmt, &data->txn, ++data->seq, change->lsn,
						 kind, relation, &entry->info, &rows);
	event_written(ctx, data);
	if (data->pieces.values != NIL)
		write_split_values(ctx, data);

done:
	MemoryContextSwitchTo(old);
	MemoryContextReset(data->context);
}

/* TRUNCATE callback */
static void
dblog_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			   int nrelations, Relation relations[], ReorderBufferChange *change)
{
	DblogData  *data = ctx->output_plugin_private;
	MemoryContext old = MemoryContextSwitchTo(data->context);
	RelInfo   **infos = palloc(sizeof(RelInfo *) * nrelations);
	Relation   *published = palloc(sizeof(Relation) * nrelations);
	int			n = 0;

	for (int i = 0; i < nrelations; i++)
	{
		RelEntry   *entry = get_rel_entry(data, relations[i]);

		if (!entry->publish)
			continue;
		published[n] = relations[i];
		infos[n++] = &entry->info;
	}
	if (n > 0)
	{
		ensure_begin(ctx, data, txn);
		for (int i = 0; i < n; i++)
			ensure_relation(ctx, data, published[i], (RelEntry *) infos[i]);
		data->writer->truncate(&data->batch, &data->fmt, &data->txn, ++data->seq, change->lsn,
							   n, infos, change->data.truncate.cascade,
							   change->data.truncate.restart_seqs);
		event_written(ctx, data);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(data->context);
}

/* Does message_prefixes let a message with this prefix through? */
static bool
message_wanted(DblogData *data, const char *prefix)
{
	ListCell   *lc;

	if (!data->filter_messages)
		return true;
	foreach(lc, data->message_prefixes)
	{
		const char *wanted = lfirst(lc);

		if (strncmp(prefix, wanted, strlen(wanted)) == 0)
			return true;
	}
	return false;
}

/*
 * dblog.ddl messages
 *
 * A dblog.ddl message makes dblogd copy a table, so only the extension's
 * event trigger may write one that reaches it; but any role may call
 * pg_logical_emit_message with any prefix, and a forged message must neither
 * copy a table its writer could not move nor cost much (it can be sent many
 * times in one transaction). The trigger writes its message in the
 * transaction of the DDL it describes, and that DDL updated the table's
 * pg_class row (a rename, SET SCHEMA, SET LOGGED) or its schema's
 * pg_namespace row (ALTER SCHEMA RENAME). So a message is forwarded only
 * when:
 *	 - it is at most DBLOG_DDL_MESSAGE_MAX_BYTES long (checked first) and
 *	   spelled exactly as write_ddl_message spells the values it holds;
 *	 - its names fit its kind (a rename changes the name, not the schema, ...);
 *	 - one update by this transaction turned a version of that catalog row
 *	   with the old names (for set_logged: unlogged) into its successor with
 *	   the new ones, a permanent ordinary table (the trigger names no other).
 * Writing a catalog row without that change (a temporary table, a GRANT, a
 * foreign key, another ALTER) authenticates nothing, and the change takes the
 * table's or the schema's owner, who could make it for real anyway. The row
 * versions are read with SnapshotAny, not as the historic snapshot shows them
 * at the message's place: that may already show the transaction's later
 * commands (two renames of one table in one transaction).
 *
 * XXX: an update after the message, in the same transaction, counts too;
 * only who ran that DDL wrote it, and the trigger says the same of it then.
 */

/* kind values; DDL_NONE: anything else */
typedef enum DdlKind
{
	DDL_NONE,
	DDL_RENAME,
	DDL_SET_SCHEMA,
	DDL_RENAME_SCHEMA,
	DDL_SET_LOGGED
} DdlKind;

#define DDL_MEMBERS 6			/* oid, kind, old/new schema, old/new name */

/* A dblog.ddl message's content, as pg_parse_json hands it over. */
typedef struct DdlMessage
{
	JsonLexContext *lex;
	int			member;			/* being read: index into ddl_members, or -1 */
	char	   *values[DDL_MEMBERS];
	Oid			relid;
	DdlKind		kind;
} DdlMessage;

static const char *const ddl_members[DDL_MEMBERS] =
{"oid", "kind", "old_schema", "old_name", "new_schema", "new_name"};

#define DDL_KIND(m)			((m)->values[1])
#define DDL_OLD_SCHEMA(m)	((m)->values[2])
#define DDL_OLD_NAME(m)		((m)->values[3])
#define DDL_NEW_SCHEMA(m)	((m)->values[4])
#define DDL_NEW_NAME(m)		((m)->values[5])

static void
ddl_member_start(void *state, char *fname, bool isnull)
{
	DdlMessage *m = state;

	m->member = -1;
	for (int i = 0; i < DDL_MEMBERS; i++)
		if (strcmp(fname, ddl_members[i]) == 0)
			m->member = i;
}

static void
ddl_member_value(void *state, char *token, JsonTokenType type)
{
	DdlMessage *m = state;

	/* a repeated or unknown member, or a nested one, fails the comparison after */
	if (m->lex->lex_level == 1 && m->member >= 0 && m->values[m->member] == NULL)
		m->values[m->member] = token;
}

/* An oid as the trigger writes it (%u): digits, no leading zero, not 0. */
static Oid
ddl_oid(const char *digits)
{
	size_t		n = strspn(digits, "0123456789");
	unsigned long value;

	if (n == 0 || n > 10 || digits[n] != '\0' || digits[0] == '0')
		return InvalidOid;
	value = strtoul(digits, NULL, 10);
	return value > PG_UINT32_MAX ? InvalidOid : (Oid) value;
}

static DdlKind
ddl_kind(const char *kind)
{
	if (strcmp(kind, "rename") == 0)
		return DDL_RENAME;
	if (strcmp(kind, "set_schema") == 0)
		return DDL_SET_SCHEMA;
	if (strcmp(kind, "rename_schema") == 0)
		return DDL_RENAME_SCHEMA;
	if (strcmp(kind, "set_logged") == 0)
		return DDL_SET_LOGGED;
	return DDL_NONE;
}

/*
 * Reads a message into m; false unless it is byte for byte what the trigger
 * writes for the values read (ddl_message.h), so that nothing dblogd reads in
 * it escapes the checks below: no member twice, none other, no spacing.
 */
static bool
parse_ddl_message(const char *message, Size size, DdlMessage *m)
{
	JsonSemAction sem = {0};
	StringInfoData canonical;

	memset(m, 0, sizeof(DdlMessage));
	m->lex = makeJsonLexContextCstringLen((char *) message, (int) size,
										  GetDatabaseEncoding(), true);
	sem.semstate = m;
	sem.object_field_start = ddl_member_start;
	sem.scalar = ddl_member_value;
	if (pg_parse_json(m->lex, &sem) != JSON_SUCCESS)
		return false;
	for (int i = 0; i < DDL_MEMBERS; i++)
		if (m->values[i] == NULL)
			return false;
	m->relid = ddl_oid(m->values[0]);
	m->kind = ddl_kind(DDL_KIND(m));
	if (!OidIsValid(m->relid) || m->kind == DDL_NONE)
		return false;
	initStringInfo(&canonical);
	write_ddl_message(&canonical, m->relid, DDL_KIND(m), DDL_OLD_SCHEMA(m), DDL_OLD_NAME(m),
					  DDL_NEW_SCHEMA(m), DDL_NEW_NAME(m));
	return canonical.len == size && memcmp(canonical.data, message, size) == 0;
}

/*
 * The names the kind changes differ, the others are the same (as the
 * trigger writes them).
 */
static bool
ddl_names_fit_kind(const DdlMessage *m)
{
	bool		same_schema = strcmp(DDL_OLD_SCHEMA(m), DDL_NEW_SCHEMA(m)) == 0;
	bool		same_name = strcmp(DDL_OLD_NAME(m), DDL_NEW_NAME(m)) == 0;

	switch (m->kind)
	{
		case DDL_RENAME:
			return same_schema && !same_name;
		case DDL_SET_SCHEMA:
		case DDL_RENAME_SCHEMA:
			return !same_schema && same_name;
		case DDL_SET_LOGGED:
			return same_schema && same_name;
		default:
			return false;
	}
}

/* Is xid one of the decoded transaction's own (sub)transactions? */
static bool
own_xid(Snapshot snap, TransactionId xid)
{
	int32		i;

	for (i = 0; i < snap->subxcnt; i++)
		if (TransactionIdEquals(snap->subxip[i], xid))
			return true;
	return false;
}

/* Did the decoded transaction write this row version over (not only lock it)? */
static bool
written_over_here(HeapTuple tup)
{
	HeapTupleHeader htup = tup->t_data;

	if ((htup->t_infomask & HEAP_XMAX_INVALID) ||
		HEAP_XMAX_IS_LOCKED_ONLY(htup->t_infomask))
		return false;
	return own_xid(GetCatalogSnapshot(RelationRelationId),
				   HeapTupleHeaderGetUpdateXid(htup));
}

/*
 * The versions of the row with this oid in a catalog (pg_class or
 * pg_namespace, by their oid index): every one still there (the slot's
 * catalog_xmin keeps those of the transactions it has yet to decode), each
 * marked by whether the decoded transaction saw it: wrote it, wrote it over,
 * or sees it in the historic snapshot. Not "sees it at the message's place":
 * that snapshot may already show later commands of the transaction.
 */
/*
 * Versions of one catalog row read (live or dead), and of those matched (the
 * message's own transaction's), to authenticate a message; more: not
 * authentic.
 */
#define DBLOG_DDL_MAX_ROW_VERSIONS_READ 512
#define DBLOG_DDL_MAX_ROW_VERSIONS 64

typedef struct RowVersion
{
	HeapTuple	tup;
	bool		seen;
} RowVersion;

static List *
row_versions(Oid catalog, Oid oid_index, AttrNumber oid_attnum, Oid oid)
{
	Relation	rel = table_open(catalog, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	ItemPointerData visible;
	List	   *versions = NIL;
	int			walked = 0;

	ItemPointerSetInvalid(&visible);
	ScanKeyInit(&key, oid_attnum, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(oid));
	scan = systable_beginscan(rel, oid_index, true, NULL, 1, &key);
	if (HeapTupleIsValid(tup = systable_getnext(scan)))
		visible = tup->t_self;
	systable_endscan(scan);
	scan = systable_beginscan(rel, oid_index, true, SnapshotAny, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		RowVersion *v;
		bool		seen;

		/*
		 * Every message walks the row's versions, live and dead (the slot
		 * keeps dead ones), and matching them is quadratic: past these
		 * bounds (a table renamed back and forth many times) the message
		 * fails closed, so no role can make the walsender spend long on
		 * messages.
		 */
		if (++walked > DBLOG_DDL_MAX_ROW_VERSIONS_READ ||
			list_length(versions) >= DBLOG_DDL_MAX_ROW_VERSIONS)
		{
			list_free_deep(versions);
			versions = NIL;
			break;
		}
		/* only the versions this transaction saw are ever matched */
		seen = ItemPointerEquals(&tup->t_self, &visible) || written_over_here(tup) ||
			own_xid(GetCatalogSnapshot(RelationRelationId),
					HeapTupleHeaderGetXmin(tup->t_data));
		if (!seen)
			continue;
		v = palloc(sizeof(RowVersion));
		v->tup = heap_copytuple(tup);
		v->seen = true;
		versions = lappend(versions, v);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return versions;
}

/* Was the schema with this oid called name while the transaction ran? */
static bool
namespace_had_name(Oid nspid, const char *name)
{
	ListCell   *lc;

	foreach(lc, row_versions(NamespaceRelationId, NamespaceOidIndexId,
							 Anum_pg_namespace_oid, nspid))
	{
		RowVersion *v = lfirst(lc);

		if (v->seen &&
			strcmp(NameStr(((Form_pg_namespace) GETSTRUCT(v->tup))->nspname), name) == 0)
			return true;
	}
	return false;
}

typedef bool (*VersionTest) (HeapTuple tup, const DdlMessage *m);

/*
 * Did one update of this transaction turn a version that was_old into one
 * that is_new? The new version is the old one's successor (its t_ctid),
 * written by the same (sub)transaction, so the pair is one catalog update:
 * one DDL, not two unrelated writes.
 */
static bool
updated_here(List *versions, VersionTest was_old, VersionTest is_new, const DdlMessage *m)
{
	ListCell   *o;
	ListCell   *n;

	foreach(o, versions)
	{
		HeapTuple	old = ((RowVersion *) lfirst(o))->tup;

		if (!written_over_here(old) || !was_old(old, m))
			continue;
		foreach(n, versions)
		{
			HeapTuple	new = ((RowVersion *) lfirst(n))->tup;

			if (ItemPointerEquals(&old->t_data->t_ctid, &new->t_self) &&
				TransactionIdEquals(HeapTupleHeaderGetXmin(new->t_data),
									HeapTupleHeaderGetUpdateXid(old->t_data)) &&
				is_new(new, m))
				return true;
		}
	}
	return false;
}

static bool
class_was_old(HeapTuple tup, const DdlMessage *m)
{
	Form_pg_class was = (Form_pg_class) GETSTRUCT(tup);

	if (m->kind == DDL_SET_LOGGED && was->relpersistence != RELPERSISTENCE_UNLOGGED)
		return false;
	return strcmp(NameStr(was->relname), DDL_OLD_NAME(m)) == 0 &&
		namespace_had_name(was->relnamespace, DDL_OLD_SCHEMA(m));
}

/* What the trigger names: a permanent ordinary table, here with the new names. */
static bool
class_is_new(HeapTuple tup, const DdlMessage *m)
{
	Form_pg_class is = (Form_pg_class) GETSTRUCT(tup);

	return is->relkind == RELKIND_RELATION && is->relpersistence == RELPERSISTENCE_PERMANENT &&
		strcmp(NameStr(is->relname), DDL_NEW_NAME(m)) == 0 &&
		namespace_had_name(is->relnamespace, DDL_NEW_SCHEMA(m));
}

static bool
namespace_was_old(HeapTuple tup, const DdlMessage *m)
{
	return strcmp(NameStr(((Form_pg_namespace) GETSTRUCT(tup))->nspname),
				  DDL_OLD_SCHEMA(m)) == 0;
}

static bool
namespace_is_new(HeapTuple tup, const DdlMessage *m)
{
	return strcmp(NameStr(((Form_pg_namespace) GETSTRUCT(tup))->nspname),
				  DDL_NEW_SCHEMA(m)) == 0;
}

/*
 * rename_schema: the table, as the transaction saw it, is a permanent
 * ordinary table of that name in a schema that one of its updates renamed
 * from the old name to the new one.
 */
static bool
schema_renamed_here(List *class_versions, const DdlMessage *m)
{
	ListCell   *lc;

	foreach(lc, class_versions)
	{
		RowVersion *v = lfirst(lc);
		Form_pg_class form = (Form_pg_class) GETSTRUCT(v->tup);

		if (v->seen && form->relkind == RELKIND_RELATION &&
			form->relpersistence == RELPERSISTENCE_PERMANENT &&
			strcmp(NameStr(form->relname), DDL_NEW_NAME(m)) == 0 &&
			updated_here(row_versions(NamespaceRelationId, NamespaceOidIndexId,
									  Anum_pg_namespace_oid, form->relnamespace),
						 namespace_was_old, namespace_is_new, m))
			return true;
	}
	return false;
}

/* The checks in the comment above, cheapest first. */
static bool
ddl_message_authentic(const char *message, Size size)
{
	DdlMessage	m;
	List	   *versions;

	if (size > DBLOG_DDL_MESSAGE_MAX_BYTES || !parse_ddl_message(message, size, &m) ||
		!ddl_names_fit_kind(&m))
		return false;
	versions = row_versions(RelationRelationId, ClassOidIndexId, Anum_pg_class_oid, m.relid);
	if (m.kind == DDL_RENAME_SCHEMA)
		return schema_renamed_here(versions, &m);
	return updated_here(versions, class_was_old, class_is_new, &m);
}

/* MESSAGE callback */
static void
dblog_message(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  XLogRecPtr message_lsn, bool transactional,
			  const char *prefix, Size message_size, const char *message)
{
	DblogData  *data = ctx->output_plugin_private;
	MemoryContext old;
	Size		omitted = 0;
	bool		ddl;

	if (!message_wanted(data, prefix))
		return;
	ddl = strcmp(prefix, DBLOG_DDL_PREFIX) == 0;
	old = MemoryContextSwitchTo(data->context);
	if (ddl && !(transactional && ddl_message_authentic(message, message_size)))
		goto done;
	/* a DDL message is small (names) and useless without its content */
	if (!ddl && data->message_max_bytes > 0 && message_size > data->message_max_bytes)
	{
		/* say that it was there and how big, not what it held */
		omitted = message_size;
		message_size = 0;
	}
	if (transactional)
	{
		ensure_begin(ctx, data, txn);
		data->writer->message(&data->batch, &data->fmt, &data->txn, ++data->seq, message_lsn,
							  true, prefix, message, message_size, omitted);
		event_written(ctx, data);
	}
	else
	{
		/* decoded as it is read, outside any transaction's replay */
		flush_batch(ctx, data, false);
		data->writer->message(&data->batch, &data->fmt, NULL, 0, message_lsn,
							  false, prefix, message, message_size, omitted);
		flush_batch(ctx, data, true);
	}

done:
	MemoryContextSwitchTo(old);
	MemoryContextReset(data->context);
}

/* ORIGIN filter callback */
static bool
dblog_filter_origin(LogicalDecodingContext *ctx, RepOriginId origin_id)
{
	DblogData  *data = ctx->output_plugin_private;

	return data->skip_origins && origin_id != InvalidRepOriginId;
}
