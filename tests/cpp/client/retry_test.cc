// tests/cpp/client/retry_test.cc: the sinks' retry policy (client/retry.h) as tables: which
// dblogd codes, client exceptions and target SQLSTATEs are retried, and the backoff sequence
// (ceiling doubling from min to max, jitter within [ceiling/2, ceiling], reset after a connection
// that worked).
// Interrupter::WaitFor, which the commands wait with, is checked here too.
#include "client/retry.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>

#include "client/client.h"

namespace dblog::client {
namespace {

using dblog::v1::Error;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

TEST(RetryPolicy, ServerCodes) {
  EXPECT_TRUE(IsRetryable(Error::SOURCE_ERROR));
  EXPECT_TRUE(IsRetryable(Error::SHUTTING_DOWN));
  EXPECT_TRUE(IsRetryable(Error::ALREADY_CONNECTED));
  for (const Error::Code code :
       {Error::CODE_UNSPECIFIED, Error::BAD_FRAME, Error::UNSUPPORTED_VERSION, Error::AUTH_FAILED,
        Error::BAD_CONSUMER_NAME, Error::UNKNOWN_CONSUMER, Error::PROTOCOL_VIOLATION,
        Error::SCOPE_ERROR, Error::TOO_MANY_CONSUMERS}) {
    EXPECT_FALSE(IsRetryable(code)) << Error::Code_Name(code);
  }
  EXPECT_FALSE(IsRetryable(static_cast<Error::Code>(99)));  // newer than this client
  // Every code proto knows is decided above: a new one must be added to the table.
  for (int code = Error::Code_MIN; code <= Error::Code_MAX; ++code) {
    if (!Error::Code_IsValid(code)) continue;
    const bool listed = code <= Error::TOO_MANY_CONSUMERS;
    EXPECT_TRUE(listed) << "decide whether " << Error::Code_Name(static_cast<Error::Code>(code))
                        << " is retryable, in retry.cc and here";
  }
}

TEST(RetryPolicy, ClientExceptions) {
  EXPECT_TRUE(IsRetryable(ServerError(Error::SHUTTING_DOWN, "dblogd is shutting down")));
  EXPECT_TRUE(IsRetryable(ServerError(Error::SOURCE_ERROR, "connection refused")));
  EXPECT_FALSE(IsRetryable(ServerError(Error::AUTH_FAILED, "bad token")));
  EXPECT_FALSE(IsRetryable(ServerError(Error::UNKNOWN_CONSUMER, "not configured")));
  EXPECT_FALSE(IsRetryable(ServerError(Error::SCOPE_ERROR, "no key")));
  EXPECT_TRUE(IsRetryable(TransportError("cannot connect to dblogd: Connection refused")));
  EXPECT_TRUE(IsRetryable(TransportError("reading from dblogd: timed out")));
  EXPECT_TRUE(IsRetryable(ConnectionClosed("closed the connection in the middle of a frame")));
  EXPECT_FALSE(IsRetryable(TlsError("the server's certificate was not accepted")));
  EXPECT_FALSE(IsRetryable(ProtocolError("sent an event at 0/1:1, not after 0/1:2")));
  EXPECT_FALSE(IsRetryable(Interrupted()));
  EXPECT_FALSE(IsRetryable(std::runtime_error("writing to stdout failed")));
  EXPECT_FALSE(IsRetryable(std::invalid_argument("ack going back")));
  // Caught as their base classes, as the commands do.
  try {
    throw ConnectionClosed("cut");
  } catch (const ClientError& e) {
    EXPECT_TRUE(IsRetryable(e));
  }
  try {
    throw TlsError("bad certificate");
  } catch (const std::exception& e) {
    EXPECT_FALSE(IsRetryable(e));
  }
}

TEST(RetryPolicy, TargetSqlstates) {
  for (const char* state :
       {"08000", "08001", "08003", "08006", "08P01", "57P01", "57P02", "57P03", "57014", "53100",
        "53200", "53300", "40001", "40P01", "55P03", "25006", "58030"}) {
    EXPECT_TRUE(IsRetryableSqlstate(state)) << state;
  }
  for (const char* state : {"", "0800", "22003", "23505", "23503", "42P01", "42501", "42703",
                            "28P01", "28000", "3D000", "XX000", "25P02", "54000", "58P01"}) {
    EXPECT_FALSE(IsRetryableSqlstate(state)) << state;
  }
}

TEST(Backoff, CeilingDoublesFromMinToMax) {
  const BackoffPolicy policy{500ms, 30000ms};
  const milliseconds expected[] = {500ms,   1000ms,  2000ms,  4000ms, 8000ms,
                                   16000ms, 30000ms, 30000ms, 30000ms};
  for (unsigned attempt = 0; attempt < std::size(expected); ++attempt) {
    EXPECT_EQ(BackoffCeiling(policy, attempt), expected[attempt]) << attempt;
  }
  EXPECT_EQ(BackoffCeiling(policy, 1000000), 30000ms);     // no overflow however long it fails
  EXPECT_EQ(BackoffCeiling({2000ms, 1000ms}, 0), 2000ms);  // max below min: min
  EXPECT_EQ(BackoffCeiling({0ms, 0ms}, 3), 1ms);           // never a busy loop
  EXPECT_EQ(BackoffCeiling({100ms, 100ms}, 5), 100ms);     // a constant wait
}

TEST(Backoff, JitterStaysBetweenHalfTheCeilingAndTheCeiling) {
  const BackoffPolicy policy{500ms, 30000ms};
  EXPECT_EQ(BackoffDelay(policy, 0, 0.0), 250ms);
  EXPECT_EQ(BackoffDelay(policy, 0, 1.0), 500ms);
  EXPECT_EQ(BackoffDelay(policy, 0, 0.5), 375ms);
  EXPECT_EQ(BackoffDelay(policy, 3, 0.0), 2000ms);
  EXPECT_EQ(BackoffDelay(policy, 20, 1.0), 30000ms);
  EXPECT_EQ(BackoffDelay(policy, 0, -3.0), 250ms);  // out of range: clamped
  EXPECT_EQ(BackoffDelay(policy, 0, 7.0), 500ms);
}

TEST(Backoff, SequenceGrowsIsCappedAndResets) {
  const BackoffPolicy policy{500ms, 4000ms};
  Backoff backoff(policy, 42);
  for (unsigned attempt = 0; attempt < 12; ++attempt) {
    const milliseconds wait = backoff.Next();
    const milliseconds ceiling = BackoffCeiling(policy, attempt);
    EXPECT_GE(wait, ceiling / 2) << attempt;
    EXPECT_LE(wait, ceiling) << attempt;
    EXPECT_LE(wait, 4000ms);
    EXPECT_EQ(backoff.attempts(), attempt + 1);
  }
  backoff.Reset();
  EXPECT_EQ(backoff.attempts(), 0u);
  EXPECT_LE(backoff.Next(), 500ms);
  // Two sinks with different seeds do not wait in lockstep.
  Backoff a(policy, 1), b(policy, 2);
  bool differ = false;
  for (int i = 0; i < 8; ++i) differ |= a.Next() != b.Next();
  EXPECT_TRUE(differ);
}

TEST(Backoff, AConnectionWorkedWhenItProgressedOrLasted) {
  const BackoffPolicy policy{500ms, 30000ms};
  EXPECT_TRUE(ConnectionWorked(policy, true, 0ms));            // something new written or committed
  EXPECT_FALSE(ConnectionWorked(policy, false, 0ms));          // accepted, then failed at once
  EXPECT_FALSE(ConnectionWorked(policy, false, 29s));          // nothing new, not long enough
  EXPECT_TRUE(ConnectionWorked(policy, false, 30s));           // a quiet, healthy stream
  EXPECT_TRUE(ConnectionWorked({2000ms, 1000ms}, false, 2s));  // max below min: min
}

TEST(Backoff, FormatWait) {
  EXPECT_EQ(FormatWait(430ms), "0.43 s");
  EXPECT_EQ(FormatWait(2000ms), "2.00 s");
  EXPECT_EQ(FormatWait(30000ms), "30 s");
}

TEST(InterrupterWait, EndsAtOnceWhenInterrupted) {
  Interrupter idle;
  EXPECT_FALSE(idle.WaitFor(1ms));  // the full wait, not interrupted
  Interrupter interrupter;
  std::thread signal([&] {
    std::this_thread::sleep_for(50ms);
    interrupter.Interrupt();
  });
  EXPECT_TRUE(interrupter.WaitFor(std::chrono::hours(1)));  // would hang the test otherwise
  signal.join();
  EXPECT_TRUE(interrupter.WaitFor(std::chrono::hours(1)));  // already interrupted: at once
}

}  // namespace
}  // namespace dblog::client
