// client/apply/sql_text.cc: values as PostgreSQL input text (see sql_text.h).
#include "client/apply/sql_text.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

#include "client/apply/value_access.h"
#include "client/time_format.h"

namespace dblog::apply {
namespace {

constexpr std::int64_t kMicrosPerDay = 86'400'000'000;
constexpr char kHex[] = "0123456789abcdef";

// `value` (not negative) in decimal, zero-padded to `width` digits. Per value of a copied row:
// no printf.
void AppendPadded(std::string& out, std::uint64_t value, int width) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof buf, value).ptr;
  for (int n = static_cast<int>(end - buf); n < width; ++n) out.push_back('0');
  out.append(buf, end);
}

// "YYYY-MM-DD"; true when the year is BC. PostgreSQL has no year 0: astronomical year 0 is
// 1 BC, -1 is 2 BC.
bool AppendDatePart(std::string& out, std::int64_t days) {
  const client::CivilDate date = client::CivilFromDays(days);
  std::int64_t year = date.year;
  const bool bc = year <= 0;
  if (bc) year = 1 - year;
  AppendPadded(out, static_cast<std::uint64_t>(year), 4);
  out.push_back('-');
  AppendPadded(out, date.month, 2);
  out.push_back('-');
  AppendPadded(out, date.day, 2);
  return bc;
}

void AppendDate(std::string& out, std::int64_t days) {
  if (AppendDatePart(out, days)) out += " BC";
}

void AppendTimestamp(std::string& out, std::int64_t micros, bool with_time_zone) {
  // Floor division that cannot overflow (INT64_MIN included): the time of day is never negative.
  std::int64_t days = micros / kMicrosPerDay;
  std::int64_t in_day = micros % kMicrosPerDay;
  if (in_day < 0) {
    in_day += kMicrosPerDay;
    --days;
  }
  const bool bc = AppendDatePart(out, days);
  const auto seconds = static_cast<std::uint64_t>(in_day / 1'000'000);
  out.push_back(' ');
  AppendPadded(out, seconds / 3600, 2);
  out.push_back(':');
  AppendPadded(out, seconds / 60 % 60, 2);
  out.push_back(':');
  AppendPadded(out, seconds % 60, 2);
  out.push_back('.');
  AppendPadded(out, static_cast<std::uint64_t>(in_day % 1'000'000), 6);
  if (with_time_zone) out += "+00";
  if (bc) out += " BC";
}

template <typename F>
void AppendFloat(std::string& out, F value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "Infinity" : "-Infinity";
  } else {
    char buf[64];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, value).ptr);
  }
}

// The text of a value that is neither NULL nor unchanged, appended to `out`.
template <typename V>
void AppendText(std::string& out, const V& value) {
  using dblog::v1::Value;
  switch (value.kind()) {
    case Value::kNullValue:
      break;
    case Value::kUnchanged:
      throw std::invalid_argument("an unchanged TOAST value has no text (keep the target's)");
    case Value::kSplit:  // the client library puts split values together before
      throw std::invalid_argument("a split value that was not put together");
    case Value::kBoolValue:
      out.push_back(value.integer() ? 't' : 'f');
      return;
    case Value::kIntValue: {
      char buf[24];
      out.append(buf, std::to_chars(buf, buf + sizeof buf, value.integer()).ptr);
      return;
    }
    case Value::kFloat4Value:
      return AppendFloat(out, value.float4());
    case Value::kFloat8Value:
      return AppendFloat(out, value.float8());
    case Value::kTextValue:
    case Value::kLiteral:
      out += value.text();
      return;
    case Value::kBytesValue: {
      out += "\\x";
      for (const unsigned char c : value.text()) {
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 15]);
      }
      return;
    }
    case Value::kUuidValue: {
      const std::string_view b = value.text();
      if (b.size() != 16)
        throw std::invalid_argument("a uuid value of " + std::to_string(b.size()) +
                                    " bytes (expected 16)");
      for (std::size_t i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
        const auto c = static_cast<unsigned char>(b[i]);
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 15]);
      }
      return;
    }
    case Value::kDateValue:
      return AppendDate(out, value.integer());
    case Value::kTimestampValue:
      return AppendTimestamp(out, value.integer(), false);
    case Value::kTimestamptzValue:
      return AppendTimestamp(out, value.integer(), true);
    case Value::KIND_NOT_SET:
      break;
  }
  throw std::invalid_argument("a value of no known kind (a newer protocol?)");
}

void AppendValueText(std::string& out, const dblog::v1::Value& value) {
  AppendText(out, MessageValue{value});
}

// COPY text's escapes of `text` appended to `out`: runs without a special character in one go.
void AppendCopyEscaped(std::string& out, std::string_view text) {
  for (;;) {
    const std::size_t at = text.find_first_of("\\\n\r\t");
    if (at == std::string_view::npos) {
      out.append(text);
      return;
    }
    out.append(text.substr(0, at));
    switch (text[at]) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += "\\t";
    }
    text.remove_prefix(at + 1);
  }
}

}  // namespace

std::string PgDateText(std::int64_t days) {
  std::string out;
  AppendDate(out, days);
  return out;
}

std::string PgTimestampText(std::int64_t micros, bool with_time_zone) {
  std::string out;
  AppendTimestamp(out, micros, with_time_zone);
  return out;
}

std::string PgFloatText(double value) {
  std::string out;
  AppendFloat(out, value);
  return out;
}

std::string PgFloatText(float value) {
  std::string out;
  AppendFloat(out, value);
  return out;
}

std::optional<std::string> ValueText(const dblog::v1::Value& value) {
  if (value.kind_case() == dblog::v1::Value::kNullValue) return std::nullopt;
  std::string out;
  AppendValueText(out, value);
  return out;
}

namespace {

template <typename V>
void AppendCopy(std::string& out, const V& value) {
  using dblog::v1::Value;
  switch (value.kind()) {
    case Value::kNullValue:
      out += "\\N";
      return;
    case Value::kTextValue:
    case Value::kLiteral:
      return AppendCopyEscaped(out, value.text());
    case Value::kBytesValue:
      out += '\\';  // "\\x...": the hex digits need no escape
      return AppendText(out, value);
    default:
      // the other kinds' text has no backslash, newline, carriage return or tab
      return AppendText(out, value);
  }
}

}  // namespace

void AppendCopyValue(std::string& out, const dblog::v1::Value& value) {
  AppendCopy(out, MessageValue{value});
}

void AppendCopyValue(std::string& out, const wire::ValueView& value) {
  AppendCopy(out, InPlaceValue{value});
}

void AppendCopyField(std::string& out, const std::optional<std::string>& value) {
  if (value) AppendCopyEscaped(out, *value);
  else out += "\\N";
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
