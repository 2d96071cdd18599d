// tests/cpp/consumer/bootstrap_run_test.cc: consumer::BootstrapRun on its own, against the
// test cluster: a slot created with an exported snapshot, the run driven by hand with a real
// emitter and a host that records what the pipeline would do. What goes out (BootstrapBegin,
// every row once, BootstrapEnd), that rows wait while the session is full, that the bootstrap
// counts as done only once BootstrapEnd is acknowledged, and that a plan refused leaves no
// slot behind. The bootstrap end to end runs through dblogd in tests/cpp/sidecar/.
#include "consumer/bootstrap_run.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "bootstrap/scope.h"
#include "emit/ack_tracker.h"
#include "pg/slot.h"
#include "pg_test_util.h"

namespace dblog::consumer {
namespace {

class FakeHost : public BootstrapRun::Host {
 public:
  void CloseIdleReplication() override {
    ++replication_closed;
    repl.reset();
  }
  emit::Emitter& emitter() override { return emitter_; }
  void Flush() override { out += emitter_.TakeOutput(); }
  void Send(const dblog::v1::ServerMessage& message) override { sent.push_back(message); }
  std::size_t queued_bytes() const override { return queued; }
  void Fail(dblog::v1::Error::Code code, const std::string& message) override {
    failed = dblog::v1::Error::Code_Name(code) + ": " + message;
  }
  void Copied() override { ++copied; }

  // What was flushed, as one EventBatch (the emitter's outputs concatenate into one).
  dblog::v1::EventBatch Events() const {
    dblog::v1::EventBatch batch;
    EXPECT_TRUE(batch.ParseFromString(out));
    return batch;
  }
  int Changes() const {
    const dblog::v1::EventBatch batch = Events();
    int n = 0;
    for (const auto& e : batch.events()) n += e.has_change() ? 1 : 0;
    return n;
  }

  std::optional<pg::Connection> repl;  // the idle connection that created the slot
  std::size_t queued = 0;
  int replication_closed = 0;
  int copied = 0;
  std::string failed;
  std::string out;
  std::vector<dblog::v1::ServerMessage> sent;

 private:
  emit::AckTracker acks_{0};
  emit::Emitter emitter_{emit::Position{}, &acks_};
};

class BootstrapRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    conninfo_ = test::test_conninfo();
    if (!conninfo_) GTEST_SKIP() << "DBLOG_TEST_CONNINFO is not set";
    {
      test::PgConn admin(*conninfo_);
      admin.exec("SELECT pg_drop_replication_slot('dblog_boot') FROM pg_replication_slots"
                 " WHERE slot_name = 'dblog_boot'");
      admin.exec("DROP DATABASE IF EXISTS bootstrap_run WITH (FORCE)");
      admin.exec("CREATE DATABASE bootstrap_run");
    }
    config_.source = *conninfo_ + " dbname=bootstrap_run";
    config_.copy_workers = 2;
    db_.emplace(config_.source);
    db_->exec("CREATE EXTENSION dblog;"
              "CREATE TABLE public.a (id int PRIMARY KEY, v text);"
              "INSERT INTO public.a SELECT g, 'v' || g FROM generate_series(1, 300) g;"
              "CREATE TABLE public.b (id bigint PRIMARY KEY);"
              "INSERT INTO public.b SELECT generate_series(1, 200)");
  }
  void TearDown() override {
    if (!conninfo_) return;
    run_.reset();
    host_.repl.reset();
    bookkeeping_.Reset();
    db_.reset();
    test::PgConn admin(*conninfo_);
    admin.exec("SELECT pg_drop_replication_slot('dblog_boot') FROM pg_replication_slots"
               " WHERE slot_name = 'dblog_boot'");
    admin.exec("DROP DATABASE bootstrap_run WITH (FORCE)");
  }

  // The slot, with its snapshot exported by a replication connection left idle in the host.
  pg::CreatedSlot CreateSlot() {
    host_.repl = pg::Connection::Open(config_.source, true, {});
    return pg::CreateSlot(*host_.repl, "dblog_boot", "dblog", true);
  }

  // Start, Begin, Drain as the pipeline calls them.
  void Run(const pg::CreatedSlot& created) {
    run_.emplace(io_, config_, consumer_, "dblog_boot", stats_, bookkeeping_, host_);
    run_->Start(created, false);
    run_->Begin();
    run_->Drain();
  }

  // Runs the io loop until the copy is out (or 20 s passed).
  void RunUntilCopied() {
    for (int i = 0; i < 200 && host_.copied == 0 && host_.failed.empty(); ++i) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(100));
    }
  }

  std::string BootstrapState() {
    return db_->scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = 'boot'");
  }

  std::optional<std::string> conninfo_;
  std::optional<test::PgConn> db_;
  config::Config config_;
  const config::ConsumerConfig consumer_{"boot", config::ParseScope("public.*"), ""};
  metrics::ConsumerStats stats_;
  boost::asio::io_context io_;
  FakeHost host_;
  Bookkeeping bookkeeping_{config_, consumer_};
  std::optional<BootstrapRun> run_;
};

