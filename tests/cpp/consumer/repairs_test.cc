// tests/cpp/consumer/repairs_test.cc: consumer::Repairs on its own, fed log events by hand, with
// a real emitter, and a source that cannot be reached (every statement would fail) or, for the
// requests, the test cluster: what it takes from the log, what it lets through to the
// emitter, and which markers and requests it refuses. The windows end to end run through
// dblogd in tests/cpp/sidecar/repair_test.cc.
#include "consumer/repairs.h"

#include <gtest/gtest.h>

#include <optional>

#include "consumer/watermark.h"
#include "emit/ack_tracker.h"
#include "pg_test_util.h"

namespace dblog::consumer {
namespace {

class FakeHost : public Repairs::Host {
 public:
  bool Streaming() const override { return streaming; }
  emit::Emitter& emitter() override { return emitter_; }
  void Flush() override { ++flushes; }
  void Send(const dblog::v1::ServerMessage& message) override { sent.push_back(message); }

  bool streaming = true;
  int flushes = 0;
  std::vector<dblog::v1::ServerMessage> sent;

 private:
  emit::AckTracker acks_{0};
  emit::Emitter emitter_{emit::Position{}, &acks_};
};

class RepairsTest : public ::testing::Test {
 protected:
  static config::Config Unreachable() {
    config::Config c;
    c.source = "host=/nonexistent-dblog-test-socket-dir connect_timeout=1";
    return c;
  }

  dblog::v1::Relation QueueRelation() {
    dblog::v1::Relation r;
    r.set_oid(900);
    r.set_schema("dblog");
    r.set_name("request_queue");
    for (const char* name : {"id", "table_oid", "kind", "consumer", "cancelled"})
      r.add_columns()->set_name(name);
    return r;
  }

  // An INSERT into dblog.request_queue as the plugin decodes it.
  dblog::v1::Change Request(std::int64_t id, const std::string& for_consumer, bool cancelled) {
    dblog::v1::Change c;
    c.set_kind(dblog::v1::Change::INSERT);
    c.set_relation_oid(900);
    auto* row = c.mutable_new_row();
    row->add_values()->set_int_value(id);
    row->add_values()->set_int_value(16384);
    row->add_values()->set_text_value("table");
    if (for_consumer.empty())
      row->add_values()->set_null_value(true);
    else
      row->add_values()->set_text_value(for_consumer);
    row->add_values()->set_bool_value(cancelled);
    return c;
  }

