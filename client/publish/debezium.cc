// client/publish/debezium.cc: see debezium.h. Where a rule below comes from Debezium, the file
// of Debezium's source (github.com/debezium/debezium, 3.x) is named next to it.
#include "client/publish/debezium.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <vector>

#include "client/relation_cache.h"
#include "client/time_format.h"

namespace dblog::publish {

using common::JsonWriter;

namespace {

// PostgreSQL's built-in type oids (pg_type.dat) of the types converted here.
enum Oid : std::uint32_t {
  kBool = 16, kBytea = 17, kInt8 = 20, kInt2 = 21, kInt4 = 23, kOid = 26, kFloat4 = 700,
  kFloat8 = 701, kMoney = 790, kDate = 1082, kTime = 1083, kTimestamp = 1114,
  kTimestamptz = 1184, kInterval = 1186, kTimetz = 1266, kNumeric = 1700,
  // arrays: their element's oid (PostgresValueConverter.createArrayConverter handles these;
  // money[], name[], interval[], varbit[], xml[], point[] it does not, and they stay text here)
  kBoolArray = 1000, kByteaArray = 1001, kCharArray = 1002, kInt2Array = 1005,
  kInt4Array = 1007, kTextArray = 1009, kBpcharArray = 1014, kVarcharArray = 1015,
  kInt8Array = 1016, kFloat4Array = 1021, kFloat8Array = 1022, kOidArray = 1028,
  kInetArray = 1041, kCidrArray = 651, kMacaddrArray = 1040, kMacaddr8Array = 775,
  kJsonArray = 199, kJsonbArray = 3807, kDateArray = 1182, kTimeArray = 1183,
  kTimestampArray = 1115, kTimestamptzArray = 1185, kTimetzArray = 1270, kNumericArray = 1231,
  kUuidArray = 2951, kInt4rangeArray = 3905, kNumrangeArray = 3907, kTsrangeArray = 3909,
  kTstzrangeArray = 3911, kDaterangeArray = 3913, kInt8rangeArray = 3927,
};

constexpr char kUnavailable[] = "__debezium_unavailable_value";  // unavailable.value.placeholder
constexpr std::int64_t kMicrosPerDay = 86'400'000'000;

// The element type of an array type Debezium converts element by element, else 0.
std::uint32_t ArrayElement(std::uint32_t oid) {
  switch (oid) {
    case kBoolArray: return kBool;
    case kByteaArray: return kBytea;
    case kInt2Array: return kInt2;
    case kInt4Array: return kInt4;
    case kInt8Array: return kInt8;
    case kOidArray: return kOid;
    case kFloat4Array: return kFloat4;
    case kFloat8Array: return kFloat8;
    case kNumericArray: return kNumeric;
    case kDateArray: return kDate;
    case kTimeArray: return kTime;
    case kTimetzArray: return kTimetz;
    case kTimestampArray: return kTimestamp;
    case kTimestamptzArray: return kTimestamptz;
    case kCharArray: case kTextArray: case kBpcharArray: case kVarcharArray: case kInetArray:
    case kCidrArray: case kMacaddrArray: case kMacaddr8Array: case kJsonArray: case kJsonbArray:
    case kUuidArray: case kInt4rangeArray: case kNumrangeArray: case kTsrangeArray:
    case kTstzrangeArray: case kDaterangeArray: case kInt8rangeArray:
      return 25;  // text: the element's own text, a string
    default: return 0;
  }
}

// The fractional second digits of a time type's column: its typmod, 6 without one (pgjdbc's
// TypeInfoCache.getScale; PostgresValueConverter.getTimePrecision uses it).
int TimePrecision(std::int32_t typmod) { return typmod < 0 ? 6 : typmod; }

// ---- decimals: java.math.BigDecimal as Kafka Connect's Decimal writes it -----------------

// A decimal number as PostgreSQL prints it: sign, digits, a scale.
struct DecimalText {
  bool negative = false;
  std::string digits;  // the unscaled value's digits, no sign, no leading zeros ("0" for zero)
  int scale = 0;
};

// "-12.500" -> {true, "12500", 3}; nullopt for anything else (NaN, Infinity).
std::optional<DecimalText> ParseDecimal(std::string_view text) {
  DecimalText d;
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) d.negative = text[i++] == '-';
  bool dot = false, any = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !dot) {
      dot = true;
    } else if (c >= '0' && c <= '9') {
      d.digits += c;
      any = true;
      if (dot) ++d.scale;
    } else {
      return std::nullopt;
    }
  }
  if (!any) return std::nullopt;
  const std::size_t nz = d.digits.find_first_not_of('0');
  d.digits = nz == std::string::npos ? "0" : d.digits.substr(nz);
  if (d.digits == "0") d.negative = false;
  return d;
}

// BigDecimal.setScale(scale, RoundingMode.HALF_UP).
void SetScale(DecimalText& d, int scale) {
  if (scale >= d.scale) {
    if (d.digits != "0") d.digits.append(static_cast<std::size_t>(scale - d.scale), '0');
    d.scale = scale;
    return;
  }
  const std::size_t drop = static_cast<std::size_t>(d.scale - scale);
  std::string kept = d.digits.size() > drop ? d.digits.substr(0, d.digits.size() - drop) : "0";
  const char first_dropped = d.digits.size() >= drop ? d.digits[d.digits.size() - drop] : '0';
  if (first_dropped >= '5') {  // away from zero on a half, the sign apart
    int i = static_cast<int>(kept.size()) - 1;
    while (i >= 0 && kept[static_cast<std::size_t>(i)] == '9') kept[static_cast<std::size_t>(i--)] = '0';
    if (i < 0)
      kept.insert(kept.begin(), '1');
    else
      ++kept[static_cast<std::size_t>(i)];
  }
  const std::size_t nz = kept.find_first_not_of('0');
  d.digits = nz == std::string::npos ? "0" : kept.substr(nz);
  if (d.digits == "0") d.negative = false;
  d.scale = scale;
}

