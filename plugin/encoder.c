/*-------------------------------------------------------------------------
 *
 * encoder.c
 *		  The row encoder shared by the output plugin and dblog.encode_row().
 *
 * Native encodings for the common types, the type's output function for
 * everything else.  Output functions depend on session settings (DateStyle,
 * IntervalStyle, extra_float_digits, bytea_output, TimeZone), so a row with
 * such columns is encoded under fixed canonical settings: the walsender and
 * a copy session produce the same text whatever their own settings are.
 *
 * IDENTIFICATION
 *		  plugin/encoder.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/shortest_dec.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/bytea.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"
#include "utils/uuid.h"

#include "encoder.h"
#include "guard.h"
#include "pbwire.h"

PG_FUNCTION_INFO_V1(dblog_encode_row);
PG_FUNCTION_INFO_V1(dblog_key_in);

/* The settings output functions run under; see the file header. */
typedef struct OutputSettings
{
	int			date_style;
	int			date_order;
	int			interval_style;
	int			float_digits;
	int			bytea_out;
	pg_tz	   *timezone;
} OutputSettings;

static pg_tz *utc_tz = NULL;

static bool
output_settings_enter(OutputSettings *saved)
{
	if (utc_tz == NULL)
		utc_tz = pg_tzset("UTC");
	if (DateStyle == USE_ISO_DATES && IntervalStyle == INTSTYLE_POSTGRES &&
		extra_float_digits == 3 && bytea_output == BYTEA_OUTPUT_HEX &&
		session_timezone == utc_tz)
		return false;
	saved->date_style = DateStyle;
	saved->date_order = DateOrder;
	saved->interval_style = IntervalStyle;
	saved->float_digits = extra_float_digits;
	saved->bytea_out = bytea_output;
	saved->timezone = session_timezone;
	DateStyle = USE_ISO_DATES;
	DateOrder = DATEORDER_YMD;
	IntervalStyle = INTSTYLE_POSTGRES;
	extra_float_digits = 3;
	bytea_output = BYTEA_OUTPUT_HEX;
	session_timezone = utc_tz;
	return true;
}

static void
output_settings_leave(const OutputSettings *saved)
{
	DateStyle = saved->date_style;
	DateOrder = saved->date_order;
	IntervalStyle = saved->interval_style;
	extra_float_digits = saved->float_digits;
	bytea_output = saved->bytea_out;
	session_timezone = saved->timezone;
}

static ColumnKind
column_kind_for(Oid typid)
{
	switch (getBaseType(typid))
	{
		case BOOLOID:
			return CK_BOOL;
		case INT2OID:
			return CK_INT2;
		case INT4OID:
			return CK_INT4;
		case INT8OID:
			return CK_INT8;
		case OIDOID:
			return CK_OID;
		case FLOAT4OID:
			return CK_FLOAT4;
		case FLOAT8OID:
			return CK_FLOAT8;
		case TEXTOID:
		case VARCHAROID:
		case BPCHAROID:
			return CK_TEXT;
		case NAMEOID:
			return CK_NAME;
		case BYTEAOID:
			return CK_BYTEA;
		case UUIDOID:
			return CK_UUID;
		case DATEOID:
			return CK_DATE;
		case TIMESTAMPOID:
			return CK_TIMESTAMP;
		case TIMESTAMPTZOID:
			return CK_TIMESTAMPTZ;
		default:
			return CK_LITERAL;
	}
}

const char *
column_kind_name(ColumnKind kind)
{
	static const char *const names[] = {
		"bool", "int2", "int4", "int8", "oid", "float4", "float8", "text",
		"name", "bytea", "uuid", "date", "timestamp", "timestamptz", "literal"
	};

	return names[kind];
}

RowPlan *
build_row_plan(TupleDesc desc, MemoryContext mcxt)
{
	MemoryContext old = MemoryContextSwitchTo(mcxt);
	RowPlan    *plan = palloc0(sizeof(RowPlan));

	plan->natts = desc->natts;
	plan->cols = palloc0(sizeof(ColumnPlan) * Max(desc->natts, 1));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		ColumnPlan *col = &plan->cols[i];

		col->dropped = att->attisdropped;
		if (col->dropped)
			continue;
		plan->nlive++;
		col->typlen = att->attlen;
		col->kind = column_kind_for(att->atttypid);
		if (col->kind == CK_LITERAL || col->kind == CK_DATE ||
			col->kind == CK_TIMESTAMP || col->kind == CK_TIMESTAMPTZ)
		{
			Oid			outfn;
			bool		isvarlena;

			getTypeOutputInfo(att->atttypid, &outfn, &isvarlena);
			fmgr_info_cxt(outfn, &col->out, mcxt);
			plan->needs_canonical_settings = true;
		}
	}
	MemoryContextSwitchTo(old);
	return plan;
}

