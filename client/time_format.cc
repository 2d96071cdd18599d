// client/time_format.cc: civil calendar arithmetic (see time_format.h).
// CivilFromDays and DaysFromCivil are Howard Hinnant's algorithms,
// http://howardhinnant.github.io/date_algorithms.html, on 64-bit integers.
#include "client/time_format.h"

#include <cstdio>
#include <cstdlib>

namespace dblog::client {
namespace {

constexpr std::int64_t kMicrosPerDay = 86'400'000'000;

void AppendDate(std::string& out, std::int64_t days) {
  const CivilDate date = CivilFromDays(days);
  char buf[48];
  if (date.year >= 0 && date.year <= 9999) {
    std::snprintf(buf, sizeof buf, "%04lld-%02u-%02u", static_cast<long long>(date.year),
                  date.month, date.day);
  } else {
    const long long magnitude = std::llabs(static_cast<long long>(date.year));
    std::snprintf(buf, sizeof buf, "%c%06lld-%02u-%02u", date.year < 0 ? '-' : '+', magnitude,
                  date.month, date.day);
  }
  out.append(buf);
}

}  // namespace

CivilDate CivilFromDays(std::int64_t z) {
  z += 719468;  // shift the epoch to 0000-03-01
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<std::uint64_t>(z - era * 146097);                    // [0, 146096]
  const std::uint64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
  const std::uint64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);  // [0, 365]
  const std::uint64_t mp = (5 * doy + 2) / 153;                       // [0, 11], March = 0
  const auto d = static_cast<unsigned>(doy - (153 * mp + 2) / 5 + 1);
  const auto m = static_cast<unsigned>(mp < 10 ? mp + 3 : mp - 9);
  return CivilDate{y + (m <= 2 ? 1 : 0), m, d};
}

std::int64_t DaysFromCivil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2 ? 1 : 0;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<std::uint64_t>(y - era * 400);                 // [0, 399]
  const std::uint64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const std::uint64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

std::string FormatDate(std::int64_t days_since_epoch) {
  std::string out;
  AppendDate(out, days_since_epoch);
  return out;
}

std::string FormatTimestamp(std::int64_t micros) {
  // Floor division without overflow (INT64_MIN included): the time of day is never negative.
  std::int64_t days = micros / kMicrosPerDay;
  std::int64_t in_day = micros % kMicrosPerDay;
  if (in_day < 0) {
    in_day += kMicrosPerDay;
    --days;
  }
  std::string out;
  AppendDate(out, days);
  const std::int64_t seconds = in_day / 1'000'000;
  char buf[32];
  std::snprintf(buf, sizeof buf, "T%02lld:%02lld:%02lld.%06lld",
                static_cast<long long>(seconds / 3600), static_cast<long long>(seconds / 60 % 60),
                static_cast<long long>(seconds % 60), static_cast<long long>(in_day % 1'000'000));
  out.append(buf);
  return out;
}

std::string FormatTimestampTz(std::int64_t micros) { return FormatTimestamp(micros) + "Z"; }

}  // namespace dblog::client
