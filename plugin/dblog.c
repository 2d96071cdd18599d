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

#include "messages.h"
#include "scope_match.h"

PG_MODULE_MAGIC;

#define DBLOG_PROTO_VERSION_MIN 1
#define DBLOG_PROTO_VERSION_MAX 1
#define DBLOG_SCHEMA "dblog"
#define DBLOG_CONTROL_TABLE "request_queue"

/*
 * The extension's event trigger (ddl_trigger.c) tells dblogd of renames with
 * messages of this prefix; one is sent only when its transaction did change
 * the table it names (ddl_message_authentic).
 */
#define DBLOG_DDL_PREFIX "dblog.ddl"

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
static Oid	ddl_message_relid(const char *message, Size size);
static bool catalog_row_xmin(Oid catalog, Oid oid_index, AttrNumber oid_attnum, Oid oid,
							 TransactionId *xmin, Oid *relnamespace);
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

/* A whole number of bytes from 0 to max, or an error naming the option. */
static long
byte_count_option(DefElem *elem, long max)
{
	char	   *v = option_string(elem);
	char	   *end;
	long		bytes;

	errno = 0;
	bytes = strtol(v, &end, 10);
	if (errno != 0 || *end != '\0' || end == v || bytes < 0 || bytes > max)
		bad_value(elem, psprintf("whole numbers from 0 to %ld", max));
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
				max_message_seen = false;

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
			data->batch_bytes = (int) byte_count_option(elem, MaxAllocSize / 4);
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
			data->message_max_bytes = (Size) byte_count_option(elem, MaxAllocSize);
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
	data->writer->change(&data->batch, &data->fmt, &data->txn, ++data->seq, change->lsn,
						 kind, relation, &entry->info, &rows);
	event_written(ctx, data);

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

/*
 * The table a dblog.ddl message names: its content starts {"oid":N
 * (ddl_trigger.c). InvalidOid for anything else.
 */
static Oid
ddl_message_relid(const char *message, Size size)
{
	static const char head[] = "{\"oid\":";
	char		digits[16];
	Size		n = 0;

	if (size <= sizeof(head) - 1 || memcmp(message, head, sizeof(head) - 1) != 0)
		return InvalidOid;
	message += sizeof(head) - 1;
	size -= sizeof(head) - 1;
	while (n < size && n < sizeof(digits) - 1 && message[n] >= '0' && message[n] <= '9')
	{
		digits[n] = message[n];
		n++;
	}
	if (n == 0 || n == sizeof(digits) - 1)
		return InvalidOid;
	digits[n] = '\0';
	return (Oid) strtoul(digits, NULL, 10);
}

/*
 * The xmin of the row with this oid in a catalog (pg_class or pg_namespace,
 * by their oid index), as the historic snapshot sees it; for a pg_class row,
 * also the table's schema. False when there is no such row.
 */
static bool
catalog_row_xmin(Oid catalog, Oid oid_index, AttrNumber oid_attnum, Oid oid,
				 TransactionId *xmin, Oid *relnamespace)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found = false;

	Assert(relnamespace == NULL || catalog == RelationRelationId);
	rel = table_open(catalog, AccessShareLock);
	ScanKeyInit(&key, oid_attnum, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(oid));
	scan = systable_beginscan(rel, oid_index, true, NULL, 1, &key);
	if (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		found = true;
		*xmin = HeapTupleHeaderGetXmin(tup->t_data);
		if (relnamespace)
			*relnamespace = ((Form_pg_class) GETSTRUCT(tup))->relnamespace;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * A dblog.ddl message makes dblogd copy a table, so only the extension's event
 * trigger may write one that reaches it; but any role may call
 * pg_logical_emit_message with any prefix. The trigger writes its message in
 * the transaction of the DDL it describes, so the table's pg_class row (a
 * rename, SET SCHEMA) or its schema's pg_namespace row (ALTER SCHEMA RENAME)
 * was written by that same transaction: in the historic catalog at the
 * message's place, the row's xmin is one of the transaction's own xids.
 * Writing either row takes the table's or the schema's owner (or a privilege
 * on it), who could rename it for real anyway. The content starts
 * {"oid":N (ddl_trigger.c); anything else is dropped.
 */
static bool
ddl_message_authentic(const char *message, Size size)
{
	Oid			relid = ddl_message_relid(message, size);
	Oid			nspid;
	TransactionId xmin;
	Snapshot	snap;

	if (!OidIsValid(relid))
		return false;
	snap = GetCatalogSnapshot(RelationRelationId);	/* the historic snapshot */
	if (!catalog_row_xmin(RelationRelationId, ClassOidIndexId, Anum_pg_class_oid, relid,
						  &xmin, &nspid))
		return false;
	if (own_xid(snap, xmin))
		return true;
	return catalog_row_xmin(NamespaceRelationId, NamespaceOidIndexId, Anum_pg_namespace_oid,
							nspid, &xmin, NULL) &&
		own_xid(snap, xmin);
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
	if (ddl && !(transactional && ddl_message_authentic(message, message_size)))
		return;
	/* a DDL message is small (names) and useless without its content */
	if (!ddl && data->message_max_bytes > 0 && message_size > data->message_max_bytes)
	{
		/* say that it was there and how big, not what it held */
		omitted = message_size;
		message_size = 0;
	}
	old = MemoryContextSwitchTo(data->context);
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