  config::Config config_ = Unreachable();
  const config::ConsumerConfig consumer_{"search", config::ParseScope("public.*"), ""};
  metrics::ConsumerStats stats_;
  boost::asio::io_context io_;
  FakeHost host_;
  Bookkeeping bookkeeping_{config_, consumer_};
  Repairs repairs_{io_, config_, consumer_, stats_, bookkeeping_, host_};
};

TEST_F(RepairsTest, TheRequestQueueIsBookkeepingNotUserData) {
  EXPECT_FALSE(repairs_.OnRelation(QueueRelation()));
  EXPECT_FALSE(repairs_.OnChange(Request(1, "other", false)));
  dblog::v1::Relation user;
  user.set_oid(16384);
  user.set_schema("public");
  user.set_name("t");
  EXPECT_TRUE(repairs_.OnRelation(user));
  dblog::v1::Change change;
  change.set_kind(dblog::v1::Change::INSERT);
  change.set_relation_oid(16384);
  EXPECT_TRUE(repairs_.OnChange(change));
}

// A request decoded from the log is queued (and reported in Progress{phase: "repair"}) when
// it is for this consumer or for every consumer, on a table of its scope; not when it names
// another consumer, is cancelled, or its table is out of scope.
TEST_F(RepairsTest, OnlyRequestsForThisConsumerAndItsScopeAreQueued) {
  const std::optional<std::string> conninfo = test::test_conninfo();
  if (!conninfo) GTEST_SKIP() << "DBLOG_TEST_CONNINFO is not set";
  {
    test::PgConn admin(*conninfo);
    admin.exec("DROP DATABASE IF EXISTS repairs_unit WITH (FORCE)");
    admin.exec("CREATE DATABASE repairs_unit");
  }
  config_.source = *conninfo + " dbname=repairs_unit";
  test::PgConn db(config_.source);
  db.exec("CREATE EXTENSION dblog; CREATE SCHEMA other;"
          "CREATE TABLE public.t (id int PRIMARY KEY); CREATE TABLE other.u (id int PRIMARY KEY)");
  const std::int64_t t = std::stoll(db.scalar("SELECT 'public.t'::regclass::oid"));
  const std::int64_t u = std::stoll(db.scalar("SELECT 'other.u'::regclass::oid"));

  struct Case {
    std::string for_consumer;
    bool cancelled;
    std::int64_t table;
    bool queued;
  };
  for (const Case& c : {Case{"orders", false, t, false}, Case{"search", true, t, false},
                        Case{"search", false, u, false}, Case{"search", false, t, true},
                        Case{"", false, t, true}}) {
    Repairs repairs(io_, config_, consumer_, stats_, bookkeeping_, host_);
    repairs.OnRelation(QueueRelation());
    dblog::v1::Change request = Request(7, c.for_consumer, c.cancelled);
    request.mutable_new_row()->mutable_values(1)->set_int_value(c.table);
    EXPECT_FALSE(repairs.OnChange(request));
    host_.sent.clear();
    repairs.Schedule();
    io_.restart();
    io_.run_for(std::chrono::milliseconds(300));
    const bool reported = !host_.sent.empty() && host_.sent.front().has_progress() &&
                          host_.sent.front().progress().phase() == "repair" &&
                          host_.sent.front().progress().tables(0).name() == "t";
    EXPECT_EQ(reported, c.queued) << "consumer '" << c.for_consumer << "' cancelled "
                                  << c.cancelled << " table " << c.table;
    repairs.Stop();
  }
  bookkeeping_.Reset();
  test::PgConn(*conninfo).exec("DROP DATABASE repairs_unit WITH (FORCE)");
}

// A table that entered the scope by DDL (consumer/scope_changes.h) gets one whole-table request
// for this consumer; the same message read again (dblogd crashed before the DDL's transaction
// was acknowledged) queues none while that request has not started, and one more once it has
// (a copy is idempotent: twice at most, never none). Another consumer's request does not count;
// a table gone, out of the scope by now, or keyless is not queued.
TEST_F(RepairsTest, ATableEnteringTheScopeIsQueuedOnceUntilItsCopyStarts) {
  const std::optional<std::string> conninfo = test::test_conninfo();
  if (!conninfo) GTEST_SKIP() << "DBLOG_TEST_CONNINFO is not set";
  {
    test::PgConn admin(*conninfo);
    admin.exec("DROP DATABASE IF EXISTS repairs_unit_enter WITH (FORCE)");
    admin.exec("CREATE DATABASE repairs_unit_enter");
  }
  config_.source = *conninfo + " dbname=repairs_unit_enter";
  test::PgConn db(config_.source);
  db.exec("CREATE EXTENSION dblog; CREATE SCHEMA other;"
          "CREATE TABLE public.t (id int PRIMARY KEY); CREATE TABLE public.t2 (id int PRIMARY KEY);"
          "CREATE TABLE public.k (id int); CREATE TABLE other.u (id int PRIMARY KEY);"
          "INSERT INTO dblog.consumers (name, slot_name, scope)"
          " VALUES ('search', 'dblog_search', 'public.*'), ('orders', 'dblog_orders', '*.*')");
  auto oid = [&](const std::string& table) {
    return static_cast<std::uint32_t>(std::stoul(db.scalar("SELECT '" + table + "'::regclass::oid")));
  };
  auto queued = [&](const std::string& table) {
    return db.scalar("SELECT count(*) FROM dblog.request_queue WHERE consumer = 'search'"
                     " AND kind = 'table' AND table_oid = '" + table + "'::regclass");
  };
  using E = Bookkeeping::Entering;
  EXPECT_EQ(bookkeeping_.QueueTableEnteringScope(oid("public.t")), E::kQueued);
  EXPECT_EQ(bookkeeping_.QueueTableEnteringScope(oid("public.t")), E::kAlreadyQueued);
  EXPECT_EQ(queued("public.t"), "1");
  db.exec("INSERT INTO dblog.request_progress (request_id, consumer, state)"
          " SELECT id, 'search', 'running' FROM dblog.request_queue WHERE consumer = 'search'");
  EXPECT_EQ(bookkeeping_.QueueTableEnteringScope(oid("public.t")), E::kQueued);
  EXPECT_EQ(queued("public.t"), "2");
  EXPECT_EQ(db.scalar("SELECT key_columns::text FROM dblog.request_queue WHERE consumer ="
                      " 'search' ORDER BY id LIMIT 1"),
            "{id}");

  db.exec("INSERT INTO dblog.request_queue (table_oid, table_name, kind, consumer, key_columns,"
          " key_types) VALUES ('public.t2'::regclass, 'public.t2', 'table', 'orders', '{id}',"
          " '{integer}')");
  EXPECT_EQ(bookkeeping_.QueueTableEnteringScope(oid("public.t2")), E::kQueued);
  EXPECT_EQ(bookkeeping_.QueueTableEnteringScope(oid("other.u")), E::kOutOfScopeNow);
  EXPECT_EQ(bookkeeping_.QueueTableEnteringScope(oid("public.k")), E::kKeyless);
  const std::uint32_t gone = oid("public.t2");
  db.exec("DROP TABLE public.t2");
  EXPECT_EQ(bookkeeping_.QueueTableEnteringScope(gone), E::kGone);
  EXPECT_EQ(db.scalar("SELECT count(*) FROM dblog.request_queue WHERE consumer = 'search'"), "3");
  bookkeeping_.Reset();
  test::PgConn(*conninfo).exec("DROP DATABASE repairs_unit_enter WITH (FORCE)");
}

// A window whose table changed definition between its chunk's read and its high watermark
// (DDL, then a change of the table, both inside the window) is redone: its rows were encoded
// for the old definition, and emitting them would make the old Relation the table's latest
// one, so that the log's next changes (new definition) would be read with the old one.
class RepairWindowTest : public RepairsTest {
 protected:
  void SetUp() override {
    conninfo_ = test::test_conninfo();
    if (!conninfo_) GTEST_SKIP() << "DBLOG_TEST_CONNINFO is not set";
    {
      test::PgConn admin(*conninfo_);
      admin.exec("DROP DATABASE IF EXISTS repairs_window WITH (FORCE)");
      admin.exec("CREATE DATABASE repairs_window");
    }
    config_.source = *conninfo_ + " dbname=repairs_window";
    db_.emplace(config_.source);
    db_->exec("CREATE EXTENSION dblog;"
              "CREATE TABLE public.t (id int PRIMARY KEY, v text);"
              "INSERT INTO public.t SELECT g, 'v' || g FROM generate_series(1, 3) g;"
              "INSERT INTO dblog.consumers (name, slot_name, scope, bootstrap_state)"
              "  VALUES ('search', 'dblog_search', 'public.*', 'done')");
    db_->exec("SELECT pg_create_logical_replication_slot('probe', 'test_decoding')");
    db_->exec("SELECT dblog.repair('public.t')");
  }
  void TearDown() override {
    if (!conninfo_) return;
    bookkeeping_.Reset();
    db_.reset();
    test::PgConn admin(*conninfo_);
    admin.exec("SELECT pg_drop_replication_slot('probe') FROM pg_replication_slots"
               " WHERE slot_name = 'probe'");
    admin.exec("DROP DATABASE repairs_window WITH (FORCE)");
  }

