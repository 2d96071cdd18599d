/*-------------------------------------------------------------------------
 *
 * ddl_trigger.c
 *		  dblog._ddl_trigger(): the extension's event trigger (ddl_command_end,
 *		  ALTER TABLE and ALTER SCHEMA) that tells dblogd, at the DDL's own place
 *		  in the log, which tables a rename or a SET SCHEMA moved: one
 *		  transactional logical message with prefix "dblog.ddl" per permanent
 *		  ordinary table, so that a table entering a consumer's scope by DDL is
 *		  copied (docs/operations.md, "Schema changes").
 *
 * The content is one JSON object (docs/operations.md, "Tables entering or
 * leaving a scope by DDL"):
 *	 {"oid":16384,"kind":"rename","old_schema":"s","old_name":"a",
 *	  "new_schema":"s","new_name":"b"}
 * kind: "rename" (ALTER TABLE ... RENAME TO), "set_schema" (ALTER TABLE ...
 * SET SCHEMA), "rename_schema" (ALTER SCHEMA ... RENAME TO: one message per
 * table of the schema), "set_logged" (ALTER TABLE ... SET LOGGED: an unlogged
 * table, which is never decoded, becomes a captured one; old and new names
 * are the same). Since any role may write a message with any prefix, the
 * output plugin forwards one only when it says what the catalog shows this
 * transaction did to that table (dblog.c, ddl_message_authentic).
 *
 * It also queues a whole-table repair (a row of dblog.request_queue, with its
 * reason) of every table whose existing rows the statement changed without
 * writing them, which the log therefore never carries (docs/operations.md,
 * "DDL that changes rows without writing them"): ALTER TABLE ... ADD COLUMN
 * with a default (a constant one is stored as the column's missing value, a
 * volatile one, a generated or an identity column rewrite the table; neither
 * is decoded), ALTER TABLE ... ALTER COLUMN ... TYPE (a rewrite, the values
 * converted), ALTER TYPE ... RENAME VALUE of an enum (every table with a
 * column whose type holds the enum: arrays, domains, composites, ranges).
 * Partitioned and inheritance parents are repaired through their tables. The
 * request commits with the DDL and reaches dblogd at the DDL's place in the
 * log, as every request does. The row is written by dblog._ddl_repair, which
 * only the extension's owner may run: the trigger runs it as that owner
 * (SECURITY_RESTRICTED_OPERATION), with oids it read from the catalogs and the
 * statement the server collected; no SQL function a role can call queues it.
 *
 * It runs as the role that ran the DDL (no SECURITY DEFINER: it reads the
 * catalogs through the caches and writes WAL, which needs no privilege), with
 * search_path pinned by its CREATE FUNCTION, and runs nothing a user can
 * define: one SPI statement naming pg_catalog's own function. It never fails
 * the user's DDL: whatever goes wrong inside is rolled back with its
 * subtransaction and becomes a WARNING (a cancel is not swallowed).
 *
 * IDENTIFICATION
 *		  plugin/ddl_trigger.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parse_func.h"
#include "replication/message.h"
#include "tcop/deparse_utility.h"
#include "utils/builtins.h"
#include "rewrite/rewriteHandler.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "ddl_message.h"
#include "guard.h"

PG_FUNCTION_INFO_V1(dblog_ddl_trigger);

void		_PG_init(void);

/* For tests only (superuser): the trigger fails inside, as an unexpected error would. */
static bool test_ddl_trigger_error = false;

static void note_commands(void);
static void note_command(CollectedCommand *cmd);
static void note_alter_table(CollectedCommand *cmd);
static void note_schema_rename(Oid nspid, const char *old_schema, const char *new_schema);
static void emit_ddl_message(Oid relid, const char *kind, const char *old_schema,
							 const char *old_name, const char *new_schema,
							 const char *new_name);
static bool is_captured_table(Oid relid);
static void note_rewritten_values(Oid relid, const char *reason);
static void note_enum_rename(Oid enumid, const char *reason);
static bool type_holds(Oid typid, Oid target, HTAB *memo, int depth);
static void queue_repairs(void);

/*
 * The tables of the current statement whose rows need a repair, with the
 * reason (several subcommands of one table joined), in the order seen.
 */
typedef struct RepairNote
{
	Oid			relid;
	StringInfoData reason;
} RepairNote;

static List *repair_notes = NIL;

/* type_holds's memo: does a value of typid contain the enum? */
typedef struct TypeHolds
{
	Oid			typid;
	bool		holds;
} TypeHolds;