/*
 * SQL_ASCII says nothing about the bytes it holds, so they cannot be promised
 * to be UTF-8, which protobuf string fields must be.
 */
void
check_database_encoding(void)
{
	if (GetDatabaseEncoding() == PG_SQL_ASCII)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dblog cannot encode rows of a database with encoding SQL_ASCII"),
				 errdetail("dblog sends text as UTF-8, and SQL_ASCII text has no known encoding."),
				 errhint("Use a database with a real encoding such as UTF8.")));
}

const char *
to_utf8(const char *s)
{
	if (s == NULL || GetDatabaseEncoding() == PG_UTF8)
		return s;
	return pg_server_to_any(s, strlen(s), PG_UTF8);
}

/* Text handed to protobuf string fields must be UTF-8. */
static void
set_text(EncodedValue *ev, ValueField field, const char *p, Size len)
{
	if (GetDatabaseEncoding() != PG_UTF8)
	{
		char	   *conv = pg_server_to_any(p, len, PG_UTF8);

		if (conv != p)
		{
			p = conv;
			len = strlen(conv);
		}
	}
	ev->field = field;
	ev->u.s.p = p;
	ev->u.s.len = len;
}

static void
set_literal(EncodedValue *ev, const char *s)
{
	set_text(ev, VF_LITERAL, s, strlen(s));
}

/* text, varchar, bpchar: the bytes, as UTF-8 */
static inline void
encode_text(EncodedValue *ev, Datum d)
{
	struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(d));

	set_text(ev, VF_TEXT, VARDATA_ANY(v), VARSIZE_ANY_EXHDR(v));
}

static inline void
encode_name(EncodedValue *ev, Datum d)
{
	const char *n = NameStr(*DatumGetName(d));

	set_text(ev, VF_TEXT, n, strlen(n));
}

static inline void
encode_bytea(EncodedValue *ev, Datum d)
{
	struct varlena *v = pg_detoast_datum_packed((struct varlena *) DatumGetPointer(d));

	ev->field = VF_BYTES;
	ev->u.s.p = VARDATA_ANY(v);
	ev->u.s.len = VARSIZE_ANY_EXHDR(v);
}

/* Days since the Unix epoch; the infinities as literals. */
static inline void
encode_date(EncodedValue *ev, Datum d)
{
	DateADT		date = DatumGetDateADT(d);

	if (DATE_NOT_FINITE(date))
		set_literal(ev, DATE_IS_NOBEGIN(date) ? "-infinity" : "infinity");
	else
	{
		ev->field = VF_DATE;
		ev->u.i = (int64) date + UNIX_TO_PG_EPOCH_DAYS;
	}
}

/*
 * Microseconds since the Unix epoch; the infinities, and times too late for
 * an int64 count from 1970, as literals.
 */
static inline void
encode_timestamp(const ColumnPlan *col, EncodedValue *ev, Datum d)
{
	Timestamp	ts = DatumGetTimestamp(d);

	if (TIMESTAMP_NOT_FINITE(ts))
		set_literal(ev, TIMESTAMP_IS_NOBEGIN(ts) ? "-infinity" : "infinity");
	else if (ts > PG_INT64_MAX - UNIX_TO_PG_EPOCH_USECS)
		set_literal(ev, OutputFunctionCall((FmgrInfo *) &col->out, d));
	else
	{
		ev->field = col->kind == CK_TIMESTAMP ? VF_TIMESTAMP : VF_TIMESTAMPTZ;
		ev->u.i = ts + UNIX_TO_PG_EPOCH_USECS;
	}
}

