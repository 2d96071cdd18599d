// sidecar/log/log.h: one structured line per notable event, in logfmt
// (`ts=... level=info event=consumer_connected consumer=search slot=dblog_search`), on stderr;
// the last warn and error lines also kept in memory (RecentProblems, for the status page).
// Owns: formatting and writing log lines, the ring of recent problems. Knows nothing about what
// is logged.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dblog::log {

enum class Level { kDebug, kInfo, kWarn, kError };

// Lines below this level are dropped (default: info).
void SetMinLevel(Level level);
Level ParseLevel(std::string_view name);  // throws std::invalid_argument

struct Field {
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  Field(std::string_view k, const char* v) : key(k), value(v) {}
  Field(std::string_view k, const std::string& v) : key(k), value(v) {}
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  Field(std::string_view k, T v) : key(k), value(std::to_string(v)) {}
  std::string_view key;
  std::string value;
};

void Write(Level level, std::string_view event, std::initializer_list<Field> fields);
// Write with one more field after `fields`.
void Write(Level level, std::string_view event, std::initializer_list<Field> fields,
           const Field& extra);

inline void Info(std::string_view event, std::initializer_list<Field> fields = {}) {
  Write(Level::kInfo, event, fields);
}
inline void Warn(std::string_view event, std::initializer_list<Field> fields = {}) {
  Write(Level::kWarn, event, fields);
}
inline void Error(std::string_view event, std::initializer_list<Field> fields = {}) {
  Write(Level::kError, event, fields);
}
inline void Debug(std::string_view event, std::initializer_list<Field> fields = {}) {
  Write(Level::kDebug, event, fields);
}

// A warn or error line as written: when, its level and event, the value of its `consumer`
// field ("" when none) and its other fields as logfmt text (at most kMaxProblemText bytes,
// cut with "...").
struct Problem {
  std::int64_t at_us = 0;
  Level level = Level::kWarn;
  std::string event, consumer, text;
};
constexpr std::size_t kRecentProblems = 20;
constexpr std::size_t kMaxProblemText = 512;
// The last kRecentProblems warn and error lines written (those below SetMinLevel are not),
// oldest first. Thread-safe.
std::vector<Problem> RecentProblems();

}  // namespace dblog::log
