// tests/cpp/pg/pg_replication_stream_test.cc: pg::ReplicationStream against a real walsender:
// dblog Batches arrive as XLogData, only the owner's flushed position is confirmed, keepalives
// that ask for a reply are answered at once (and the walsender really hangs up when they are
// not), Pause/Resume, Stop (also from inside a callback), start positions, server-side
// termination and the output_plugin_libraries refusal at START_REPLICATION.
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dblog/v1/change.pb.h"
#include "pg/connection.h"
#include "pg/replication_stream.h"
#include "pg/slot.h"
#include "pg_fixture.h"

namespace dblog::pg::test {
namespace {

using namespace std::chrono_literals;

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Records every Handler call; `on_data` lets a test act from inside OnData.
struct Recorder : ReplicationStream::Handler {
  struct Data {
    std::uint64_t wal_start, wal_end;
    std::string payload;
  };
  std::vector<Data> data;
  std::vector<std::uint64_t> keepalives;
  int terminal_calls = 0;
  bool ended = false;
  std::optional<std::string> error;
  std::string error_sqlstate;
  std::function<void()> on_data;

  void OnData(std::uint64_t wal_start, std::uint64_t wal_end, std::string_view payload) override {
    EXPECT_EQ(terminal_calls, 0) << "OnData after the end";
    data.push_back({wal_start, wal_end, std::string(payload)});
    if (on_data) on_data();
  }
  void OnKeepalive(std::uint64_t wal_end) override { keepalives.push_back(wal_end); }
  void OnError(const std::exception& e) override {
    ++terminal_calls;
    error = e.what();
    if (const auto* pg = dynamic_cast<const Error*>(&e)) error_sqlstate = pg->sqlstate();
  }
  void OnEnd() override {
    ++terminal_calls;
    ended = true;
  }
  bool done() const { return terminal_calls > 0; }
};

// One decoded event, with the XLogData header of the message that carried it.
struct Event {
  dblog::v1::Event event;
  std::uint64_t wal_end;
};

class StreamTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (IsSkipped()) return;
    sql().Exec("CREATE EXTENSION IF NOT EXISTS dblog");
    schema_ = Schema();
    table_ = schema_ + ".items";
    sql().Exec("CREATE TABLE " + table_ + " (id int PRIMARY KEY, name text)");
    table_oid_ = static_cast<std::uint32_t>(
        std::stoul(std::string(sql().Exec("SELECT '" + table_ + "'::regclass::oid").value(0, 0))));
    slot_ = SlotName();
  }

  // Runs the io_context until `done` or the timeout; the work guard keeps run_for waiting.
  bool RunUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      io_.run_for(20ms);
    }
    return true;
  }
  void RunFor(std::chrono::milliseconds d) {
    RunUntil([] { return false; }, d);
  }

  // A replication connection that pg_stat_replication shows under the slot's name.
  Connection OpenStreamConnection(Options overrides = {}) {
    overrides.emplace_back("application_name", slot_);
    return OpenReplication(overrides);
  }

  Options PluginOptions(Options extra = {}) {
    Options out{{"format", "binary"}, {"include_tables", schema_ + ".*"}};
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
  }

  std::vector<Event> Events(const Recorder& rec) {
    std::vector<Event> out;
    for (const auto& d : rec.data) {
      dblog::v1::Batch batch;
      EXPECT_TRUE(batch.ParseFromString(d.payload)) << "payload is not a dblog.v1.Batch";
      for (const auto& e : batch.events()) out.push_back({e, d.wal_end});
    }
    return out;
  }
  std::vector<dblog::v1::Commit> Commits(const Recorder& rec) {
    std::vector<dblog::v1::Commit> out;
    for (const auto& e : Events(rec))
      if (e.event.has_commit()) out.push_back(e.event.commit());
    return out;
  }
  std::vector<std::int64_t> InsertedIds(const Recorder& rec) {
    std::vector<std::int64_t> out;
    for (const auto& e : Events(rec)) {
      if (!e.event.has_change() || e.event.change().relation_oid() != table_oid_) continue;
      EXPECT_EQ(e.event.change().kind(), dblog::v1::Change::INSERT);
      out.push_back(e.event.change().new_row().values(0).int_value());
    }
    return out;
  }

  void Insert(const std::string& values) {
    sql().Exec("INSERT INTO " + table_ + " VALUES " + values);
  }

  SlotInfo Slot() { return GetSlot(sql(), slot_); }

  // The test's slot, made on a replication connection of its own that is closed again.
  CreatedSlot CreateTestSlot() {
    Connection repl = OpenReplication();
    return CreateSlot(repl, slot_, "dblog", false);
  }

  // write_lsn and flush_lsn of our walsender in pg_stat_replication (nullopt: NULL or no row).
  std::pair<std::optional<std::uint64_t>, std::optional<std::uint64_t>> ReportedPositions() {
    Result r = sql().ExecParams(
        "SELECT write_lsn::text, flush_lsn::text FROM pg_stat_replication"
        " WHERE application_name = $1",
        {slot_});
    if (r.ntuples() != 1) return {};
    auto lsn = [&](int col) -> std::optional<std::uint64_t> {
      auto v = r.optional_value(0, col);
      if (!v) return std::nullopt;
      return common::ParseLsn(*v);
    };
    return {lsn(0), lsn(1)};
  }

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  std::string schema_, table_, slot_;
  std::uint32_t table_oid_ = 0;
};

