// sidecar/log/log.cc: logfmt lines on stderr and the ring of recent problems (see log.h).
#include "log/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <stdexcept>

#include "common/logfmt.h"

namespace dblog::log {
namespace {

// logfmt values: the escaping the clients' lines use too.
using common::AppendLogfmtValue;

std::atomic<Level> min_level{Level::kInfo};
std::mutex write_mutex;
std::deque<Problem> recent_problems;  // under write_mutex; at most kRecentProblems

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
  const std::size_t fields_at = line.size();
  std::string consumer;
  for (const Field& f : fields) {
    line.push_back(' ');
    line.append(f.key);
    line.push_back('=');
    AppendLogfmtValue(line, f.value);
    if (f.key == "consumer") consumer = f.value;
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
  if (level >= Level::kWarn) {
    Problem p{micros, level, std::string(event), std::move(consumer), {}};
    std::size_t end = line.size() - 1;  // without the newline
    const std::size_t start = fields_at < end ? fields_at + 1 : end;
    if (end - start > kMaxProblemText) {
      end = start + kMaxProblemText;
      // not inside a UTF-8 sequence: back to the start of the character cut
      while (end > start && (static_cast<unsigned char>(line[end]) & 0xC0) == 0x80) --end;
      p.text = line.substr(start, end - start) + "...";
    } else {
      p.text = line.substr(start, end - start);
    }
    if (p.consumer.size() > kMaxProblemText) p.consumer.resize(kMaxProblemText);
    if (recent_problems.size() == kRecentProblems) recent_problems.pop_front();
    recent_problems.push_back(std::move(p));
  }
}

}  // namespace

std::vector<Problem> RecentProblems() {
  std::lock_guard<std::mutex> lock(write_mutex);
  return {recent_problems.begin(), recent_problems.end()};
}

void Write(Level level, std::string_view event, std::initializer_list<Field> fields) {
  WriteLine(level, event, fields, nullptr);
}

void Write(Level level, std::string_view event, std::initializer_list<Field> fields,
           const Field& extra) {
  WriteLine(level, event, fields, &extra);
}

}  // namespace dblog::log