void
_PG_init(void)
{
	DefineCustomBoolVariable("dblog.test_ddl_trigger_error",
							 "For tests: dblog's DDL event trigger fails inside (a WARNING).",
							 NULL, &test_ddl_trigger_error, false, PGC_SUSET,
							 GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL, NULL, NULL, NULL);
	dblog_guard_init();
}

/* EVENT TRIGGER function: ddl_command_end, tags ALTER TABLE and ALTER SCHEMA */
Datum
dblog_ddl_trigger(PG_FUNCTION_ARGS)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("dblog._ddl_trigger() may only be called as an event trigger")));
	/* without logical decoding nobody can read the message */
	if (!XLogLogicalInfoActive())
		PG_RETURN_NULL();

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		note_commands();
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		/* the user asked the statement to stop: it does */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			ReThrowError(edata);
		ereport(WARNING,
				(errmsg("dblog: the DDL is done, but dblogd was not told of it: %s",
						edata->message),
				 errhint("A table this statement moved into a consumer's scope, or whose rows it "
						 "changed, is not copied automatically; queue its copy with "
						 "dblog.repair('<table>').")));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	PG_RETURN_NULL();
}

/* Each command of the statement (ALTER TABLE may collect several). */
static void
note_commands(void)
{
	uint64		i;
	int			rc;

	if (test_ddl_trigger_error)
		elog(ERROR, "dblog.test_ddl_trigger_error is on");
	repair_notes = NIL;
	if ((rc = SPI_connect()) != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed: %s", SPI_result_code_string(rc));
	rc = SPI_execute("SELECT command FROM pg_catalog.pg_event_trigger_ddl_commands()", true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "reading pg_event_trigger_ddl_commands() failed: %s",
			 SPI_result_code_string(rc));
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
									  &isnull);

		if (!isnull)
			note_command((CollectedCommand *) DatumGetPointer(d));
	}
	queue_repairs();
	SPI_finish();
	repair_notes = NIL;
}

static void
note_command(CollectedCommand *cmd)
{
	if (cmd->type == SCT_AlterTable)
	{
		note_alter_table(cmd);
		return;
	}
	if (cmd->type != SCT_Simple || cmd->parsetree == NULL)
		return;
	if (IsA(cmd->parsetree, AlterEnumStmt))
	{
		AlterEnumStmt *stmt = (AlterEnumStmt *) cmd->parsetree;
		Oid			enumid = cmd->d.simple.address.objectId;

		if (stmt->oldVal != NULL && cmd->d.simple.address.classId == TypeRelationId &&
			OidIsValid(enumid))
		{
			char	   *reason = psprintf("ALTER TYPE %s RENAME VALUE",
										  format_type_be_qualified(enumid));

			note_enum_rename(enumid, reason);
		}
	}
	else if (IsA(cmd->parsetree, RenameStmt))
	{
		RenameStmt *stmt = (RenameStmt *) cmd->parsetree;
		Oid			objid = cmd->d.simple.address.objectId;

		if (stmt->renameType == OBJECT_TABLE && stmt->relation != NULL &&
			cmd->d.simple.address.classId == RelationRelationId && is_captured_table(objid))
		{
			char	   *schema = get_namespace_name(get_rel_namespace(objid));

			emit_ddl_message(objid, "rename", schema, stmt->relation->relname, schema,
							 stmt->newname);
		}
		else if (stmt->renameType == OBJECT_SCHEMA &&
				 cmd->d.simple.address.classId == NamespaceRelationId && OidIsValid(objid))
			note_schema_rename(objid, stmt->subname, stmt->newname);
	}
	else if (IsA(cmd->parsetree, AlterObjectSchemaStmt))
	{
		AlterObjectSchemaStmt *stmt = (AlterObjectSchemaStmt *) cmd->parsetree;
		Oid			objid = cmd->d.simple.address.objectId;
		Oid			old_nsp = cmd->d.simple.secondaryObject.objectId;

		if (stmt->objectType == OBJECT_TABLE &&
			cmd->d.simple.address.classId == RelationRelationId &&
			cmd->d.simple.secondaryObject.classId == NamespaceRelationId &&
			OidIsValid(old_nsp) && is_captured_table(objid))
		{
			char	   *old_schema = get_namespace_name(old_nsp);
			char	   *name = get_rel_name(objid);

			if (old_schema != NULL && name != NULL)
				emit_ddl_message(objid, "set_schema", old_schema, name,
								 get_namespace_name(get_rel_namespace(objid)), name);
		}
	}
}