  // Opens the window for the queued request; returns its id, read from the markers in the log.
  std::string OpenWindow() {
    repairs_.LoadQueued();
    repairs_.Schedule();
    io_.restart();
    io_.run_for(std::chrono::milliseconds(500));
    std::string id;
    for (const test::Row& row : db_->exec(
             "SELECT data FROM pg_logical_slot_get_changes('probe', NULL, NULL)"
             " WHERE data LIKE 'message:%dblog.watermark/search%content:lo:%'")) {
      id = row[0]->substr(row[0]->find("content:lo:") + 11);
    }
    EXPECT_FALSE(id.empty()) << "no window was opened";
    return id;
  }

  dblog::v1::Message Marker(Watermark::Kind kind, const std::string& id) {
    dblog::v1::Message m;
    m.set_prefix(Watermark::Prefix("search"));
    m.set_transactional(true);
    m.set_content(Watermark{kind, id}.Content());
    return m;
  }

  dblog::v1::Relation Describe() {
    dblog::v1::Relation r;
    const test::Rows rows = db_->exec_binary("SELECT dblog.relation_info('public.t'::regclass)");
    r.ParseFromString(*rows.at(0).at(0));
    return r;
  }

  // Runs the io loop (the reads are on the reader's thread) until n windows have both their
  // watermarks written (a chunk is handed over before its high watermark: each of those windows
  // has its chunk), or 10 s passed; then half a second more, in which no more may come.
  std::vector<std::string> RunUntilLowMarkers(std::size_t n) {
    std::vector<std::string> ids;
    std::size_t highs = 0;
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         (ids.size() < n || highs < n) && std::chrono::steady_clock::now() < until;) {
      io_.restart();
      io_.run_for(std::chrono::milliseconds(100));
      for (std::string& id : LowMarkers(&highs)) ids.push_back(std::move(id));
    }
    io_.restart();
    io_.run_for(std::chrono::milliseconds(500));
    for (std::string& id : LowMarkers(&highs)) ids.push_back(std::move(id));
    return ids;
  }

