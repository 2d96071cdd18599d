// tests/cpp/sidecar/dblogd_test.cc: dblogd end to end: a real cluster, the real daemon, the real
// client over TCP. Streaming, acknowledgements, the quiet-slot case, refusals, malformed
// frames, SIGKILL and PostgreSQL restarts, bootstraps (point splice) under load, and the
// listeners under file-descriptor exhaustion and idle or unfinished connections.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <future>
#include <random>
#include <thread>

#include "dblogd_fixture.h"
#include "wire/frame.h"

namespace dblog::test {
namespace {

using dblog::v1::Error;
using namespace std::chrono_literals;

TEST_F(DblogdTest, LiveChangesArriveInOrderWithCoordinates) {
  db().exec("CREATE TABLE " + schema() + ".items (id int PRIMARY KEY, name text)");
  // a value of each kind the plugin encodes, NULLs and a key change: every message read in place
  db().exec("CREATE TABLE " + schema() + ".typed (id int PRIMARY KEY, b bool, i8 int8,"
            " f4 float4, f8 float8, n numeric, t text, by bytea, u uuid, d date, ts timestamp,"
            " tz timestamptz, j jsonb, a int[])");
  StartDblogd({"--bootstrap=false"});
  client::Client c = Connect();
  EXPECT_EQ(c.welcome().slot(), Slot());
  EXPECT_TRUE(c.welcome().slot_created());

  db().exec("INSERT INTO " + schema() + ".items VALUES (1, 'a'), (2, 'b')");
  db().exec("UPDATE " + schema() + ".items SET name = 'B' WHERE id = 2");
  db().exec("UPDATE " + schema() + ".items SET id = 3 WHERE id = 1");
  db().exec("DELETE FROM " + schema() + ".items WHERE id = 2");
  db().exec("INSERT INTO " + schema() + ".typed VALUES (1, false, -9000000000, 1.5, '-0',"
            " 12.345, 'é', '\\x00ff', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2026-12-07',"
            " '2026-12-07 10:00', 'infinity', '{\"k\": [1]}', '{1,NULL}'),"
            " (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)");
  db().exec("UPDATE " + schema() + ".typed SET id = 3, t = '' WHERE id = 2");
  Replay replay;
  std::vector<dblog::v1::StreamEvent> events;
  const std::uint64_t until = Sentinel();
  client::Item item;
  while (c.Next(item)) {
    auto* ev = std::get_if<dblog::v1::StreamEvent>(&item);
    if (!ev) continue;
    replay.Apply(*ev);  // checks that positions strictly increase
    events.push_back(*ev);
    if (ev->has_commit() && ev->commit().commit_lsn() >= until) break;
  }
  std::vector<std::string> ops;
  for (const auto& ev : events) {
    if (!ev.has_change()) continue;
    const auto& ch = ev.change();
    EXPECT_GT(ch.commit_lsn(), 0u);
    EXPECT_GT(ch.seq(), 0u);
    EXPECT_GT(ch.lsn(), 0u);
    EXPECT_GT(ch.xid(), 0u);
    EXPECT_GT(ch.commit_time(), 0);
    ops.push_back(dblog::v1::Change::Kind_Name(ch.kind()));
  }
  // the key change is rendered as the old key's delete followed by the new row (the last
  // INSERT is the sentinel's)
  EXPECT_EQ(ops, (std::vector<std::string>{"INSERT", "INSERT", "UPDATE", "DELETE", "INSERT",
                                           "DELETE", "INSERT", "INSERT", "DELETE", "INSERT",
                                           "INSERT"}));
  ExpectConverged(replay, {"items", "typed"});
  EXPECT_EQ(MetricValue(dblogd_->Metrics(),
                        "dblog_plugin_messages_parsed_whole_total{consumer=\"" + consumer() + "\"}"),
            0);
}

TEST_F(DblogdTest, AcknowledgementsMoveConfirmedFlush) {
  db().exec("CREATE TABLE " + schema() + ".items (id int PRIMARY KEY)");
  StartDblogd({"--bootstrap=false"});
  client::Client c = Connect();
  db().exec("INSERT INTO " + schema() + ".items SELECT generate_series(1, 100)");
  Replay replay;
  std::uint64_t first_commit = 0;
  const std::uint64_t until = Sentinel();
  client::Item item;
  while (c.Next(item)) {
    auto* ev = std::get_if<dblog::v1::StreamEvent>(&item);
    if (!ev) continue;
    replay.Apply(*ev);
    if (ev->has_commit() && first_commit == 0) first_commit = ev->commit().commit_lsn();
    if (ev->has_commit() && ev->commit().commit_lsn() >= until) break;
  }
  // nothing acknowledged: the slot may not pass the first unacknowledged transaction
  std::this_thread::sleep_for(1500ms);
  EXPECT_LE(ConfirmedFlush(), first_commit);
  c.Ack(*replay.last_position());
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (ConfirmedFlush() <= replay.last_position()->commit_lsn() &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  // acknowledged: confirmed to the end of the last transaction
  EXPECT_GT(ConfirmedFlush(), replay.last_position()->commit_lsn());
}

TEST_F(DblogdTest, QuietConsumerSlotAdvancesWithOutOfScopeWrites) {
  db().exec("CREATE TABLE " + schema() + ".quiet (id int PRIMARY KEY)");
  db().exec("DROP TABLE IF EXISTS public.e2e_busy");
  db().exec("CREATE TABLE public.e2e_busy (id int PRIMARY KEY, v text)");
  StartDblogd({"--bootstrap=false"});
  client::Client c = Connect();
  const std::uint64_t start = ConfirmedFlush();
  std::uint64_t wal = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::atomic<bool> stop{false};
  // the consumer only answers heartbeats; its own tables stay quiet
  std::thread reader([&] {
    client::Item item;
    try {
      while (!stop && c.Next(item))
        if (auto* hb = std::get_if<dblog::v1::Heartbeat>(&item))
          if (hb->position().commit_lsn()) c.Ack(hb->position());
    } catch (...) {
    }
  });
  int i = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    db().exec("INSERT INTO public.e2e_busy SELECT g, repeat('x', 100) FROM generate_series(" +
              std::to_string(i * 1000) + "," + std::to_string(i * 1000 + 999) + ") g");
    ++i;
    wal = common::ParseLsn(db().scalar("SELECT pg_current_wal_lsn()"));
    if (ConfirmedFlush() > start + 100000) break;
    std::this_thread::sleep_for(200ms);
  }
  stop = true;
  const std::uint64_t confirmed = ConfirmedFlush();
  dblogd_->Stop();
  reader.join();
  db().exec("DROP TABLE public.e2e_busy");
  EXPECT_GT(confirmed, start + 100000) << "the slot did not follow the WAL (" << wal << ")";
  EXPECT_NE(dblogd_->log().find("consumer_streaming"), std::string::npos);
}

// A resume point the source never reached (another cluster's, a typo) is refused with a clear
// error, instead of a stream that stays silent (heartbeats only) forever.
TEST_F(DblogdTest, ResumeAfterAheadOfTheSourceIsRefused) {
  StartDblogd({"--bootstrap=false", "--heartbeat-interval=0.2"});
  { client::Client first = Connect(); }  // creates the slot
  dblog::v1::Position ahead;
  ahead.set_commit_lsn(common::ParseLsn(db().scalar("SELECT pg_current_wal_insert_lsn()")) +
                       (1ull << 32));
  ahead.set_seq(7);
  std::string refusal;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  try {
    client::Client c = Connect(ahead);
    client::Item item;
    while (std::chrono::steady_clock::now() < deadline && c.Next(item)) {
    }
  } catch (const client::ServerError& e) {
    EXPECT_EQ(e.code(), Error::PROTOCOL_VIOLATION);
    refusal = e.server_message();
  }
  EXPECT_NE(refusal.find("ahead of the source's WAL"), std::string::npos) << refusal;
  // a resume point the source did send is still fine
  Replay replay;
  client::Client c = Connect();
  ReadUntil(c, replay, Sentinel());
}

TEST_F(DblogdTest, SecondConnectionForTheSameNameIsRefused) {
  StartDblogd({"--bootstrap=false"});
  client::Client first = Connect();
  EXPECT_EQ(ExpectRefused([&] { return Connect(); }), Error::ALREADY_CONNECTED);
  // the first one is unaffected
  db().exec("INSERT INTO " + schema() + ".sentinel VALUES (1000)");
  Replay replay;
  ReadUntil(first, replay, Sentinel());
}

TEST_F(DblogdTest, HandshakeRefusals) {
  StartDblogd({"--bootstrap=false", "--token=s3cret"});
  auto connect = [&](const std::string& consumer, const std::string& token) {
    client::ConnectOptions o;
    o.port = dblogd_->port();
    o.consumer = consumer;
    o.token = token;
    return client::Client::Connect(o);
  };
  EXPECT_EQ(ExpectRefused([&] { return connect(consumer(), "wrong"); }), Error::AUTH_FAILED);
  EXPECT_EQ(ExpectRefused([&] { return connect("Bad-Name", "s3cret"); }),
            Error::BAD_CONSUMER_NAME);
  EXPECT_EQ(ExpectRefused([&] { return connect("nobody", "s3cret"); }), Error::UNKNOWN_CONSUMER);
  client::Client ok = connect(consumer(), "s3cret");
  EXPECT_EQ(ok.welcome().slot(), Slot());
  EXPECT_NE(dblogd_->Metrics().find("dblog_connections_refused_total 3"), std::string::npos);
}

// Raw frames: a malformed frame gets an Error frame and a disconnect; the daemon carries on.
TEST_F(DblogdTest, MalformedFramesGetAnErrorAndTheDaemonCarriesOn) {
  StartDblogd({"--bootstrap=false"});
  auto raw_exchange = [&](const std::string& bytes) {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket s(io);
    s.connect({boost::asio::ip::make_address("127.0.0.1"), dblogd_->port()});
    boost::asio::write(s, boost::asio::buffer(bytes));
    std::string in;
    boost::system::error_code ec;
    boost::asio::read(s, boost::asio::dynamic_buffer(in), ec);  // until the server closes
    wire::FrameDecoder d(wire::kMaxServerFrame);
    d.Feed(in);
    std::string_view payload;
    std::string error;
    dblog::v1::ServerMessage m;
    if (d.Next(&payload, &error) != wire::FrameDecoder::Status::kFrame ||
        !m.ParseFromArray(payload.data(), static_cast<int>(payload.size())) || !m.has_error())
      return Error::CODE_UNSPECIFIED;
    return m.error().code();
  };
  // not a protobuf message
  std::string garbage;
  wire::AppendFrame(garbage, std::string("\xff\xff\xff\xff", 4));
  EXPECT_EQ(raw_exchange(garbage), Error::BAD_FRAME);
  // a length over the client frame limit
  std::string oversized;
  wire::AppendVarint(oversized, wire::kMaxClientFrame + 1);
  EXPECT_EQ(raw_exchange(oversized), Error::BAD_FRAME);
  // an Ack before the Hello
  dblog::v1::ClientMessage ack;
  ack.mutable_ack()->mutable_position()->set_commit_lsn(1);
  std::string early;
  wire::AppendFrame(early, ack);
  EXPECT_EQ(raw_exchange(early), Error::PROTOCOL_VIOLATION);
  // an unsupported protocol version
  dblog::v1::ClientMessage hello;
  hello.mutable_hello()->set_protocol_version(99);
  hello.mutable_hello()->set_consumer(consumer());
  std::string v99;
  wire::AppendFrame(v99, hello);
  EXPECT_EQ(raw_exchange(v99), Error::UNSUPPORTED_VERSION);

  // and a well-behaved consumer still streams
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, Sentinel());
  EXPECT_NE(dblogd_->Metrics().find("dblog_bad_frames_total 3"), std::string::npos);
}

// Scope patterns name tables as the catalog spells them (docs/operations.md). dblogd quotes
// them for the plugin, which would otherwise fold "Orders" to orders: the wrong table, or none.
TEST_F(DblogdTest, MixedCaseTableInAScopeIsMatchedAsSpelled) {
  const std::string upper = schema() + ".\"Orders\"", lower = schema() + ".orders";
  db().exec("CREATE TABLE " + upper + " (id int PRIMARY KEY, v text)");
  db().exec("CREATE TABLE " + lower + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + upper + " SELECT g, 'copied' FROM generate_series(1, 5) g");
  db().exec("INSERT INTO " + lower + " SELECT g, 'not in scope' FROM generate_series(1, 5) g");
  StartDblogd({"--consumer=" + consumer() + "=" + schema() + ".Orders," + schema() + ".sentinel"});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  db().exec("INSERT INTO " + upper + " VALUES (6, 'streamed')");
  db().exec("UPDATE " + lower + " SET v = 'still not in scope'");
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"\"Orders\""});
  EXPECT_EQ(replay.Table(TableOid(db(), upper)).size(), 6u);
  EXPECT_TRUE(replay.Table(TableOid(db(), lower)).empty());
}

