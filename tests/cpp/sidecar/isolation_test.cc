// tests/cpp/sidecar/isolation_test.cc: one consumer's blocking work never stalls another's
// stream (issue 13, item 1). Each test makes one consumer wait on the source (a slot creation
// waiting for an open transaction, a bootstrap copy or a repair chunk query waiting for a table
// lock) and asserts, by order of events and not by timing, that another consumer receives
// commits made meanwhile.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "dblogd_fixture.h"
#include "wire/frame.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class IsolationTest : public DblogdTest {
 protected:
  void SetUp() override {
    DblogdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    db().exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
              " WHERE slot_name = 'dblog_" + Other() + "'");
    db().exec("DELETE FROM dblog.consumers WHERE name = '" + Other() + "'");
  }

  // Both consumers on this test's schema; the second one is consumer() + "_b".
  std::string Other() const { return consumer() + "_b"; }
  void StartTwo(std::vector<std::string> extra = {}) {
    extra.push_back("--consumer=" + consumer() + "=" + schema() + ".*");
    extra.push_back("--consumer=" + Other() + "=" + schema() + ".*");
    StartDblogd(extra);
  }

  // Waits until `sql` (on a fresh connection) returns "t"; false after `timeout`.
  bool WaitFor(const std::string& sql, std::chrono::seconds timeout = 30s) {
    PgConn probe(conninfo());
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (probe.scalar(sql) == "t") return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  // Commits `n` rows into `table` one transaction each, and reads `c` until the last one.
  void CommitsReachConsumer(client::Client& c, Replay& replay, const std::string& table, int from,
                            int n) {
    for (int i = from; i < from + n; ++i)
      db().exec("INSERT INTO " + schema() + "." + table + " VALUES (" + std::to_string(i) + ")");
    ReadUntil(c, replay, Sentinel(), 20s);
  }
};

// A new consumer's CREATE_REPLICATION_SLOT waits for a transaction open in the source. Another
// consumer goes on receiving commits meanwhile; the waiting one hears Progress{creating_slot}
// (not a timeout) and dblogd names the transaction it waits for in its log and metrics.
TEST_F(IsolationTest, ASlotCreationWaitingForATransactionDoesNotStallAnotherConsumer) {
  db().exec("CREATE TABLE " + schema() + ".items (id int PRIMARY KEY)");
  StartTwo();
  client::Client a = Connect();
  Replay replay;
  ReadUntil(a, replay, 0);  // a's bootstrap (empty tables)

  PgConn holder(conninfo());  // a transaction with an xid, left open
  holder.exec("BEGIN");
  const std::string holder_pid = holder.scalar("SELECT pg_backend_pid()");
  holder.scalar("SELECT txid_current()");

  std::atomic<bool> welcomed{false};
  std::atomic<int> waits{0};
  std::string waiting_for;
  std::string b_error;
  std::optional<client::Client> b;
  std::thread connect_b([&] {
    client::ConnectOptions o;
    o.port = dblogd_->port();
    o.consumer = Other();
    o.connect_timeout = 5s;  // shorter than the wait: only the reports keep it going
    o.io_timeout = 30s;
    o.on_slot_wait = [&](const dblog::v1::Progress& p) {
      if (waits++ == 0) waiting_for = p.waiting_for();
    };
    try {
      b.emplace(client::Client::Connect(o));
      welcomed = true;
    } catch (const std::exception& e) {
      b_error = e.what();
    }
  });
  // also when an assertion returns early: end the blocking transaction, join the thread
  OnScopeExit join([&] {
    try {
      holder.exec("ROLLBACK");
    } catch (...) {
    }
    if (connect_b.joinable()) connect_b.join();
  });

  ASSERT_TRUE(WaitFor("SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                      " AND query LIKE 'CREATE_REPLICATION_SLOT%dblog_" +
                      Other() + "%'"))
      << "the second consumer's slot creation never waited";
  // a goes on: commits made while b's slot creation waits reach it.
  CommitsReachConsumer(a, replay, "items", 1, 5);
  // Reports every second, longer than b's connect_timeout in all.
  const auto deadline = Clock::now() + 30s;
  while (waits < 7 && Clock::now() < deadline) std::this_thread::sleep_for(50ms);
  CommitsReachConsumer(a, replay, "items", 6, 5);
  EXPECT_FALSE(welcomed) << "b was welcomed while its slot could not exist yet";
  EXPECT_GE(waits.load(), 7);
  EXPECT_NE(waiting_for.find("pid " + holder_pid), std::string::npos) << waiting_for;
  EXPECT_GT(MetricValue(dblogd_->Metrics(),
                        "dblog_slot_creation_wait_seconds{consumer=\"" + Other() + "\"}"),
            0);
  EXPECT_GE(CountLogEvents(dblogd_->log(), "slot_creation_waiting"), 1);
  EXPECT_NE(dblogd_->log().find("pid " + holder_pid), std::string::npos);

  holder.exec("COMMIT");
  connect_b.join();
  ASSERT_TRUE(welcomed) << b_error;
  Replay replay_b;
  ReadUntil(*b, replay_b, 0);  // b's bootstrap
  ReadUntil(*b, replay_b, Sentinel());
  ReadUntil(a, replay, Sentinel());
  ExpectConverged(replay, {"items"});
  ExpectConverged(replay_b, {"items"});
  EXPECT_EQ(MetricValue(dblogd_->Metrics(),
                        "dblog_slot_creation_wait_seconds{consumer=\"" + Other() + "\"}"),
            0);
}