// BigDecimal.stripTrailingZeros() then, when that made the scale negative, setScale(0):
// PostgresValueConverter.convertDecimal for a VariableScaleDecimal.
void StripTrailingZeros(DecimalText& d) {
  while (d.scale > 0 && d.digits.size() > 1 && d.digits.back() == '0') {
    d.digits.pop_back();
    --d.scale;
  }
  if (d.digits == "0") d.scale = 0;
}

// BigInteger.toByteArray() of the unscaled value: big-endian two's complement, the fewest bytes
// that hold the sign.
std::string UnscaledBytes(const DecimalText& d) {
  std::vector<unsigned char> mag;  // big-endian magnitude
  for (const char c : d.digits) {  // mag = mag * 10 + digit
    unsigned carry = static_cast<unsigned>(c - '0');
    for (auto it = mag.rbegin(); it != mag.rend(); ++it) {
      const unsigned v = *it * 10u + carry;
      *it = static_cast<unsigned char>(v & 0xFF);
      carry = v >> 8;
    }
    while (carry) {
      mag.insert(mag.begin(), static_cast<unsigned char>(carry & 0xFF));
      carry >>= 8;
    }
  }
  if (mag.empty()) return std::string(1, '\0');
  if (!d.negative) {
    if (mag.front() & 0x80) mag.insert(mag.begin(), 0);
    return std::string(mag.begin(), mag.end());
  }
  for (auto& b : mag) b = static_cast<unsigned char>(~b);  // two's complement: invert, add 1
  for (auto it = mag.rbegin(); it != mag.rend(); ++it)
    if (++*it != 0) break;
  if (!(mag.front() & 0x80)) mag.insert(mag.begin(), 0xFF);
  return std::string(mag.begin(), mag.end());
}

// numeric as decimal.handling.mode=precise: a typmod's scale: Decimal (the base64 of the
// unscaled bytes, as JsonConverter writes a Decimal with decimal.format=BASE64, its default);
// no typmod: VariableScaleDecimal {"scale":..,"value":..} (PostgresValueConverter.numericSchema,
// convertDecimal). NaN and the infinities cannot be either: Debezium's conversion throws, and
// with event.converting.failure.handling.mode=warn (its default) the field is null
// (SpecialValueDecimal.fromLogical, TableSchemaBuilder.createValueGenerator).
void WriteNumeric(JsonWriter& json, std::int32_t typmod, std::string_view text) {
  std::optional<DecimalText> d = ParseDecimal(text);
  if (!d) {
    json.Null();
    return;
  }
  if (typmod < 0) {
    StripTrailingZeros(*d);
    json.BeginObject();
    json.Key("scale").Int(d->scale);
    json.Key("value").String(common::Base64Encode(UnscaledBytes(*d)));
    json.EndObject();
    return;
  }
  SetScale(*d, (typmod - 4) & 0xFFFF);
  json.String(common::Base64Encode(UnscaledBytes(*d)));
}

// money: PostgresMoney.parse (the sign, parentheses, the currency symbol and ',' removed), then
// a Decimal of scale money.fraction.digits (2) rounded HALF_UP (convertMoney, PRECISE).
void WriteMoney(JsonWriter& json, std::string_view text) {
  if (text.empty()) {
    json.Null();
    return;
  }
  const bool negative = text.front() == '(' || text.front() == '-';
  std::string plain;
  for (const char c : text)
    if ((c >= '0' && c <= '9') || c == '.') plain += c;
  std::optional<DecimalText> d = ParseDecimal(plain);
  if (!d) {
    json.Null();
    return;
  }
  d->negative = negative && d->digits != "0";
  SetScale(*d, 2);
  json.String(common::Base64Encode(UnscaledBytes(*d)));
}

// ---- dates and times ---------------------------------------------------------------------

// "HH:MM:SS[.ffffff]" at `text` (hours may be 24): microseconds since midnight; `used` the
// characters read.
std::optional<std::int64_t> ParseTimeOfDay(std::string_view text, std::size_t& used) {
  unsigned h = 0, m = 0, s = 0;
  int n = 0;
  const std::string t(text);
  if (std::sscanf(t.c_str(), "%2u:%2u:%2u%n", &h, &m, &s, &n) != 3) return std::nullopt;
  std::size_t i = static_cast<std::size_t>(n);
  std::int64_t micros = 0;
  if (i < t.size() && t[i] == '.') {
    ++i;
    int digits = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
      if (digits < 6) micros = micros * 10 + (t[i] - '0');
      ++digits;
      ++i;
    }
    for (; digits < 6; ++digits) micros *= 10;
  }
  used = i;
  return ((static_cast<std::int64_t>(h) * 60 + m) * 60 + s) * 1'000'000 + micros;
}

// "+02", "-05:30", "+05:30:15": seconds east of UTC.
std::optional<std::int64_t> ParseOffset(std::string_view text) {
  if (text.empty() || (text[0] != '+' && text[0] != '-')) return std::nullopt;
  unsigned h = 0, m = 0, s = 0;
  const std::string t(text.substr(1));
  const int got = std::sscanf(t.c_str(), "%u:%u:%u", &h, &m, &s);
  if (got < 1) return std::nullopt;
  const std::int64_t seconds = (static_cast<std::int64_t>(h) * 60 + m) * 60 + s;
  return text[0] == '-' ? -seconds : seconds;
}