TEST_F(StreamTest, DeliversBatchesAndConfirmsOnlyTheFlushedPosition) {
  Connection repl = OpenStreamConnection();
  const CreatedSlot created = CreateSlot(repl, slot_, "dblog", false);
  sql().Exec("BEGIN; INSERT INTO " + table_ + " VALUES (1, 'a'), (2, 'b'), (3, 'c'); COMMIT");
  Insert("(4, 'd')");

  Recorder rec;
  ReplicationStream stream(io_, std::move(repl), rec);  // the connection that made the slot
  stream.Start(slot_, 0, PluginOptions());
  EXPECT_THROW(stream.Start(slot_, 0, PluginOptions()), std::logic_error);
  ASSERT_TRUE(RunUntil([&] { return Commits(rec).size() >= 2; })) << "no data within 10 s";
  EXPECT_FALSE(rec.done()) << rec.error.value_or("");

  EXPECT_EQ(InsertedIds(rec), (std::vector<std::int64_t>{1, 2, 3, 4}));
  // The message that carries a Commit is the plugin's last write of the transaction: the
  // walsender stamps it with the transaction's end LSN (the others with 0).
  for (const auto& e : Events(rec)) {
    if (e.event.has_commit()) {
      EXPECT_EQ(e.wal_end, e.event.commit().end_lsn());
    }
  }
  const std::uint64_t end_lsn = Commits(rec).back().end_lsn();
  EXPECT_GT(end_lsn, created.consistent_point);
  EXPECT_GE(stream.received_lsn(), end_lsn);
  EXPECT_EQ(stream.data_messages_received(), rec.data.size());
  EXPECT_GE(stream.messages_received(), stream.data_messages_received());
  EXPECT_GT(stream.bytes_received(), 0u);

  // Received is not flushed: once the server has processed a status update (it shows our
  // write position), the flush position is still unset and the slot has not moved.
  stream.SendStatusNow();
  ASSERT_TRUE(RunUntil([&] {
    auto [write, flush] = ReportedPositions();
    return write && *write >= end_lsn;
  })) << "the server never showed our write position";
  EXPECT_FALSE(ReportedPositions().second.has_value()) << "flush must be the owner's, not ours";
  EXPECT_EQ(Slot().confirmed_flush_lsn, created.consistent_point);

  // What the owner flushed is what the slot confirms.
  stream.SetFlushedLsn(end_lsn);
  stream.SetFlushedLsn(end_lsn - 1);  // never backwards
  EXPECT_EQ(stream.flushed_lsn(), end_lsn);
  stream.SendStatusNow();
  ASSERT_TRUE(RunUntil([&] { return Slot().confirmed_flush_lsn == end_lsn; }))
      << "confirmed_flush_lsn stayed at " << common::FormatLsn(Slot().confirmed_flush_lsn) << ", wanted "
      << common::FormatLsn(end_lsn);
  EXPECT_EQ(ReportedPositions().second, end_lsn);
  EXPECT_FALSE(rec.done()) << rec.error.value_or("");
}