/* A value that is not NULL nor unchanged, by its column's kind. */
static inline void
encode_datum(const ColumnPlan *col, Datum d, EncodedValue *ev)
{
	switch (col->kind)
	{
		case CK_BOOL:
			ev->field = VF_BOOL;
			ev->u.b = DatumGetBool(d);
			break;
		case CK_INT2:
			ev->field = VF_INT;
			ev->u.i = DatumGetInt16(d);
			break;
		case CK_INT4:
			ev->field = VF_INT;
			ev->u.i = DatumGetInt32(d);
			break;
		case CK_INT8:
			ev->field = VF_INT;
			ev->u.i = DatumGetInt64(d);
			break;
		case CK_OID:
			ev->field = VF_INT;
			ev->u.i = DatumGetObjectId(d);
			break;
		case CK_FLOAT4:
			ev->field = VF_FLOAT4;
			ev->u.f4 = DatumGetFloat4(d);
			break;
		case CK_FLOAT8:
			ev->field = VF_FLOAT8;
			ev->u.f8 = DatumGetFloat8(d);
			break;
		case CK_TEXT:
			encode_text(ev, d);
			break;
		case CK_NAME:
			encode_name(ev, d);
			break;
		case CK_BYTEA:
			encode_bytea(ev, d);
			break;
		case CK_UUID:
			ev->field = VF_UUID;
			ev->u.s.p = (const char *) DatumGetUUIDP(d)->data;
			ev->u.s.len = UUID_LEN;
			break;
		case CK_DATE:
			encode_date(ev, d);
			break;
		case CK_TIMESTAMP:
		case CK_TIMESTAMPTZ:
			encode_timestamp(col, ev, d);
			break;
		case CK_LITERAL:
			set_literal(ev, OutputFunctionCall((FmgrInfo *) &col->out, d));
			break;
	}
}

void
encode_value(const ColumnPlan *col, Datum d, bool isnull, bool allow_unchanged,
			 EncodedValue *ev)
{
	if (isnull)
	{
		ev->field = VF_NULL;
		ev->u.b = true;
		return;
	}
	if (col->typlen == -1 && VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(d)) &&
		allow_unchanged)
	{
		ev->field = VF_UNCHANGED;
		ev->u.b = true;
		return;
	}
	encode_datum(col, d, ev);
}

static void
write_value(StringInfo out, const EncodedValue *ev)
{
	int			pos = pb_begin(out, 1);	/* Row.values */

	switch (ev->field)
	{
		case VF_NULL:
		case VF_UNCHANGED:
		case VF_BOOL:
			pb_uint_always(out, ev->field, ev->u.b ? 1 : 0);
			break;
		case VF_INT:
		case VF_DATE:
		case VF_TIMESTAMP:
		case VF_TIMESTAMPTZ:
			pb_sint_always(out, ev->field, ev->u.i);
			break;
		case VF_FLOAT4:
			{
				union
				{
					float4		f;
					uint32		u;
				}			bits;

				bits.f = ev->u.f4;
				pb_fixed32_always(out, ev->field, bits.u);
				break;
			}
		case VF_FLOAT8:
			{
				union
				{
					float8		f;
					uint64		u;
				}			bits;

				bits.f = ev->u.f8;
				pb_fixed64_always(out, ev->field, bits.u);
				break;
			}
		case VF_TEXT:
		case VF_BYTES:
		case VF_UUID:
		case VF_LITERAL:
			pb_bytes_always(out, ev->field, ev->u.s.p, ev->u.s.len);
			break;
	}
	pb_end(out, pos);
}

/* Is attribute index i one of the key's columns? */
static bool
is_key_column(const RowPlan *plan, int i)
{
	for (int k = 0; k < plan->nkeys; k++)
		if (plan->keys[k] == i)
			return true;
	return false;
}

/*
 * A value that goes after its Change in pieces: a SplitValue stands for
 * it (kind: the member it will be, whose field numbers SplitValue.Kind
 * reuses) and the caller writes its bytes once the Change is out.
 */
static bool
write_value_split(StringInfo out, const RowPlan *plan, int i, const EncodedValue *ev,
					ValuePieces *pieces)
{
	int			pos;
	int			inner;

	if (pieces == NULL ||
		(ev->field != VF_TEXT && ev->field != VF_BYTES && ev->field != VF_LITERAL) ||
		ev->u.s.len <= pieces->threshold || is_key_column(plan, i))
		return false;
	pos = pb_begin(out, 1);		/* Row.values */
	inner = pb_begin(out, VALUE_SPLIT_FIELD);
	pb_uint_field(out, 1, ev->field);	/* SplitValue.kind */
	pb_uint_field(out, 2, ev->u.s.len);	/* SplitValue.length */
	pb_end(out, inner);
	pb_end(out, pos);
	pieces->values = lappend(pieces->values, memcpy(palloc(sizeof(EncodedValue)), ev,
													  sizeof(EncodedValue)));
	return true;
}

static const char *const value_field_names[] = {
	"", "null", "unchanged", "bool", "int", "float4", "float8", "text",
	"bytes", "uuid", "date", "timestamp", "timestamptz", "literal"
};