// Java's ISO_LOCAL_DATE year: four digits for 0..9999, '+' and the digits above, '-' and at
// least four digits below (ZonedTimestamp, ZonedTime print it so: "+21016-11-04T...").
std::string JavaDate(std::int64_t days) {
  const client::CivilDate c = client::CivilFromDays(days);
  char buf[40];
  if (c.year > 9999)
    std::snprintf(buf, sizeof buf, "+%lld-%02u-%02u", static_cast<long long>(c.year), c.month, c.day);
  else if (c.year < 0)
    std::snprintf(buf, sizeof buf, "-%04lld-%02u-%02u", static_cast<long long>(-c.year), c.month, c.day);
  else
    std::snprintf(buf, sizeof buf, "%04lld-%02u-%02u", static_cast<long long>(c.year), c.month, c.day);
  return buf;
}

// "HH:MM:SS" and the fraction: `width` digits (1..9, zero-padded), or (width 0) Java's
// ISO_LOCAL_TIME: no fraction when it is zero, else its digits without trailing zeros.
std::string JavaTime(std::int64_t micros_of_day, int width) {
  const std::int64_t seconds = micros_of_day / 1'000'000;
  const std::int64_t fraction = micros_of_day % 1'000'000;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", static_cast<long long>(seconds / 3600),
                static_cast<long long>(seconds / 60 % 60), static_cast<long long>(seconds % 60));
  std::string out = buf;
  char frac[16];
  std::snprintf(frac, sizeof frac, "%06lld000", static_cast<long long>(fraction));  // nanos
  if (width > 0) {
    out += '.';
    out.append(frac, static_cast<std::size_t>(std::min(width, 9)));
  } else if (fraction) {
    std::string f(frac, 9);
    while (f.back() == '0') f.pop_back();
    out += "." + f;
  }
  return out;
}

// timestamptz as io.debezium.time.ZonedTimestamp: ISO 8601 in UTC with the column's fractional
// digits (ZonedTimestamp.toIsoString with PostgresValueConverter.convertTimestampWithZone's
// fractional width, the column's scale: 6 without a typmod, "…30.000000Z"; typmod 0: Java's
// ISO_OFFSET_DATE_TIME, no fraction).
std::string ZonedTimestamp(std::int64_t micros, std::int32_t typmod) {
  std::int64_t days = micros / kMicrosPerDay;
  std::int64_t in_day = micros % kMicrosPerDay;
  if (in_day < 0) {
    in_day += kMicrosPerDay;
    --days;
  }
  return JavaDate(days) + "T" + JavaTime(in_day, TimePrecision(typmod)) + "Z";
}

// "2016-11-04" (and " BC"): days since the epoch.
std::optional<std::int64_t> ParseDate(std::string_view text, std::size_t& used) {
  long long y = 0;
  unsigned m = 0, d = 0;
  int n = 0;
  const std::string t(text);
  if (std::sscanf(t.c_str(), "%lld-%2u-%2u%n", &y, &m, &d, &n) != 3) return std::nullopt;
  used = static_cast<std::size_t>(n);
  const bool bc = t.find(" BC") != std::string::npos;
  if (bc) y = 1 - y;
  return client::DaysFromCivil(y, m, d);
}

// "2016-11-04 13:51:30.123456": microseconds since the epoch.
std::optional<std::int64_t> ParseTimestamp(std::string_view text, std::size_t& used) {
  std::size_t n = 0;
  const auto days = ParseDate(text, n);
  if (!days || n >= text.size() || (text[n] != ' ' && text[n] != 'T')) return std::nullopt;
  std::size_t m = 0;
  const auto tod = ParseTimeOfDay(text.substr(n + 1), m);
  if (!tod) return std::nullopt;
  used = n + 1 + m;
  return *days * kMicrosPerDay + *tod;
}

// timestamp(0..3) as io.debezium.time.Timestamp (milliseconds), else MicroTimestamp
// (JdbcValueConverters.schemaBuilder, TemporalPrecisionMode.ADAPTIVE). ±infinity:
// PGStatement.DATE_POSITIVE_INFINITY / DATE_NEGATIVE_INFINITY microseconds
// (PostgresValueConverter.POSITIVE_INFINITY_LOCAL_DATE_TIME).
void WriteTimestamp(JsonWriter& json, std::int32_t typmod, std::int64_t micros) {
  if (TimePrecision(typmod) <= 3) {
    std::int64_t ms = micros / 1000;
    if (micros % 1000 < 0) --ms;  // floor
    json.Int(ms);
  } else {
    json.Int(micros);
  }
}

// time(0..3) as io.debezium.time.Time (milliseconds past midnight, an int32), else MicroTime.
void WriteTime(JsonWriter& json, std::int32_t typmod, std::int64_t micros) {
  if (TimePrecision(typmod) <= 3)
    json.Int(micros / 1000);
  else
    json.Int(micros);
}

// timetz as io.debezium.time.ZonedTime: the time moved to UTC, "HH:MM:SS[.f]Z" (Java's
// ISO_OFFSET_TIME; PostgresValueConverter.convertTimeWithZone); "24:00:00+00" stays
// "24:00:00Z" (PostgresTimeBoundary).
std::optional<std::string> ZonedTime(std::string_view text) {
  std::size_t used = 0;
  const auto tod = ParseTimeOfDay(text, used);
  if (!tod) return std::nullopt;
  const auto offset = ParseOffset(text.substr(used));
  if (!offset) return std::nullopt;
  if (*tod == kMicrosPerDay && *offset == 0) return std::string("24:00:00Z");
  std::int64_t utc = (*tod - *offset * 1'000'000) % kMicrosPerDay;
  if (utc < 0) utc += kMicrosPerDay;
  return JavaTime(utc, 0) + "Z";
}

