// client/time_format.h: calendar arithmetic for the values change.proto carries as counts since
// the Unix epoch (date: days; timestamp, timestamptz: microseconds), in the proleptic Gregorian
// calendar PostgreSQL uses, with Howard Hinnant's civil_from_days / days_from_civil.
// Owns: date and time text only. No time zones beyond UTC, no I/O.
#pragma once

#include <cstdint>
#include <string>

namespace dblog::client {

struct CivilDate {
  std::int64_t year;  // astronomical: 0 is 1 BC, -1 is 2 BC
  unsigned month;     // 1..12
  unsigned day;       // 1..31
};

CivilDate CivilFromDays(std::int64_t days_since_epoch);
std::int64_t DaysFromCivil(std::int64_t year, unsigned month, unsigned day);

// ISO 8601 / the ECMAScript date-time format: "YYYY-MM-DD" for years 0000..9999, otherwise an
// explicit sign and at least six digits ("-000044-03-15" is 45 BC, "+010000-01-01").
// (PostgreSQL itself would print "0045-03-15 BC"; ISO's astronomical numbering is what JSON
// readers parse.)
std::string FormatDate(std::int64_t days_since_epoch);

// "YYYY-MM-DDTHH:MM:SS.ffffff" (always six fraction digits), the date part as FormatDate.
std::string FormatTimestamp(std::int64_t micros_since_epoch);

// FormatTimestamp + "Z": a timestamptz is carried in UTC.
std::string FormatTimestampTz(std::int64_t micros_since_epoch);

}  // namespace dblog::client
