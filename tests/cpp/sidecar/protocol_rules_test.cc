// tests/cpp/sidecar/protocol_rules_test.cc: the rules a consumer relies on (docs/protocol.md,
// "Rules a consumer relies on"), each checked end to end against the real dblogd and cluster
// through the real client library: when a consumer is caught up, Heartbeat.position before
// anything was sent, acking exactly resume_after, resuming inside a transaction (and inside a
// repair chunk's transaction), what BootstrapBegin.restarted and .tables say, a Truncate's
// Relations, and the bounds of range chunks.
#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "client/position.h"
#include "dblogd_fixture.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;
using dblog::v1::StreamEvent;

class ProtocolRulesTest : public DblogdTest {
 protected:
  std::string T(const std::string& table) const { return schema() + "." + table; }

  // Connect, retrying while dblogd still ends the previous connection or its walsender still
  // holds the slot.
  client::Client ConnectRetrying(std::optional<dblog::v1::Position> resume_after = std::nullopt) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      try {
        return Connect(resume_after);
      } catch (const client::ServerError& e) {
        const bool busy = e.code() == dblog::v1::Error::ALREADY_CONNECTED ||
                          e.server_message().find("in use") != std::string::npos;
        if (std::chrono::steady_clock::now() > deadline || !busy) throw;
        std::this_thread::sleep_for(100ms);
      }
    }
  }

  // Reads items until `done(item)` says so; returns every StreamEvent read (the last item
  // included when it is one). Acks nothing. Fails the test after `timeout`.
  std::vector<StreamEvent> ReadEvents(client::Client& c,
                                      const std::function<bool(const client::Item&)>& done,
                                      std::chrono::seconds timeout = 60s) {
    std::vector<StreamEvent> events;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    client::Item item;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!c.Next(item)) {
        ADD_FAILURE() << "the server closed the stream";
        return events;
      }
      if (auto* ev = std::get_if<StreamEvent>(&item)) events.push_back(*ev);
      if (done(item)) return events;
    }
    ADD_FAILURE() << "timed out reading the stream";
    return events;
  }

  static bool IsCommitAt(const client::Item& item, std::uint64_t lsn) {
    const auto* ev = std::get_if<StreamEvent>(&item);
    return ev && ev->has_commit() && ev->commit().commit_lsn() >= lsn;
  }

  static std::string Pos(const dblog::v1::Position& p) {
    return client::FormatPosition(p);
  }
};

std::optional<dblog::v1::Position> PositionOf(const StreamEvent& ev) {
  return client::Client::PositionOf(ev);
}

// ---- 1. Caught up --------------------------------------------------------------------------

