// client/apply/sql_text.h: dblog.v1 values as PostgreSQL input text, and the small pieces of
// SQL text the applier builds statements from (quoted identifiers, array literals).
//
// Every value reaches the target as text and is cast there to the column's type name
// (Column.type_name), so the type's own input function parses it: the same function that
// printed the literals on the source. The native kinds are spelled the way PostgreSQL's input
// functions read them whatever the session's DateStyle:
//   int -> decimal; float4/float8 -> shortest round-trip text, NaN, Infinity, -Infinity;
//   bool -> t/f; bytea -> \x<hex>; uuid -> 8-4-4-4-12; date -> YYYY-MM-DD, with " BC" for
//   years before 1 (PostgreSQL numbers 1 BC as year 0 astronomically); timestamp ->
//   YYYY-MM-DD HH:MM:SS.ffffff[ BC]; timestamptz the same with +00 before the era.
// Owns: text only. No libpq, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/quote.h"
#include "dblog/v1/change.pb.h"
#include "wire/change_view.h"

namespace dblog::apply {

// The value as PostgreSQL input text; nullopt for SQL NULL. Throws std::invalid_argument for
// an unchanged-TOAST marker (the caller must leave that column alone) and for malformed values
// (a uuid that is not 16 bytes, an empty Value).
std::optional<std::string> ValueText(const dblog::v1::Value& value);

std::string PgDateText(std::int64_t days_since_1970);
std::string PgTimestampText(std::int64_t micros_since_1970, bool with_time_zone);
std::string PgFloatText(double value);
std::string PgFloatText(float value);

// Identifiers: always quoted, embedded quotes doubled (common/quote.h); "schema"."name".
using common::QuoteIdent;
inline std::string QualifiedName(std::string_view schema, std::string_view name) {
  return common::QuoteQualified(schema, name);
}

// Appends one field in COPY's text format: \N for NULL, backslash, newline, carriage return and
// tab escaped.
void AppendCopyField(std::string& out, const std::optional<std::string>& value);
// The same for a value, written straight into `out` (what AppendCopyField(out, ValueText(value))
// writes, without the copy in between: this runs per value of a bootstrap's rows).
void AppendCopyValue(std::string& out, const dblog::v1::Value& value);
// The same for a value read in place (wire/change_view.h): the same text.
void AppendCopyValue(std::string& out, const wire::ValueView& value);

// Builds a one-dimensional text[] literal, e.g. {"a","b \"c\"",NULL}. Every element is quoted,
// so no element text can change the array's structure.
class TextArray {
 public:
  void Add(const std::optional<std::string>& element);
  void Add(std::string_view element);
  void AddNull();
  std::string Take();  // the literal; the builder is empty again
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return text_.size(); }

 private:
  std::string text_;
  std::size_t count_ = 0;
};

}  // namespace dblog::apply
