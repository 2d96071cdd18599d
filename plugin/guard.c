/*-------------------------------------------------------------------------
 *
 * guard.c
 *		  dblog._bind_relation(oid): binds the statements that dblogd runs
 *		  on a user table (a repair's chunk, a bootstrap's COPY) to the table
 *		  by its oid, so that no name can make them read something else.
 *
 * dblogd names a table in SQL text (there is no syntax for "the relation with
 * oid N"), and a name is resolved again by every statement: while dblogd waits
 * for a lock, the table's owner can rename it and put a view of the same name
 * in its place, or rename its schema and bring another one with the same name,
 * or put a domain with a CHECK of its own under the name of a key's type. The
 * view's function, the domain's check would then run as dblogd's role.
 *
 * So dblogd first calls dblog._bind_relation(oid) in the transaction, which
 *	 - checks that the caller may read the table (before locking it, as
 *	   PostgreSQL does, so that nobody can block DDL on a table they cannot
 *	   read), takes ACCESS SHARE on it by oid and checks after the lock that it
 *	   is still an ordinary table;
 *	 - refuses a table that runs code of its owner's when any role merely
 *	   plans a query on it: an index expression, index predicate or extended
 *	   statistics expression that calls a user-defined function the planner
 *	   evaluates (constant arguments) or inlines (LANGUAGE sql);
 *	 - returns the table's name as it is now (under the lock the table cannot
 *	   be renamed or moved; its schema still can be, which the guard catches);
 *	 - and, until the transaction ends, checks every statement of the session
 *	   after parse analysis, before the rewriter, planner or executor run any
 *	   of it: the only relations it may name are the bound tables, system
 *	   catalogs and dblog's own; the only functions and operators it may call
 *	   are built-in ones and dblog's; every constant and every coercion has a
 *	   built-in type or a column type of a bound table, and no domain. A view
 *	   or a foreign table, a function of the owner's, a domain swapped in:
 *	   the statement fails before any of it runs.
 *
 * Row-level security policies are not seen here (the rewriter adds them):
 * dblogd runs with row_security = off, which makes a statement that a policy
 * would filter fail instead (sidecar/pg/connection.cc).
 *
 * IDENTIFICATION
 *		  plugin/guard.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_statistic_ext.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "access/relation.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "guard.h"

PG_FUNCTION_INFO_V1(dblog_bind_relation);

/* The transaction's bound tables and the types of their columns (TopTransactionContext). */
static List *bound_relids = NIL;
static List *bound_types = NIL;
static bool callback_registered = false;
static post_parse_analyze_hook_type prev_post_parse_analyze_hook = NULL;

static Oid
dblog_namespace(void)
{
	return get_namespace_oid("dblog", true);
}

/* Built in (an initdb object), or dblog's own (its schema is the extension's). */
static bool
trusted_object(Oid objid, Oid nspid)
{
	return objid < FirstNormalObjectId ||
		(OidIsValid(nspid) && nspid == dblog_namespace());
}

static bool
trusted_function(Oid funcid)
{
	return trusted_object(funcid, get_func_namespace(funcid));
}

/*
 * A domain's checks are its owner's code, run whenever a value is read as the
 * domain: also as a field of a composite, an element of an array, a bound of
 * a range.
 */