static void
write_value_text(StringInfo out, const EncodedValue *ev)
{
	char		buf[64];

	switch (ev->field)
	{
		case VF_NULL:
			appendStringInfoString(out, "null");
			return;
		case VF_UNCHANGED:
			appendStringInfoString(out, "unchanged-toast");
			return;
		default:
			break;
	}
	appendStringInfo(out, "%s:", value_field_names[ev->field]);
	switch (ev->field)
	{
		case VF_BOOL:
			appendStringInfoString(out, ev->u.b ? "true" : "false");
			break;
		case VF_INT:
		case VF_DATE:
		case VF_TIMESTAMP:
		case VF_TIMESTAMPTZ:
			appendStringInfo(out, INT64_FORMAT, ev->u.i);
			break;
		case VF_FLOAT4:
			float_to_shortest_decimal_buf(ev->u.f4, buf);
			appendStringInfoString(out, buf);
			break;
		case VF_FLOAT8:
			double_to_shortest_decimal_buf(ev->u.f8, buf);
			appendStringInfoString(out, buf);
			break;
		case VF_TEXT:
		case VF_LITERAL:
			{
				char	   *s = pnstrdup(ev->u.s.p, ev->u.s.len);

				if (ev->u.s.len > 200)
					appendStringInfo(out, "(%zu bytes, md5 %s)", ev->u.s.len,
									 TextDatumGetCString(DirectFunctionCall1(md5_text,
																			 PointerGetDatum(cstring_to_text_with_len(ev->u.s.p, ev->u.s.len)))));
				else
					appendStringInfoString(out, quote_literal_cstr(s));
				break;
			}
		case VF_BYTES:
		case VF_UUID:
			appendStringInfoString(out, "\\x");
			for (Size i = 0; i < ev->u.s.len; i++)
				appendStringInfo(out, "%02x", (unsigned char) ev->u.s.p[i]);
			break;
		default:
			break;
	}
}

/*
 * The value of column i, with an unchanged TOAST column taken from the old
 * row when that carries it (REPLICA IDENTITY FULL).
 */
static void
column_value(const RowPlan *plan, int i, Datum *values, bool *nulls,
			 Datum *old_values, bool *old_nulls, bool allow_unchanged,
			 EncodedValue *ev)
{
	const ColumnPlan *col = &plan->cols[i];
	Datum		d = values[i];
	bool		isnull = nulls[i];

	if (!isnull && old_values != NULL && col->typlen == -1 &&
		VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(d)) && !old_nulls[i] &&
		!VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(old_values[i])))
		d = old_values[i];
	encode_value(col, d, isnull, allow_unchanged, ev);
}

static void
write_row_body(StringInfo out, const RowPlan *plan, TupleDesc desc, bool as_text,
			   Datum *values, bool *nulls, Datum *old_values, bool *old_nulls,
			   bool keys_only, bool allow_unchanged, ValuePieces *pieces)
{
	int			n = keys_only ? plan->nkeys : plan->natts;
	bool		first = true;

	for (int k = 0; k < n; k++)
	{
		int			i = keys_only ? plan->keys[k] : k;
		EncodedValue ev;

		if (plan->cols[i].dropped)
			continue;
		column_value(plan, i, values, nulls, old_values, old_nulls, allow_unchanged, &ev);
		if (!as_text)
		{
			if (!write_value_split(out, plan, i, &ev, pieces))
				write_value(out, &ev);
			continue;
		}
		if (!first)
			appendStringInfoChar(out, ' ');
		first = false;
		appendStringInfo(out, "%s=", quote_identifier(NameStr(TupleDescAttr(desc, i)->attname)));
		write_value_text(out, &ev);
	}
}

/* Runs write_row_body under canonical output settings when it needs them. */
static void
write_row_guarded(StringInfo out, const RowPlan *plan, TupleDesc desc, bool as_text,
				  Datum *values, bool *nulls, Datum *old_values, bool *old_nulls,
				  bool keys_only, bool allow_unchanged, ValuePieces *pieces)
{
	OutputSettings saved;

	if (!plan->needs_canonical_settings || !output_settings_enter(&saved))
	{
		write_row_body(out, plan, desc, as_text, values, nulls, old_values, old_nulls,
					   keys_only, allow_unchanged, pieces);
		return;
	}
	PG_TRY();
	{
		write_row_body(out, plan, desc, as_text, values, nulls, old_values, old_nulls,
					   keys_only, allow_unchanged, pieces);
	}
	PG_FINALLY();
	{
		output_settings_leave(&saved);
	}
	PG_END_TRY();
}