/*
 * ALTER TABLE ... SET LOGGED: an unlogged table (never decoded, never copied)
 * becomes one dblog captures, under the same name. ADD COLUMN with a default
 * and ALTER COLUMN ... TYPE: the rows' values change without being written.
 */
static void
note_alter_table(CollectedCommand *cmd)
{
	ListCell   *lc;
	Oid			relid = cmd->d.alterTable.objectId;
	bool		set_logged_noted = false;

	if (cmd->d.alterTable.classId != RelationRelationId)
		return;
	foreach(lc, cmd->d.alterTable.subcmds)
	{
		CollectedATSubcmd *sub = lfirst(lc);
		AlterTableCmd *atc;

		if (sub->parsetree == NULL || !IsA(sub->parsetree, AlterTableCmd))
			continue;
		atc = (AlterTableCmd *) sub->parsetree;
		if (atc->subtype == AT_SetLogged && !set_logged_noted && is_captured_table(relid))
		{
			char	   *schema = get_namespace_name(get_rel_namespace(relid));
			char	   *name = get_rel_name(relid);

			emit_ddl_message(relid, "set_logged", schema, name, schema, name);
			set_logged_noted = true;
		}
		else if ((atc->subtype == AT_AddColumn || atc->subtype == AT_AddColumnRecurse) &&
				 sub->address.classId == RelationRelationId &&
				 OidIsValid(sub->address.objectId) && sub->address.objectSubId > 0)
		{
			/* the column as added: a default, an identity or a generation expression */
			Oid			target = sub->address.objectId;
			AttrNumber	attnum = (AttrNumber) sub->address.objectSubId;
			Relation	rel;
			Node	   *fill;
			const char *what = "DEFAULT";
			char	   *colname;

			if (get_rel_relkind(target) != RELKIND_RELATION &&
				get_rel_relkind(target) != RELKIND_PARTITIONED_TABLE)
				continue;
			rel = table_open(target, AccessShareLock);
			if (attnum > RelationGetNumberOfAttributes(rel))
			{
				table_close(rel, AccessShareLock);
				continue;
			}
			fill = build_column_default(rel, attnum);
			if (TupleDescAttr(rel->rd_att, attnum - 1)->attidentity)
				what = "IDENTITY";
			else if (TupleDescAttr(rel->rd_att, attnum - 1)->attgenerated)
				what = "GENERATED";
			colname = pstrdup(NameStr(TupleDescAttr(rel->rd_att, attnum - 1)->attname));
			table_close(rel, AccessShareLock);
			/* no default, or DEFAULT NULL: every row reads NULL, as the consumer has it */
			if (fill == NULL || (IsA(fill, Const) && ((Const *) fill)->constisnull))
				continue;
			note_rewritten_values(target, psprintf("ALTER TABLE ADD COLUMN %s %s",
												   quote_identifier(colname), what));
		}
		else if (atc->subtype == AT_AlterColumnType && atc->name != NULL)
		{
			ColumnDef  *def = (ColumnDef *) atc->def;
			bool		using = def != NULL && IsA(def, ColumnDef) && def->raw_default != NULL;
			Oid			target = sub->address.classId == RelationRelationId &&
				OidIsValid(sub->address.objectId) ? sub->address.objectId : relid;

			note_rewritten_values(target, psprintf("ALTER TABLE ALTER COLUMN %s TYPE%s",
												  quote_identifier(atc->name),
												  using ? " USING" : ""));
		}
	}
}

/*
 * relid's rows (those of every table under it, for a partitioned or an
 * inheritance parent) were changed in place: note them for a repair.
 */
static void
note_rewritten_values(Oid relid, const char *reason)
{
	List	   *rels;
	ListCell   *lc;

	if (!OidIsValid(relid))
		return;
	rels = find_all_inheritors(relid, NoLock, NULL);
	foreach(lc, rels)
	{
		Oid			r = lfirst_oid(lc);
		ListCell   *n;
		RepairNote *note = NULL;

		if (!is_captured_table(r))
			continue;
		foreach(n, repair_notes)
		{
			if (((RepairNote *) lfirst(n))->relid == r)
				note = lfirst(n);
		}
		if (note == NULL)
		{
			note = palloc0(sizeof(RepairNote));
			note->relid = r;
			initStringInfo(&note->reason);
			repair_notes = lappend(repair_notes, note);
		}
		if (strstr(note->reason.data, reason) == NULL)
		{
			if (note->reason.len > 0)
				appendStringInfoString(&note->reason, ", ");
			appendStringInfoString(&note->reason, reason);
		}
	}
}

