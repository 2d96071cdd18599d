// client/apply/value_access.h: one set of accessors over a parsed dblog.v1.Value and a value
// read in place (wire::ValueView), so that each of the applier's value writers (COPY text in
// sql_text.cc, COPY binary in copy_binary.cc) is written once for both.
// Owns: nothing but the two adapters. Internal to client/apply.
#pragma once

#include <cstdint>
#include <string_view>

#include "dblog/v1/change.pb.h"
#include "wire/change_view.h"

namespace dblog::apply {

struct MessageValue {
  const dblog::v1::Value& v;
  dblog::v1::Value::KindCase kind() const { return v.kind_case(); }
  std::string_view text() const {
    switch (v.kind_case()) {
      case dblog::v1::Value::kTextValue: return v.text_value();
      case dblog::v1::Value::kLiteral: return v.literal();
      case dblog::v1::Value::kBytesValue: return v.bytes_value();
      case dblog::v1::Value::kUuidValue: return v.uuid_value();
      default: return {};
    }
  }
  std::int64_t integer() const {
    switch (v.kind_case()) {
      case dblog::v1::Value::kBoolValue: return v.bool_value() ? 1 : 0;
      case dblog::v1::Value::kIntValue: return v.int_value();
      case dblog::v1::Value::kDateValue: return v.date_value();
      case dblog::v1::Value::kTimestampValue: return v.timestamp_value();
      case dblog::v1::Value::kTimestamptzValue: return v.timestamptz_value();
      default: return 0;
    }
  }
  float float4() const { return v.float4_value(); }
  double float8() const { return v.float8_value(); }
};

struct InPlaceValue {
  const wire::ValueView& v;
  dblog::v1::Value::KindCase kind() const { return v.kind; }
  std::string_view text() const { return v.text(); }
  std::int64_t integer() const { return v.integer(); }
  float float4() const { return v.float4(); }
  double float8() const { return v.float8(); }
};

inline MessageValue AccessValue(const dblog::v1::Value& v) { return MessageValue{v}; }
inline InPlaceValue AccessValue(const wire::ValueView& v) { return InPlaceValue{v}; }

}  // namespace dblog::apply