// A client that gives up while its slot creation waits: the creation is cancelled (no slot is
// left behind), and the consumer connects normally later.
TEST_F(IsolationTest, AClientGivingUpDuringSlotCreationLeavesNoSlot) {
  db().exec("CREATE TABLE " + schema() + ".items (id int PRIMARY KEY)");
  StartTwo();
  PgConn holder(conninfo());
  holder.exec("BEGIN");
  holder.scalar("SELECT txid_current()");
  {
    const int fd = RawConnect(dblogd_->port());
    ASSERT_GE(fd, 0);
    dblog::v1::ClientMessage hello;
    hello.mutable_hello()->set_protocol_version(dblog::v1::PROTOCOL_VERSION_1);
    hello.mutable_hello()->set_consumer(Other());
    std::string frame;
    wire::AppendFrame(frame, hello);
    ASSERT_EQ(write(fd, frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
    ASSERT_TRUE(WaitFor("SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = "
                        "'Lock' AND query LIKE 'CREATE_REPLICATION_SLOT%dblog_" +
                        Other() + "%'"));
    close(fd);
  }
  EXPECT_TRUE(WaitFor("SELECT count(*) = 0 FROM pg_stat_activity WHERE query LIKE "
                      "'CREATE_REPLICATION_SLOT%dblog_" +
                      Other() + "%' AND state = 'active'"))
      << "the slot creation went on after its client left";
  EXPECT_EQ(db().scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'dblog_" +
                        Other() + "'"),
            "0");
  holder.exec("COMMIT");
  client::Client b = Connect(std::nullopt, Other());
  Replay replay;
  ReadUntil(b, replay, 0);
  ReadUntil(b, replay, Sentinel());
}

// One consumer's bootstrap is held back by its consumer, which does not read (its copy queue
// and outgoing buffer are full); another consumer's stream goes on, and the bootstrap ends
// once its consumer reads.
TEST_F(IsolationTest, ABootstrapHeldBackByItsConsumerDoesNotStallAnotherConsumer) {
  db().exec("CREATE TABLE " + schema() + ".items (id int PRIMARY KEY)");
  db().exec("CREATE TABLE " + schema() + ".big (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + schema() + ".big SELECT g, repeat('x', 200) FROM "
            "generate_series(1, 200000) g");
  StartTwo();
  client::Client a = Connect();
  Replay replay;
  ReadUntil(a, replay, 0);

  client::Client b = Connect(std::nullopt, Other());  // not read for now
  const std::string running =
      "dblog_bootstrap_running{consumer=\"" + Other() + "\"}";
  CommitsReachConsumer(a, replay, "items", 1, 5);
  std::this_thread::sleep_for(500ms);
  CommitsReachConsumer(a, replay, "items", 6, 5);
  EXPECT_EQ(MetricValue(dblogd_->Metrics(), running), 1)
      << "b's bootstrap ended without b reading it: the test proves nothing";
  Replay replay_b;
  ReadUntil(b, replay_b, 0);
  ReadUntil(b, replay_b, Sentinel());
  ExpectConverged(replay_b, {"items", "big"});
  ReadUntil(a, replay, Sentinel());
  ExpectConverged(replay, {"items", "big"});
}

// One consumer's repair chunk query waits for a table lock (it runs on that consumer's thread);
// another consumer's stream goes on, and the repair completes once the lock is gone.
TEST_F(IsolationTest, ARepairChunkWaitingForALockDoesNotStallAnotherConsumer) {
  db().exec("CREATE TABLE " + schema() + ".items (id int PRIMARY KEY)");
  db().exec("CREATE TABLE " + schema() + ".locked (id int PRIMARY KEY)");
  db().exec("INSERT INTO " + schema() + ".locked SELECT generate_series(1, 1000)");
  StartTwo();
  client::Client a = Connect();
  Replay replay;
  ReadUntil(a, replay, 0);
  client::Client b = Connect(std::nullopt, Other());
  Replay replay_b;
  ReadUntil(b, replay_b, 0);

  PgConn holder(conninfo());
  holder.exec("BEGIN");
  holder.exec("LOCK TABLE " + schema() + ".locked IN ACCESS EXCLUSIVE MODE");
  db().exec("SELECT dblog.repair('" + schema() + ".locked', '" + Other() + "')");
  // b reads on (in a thread) so that its pipeline takes the request and opens a window.
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> b_chunks{0};
  std::string b_error;
  std::thread read_b([&] {
    try {
      client::Item item;
      while (!stop) {
        if (!b.Next(item)) return;
        if (auto* ev = std::get_if<dblog::v1::StreamEvent>(&item)) {
          replay_b.Apply(*ev);
          if (ev->has_chunk_end()) b_chunks++;
          if (ev->has_commit()) b.Ack(*client::Client::PositionOf(*ev));
        }
      }
    } catch (const std::exception& e) {
      b_error = e.what();
    }
  });
  OnScopeExit join([&] {
    stop = true;
    if (read_b.joinable()) read_b.join();
  });
  ASSERT_TRUE(WaitFor("SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                      " AND application_name = 'dblogd " +
                      Other() + " repairs'"))
      << "the repair chunk query never waited for the lock";
  CommitsReachConsumer(a, replay, "items", 1, 5);
  EXPECT_EQ(b_chunks.load(), 0u) << "b's chunk was read while the table was locked";
  holder.exec("COMMIT");
  const auto deadline = Clock::now() + 60s;
  while (b_chunks == 0 && b_error.empty() && Clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_GT(b_chunks.load(), 0u) << b_error;
  stop = true;
  db().exec("INSERT INTO " + schema() + ".items VALUES (100)");  // wakes the reader
  read_b.join();
  ReadUntil(a, replay, Sentinel());
  ExpectConverged(replay, {"items", "locked"});
}

}  // namespace
}  // namespace dblog::test
