// tests/cpp/emit/ack_tracker_test.cc: acknowledgements to confirmable LSN
// (sidecar/emit/ack_tracker.h).
#include "emit/ack_tracker.h"

#include <gtest/gtest.h>

#include <random>
#include <stdexcept>
#include <vector>

namespace dblog::emit {
namespace {

TEST(AckTracker, StartsAtTheSlotsConfirmedLsn) {
  AckTracker acks(500);
  EXPECT_EQ(acks.confirmable_lsn(), 500u);
  EXPECT_EQ(acks.OnAck({0, 0}), 500u);
  EXPECT_EQ(acks.unacknowledged(), 0u);
}

TEST(AckTracker, AckConfirmsTheLastCommitAtOrBeforeIt) {
  AckTracker acks(500);
  acks.OnCommitEmitted({1000, 3}, 1040);
  acks.OnCommitEmitted({2000, 5}, 2040);
  acks.OnCommitEmitted({3000, 1}, 3040);
  EXPECT_EQ(acks.unacknowledged(), 3u);
  EXPECT_EQ(acks.OnAck({1000, 2}), 500u);   // inside the first transaction
  EXPECT_EQ(acks.OnAck({1000, 3}), 1040u);  // its commit
  EXPECT_EQ(acks.OnAck({2000, 0}), 1040u);  // the second's Begin
  EXPECT_EQ(acks.OnAck({2500, 0}), 2040u);  // past the second: both
  EXPECT_EQ(acks.unacknowledged(), 1u);
  EXPECT_EQ(acks.OnAck({9000, 0}), 3040u);
  EXPECT_EQ(acks.unacknowledged(), 0u);
  EXPECT_EQ(acks.last_ack(), (Position{9000, 0}));
}

TEST(AckTracker, AckJumpingOverSeveralCommitsConfirmsTheLast) {
  AckTracker acks(0);
  for (std::uint64_t lsn = 1; lsn <= 100; ++lsn)
    acks.OnCommitEmitted({lsn * 100, 2}, lsn * 100 + 8);
  EXPECT_EQ(acks.OnAck({5000, 2}), 5008u);
  EXPECT_EQ(acks.unacknowledged(), 50u);
}

TEST(AckTracker, AcksGoingBackwardsAreAnError) {
  AckTracker acks(0);
  acks.OnCommitEmitted({1000, 2}, 1040);
  acks.OnAck({1000, 2});
  EXPECT_NO_THROW(acks.OnAck({1000, 2}));  // repeating an ack is fine
  EXPECT_THROW(acks.OnAck({1000, 1}), AckError);
  EXPECT_THROW(acks.OnAck({999, 9}), AckError);
  EXPECT_EQ(acks.confirmable_lsn(), 1040u);  // and changes nothing
  EXPECT_EQ(acks.last_ack(), (Position{1000, 2}));
}

TEST(AckTracker, AckBeforeTheResumePositionIsAnError) {
  AckTracker acks(0, Position{2000, 3});
  EXPECT_THROW(acks.OnAck({2000, 2}), AckError);
  EXPECT_NO_THROW(acks.OnAck({2000, 3}));
}

TEST(AckTracker, CommitsMustBeRecordedInOrder) {
  AckTracker acks(0);
  acks.OnCommitEmitted({1000, 2}, 1040);
  EXPECT_THROW(acks.OnCommitEmitted({1000, 2}, 1040), std::logic_error);
  EXPECT_THROW(acks.OnCommitEmitted({900, 5}, 940), std::logic_error);
}

TEST(AckTracker, AnAckOnlyCoversWhatWasSentBeforeIt) {
  // A consumer acking ahead of the stream does not pre-acknowledge what comes later.
  AckTracker acks(0);
  acks.OnAck({5000, 0});
  acks.OnCommitEmitted({3000, 2}, 3040);
  EXPECT_EQ(acks.confirmable_lsn(), 0u);
  EXPECT_EQ(acks.OnAck({5000, 0}), 3040u);
}

TEST(AckTracker, IdleAdvancesOnlyWhenEverythingIsAcknowledged) {
  AckTracker acks(500);
  // Nothing sent, nothing open: quiet tables must not hold the WAL back.
  EXPECT_EQ(acks.OnIdle(800, false), 800u);
  // An open transaction holds it.
  EXPECT_EQ(acks.OnIdle(900, true), 800u);
  // So does an unacknowledged commit...
  acks.OnCommitEmitted({1000, 2}, 1040);
  EXPECT_EQ(acks.OnIdle(1500, false), 800u);
  // ...even when partly acknowledged.
  EXPECT_EQ(acks.OnAck({1000, 1}), 800u);
  EXPECT_EQ(acks.OnIdle(1500, false), 800u);
  EXPECT_EQ(acks.OnAck({1000, 2}), 1040u);
  EXPECT_EQ(acks.OnIdle(1500, false), 1500u);
  // A keepalive from before what is confirmed never moves it back.
  EXPECT_EQ(acks.OnIdle(1200, false), 1500u);
}

// Random but realistic sessions (commits in LSN order, keepalives never ahead of what was
// decoded, acks never backwards) against a model: the confirmable LSN never decreases and never
// reaches past the start of a commit the consumer has not acknowledged.
TEST(AckTracker, ConfirmableNeverDecreasesNorPassesAnUnacknowledgedCommit) {
  std::mt19937_64 rng(99);
  for (int iter = 0; iter < 500; ++iter) {
    const std::uint64_t start = 1000 + rng() % 1000;
    AckTracker acks(start);
    std::uint64_t decoded = start;  // how far the emitter has been fed
    std::vector<Position> sent;
    std::size_t acked = 0;  // sent[0..acked) are acknowledged
    bool open = false;
    std::uint64_t last = acks.confirmable_lsn();
    for (int step = 0; step < 200; ++step) {
      switch (rng() % 4) {
        case 0: {  // a transaction is decoded and sent
          const Position commit{decoded + 1 + rng() % 100,
                                static_cast<std::uint32_t>(1 + rng() % 5)};
          decoded = commit.commit_lsn + 8;
          acks.OnCommitEmitted(commit, decoded);
          sent.push_back(commit);
          break;
        }
        case 1:  // an ack of some sent commit, or of a position inside the next one
          if (acked < sent.size()) {
            acked += rng() % (sent.size() - acked + 1);
            const Position ack = acked > 0 ? sent[acked - 1] : Position{};
            if (ack >= acks.last_ack()) acks.OnAck(ack);
          }
          break;
        case 2:
          open = !open;
          break;
        default:  // a keepalive, at most as far as decoding got
          decoded += rng() % 50;
          acks.OnIdle(decoded - rng() % 20, open);
      }
      ASSERT_GE(acks.confirmable_lsn(), last);
      last = acks.confirmable_lsn();
      for (std::size_t i = 0; i < sent.size(); ++i) {
        if (sent[i] > acks.last_ack()) {
          ASSERT_LE(acks.confirmable_lsn(), sent[i].commit_lsn) << iter << " " << step;
          break;
        }
      }
    }
  }
}

}  // namespace
}  // namespace dblog::emit