/*
 * ALTER TYPE ... RENAME VALUE: every ordinary table with a column whose type
 * holds the enum (itself, an array, a domain, a composite, a range of it).
 */
static void
note_enum_rename(Oid enumid, const char *reason)
{
	HASHCTL		ctl;
	HTAB	   *memo;
	Relation	attrel;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *tables = NIL;
	ListCell   *lc;

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(TypeHolds);
	ctl.hcxt = CurrentMemoryContext;
	memo = hash_create("dblog enum holders", 64, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	attrel = table_open(AttributeRelationId, AccessShareLock);
	scan = systable_beginscan(attrel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_attribute att = (Form_pg_attribute) GETSTRUCT(tup);

		if (att->attnum <= 0 || att->attisdropped || att->attrelid < FirstNormalObjectId)
			continue;
		if (list_member_oid(tables, att->attrelid))
			continue;
		if (type_holds(att->atttypid, enumid, memo, 0))
			tables = lappend_oid(tables, att->attrelid);
	}
	systable_endscan(scan);
	table_close(attrel, AccessShareLock);
	hash_destroy(memo);
	foreach(lc, tables)
	{
		Oid			relid = lfirst_oid(lc);

		/* a composite type's own row, a view, an index: not a table with rows */
		if (is_captured_table(relid))
			note_rewritten_values(relid, reason);
	}
}

/* Does a value of typid contain a value of target? (memoized; depth-bounded) */
static bool
type_holds(Oid typid, Oid target, HTAB *memo, int depth)
{
	bool		found;
	TypeHolds  *entry;
	HeapTuple	tup;
	Form_pg_type typ;
	bool		holds = false;

	if (typid == target)
		return true;
	/* a built-in type holds no user type (an array of one is a user type too) */
	if (typid < FirstNormalObjectId || depth > 32)
		return false;
	entry = hash_search(memo, &typid, HASH_FIND, &found);
	if (found)
		return entry->holds;
	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tup))
		return false;
	typ = (Form_pg_type) GETSTRUCT(tup);
	if (typ->typtype == TYPTYPE_DOMAIN)
		holds = type_holds(typ->typbasetype, target, memo, depth + 1);
	else if (OidIsValid(typ->typelem) && IsTrueArrayType(typ))
		holds = type_holds(typ->typelem, target, memo, depth + 1);
	else if (typ->typtype == TYPTYPE_RANGE)
		holds = type_holds(get_range_subtype(typid), target, memo, depth + 1);
	else if (typ->typtype == TYPTYPE_MULTIRANGE)
		holds = type_holds(get_multirange_range(typid), target, memo, depth + 1);
	else if (typ->typtype == TYPTYPE_COMPOSITE && OidIsValid(typ->typrelid))
	{
		Oid			typrelid = typ->typrelid;
		Relation	attrel = table_open(AttributeRelationId, AccessShareLock);
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	atup;

		ScanKeyInit(&key, Anum_pg_attribute_attrelid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(typrelid));
		scan = systable_beginscan(attrel, AttributeRelidNumIndexId, true, NULL, 1, &key);
		while (!holds && HeapTupleIsValid(atup = systable_getnext(scan)))
		{
			Form_pg_attribute att = (Form_pg_attribute) GETSTRUCT(atup);

			if (att->attnum > 0 && !att->attisdropped)
				holds = type_holds(att->atttypid, target, memo, depth + 1);
		}
		systable_endscan(scan);
		table_close(attrel, AccessShareLock);
	}
	ReleaseSysCache(tup);
	entry = hash_search(memo, &typid, HASH_ENTER, &found);
	entry->holds = holds;
	return holds;
}

/*
 * Queues the noted repairs through dblog._ddl_repair, run as the extension's
 * owner (only it may), in the DDL's transaction. An extension not yet updated
 * to 0.5 has no such function: nothing is queued (docs/operations.md).
 */
