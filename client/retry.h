// client/retry.h: what a sink (`dblog tail`, `dblog apply`) does when it loses dblogd or its
// target database: which failures another attempt can get past, and how long to wait before
// it. Both commands use these and nothing else, so the policy is in one place and tested as a
// table (tests/cpp/client/retry_test.cc).
//
// Retryable: the connection to dblogd failed or ended (refused, reset, closed, cut in the middle
// of a frame, timed out, a TLS handshake cut short), and dblogd's SOURCE_ERROR, SHUTTING_DOWN
// and ALREADY_CONNECTED (the old connection of this consumer not yet noticed as gone); for
// the target: lost connections and the errors a server gives while it stops or starts, runs out
// of resources, resolves a conflict or fails over (IsRetryableSqlstate).
// Not retryable: everything else, among it a refused token (AUTH_FAILED), an unknown consumer
// or bad name, SCOPE_ERROR, TOO_MANY_CONSUMERS, protocol violations either way, TLS that cannot
// be set up (TlsError), and a target that refuses the data or the schema.
//
// Owns: the classification and the backoff sequence, as pure functions (no I/O, no clock; the
// random part comes in as a number). Does not sleep, log or reconnect: the commands do.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <random>
#include <string>
#include <string_view>

#include "dblog/v1/consumer.pb.h"

namespace dblog::client {

// dblogd's Error codes that another connection can get past. Unknown codes are not.
bool IsRetryable(dblog::v1::Error::Code code);

// A SQLSTATE of the target database (dblog apply): class 08 (connection lost or refused), the
// server stopping or starting, a backend terminated or a statement canceled, disk full, out
// of memory, too many connections, serialization failure, deadlock, a lock not available (the
// consumer's advisory lock of a previous applier), a read-only standby, system and I/O
// errors. Anything else (the data or the schema refused, permissions, a database that does
// not exist) and an empty one (not from the server) is not.
bool IsRetryableSqlstate(std::string_view sqlstate);

// A failure of the client library (client.h): ServerError by its code, ConnectionClosed and
// TransportError yes (TlsError no), ProtocolError, Interrupted and anything else no.
bool IsRetryable(const std::exception& error);

// Waits between attempts: the first at most `min`, doubling to at most `max`.
struct BackoffPolicy {
  std::chrono::milliseconds min{500};
  std::chrono::milliseconds max{30000};
};

// The longest wait before retry number `attempt` (0 for the first): min * 2^attempt, capped
// at max (and never below min).
std::chrono::milliseconds BackoffCeiling(const BackoffPolicy& policy, unsigned attempt);

// The wait before retry `attempt`, with jitter: `unit` (in [0, 1], from a random source) picks
// a point in [ceiling / 2, ceiling]. Never below half the ceiling, so retries do not bunch at
// zero; spread, so sinks that lost the same dblogd do not all come back at the same moment.
std::chrono::milliseconds BackoffDelay(const BackoffPolicy& policy, unsigned attempt, double unit);

// Whether a connection that ended counts as having worked, so that the next failure waits from
// `min` again: it made progress (the sink wrote or committed something new), or it stayed up
// at least `max` (a quiet stream of heartbeats is healthy too). A connection that is accepted
// and then fails before any progress, again and again, keeps backing off.
bool ConnectionWorked(const BackoffPolicy& policy, bool progressed,
                      std::chrono::steady_clock::duration connected_for);

// One sink's sequence of waits.
class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy, std::uint64_t seed = std::random_device{}());
  // The wait before the next attempt; counts the attempt.
  std::chrono::milliseconds Next();
  // A connection worked (ConnectionWorked): the next failure waits from `min` again.
  void Reset() { attempt_ = 0; }
  // Failed attempts since the last Reset.
  unsigned attempts() const { return attempt_; }

 private:
  BackoffPolicy policy_;
  std::mt19937_64 random_;
  unsigned attempt_ = 0;
};

// "0.43 s", "12 s": a wait as the commands log it.
std::string FormatWait(std::chrono::milliseconds wait);

}  // namespace dblog::client
