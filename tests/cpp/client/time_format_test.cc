// tests/cpp/client/time_format_test.cc: civil-from-days arithmetic and the date/timestamp text
// of the NDJSON renderer, against values computed independently (Python's datetime, shifted by
// whole 400-year cycles outside years 1..9999), before 1970, and at the int64 limits.
#include "client/time_format.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace dblog::client {
namespace {

struct KnownDay {
  std::int64_t days;
  std::int64_t year;
  unsigned month, day;
  const char* text;
};

const KnownDay kKnownDays[] = {
    {0, 1970, 1, 1, "1970-01-01"},
    {-1, 1969, 12, 31, "1969-12-31"},
    {-25567, 1900, 1, 1, "1900-01-01"},  // 1900: not a leap year
    {-135081, 1600, 2, 29, "1600-02-29"},
    {-719162, 1, 1, 1, "0001-01-01"},
    {-719528, 0, 1, 1, "0000-01-01"},  // 1 BC, a leap year
    {-719529, -1, 12, 31, "-000001-12-31"},
    {-719893, -1, 1, 1, "-000001-01-01"},
    {-2440588, -4713, 11, 24, "-004713-11-24"},  // Julian day 0
    {11016, 2000, 2, 29, "2000-02-29"},
    {11017, 2000, 3, 1, "2000-03-01"},
    {19782, 2024, 2, 29, "2024-02-29"},
    {2932896, 9999, 12, 31, "9999-12-31"},
    {2932897, 10000, 1, 1, "+010000-01-01"},
    {2145042905, 5874897, 12, 31, "+5874897-12-31"},  // PostgreSQL's last date
    {std::numeric_limits<std::int32_t>::max(), 5881580, 7, 11, "+5881580-07-11"},
    {std::numeric_limits<std::int32_t>::min(), -5877641, 6, 23, "-5877641-06-23"},
};

TEST(CivilDate, KnownDays) {
  for (const KnownDay& known : kKnownDays) {
    const CivilDate date = CivilFromDays(known.days);
    EXPECT_EQ(date.year, known.year) << known.days;
    EXPECT_EQ(date.month, known.month) << known.days;
    EXPECT_EQ(date.day, known.day) << known.days;
    EXPECT_EQ(DaysFromCivil(known.year, known.month, known.day), known.days) << known.text;
    EXPECT_EQ(FormatDate(known.days), known.text);
  }
}

// Every day from 3 BC to 2500 AD is the day after the previous one, and round-trips.
TEST(CivilDate, ConsecutiveDaysAdvanceTheCalendar) {
  const auto is_leap = [](std::int64_t y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); };
  const auto days_in_month = [&](std::int64_t y, unsigned m) -> unsigned {
    static const unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : kDays[m - 1];
  };
  const std::int64_t first = DaysFromCivil(-2, 1, 1);
  CivilDate previous = CivilFromDays(first);
  ASSERT_EQ(previous.year, -2);
  for (std::int64_t days = first + 1; days <= DaysFromCivil(2500, 12, 31); ++days) {
    const CivilDate date = CivilFromDays(days);
    CivilDate expected = previous;
    if (++expected.day > days_in_month(expected.year, expected.month)) {
      expected.day = 1;
      if (++expected.month > 12) {
        expected.month = 1;
        ++expected.year;
      }
    }
    ASSERT_EQ(date.year, expected.year) << days;
    ASSERT_EQ(date.month, expected.month) << days;
    ASSERT_EQ(date.day, expected.day) << days;
    ASSERT_EQ(DaysFromCivil(date.year, date.month, date.day), days);
    previous = date;
  }
}

TEST(Timestamp, KnownValues) {
  EXPECT_EQ(FormatTimestamp(0), "1970-01-01T00:00:00.000000");
  EXPECT_EQ(FormatTimestampTz(1796013963044138), "2026-11-30T04:46:03.044138Z");
  EXPECT_EQ(FormatTimestamp(1), "1970-01-01T00:00:00.000001");
  // Before 1970 the time of day still counts forward from midnight.
  EXPECT_EQ(FormatTimestamp(-1), "1969-12-31T23:59:59.999999");
  EXPECT_EQ(FormatTimestampTz(-86400000000), "1969-12-31T00:00:00.000000Z");
  EXPECT_EQ(FormatTimestamp(-62135596800000000), "0001-01-01T00:00:00.000000");
  EXPECT_EQ(FormatTimestamp(253402300799999999), "9999-12-31T23:59:59.999999");
  EXPECT_EQ(FormatTimestamp(946684800000000 + 45296789012), "2000-01-01T12:34:56.789012");
}

TEST(Timestamp, Int64Limits) {
  EXPECT_EQ(FormatTimestamp(std::numeric_limits<std::int64_t>::max()),
            "+294247-01-10T04:00:54.775807");
  EXPECT_EQ(FormatTimestampTz(std::numeric_limits<std::int64_t>::min()),
            "-290308-12-21T19:59:05.224192Z");
}

}  // namespace
}  // namespace dblog::client