static bool
type_contains_domain(Oid typid, int depth)
{
	HeapTuple	tup;
	Form_pg_type form;
	bool		contains = false;

	check_stack_depth();
	if (depth > 64)
		return true;			/* fail closed */
	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tup))
		return true;
	form = (Form_pg_type) GETSTRUCT(tup);
	if (form->typtype == TYPTYPE_DOMAIN)
		contains = true;
	else if (OidIsValid(form->typelem) && form->typlen == -1)
		contains = type_contains_domain(form->typelem, depth + 1);
	else if (form->typtype == TYPTYPE_COMPOSITE && OidIsValid(form->typrelid))
	{
		Relation	rel = relation_open(form->typrelid, AccessShareLock);
		TupleDesc	desc = RelationGetDescr(rel);

		for (int i = 0; i < desc->natts && !contains; i++)
			if (!TupleDescAttr(desc, i)->attisdropped)
				contains = type_contains_domain(TupleDescAttr(desc, i)->atttypid, depth + 1);
		relation_close(rel, AccessShareLock);
	}
	else if (form->typtype == TYPTYPE_RANGE)
		contains = type_contains_domain(get_range_subtype(typid), depth + 1);
	else if (form->typtype == TYPTYPE_MULTIRANGE)
		contains = type_contains_domain(get_multirange_range(typid), depth + 1);
	ReleaseSysCache(tup);
	return contains;
}

/* A function whose code a superuser chose: built in, dblog's, or owned by a superuser. */
static bool
superuser_function(Oid funcid, Oid *language)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	bool		trusted;

	*language = InvalidOid;
	if (!HeapTupleIsValid(tup))
		return false;
	*language = ((Form_pg_proc) GETSTRUCT(tup))->prolang;
	trusted = trusted_function(funcid) || superuser_arg(((Form_pg_proc) GETSTRUCT(tup))->proowner);
	ReleaseSysCache(tup);
	return trusted;
}

bool
dblog_type_contains_domain(Oid typid)
{
	return type_contains_domain(typid, 0);
}

static bool
trusted_type(Oid typid)
{
	return typid < FirstNormalObjectId || list_member_oid(bound_types, typid);
}

static void
refuse(const char *what, const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("dblog: a statement on a bound table names %s %s, which is neither the "
					"table being read nor built in", what, name),
			 errdetail("A name resolved earlier may now name something else (a view, another "
					   "schema's table, a type swapped in): nothing of the statement ran.")));
}

static void
check_operator(Oid opno)
{
	if (!trusted_object(opno, InvalidOid) || !trusted_function(get_opcode(opno)))
		refuse("operator", format_operator(opno));
}

/* An expression node of a statement under the guard. */
static void
check_expression(Node *node)
{
	switch (nodeTag(node))
	{
		case T_FuncExpr:
			if (!trusted_function(((FuncExpr *) node)->funcid))
				refuse("function", format_procedure(((FuncExpr *) node)->funcid));
			break;
		case T_OpExpr:
		case T_DistinctExpr:
		case T_NullIfExpr:
			check_operator(((OpExpr *) node)->opno);
			break;
		case T_ScalarArrayOpExpr:
			check_operator(((ScalarArrayOpExpr *) node)->opno);
			break;
		case T_RowCompareExpr:
			{
				ListCell   *lc;

				foreach(lc, ((RowCompareExpr *) node)->opnos)
					check_operator(lfirst_oid(lc));
				break;
			}
		case T_Aggref:
			if (!trusted_function(((Aggref *) node)->aggfnoid))
				refuse("aggregate", format_procedure(((Aggref *) node)->aggfnoid));
			break;
		case T_WindowFunc:
			if (!trusted_function(((WindowFunc *) node)->winfnoid))
				refuse("window function", format_procedure(((WindowFunc *) node)->winfnoid));
			break;
		case T_Const:
		case T_CoerceViaIO:
		case T_ArrayCoerceExpr:
		case T_RelabelType:
		case T_ConvertRowtypeExpr:
			if (!trusted_type(exprType(node)))
				refuse("type", format_type_be(exprType(node)));
			break;
		case T_CoerceToDomain:
			/* a domain's checks are its owner's code: dblogd never coerces to one */
			refuse("domain", format_type_be(((CoerceToDomain *) node)->resulttype));
			break;
		default:
			break;
	}
}