// A star inside a name (the matcher shared with the plugin): order_* holds order_a and
// order_b, bootstrapped and streamed, never orders.
TEST_F(DblogdTest, StarInsideANameHoldsOnlyTheTablesItMatches) {
  for (const char* t : {"order_a", "order_b", "orders"}) {
    db().exec("CREATE TABLE " + schema() + "." + t + " (id int PRIMARY KEY, v text)");
    db().exec("INSERT INTO " + schema() + "." + t + " SELECT g, 'copied' FROM generate_series(1, 5) g");
  }
  StartDblogd({"--consumer=" + consumer() + "=" + schema() + ".order_*, " + schema() + ".sentinel"});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  for (const char* t : {"order_a", "order_b", "orders"})
    db().exec("INSERT INTO " + schema() + "." + t + " VALUES (6, 'streamed')");
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"order_a", "order_b"});
  EXPECT_EQ(replay.Table(TableOid(db(), schema() + ".order_a")).size(), 6u);
  EXPECT_TRUE(replay.Table(TableOid(db(), schema() + ".orders")).empty());
}

// An exclusion (public.*,!public.audit_log as people write it): the excluded table is not
// copied, its changes are not streamed, and a repair of it is refused as out of scope, by the
// same matcher in dblogd, the plugin and the SQL API.
TEST_F(DblogdTest, ExcludedTableIsNeitherCopiedNorStreamedNorRepaired) {
  const std::string audit = schema() + ".audit_log";
  for (const char* t : {"orders", "items", "audit_log"}) {
    db().exec("CREATE TABLE " + schema() + "." + t + " (id int PRIMARY KEY, v text)");
    db().exec("INSERT INTO " + schema() + "." + t + " SELECT g, 'copied' FROM generate_series(1, 5) g");
  }
  StartDblogd({"--consumer=" + consumer() + "=" + schema() + ".*,!" + audit});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  EXPECT_TRUE(replay.Table(TableOid(db(), audit)).empty());
  for (const char* t : {"orders", "items", "audit_log"})
    db().exec("UPDATE " + schema() + "." + t + " SET v = 'streamed' WHERE id = 1");
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"orders", "items"});
  EXPECT_TRUE(replay.Table(TableOid(db(), audit)).empty());
  EXPECT_EQ(db().scalar("SELECT scope FROM dblog.consumers WHERE name = '" + consumer() + "'"),
            schema() + ".*,!" + audit);
  try {
    db().exec("SELECT dblog.repair('" + audit + "', '" + consumer() + "')");
    ADD_FAILURE() << "a repair of the excluded table was queued";
  } catch (const PgError& e) {
    EXPECT_NE(std::string(e.what()).find("is not in the scope of consumer"), std::string::npos)
        << e.what();
  }
  EXPECT_NE(db().scalar("SELECT dblog.repair('" + schema() + ".orders', '" + consumer() + "')"),
            "");
}

