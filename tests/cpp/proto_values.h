// tests/cpp/proto_values.h: builders of dblog.v1 Values and Rows, as the plugin and the copy
// path encode them, for every suite that needs one by hand (emit/, apply/, client/, the plugin's
// binary tests). Owns: test data construction only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "dblog/v1/change.pb.h"

namespace dblog::test {

inline dblog::v1::Value Int(std::int64_t v) {
  dblog::v1::Value out;
  out.set_int_value(v);
  return out;
}
inline dblog::v1::Value Text(const std::string& v) {
  dblog::v1::Value out;
  out.set_text_value(v);
  return out;
}
// A value in PostgreSQL's text form (numeric, arrays, ...): Value.literal.
inline dblog::v1::Value Lit(const std::string& v) {
  dblog::v1::Value out;
  out.set_literal(v);
  return out;
}
inline dblog::v1::Value Null() {
  dblog::v1::Value out;
  out.set_null_value(true);
  return out;
}
// An unchanged TOASTed value the WAL did not carry.
inline dblog::v1::Value Unchanged() {
  dblog::v1::Value out;
  out.set_unchanged(true);
  return out;
}
inline dblog::v1::Row MakeRow(std::initializer_list<dblog::v1::Value> values) {
  dblog::v1::Row row;
  for (const auto& v : values) *row.add_values() = v;
  return row;
}

}  // namespace dblog::test
