// client/apply/sql_text.cc: values as PostgreSQL input text (see sql_text.h).
#include "client/apply/sql_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "client/time_format.h"

namespace dblog::apply {
namespace {

constexpr std::int64_t kMicrosPerDay = 86'400'000'000;

// "YYYY-MM-DD" plus whether the year is BC. PostgreSQL has no year 0: astronomical year 0 is
// 1 BC, -1 is 2 BC.
std::string DatePart(std::int64_t days, bool* bc) {
  const client::CivilDate date = client::CivilFromDays(days);
  std::int64_t year = date.year;
  *bc = year <= 0;
  if (*bc) year = 1 - year;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02u", static_cast<long long>(year), date.month,
                date.day);
  return buf;
}

template <typename F>
std::string FloatText(F value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, result.ptr);
}

}  // namespace

std::string PgDateText(std::int64_t days) {
  bool bc = false;
  std::string out = DatePart(days, &bc);
  if (bc) out += " BC";
  return out;
}

std::string PgTimestampText(std::int64_t micros, bool with_time_zone) {
  // Floor division that cannot overflow (INT64_MIN included): the time of day is never negative.
  std::int64_t days = micros / kMicrosPerDay;
  std::int64_t in_day = micros % kMicrosPerDay;
  if (in_day < 0) {
    in_day += kMicrosPerDay;
    --days;
  }
  bool bc = false;
  std::string out = DatePart(days, &bc);
  const std::int64_t seconds = in_day / 1'000'000;
  char buf[48];
  std::snprintf(buf, sizeof buf, " %02lld:%02lld:%02lld.%06lld",
                static_cast<long long>(seconds / 3600), static_cast<long long>(seconds / 60 % 60),
                static_cast<long long>(seconds % 60), static_cast<long long>(in_day % 1'000'000));
  out += buf;
  if (with_time_zone) out += "+00";
  if (bc) out += " BC";
  return out;
}

std::string PgFloatText(double value) { return FloatText(value); }
std::string PgFloatText(float value) { return FloatText(value); }

std::optional<std::string> ValueText(const dblog::v1::Value& value) {
  using dblog::v1::Value;
  switch (value.kind_case()) {
    case Value::kNullValue:
      return std::nullopt;
    case Value::kUnchanged:
      throw std::invalid_argument("an unchanged TOAST value has no text (keep the target's)");
    case Value::kBoolValue:
      return std::string(value.bool_value() ? "t" : "f");
    case Value::kIntValue:
      return std::to_string(value.int_value());
    case Value::kFloat4Value:
      return FloatText(value.float4_value());
    case Value::kFloat8Value:
      return FloatText(value.float8_value());
    case Value::kTextValue:
      return value.text_value();
    case Value::kBytesValue: {
      static const char kHex[] = "0123456789abcdef";
      const std::string& bytes = value.bytes_value();
      std::string out;
      out.reserve(2 + 2 * bytes.size());
      out += "\\x";
      for (const unsigned char c : bytes) {
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 15]);
      }
      return out;
    }
    case Value::kUuidValue: {
      const std::string& b = value.uuid_value();
      if (b.size() != 16)
        throw std::invalid_argument("a uuid value of " + std::to_string(b.size()) +
                                    " bytes (expected 16)");
      static const char kHex[] = "0123456789abcdef";
      std::string out;
      for (std::size_t i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
        const auto c = static_cast<unsigned char>(b[i]);
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 15]);
      }
      return out;
    }
    case Value::kDateValue:
      return PgDateText(value.date_value());
    case Value::kTimestampValue:
      return PgTimestampText(value.timestamp_value(), false);
    case Value::kTimestamptzValue:
      return PgTimestampText(value.timestamptz_value(), true);
    case Value::kLiteral:
      return value.literal();
    case Value::KIND_NOT_SET:
      break;
  }
  throw std::invalid_argument("a value of no known kind (a newer protocol?)");
}

void AppendCopyField(std::string& out, const std::optional<std::string>& value) {
  if (!value) {
    out += "\\N";
    return;
  }
  for (const char c : *value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out.push_back(c);
    }
  }
}

void TextArray::Add(const std::optional<std::string>& element) {
  if (element) {
    Add(std::string_view(*element));
  } else {
    AddNull();
  }
}

void TextArray::Add(std::string_view element) {
  text_.push_back(count_++ == 0 ? '{' : ',');
  text_.push_back('"');
  for (const char c : element) {
    if (c == '"' || c == '\\') text_.push_back('\\');
    text_.push_back(c);
  }
  text_.push_back('"');
}

void TextArray::AddNull() {
  text_.push_back(count_++ == 0 ? '{' : ',');
  text_ += "NULL";
}

std::string TextArray::Take() {
  std::string out = count_ == 0 ? std::string("{}") : std::move(text_) + "}";
  text_.clear();
  count_ = 0;
  return out;
}

}  // namespace dblog::apply