// A table that loses its key while in scope: the plugin cannot render its changes, and every
// reconnect would fail on the same change. The consumer is told why (SCOPE_ERROR naming the
// table) instead of waiting on a silent stream; leaving the table out of the scope lets the
// stream go on.
TEST_F(DblogdTest, TableLosingItsKeyEndsTheSessionWithAScopeError) {
  const std::string t = schema() + ".shaky";
  db().exec("CREATE TABLE " + t + " (id int PRIMARY KEY, v text)");
  StartDblogd();
  Replay replay;
  {
    client::Client c = Connect();
    ReadUntil(c, replay, 0);
    db().exec("BEGIN");
    db().exec("INSERT INTO " + t + " VALUES (1, 'with a key')");
    db().exec("ALTER TABLE " + t + " DROP CONSTRAINT shaky_pkey");
    db().exec("INSERT INTO " + t + " VALUES (2, 'without')");
    db().exec("COMMIT");
    try {
      ReadUntil(c, replay, Sentinel(), 30s);
      ADD_FAILURE() << "the stream went on past a change it cannot render";
    } catch (const client::ServerError& e) {
      EXPECT_EQ(e.code(), Error::SCOPE_ERROR);
      EXPECT_NE(e.server_message().find("shaky"), std::string::npos) << e.what();
      EXPECT_NE(e.server_message().find("scope"), std::string::npos) << e.what();
    }
  }
  dblogd_->Signal(SIGTERM);
  dblogd_->Wait();
  // The way out the message gives: the table leaves the scope, the stream goes on.
  StartDblogd({"--consumer=" + consumer() + "=" + schema() + ".sentinel"});
  client::Client c = Connect(replay.last_position());
  ReadUntil(c, replay, Sentinel());
}

TEST_F(DblogdTest, TableWithoutKeyInScopeIsRefusedByName) {
  db().exec("CREATE TABLE " + schema() + ".nokey (v int)");
  StartDblogd();
  try {
    client::Client c = Connect();
    client::Item item;
    while (c.Next(item)) {
      ASSERT_FALSE(std::holds_alternative<dblog::v1::StreamEvent>(item)) << "nothing is emitted";
    }
    FAIL() << "expected a refusal";
  } catch (const client::ServerError& e) {
    EXPECT_EQ(e.code(), Error::SCOPE_ERROR);
    EXPECT_NE(e.server_message().find(schema() + ".nokey"), std::string::npos)
        << e.server_message();
  }
  // no slot is left behind that a later connection could mistake for a bootstrap
  EXPECT_EQ(db().scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" +
                        Slot() + "'"),
            "0");
}