// The rule to wait on: read X = pg_current_wal_lsn() on the source after the commits you care
// about, then read the stream until Client::CaughtUp(X): at that moment every transaction the
// source committed before X (in scope) has been received. Under a stream of in-scope commits
// it is an event of a later transaction (or a Commit's end_lsn); on a quiet stream, a
// heartbeat's source_lsn; after a bootstrap, its consistent point.
TEST_F(ProtocolRulesTest, CaughtUpOnceTheStreamPassesTheSourcesWalPosition) {
  db().exec("CREATE TABLE " + T("t") + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + T("t") + " VALUES (0, 'before')");
  db().exec("DROP SCHEMA IF EXISTS " + schema() + "_out CASCADE");
  db().exec("CREATE SCHEMA " + schema() + "_out");
  db().exec("CREATE TABLE " + schema() + "_out.o (id int PRIMARY KEY)");
  StartDblogd();
  client::Client c = Connect();
  EXPECT_EQ(c.received_through(), 0u);
  std::uint64_t consistent_point = 0;
  ReadEvents(c, [&](const client::Item& i) {
    const auto* ev = std::get_if<StreamEvent>(&i);
    if (ev && ev->has_bootstrap_begin()) consistent_point = ev->bootstrap_begin().consistent_point();
    // the copy is not complete before BootstrapEnd, whatever arrives meanwhile
    if (ev && ev->has_bootstrap_end()) return true;
    EXPECT_EQ(c.received_through(), 0u);
    return false;
  });
  EXPECT_EQ(c.received_through(), consistent_point);
  EXPECT_TRUE(c.CaughtUp(consistent_point));

  // a writer commits in-scope transactions as fast as it can; each time the consumer is caught
  // up with the WAL position read after the writer's n-th commit, it holds all n of them
  std::atomic<int> committed{0};
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    PgConn w(conninfo());
    for (int i = 1; i <= 300 && !stop; ++i) {
      w.exec("INSERT INTO " + T("t") + " VALUES (" + std::to_string(i) + ", 'v')");
      committed = i;
      std::this_thread::sleep_for(1ms);
    }
  });
  int checks = 0;
  std::set<std::int64_t> received;
  for (bool last = false; !last && !HasFailure();) {
    last = committed == 300;  // one more check once everything is committed
    const int n = committed;
    const std::uint64_t x = common::ParseLsn(db().scalar("SELECT pg_current_wal_lsn()"));
    client::Item item;
    while (!c.CaughtUp(x)) {
      ASSERT_TRUE(c.Next(item));
      if (const auto* ev = std::get_if<StreamEvent>(&item); ev && ev->has_change())
        received.insert(ev->change().new_row().values(0).int_value());
    }
    for (int i = 1; i <= n; ++i) ASSERT_TRUE(received.count(i)) << i << " of " << n;
    ++checks;
  }
  stop = true;
  writer.join();
  EXPECT_GT(checks, 1);

  // a quiet stream (only out-of-scope writes): the heartbeat's source_lsn catches it up
  db().exec("INSERT INTO " + schema() + "_out.o VALUES (1)");
  const std::uint64_t x = common::ParseLsn(db().scalar("SELECT pg_current_wal_lsn()"));
  bool heartbeat = false;
  ReadEvents(c, [&](const client::Item& i) {
    heartbeat |= std::holds_alternative<dblog::v1::Heartbeat>(i);
    return c.CaughtUp(x);
  }, 30s);
  EXPECT_TRUE(c.CaughtUp(x));
  db().exec("DROP SCHEMA " + schema() + "_out CASCADE");
}

