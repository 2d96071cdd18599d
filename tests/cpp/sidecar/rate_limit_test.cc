// tests/cpp/sidecar/rate_limit_test.cc: log::RateLimited, with the time given by the test.
#include <gtest/gtest.h>

#include "log/rate_limit.h"

namespace dblog::log {
namespace {

using namespace std::chrono_literals;
using Clock = RateLimited::Clock;

TEST(RateLimited, OneLinePerIntervalAndTheCountHeldBack) {
  RateLimited limited(10s);
  const Clock::time_point t0{};
  EXPECT_TRUE(limited.Warn("test_event", {{"n", 1}}, t0));  // the first line goes out
  for (int i = 0; i < 1000; ++i) EXPECT_FALSE(limited.Warn("test_event", {}, t0 + 1ms * i));
  EXPECT_EQ(limited.suppressed(), 1000u);
  EXPECT_FALSE(limited.Warn("test_event", {}, t0 + 9999ms));
  EXPECT_TRUE(limited.Warn("test_event", {}, t0 + 10s));  // carries suppressed=1001
  EXPECT_EQ(limited.suppressed(), 0u);
  EXPECT_FALSE(limited.Warn("test_event", {}, t0 + 11s));
  limited.Flush(Level::kWarn, "test_event", {});  // writes the one held back
  EXPECT_EQ(limited.suppressed(), 0u);
}

}  // namespace
}  // namespace dblog::log