TEST_F(StreamTest, TimedStatusUpdatesCarryTheFlushedPosition) {
  CreateTestSlot();
  Insert("(1, 'a')");
  ReplicationStream::Options options;
  options.status_interval = 200ms;
  Recorder rec;
  ReplicationStream stream(io_, OpenStreamConnection(), rec, options);
  stream.Start(slot_, 0, PluginOptions());
  ASSERT_TRUE(RunUntil([&] { return !Commits(rec).empty(); }));
  const std::uint64_t end_lsn = Commits(rec).back().end_lsn();
  const std::uint64_t sent_before = stream.status_updates_sent();
  stream.SetFlushedLsn(end_lsn);  // no SendStatusNow: the timer must carry it
  ASSERT_TRUE(RunUntil([&] { return Slot().confirmed_flush_lsn == end_lsn; }, 5s));
  EXPECT_GT(stream.status_updates_sent(), sent_before);
  RunFor(700ms);
  EXPECT_GE(stream.status_updates_sent(), sent_before + 3) << "about one every 200 ms";
  EXPECT_FALSE(rec.done()) << rec.error.value_or("");
}

TEST_F(StreamTest, KeepalivesAskingForAReplyAreAnsweredAtOnce) {
  // With wal_sender_timeout 1 s the walsender asks for a reply every 0.5 s of silence and
  // hangs up after 1 s without one. Timed updates are off: only the replies keep us alive.
  CreateTestSlot();
  ReplicationStream::Options options;
  options.status_interval = 0ms;
  Recorder rec;
  ReplicationStream stream(io_, OpenStreamConnection({{"options", "-c wal_sender_timeout=1s"}}),
                           rec, options);
  stream.Start(slot_, 0, PluginOptions());
  ASSERT_TRUE(RunUntil([&] { return stream.reply_requests_received() >= 4 || rec.done(); }));
  EXPECT_FALSE(rec.done()) << rec.error.value_or("");
  EXPECT_TRUE(stream.streaming());
  EXPECT_GE(stream.status_updates_sent(), stream.reply_requests_received());
  EXPECT_EQ(rec.keepalives.size(), stream.keepalives_received());
  EXPECT_GT(stream.last_keepalive_wal_end(), 0u);
  EXPECT_EQ(rec.keepalives.back(), stream.last_keepalive_wal_end());
}

TEST_F(StreamTest, UnansweredKeepalivesEndTheStream) {
  // The control for the test above: paused, the stream reads nothing and answers nothing, and
  // the walsender gives up after wal_sender_timeout. Resuming then reports the lost connection.
  CreateTestSlot();
  ReplicationStream::Options options;
  options.status_interval = 0ms;
  Recorder rec;
  ReplicationStream stream(io_, OpenStreamConnection({{"options", "-c wal_sender_timeout=1s"}}),
                           rec, options);
  stream.Start(slot_, 0, PluginOptions());
  ASSERT_TRUE(RunUntil([&] { return stream.keepalives_received() >= 1; }));
  stream.Pause();
  EXPECT_TRUE(stream.paused());
  ASSERT_TRUE(WaitFor([&] { return !Slot().active; })) << "the walsender did not time out";
  RunFor(200ms);
  EXPECT_FALSE(rec.done()) << "paused: nothing is read, so nothing is noticed";
  stream.Resume();
  ASSERT_TRUE(RunUntil([&] { return rec.done(); }));
  ASSERT_TRUE(rec.error.has_value());
  EXPECT_EQ(rec.error_sqlstate, "08006") << *rec.error;
  EXPECT_TRUE(stream.closed());
}