static bool
guard_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, guard_walker, context,
								 QTW_EXAMINE_RTES_BEFORE);
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION && !list_member_oid(bound_relids, rte->relid) &&
			!trusted_object(rte->relid, get_rel_namespace(rte->relid)))
			refuse("relation", quote_qualified_identifier(get_namespace_name(get_rel_namespace(rte->relid)),
														  get_rel_name(rte->relid)));
		return false;
	}
	check_expression(node);
	return expression_tree_walker(node, guard_walker, context);
}

static void
guard_post_parse_analyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (prev_post_parse_analyze_hook)
		prev_post_parse_analyze_hook(pstate, query, jstate);
	if (bound_relids != NIL)
		(void) guard_walker((Node *) query, NULL);
}

static void
guard_xact_callback(XactEvent event, void *arg)
{
	/* the lists lived in TopTransactionContext, which is gone or going */
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		bound_relids = NIL;
		bound_types = NIL;
	}
}

void
dblog_guard_init(void)
{
	prev_post_parse_analyze_hook = post_parse_analyze_hook;
	post_parse_analyze_hook = guard_post_parse_analyze;
}

/*
 * Would planning a query on the table run code that is not a superuser's? The
 * planner (through the relcache) folds calls whose arguments hold no column
 * and inlines SQL functions, whose bodies may hold such calls.
 */
/* The function a call or an operator node runs, and its arguments; InvalidOid for others. */
static Oid
called_function(Node *node, List **args)
{
	if (IsA(node, FuncExpr))
	{
		*args = ((FuncExpr *) node)->args;
		return ((FuncExpr *) node)->funcid;
	}
	if (IsA(node, OpExpr) || IsA(node, DistinctExpr) || IsA(node, NullIfExpr))
	{
		*args = ((OpExpr *) node)->args;
		return get_opcode(((OpExpr *) node)->opno);
	}
	if (IsA(node, ScalarArrayOpExpr))
	{
		*args = ((ScalarArrayOpExpr *) node)->args;
		return get_opcode(((ScalarArrayOpExpr *) node)->opno);
	}
	*args = NIL;
	return InvalidOid;
}

/*
 * In an index predicate, any function or operator that is not a superuser's:
 * the planner estimates a predicate's selectivity when the query's clauses
 * imply it, and an estimator (eqsel, scalarltsel) calls the operator's
 * function on the column's statistics, whatever its arguments.
 */
static bool
runs_in_predicate(Node *node, void *context)
{
	List	   *args;
	Oid			language;
	Oid			funcid;

	if (node == NULL)
		return false;
	funcid = called_function(node, &args);
	if (OidIsValid(funcid) && !superuser_function(funcid, &language))
	{
		*(Oid *) context = funcid;
		return true;
	}
	return expression_tree_walker(node, runs_in_predicate, context);
}

static bool
runs_when_planned(Node *node, void *context)
{
	List	   *args;
	Oid			language;
	Oid			funcid;

	if (node == NULL)
		return false;
	funcid = called_function(node, &args);
	if (OidIsValid(funcid) && !superuser_function(funcid, &language) &&
		(language == SQLlanguageId || !contain_var_clause((Node *) args)))
	{
		*(Oid *) context = funcid;
		return true;
	}
	return expression_tree_walker(node, runs_when_planned, context);
}

static void
refuse_planned_code(Relation rel, const char *where, Node *expr, bool predicate)
{
	Oid			funcid = InvalidOid;

	if (expr != NULL &&
		(predicate ? runs_in_predicate(expr, &funcid) : runs_when_planned(expr, &funcid)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("dblog: table %s has %s that runs function %s when any role plans a "
						"query on it",
						quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												   RelationGetRelationName(rel)), where,
						format_procedure(funcid)),
				 errdetail("dblogd reads the table with its own privileges and does not run "
						   "code its owner chose: the function is called with constant "
						   "arguments (the planner evaluates it) or is LANGUAGE sql (the "
						   "planner inlines it)."),
				 errhint("Have a superuser own the function, or drop the index or statistics "
						 "object, then retry.")));
}

