// tests/cpp/pgoutput/values_test.cc: the converter of pgoutput mode (sidecar/pgoutput/values.h)
// on text written here: each kind's output text to the Value the extension's encoder makes of
// the same datum (the expectations are encoder_equality_test.cc's, which reads them from the
// encoder), the edges (extremes, BC, infinities, past int64 microseconds), and text no output
// function prints refused. pgoutput_values_test.cc checks it against real servers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "pgoutput/values.h"

namespace {

namespace po = dblog::pgoutput;
using dblog::v1::Value;
using po::ValueKind;

Value Of(ValueKind kind, std::string_view text) {
  Value v;
  po::FromText(kind, text, &v);
  return v;
}

template <typename T>
auto Bits(T f) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  U u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

TEST(ValuesTest, KindsFollowTheEncodersColumnKinds) {
  EXPECT_EQ(po::KindOfBaseType(16), ValueKind::kBool);
  EXPECT_EQ(po::KindOfBaseType(21), ValueKind::kInt2);
  EXPECT_EQ(po::KindOfBaseType(23), ValueKind::kInt4);
  EXPECT_EQ(po::KindOfBaseType(20), ValueKind::kInt8);
  EXPECT_EQ(po::KindOfBaseType(26), ValueKind::kOid);
  EXPECT_EQ(po::KindOfBaseType(700), ValueKind::kFloat4);
  EXPECT_EQ(po::KindOfBaseType(701), ValueKind::kFloat8);
  for (std::uint32_t text_like : {25u, 1043u, 1042u})
    EXPECT_EQ(po::KindOfBaseType(text_like), ValueKind::kText);
  EXPECT_EQ(po::KindOfBaseType(19), ValueKind::kName);
  EXPECT_EQ(po::KindOfBaseType(17), ValueKind::kBytea);
  EXPECT_EQ(po::KindOfBaseType(2950), ValueKind::kUuid);
  EXPECT_EQ(po::KindOfBaseType(1082), ValueKind::kDate);
  EXPECT_EQ(po::KindOfBaseType(1114), ValueKind::kTimestamp);
  EXPECT_EQ(po::KindOfBaseType(1184), ValueKind::kTimestamptz);
  // numeric, jsonb, int4[], time, interval, a user type's oid
  for (std::uint32_t other : {1700u, 3802u, 1007u, 1083u, 1186u, 16384u})
    EXPECT_EQ(po::KindOfBaseType(other), ValueKind::kLiteral) << other;
}

TEST(ValuesTest, NativeKinds) {
  EXPECT_TRUE(Of(ValueKind::kBool, "t").bool_value());
  EXPECT_EQ(Of(ValueKind::kBool, "f").kind_case(), Value::kBoolValue);
  EXPECT_FALSE(Of(ValueKind::kBool, "f").bool_value());
  EXPECT_EQ(Of(ValueKind::kInt2, "-32768").int_value(), -32768);
  EXPECT_EQ(Of(ValueKind::kInt4, "2147483647").int_value(), 2147483647);
  EXPECT_EQ(Of(ValueKind::kInt8, "-9223372036854775808").int_value(), INT64_MIN);
  EXPECT_EQ(Of(ValueKind::kOid, "4294967295").int_value(), 4294967295LL);
  EXPECT_EQ(Of(ValueKind::kInt4, "0").kind_case(), Value::kIntValue);
  EXPECT_EQ(Bits(Of(ValueKind::kFloat4, "1.5").float4_value()), Bits(1.5f));
  EXPECT_EQ(Bits(Of(ValueKind::kFloat8, "0.1").float8_value()), Bits(0.1));
  EXPECT_EQ(Bits(Of(ValueKind::kFloat8, "0.3333333333333333").float8_value()), Bits(1.0 / 3));
  EXPECT_EQ(Bits(Of(ValueKind::kFloat4, "0.33333334").float4_value()), Bits(1.0f / 3));
  EXPECT_EQ(Bits(Of(ValueKind::kFloat8, "1e-05").float8_value()), Bits(1e-05));
  EXPECT_EQ(Bits(Of(ValueKind::kFloat8, "1.7976931348623157e+308").float8_value()),
            Bits(std::numeric_limits<double>::max()));
  EXPECT_EQ(Bits(Of(ValueKind::kFloat8, "5e-324").float8_value()),
            Bits(std::numeric_limits<double>::denorm_min()));
  EXPECT_EQ(Bits(Of(ValueKind::kFloat4, "-0").float4_value()), Bits(-0.0f));
  EXPECT_EQ(Bits(Of(ValueKind::kFloat8, "-0").float8_value()), Bits(-0.0));
  EXPECT_EQ(Bits(Of(ValueKind::kFloat8, "Infinity").float8_value()),
            Bits(std::numeric_limits<double>::infinity()));
  EXPECT_EQ(Bits(Of(ValueKind::kFloat4, "-Infinity").float4_value()),
            Bits(-std::numeric_limits<float>::infinity()));
  EXPECT_EQ(Bits(Of(ValueKind::kFloat8, "NaN").float8_value()),
            Bits(std::numeric_limits<double>::quiet_NaN()));
  EXPECT_EQ(Of(ValueKind::kText, "héllo ☃").text_value(), "héllo ☃");
  EXPECT_EQ(Of(ValueKind::kText, "ab   ").text_value(), "ab   ");
  EXPECT_EQ(Of(ValueKind::kText, "").kind_case(), Value::kTextValue);
  EXPECT_EQ(Of(ValueKind::kName, "nm").text_value(), "nm");
  EXPECT_EQ(Of(ValueKind::kBytea, "\\x00ff10").bytes_value(), std::string("\x00\xff\x10", 3));
  EXPECT_EQ(Of(ValueKind::kBytea, "\\x").kind_case(), Value::kBytesValue);
  EXPECT_EQ(Of(ValueKind::kUuid, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11").uuid_value(),
            std::string("\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11", 16));
  EXPECT_EQ(Of(ValueKind::kLiteral, "{\"a\": [1, 2]}").literal(), "{\"a\": [1, 2]}");
}

TEST(ValuesTest, DatesAndTimestamps) {
  EXPECT_EQ(Of(ValueKind::kDate, "2024-02-29").date_value(), 19782);
  EXPECT_EQ(Of(ValueKind::kDate, "1970-01-01").kind_case(), Value::kDateValue);
  EXPECT_EQ(Of(ValueKind::kDate, "1970-01-01").date_value(), 0);
  EXPECT_EQ(Of(ValueKind::kDate, "4714-11-24 BC").date_value(), -2440588);
  EXPECT_EQ(Of(ValueKind::kDate, "5874897-12-31").date_value(), 2145042905);
  EXPECT_EQ(Of(ValueKind::kDate, "0001-01-01").date_value(), -719162);
  EXPECT_EQ(Of(ValueKind::kDate, "0001-12-31 BC").date_value(), -719163);
  EXPECT_EQ(Of(ValueKind::kDate, "infinity").literal(), "infinity");
  EXPECT_EQ(Of(ValueKind::kDate, "-infinity").literal(), "-infinity");
  EXPECT_EQ(Of(ValueKind::kTimestamp, "2024-02-29 12:34:56.789012").timestamp_value(),
            1709210096789012LL);
  EXPECT_EQ(Of(ValueKind::kTimestamp, "1970-01-01 00:00:00").timestamp_value(), 0);
  EXPECT_EQ(Of(ValueKind::kTimestamp, "1900-01-01 00:00:00.000001").timestamp_value(),
            -2208988799999999LL);
  EXPECT_EQ(Of(ValueKind::kTimestamp, "2000-01-01 00:00:00.5").timestamp_value(),
            946684800500000LL);
  EXPECT_EQ(Of(ValueKind::kTimestamptz, "2024-02-29 10:34:56.789012+00").timestamptz_value(),
            1709202896789012LL);
  EXPECT_EQ(Of(ValueKind::kTimestamptz, "2024-02-29 12:34:56.789012+02").timestamptz_value(),
            1709202896789012LL);
  EXPECT_EQ(Of(ValueKind::kTimestamptz, "2024-02-29 05:04:56.789012-05:30").timestamptz_value(),
            1709202896789012LL);
  EXPECT_EQ(Of(ValueKind::kTimestamptz, "4714-11-24 00:00:00+00 BC").timestamptz_value(),
            -210866803200000000LL);
  EXPECT_EQ(Of(ValueKind::kTimestamp, "infinity").literal(), "infinity");
  EXPECT_EQ(Of(ValueKind::kTimestamptz, "-infinity").literal(), "-infinity");
  // Finite, but past INT64_MAX microseconds after 1970: the literal, as the encoder sends it.
  EXPECT_EQ(Of(ValueKind::kTimestamp, "294276-12-31 23:59:59.999999").literal(),
            "294276-12-31 23:59:59.999999");
  EXPECT_EQ(Of(ValueKind::kTimestamptz, "294276-12-31 23:59:59.999999+00").literal(),
            "294276-12-31 23:59:59.999999+00");
  // The last microsecond an int64 count from 1970 holds: 294247-01-10 04:00:54.775807.
  EXPECT_EQ(Of(ValueKind::kTimestamp, "294247-01-10 04:00:54.775807").timestamp_value(),
            INT64_MAX);
  EXPECT_EQ(Of(ValueKind::kTimestamp, "294247-01-10 04:00:54.775808").kind_case(),
            Value::kLiteral);
}

TEST(ValuesTest, TextNoOutputFunctionPrintsIsRefused) {
  const std::pair<ValueKind, std::string> bad[] = {
      {ValueKind::kBool, "true"},
      {ValueKind::kBool, ""},
      {ValueKind::kInt2, "32768"},
      {ValueKind::kInt4, "+1"},
      {ValueKind::kInt4, "1 "},
      {ValueKind::kInt8, "-0"},  // found by pgoutput_values_fuzz
      {ValueKind::kInt4, "007"},
      {ValueKind::kInt2, "-01"},
      {ValueKind::kInt8, "9223372036854775808"},
      {ValueKind::kOid, "-1"},
      {ValueKind::kOid, "4294967296"},
      {ValueKind::kFloat8, "inf"},
      {ValueKind::kFloat8, "nan"},
      {ValueKind::kFloat8, "1.5x"},
      {ValueKind::kFloat8, ""},
      {ValueKind::kFloat4, ".5"},
      {ValueKind::kText, "\xff"},
      {ValueKind::kText, "\xc0\x80"},
      {ValueKind::kText, "\xed\xa0\x80"},
      {ValueKind::kLiteral, "\xe2\x98"},
      {ValueKind::kBytea, "00ff"},
      {ValueKind::kBytea, "\\x0"},
      {ValueKind::kBytea, "\\xzz"},
      {ValueKind::kUuid, "a0eebc999c0b4ef8bb6d6bb9bd380a11"},
      {ValueKind::kUuid, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g"},
      {ValueKind::kDate, "2023-02-29"},
      {ValueKind::kDate, "24-01-01"},
      {ValueKind::kDate, "02024-01-01"},
      {ValueKind::kDate, "0000-01-01"},
      {ValueKind::kDate, "2024-13-01"},
      {ValueKind::kDate, "2024-01-01 AD"},
      {ValueKind::kDate, "Infinity"},
      {ValueKind::kTimestamp, "2024-01-01"},
      {ValueKind::kTimestamp, "2024-01-01 24:00:00"},
      {ValueKind::kTimestamp, "2024-01-01 00:00:00.1234567"},
      {ValueKind::kTimestamp, "2024-01-01 00:00:00.10"},
      {ValueKind::kTimestamp, "2024-01-01 00:00:00+00"},
      {ValueKind::kTimestamptz, "2024-01-01 00:00:00"},
      {ValueKind::kTimestamptz, "2024-01-01 00:00:00+0"},
      {ValueKind::kTimestamptz, "2024-01-01 00:00:00+00:60"},
  };
  for (const auto& [kind, text] : bad) {
    Value v;
    EXPECT_THROW(po::FromText(kind, text, &v), po::ValueError)
        << po::ValueKindName(kind) << " \"" << text << "\"";
  }
}

TEST(ValuesTest, OptionsPinEverySettingForLibpq) {
  EXPECT_EQ(po::OutputSettingsOptions(),
            "-c DateStyle=ISO,YMD -c IntervalStyle=postgres -c extra_float_digits=3"
            " -c bytea_output=hex -c TimeZone=UTC -c client_encoding=UTF8");
}

}  // namespace