TEST_F(StreamTest, StopSendsTheFlushedPositionEndsCleanlyAndReleasesTheSlot) {
  CreateTestSlot();
  Insert("(1, 'a')");
  Recorder rec;
  ReplicationStream stream(io_, OpenStreamConnection(), rec);
  stream.Start(slot_, 0, PluginOptions());
  ASSERT_TRUE(RunUntil([&] { return !Commits(rec).empty(); }));
  const std::uint64_t end_lsn = Commits(rec).back().end_lsn();
  ASSERT_TRUE(Slot().active);

  stream.SetFlushedLsn(end_lsn);  // no SendStatusNow: Stop's final update must carry it
  stream.Stop();
  stream.Stop();
  ASSERT_TRUE(RunUntil([&] { return rec.done(); }));
  EXPECT_TRUE(rec.ended) << rec.error.value_or("");
  EXPECT_EQ(rec.terminal_calls, 1);
  EXPECT_TRUE(stream.closed());
  // The server ends the copy only after it processed everything we sent before CopyDone.
  EXPECT_EQ(Slot().confirmed_flush_lsn, end_lsn);
  EXPECT_TRUE(WaitFor([&] { return !Slot().active; })) << "the slot stayed active";

  stream.Stop();
  RunFor(100ms);
  EXPECT_EQ(rec.terminal_calls, 1);
}

TEST_F(StreamTest, StopFromInsideOnDataDeliversNothingMore) {
  const CreatedSlot created = CreateTestSlot();
  Insert("(1, 'a')");
  Insert("(2, 'b')");
  Insert("(3, 'c')");
  Recorder rec;
  ReplicationStream stream(io_, OpenStreamConnection(), rec);
  rec.on_data = [&] { stream.Stop(); };
  stream.Start(slot_, 0, PluginOptions({{"batch_bytes", "0"}}));  // one event per message
  ASSERT_TRUE(RunUntil([&] { return rec.done(); }));
  EXPECT_TRUE(rec.ended) << rec.error.value_or("");
  EXPECT_EQ(rec.data.size(), 1u);
  EXPECT_EQ(Slot().confirmed_flush_lsn, created.consistent_point) << "nothing was flushed";
}

TEST_F(StreamTest, PauseHoldsDeliveryUntilResume) {
  CreateTestSlot();
  sql().Exec("BEGIN; INSERT INTO " + table_ + " VALUES (1, 'a'), (2, 'b'), (3, 'c'); COMMIT");
  Recorder rec;
  ReplicationStream stream(io_, OpenStreamConnection(), rec);
  rec.on_data = [&] {
    if (rec.data.size() == 1) stream.Pause();
  };
  // One event per message: the whole transaction arrives in one read, so what Pause holds
  // back sits in libpq's buffer, where no socket readiness will announce it again.
  stream.Start(slot_, 0, PluginOptions({{"batch_bytes", "0"}}));
  ASSERT_TRUE(RunUntil([&] { return !rec.data.empty(); }));
  RunFor(300ms);
  EXPECT_EQ(rec.data.size(), 1u);
  EXPECT_TRUE(stream.paused());
  stream.Resume();
  ASSERT_TRUE(RunUntil([&] { return !Commits(rec).empty(); }));
  std::vector<int> cases;
  for (const auto& e : Events(rec)) cases.push_back(e.event.event_case());
  EXPECT_EQ(cases, (std::vector<int>{dblog::v1::Event::kBegin, dblog::v1::Event::kRelation,
                                     dblog::v1::Event::kChange, dblog::v1::Event::kChange,
                                     dblog::v1::Event::kChange, dblog::v1::Event::kCommit}));
  EXPECT_EQ(InsertedIds(rec), (std::vector<std::int64_t>{1, 2, 3}));
  EXPECT_FALSE(rec.done()) << rec.error.value_or("");
}