// interval (IntervalStyle postgres: "1 year 2 mons 3 days 04:05:06.78") as
// io.debezium.time.MicroDuration: MicroDuration.durationMicros(years, months, days, hours,
// minutes, seconds, DAYS_PER_MONTH_AVG = 365.25 / 12), in its double arithmetic, the seconds
// as pgjdbc's PGInterval.getSeconds() gives them (whole seconds + microseconds / 1e6).
std::optional<std::int64_t> IntervalMicros(std::string_view text) {
  long long years = 0, months = 0, days = 0, hours = 0, minutes = 0, whole = 0, micros = 0;
  const std::string t(text);
  std::size_t i = 0;
  while (i < t.size()) {
    while (i < t.size() && t[i] == ' ') ++i;
    if (i >= t.size()) break;
    std::size_t end = t.find(' ', i);
    if (end == std::string::npos) end = t.size();
    const std::string token = t.substr(i, end - i);
    i = end;
    if (token.find(':') != std::string::npos) {
      const bool negative = token[0] == '-';
      const std::size_t start = token[0] == '-' || token[0] == '+' ? 1 : 0;
      unsigned long long h = 0;
      unsigned mi = 0, s = 0;
      int n = 0;
      if (std::sscanf(token.c_str() + start, "%llu:%2u:%2u%n", &h, &mi, &s, &n) != 3)
        return std::nullopt;
      long long us = 0;
      std::size_t k = start + static_cast<std::size_t>(n);
      if (k < token.size() && token[k] == '.') {
        int digits = 0;
        for (++k; k < token.size() && token[k] >= '0' && token[k] <= '9'; ++k, ++digits)
          if (digits < 6) us = us * 10 + (token[k] - '0');
        for (; digits < 6; ++digits) us *= 10;
      }
      const long long sign = negative ? -1 : 1;
      hours = sign * static_cast<long long>(h);
      minutes = sign * mi;
      whole = sign * s;
      micros = sign * us;
      continue;
    }
    char* rest = nullptr;
    const long long value = std::strtoll(token.c_str(), &rest, 10);
    while (i < t.size() && t[i] == ' ') ++i;
    std::size_t unit_end = t.find(' ', i);
    if (unit_end == std::string::npos) unit_end = t.size();
    const std::string unit = t.substr(i, unit_end - i);
    i = unit_end;
    if (unit.rfind("year", 0) == 0)
      years = value;
    else if (unit.rfind("mon", 0) == 0)
      months = value;
    else if (unit.rfind("day", 0) == 0)
      days = value;
    else
      return std::nullopt;
  }
  const double days_per_month_avg = 365.25 / 12.0;
  const double seconds = static_cast<double>(whole) + static_cast<double>(micros) / 1e6;
  const double number_of_days =
      static_cast<double>(years * 12 + months) * days_per_month_avg + static_cast<double>(days);
  const double number_of_seconds =
      (((number_of_days * 24 + static_cast<double>(hours)) * 60) + static_cast<double>(minutes)) *
          60 +
      seconds;
  return static_cast<std::int64_t>(number_of_seconds * 1e6 + 0);
}

// "\x0001ff" -> the bytes.
std::optional<std::string> HexBytea(std::string_view text) {
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' || text.size() % 2) return std::nullopt;
  std::string out;
  const auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c - 'A' + 10;
  };
  for (std::size_t i = 2; i < text.size(); i += 2)
    out += static_cast<char>(nibble(text[i]) << 4 | nibble(text[i + 1]));
  return out;
}

// One value of a type given its text as PostgreSQL prints it (an array's element, or a
// scalar carried as text: `literal`).
void WriteFromText(JsonWriter& json, std::uint32_t oid, std::int32_t typmod,
                   std::string_view text) {
  std::size_t used = 0;
  switch (oid) {
    case kBool:
      json.Bool(text == "t" || text == "true");
      return;
    case kInt2: case kInt4: case kInt8: case kOid:
      json.Int(std::strtoll(std::string(text).c_str(), nullptr, 10));
      return;
    case kFloat4: case kFloat8: {
      const std::string t(text);
      json.Double(t == "Infinity" ? HUGE_VAL : t == "-Infinity" ? -HUGE_VAL : std::strtod(t.c_str(), nullptr));
      return;
    }
    case kNumeric:
      WriteNumeric(json, typmod, text);
      return;
    case kMoney:
      WriteMoney(json, text);
      return;
    case kBytea:
      if (auto bytes = HexBytea(text)) {
        json.String(common::Base64Encode(*bytes));
        return;
      }
      break;
    case kDate:
      if (auto days = ParseDate(text, used)) {
        json.Int(*days);
        return;
      }
      break;
    case kTimestamp:
      if (text == "infinity") return WriteTimestamp(json, typmod, 9223372036825200000LL);
      if (text == "-infinity") return WriteTimestamp(json, typmod, -9223372036832400000LL);
      if (auto micros = ParseTimestamp(text, used)) return WriteTimestamp(json, typmod, *micros);
      break;
    case kTimestamptz:
      if (text == "infinity" || text == "-infinity") break;  // ZonedTimestamp: the text
      if (auto micros = ParseTimestamp(text, used)) {
        if (auto offset = ParseOffset(text.substr(used))) {
          json.String(ZonedTimestamp(*micros - *offset * 1'000'000, typmod));
          return;
        }
      }
      break;
    case kTime:
      if (auto micros = ParseTimeOfDay(text, used)) return WriteTime(json, typmod, *micros);
      break;
    case kTimetz:
      if (auto zoned = ZonedTime(text)) {
        json.String(*zoned);
        return;
      }
      break;
    case kInterval:
      if (auto micros = IntervalMicros(text)) {
        json.Int(*micros);
        return;
      }
      break;
    default:
      break;
  }
  json.String(text);
}

