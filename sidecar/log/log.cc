// sidecar/log/log.cc: logfmt lines on stderr (see log.h).
#include "log/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <stdexcept>

#include "common/logfmt.h"

namespace dblog::log {
namespace {

// logfmt values: the escaping the clients' lines use too.
using common::AppendLogfmtValue;

std::atomic<Level> min_level{Level::kInfo};
std::mutex write_mutex;

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
}

}  // namespace

void SetMinLevel(Level level) { min_level = level; }

Level ParseLevel(std::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  throw std::invalid_argument("log level must be debug, info, warn or error, not '" +
                              std::string(name) + "'");
}

namespace {

void WriteLine(Level level, std::string_view event, std::initializer_list<Field> fields,
               const Field* extra) {
  if (level < min_level.load()) return;
  const auto now = std::chrono::system_clock::now();
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(micros / 1000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[64];
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(micros % 1000000));
  std::string line = "ts=";
  line += ts;
  line += " level=";
  line += LevelName(level);
  line += " event=";
  AppendLogfmtValue(line, event);
  for (const Field& f : fields) {
    line.push_back(' ');
    line.append(f.key);
    line.push_back('=');
    AppendLogfmtValue(line, f.value);
  }
  if (extra != nullptr) {
    line.push_back(' ');
    line.append(extra->key);
    line.push_back('=');
    AppendLogfmtValue(line, extra->value);
  }
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(write_mutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

void Write(Level level, std::string_view event, std::initializer_list<Field> fields) {
  WriteLine(level, event, fields, nullptr);
}

void Write(Level level, std::string_view event, std::initializer_list<Field> fields,
           const Field& extra) {
  WriteLine(level, event, fields, &extra);
}

}  // namespace dblog::log
