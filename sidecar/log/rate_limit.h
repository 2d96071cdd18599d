// sidecar/log/rate_limit.h: log lines for events that can repeat without bound (a forged
// marker per message, an accept() failing in a loop): at most one line per interval, the next
// line telling how many were held back (`suppressed=N`).
// Owns: the decision whether a line is written. Thread-safe (one lock per call).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

#include "log/log.h"

namespace dblog::log {

class RateLimited {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RateLimited(Clock::duration interval) : interval_(interval) {}

  // Writes the line, with `suppressed=N` appended (the lines held back since the last one
  // written), when the last line is at least one interval old; otherwise counts it. Returns
  // whether it was written.
  bool Write(Level level, std::string_view event, std::initializer_list<Field> fields,
             Clock::time_point now = Clock::now()) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (written_ && now - last_ < interval_) {
      ++suppressed_;
      return false;
    }
    written_ = true;
    last_ = now;
    const std::uint64_t held = suppressed_;
    suppressed_ = 0;
    log::Write(level, event, fields, Field("suppressed", held));
    return true;
  }
  bool Warn(std::string_view event, std::initializer_list<Field> fields,
            Clock::time_point now = Clock::now()) {
    return Write(Level::kWarn, event, fields, now);
  }
  // Lines held back since the last one written.
  std::uint64_t suppressed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return suppressed_;
  }
  // Writes a last line when some were held back (for example when the source of the lines
  // goes away), so that no count is lost.
  void Flush(Level level, std::string_view event, std::initializer_list<Field> fields) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (suppressed_ == 0) return;
    const std::uint64_t held = suppressed_;
    suppressed_ = 0;
    last_ = Clock::now();
    log::Write(level, event, fields, Field("suppressed", held));
  }

 private:
  mutable std::mutex mutex_;
  Clock::duration interval_;
  Clock::time_point last_{};
  bool written_ = false;
  std::uint64_t suppressed_ = 0;
};

}  // namespace dblog::log