TEST_F(StreamTest, StartPositionSkipsEarlierTransactions) {
  CreateTestSlot();
  Insert("(1, 'a')");
  Insert("(2, 'b')");
  std::uint64_t first_end = 0;
  {
    Recorder rec;
    ReplicationStream stream(io_, OpenStreamConnection(), rec);
    stream.Start(slot_, 0, PluginOptions());
    ASSERT_TRUE(RunUntil([&] { return Commits(rec).size() >= 2; }));
    EXPECT_EQ(InsertedIds(rec), (std::vector<std::int64_t>{1, 2}));
    first_end = Commits(rec).front().end_lsn();
    stream.Stop();  // nothing flushed: the slot keeps both transactions
    ASSERT_TRUE(RunUntil([&] { return rec.done(); }));
    EXPECT_TRUE(rec.ended) << rec.error.value_or("");
  }
  ASSERT_TRUE(WaitFor([&] { return !Slot().active; }));
  Recorder rec;
  ReplicationStream stream(io_, OpenStreamConnection(), rec);
  stream.Start(slot_, first_end, PluginOptions());
  ASSERT_TRUE(RunUntil([&] { return !Commits(rec).empty(); }));
  EXPECT_EQ(InsertedIds(rec), (std::vector<std::int64_t>{2}));
}

TEST_F(StreamTest, ServerTerminationIsAnErrorWithItsSqlstate) {
  CreateTestSlot();
  Recorder rec;
  ReplicationStream stream(io_, OpenStreamConnection(), rec);
  stream.Start(slot_, 0, PluginOptions());
  std::optional<int> pid;
  ASSERT_TRUE(RunUntil([&] { return (pid = Slot().active_pid).has_value(); }));
  sql().Exec("SELECT pg_terminate_backend(" + std::to_string(*pid) + ")");
  ASSERT_TRUE(RunUntil([&] { return rec.done(); }));
  ASSERT_TRUE(rec.error.has_value());
  EXPECT_EQ(rec.error_sqlstate, "57P01") << *rec.error;
  EXPECT_TRUE(Contains(*rec.error, "terminating connection due to administrator command"))
      << *rec.error;
}

TEST_F(StreamTest, DestroyingAStreamClosesItWithoutCallbacks) {
  CreateTestSlot();
  Recorder rec;
  auto stream = std::make_unique<ReplicationStream>(io_, OpenStreamConnection(), rec);
  stream->Start(slot_, 0, PluginOptions());
  ASSERT_TRUE(RunUntil([&] { return stream->keepalives_received() > 0; }));
  ASSERT_TRUE(Slot().active);
  stream.reset();
  RunFor(200ms);
  EXPECT_EQ(rec.terminal_calls, 0);
  EXPECT_TRUE(WaitFor([&] { return !Slot().active; }));
}

TEST_F(StreamTest, StartErrors) {
  sql().ExecParams("SELECT pg_create_logical_replication_slot($1, 'dblog')", {slot_});
  Recorder rec;
  {
    ReplicationStream stream(io_, OpenStreamConnection(), rec);
    try {
      stream.Start(slot_, 0, {{"format", "binary"}, {"no_such_option", "it's quoted"}});
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.sqlstate(), "22023") << e.what();
      EXPECT_TRUE(Contains(e.what(), "unrecognized dblog option: no_such_option")) << e.what();
      EXPECT_TRUE(Contains(e.sql(), "(\"format\" 'binary', \"no_such_option\" 'it''s quoted')"))
          << e.sql();
    }
    stream.Stop();  // never started: closes without Handler calls
    EXPECT_TRUE(stream.closed());
  }
  {
    ReplicationStream stream(io_, OpenStreamConnection(), rec);
    try {
      stream.Start("pgt_no_such_slot", 0, PluginOptions());
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.sqlstate(), "42704") << e.what();
    }
  }
  if (IsSuperuser()) {
    // An existing slot is refused too once its plugin is not listed.
    ReplicationStream stream(
        io_, OpenStreamConnection({{"options", "-c output_plugin_libraries=pgoutput"}}), rec);
    try {
      stream.Start(slot_, 0, PluginOptions());
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.sqlstate(), "42501");
      EXPECT_TRUE(Contains(e.what(),
                           "ALTER SYSTEM SET output_plugin_libraries = "
                           "'pgoutput', 'dblog'; SELECT pg_reload_conf();"))
          << e.what();
      EXPECT_TRUE(Contains(e.what(), "while running: START_REPLICATION SLOT")) << e.what();
    }
  }
  RunFor(100ms);
  EXPECT_EQ(rec.terminal_calls, 0);
  EXPECT_FALSE(Slot().active);
}

}  // namespace
}  // namespace dblog::pg::test