// A role without REPLICATION, or without SELECT on a table in scope: a clear error naming the
// fix, before any slot exists or anything is emitted.
TEST_F(DblogdTest, MissingPrivilegesAreExplainedBeforeAnythingHappens) {
  db().exec("CREATE TABLE " + schema() + ".secret (id int PRIMARY KEY)");
  db().exec("DROP ROLE IF EXISTS e2e_norepl");
  db().exec("CREATE ROLE e2e_norepl LOGIN");
  db().exec("GRANT USAGE ON SCHEMA " + schema() + " TO e2e_norepl");
  auto refused = [&]() -> std::string {
    try {
      client::Client c = Connect();
      client::Item item;
      while (c.Next(item))
        EXPECT_FALSE(std::holds_alternative<dblog::v1::StreamEvent>(item));
    } catch (const client::ServerError& e) {
      EXPECT_EQ(e.code(), Error::SOURCE_ERROR);
      return e.server_message();
    }
    return "";
  };
  StartDblogd({"--source=" + conninfo() + " user=e2e_norepl"});
  EXPECT_NE(refused().find("ALTER ROLE e2e_norepl REPLICATION"), std::string::npos);
  dblogd_->Stop();
  db().exec("ALTER ROLE e2e_norepl REPLICATION");
  db().exec("GRANT SELECT, INSERT, UPDATE ON dblog.consumers, dblog.request_progress TO e2e_norepl");
  db().exec("GRANT SELECT, INSERT ON dblog.request_queue TO e2e_norepl");
  db().exec("GRANT USAGE ON SEQUENCE dblog.request_queue_id_seq TO e2e_norepl");
  StartDblogd({"--source=" + conninfo() + " user=e2e_norepl"});
  const std::string message = refused();
  EXPECT_NE(message.find(schema() + ".secret"), std::string::npos) << message;
  EXPECT_EQ(db().scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + Slot() +
                        "'"),
            "0");
  dblogd_->Stop();
  db().exec("REVOKE ALL ON dblog.consumers, dblog.request_progress, dblog.request_queue FROM "
            "e2e_norepl");
  db().exec("REVOKE ALL ON SEQUENCE dblog.request_queue_id_seq FROM e2e_norepl");
  db().exec("DROP OWNED BY e2e_norepl");
  db().exec("DROP ROLE e2e_norepl");
}

TEST_F(DblogdTest, SigkillThenRestartLosesNothing) {
  db().exec("CREATE TABLE " + schema() + ".items (id int PRIMARY KEY, v int)");
  StartDblogd({"--bootstrap=false"});
  Replay replay;
  std::optional<dblog::v1::Position> acked;
  {
    client::Client c = Connect();
    for (int i = 0; i < 20; ++i)
      db().exec("INSERT INTO " + schema() + ".items VALUES (" + std::to_string(i) + ", 0)");
    ReadUntil(c, replay, Sentinel());
    acked = replay.last_position();
    // more changes the consumer receives but does not acknowledge
    db().exec("UPDATE " + schema() + ".items SET v = 1");
    dblogd_->Signal(SIGKILL);
    dblogd_->Wait();
  }
  db().exec("DELETE FROM " + schema() + ".items WHERE id < 5");
  db().exec("INSERT INTO " + schema() + ".items VALUES (100, 2)");
  dblogd_->Start();
  client::Client c = Connect(acked);
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"items"});
}

TEST_F(DblogdTest, PostgresRestartIsSurvived) {
  const char* pgdata = std::getenv("DBLOG_TEST_PGDATA");
  const char* bindir = std::getenv("DBLOG_TEST_PG_BINDIR");
  if (!pgdata || !bindir) GTEST_SKIP() << "needs DBLOG_TEST_PGDATA and DBLOG_TEST_PG_BINDIR";
  db().exec("CREATE TABLE " + schema() + ".items (id int PRIMARY KEY, v int)");
  StartDblogd({"--bootstrap=false"});
  client::Client c = Connect();
  Replay replay;
  db().exec("INSERT INTO " + schema() + ".items VALUES (1, 1)");
  ReadUntil(c, replay, Sentinel());

  const std::string as_pg = geteuid() == 0 ? "runuser -u postgres -- " : "";
  ASSERT_EQ(std::system((as_pg + bindir + "/pg_ctl -D " + pgdata +
                         " -m fast -w restart >/dev/null 2>&1").c_str()),
            0);
  ReconnectDb();  // the test's own connection did not survive the restart
  PgConn& again = db();
  again.exec("INSERT INTO " + schema() + ".items VALUES (2, 2)");
  again.exec("UPDATE " + schema() + ".items SET v = 3 WHERE id = 1");
  again.exec("BEGIN");
  again.exec("INSERT INTO " + schema() + ".sentinel VALUES (500)");
  const std::uint64_t lsn = common::ParseLsn(again.scalar("SELECT pg_current_wal_insert_lsn()"));
  again.exec("COMMIT");
  ReadUntil(c, replay, lsn, 90s);
  const auto source = SourceTable(again, schema() + ".items");
  EXPECT_EQ(replay.Table(TableOid(again, schema() + ".items")), source);
  EXPECT_NE(dblogd_->log().find("source_reconnected"), std::string::npos);
}

TEST_F(DblogdTest, SigtermStopsGracefullyWithAFinalStatusUpdate) {
  db().exec("CREATE TABLE " + schema() + ".items (id int PRIMARY KEY)");
  StartDblogd({"--bootstrap=false", "--status-interval=60"});
  client::Client c = Connect();
  db().exec("INSERT INTO " + schema() + ".items SELECT generate_series(1, 10)");
  Replay replay;
  ReadUntil(c, replay, Sentinel());  // acks every commit
  // no timed status update comes within the test: only the final one can move the slot
  dblogd_->Signal(SIGTERM);
  const int status = dblogd_->Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_GT(ConfirmedFlush(), replay.last_position()->commit_lsn());
  // The client is told why the stream ends: an Error frame, not a bare close (a transport
  // error escapes and fails the test too).
  Error::Code code = Error::CODE_UNSPECIFIED;
  try {
    client::Item item;
    while (c.Next(item)) {
    }
  } catch (const client::ServerError& e) {
    code = e.code();
  }
  EXPECT_EQ(code, Error::SHUTTING_DOWN) << "the stream ended without Error{SHUTTING_DOWN}";
}