// Heartbeat.source_lsn is this connection's: during a bootstrap it is 0 (the stream has not
// started and the copy is not complete), even when an earlier connection of the same consumer
// had read the source far beyond the new consistent point.
TEST_F(ProtocolRulesTest, HeartbeatsDuringABootstrapClaimNothing) {
  db().exec("CREATE TABLE " + T("t") + " (id int PRIMARY KEY, v text)");
  StartDblogd({"--max-buffer-mb=1"});
  {
    client::Client c = Connect();
    Replay replay;
    ReadUntil(c, replay, 0);
    Sentinel();
    ReadEvents(c, [](const client::Item& i) {
      const auto* hb = std::get_if<dblog::v1::Heartbeat>(&i);
      return hb && hb->source_lsn() > 0;
    });
  }
  db().exec("INSERT INTO " + T("t") + " SELECT g, repeat('x', 200) FROM generate_series(1, 200000) g");
  // the slot is lost: the next connection bootstraps again
  for (int i = 0; i < 100; ++i) {
    try {
      db().exec("SELECT pg_drop_replication_slot('" + Slot() + "')");
      break;
    } catch (const PgError&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  client::Client c = ConnectRetrying();
  std::this_thread::sleep_for(2s);  // not reading: the copy stalls on the full buffer
  int heartbeats = 0;
  std::uint64_t consistent_point = 0;
  ReadEvents(c, [&](const client::Item& i) {
    if (const auto* hb = std::get_if<dblog::v1::Heartbeat>(&i)) {
      ++heartbeats;
      EXPECT_EQ(hb->source_lsn(), 0u);
    }
    const auto* ev = std::get_if<StreamEvent>(&i);
    if (ev && ev->has_bootstrap_begin()) consistent_point = ev->bootstrap_begin().consistent_point();
    if (ev && ev->has_bootstrap_end()) return true;
    EXPECT_EQ(c.received_through(), 0u);
    return false;
  }, 120s);
  EXPECT_GT(heartbeats, 0) << "no heartbeat arrived during the bootstrap: the test proves nothing";
  EXPECT_EQ(c.received_through(), consistent_point);
}

// ---- 2. and 3. Heartbeat.position before anything was sent; acking resume_after ----------

TEST_F(ProtocolRulesTest, HeartbeatBeforeAnythingIsSentCarriesTheResumePointWhichMayBeAcked) {
  db().exec("CREATE TABLE " + T("t") + " (id int PRIMARY KEY, v text)");
  StartDblogd();
  dblog::v1::Position resume;
  {
    client::Client c = Connect();
    Replay replay;
    ReadUntil(c, replay, 0);
    db().exec("INSERT INTO " + T("t") + " VALUES (1, 'one')");
    ReadUntil(c, replay, Sentinel());
    resume = *replay.last_position();
  }
  {
    // with resume_after: the heartbeat carries it until something is sent; acking it (an ack
    // equal to resume_after) is allowed, repeatedly
    client::Client c = ConnectRetrying(resume);
    client::Item item;
    ASSERT_TRUE(c.Next(item));
    const auto* hb = std::get_if<dblog::v1::Heartbeat>(&item);
    ASSERT_NE(hb, nullptr) << "nothing new was committed: the first item is a heartbeat";
    ASSERT_TRUE(hb->has_position());
    EXPECT_EQ(Pos(hb->position()), Pos(resume));
    c.Ack(resume);
    c.Ack(hb->position());
    ASSERT_TRUE(c.Next(item));
    ASSERT_TRUE(std::holds_alternative<dblog::v1::Heartbeat>(item));
    EXPECT_EQ(Pos(std::get<dblog::v1::Heartbeat>(item).position()), Pos(resume));
    // and the stream goes on
    db().exec("INSERT INTO " + T("t") + " VALUES (2, 'two')");
    Replay replay;
    ReadUntil(c, replay, Sentinel());
  }
  {
    // without resume_after, on a slot at rest: nothing to acknowledge, no position
    client::Client c = ConnectRetrying();
    client::Item item;
    ASSERT_TRUE(c.Next(item));
    const auto* hb = std::get_if<dblog::v1::Heartbeat>(&item);
    ASSERT_NE(hb, nullptr);
    EXPECT_FALSE(hb->has_position());
  }
}

// ---- 4. Resuming inside a transaction ------------------------------------------------------

// A consumer that acknowledged a position inside a transaction and resumes after it gets that
// transaction's Begin first (at its own position, (commit_lsn, 0), at or before the resume
// point: the one event ever sent at or before resume_after), then the transaction's events after
// the resume point, byte for byte as the first connection got them.
TEST_F(ProtocolRulesTest, ResumeInsideATransactionStartsWithItsBeginThenTheRest) {
  db().exec("CREATE TABLE " + T("t") + " (id int PRIMARY KEY, v text)");
  StartDblogd();
  std::vector<StreamEvent> first;
  dblog::v1::Position inside;
  {
    client::Client c = Connect();
    Replay replay;
    ReadUntil(c, replay, 0);  // the bootstrap, acknowledged
    db().exec("INSERT INTO " + T("t") + " SELECT g, 'v' || g FROM generate_series(1, 5) g");
    const std::uint64_t lsn = Sentinel();
    std::vector<StreamEvent> all =
        ReadEvents(c, [&](const client::Item& i) { return IsCommitAt(i, 0); });
    for (const auto& ev : all)
      if (!ev.has_relation()) first.push_back(ev);
    ASSERT_EQ(first.size(), 7u);  // Begin, 5 inserts, Commit
    ASSERT_TRUE(first[0].has_begin());
    inside = *PositionOf(first[2]);  // the second insert
    ASSERT_EQ(inside.seq(), 2u);
    c.Ack(inside);  // allowed: any position sent
    (void)lsn;
  }
  client::Client c = ConnectRetrying(inside);
  std::vector<StreamEvent> again;
  for (const auto& ev :
       ReadEvents(c, [&](const client::Item& i) { return IsCommitAt(i, inside.commit_lsn()); }))
    if (!ev.has_relation()) again.push_back(ev);
  ASSERT_EQ(again.size(), 5u);  // Begin, inserts 3..5, Commit
  EXPECT_TRUE(again[0].has_begin());
  EXPECT_EQ(again[0].SerializeAsString(), first[0].SerializeAsString());
  for (std::size_t i = 1; i < again.size(); ++i)
    EXPECT_EQ(again[i].SerializeAsString(), first[i + 2].SerializeAsString()) << i;
  // the Begin is at or before the resume point: it may not be acknowledged; what follows may
  EXPECT_EQ(Pos(*PositionOf(again[0])), client::FormatPosition(
                                            client::MakePosition(inside.commit_lsn(), 0)));
  c.Ack(*PositionOf(again.back()));
  EXPECT_NO_THROW(ReadEvents(c, [](const client::Item& i) {
    return std::holds_alternative<dblog::v1::Heartbeat>(i);
  }));
}


// A repair chunk sits in its high watermark's transaction, and is never sent again: a
// reconnect decodes that transaction without it (the window is gone), so it comes as Begin +
// Commit, the Commit at seq 1 instead of after the chunk: positions differ from the first
// sending. A consumer that resumes inside it gets nothing of it (every event left is at or
// before the resume point), and the chunk again in a later transaction: the request redoes
// every chunk whose transaction's Commit was not acknowledged.
TEST_F(ProtocolRulesTest, ResumeInsideARepairChunkGetsNoneOfItsTransactionAndTheChunkAgain) {
  db().exec("CREATE TABLE " + T("r") + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + T("r") + " SELECT g, 'v' || g FROM generate_series(1, 3) g");
  StartDblogd();
  std::uint64_t chunk_lsn = 0;
  dblog::v1::Position inside;
  std::string request;
  {
    client::Client c = Connect();
    Replay replay;
    ReadUntil(c, replay, 0);
    request = db().scalar("SELECT dblog.repair('" + T("r") + "')");
    std::vector<StreamEvent> events;
    for (const auto& ev : ReadEvents(c, [&](const client::Item& i) {
           const auto* ev = std::get_if<StreamEvent>(&i);
           if (ev && ev->has_chunk_begin()) chunk_lsn = ev->chunk_begin().commit_lsn();
           return ev && ev->has_commit() && chunk_lsn != 0 && ev->commit().commit_lsn() == chunk_lsn;
         })) {
      if (chunk_lsn != 0 && PositionOf(ev) && PositionOf(ev)->commit_lsn() == chunk_lsn)
        events.push_back(ev);
    }
    // Begin, ChunkBegin, 3 rows, ChunkEnd, Commit: the transaction holds nothing else
    ASSERT_EQ(events.size(), 7u);
    EXPECT_TRUE(events[0].has_begin());
    EXPECT_TRUE(events[1].has_chunk_begin());
    EXPECT_TRUE(events[5].has_chunk_end());
    ASSERT_TRUE(events[6].has_commit());
    EXPECT_EQ(events[6].commit().seq(), 6u);
    inside = *PositionOf(events[2]);  // the chunk's first row
    c.Ack(inside);
  }
  EXPECT_EQ(db().scalar("SELECT state FROM dblog.requests WHERE id = " + request), "queued");
  {
    // at-least-once (no resume_after): the transaction again, without its chunk
    client::Client c = ConnectRetrying();
    std::vector<StreamEvent> again;
    for (const auto& ev : ReadEvents(c, [&](const client::Item& i) { return IsCommitAt(i, chunk_lsn); }))
      if (PositionOf(ev) && PositionOf(ev)->commit_lsn() == chunk_lsn) again.push_back(ev);
    ASSERT_EQ(again.size(), 2u);
    EXPECT_TRUE(again[0].has_begin());
    ASSERT_TRUE(again[1].has_commit());
    EXPECT_EQ(again[1].commit().seq(), 1u);
  }
  // resuming inside the chunk: nothing of its transaction, the chunk again later, complete
  client::Client c = ConnectRetrying(inside);
  bool saw_old = false, last = false;
  std::uint32_t rows = 0;
  std::uint64_t redone_at = 0;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  client::Item item;
  while (!last && std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(c.Next(item));
    const auto* ev = std::get_if<StreamEvent>(&item);
    if (!ev) continue;
    if (PositionOf(*ev) && PositionOf(*ev)->commit_lsn() == chunk_lsn) saw_old = true;
    if (ev->has_chunk_begin()) {
      EXPECT_EQ(std::to_string(ev->chunk_begin().request_id()), request);
      EXPECT_EQ(ev->chunk_begin().chunk(), 1u);
      redone_at = ev->chunk_begin().commit_lsn();
    }
    if (ev->has_change() && ev->change().kind() == dblog::v1::Change::READ) ++rows;
    if (ev->has_chunk_end()) last = ev->chunk_end().last();
    if (ev->has_commit()) c.Ack(*PositionOf(*ev));
  }
  EXPECT_FALSE(saw_old);
  EXPECT_TRUE(last);
  EXPECT_GT(redone_at, chunk_lsn);
  EXPECT_EQ(rows, 3u);
  ReadEvents(c, [&](const client::Item& i) { return IsCommitAt(i, redone_at); }, 60s);
  Replay replay;
  const auto done_deadline = std::chrono::steady_clock::now() + 30s;
  while (db().scalar("SELECT state FROM dblog.requests WHERE id = " + request) != "done" &&
         std::chrono::steady_clock::now() < done_deadline) {
    ReadUntil(c, replay, Sentinel());
  }
  EXPECT_EQ(db().scalar("SELECT state FROM dblog.requests WHERE id = " + request), "done");
}


// ---- 5. BootstrapBegin: restarted and tables --------------------------------------------

// BootstrapBegin.tables lists every table in the consumer's scope at the consistent point,
// empty ones too: the bootstrap is a complete image of exactly those. restarted says whether
// dblogd knows of an earlier stream of this consumer (dblog.consumers): an unfinished
// bootstrap, or a slot that was lost. A bootstrap ignores Hello.resume_after.
TEST_F(ProtocolRulesTest, BootstrapBeginListsEveryTableInScopeAndSaysWhetherAnEarlierStreamExisted) {
  db().exec("CREATE TABLE " + T("a") + " (id int PRIMARY KEY)");
  db().exec("INSERT INTO " + T("a") + " VALUES (1), (2)");
  db().exec("CREATE TABLE " + T("b") + " (id int PRIMARY KEY)");
  StartDblogd();
  const auto bootstrap = [&](client::Client& c) {
    dblog::v1::BootstrapBegin begin;
    ReadEvents(c, [&](const client::Item& i) {
      const auto* ev = std::get_if<StreamEvent>(&i);
      if (ev && ev->has_bootstrap_begin()) begin = ev->bootstrap_begin();
      if (ev && ev->has_bootstrap_end()) c.Ack(*PositionOf(*ev));
      return ev && ev->has_bootstrap_end();
    });
    std::set<std::string> tables;
    for (const auto& t : begin.tables()) tables.insert(t.schema() + "." + t.name());
    return std::make_pair(begin.restarted(), tables);
  };
  const auto drop_slot = [&] {
    for (int i = 0; i < 100; ++i) {
      try {
        db().exec("SELECT pg_drop_replication_slot('" + Slot() + "')");
        return;
      } catch (const PgError&) {
        std::this_thread::sleep_for(100ms);
      }
    }
    FAIL() << "the slot stayed in use";
  };
  dblog::v1::Position old;
  {
    client::Client c = Connect();
    EXPECT_TRUE(c.welcome().slot_created());
    const auto [restarted, tables] = bootstrap(c);
    EXPECT_FALSE(restarted);
    EXPECT_EQ(tables, (std::set<std::string>{T("a"), T("b"), T("sentinel")}));
    Replay replay;
    ReadUntil(c, replay, Sentinel());
    old = *replay.last_position();
  }
  // the slot is lost (dropped; invalidated or a failover alike): a new image, restarted
  drop_slot();
  db().exec("CREATE TABLE " + T("c") + " (id int PRIMARY KEY)");
  {
    client::Client c = ConnectRetrying(old);  // resume_after is ignored by a bootstrap
    EXPECT_TRUE(c.welcome().slot_created());
    EXPECT_FALSE(c.welcome().has_resume_from());
    const auto [restarted, tables] = bootstrap(c);
    EXPECT_TRUE(restarted);
    EXPECT_EQ(tables, (std::set<std::string>{T("a"), T("b"), T("c"), T("sentinel")}));
  }
  // the source forgot the consumer altogether: restarted is false, though the sink has data
  drop_slot();
  db().exec("DELETE FROM dblog.consumers WHERE name = '" + consumer() + "'");
  client::Client c = ConnectRetrying();
  EXPECT_FALSE(bootstrap(c).first);
}

// ---- 6. A Truncate's Relations ------------------------------------------------------------

// Every table a Truncate names has had its Relation sent on this connection before the
// Truncate, even when nothing else of it was (a connection resumed after everything, so no
// Relation at all so far), and only once.
TEST_F(ProtocolRulesTest, TruncateComesAfterTheRelationOfEveryTableItNames) {
  for (const std::string t : {"a", "b", "c"}) {
    db().exec("CREATE TABLE " + T(t) + " (id int PRIMARY KEY)");
    db().exec("INSERT INTO " + T(t) + " VALUES (1)");
  }
  StartDblogd();
  dblog::v1::Position resume;
  {
    client::Client c = Connect();
    Replay replay;
    ReadUntil(c, replay, Sentinel());
    resume = *replay.last_position();
  }
  client::Client c = ConnectRetrying(resume);
  db().exec("INSERT INTO " + T("c") + " VALUES (2)");  // c's Relation goes out with this
  db().exec("TRUNCATE " + T("a") + ", " + T("b") + ", " + T("c"));
  const std::uint64_t lsn = Sentinel();
  std::vector<std::uint32_t> relations;
  bool truncated = false;
  const std::set<std::uint32_t> named = {TableOid(db(), T("a")), TableOid(db(), T("b")),
                                         TableOid(db(), T("c"))};
  for (const auto& ev : ReadEvents(c, [&](const client::Item& i) { return IsCommitAt(i, lsn); })) {
    if (ev.has_relation() && !truncated) relations.push_back(ev.relation().oid());
    if (ev.has_truncate()) {
      truncated = true;
      const std::set<std::uint32_t> oids(ev.truncate().relation_oids().begin(),
                                         ev.truncate().relation_oids().end());
      EXPECT_EQ(oids, named);
      for (std::uint32_t oid : oids)
        EXPECT_EQ(std::count(relations.begin(), relations.end(), oid), 1) << oid;
    }
  }
  EXPECT_TRUE(truncated);
}


// ---- 7. Range chunks: whole-key bounds, and the order to compare them in -----------------

// A range chunk's bounds are whole keys (one value per key column, never NULL, never a
// prefix), and ChunkBegin.key_collations says per key column how the source orders it.
TEST_F(ProtocolRulesTest, RangeChunksHaveWholeKeyBoundsAndTheKeyColumnsCollations) {
  db().exec("CREATE TABLE " + T("k") + " (w text COLLATE \"und-x-icu\", n int, c text COLLATE \"C\","
            " d text, v int, PRIMARY KEY (w, n, c, d))");
  db().exec("INSERT INTO " + T("k") + " SELECT 'w' || g % 3, g, 'c', 'd', g FROM generate_series(1, 7) g");
  StartDblogd({"--chunk-size=3"});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  const std::string datcollate =
      db().scalar("SELECT datcollate FROM pg_database WHERE datname = current_database()");
  const std::string id = db().scalar("SELECT dblog.repair_range('" + T("k") +
                                     "', '{\"w\": \"w0\", \"n\": 0, \"c\": \"\", \"d\": \"\"}', NULL)");
  int chunks = 0;
  bool last = false;
  while (!last && !HasFailure()) {
    ReadEvents(c, [&](const client::Item& i) -> bool {
      const auto* ev = std::get_if<StreamEvent>(&i);
      if (ev && ev->has_chunk_begin()) {
        const auto& b = ev->chunk_begin();
        ++chunks;
        EXPECT_TRUE(b.is_range());
        EXPECT_EQ(b.key_collations_size(), 4);
        if (b.key_collations_size() != 4) return true;
        EXPECT_EQ(b.key_collations(0), "icu:und");
        EXPECT_EQ(b.key_collations(1), "");
        EXPECT_EQ(b.key_collations(2), "libc:C");
        EXPECT_EQ(b.key_collations(3), "libc:" + datcollate);  // the database's default
        EXPECT_TRUE(b.has_from_key());  // the request's lower bound, then the last chunk's end
        EXPECT_EQ(b.from_key().values_size(), 4);
        if (b.has_to_key()) {
          EXPECT_EQ(b.to_key().values_size(), 4);
        }
        for (const auto* bound : {&b.from_key(), &b.to_key()})
          for (const auto& v : bound->values())
            EXPECT_NE(v.kind_case(), dblog::v1::Value::kNullValue);
      }
      if (ev && ev->has_chunk_end()) last = ev->chunk_end().last();
      if (ev && ev->has_commit()) c.Ack(*PositionOf(*ev));
      return ev && ev->has_chunk_end();
    });
  }
  EXPECT_EQ(chunks, 3);  // 7 rows, 3 per chunk
}

// A range request whose bounds no longer name every key column (the table's key changed after
// the request was made) fails with an explanation, rather than compare against NULLs.
TEST_F(ProtocolRulesTest, ARangeRequestWhoseKeyChangedFailsWithAnExplanation) {
  db().exec("CREATE TABLE " + T("k") + " (a int, b int NOT NULL, PRIMARY KEY (a))");
  db().exec("INSERT INTO " + T("k") + " SELECT g, g FROM generate_series(1, 5) g");
  StartDblogd();
  {
    client::Client c = Connect();
    Replay replay;
    ReadUntil(c, replay, 0);
  }
  const std::string id =
      db().scalar("SELECT dblog.repair_range('" + T("k") + "', '{\"a\": 2}', '{\"a\": 4}')");
  db().exec("ALTER TABLE " + T("k") + " DROP CONSTRAINT k_pkey, ADD PRIMARY KEY (a, b)");
  client::Client c = ConnectRetrying();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  Replay replay;
  while (db().scalar("SELECT state FROM dblog.requests WHERE id = " + id) != "failed") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << dblogd_->log();
    ReadUntil(c, replay, Sentinel());
  }
  EXPECT_NE(db().scalar("SELECT error FROM dblog.requests WHERE id = " + id)
                .find("does not name every column of the table's identity key"),
            std::string::npos);
}

}  // namespace
}  // namespace dblog::test