// Where an array's text ("{1,2,NULL}", "{\"a b\",c}", "[0:1]={1,2}", nested braces for more
// dimensions) opens its outer brace, if it is one (its braces balanced outside quotes).
std::optional<std::size_t> ArrayStart(std::string_view text) {
  std::size_t i = 0;
  if (!text.empty() && text[0] == '[') {  // explicit bounds
    const std::size_t eq = text.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    i = eq + 1;
  }
  if (i >= text.size() || text[i] != '{') return std::nullopt;
  int depth = 0;
  bool quoted = false;
  for (std::size_t k = i; k < text.size(); ++k) {
    const char c = text[k];
    if (quoted) {
      if (c == '\\') ++k;
      else if (c == '"') quoted = false;
    } else if (c == '"') {
      quoted = true;
    } else if (c == '{') {
      ++depth;
    } else if (c == '}') {
      if (--depth == 0) return k + 1 == text.size() ? std::optional<std::size_t>(i) : std::nullopt;
    }
  }
  return std::nullopt;
}

// An array's text as a JSON array of its elements (nested arrays for more dimensions), each
// converted as its type (PostgresValueConverter.createArrayConverter, convertArray).
void WriteArray(JsonWriter& json, std::uint32_t element, std::int32_t typmod,
                std::string_view text, std::size_t i) {
  while (i < text.size()) {
    const char c = text[i];
    if (c == '{') {
      json.BeginArray();
      ++i;
    } else if (c == '}') {
      json.EndArray();
      ++i;
    } else if (c == ',' || c == ' ') {
      ++i;
    } else {
      std::string item;
      bool quoted = false;
      if (c == '"') {
        quoted = true;
        for (++i; i < text.size() && text[i] != '"'; ++i) {
          if (text[i] == '\\' && i + 1 < text.size()) ++i;
          item += text[i];
        }
        ++i;  // the closing quote
      } else {
        while (i < text.size() && text[i] != ',' && text[i] != '}') item += text[i++];
      }
      if (!quoted && item == "NULL")
        json.Null();
      else
        WriteFromText(json, element, typmod, item);
    }
  }
}

std::string UuidText(const std::string& bytes) {
  if (bytes.size() != 16) return common::Base64Encode(bytes);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    const auto c = static_cast<unsigned char>(bytes[i]);
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

void WriteRow(JsonWriter& json, const dblog::v1::Relation& relation, const dblog::v1::Row& row) {
  json.BeginObject();
  for (int i = 0; i < relation.columns_size() && i < row.values_size(); ++i) {
    json.Key(relation.columns(i).name());
    WriteDebeziumValue(json, relation.columns(i), row.values(i));
  }
  json.EndObject();
}

// A DELETE's `before` without REPLICA IDENTITY FULL: the key columns, the others null (what
// Debezium sends for the default replica identity).
// A NOT NULL column the old row does not carry (a delete under the default replica identity):
// the fallback Debezium's converters give a required field without a value
// (common/jdbc/JdbcValueConverters.java convertValue: the column's fallback, 0, false, "", an
// empty array, the epoch; PG/PostgresValueConverter.java: "{}" for json), so that the record
// still fits its schema (JsonConverter refuses a null for a required field).
void WriteFallback(JsonWriter& json, const dblog::v1::Column& column) {
  const std::uint32_t oid = column.type_oid();
  if (ArrayElement(oid)) {
    json.BeginArray().EndArray();
    return;
  }
  switch (oid) {
    case kBool: json.Bool(false); return;
    case kInt2: case kInt4: case kInt8: case kOid: case kDate: case kTime: case kTimestamp:
    case kInterval:
      json.Int(0);
      return;
    case kFloat4: case kFloat8: json.Double(0); return;
    case kBytea: json.String(""); return;
    case kMoney: json.String("AA=="); return;  // a Decimal of 0
    case kNumeric:
      if (column.typmod() >= 4) {
        json.String("AA==");
      } else {
        json.BeginObject().Key("scale").Int(0).Key("value").String("AA==").EndObject();
      }
      return;
    case kTimestamptz: json.String("1970-01-01T00:00:00Z"); return;
    case kTimetz: json.String("00:00:00Z"); return;
    case 114: case 3802: json.String("{}"); return;  // json, jsonb
    default: json.String(""); return;
  }
}

void WriteKeyOnlyRow(JsonWriter& json, const dblog::v1::Relation& relation,
                     const dblog::v1::Row& key) {
  json.BeginObject();
  for (int i = 0; i < relation.columns_size(); ++i) {
    json.Key(relation.columns(i).name());
    int k = -1;
    for (int j = 0; j < relation.key_columns_size(); ++j)
      if (static_cast<int>(relation.key_columns(j)) == i) k = j;
    if (k >= 0 && k < key.values_size())
      WriteDebeziumValue(json, relation.columns(i), key.values(k));
    else if (relation.columns(i).not_null())
      WriteFallback(json, relation.columns(i));
    else
      json.Null();
  }
  json.EndObject();
}

void WriteLsnOrNull(std::string& out, std::uint64_t lsn) {
  if (lsn)
    out += "\"" + std::to_string(lsn) + "\"";
  else
    out += "null";
}

// `source`, in the field order of Debezium's schema (SchemaFactory.sourceInfoSchemaBuilder,
// PostgresSourceInfoStructMaker): version, connector, name, ts_ms, snapshot, db, sequence,
// ts_us, ts_ns, schema, table, txId, lsn, xmin. An incremental snapshot's row has no txId, lsn
// nor xmin (PostgresSourceInfoStructMaker.struct); a snapshot's row the time it was read
// (RelationalSnapshotChangeEventSource, AbstractIncrementalSnapshotChangeEventSource:
// clock.currentTime()).
void WriteSource(JsonWriter& json, const dblog::v1::Relation& relation,
                 const DebeziumSource& source, std::uint64_t lsn, bool read) {
  const std::int64_t micros = read ? source.now_nanos / 1000 : source.commit_time;
  const std::int64_t nanos = read ? source.now_nanos : source.commit_time * 1000;
  if (!lsn && read && source.snapshot == "true") lsn = source.snapshot_lsn;
  json.Key("source").BeginObject();
  json.Key("version").String("dblog-0.1");
  json.Key("connector").String("postgresql");
  json.Key("name").String(source.name);
  json.Key("ts_ms").Int(micros / 1000);
  json.Key("snapshot").String(source.snapshot);
  json.Key("db").String(source.db);
  // SourceInfo.sequence(): a JSON array of two strings (or nulls), as a string
  std::string sequence = "[";
  WriteLsnOrNull(sequence, source.last_commit_lsn);
  sequence += ",";
  WriteLsnOrNull(sequence, lsn);
  json.Key("sequence").String(sequence + "]");
  json.Key("ts_us").Int(micros);
  json.Key("ts_ns").Int(nanos);
  json.Key("schema").String(relation.schema());
  json.Key("table").String(relation.name());
  const bool incremental = source.snapshot == "incremental";
  if (source.xid && !incremental)
    json.Key("txId").Uint(source.xid & 0xFFFFFFFFu);  // PostgreSQL's 32-bit xid, as Debezium
  else
    json.Key("txId").Null();
  if (lsn && !incremental)
    json.Key("lsn").Uint(lsn);
  else
    json.Key("lsn").Null();
  json.Key("xmin").Null();
  json.EndObject();
}

// The envelope's tail, in Debezium's order (SchemaFactory.datatypeEnvelopeSchema): transaction,
// op, then the processing time (Envelope.create/update/delete/read: ts_ms, ts_us, ts_ns).
void WriteTail(JsonWriter& json, const char* op, const DebeziumSource& source) {
  json.Key("transaction").Null();
  json.Key("op").String(op);
  json.Key("ts_ms").Int(source.now_nanos / 1'000'000);
  json.Key("ts_us").Int(source.now_nanos / 1000);
  json.Key("ts_ns").Int(source.now_nanos);
}

bool ParseBool(const std::string& key, const std::string& value) {
  if (value == "true") return true;
  if (value == "false") return false;
  throw std::invalid_argument(key + " is true or false, not '" + value + "'");
}

}  // namespace

