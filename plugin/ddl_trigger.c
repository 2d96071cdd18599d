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
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "replication/message.h"
#include "tcop/deparse_utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
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
				 errhint("A table this statement moved into a consumer's scope is not copied "
						 "automatically; queue its copy with dblog.repair('<table>').")));
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
	SPI_finish();
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
	if (IsA(cmd->parsetree, RenameStmt))
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
 * becomes one dblog captures, under the same name.
 */
static void
note_alter_table(CollectedCommand *cmd)
{
	ListCell   *lc;
	Oid			relid = cmd->d.alterTable.objectId;

	if (cmd->d.alterTable.classId != RelationRelationId)
		return;
	foreach(lc, cmd->d.alterTable.subcmds)
	{
		CollectedATSubcmd *sub = lfirst(lc);

		if (sub->parsetree != NULL && IsA(sub->parsetree, AlterTableCmd) &&
			((AlterTableCmd *) sub->parsetree)->subtype == AT_SetLogged &&
			is_captured_table(relid))
		{
			char	   *schema = get_namespace_name(get_rel_namespace(relid));
			char	   *name = get_rel_name(relid);

			emit_ddl_message(relid, "set_logged", schema, name, schema, name);
			return;
		}
	}
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