// ---- bootstrap (point splice) ------------------------------------------------------------

TEST_F(DblogdTest, BootstrapOfEmptyAndManyTables) {
  for (int i = 0; i < 30; ++i)
    db().exec("CREATE TABLE " + schema() + ".t" + std::to_string(i) +
              " (id int PRIMARY KEY, v text)");
  for (int i = 0; i < 30; i += 2)
    db().exec("INSERT INTO " + schema() + ".t" + std::to_string(i) +
              " SELECT g, 'v' || g FROM generate_series(1, " + std::to_string(i * 10) + ") g");
  StartDblogd();
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);  // through BootstrapEnd
  std::vector<std::string> tables;
  for (int i = 0; i < 30; ++i) tables.push_back("t" + std::to_string(i));
  ExpectConverged(replay, tables);
}

TEST_F(DblogdTest, BootstrapOfNoTables) {
  db().exec("DROP TABLE " + schema() + ".sentinel");
  StartDblogd();
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  EXPECT_EQ(replay.Table(0).size(), 0u);
}

// Inserts, updates, deletes and key changes on several tables while the bootstrap copies them:
// the replayed stream equals the source, key by key.
TEST_F(DblogdTest, BootstrapUnderConcurrentLoadConverges) {
  db().exec("CREATE TABLE " + schema() + ".a (id bigint PRIMARY KEY, v int, body text)");
  db().exec("CREATE TABLE " + schema() + ".b (k1 text, k2 int, v numeric, PRIMARY KEY (k1, k2))");
  db().exec("ALTER TABLE " + schema() + ".a ALTER COLUMN body SET STORAGE EXTERNAL");
  db().exec("INSERT INTO " + schema() + ".a SELECT g, g, CASE WHEN g % 100 = 0 THEN "
            "repeat('t', 5000) END FROM generate_series(1, 600000) g");
  db().exec("INSERT INTO " + schema() + ".b SELECT 'k' || (g % 50), g, g / 7.0 FROM "
            "generate_series(1, 20000) g");
  db().exec("ANALYZE " + schema() + ".a, " + schema() + ".b");
  StartDblogd({"--copy-workers=2"});

  std::atomic<bool> stop{false};
  std::thread writer([&] {
    PgConn w(conninfo());
    std::mt19937 rng(42);
    while (!stop) {
      const int id = static_cast<int>(rng() % 700000) + 1;
      const std::string a = schema() + ".a", b = schema() + ".b";
      try {
        switch (rng() % 5) {
          case 0: w.exec("UPDATE " + a + " SET v = v + 1 WHERE id = " + std::to_string(id)); break;
          case 1: w.exec("DELETE FROM " + a + " WHERE id = " + std::to_string(id)); break;
          case 2: w.exec("INSERT INTO " + a + " VALUES (" + std::to_string(id + 700000) +
                         ", 1, NULL) ON CONFLICT DO NOTHING"); break;
          case 3: w.exec("UPDATE " + a + " SET id = id + 1000000 WHERE id = " +
                         std::to_string(id)); break;
          case 4: w.exec("UPDATE " + b + " SET v = v + 1, k2 = k2 + 100000 WHERE k2 = " +
                         std::to_string(id % 20000)); break;
        }
      } catch (const PgError&) {
        // a key move onto an existing key: refused by the source, nothing to capture
      }
    }
  });
  client::Client c = Connect();
  Replay replay;
  try {
    ReadUntil(c, replay, 0, 300s);  // the copy, while the writer runs
  } catch (...) {
    stop = true;
    writer.join();
    throw;
  }
  stop = true;
  writer.join();
  ReadUntil(c, replay, Sentinel(), 120s);
  ExpectConverged(replay, {"a", "b"});
}

// dblogd killed in the middle of a bootstrap: the next connection gets a fresh one, flagged as
// restarted, and converges.
TEST_F(DblogdTest, KillDuringBootstrapRedoesIt) {
  db().exec("CREATE TABLE " + schema() + ".big (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + schema() + ".big SELECT g, repeat('v', 50) FROM "
            "generate_series(1, 300000) g");
  StartDblogd({"--max-buffer-mb=1"});
  {
    client::Client c = Connect();
    client::Item item;
    int reads = 0;
    while (reads < 1000 && c.Next(item))
      if (auto* ev = std::get_if<dblog::v1::StreamEvent>(&item))
        if (ev->has_change()) ++reads;
    dblogd_->Signal(SIGKILL);
    dblogd_->Wait();
  }
  EXPECT_EQ(db().scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = '" +
                        consumer() + "'"),
            "copying");
  db().exec("UPDATE " + schema() + ".big SET v = 'changed' WHERE id % 1000 = 0");
  dblogd_->Start();
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0, 300s);
  EXPECT_TRUE(replay.restarted_seen());
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"big"});
  // done only once acknowledged; then a reconnect resumes instead of copying again
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (db().scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = '" + consumer() +
                     "'") != "done" &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  EXPECT_EQ(db().scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = '" +
                        consumer() + "'"),
            "done");
}

// Found by the oracle's failover seeds (a restart of the new primary): a request the log
// carries is described with a query on dblogd's SQL connection. When that connection was gone
// (the server restarting), the request was dropped, the transaction that carried it was
// acknowledged, and the request never ran until the consumer connected again. The queue is
// now read again. Here the connection is terminated just before the request is made.
TEST_F(DblogdTest, ARequestTheLogCarriesWhileDblogdsConnectionIsGoneStillRuns) {
  db().exec("CREATE TABLE " + schema() + ".t (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + schema() + ".t SELECT g, 'v' || g FROM generate_series(1, 100) g");
  // nothing else of dblogd's uses that connection meanwhile
  StartDblogd({"--status-interval=60", "--heartbeat-interval=60"});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  ReadUntil(c, replay, Sentinel());
  // the bootstrap recorded done first: the connection's next user must be the repair's load
  // (terminated while the bootstrap's record was being written, the test saw no failed load)
  for (auto until = std::chrono::steady_clock::now() + 30s;
       db().scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = '" + consumer() +
                   "'") != "done";) {
    ASSERT_LT(std::chrono::steady_clock::now(), until);
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(db().scalar("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                        "application_name = 'dblogd " + consumer() + "' AND backend_type = "
                        "'client backend'"),
            "1");
  db().exec("UPDATE " + schema() + ".t SET v = 'changed' WHERE id % 10 = 0");
  const std::string id =
      db().scalar("SELECT dblog.repair('" + schema() + ".t', '" + consumer() + "')");
  for (auto until = std::chrono::steady_clock::now() + 60s;;) {
    ReadUntil(c, replay, Sentinel());
    if (db().scalar("SELECT state FROM dblog.requests WHERE id = " + id) == "done") break;
    ASSERT_LT(std::chrono::steady_clock::now(), until) << dblogd_->log();
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_GE(CountLogEvents(dblogd_->log(), "repair_load_failed"), 1) << dblogd_->log();
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"t"});
}