void SetDebeziumOption(DebeziumOptions& options, const std::string& key,
                       const std::string& value) {
  if (key == "skipped.operations") {
    DebeziumOptions o = options;
    o.skip_create = o.skip_update = o.skip_delete = o.skip_truncate = false;
    if (value != "none") {
      std::size_t i = 0;
      while (i <= value.size()) {
        std::size_t end = value.find(',', i);
        if (end == std::string::npos) end = value.size();
        std::string op = value.substr(i, end - i);
        while (!op.empty() && op.front() == ' ') op.erase(op.begin());
        while (!op.empty() && op.back() == ' ') op.pop_back();
        if (op == "c")
          o.skip_create = true;
        else if (op == "u")
          o.skip_update = true;
        else if (op == "d")
          o.skip_delete = true;
        else if (op == "t")
          o.skip_truncate = true;
        else
          throw std::invalid_argument("skipped.operations is a list of c, u, d, t, or none; not '" +
                                      value + "'");
        i = end + 1;
      }
    }
    options = o;
  } else if (key == "tombstones.on.delete") {
    options.tombstones_on_delete = ParseBool(key, value);
  } else if (key == "database.dbname") {
    options.database = value;
  } else if (key == "schemas.enable" || key == "key.converter.schemas.enable" ||
             key == "value.converter.schemas.enable") {
    options.schemas_enable = ParseBool(key, value);
  } else {
    throw std::invalid_argument("unknown Debezium option '" + key +
                                "' (skipped.operations, tombstones.on.delete, database.dbname, "
                                "schemas.enable)");
  }
}

namespace {

// An unchanged TOASTed value as Debezium's UnchangedToastedPlaceholder (PostgreSQL connector)
// writes it, in the type the column's schema has (TypeSchema): a bytea the base64 of the
// placeholder's bytes, an array of strings a one-element array of it, an array of int32 or
// int64 (int4[], int8[], oid[]) the placeholder's bytes as numbers. Debezium has none for other
// types: the placeholder string, as for text.
void WriteUnchanged(JsonWriter& json, std::uint32_t oid) {
  if (oid == kBytea) {
    json.String(common::Base64Encode(kUnavailable));
    return;
  }
  const std::uint32_t element = ArrayElement(oid);
  if (element == 25) {
    json.BeginArray().String(kUnavailable).EndArray();
    return;
  }
  if (element == kInt4 || element == kInt8 || element == kOid) {
    json.BeginArray();
    for (const char c : std::string_view(kUnavailable)) json.Int(static_cast<signed char>(c));
    json.EndArray();
    return;
  }
  json.String(kUnavailable);
}

}  // namespace

