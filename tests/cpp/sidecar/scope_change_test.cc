// tests/cpp/sidecar/scope_change_test.cc: tables entering a consumer's scope by DDL (extension
// 0.4's event trigger, consumer/scope_changes.h) are copied through repair windows: a rename,
// a SET SCHEMA and a schema rename bring tables with rows into the scope while the consumer
// streams, and while dblogd is stopped; the consumer ends up with every row. A keyless table
// entering ends the session with SCOPE_ERROR instead of diverging silently.
#include "dblogd_fixture.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;

class ScopeChangeTest : public DblogdTest {
 protected:
  // Tables outside the consumer's scope with rows, and one inside: `<s>.in_live` (in scope),
  // `<s>.out_a` (renamed in), `<s>_x.in_b` (moved in), `<s>_old.c` (its schema renamed in),
  // `<s>.in_u` (unlogged: never captured until SET LOGGED).
  void CreateTables() {
    const std::string s = schema();
    db().exec("DROP SCHEMA IF EXISTS " + s + "_x, " + s + "_old, " + s + "_moved CASCADE");
    db().exec("CREATE SCHEMA " + s + "_x");
    db().exec("CREATE SCHEMA " + s + "_old");
    for (const std::string& t : {s + ".in_live", s + ".out_a", s + "_x.in_b", s + "_old.c"}) {
      db().exec("CREATE TABLE " + t + " (id int PRIMARY KEY, v text)");
      db().exec("INSERT INTO " + t + " SELECT g, 'before' FROM generate_series(1, 300) g");
    }
    db().exec("CREATE UNLOGGED TABLE " + s + ".in_u (id int PRIMARY KEY, v text)");
    db().exec("INSERT INTO " + s + ".in_u SELECT g, 'before' FROM generate_series(1, 300) g");
  }
  void DropSchemas() {
    const std::string s = schema();
    db().exec("DROP SCHEMA IF EXISTS " + s + "_x, " + s + "_old, " + s + "_moved CASCADE");
  }
  std::string Scope() {
    const std::string s = schema();
    return "--consumer=" + consumer() + "=" + s + ".in_*," + s + ".sentinel," + s + "_moved.*";
  }
  void MoveTablesIn() {
    const std::string s = schema();
    db().exec("ALTER TABLE " + s + ".out_a RENAME TO in_a");
    db().exec("ALTER TABLE " + s + "_x.in_b SET SCHEMA " + s);
    db().exec("ALTER SCHEMA " + s + "_old RENAME TO " + s + "_moved");
    db().exec("ALTER TABLE " + s + ".in_u SET LOGGED");
  }
  // Writes to the moved tables after the DDL: the log carries them, the copy must agree.
  void WriteAfter() {
    const std::string s = schema();
    for (const std::string& t :
         {s + ".in_a", s + ".in_b", s + "_moved.c", s + ".in_u", s + ".in_live"}) {
      db().exec("UPDATE " + t + " SET v = 'after' WHERE id % 7 = 0");
      db().exec("DELETE FROM " + t + " WHERE id % 11 = 0");
      db().exec("INSERT INTO " + t + " SELECT g, 'new' FROM generate_series(301, 320) g");
    }
  }
  int DoneRequests() {
    return std::stoi(db().scalar("SELECT count(*) FROM dblog.requests WHERE consumer = '" +
                                 consumer() + "' AND kind = 'table' AND state = 'done'"));
  }
  // Streams (acking) until `n` whole-table requests of this consumer are done.
  void StreamUntilCopied(client::Client& c, Replay& replay, int n) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (DoneRequests() < n) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "the tables that entered the scope were not copied";
      ReadUntil(c, replay, Sentinel());
    }
    ReadUntil(c, replay, Sentinel());
  }
  void ExpectEveryRow(const Replay& replay) {
    ExpectConverged(replay, {"in_live", "in_a", "in_b", "in_u"});
    const std::string moved = schema() + "_moved.c";
    const auto source = SourceTable(db(), moved);
    EXPECT_EQ(source.size(), 300u - 27u + 20u);
    EXPECT_EQ(replay.Table(TableOid(db(), moved)), source) << moved;
  }
};

