// sidecar/pgoutput/values.cc: output text to Values (see values.h).
#include "pgoutput/values.h"

#include <charconv>
#include <cstring>
#include <limits>

namespace dblog::pgoutput {
namespace {

// The catalog's fixed oids (pg_type_d.h) of the kinds the encoder carries natively.
constexpr std::uint32_t kBoolOid = 16, kByteaOid = 17, kNameOid = 19, kInt8Oid = 20,
                        kInt2Oid = 21, kInt4Oid = 23, kTextOid = 25, kOidOid = 26,
                        kFloat4Oid = 700, kFloat8Oid = 701, kBpcharOid = 1042,
                        kVarcharOid = 1043, kDateOid = 1082, kTimestampOid = 1114,
                        kTimestamptzOid = 1184, kUuidOid = 2950;

constexpr std::int64_t kUsecPerSec = 1000000, kSecPerDay = 86400;

[[noreturn]] void Fail(ValueKind kind, std::string_view text, const char* why) {
  constexpr std::size_t kShown = 64;
  std::string shown(text.substr(0, kShown));
  for (char& c : shown)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  throw ValueError(std::string("not the output of a ") + ValueKindName(kind) + " (" + why +
                   "): \"" + shown + (text.size() > kShown ? "...\"" : "\""));
}

// A protobuf string field must hold UTF-8; the server sends UTF-8 under client_encoding UTF8,
// so anything else is not the server's output.
bool IsUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char* end = p + s.size();
  while (p < end) {
    unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    int n;
    std::uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (end - p <= n) return false;
    for (int i = 1; i <= n; ++i) {
      if ((p[i] & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
      return false;
    p += n + 1;
  }
  return true;
}

// A decimal integer of the whole text, as the integer output functions print it: no sign but
// '-', no leading zero, no -0.
template <typename T>
T ParseInt(ValueKind kind, std::string_view text) {
  T v{};
  if (text.empty() || text[0] == '+') Fail(kind, text, "not a decimal integer");
  const std::string_view digits = text.substr(text[0] == '-');
  if (digits.size() > 1 && digits[0] == '0') Fail(kind, text, "a leading zero");
  if (text == "-0") Fail(kind, text, "a negative zero");
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) Fail(kind, text, "out of range");
  if (ec != std::errc() || end != text.data() + text.size())
    Fail(kind, text, "not a decimal integer");
  return v;
}

// float4out/float8out with extra_float_digits 3: the shortest text that reads back exactly,
// or NaN, Infinity, -Infinity.
template <typename T>
T ParseFloat(ValueKind kind, std::string_view text) {
  if (text == "NaN") return std::numeric_limits<T>::quiet_NaN();
  if (text == "Infinity") return std::numeric_limits<T>::infinity();
  if (text == "-Infinity") return -std::numeric_limits<T>::infinity();
  std::string_view digits = text.substr(!text.empty() && text[0] == '-');
  if (digits.empty() || digits[0] < '0' || digits[0] > '9') Fail(kind, text, "not a number");
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v,
                                   std::chars_format::general);
  if (ec != std::errc() || end != text.data() + text.size()) Fail(kind, text, "not a number");
  return v;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// byteaout with bytea_output hex: \x and two hex digits a byte.
std::string ParseBytea(std::string_view text) {
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' || text.size() % 2 != 0)
    Fail(ValueKind::kBytea, text, "not \\x and hex digit pairs");
  std::string out(text.size() / 2 - 1, '\0');
  for (std::size_t i = 2, o = 0; i < text.size(); i += 2, ++o) {
    int hi = HexDigit(text[i]), lo = HexDigit(text[i + 1]);
    if (hi < 0 || lo < 0) Fail(ValueKind::kBytea, text, "not a hex digit");
    out[o] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

// uuid_out: 8-4-4-4-12 hex digits.
std::string ParseUuid(std::string_view text) {
  if (text.size() != 36) Fail(ValueKind::kUuid, text, "not 36 characters");
  std::string out(16, '\0');
  std::size_t o = 0;
  for (std::size_t i = 0; i < text.size();) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') Fail(ValueKind::kUuid, text, "no dash where uuid_out puts one");
      ++i;
      continue;
    }
    int hi = HexDigit(text[i]), lo = HexDigit(text[i + 1]);
    if (hi < 0 || lo < 0) Fail(ValueKind::kUuid, text, "not a hex digit");
    out[o++] = static_cast<char>(hi << 4 | lo);
    i += 2;
  }
  return out;
}

// Days from 1970-01-01 to the proleptic Gregorian date (y astronomical: 0 is 1 BC).
std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const std::int64_t yoe = y - era * 400;
  const std::int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const std::int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool IsLeap(std::int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// Reads exactly n digits at text[*pos] (n = 0: one or more).
bool Digits(std::string_view text, std::size_t* pos, std::size_t n, std::int64_t* v) {
  std::size_t start = *pos, i = start;
  *v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9' && (n == 0 || i - start < n)) {
    if (*v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) return false;
    *v = *v * 10 + (text[i] - '0');
    ++i;
  }
  if (i == start || (n != 0 && i - start != n)) return false;
  *pos = i;
  return true;
}

bool Expect(std::string_view text, std::size_t* pos, char c) {
  if (*pos >= text.size() || text[*pos] != c) return false;
  ++*pos;
  return true;
}

// EncodeDateOnly / EncodeDateTime with DateStyle ISO: YYYY-MM-DD (at least four year digits;
// BC years counted back from 1 BC), for a timestamp " HH:MM:SS[.ffffff]", for a timestamptz
// the zone "+HH[:MM[:SS]]", then " BC" for years up to 1 BC. Returns microseconds (a date's
// days in *days) since 1970-01-01 00:00 UTC, exactly, in 128 bits.
__extension__ typedef __int128 Int128;  // GCC's and Clang's: exact past int64 (-Wpedantic)

struct DateTime {
  Int128 usecs = 0;
  std::int64_t days = 0;
};

DateTime ParseDateTime(ValueKind kind, std::string_view text) {
  std::size_t pos = 0;
  std::int64_t year, month, day;
  const std::size_t year_start = pos;
  if (!Digits(text, &pos, 0, &year) || pos - year_start < 4 ||
      (pos - year_start > 4 && text[year_start] == '0') || !Expect(text, &pos, '-') ||
      !Digits(text, &pos, 2, &month) || !Expect(text, &pos, '-') ||
      !Digits(text, &pos, 2, &day))
    Fail(kind, text, "not YYYY-MM-DD");
  std::int64_t hour = 0, minute = 0, second = 0, fraction = 0, zone_secs = 0;
  if (kind != ValueKind::kDate) {
    if (!Expect(text, &pos, ' ') || !Digits(text, &pos, 2, &hour) ||
        !Expect(text, &pos, ':') || !Digits(text, &pos, 2, &minute) ||
        !Expect(text, &pos, ':') || !Digits(text, &pos, 2, &second))
      Fail(kind, text, "not HH:MM:SS after the date");
    if (pos < text.size() && text[pos] == '.') {
      ++pos;
      const std::size_t f = pos;
      if (!Digits(text, &pos, 0, &fraction) || pos - f > 6 || text[pos - 1] == '0')
        Fail(kind, text, "not one to six significant fraction digits");
      for (std::size_t i = pos - f; i < 6; ++i) fraction *= 10;
    }
    if (hour > 23 || minute > 59 || second > 59) Fail(kind, text, "no such time of day");
  }
  if (kind == ValueKind::kTimestamptz) {
    if (pos >= text.size() || (text[pos] != '+' && text[pos] != '-'))
      Fail(kind, text, "no zone offset");
    const int sign = text[pos++] == '-' ? -1 : 1;
    std::int64_t zh, zm = 0, zs = 0;
    if (!Digits(text, &pos, 2, &zh)) Fail(kind, text, "not a zone offset");
    if (Expect(text, &pos, ':')) {
      if (!Digits(text, &pos, 2, &zm)) Fail(kind, text, "not a zone offset");
      if (Expect(text, &pos, ':') && !Digits(text, &pos, 2, &zs))
        Fail(kind, text, "not a zone offset");
    }
    if (zm > 59 || zs > 59) Fail(kind, text, "not a zone offset");
    zone_secs = sign * (zh * 3600 + zm * 60 + zs);
  }
  bool bc = false;
  if (pos < text.size()) {
    if (text.substr(pos) != " BC") Fail(kind, text, "bytes after the value");
    bc = true;
  }
  if (year == 0 || year > 10000000) Fail(kind, text, "no such year");
  if (month < 1 || month > 12) Fail(kind, text, "no such month");
  const std::int64_t astro = bc ? 1 - year : year;
  static constexpr int kMonthDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const std::int64_t mdays = kMonthDays[month - 1] + (month == 2 && IsLeap(astro));
  if (day < 1 || day > mdays) Fail(kind, text, "no such day");
  DateTime out;
  out.days = DaysFromCivil(astro, static_cast<unsigned>(month), static_cast<unsigned>(day));
  out.usecs = (static_cast<Int128>(out.days) * kSecPerDay + hour * 3600 + minute * 60 +
               second - zone_secs) *
                  kUsecPerSec +
              fraction;
  return out;
}

}  // namespace

const char* ValueKindName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kBool: return "bool";
    case ValueKind::kInt2: return "int2";
    case ValueKind::kInt4: return "int4";
    case ValueKind::kInt8: return "int8";
    case ValueKind::kOid: return "oid";
    case ValueKind::kFloat4: return "float4";
    case ValueKind::kFloat8: return "float8";
    case ValueKind::kText: return "text";
    case ValueKind::kName: return "name";
    case ValueKind::kBytea: return "bytea";
    case ValueKind::kUuid: return "uuid";
    case ValueKind::kDate: return "date";
    case ValueKind::kTimestamp: return "timestamp";
    case ValueKind::kTimestamptz: return "timestamptz";
    case ValueKind::kLiteral: return "literal";
  }
  return "?";
}