void WriteDebeziumValue(JsonWriter& json, const dblog::v1::Column& column,
                        const dblog::v1::Value& value) {
  using dblog::v1::Value;
  const std::uint32_t oid = column.type_oid();
  const std::int32_t typmod = column.typmod();
  switch (value.kind_case()) {
    case Value::kNullValue: json.Null(); break;
    case Value::kUnchanged: WriteUnchanged(json, oid); break;
    case Value::kBoolValue: json.Bool(value.bool_value()); break;
    case Value::kIntValue: json.Int(value.int_value()); break;
    case Value::kFloat4Value: json.Float(value.float4_value()); break;
    case Value::kFloat8Value: json.Double(value.float8_value()); break;
    case Value::kTextValue: json.String(value.text_value()); break;
    case Value::kBytesValue: json.String(common::Base64Encode(value.bytes_value())); break;
    case Value::kUuidValue: json.String(UuidText(value.uuid_value())); break;
    case Value::kDateValue: json.Int(value.date_value()); break;  // io.debezium.time.Date
    // a column of another type (a domain: its own oid, the base type's typmod unknown here)
    // takes the type's default precision
    case Value::kTimestampValue:
      WriteTimestamp(json, oid == kTimestamp ? typmod : -1, value.timestamp_value());
      break;
    case Value::kTimestamptzValue:
      json.String(ZonedTimestamp(value.timestamptz_value(), oid == kTimestamptz ? typmod : -1));
      break;
    case Value::kLiteral:
      if (const std::uint32_t element = ArrayElement(oid)) {
        if (const auto start = ArrayStart(value.literal())) {
          WriteArray(json, element, typmod, value.literal(), *start);
          break;
        }
      }
      WriteFromText(json, oid, typmod, value.literal());
      break;
    default: json.Null(); break;
  }
}

namespace {

constexpr std::uint32_t kUuid = 2950, kJson = 114, kJsonb = 3802, kXml = 142;

// {"type":<type>[,"name":<name>,"version":1]}: the head of a field's schema, left open.
void SchemaHead(JsonWriter& json, const char* type, const char* name = nullptr) {
  json.BeginObject();
  json.Key("type").String(type);
  if (name) {
    json.Key("name").String(name);
    json.Key("version").Int(1);
  }
}

void DecimalSchema(JsonWriter& json, int scale, int precision) {
  SchemaHead(json, "bytes", "org.apache.kafka.connect.data.Decimal");
  json.Key("parameters").BeginObject();
  json.Key("scale").String(std::to_string(scale));
  if (precision > 0) json.Key("connect.decimal.precision").String(std::to_string(precision));
  json.EndObject();
}

// The schema of a value of type `oid` (typmod), as WriteDebeziumValue writes it; left open for
// "optional" and "field".
void TypeSchema(JsonWriter& json, std::uint32_t oid, std::int32_t typmod) {
  if (const std::uint32_t element = ArrayElement(oid)) {
    SchemaHead(json, "array");
    json.Key("items");
    TypeSchema(json, element, typmod);
    json.Key("optional").Bool(true);
    json.EndObject();
    return;
  }
  switch (oid) {
    case kBool: return SchemaHead(json, "boolean");
    case kInt2: return SchemaHead(json, "int16");
    case kInt4: return SchemaHead(json, "int32");
    case kInt8: case kOid: return SchemaHead(json, "int64");
    case kFloat4: return SchemaHead(json, "float");
    case kFloat8: return SchemaHead(json, "double");
    case kBytea: return SchemaHead(json, "bytes");
    case kMoney: return DecimalSchema(json, 2, 0);
    case kNumeric:
      if (typmod >= 4) return DecimalSchema(json, (typmod - 4) & 0xFFFF, ((typmod - 4) >> 16) & 0xFFFF);
      SchemaHead(json, "struct", "io.debezium.data.VariableScaleDecimal");
      json.Key("doc").String("Variable scaled decimal");
      json.Key("fields").BeginArray();
      json.BeginObject().Key("type").String("int32").Key("optional").Bool(false);
      json.Key("field").String("scale").EndObject();
      json.BeginObject().Key("type").String("bytes").Key("optional").Bool(false);
      json.Key("field").String("value").EndObject();
      json.EndArray();
      return;
    case kDate: return SchemaHead(json, "int32", "io.debezium.time.Date");
    case kTimestamp:
      return TimePrecision(typmod) <= 3 ? SchemaHead(json, "int64", "io.debezium.time.Timestamp")
                                        : SchemaHead(json, "int64", "io.debezium.time.MicroTimestamp");
    case kTimestamptz: return SchemaHead(json, "string", "io.debezium.time.ZonedTimestamp");
    case kTime:
      return TimePrecision(typmod) <= 3 ? SchemaHead(json, "int32", "io.debezium.time.Time")
                                        : SchemaHead(json, "int64", "io.debezium.time.MicroTime");
    case kTimetz: return SchemaHead(json, "string", "io.debezium.time.ZonedTime");
    case kInterval: return SchemaHead(json, "int64", "io.debezium.time.MicroDuration");
    case kUuid: return SchemaHead(json, "string", "io.debezium.data.Uuid");
    case kJson: case kJsonb: return SchemaHead(json, "string", "io.debezium.data.Json");
    case kXml: return SchemaHead(json, "string", "io.debezium.data.Xml");
    default: return SchemaHead(json, "string");
  }
}

void FieldSchema(JsonWriter& json, const dblog::v1::Column& column, bool optional) {
  TypeSchema(json, column.type_oid(), column.typmod());
  json.Key("optional").Bool(optional);
  json.Key("field").String(column.name());
  json.EndObject();
}

void RowSchemaFields(JsonWriter& json, const dblog::v1::Relation& relation) {
  json.Key("fields").BeginArray();
  for (const auto& c : relation.columns()) FieldSchema(json, c, !c.not_null());
  json.EndArray();
}

std::string RecordName(const dblog::v1::Relation& relation, const std::string& prefix,
                       const char* suffix) {
  return prefix + "." + relation.schema() + "." + relation.name() + "." + suffix;
}

// {"type":<type>,"optional":<optional>,"field":<name>} (and a name, for the Enum)
void PlainField(JsonWriter& json, const char* type, bool optional, const char* field) {
  json.BeginObject().Key("type").String(type).Key("optional").Bool(optional);
  json.Key("field").String(field).EndObject();
}

}  // namespace