TEST_F(BootstrapRunTest, EveryRowGoesOutOnceBetweenBeginAndEnd) {
  const pg::CreatedSlot created = CreateSlot();
  // after the snapshot: not copied (the log carries it)
  db_->exec("INSERT INTO public.a VALUES (1000, 'later')");
  Run(created);
  RunUntilCopied();
  ASSERT_EQ(host_.failed, "");
  ASSERT_EQ(host_.copied, 1);
  EXPECT_EQ(host_.replication_closed, 0);

  const dblog::v1::EventBatch batch = host_.Events();
  ASSERT_GE(batch.events_size(), 2);
  ASSERT_TRUE(batch.events(0).has_bootstrap_begin());
  EXPECT_EQ(batch.events(0).bootstrap_begin().tables_size(), 2);
  ASSERT_TRUE(batch.events(batch.events_size() - 1).has_bootstrap_end());
  std::set<std::pair<std::uint32_t, std::string>> rows;
  int changes = 0;
  for (const auto& e : batch.events()) {
    if (!e.has_change()) continue;
    ++changes;
    EXPECT_EQ(e.change().kind(), dblog::v1::Change::READ);
    EXPECT_EQ(e.change().commit_lsn(), created.consistent_point - 1);
    rows.emplace(e.change().relation_oid(), e.change().new_row().SerializeAsString());
  }
  EXPECT_EQ(changes, 500);
  EXPECT_EQ(rows.size(), 500u);
  EXPECT_EQ(stats_.bootstrap_rows.load(), 500u);
  EXPECT_EQ(stats_.bootstrap_running.load(), 0);
  ASSERT_FALSE(host_.sent.empty());
  EXPECT_EQ(host_.sent.front().progress().phase(), "bootstrap");
}

TEST_F(BootstrapRunTest, DoneOnlyOnceTheConsumerAcknowledgesBootstrapEnd) {
  Run(CreateSlot());
  RunUntilCopied();
  ASSERT_EQ(host_.copied, 1) << host_.failed;
  const dblog::v1::EventBatch batch = host_.Events();
  const dblog::v1::BootstrapEnd& last = batch.events(batch.events_size() - 1).bootstrap_end();
  const emit::Position end{last.commit_lsn(), last.seq()};
  EXPECT_EQ(BootstrapState(), "copying");
  run_->OnAcknowledged(emit::Position{end.commit_lsn, end.seq - 1});
  EXPECT_EQ(BootstrapState(), "copying");
  run_->OnAcknowledged(end);
  EXPECT_EQ(BootstrapState(), "done");
  EXPECT_EQ(db_->scalar("SELECT rows_copied FROM dblog.consumers WHERE name = 'boot'"), "500");
}

TEST_F(BootstrapRunTest, RowsWaitWhileTheSessionIsFull) {
  host_.queued = config_.max_buffer_bytes;
  Run(CreateSlot());
  for (int i = 0; i < 10; ++i) {
    io_.restart();
    io_.run_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(host_.copied, 0);
  EXPECT_EQ(host_.Changes(), 0);
  EXPECT_EQ(stats_.bootstrap_rows.load(), 0u);

  host_.queued = 0;  // the session drained
  run_->Drain();
  RunUntilCopied();
  EXPECT_EQ(host_.copied, 1) << host_.failed;
  EXPECT_EQ(stats_.bootstrap_rows.load(), 500u);
}

TEST_F(BootstrapRunTest, StoppedItEmitsNothingMore) {
  host_.queued = config_.max_buffer_bytes;
  Run(CreateSlot());
  run_->Stop();
  host_.queued = 0;
  run_->Drain();
  io_.restart();
  io_.run_for(std::chrono::milliseconds(300));
  EXPECT_EQ(host_.copied, 0);
  EXPECT_EQ(host_.Changes(), 0);
}

TEST_F(BootstrapRunTest, ARefusedPlanLeavesNoSlotBehind) {
  db_->exec("CREATE TABLE public.keyless (v int)");
  const pg::CreatedSlot created = CreateSlot();
  run_.emplace(io_, config_, consumer_, "dblog_boot", stats_, bookkeeping_, host_);
  EXPECT_THROW(run_->Start(created, false), bootstrap::ScopeError);
  EXPECT_EQ(host_.replication_closed, 1);
  EXPECT_FALSE(host_.repl.has_value());
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM pg_replication_slots"
                        " WHERE slot_name = 'dblog_boot'"),
            "0");
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM dblog.consumers"), "0");
  EXPECT_EQ(stats_.bootstraps_total.load(), 0u);
}

}  // namespace
}  // namespace dblog::consumer