  // The low watermarks written since the last call, in the log's order; `highs` counts the high
  // ones.
  std::vector<std::string> LowMarkers(std::size_t* highs = nullptr) {
    std::vector<std::string> ids;
    for (const test::Row& row : db_->exec(
             "SELECT data FROM pg_logical_slot_get_changes('probe', NULL, NULL)"
             " WHERE data LIKE 'message:%dblog.watermark/search%content:__:%'")) {
      const std::size_t low = row[0]->find("content:lo:");
      if (low != std::string::npos) ids.push_back(row[0]->substr(low + 11));
      else if (highs) ++*highs;
    }
    return ids;
  }

  // Closes the window inside a transaction of the log at `lsn`; true when a chunk went out.
  bool CloseWindow(const std::string& id, std::uint64_t lsn) {
    return CloseWindowChunk(id, lsn).has_value();
  }
  // The same, with the ChunkBegin that went out.
  std::optional<dblog::v1::ChunkBegin> CloseWindowChunk(const std::string& id,
                                                        std::uint64_t lsn) {
    dblog::v1::Event begin;
    begin.mutable_begin()->set_xid(lsn);
    begin.mutable_begin()->set_commit_lsn(lsn);
    begin.mutable_begin()->set_end_lsn(lsn + 1);
    host_.emitter().Consume(begin);
    repairs_.OnBegin(begin.begin());
    repairs_.OnWatermark(Marker(Watermark::Kind::kHigh, id));
    dblog::v1::Event commit;
    commit.mutable_commit()->set_xid(lsn);
    commit.mutable_commit()->set_commit_lsn(lsn);
    commit.mutable_commit()->set_end_lsn(lsn + 1);
    host_.emitter().Consume(commit);
    repairs_.OnCommitted();
    dblog::v1::EventBatch out;
    out.ParseFromString(host_.emitter().TakeOutput());
    for (const auto& e : out.events())
      if (e.has_chunk_begin()) return e.chunk_begin();
    return std::nullopt;
  }