/* The stored (unevaluated) expression of a catalog row, or NULL. */
static Node *
stored_expression(HeapTuple tup, int cacheid, AttrNumber attnum)
{
	bool		isnull;
	Datum		d = SysCacheGetAttr(cacheid, tup, attnum, &isnull);

	return isnull ? NULL : (Node *) stringToNode(TextDatumGetCString(d));
}

static void
refuse_planned_code_of(Relation rel)
{
	ListCell   *lc;
	List	   *indexes = RelationGetIndexList(rel);
	List	   *stats = RelationGetStatExtList(rel);

	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));

		if (!HeapTupleIsValid(tup))
			continue;
		refuse_planned_code(rel, "an index expression",
							stored_expression(tup, INDEXRELID, Anum_pg_index_indexprs), false);
		refuse_planned_code(rel, "an index predicate",
							stored_expression(tup, INDEXRELID, Anum_pg_index_indpred), true);
		ReleaseSysCache(tup);
	}
	foreach(lc, stats)
	{
		HeapTuple	tup = SearchSysCache1(STATEXTOID, ObjectIdGetDatum(lfirst_oid(lc)));

		if (!HeapTupleIsValid(tup))
			continue;
		refuse_planned_code(rel, "a statistics expression",
							stored_expression(tup, STATEXTOID, Anum_pg_statistic_ext_stxexprs),
							false);
		ReleaseSysCache(tup);
	}
	list_free(indexes);
	list_free(stats);
}

/* Remember the table and its column types until the transaction ends. */
static void
bind(Relation rel)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;

	if (!callback_registered)
	{
		RegisterXactCallback(guard_xact_callback, NULL);
		callback_registered = true;
	}
	bound_relids = list_append_unique_oid(bound_relids, RelationGetRelid(rel));
	bound_types = list_append_unique_oid(bound_types, rel->rd_rel->reltype);
	/* a type with a domain inside is never one dblogd's statements name */
	for (i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped &&
			!type_contains_domain(TupleDescAttr(desc, i)->atttypid, 0))
			bound_types = list_append_unique_oid(bound_types, TupleDescAttr(desc, i)->atttypid);
	MemoryContextSwitchTo(old);
}

/*
 * dblog._bind_relation(oid) RETURNS text: lock the table by oid, check it,
 * bind the transaction's statements to it, and return its name as it is now
 * (schema-qualified, quoted as needed).
 */
Datum
dblog_bind_relation(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Relation	rel;
	char	   *name;

	if (!IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
				 errmsg("dblog._bind_relation() binds the statements of a transaction block")));
	/* a savepoint rolled back would release the lock and keep the binding */
	if (GetCurrentTransactionNestLevel() > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("dblog._bind_relation() may not run inside a savepoint")));
	/* "on" folds the table's CHECK constraints, its owner's code, as the planning role */
	if (strcmp(GetConfigOption("constraint_exclusion", false, false), "on") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dblog: constraint_exclusion = on would run a table owner's CHECK "
						"constraints as the reader when a query is planned"),
				 errhint("SET constraint_exclusion = partition (dblogd's sessions do).")));
	/* before the lock: nobody locks (and so blocks DDL on) a table they cannot read */
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)) ||
		pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("dblog: the table to bind does not exist or may not be read"),
				 errdetail("Relation oid %u.", relid)));
	rel = try_table_open(relid, AccessShareLock);	/* held until the transaction ends */
	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("dblog: the table to bind was dropped"),
				 errdetail("Relation oid %u.", relid)));
	if (rel->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("dblog: relation %s is not an ordinary table",
						quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												   RelationGetRelationName(rel)))));
	refuse_planned_code_of(rel);
	bind(rel);
	name = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
									  RelationGetRelationName(rel));
	table_close(rel, NoLock);
	PG_RETURN_TEXT_P(cstring_to_text(name));
}