// Found by the oracle's failover seeds (the new primary restarted): a chunk's progress is
// recorded on dblogd's SQL connection once the consumer acknowledged it. When that connection
// was gone, the progress was dropped, and the request stayed queued though its rows had gone
// out: the pipeline knew it, so it was not read from the queue again until the consumer
// connected anew. The write is now made again. Here the connection is terminated between the
// request's last chunk and its acknowledgement.
TEST_F(DblogdTest, ARepairsProgressTheSourceCouldNotTakeIsRecordedOnceItIsBack) {
  db().exec("CREATE TABLE " + schema() + ".t (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + schema() + ".t SELECT g, 'v' || g FROM generate_series(1, 100) g");
  // nothing else of dblogd's uses that connection meanwhile
  StartDblogd({"--status-interval=60", "--heartbeat-interval=60"});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  ReadUntil(c, replay, Sentinel());
  const std::string id =
      db().scalar("SELECT dblog.repair('" + schema() + ".t', '" + consumer() + "')");
  // the request's last chunk and the commit that carries it, not acknowledged yet
  std::optional<dblog::v1::Position> last_chunk;
  bool chunk_ended = false;
  for (auto until = std::chrono::steady_clock::now() + 60s; !last_chunk;) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << dblogd_->log();
    client::Item item;
    ASSERT_TRUE(c.Next(item));
    auto* ev = std::get_if<dblog::v1::StreamEvent>(&item);
    if (!ev) continue;
    replay.Apply(*ev);
    if (ev->has_chunk_end() && std::to_string(ev->chunk_end().request_id()) == id)
      chunk_ended = ev->chunk_end().last();
    if (chunk_ended && ev->has_commit()) last_chunk = client::Client::PositionOf(*ev);
  }
  ASSERT_EQ(db().scalar("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                        "application_name = 'dblogd " + consumer() + "' AND backend_type = "
                        "'client backend'"),
            "1");
  c.Ack(*last_chunk);
  for (auto until = std::chrono::steady_clock::now() + 60s;;) {
    ReadUntil(c, replay, Sentinel());
    if (db().scalar("SELECT state FROM dblog.requests WHERE id = " + id) == "done") break;
    ASSERT_LT(std::chrono::steady_clock::now(), until) << dblogd_->log();
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_GE(CountLogEvents(dblogd_->log(), "repair_progress_not_recorded"), 1) << dblogd_->log();
  ExpectConverged(replay, {"t"});
}

// Repair chunks are read on a connection of their own (consumer/window_reader.h), which stays
// open between repairs. When the server ended its session meanwhile (a restart, a DBA's
// pg_terminate_backend, idle_session_timeout), the next repair's first statement met the dead
// connection and its window was deferred for --reconnect-max (30 s here) as if the source were
// down (found by review). An idle connection is checked before it is used.
TEST_F(DblogdTest, ARepairAfterTheReadersSessionWasEndedIsNotDeferred) {
  db().exec("CREATE TABLE " + schema() + ".t (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + schema() + ".t SELECT g, 'v' || g FROM generate_series(1, 100) g");
  StartDblogd({"--reconnect-max=30"});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  ReadUntil(c, replay, Sentinel());
  auto repair = [&] {
    const std::string id =
        db().scalar("SELECT dblog.repair('" + schema() + ".t', '" + consumer() + "')");
    for (auto until = std::chrono::steady_clock::now() + 20s;;) {
      ReadUntil(c, replay, Sentinel());
      if (db().scalar("SELECT state FROM dblog.requests WHERE id = " + id) == "done") return;
      ASSERT_LT(std::chrono::steady_clock::now(), until) << dblogd_->log();
      std::this_thread::sleep_for(100ms);
    }
  };
  repair();
  ASSERT_EQ(db().scalar("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                        "application_name = 'dblogd " + consumer() + " repairs'"),
            "1");
  std::this_thread::sleep_for(1500ms);  // idle for more than a second: checked before use
  repair();
  EXPECT_EQ(CountLogEvents(dblogd_->log(), "repair_window_deferred"), 0) << dblogd_->log();
  ExpectConverged(replay, {"t"});
}

// Found by the failover oracle (seed 8019): dblogd was killed after a reconcile made its new
// slot and before that session streamed, so its Welcome.reconcile never reached the consumer;
// the next session resumed from the new slot and said nothing, and dblog apply, not knowing the
// source went back, stopped for good at a column type only the lost history had. A consumer
// still before the last reconcile's slot is told again, in every Welcome until it reads past
// the slot's start. Here the consumer leaves right after the reconcile's Welcome.
TEST_F(DblogdTest, AConsumerThatHasNotReadPastAReconcileIsToldAgain) {
  db().exec("CREATE TABLE " + schema() + ".t (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + schema() + ".t SELECT g, 'v' || g FROM generate_series(1, 100) g");
  StartDblogd({"--on-slot-lost=reconcile"});
  Replay replay;
  ASSERT_NO_FATAL_FAILURE(BootstrapThenLoseTheSlot(replay));
  const auto before = replay.last_position();
  std::uint64_t point = 0;
  {
    client::Client c = Connect(before);
    ASSERT_TRUE(c.welcome().has_reconcile());
    point = c.welcome().reconcile().consistent_point();
  }  // gone before reading anything
  {
    client::Client c = Connect(before);
    ASSERT_TRUE(c.welcome().has_reconcile()) << dblogd_->log();
    EXPECT_EQ(c.welcome().reconcile().consistent_point(), point);
    replay.Reconciled();
    ReadUntil(c, replay, Sentinel());
  }
  EXPECT_GE(CountLogEvents(dblogd_->log(), "reconcile_announced_again"), 1);
  {
    // past the slot's start now: a plain resume
    client::Client c = Connect(replay.last_position());
    EXPECT_FALSE(c.welcome().has_reconcile());
    ReadUntil(c, replay, Sentinel());
  }
  ExpectConverged(replay, {"t"});
}

// Issue 24, found by the oracle's failover seeds: a reconcile enumerated the scope, queued its
// repairs, then made the new slot, which waits for the transactions open when it began (a
// failover's new primary is busy). A table created (or renamed or moved) into the scope during
// that wait was in neither: its rows, committed before the slot's consistent point, never
// reached the consumer, and no repair was queued for it. The scope is enumerated again once
// the slot exists. The slot is dropped by hand here, which reconciles as a failover does.
TEST_F(DblogdTest, ATableThatEntersTheScopeWhileAReconcileMakesItsSlotIsRepairedToo) {
  db().exec("CREATE TABLE " + schema() + ".t (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + schema() + ".t SELECT g, 'v' || g FROM generate_series(1, 100) g");
  StartDblogd({"--on-slot-lost=reconcile"});
  Replay replay;
  ASSERT_NO_FATAL_FAILURE(BootstrapThenLoseTheSlot(replay));
  db().exec("UPDATE " + schema() + ".t SET v = 'changed' WHERE id % 10 = 0");
  // a transaction with an xid holds the new slot's creation back
  PgConn holder(conninfo());
  holder.exec("BEGIN");
  holder.exec("SELECT pg_current_xact_id()");
  auto connecting = std::async(std::launch::async,
                               [&, resume = replay.last_position()] { return Connect(resume); });
  for (auto until = std::chrono::steady_clock::now() + 60s;
       CountLogEvents(dblogd_->log(), "slot_creation_waiting") == 0;) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << dblogd_->log();
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(CountLogEvents(dblogd_->log(), "slot_missing_reconcile"), 1);
  // while it waits: a table created in scope, with rows
  db().exec("CREATE TABLE " + schema() + ".late (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + schema() +
            ".late SELECT g, 'late ' || g FROM generate_series(1, 50) g");
  holder.exec("COMMIT");
  client::Client c = connecting.get();
  ASSERT_TRUE(c.welcome().has_reconcile());
  replay.Reconciled();
  EXPECT_EQ(CountLogEvents(dblogd_->log(), "reconcile_table_entered"), 1) << dblogd_->log();
  // every repair done, then everything read
  for (auto until = std::chrono::steady_clock::now() + 60s;;) {
    ReadUntil(c, replay, Sentinel());
    if (db().scalar("SELECT count(*) FROM dblog.requests WHERE consumer = '" + consumer() +
                    "' AND state IS DISTINCT FROM 'done'") == "0")
      break;
    ASSERT_LT(std::chrono::steady_clock::now(), until) << dblogd_->log();
    std::this_thread::sleep_for(100ms);
  }
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"t", "late"});
}

// DDL on a table while the bootstrap copies another: the worker reaches the changed table after
// the change, so its rows are encoded with the new definition while the stream describes them
// with the one read when the bootstrap was planned. dblogd notices (the worker describes each
// table again under its COPY's lock) and redoes the bootstrap; the consumer never gets rows
// that do not fit their Relation (Replay refuses those), and converges.
TEST_F(DblogdTest, DdlDuringTheBootstrapRedoesItInsteadOfMislabellingRows) {
  const std::string error =
      DdlDuringTheBootstrap("ALTER TABLE " + schema() + ".b ADD COLUMN w int DEFAULT 7");
  EXPECT_FALSE(error.empty()) << "the bootstrap went on with rows encoded for another definition";
  EXPECT_NE(error.find("changed while it was copied"), std::string::npos) << error;
  // the retry: a new bootstrap from a new slot, with the new definition
  ExpectBootstrapRedone({"a_big", "b"});
}

// A rewrite that leaves the definition as it was (ALTER COLUMN ... TYPE of the same type USING
// an expression) committed after the slot's snapshot: the table's new storage holds only rows
// of the rewriting transaction, which the snapshot cannot see, so its COPY read it empty, and
// the log has no change for the rewrite: b's rows were silently missing from the bootstrap. The
// copy checks that the table's storage is the snapshot's and redoes the bootstrap.
TEST_F(DblogdTest, ATableRewrittenDuringTheBootstrapRedoesItInsteadOfCopyingItEmpty) {
  const std::string error = DdlDuringTheBootstrap("ALTER TABLE " + schema() +
                                                  ".b ALTER COLUMN v TYPE text USING v || '!'");
  EXPECT_FALSE(error.empty()) << "the bootstrap went on with the rewritten table copied empty";
  EXPECT_NE(error.find("was rewritten or dropped after the slot's snapshot"), std::string::npos)
      << error;
  ExpectBootstrapRedone({"a_big", "b"});
}

// Issue 15, item 3: a table dropped while the bootstrap copies another one. The worker that
// reaches it reads it in the snapshot (where it exists) but cannot open it any more: the
// bootstrap fails (SOURCE_ERROR) and the retry, from a new slot, copies what exists now.
TEST_F(DblogdTest, ATableDroppedDuringTheBootstrapRedoesIt) {
  const std::string error = DdlDuringTheBootstrap("DROP TABLE " + schema() + ".b");
  EXPECT_FALSE(error.empty()) << "the bootstrap ended although a table of its plan is gone";
  // "bootstrap failed: relation "...b" does not exist or may not be read any more (dropped ...)"
  EXPECT_NE(error.find(".b\" does not exist"), std::string::npos) << error;
  // the retry: a new bootstrap from a new slot, without b
  ExpectBootstrapRedone({"a_big"});
}

}  // namespace
}  // namespace dblog::test

namespace dblog::test {
namespace {

using namespace std::chrono_literals;

// A plain TCP connection to 127.0.0.1:port that sends `bytes` (if any) and then nothing.
int OpenIdle(std::uint16_t port, const std::string& bytes = "") {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw std::runtime_error("connect failed");
  if (!bytes.empty() && ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0)
    throw std::runtime_error("send failed");
  return fd;
}

// Security issue item 5: idle connections that use up dblogd's file descriptors make accept()
// fail (EMFILE). Both listeners must log it (a few lines, not one per failure), retry, and
// serve again once descriptors are free: a real consumer connects and streams, /metrics answers.
TEST_F(DblogdTest, ListenersSurviveRunningOutOfFileDescriptors) {
  db().exec("CREATE TABLE " + schema() + ".items (id int PRIMARY KEY)");
  dblogd_fd_limit_ = 48;  // fewer than --max-pending-handshakes (64) + the /metrics cap (16)
  StartDblogd({"--bootstrap=false", "--copy-workers=1"});
  std::vector<int> idle;
  auto open_idle = [&](std::uint16_t port, int n, const std::string& bytes) {
    for (int i = 0; i < n; ++i) idle.push_back(OpenIdle(port, bytes));
  };
  open_idle(dblogd_->port(), 300, "");  // no Hello
  std::this_thread::sleep_for(300ms);
  open_idle(dblogd_->metrics_port(), 150, "GET /metrics HTTP/1.0\r\n");  // headers unfinished
  std::this_thread::sleep_for(1500ms);  // dblogd runs out of descriptors and retries meanwhile
  for (int fd : idle) close(fd);

  // a real consumer connects and streams
  client::ConnectOptions o;
  o.port = dblogd_->port();
  o.consumer = consumer();
  o.connect_timeout = 10s;
  o.io_timeout = 30s;
  client::Client c = client::Client::Connect(o);
  db().exec("INSERT INTO " + schema() + ".items VALUES (1), (2)");
  Replay replay;
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"items"});
  // /metrics answers
  const RawReply reply = RawExchange(dblogd_->metrics_port(), "GET /metrics HTTP/1.0\r\n\r\n", 10s);
  ASSERT_TRUE(reply.closed) << "no complete /metrics answer";
  ASSERT_EQ(reply.bytes.rfind("HTTP/1.0 200 OK", 0), 0u) << reply.bytes;
  EXPECT_GT(MetricValue(reply.bytes, "dblog_accept_errors_total{listener=\"consumers\"}"), 0);
  // logged, but rate-limited: at most one line per listener per 10 s
  const std::string log = dblogd_->log();
  EXPECT_GE(CountLogEvents(log, "accept_failed"), 1);
  EXPECT_LE(CountLogEvents(log, "accept_failed"), 4);
}

// Connections that never send their Hello are capped (--max-pending-handshakes): those over
// the cap are closed at once and counted; when the idle ones go, a consumer connects.
TEST_F(DblogdTest, PendingHandshakesAreCapped) {
  StartDblogd({"--bootstrap=false", "--max-pending-handshakes=4"});
  std::this_thread::sleep_for(100ms);  // the start-up probe's connection is closed by then
  std::vector<int> idle;
  for (int i = 0; i < 10; ++i) {
    idle.push_back(OpenIdle(dblogd_->port()));
    std::this_thread::sleep_for(20ms);  // accepted in this order
  }
  std::this_thread::sleep_for(300ms);
  int closed = 0;
  for (int fd : idle) {
    pollfd p{fd, POLLIN, 0};
    char b;
    if (poll(&p, 1, 0) == 1 && recv(fd, &b, 1, MSG_DONTWAIT) == 0) ++closed;
  }
  EXPECT_EQ(closed, 6);
  EXPECT_EQ(MetricValue(dblogd_->Metrics(), "dblog_handshakes_over_limit_total"), 6);
  EXPECT_EQ(CountLogEvents(dblogd_->log(), "consumer_connection_over_limit"), 1);
  for (int fd : idle) close(fd);
  std::this_thread::sleep_for(100ms);
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, Sentinel());
}