  std::optional<std::string> conninfo_;
  std::optional<test::PgConn> db_;
};

TEST_F(RepairWindowTest, AWindowWithoutDdlEmitsItsChunk) {
  const std::string id = OpenWindow();
  repairs_.OnWatermark(Marker(Watermark::Kind::kLow, id));
  EXPECT_TRUE(CloseWindow(id, 0x5000000));
  EXPECT_EQ(stats_.window_redos.load(), 0u);
}

TEST_F(RepairWindowTest, ADefinitionChangedInsideTheWindowRedoesIt) {
  const std::string id = OpenWindow();
  repairs_.OnWatermark(Marker(Watermark::Kind::kLow, id));
  // after the chunk's read: a column is added, then a row changes; the log describes the
  // table anew before that change
  db_->exec("ALTER TABLE public.t ADD COLUMN w int DEFAULT 7");
  EXPECT_TRUE(repairs_.OnRelation(Describe()));
  EXPECT_FALSE(CloseWindow(id, 0x5000000));
  EXPECT_EQ(stats_.window_redos.load(), 1u);
}

TEST_F(RepairWindowTest, TheSameDefinitionDescribedAgainDoesNotRedo) {
  const std::string id = OpenWindow();
  repairs_.OnWatermark(Marker(Watermark::Kind::kLow, id));
  // a new decoding session describes every table again, unchanged
  EXPECT_TRUE(repairs_.OnRelation(Describe()));
  EXPECT_TRUE(CloseWindow(id, 0x5000000));
  EXPECT_EQ(stats_.window_redos.load(), 0u);
}

// Windows in a row: the next chunk is read (its low and high watermarks written) while the
// window before it still waits for its high watermark. When that window is redone, the one read
// ahead is dropped with it (its markers are ignored), and the request is read again from the
// redone chunk's start, not from the dropped one's.
TEST_F(RepairWindowTest, TheNextChunkIsReadAheadAndDroppedWhenTheWindowBeforeIsRedone) {
  config_.chunk_size = 1;
  config_.max_chunk_size = 1;
  repairs_.LoadQueued();
  repairs_.Schedule();
  const std::vector<std::string> first = RunUntilLowMarkers(2);
  ASSERT_EQ(first.size(), 2u) << "the chunk after the first was not read ahead";
  EXPECT_EQ(stats_.windows_read_ahead.load(), 1u);
  repairs_.OnWatermark(Marker(Watermark::Kind::kLow, first[0]));
  db_->exec("ALTER TABLE public.t ADD COLUMN w int DEFAULT 7");
  EXPECT_TRUE(repairs_.OnRelation(Describe()));
  EXPECT_FALSE(CloseWindow(first[0], 0x5000000));
  EXPECT_EQ(stats_.window_redos.load(), 1u);
  // the window read ahead comes out of the log: given up, nothing of it is emitted
  repairs_.OnWatermark(Marker(Watermark::Kind::kLow, first[1]));
  EXPECT_FALSE(CloseWindow(first[1], 0x5000010));
  EXPECT_EQ(stats_.foreign_markers.load(), 2u);
  // after the redo's back-off: the first chunk again (the row with id 1), and the next ahead
  repairs_.Schedule();  // as the pipeline does after each batch of the log
  const std::vector<std::string> again = RunUntilLowMarkers(2);
  ASSERT_EQ(again.size(), 2u);
  repairs_.OnWatermark(Marker(Watermark::Kind::kLow, again[0]));
  const std::optional<dblog::v1::ChunkBegin> begin = CloseWindowChunk(again[0], 0x5000020);
  ASSERT_TRUE(begin.has_value());
  EXPECT_FALSE(begin->has_from_key()) << "the request did not start over at its first chunk";
  ASSERT_EQ(begin->to_key().values_size(), 1);
  EXPECT_EQ(begin->to_key().values(0).int_value(), 1);
  repairs_.OnWatermark(Marker(Watermark::Kind::kLow, again[1]));
  const std::optional<dblog::v1::ChunkBegin> second = CloseWindowChunk(again[1], 0x5000030);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->to_key().values(0).int_value(), 2);
}

TEST_F(RepairsTest, MarkersThatAreNotOursAreCountedAndNeverEmitted) {
  for (const char* prefix : {"dblog.watermark/orders", "dblog.watermark", "dblog.watermark/search"}) {
    dblog::v1::Message m;
    m.set_prefix(prefix);
    m.set_transactional(true);
    m.set_content(Watermark{Watermark::Kind::kHigh, "no-such-window"}.Content());
    repairs_.OnWatermark(m);
  }
  EXPECT_EQ(stats_.foreign_markers.load(), 3u);
  EXPECT_TRUE(host_.emitter().TakeOutput().empty());
}

TEST_F(RepairsTest, NothingIsScheduledWhileTheStreamIsNotRunning) {
  host_.streaming = false;
  repairs_.Schedule();
  io_.run();
  EXPECT_TRUE(host_.sent.empty());
}

}  // namespace
}  // namespace dblog::consumer
