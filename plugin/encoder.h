/*-------------------------------------------------------------------------
 *
 * encoder.h
 *		  The row encoder shared by the log path (output plugin) and the copy
 *		  path (SQL function dblog.encode_row).
 *
 * Both paths build a RowPlan for a tuple descriptor and call the same
 * functions, so the same row always leaves as the same bytes (the "one
 * encoder" rule in docs/plugin.md).
 *
 * IDENTIFICATION
 *		  plugin/encoder.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBLOG_ENCODER_H
#define DBLOG_ENCODER_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "datatype/timestamp.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"

/*
 * dblog.v1 counts dates and times from the Unix epoch (1970-01-01);
 * PostgreSQL from its own (2000-01-01).  The distance, in days and in
 * microseconds.
 */
#define UNIX_TO_PG_EPOCH_DAYS	(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE)
#define UNIX_TO_PG_EPOCH_USECS	((int64) UNIX_TO_PG_EPOCH_DAYS * USECS_PER_DAY)

/* Value oneof members of dblog.v1.Value; the numbers are the field numbers. */
typedef enum ValueField
{
	VF_NULL = 1,
	VF_UNCHANGED = 2,
	VF_BOOL = 3,
	VF_INT = 4,
	VF_FLOAT4 = 5,
	VF_FLOAT8 = 6,
	VF_TEXT = 7,
	VF_BYTES = 8,
	VF_UUID = 9,
	VF_DATE = 10,
	VF_TIMESTAMP = 11,
	VF_TIMESTAMPTZ = 12,
	VF_LITERAL = 13
} ValueField;

/* Value.split: a dblog.v1.SplitValue, written by write_row only (see ValuePieces) */
#define VALUE_SPLIT_FIELD 14

/* How a column's values are encoded; decided once per column. */
typedef enum ColumnKind
{
	CK_BOOL,
	CK_INT2,
	CK_INT4,
	CK_INT8,
	CK_OID,
	CK_FLOAT4,
	CK_FLOAT8,
	CK_TEXT,					/* text, varchar, bpchar: varlena text */
	CK_NAME,
	CK_BYTEA,
	CK_UUID,
	CK_DATE,
	CK_TIMESTAMP,
	CK_TIMESTAMPTZ,
	CK_LITERAL					/* the type's output function */
} ColumnKind;

typedef struct ColumnPlan
{
	bool		dropped;
	int16		typlen;
	ColumnKind	kind;
	FmgrInfo	out;			/* CK_LITERAL, CK_DATE, CK_TIMESTAMP(TZ) */
} ColumnPlan;

typedef struct RowPlan
{
	int			natts;			/* tupdesc->natts, dropped columns included */
	int			nlive;			/* non-dropped columns */
	bool		needs_canonical_settings;	/* some column may use an output function */
	ColumnPlan *cols;
	int			nkeys;
	AttrNumber *keys;			/* 0-based attribute indexes, in key order */
} RowPlan;

/* One encoded value, before it is written as protobuf or as text. */
typedef struct EncodedValue
{
	ValueField	field;
	union
	{
		bool		b;
		int64		i;
		float4		f4;
		float8		f8;
		struct
		{
			const char *p;
			Size		len;
		}			s;
	}			u;
} EncodedValue;

/*
 * Long values of a log Change's new row, sent after the Change in pieces
 * (dblog.v1.SplitValue, the plugin's value_piece_bytes option): write_row
 * writes each text, bytea or literal value longer than `threshold` bytes,
 * unless it is a key column's, as a SplitValue and appends it to `values`;
 * the caller writes their bytes as ValuePiece events once the Change is out.
 */
typedef struct ValuePieces
{
	Size		threshold;
	List	   *values;			/* EncodedValue *, in row order */
} ValuePieces;

/* Text for protobuf string fields: converted to UTF-8 when the database is not. */
extern const char *to_utf8(const char *s);
extern void check_database_encoding(void);
extern RowPlan *build_row_plan(TupleDesc desc, MemoryContext mcxt);
extern const char *column_kind_name(ColumnKind kind);

/*
 * Encode one value.  allow_unchanged: an on-disk TOAST pointer means "the
 * WAL did not carry this column" (log path only).
 */
extern void encode_value(const ColumnPlan *col, Datum d, bool isnull,
						 bool allow_unchanged, EncodedValue *ev);

/*
 * Write a dblog.v1.Row as nested field `field` of `out`.  With old_values
 * (REPLICA IDENTITY FULL), unchanged TOAST columns are filled from the old
 * row instead of being marked unchanged.  keys_only writes the key columns
 * in key order.  pieces: NULL, or where long values go (see ValuePieces).
 */
extern void write_row(StringInfo out, int field, const RowPlan *plan,
					  Datum *values, bool *nulls,
					  Datum *old_values, bool *old_nulls,
					  bool keys_only, bool allow_unchanged, ValuePieces *pieces);

/* The same row rendered as text, for the plugin's text format. */
extern void write_row_text(StringInfo out, const RowPlan *plan, TupleDesc desc,
						   Datum *values, bool *nulls,
						   Datum *old_values, bool *old_nulls,
						   bool keys_only, bool allow_unchanged);

#endif							/* DBLOG_ENCODER_H */