TEST_F(ScopeChangeTest, TablesMovedIntoTheScopeWhileStreamingAreCopied) {
  CreateTables();
  OnScopeExit drop([&] { DropSchemas(); });
  StartDblogd({Scope(), "--chunk-size=100"});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  EXPECT_TRUE(replay.Table(TableOid(db(), schema() + ".out_a")).empty());
  EXPECT_TRUE(replay.Table(TableOid(db(), schema() + ".in_u")).empty());
  MoveTablesIn();
  WriteAfter();
  StreamUntilCopied(c, replay, 4);
  ExpectEveryRow(replay);
  // one copy each, queued for this consumer only
  EXPECT_EQ(db().scalar("SELECT count(*) FROM dblog.request_queue WHERE consumer = '" +
                        consumer() + "'"),
            "4");
  EXPECT_EQ(CountLogEvents(dblogd_->log(), "scope_table_entered"), 4);
  // a rename inside the scope, or out of it, copies nothing
  db().exec("ALTER TABLE " + schema() + ".in_a RENAME TO in_a2");
  db().exec("ALTER TABLE " + schema() + ".in_live RENAME TO gone_live");
  ReadUntil(c, replay, Sentinel());
  EXPECT_EQ(db().scalar("SELECT count(*) FROM dblog.request_queue WHERE consumer = '" +
                        consumer() + "'"),
            "4");
}

TEST_F(ScopeChangeTest, TablesMovedIntoTheScopeWhileDblogdIsStoppedAreCopied) {
  CreateTables();
  OnScopeExit drop([&] { DropSchemas(); });
  StartDblogd({Scope(), "--chunk-size=100"});
  Replay replay;
  {
    client::Client c = Connect();
    ReadUntil(c, replay, 0);
    ReadUntil(c, replay, Sentinel());
  }
  dblogd_->Stop();
  MoveTablesIn();
  WriteAfter();
  StartDblogd({Scope(), "--chunk-size=100"});
  client::Client c = Connect(replay.last_position());
  EXPECT_FALSE(c.welcome().slot_created());
  StreamUntilCopied(c, replay, 4);
  EXPECT_FALSE(replay.restarted_seen());
  ExpectEveryRow(replay);
}