ValueKind KindOfBaseType(std::uint32_t oid) {
  switch (oid) {
    case kBoolOid: return ValueKind::kBool;
    case kInt2Oid: return ValueKind::kInt2;
    case kInt4Oid: return ValueKind::kInt4;
    case kInt8Oid: return ValueKind::kInt8;
    case kOidOid: return ValueKind::kOid;
    case kFloat4Oid: return ValueKind::kFloat4;
    case kFloat8Oid: return ValueKind::kFloat8;
    case kTextOid:
    case kVarcharOid:
    case kBpcharOid: return ValueKind::kText;
    case kNameOid: return ValueKind::kName;
    case kByteaOid: return ValueKind::kBytea;
    case kUuidOid: return ValueKind::kUuid;
    case kDateOid: return ValueKind::kDate;
    case kTimestampOid: return ValueKind::kTimestamp;
    case kTimestamptzOid: return ValueKind::kTimestamptz;
    default: return ValueKind::kLiteral;
  }
}

std::string OutputSettingsOptions() {
  std::string out;
  for (const OutputSetting& s : kOutputSettings) {
    if (!out.empty()) out += ' ';
    out += "-c ";
    out += s.name;
    out += '=';
    out += s.value;  // none holds a space, a quote or a backslash: nothing to escape
  }
  return out;
}