std::string DebeziumKeySchema(const dblog::v1::Relation& relation, const std::string& prefix) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject().Key("type").String("struct");
  json.Key("fields").BeginArray();
  for (std::uint32_t k : relation.key_columns())
    if (static_cast<int>(k) < relation.columns_size())
      FieldSchema(json, relation.columns(static_cast<int>(k)), false);
  json.EndArray();
  json.Key("optional").Bool(false);
  json.Key("name").String(RecordName(relation, prefix, "Key"));
  json.EndObject();
  return out;
}

std::string DebeziumValueSchema(const dblog::v1::Relation& relation, const std::string& prefix) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject().Key("type").String("struct");
  json.Key("fields").BeginArray();
  for (const char* side : {"before", "after"}) {
    json.BeginObject().Key("type").String("struct");
    RowSchemaFields(json, relation);
    json.Key("optional").Bool(true);
    json.Key("name").String(RecordName(relation, prefix, "Value"));
    json.Key("field").String(side);
    json.EndObject();
  }
  // source (PostgresSourceInfoStructMaker)
  json.BeginObject().Key("type").String("struct").Key("fields").BeginArray();
  PlainField(json, "string", false, "version");
  PlainField(json, "string", false, "connector");
  PlainField(json, "string", false, "name");
  PlainField(json, "int64", false, "ts_ms");
  json.BeginObject().Key("type").String("string").Key("optional").Bool(true);
  json.Key("name").String("io.debezium.data.Enum").Key("version").Int(1);
  json.Key("parameters").BeginObject();
  json.Key("allowed").String(
      "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental");
  json.EndObject();
  json.Key("default").String("false").Key("field").String("snapshot").EndObject();
  PlainField(json, "string", false, "db");
  PlainField(json, "string", true, "sequence");
  PlainField(json, "int64", true, "ts_us");
  PlainField(json, "int64", true, "ts_ns");
  PlainField(json, "string", false, "schema");
  PlainField(json, "string", false, "table");
  PlainField(json, "int64", true, "txId");
  PlainField(json, "int64", true, "lsn");
  PlainField(json, "int64", true, "xmin");
  json.EndArray().Key("optional").Bool(false);
  json.Key("name").String("io.debezium.connector.postgresql.Source");
  json.Key("version").Int(1).Key("field").String("source").EndObject();
  // transaction (provide.transaction.metadata: always null here, the schema all the same)
  json.BeginObject().Key("type").String("struct").Key("fields").BeginArray();
  PlainField(json, "string", false, "id");
  PlainField(json, "int64", false, "total_order");
  PlainField(json, "int64", false, "data_collection_order");
  json.EndArray().Key("optional").Bool(true).Key("name").String("event.block");
  json.Key("version").Int(1).Key("field").String("transaction").EndObject();
  PlainField(json, "string", false, "op");
  PlainField(json, "int64", true, "ts_ms");
  PlainField(json, "int64", true, "ts_us");
  PlainField(json, "int64", true, "ts_ns");
  json.EndArray();
  json.Key("optional").Bool(false);
  json.Key("name").String(RecordName(relation, prefix, "Envelope"));
  json.Key("version").Int(2);
  json.EndObject();
  return out;
}

std::string WithSchema(const std::string& schema, const std::string& payload) {
  return "{\"schema\":" + schema + ",\"payload\":" + payload + "}";
}

std::string DebeziumKey(const dblog::v1::Relation& relation, const dblog::v1::Row& key) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  static const dblog::v1::Column kNoColumn;
  for (int j = 0; j < relation.key_columns_size() && j < key.values_size(); ++j) {
    const auto col = static_cast<int>(relation.key_columns(j));
    const bool known = col < relation.columns_size();
    json.Key(known ? relation.columns(col).name() : "");
    WriteDebeziumValue(json, known ? relation.columns(col) : kNoColumn, key.values(j));
  }
  json.EndObject();
  return out;
}

dblog::v1::Row KeyOfChange(const dblog::v1::Relation& relation, const dblog::v1::Change& change) {
  if (change.kind() == dblog::v1::Change::DELETE) return change.old_key();
  if (auto key = client::KeyOfRow(relation, change.new_row())) return *key;
  return change.old_key();
}

std::string DebeziumChange(const dblog::v1::Relation& relation, const dblog::v1::Change& change,
                           const DebeziumSource& source) {
  using dblog::v1::Change;
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  json.Key("before");
  if (change.has_old_row() && change.kind() != Change::INSERT && change.kind() != Change::READ)
    WriteRow(json, relation, change.old_row());  // REPLICA IDENTITY FULL
  else if (change.kind() == Change::DELETE)
    WriteKeyOnlyRow(json, relation, change.old_key());
  else
    json.Null();
  json.Key("after");
  if (change.kind() == Change::DELETE)
    json.Null();
  else
    WriteRow(json, relation, change.new_row());
  WriteSource(json, relation, source, change.lsn(), change.kind() == Change::READ);
  const char* op = change.kind() == Change::INSERT   ? "c"
                   : change.kind() == Change::UPDATE ? "u"
                   : change.kind() == Change::DELETE ? "d"
                                                     : "r";
  WriteTail(json, op, source);
  json.EndObject();
  return out;
}

std::string DebeziumTruncate(const dblog::v1::Relation& relation,
                             const dblog::v1::Truncate& truncate, const DebeziumSource& source) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  json.Key("before").Null();
  json.Key("after").Null();
  WriteSource(json, relation, source, truncate.lsn(), false);
  WriteTail(json, "t", source);
  json.EndObject();
  return out;
}

}  // namespace dblog::publish
