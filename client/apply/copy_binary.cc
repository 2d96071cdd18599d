// client/apply/copy_binary.cc: rows in COPY's binary format (see copy_binary.h).
#include "client/apply/copy_binary.h"

#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>

#include "client/apply/value_access.h"

namespace dblog::apply {
namespace {

using dblog::v1::Value;

// Days and microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
constexpr std::int64_t kEpochDays = 10957;
constexpr std::int64_t kEpochMicros = kEpochDays * 86'400'000'000;

// numeric's sign words (src/backend/utils/adt/numeric.c)
constexpr std::uint16_t kNumericPos = 0x0000;
constexpr std::uint16_t kNumericNeg = 0x4000;
constexpr std::uint16_t kNumericNan = 0xC000;
constexpr std::uint16_t kNumericPinf = 0xD000;
constexpr std::uint16_t kNumericNinf = 0xF000;
constexpr std::size_t kNumericDscaleMax = 0x3FFF;

template <typename T>
void PutBigEndian(std::string& out, T value) {
  using U = std::make_unsigned_t<T>;
  auto u = static_cast<U>(value);
  char bytes[sizeof(U)];
  for (std::size_t i = sizeof(U); i-- > 0;) {
    bytes[i] = static_cast<char>(u & 0xFF);
    u = static_cast<U>(u >> 8);
  }
  out.append(bytes, sizeof(U));
}

template <typename F, typename I>
I Bits(F value) {
  static_assert(sizeof(F) == sizeof(I));
  I bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

bool IsDigits(std::string_view s) {
  for (const char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// No PostgreSQL value is longer than 1 GB; a longer one has no binary form here.
constexpr std::size_t kMaxField = std::size_t{1} << 30;

bool PutBytes(std::string& out, std::string_view bytes) {
  if (bytes.size() > kMaxField) return false;
  PutBigEndian(out, static_cast<std::int32_t>(bytes.size()));
  out.append(bytes);
  return true;
}

// -1 for "-infinity", 1 for "infinity" (as date_out and timestamp_out print them), else none.
std::optional<int> Infinity(std::string_view text) {
  if (text == "infinity") return 1;
  if (text == "-infinity") return -1;
  return std::nullopt;
}

// A date's days or a timestamp's microseconds (T: int32 or int64), moved from the Unix epoch
// to PostgreSQL's, as a field. The literals "infinity" and "-infinity" are the receive
// functions' sentinels, T's extremes; a finite value that would land on one is out of range
// (the text path refuses it too): false, as for any other kind than `finite`.
template <typename T, typename V>
bool AppendSinceEpoch(std::string& out, const V& v, Value::KindCase finite, std::int64_t epoch) {
  T value;
  if (v.kind() == Value::kLiteral) {
    const auto infinite = Infinity(v.text());
    if (!infinite) return false;
    value = *infinite < 0 ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
  } else {
    std::int64_t shifted;
    if (v.kind() != finite || __builtin_sub_overflow(v.integer(), epoch, &shifted) ||
        shifted <= std::numeric_limits<T>::min() || shifted >= std::numeric_limits<T>::max())
      return false;
    value = static_cast<T>(shifted);
  }
  PutBigEndian(out, static_cast<std::int32_t>(sizeof(T)));
  PutBigEndian(out, value);
  return true;
}

// One field, its length included. False when the value has no binary form for `type`.
template <typename V>
bool AppendField(std::string& out, BinaryType type, const V& v) {
  const Value::KindCase kind = v.kind();
  if (kind == Value::kNullValue) {
    PutBigEndian(out, std::int32_t{-1});
    return true;
  }
  if (kind == Value::kUnchanged)
    throw std::invalid_argument("an unchanged TOAST value has no text (keep the target's)");
  switch (type) {
    case BinaryType::kNone:
      return false;
    case BinaryType::kBool:
      if (kind != Value::kBoolValue) return false;
      PutBigEndian(out, std::int32_t{1});
      out.push_back(v.integer() ? 1 : 0);
      return true;
    case BinaryType::kInt2:
    case BinaryType::kInt4:
    case BinaryType::kOid: {
      if (kind != Value::kIntValue) return false;
      const std::int64_t n = v.integer();
      if (type == BinaryType::kInt2) {
        if (n < std::numeric_limits<std::int16_t>::min() ||
            n > std::numeric_limits<std::int16_t>::max())
          return false;
        PutBigEndian(out, std::int32_t{2});
        PutBigEndian(out, static_cast<std::int16_t>(n));
        return true;
      }
      const bool fits = type == BinaryType::kOid
                            ? n >= 0 && n <= std::numeric_limits<std::uint32_t>::max()
                            : n >= std::numeric_limits<std::int32_t>::min() &&
                                  n <= std::numeric_limits<std::int32_t>::max();
      if (!fits) return false;
      PutBigEndian(out, std::int32_t{4});
      PutBigEndian(out, static_cast<std::uint32_t>(n));
      return true;
    }
    case BinaryType::kInt8:
      if (kind != Value::kIntValue) return false;
      PutBigEndian(out, std::int32_t{8});
      PutBigEndian(out, v.integer());
      return true;
    case BinaryType::kFloat4:
      if (kind != Value::kFloat4Value) return false;
      PutBigEndian(out, std::int32_t{4});
      PutBigEndian(out, Bits<float, std::uint32_t>(v.float4()));
      return true;
    case BinaryType::kFloat8:
      if (kind != Value::kFloat8Value) return false;
      PutBigEndian(out, std::int32_t{8});
      PutBigEndian(out, Bits<double, std::uint64_t>(v.float8()));
      return true;
    case BinaryType::kText:
      if (kind != Value::kTextValue) return false;
      return PutBytes(out, v.text());
    case BinaryType::kBytea:
      if (kind != Value::kBytesValue) return false;
      return PutBytes(out, v.text());
    case BinaryType::kUuid:
      if (kind != Value::kUuidValue || v.text().size() != 16) return false;
      return PutBytes(out, v.text());
    case BinaryType::kDate:
      // date_recv's infinities are the int32 extremes (DATEVAL_NOBEGIN, DATEVAL_NOEND)
      return AppendSinceEpoch<std::int32_t>(out, v, Value::kDateValue, kEpochDays);
    case BinaryType::kTimestamp:
      // the int64 extremes (DT_NOBEGIN, DT_NOEND); a finite timestamp beyond int64
      // microseconds since 1970 comes as a literal: no binary form here
      return AppendSinceEpoch<std::int64_t>(out, v, Value::kTimestampValue, kEpochMicros);
    case BinaryType::kTimestamptz:
      return AppendSinceEpoch<std::int64_t>(out, v, Value::kTimestamptzValue, kEpochMicros);
    case BinaryType::kNumeric: {
      if (kind != Value::kLiteral) return false;
      const std::size_t at = out.size();
      PutBigEndian(out, std::int32_t{0});
      if (!AppendNumericBinary(out, v.text())) {
        out.resize(at);
        return false;
      }
      const auto length = static_cast<std::int32_t>(out.size() - at - 4);
      std::string len;
      PutBigEndian(len, length);
      out.replace(at, 4, len);
      return true;
    }
    case BinaryType::kJson:
      if (kind != Value::kLiteral) return false;
      return PutBytes(out, v.text());
    case BinaryType::kJsonb: {
      if (kind != Value::kLiteral) return false;
      const std::string_view text = v.text();
      if (text.size() >= kMaxField) return false;
      PutBigEndian(out, static_cast<std::int32_t>(text.size() + 1));
      out.push_back(1);  // jsonb's binary format version
      out.append(text);
      return true;
    }
  }
  return false;
}

template <typename RowOf>
bool AppendRow(std::string& out, const std::vector<BinaryType>& types, const RowOf& row,
               std::size_t width, std::size_t* failed) {
  if (width != types.size() || width > static_cast<std::size_t>(
                                           std::numeric_limits<std::int16_t>::max())) {
    if (failed) *failed = width;
    return false;
  }
  const std::size_t at = out.size();
  PutBigEndian(out, static_cast<std::int16_t>(width));
  for (std::size_t i = 0; i < width; ++i) {
    bool ok;
    try {
      ok = AppendField(out, types[i], AccessValue(row[i]));
    } catch (...) {
      out.resize(at);
      throw;
    }
    if (!ok) {
      out.resize(at);
      if (failed) *failed = i;
      return false;
    }
  }
  return true;
}

struct MessageRow {
  const dblog::v1::Row& row;
  const Value& operator[](std::size_t i) const { return row.values(static_cast<int>(i)); }
};

}  // namespace

BinaryType BinaryTypeOf(std::uint32_t type_oid) {
  switch (type_oid) {
    case 16: return BinaryType::kBool;
    case 17: return BinaryType::kBytea;
    case 20: return BinaryType::kInt8;
    case 21: return BinaryType::kInt2;
    case 23: return BinaryType::kInt4;
    case 25: return BinaryType::kText;
    case 26: return BinaryType::kOid;
    case 114: return BinaryType::kJson;
    case 700: return BinaryType::kFloat4;
    case 701: return BinaryType::kFloat8;
    case 1042: return BinaryType::kText;  // bpchar
    case 1043: return BinaryType::kText;  // varchar
    case 1082: return BinaryType::kDate;
    case 1114: return BinaryType::kTimestamp;
    case 1184: return BinaryType::kTimestamptz;
    case 1700: return BinaryType::kNumeric;
    case 2950: return BinaryType::kUuid;
    case 3802: return BinaryType::kJsonb;
    default: return BinaryType::kNone;
  }
}

void AppendCopyBinaryHeader(std::string& out) {
  out.append("PGCOPY\n\377\r\n\0", 11);
  PutBigEndian(out, std::int32_t{0});  // flags: no OIDs
  PutBigEndian(out, std::int32_t{0});  // no header extension
}

void AppendCopyBinaryTrailer(std::string& out) { PutBigEndian(out, std::int16_t{-1}); }

bool AppendCopyBinaryRow(std::string& out, const std::vector<BinaryType>& types,
                         const dblog::v1::Row& row, std::size_t* failed_column) {
  return AppendRow(out, types, MessageRow{row}, static_cast<std::size_t>(row.values_size()),
                   failed_column);
}

bool AppendCopyBinaryRow(std::string& out, const std::vector<BinaryType>& types,
                         const wire::RowView& row, std::size_t* failed_column) {
  return AppendRow(out, types, row, row.size(), failed_column);
}

bool AppendNumericBinary(std::string& out, std::string_view text) {
  const auto special = [&out](std::uint16_t sign) {
    PutBigEndian(out, std::uint16_t{0});  // ndigits
    PutBigEndian(out, std::int16_t{0});   // weight
    PutBigEndian(out, sign);
    PutBigEndian(out, std::uint16_t{0});  // dscale
    return true;
  };
  if (text == "NaN") return special(kNumericNan);
  if (text == "Infinity") return special(kNumericPinf);
  if (text == "-Infinity") return special(kNumericNinf);
  std::uint16_t sign = kNumericPos;
  if (!text.empty() && text[0] == '-') {
    sign = kNumericNeg;
    text.remove_prefix(1);
  }
  std::string_view whole = text;
  std::string_view fraction;
  if (const std::size_t dot = text.find('.'); dot != std::string_view::npos) {
    whole = text.substr(0, dot);
    fraction = text.substr(dot + 1);
    if (fraction.empty()) return false;
  }
  if (whole.empty() || !IsDigits(whole) || !IsDigits(fraction)) return false;
  if (fraction.size() > kNumericDscaleMax) return false;
  // Base-10000 digits, grouped from the decimal point outwards.
  const std::size_t whole_groups = (whole.size() + 3) / 4;
  const std::size_t fraction_groups = (fraction.size() + 3) / 4;
  thread_local std::vector<std::uint16_t> digits;  // one allocation per thread, not per value
  digits.assign(whole_groups + fraction_groups, 0);
  const std::size_t pad = whole_groups * 4 - whole.size();
  for (std::size_t i = 0; i < whole.size(); ++i) {
    std::uint16_t& d = digits[(i + pad) / 4];
    d = static_cast<std::uint16_t>(d * 10 + (whole[i] - '0'));
  }
  for (std::size_t i = 0; i < fraction_groups * 4; ++i) {
    std::uint16_t& d = digits[whole_groups + i / 4];
    d = static_cast<std::uint16_t>(d * 10 + (i < fraction.size() ? fraction[i] - '0' : 0));
  }
  std::int64_t weight = static_cast<std::int64_t>(whole_groups) - 1;
  std::size_t first = 0;
  std::size_t end = digits.size();
  while (first < end && digits[first] == 0) {
    ++first;
    --weight;
  }
  while (end > first && digits[end - 1] == 0) --end;
  if (first == end) {  // zero: as numeric stores it (make_result)
    weight = 0;
    sign = kNumericPos;
  }
  if (weight < std::numeric_limits<std::int16_t>::min() ||
      weight > std::numeric_limits<std::int16_t>::max() ||
      end - first > std::numeric_limits<std::uint16_t>::max())
    return false;
  PutBigEndian(out, static_cast<std::uint16_t>(end - first));
  PutBigEndian(out, static_cast<std::int16_t>(weight));
  PutBigEndian(out, sign);
  PutBigEndian(out, static_cast<std::uint16_t>(fraction.size()));
  for (std::size_t i = first; i < end; ++i) PutBigEndian(out, digits[i]);
  return true;
}

}  // namespace dblog::apply