std::string SetLocalOutputSettings() {
  std::string out;
  for (const OutputSetting& s : kOutputSettings) {
    if (!out.empty()) out += "; ";
    out += "SET LOCAL ";
    out += s.name;
    out += " = '";
    out += s.value;  // as above: nothing to escape
    out += '\'';
  }
  return out;
}

void FromText(ValueKind kind, std::string_view text, dblog::v1::Value* out) {
  switch (kind) {
    case ValueKind::kBool:
      if (text == "t") {
        out->set_bool_value(true);
      } else if (text == "f") {
        out->set_bool_value(false);
      } else {
        Fail(kind, text, "neither t nor f");
      }
      return;
    case ValueKind::kInt2:
      out->set_int_value(ParseInt<std::int16_t>(kind, text));
      return;
    case ValueKind::kInt4:
      out->set_int_value(ParseInt<std::int32_t>(kind, text));
      return;
    case ValueKind::kInt8:
      out->set_int_value(ParseInt<std::int64_t>(kind, text));
      return;
    case ValueKind::kOid:
      if (!text.empty() && text[0] == '-') Fail(kind, text, "negative");
      out->set_int_value(ParseInt<std::uint32_t>(kind, text));
      return;
    case ValueKind::kFloat4:
      out->set_float4_value(ParseFloat<float>(kind, text));
      return;
    case ValueKind::kFloat8:
      out->set_float8_value(ParseFloat<double>(kind, text));
      return;
    case ValueKind::kText:
    case ValueKind::kName:
      if (!IsUtf8(text)) Fail(kind, text, "not UTF-8");
      out->set_text_value(std::string(text));
      return;
    case ValueKind::kBytea:
      out->set_bytes_value(ParseBytea(text));
      return;
    case ValueKind::kUuid:
      out->set_uuid_value(ParseUuid(text));
      return;
    case ValueKind::kDate:
    case ValueKind::kTimestamp:
    case ValueKind::kTimestamptz: {
      if (text == "infinity" || text == "-infinity") {
        out->set_literal(std::string(text));
        return;
      }
      const DateTime dt = ParseDateTime(kind, text);
      if (kind == ValueKind::kDate) {
        if (dt.days < std::numeric_limits<std::int32_t>::min() ||
            dt.days > std::numeric_limits<std::int32_t>::max())
          Fail(kind, text, "out of range");
        out->set_date_value(static_cast<std::int32_t>(dt.days));
      } else if (dt.usecs > std::numeric_limits<std::int64_t>::max() ||
                 dt.usecs < std::numeric_limits<std::int64_t>::min()) {
        out->set_literal(std::string(text));  // finite, but past an int64 count from 1970
      } else if (kind == ValueKind::kTimestamp) {
        out->set_timestamp_value(static_cast<std::int64_t>(dt.usecs));
      } else {
        out->set_timestamptz_value(static_cast<std::int64_t>(dt.usecs));
      }
      return;
    }
    case ValueKind::kLiteral:
      if (!IsUtf8(text)) Fail(kind, text, "not UTF-8");
      out->set_literal(std::string(text));
      return;
  }
}

void RowFromText(const std::vector<ValueKind>& kinds,
                 const std::vector<std::optional<std::string>>& cells, dblog::v1::Row* row) {
  if (cells.size() != kinds.size())
    throw ValueError("a row of " + std::to_string(cells.size()) + " values for " +
                     std::to_string(kinds.size()) + " columns");
  for (std::size_t i = 0; i < cells.size(); ++i) {
    dblog::v1::Value* v = row->add_values();
    if (!cells[i]) {
      v->set_null_value(true);
      continue;
    }
    try {
      FromText(kinds[i], *cells[i], v);
    } catch (const ValueError& e) {
      throw ValueError("column " + std::to_string(i + 1) + ": " + e.what());
    }
  }
}

}  // namespace dblog::pgoutput