void
write_row(StringInfo out, int field, const RowPlan *plan,
		  Datum *values, bool *nulls, Datum *old_values, bool *old_nulls,
		  bool keys_only, bool allow_unchanged, ValuePieces *pieces)
{
	int			pos = pb_begin(out, field);

	write_row_guarded(out, plan, NULL, false, values, nulls, old_values, old_nulls,
					  keys_only, allow_unchanged, pieces);
	pb_end(out, pos);
}

void
write_row_text(StringInfo out, const RowPlan *plan, TupleDesc desc,
			   Datum *values, bool *nulls, Datum *old_values, bool *old_nulls,
			   bool keys_only, bool allow_unchanged)
{
	write_row_guarded(out, plan, desc, true, values, nulls, old_values, old_nulls,
					  keys_only, allow_unchanged, NULL);
}

/*
 * dblog.encode_row(record) RETURNS bytea: the serialized dblog.v1.Row of a
 * row, byte-identical to the new_row the plugin writes for the same values.
 */
typedef struct EncodeRowCache
{
	uint64		tupdesc_id;		/* typcache's identifier of the row type's tupdesc */
	RowPlan    *plan;
} EncodeRowCache;

Datum
dblog_encode_row(PG_FUNCTION_ARGS)
{
	HeapTupleHeader rec = PG_GETARG_HEAPTUPLEHEADER(0);
	Oid			tupType = HeapTupleHeaderGetTypeId(rec);
	int32		tupTypmod = HeapTupleHeaderGetTypMod(rec);
	uint64		tupdesc_id = assign_record_type_identifier(tupType, tupTypmod);
	EncodeRowCache *cache = fcinfo->flinfo->fn_extra;
	TupleDesc	desc;
	HeapTupleData tuple;
	Datum	   *values;
	bool	   *nulls;
	StringInfoData buf;
	bytea	   *result;

	check_database_encoding();

	/* as record_out does: the typcache's tupdesc, held only for this call */
	desc = lookup_rowtype_tupdesc(tupType, tupTypmod);
	if (cache == NULL || cache->tupdesc_id != tupdesc_id)
	{
		MemoryContext fnmcxt = fcinfo->flinfo->fn_mcxt;

		if (cache == NULL)
			cache = MemoryContextAllocZero(fnmcxt, sizeof(EncodeRowCache));
		cache->tupdesc_id = tupdesc_id;
		cache->plan = build_row_plan(desc, fnmcxt);
		fcinfo->flinfo->fn_extra = cache;
	}

	tuple.t_len = HeapTupleHeaderGetDatumLength(rec);
	ItemPointerSetInvalid(&(tuple.t_self));
	tuple.t_tableOid = InvalidOid;
	tuple.t_data = rec;

	values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	nulls = palloc(sizeof(bool) * Max(desc->natts, 1));
	heap_deform_tuple(&tuple, desc, values, nulls);
	ReleaseTupleDesc(desc);

	/* Reserve the varlena header, then write the Row body after it. */
	initStringInfo(&buf);
	appendStringInfoSpaces(&buf, VARHDRSZ);
	write_row_guarded(&buf, cache->plan, NULL, false, values, nulls, NULL, NULL,
					  false, false, NULL);
	result = (bytea *) buf.data;
	SET_VARSIZE(result, buf.len);
	PG_RETURN_BYTEA_P(result);
}

/*
 * dblog._key_in(value text, template anyelement) RETURNS anyelement: the value read by the
 * template's type's input function, as a literal 'value'::type would be. Never a cast: a cast
 * from text is looked up in pg_cast, where the owner of an enum, composite or range type may
 * have put a function of its own, which would then run as whoever reads the key (dblogd).
 * The input functions of types that reach here (base types, after domains are stripped) are
 * built in or a superuser's.
 */
Datum
dblog_key_in(PG_FUNCTION_ARGS)
{
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, 1);
	Oid			input;
	Oid			ioparam;

	if (!OidIsValid(type))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dblog._key_in: cannot determine the template's type")));
	if (dblog_type_contains_domain(type))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dblog._key_in: %s is or holds a domain, whose checks are its owner's code",
						format_type_be(type))));
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	getTypeInputInfo(type, &input, &ioparam);
	PG_RETURN_DATUM(OidInputFunctionCall(input, text_to_cstring(PG_GETARG_TEXT_PP(0)),
										 ioparam, -1));
}
