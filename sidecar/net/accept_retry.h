// sidecar/net/accept_retry.h: what a listener does when accept() fails for a reason other
// than being closed (EMFILE, ENFILE, ENOBUFS, ...): log it (at most one line per 10 s, with the
// count held back), count it, and accept again after a backoff (10 ms doubling to 1 s, back to
// 10 ms after an accept succeeds). Without it a listener would stop for good at the first
// failure. Used by the consumer listener (Server) and the /metrics endpoint.
// net/ owns what both listeners share; it depends on log/ only.
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "log/rate_limit.h"

namespace dblog::net {

class AcceptRetry {
 public:
  static constexpr std::chrono::milliseconds kFirstDelay{10};
  static constexpr std::chrono::milliseconds kMaxDelay{1000};

  AcceptRetry(boost::asio::io_context& io, std::string listener,
              std::atomic<std::uint64_t>& errors)
      : timer_(io), listener_(std::move(listener)), errors_(errors),
        log_(std::chrono::seconds(10)) {}

  // An accept failed: calls `again` after the current delay, which then doubles.
  void Failed(const boost::system::error_code& ec, std::function<void()> again) {
    errors_++;
    log_.Warn("accept_failed", {{"listener", listener_},
                                {"error", ec.message()},
                                {"retry_in_ms", static_cast<long long>(delay_.count())}});
    timer_.expires_after(delay_);
    timer_.async_wait([again = std::move(again)](boost::system::error_code tec) {
      if (!tec) again();
    });
    delay_ = std::min(delay_ * 2, kMaxDelay);
  }
  void Succeeded() { delay_ = kFirstDelay; }
  void Cancel() { timer_.cancel(); }

 private:
  boost::asio::steady_timer timer_;
  std::string listener_;
  std::atomic<std::uint64_t>& errors_;
  log::RateLimited log_;
  std::chrono::milliseconds delay_ = kFirstDelay;
};

}  // namespace dblog::net