// /metrics: unfinished requests are cut off after 5 s, oversized headers get 431, connections
// beyond the cap (16) are closed at once; each counted. Then /metrics answers again.
TEST_F(DblogdTest, MetricsEndpointBoundsUnfinishedRequests) {
  StartDblogd({"--bootstrap=false"});
  const std::uint16_t port = dblogd_->metrics_port();
  const RawReply big = RawExchange(port, "GET /metrics HTTP/1.0\r\nX: " + std::string(9000, 'x'), 3s);
  EXPECT_TRUE(big.closed);
  EXPECT_EQ(big.bytes.rfind("HTTP/1.0 431", 0), 0u) << big.bytes;

  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> slow;
  std::vector<RawReply> slow_replies(16);
  for (int i = 0; i < 16; ++i)
    slow.emplace_back([&, i] { slow_replies[i] = RawExchange(port, "GET /metrics HTTP/1.0\r\n", 9s); });
  std::this_thread::sleep_for(500ms);
  for (int i = 0; i < 3; ++i) {  // over the cap: closed at once, no answer
    const RawReply r = RawExchange(port, "GET /metrics HTTP/1.0\r\n\r\n", 2s);
    EXPECT_TRUE(r.closed);
    EXPECT_EQ(r.bytes, "");
  }
  for (auto& t : slow) t.join();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  for (const auto& r : slow_replies) {
    EXPECT_TRUE(r.closed) << "an unfinished request was not cut off";
    EXPECT_EQ(r.bytes, "");
  }
  EXPECT_GE(elapsed, 4500ms);
  EXPECT_LT(elapsed, 8500ms);

  const std::string metrics = dblogd_->Metrics();
  EXPECT_EQ(MetricValue(metrics, "dblog_metrics_http_refused_total{reason=\"header_too_large\"}"), 1);
  EXPECT_EQ(MetricValue(metrics, "dblog_metrics_http_refused_total{reason=\"connection_limit\"}"), 3);
  EXPECT_EQ(MetricValue(metrics, "dblog_metrics_http_refused_total{reason=\"header_timeout\"}"), 16);
  EXPECT_LE(CountLogEvents(dblogd_->log(), "metrics_connection_refused"), 2);
}

}  // namespace
}  // namespace dblog::test