static void
queue_repairs(void)
{
	Oid			extoid;
	Oid			extnsp = InvalidOid;
	Oid			extowner = InvalidOid;
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Oid			save_userid;
	int			save_sec_context;
	ListCell   *lc;
	SPIPlanPtr	plan;

	if (repair_notes == NIL)
		return;
	extoid = get_extension_oid("dblog", true);
	if (!OidIsValid(extoid))
		return;
	{
		Relation	extrel = table_open(ExtensionRelationId, AccessShareLock);
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tup;

		ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(extoid));
		scan = systable_beginscan(extrel, ExtensionOidIndexId, true, NULL, 1, &key);
		if (HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			extowner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
			extnsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
		}
		systable_endscan(scan);
		table_close(extrel, AccessShareLock);
	}
	if (!OidIsValid(extowner) || !OidIsValid(extnsp))
		return;
	/* 0.4 and older: no _ddl_repair */
	{
		List	   *name = list_make2(makeString(get_namespace_name(extnsp)),
									  makeString("_ddl_repair"));

		if (!OidIsValid(LookupFuncName(name, 2, argtypes, true)))
			return;
	}

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(extowner, save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	PG_TRY();
	{
		char	   *sql = psprintf("SELECT %s._ddl_repair($1, $2)",
								   quote_identifier(get_namespace_name(extnsp)));

		plan = SPI_prepare(sql, 2, argtypes);
		if (plan == NULL)
			elog(ERROR, "preparing dblog._ddl_repair failed: %s",
				 SPI_result_code_string(SPI_result));
		foreach(lc, repair_notes)
		{
			RepairNote *note = lfirst(lc);
			Datum		values[2];
			int			rc;

			/* dblog's own tables are its bookkeeping, never repaired */
			if (get_rel_namespace(note->relid) == extnsp)
				continue;
			values[0] = ObjectIdGetDatum(note->relid);
			values[1] = CStringGetTextDatum(note->reason.data);
			rc = SPI_execute_plan(plan, values, NULL, false, 0);
			if (rc != SPI_OK_SELECT)
				elog(ERROR, "dblog._ddl_repair failed: %s", SPI_result_code_string(rc));
		}
	}
	PG_FINALLY();
	{
		SetUserIdAndSecContext(save_userid, save_sec_context);
	}
	PG_END_TRY();
}

/* Every permanent ordinary table of the renamed schema. */
static void
note_schema_rename(Oid nspid, const char *old_schema, const char *new_schema)
{
	Relation	rel = table_open(RelationRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	ScanKeyInit(&key, Anum_pg_class_relnamespace, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(nspid));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tup);

		if (form->relkind == RELKIND_RELATION && form->relpersistence == RELPERSISTENCE_PERMANENT)
			emit_ddl_message(form->oid, "rename_schema", old_schema, NameStr(form->relname),
							 new_schema, NameStr(form->relname));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
}

/* What dblog captures: permanent ordinary tables (partitions included). */
static bool
is_captured_table(Oid relid)
{
	HeapTuple	tup;
	bool		captured;

	if (!OidIsValid(relid))
		return false;
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		return false;
	captured = ((Form_pg_class) GETSTRUCT(tup))->relkind == RELKIND_RELATION &&
		((Form_pg_class) GETSTRUCT(tup))->relpersistence == RELPERSISTENCE_PERMANENT;
	ReleaseSysCache(tup);
	return captured;
}

/* The message's one spelling (ddl_message.h): the plugin compares against it. */
void
write_ddl_message(StringInfo buf, Oid relid, const char *kind, const char *old_schema,
				  const char *old_name, const char *new_schema, const char *new_name)
{
	appendStringInfo(buf, "{\"oid\":%u,\"kind\":", relid);
	escape_json(buf, kind);
	appendStringInfoString(buf, ",\"old_schema\":");
	escape_json(buf, old_schema);
	appendStringInfoString(buf, ",\"old_name\":");
	escape_json(buf, old_name);
	appendStringInfoString(buf, ",\"new_schema\":");
	escape_json(buf, new_schema);
	appendStringInfoString(buf, ",\"new_name\":");
	escape_json(buf, new_name);
	appendStringInfoChar(buf, '}');
}

static void
emit_ddl_message(Oid relid, const char *kind, const char *old_schema, const char *old_name,
				 const char *new_schema, const char *new_name)
{
	StringInfoData buf;

	if (old_schema == NULL || old_name == NULL || new_schema == NULL || new_name == NULL)
		return;
	initStringInfo(&buf);
	write_ddl_message(&buf, relid, kind, old_schema, old_name, new_schema, new_name);
	LogLogicalMessage(DBLOG_DDL_PREFIX, buf.data, buf.len, true);
	pfree(buf.data);
}
