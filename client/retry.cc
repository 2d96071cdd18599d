// client/retry.cc: which failures a sink retries, and the waits between attempts (see retry.h).
#include "client/retry.h"

#include <algorithm>
#include <cstdio>

#include "client/client.h"

namespace dblog::client {

using dblog::v1::Error;

bool IsRetryable(Error::Code code) {
  switch (code) {
    case Error::SOURCE_ERROR:       // PostgreSQL down, restarting, a slot still in use, ...
    case Error::SHUTTING_DOWN:      // dblogd stopping (a restart)
    case Error::ALREADY_CONNECTED:  // our previous connection, not yet noticed as gone
      return true;
    case Error::CODE_UNSPECIFIED:
    case Error::BAD_FRAME:
    case Error::UNSUPPORTED_VERSION:
    case Error::AUTH_FAILED:
    case Error::BAD_CONSUMER_NAME:
    case Error::UNKNOWN_CONSUMER:
    case Error::PROTOCOL_VIOLATION:
    case Error::SCOPE_ERROR:
    case Error::TOO_MANY_CONSUMERS:
      return false;
    default:  // a code newer than this client: nothing says waiting helps
      return false;
  }
}

bool IsRetryableSqlstate(std::string_view sqlstate) {
  if (sqlstate.size() != 5) return false;
  if (sqlstate.substr(0, 2) == "08") return true;  // connection exception: lost, refused, ...
  static constexpr std::string_view kRetryable[] = {
      "57P01",  // admin_shutdown: the server is stopping, or the backend was terminated
      "57P02",  // crash_shutdown
      "57P03",  // cannot_connect_now: the server is starting
      "57P05",  // idle_session_timeout
      "57014",  // query_canceled: statement_timeout, pg_cancel_backend
      "53100",  // disk_full
      "53200",  // out_of_memory
      "53300",  // too_many_connections
      "40001",  // serialization_failure
      "40P01",  // deadlock_detected
      "55P03",  // lock_not_available: the advisory lock of a previous applier, still finishing
      "25006",  // read_only_sql_transaction: a standby (during a failover)
      "58000",  // system_error
      "58030",  // io_error
  };
  return std::find(std::begin(kRetryable), std::end(kRetryable), sqlstate) != std::end(kRetryable);
}

bool IsRetryable(const std::exception& error) {
  if (const auto* server = dynamic_cast<const ServerError*>(&error)) {
    return IsRetryable(server->code());
  }
  if (dynamic_cast<const ConnectionClosed*>(&error) != nullptr) return true;
  if (dynamic_cast<const TlsError*>(&error) != nullptr) return false;
  if (dynamic_cast<const TransportError*>(&error) != nullptr) return true;
  return false;  // ProtocolError, Interrupted, anything else
}

std::chrono::milliseconds BackoffCeiling(const BackoffPolicy& policy, unsigned attempt) {
  const auto min = std::max(policy.min, std::chrono::milliseconds(1));
  const auto max = std::max(policy.max, min);
  auto ceiling = min;
  for (unsigned i = 0; i < attempt && ceiling < max; ++i) ceiling *= 2;
  return std::min(ceiling, max);
}

std::chrono::milliseconds BackoffDelay(const BackoffPolicy& policy, unsigned attempt, double unit) {
  const auto ceiling = BackoffCeiling(policy, attempt);
  unit = std::clamp(unit, 0.0, 1.0);
  const double half = static_cast<double>(ceiling.count()) / 2;
  const auto wait = static_cast<std::chrono::milliseconds::rep>(half + half * unit);
  return std::clamp(std::chrono::milliseconds(wait), ceiling / 2, ceiling);
}

bool ConnectionWorked(const BackoffPolicy& policy, bool progressed,
                      std::chrono::steady_clock::duration connected_for) {
  return progressed || connected_for >= std::max(policy.max, policy.min);
}

Backoff::Backoff(BackoffPolicy policy, std::uint64_t seed) : policy_(policy), random_(seed) {}

std::chrono::milliseconds Backoff::Next() {
  const double unit = std::uniform_real_distribution<double>(0.0, 1.0)(random_);
  const auto wait = BackoffDelay(policy_, attempt_, unit);
  ++attempt_;
  return wait;
}

std::string FormatWait(std::chrono::milliseconds wait) {
  char text[32];
  if (wait < std::chrono::seconds(10)) {
    std::snprintf(text, sizeof text, "%.2f s", static_cast<double>(wait.count()) / 1000);
  } else {
    std::snprintf(text, sizeof text, "%.0f s", static_cast<double>(wait.count()) / 1000);
  }
  return text;
}

}  // namespace dblog::client