// Issue 28: a table renamed into the scope and out again while dblogd is stopped. When dblogd
// reads the first rename it is out of the scope by now (copy: out_of_scope_now), so nothing is
// copied, yet the plugin streamed what was written to it under its in-scope name: the consumer
// holds some of its rows, stale. That is what a consumer holds of a table out of its scope
// (docs/operations.md: "what the consumer holds of it stays"), never wrong for a table in it:
// renamed into the scope again, the table is copied, and the replay equals it, the stale rows
// (one deleted at the source after the table left) gone.
TEST_F(ScopeChangeTest, ATableRenamedInAndOutWhileDblogdIsStoppedIsWholeWhenItComesBack) {
  const std::string s = schema();
  db().exec("CREATE TABLE " + s + ".out_p (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + s + ".out_p SELECT g, 'before' FROM generate_series(1, 200) g");
  StartDblogd({Scope(), "--chunk-size=50"});
  Replay replay;
  {
    client::Client c = Connect();
    ReadUntil(c, replay, 0);
    ReadUntil(c, replay, Sentinel());
  }
  const std::uint32_t oid = TableOid(db(), s + ".out_p");
  dblogd_->Stop();
  db().exec("ALTER TABLE " + s + ".out_p RENAME TO in_p");
  db().exec("UPDATE " + s + ".in_p SET v = 'while in' WHERE id <= 10");
  db().exec("ALTER TABLE " + s + ".in_p RENAME TO out_p2");
  db().exec("DELETE FROM " + s + ".out_p2 WHERE id = 1");
  StartDblogd({Scope(), "--chunk-size=50"});
  client::Client c = Connect(replay.last_position());
  ReadUntil(c, replay, Sentinel());
  EXPECT_EQ(replay.Table(oid).size(), 10u) << "the rows written while it was in the scope";
  EXPECT_NE(dblogd_->log().find("copy=out_of_scope_now"), std::string::npos) << dblogd_->log();
  EXPECT_EQ(DoneRequests(), 0);

  db().exec("ALTER TABLE " + s + ".out_p2 RENAME TO in_p");
  StreamUntilCopied(c, replay, 1);
  ExpectConverged(replay, {"in_p"});
  EXPECT_EQ(replay.Table(oid).size(), 199u);
}

// Findings 2 and 3: one transaction renames a table into the scope and repeats the trigger's
// message 2,000 times (the copies say what the DDL did, so the plugin passes them), and another
// sends 1,000 forgeries naming a temporary table it created (which the plugin drops). One copy
// is queued, one line logged, and the stream does not stall on per-message SQL.
TEST_F(ScopeChangeTest, ManyMessagesInOneTransactionQueueOneCopyAndLogOneLine) {
  const std::string s = schema();
  db().exec("CREATE TABLE " + s + ".out_many (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + s + ".out_many SELECT g, 'before' FROM generate_series(1, 50) g");
  StartDblogd({Scope()});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  const std::string oid = std::to_string(TableOid(db(), s + ".out_many"));
  db().exec("BEGIN");
  db().exec("ALTER TABLE " + s + ".out_many RENAME TO in_many");
  db().exec("SELECT pg_logical_emit_message(true, 'dblog.ddl', format("
            "'{\"oid\":%s,\"kind\":\"rename\",\"old_schema\":%s,\"old_name\":\"out_many\","
            "\"new_schema\":%s,\"new_name\":\"in_many\"}', " + oid + ", to_json('" + s +
            "'::text), to_json('" + s + "'::text))) FROM generate_series(1, 2000)");
  db().exec("COMMIT");
  db().exec("BEGIN");
  db().exec("CREATE TEMP TABLE in_tmp (id int PRIMARY KEY)");
  db().exec("SELECT pg_logical_emit_message(true, 'dblog.ddl', format("
            "'{\"oid\":%s,\"kind\":\"rename\",\"old_schema\":\"x\",\"old_name\":\"y\","
            "\"new_schema\":%s,\"new_name\":\"in_tmp\"}', 'in_tmp'::regclass::oid,"
            " to_json('" + s + "'::text))) FROM generate_series(1, 1000)");
  db().exec("COMMIT");
  const auto start = std::chrono::steady_clock::now();
  ReadUntil(c, replay, Sentinel());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s) << "the stream stalled";
  EXPECT_EQ(db().scalar("SELECT count(*) FROM dblog.request_queue WHERE consumer = '" +
                        consumer() + "'"),
            "1");
  EXPECT_EQ(CountLogEvents(dblogd_->log(), "scope_table_entered"), 1) << dblogd_->log();
  StreamUntilCopied(c, replay, 1);
  ExpectConverged(replay, {"in_many"});
}

TEST_F(ScopeChangeTest, AKeylessTableEnteringEndsTheSessionWithAScopeError) {
  db().exec("CREATE TABLE " + schema() + ".out_k (id int, v text)");
  db().exec("INSERT INTO " + schema() + ".out_k VALUES (1, 'x')");
  StartDblogd({Scope()});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  db().exec("ALTER TABLE " + schema() + ".out_k RENAME TO in_k");
  try {
    ReadUntil(c, replay, Sentinel());
    ADD_FAILURE() << "the stream went on past a keyless table entering the scope";
  } catch (const client::ServerError& e) {
    EXPECT_EQ(e.code(), dblog::v1::Error::SCOPE_ERROR) << e.what();
    EXPECT_NE(std::string(e.what()).find("in_k"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("no primary key"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dblog::test
