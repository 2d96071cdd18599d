// client/apply/copy_binary.h: rows in COPY's binary format, for the bootstrap's COPY into a
// target table whose every column is of a type listed here (dblog apply, applier.h).
//
// Why: the target parses binary values with the types' receive functions, which cost it about
// two thirds of what their input functions cost (COPY of the bench's mixed-type table: 5.2 s
// against 7.5 s for 2M rows), and the target's COPY is the bootstrap's slowest stage. Each value
// is written in the form the type's send function writes it (PostgreSQL's src/backend/utils/adt
// *_send), from the stream's Value:
//   bool <- bool_value; int2, int4, int8, oid <- int_value (in the type's range);
//   float4, float8 <- float4_value, float8_value (the same bits);
//   text, varchar, bpchar <- text_value; bytea <- bytes_value; uuid <- uuid_value (16 bytes);
//   date <- date_value; timestamp, timestamptz <- timestamp_value, timestamptz_value (moved
//   from the Unix epoch to PostgreSQL's, 2000-01-01); their infinities <- the literals
//   "infinity" and "-infinity" (the receive functions' sentinels: the int extremes);
//   numeric <- literal (numeric_out's text, NaN and the infinities included: base-10000 digits);
//   json <- literal; jsonb <- literal behind jsonb's version byte 1.
// The receive functions check what the input functions check (typmods, encodings, ranges), so
// a value goes in as the same value either way (one difference: a float NaN keeps the source's
// bits, where text gives the canonical NaN; PostgreSQL holds every NaN equal);
// tests/cpp/apply/copy_binary_test.cc checks that on a real server, value by value, against the
// text path, for rows parsed and read in place, and numerics against numeric_send.
// A value of another kind than its type's (a timestamp beyond int64 microseconds, which the
// stream carries as a literal; a malformed value) has no binary form here:
// AppendCopyBinaryRow returns false and the caller writes that row as COPY text instead.
// Owns: bytes only. No libpq, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dblog/v1/change.pb.h"
#include "wire/change_view.h"

namespace dblog::apply {

enum class BinaryType : std::uint8_t {
  kNone,  // no binary form written here: the table is copied as text
  kBool,
  kInt2,
  kInt4,
  kInt8,
  kOid,
  kFloat4,
  kFloat8,
  kText,  // text, varchar, bpchar
  kBytea,
  kUuid,
  kDate,
  kTimestamp,
  kTimestamptz,
  kNumeric,
  kJson,
  kJsonb,
};

// The binary form of a built-in type by its oid (stable across clusters below 16384); kNone for
// every other type (domains, enums, arrays, composites, ranges, user types, name, ...).
BinaryType BinaryTypeOf(std::uint32_t type_oid);

// The 19 bytes that open a binary COPY, and the two that end it.
void AppendCopyBinaryHeader(std::string& out);
void AppendCopyBinaryTrailer(std::string& out);

// One row (a field count, then each value's length and bytes; NULL as length -1). False, with
// `out` as it was, when a value has no binary form for its column's type (see the header) or
// the row has another width than `types`; then *failed_column (when given) is the value's
// position (the width, for a row of another width). Throws std::invalid_argument for an
// unchanged-TOAST marker, as the text path does.
bool AppendCopyBinaryRow(std::string& out, const std::vector<BinaryType>& types,
                         const dblog::v1::Row& row, std::size_t* failed_column = nullptr);
bool AppendCopyBinaryRow(std::string& out, const std::vector<BinaryType>& types,
                         const wire::RowView& row, std::size_t* failed_column = nullptr);

// numeric_out's text (e.g. "-12.50", "NaN", "Infinity") as numeric_send writes the value: the
// field's bytes without their length. False (out unchanged) for any other text.
bool AppendNumericBinary(std::string& out, std::string_view text);

}  // namespace dblog::apply
