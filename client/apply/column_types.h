// client/apply/column_types.h: whether a target column's type can hold every value of a source
// column's type without loss. Pure: types are compared by their format_type() text (what
// Column.type_name carries and what the target's catalog prints), no database involved.
//
// `dblog apply` writes a source value into an existing target column by casting it to the
// source's type and assigning it to the target's. When the target type is narrower, PostgreSQL
// rounds (numeric(10,2) -> integer: 1.25 becomes 1), truncates precision (float8 -> float4,
// timestamp(6) -> timestamp(0)), drops a time zone, or refuses values out of range in the
// middle of the stream. The applier refuses such columns before applying anything unless
// --allow-lossy-columns is given.
//
// Known lossless (kWidening), everything else that is not the identical type is kLossy:
//   smallint -> integer -> bigint; integers -> unconstrained numeric, and -> numeric(p,s) with
//   s >= 0 and p-s at least 5 / 10 / 19 digits; smallint -> real; smallint, integer -> double
//   precision; real -> double precision; oid -> bigint and numeric like integer;
//   numeric(p,s) -> numeric(p',s') with s' >= s and p'-s' >= p-s; any numeric -> numeric;
//   varchar(n) -> varchar(m >= n); text, varchar, varchar(n), name -> text or varchar;
//   name -> varchar(m >= 63); char(n) -> char(m >= n); bit(n), varbit(n) -> varbit(m >= n) or
//   varbit; timestamp, timestamptz, time, timetz, interval: the same type with at least the
//   source's fractional digits (absent = 6); arrays: elementwise.
// Not widening on purpose: anything into an integer or float narrower than its range, floats
// into numeric (PostgreSQL converts them with 15 significant digits), timestamptz into
// timestamp or date, timestamp into timestamptz (read in the session's time zone), date into
// timestamp (a smaller range), char(n) into text or varchar (trailing blanks are dropped),
// json <-> jsonb, domains and other types into anything but themselves.
// Owns: the type-pair classification only.
#pragma once

#include <string>

namespace dblog::apply {

enum class Conversion {
  kSame,      // the identical type
  kWidening,  // another type that holds every source value exactly
  kLossy,     // some source values would be altered or refused (or it is not known not to be)
};

// `source_type` and `target_type` are format_type() text, e.g. "numeric(10,2)", "integer",
// "character varying(20)", "timestamp(3) with time zone", "bigint[]".
Conversion ClassifyConversion(const std::string& source_type, const std::string& target_type);

}  // namespace dblog::apply
