// tests/cpp/sidecar/security_test.cc: dblogd against a hostile or unlucky source, end to end:
// columns named like the aliases of dblogd's queries, a table owner's domain CHECK and an
// operator planted in public (neither may run as dblogd), and row-level security (refused by
// name, never a partial copy or a repair that deletes what the policy hid).
#include <thread>

#include "dblogd_fixture.h"

namespace dblog::test {
namespace {

using dblog::v1::Error;
using namespace std::chrono_literals;

class SecurityTest : public DblogdTest {
 protected:
  std::uint64_t Request(const std::string& call) {
    return std::stoull(db().scalar("SELECT " + call));
  }
  std::string State(std::uint64_t id) {
    return db().scalar("SELECT state FROM dblog.requests WHERE id = " + std::to_string(id));
  }
  // Streams (acking) until every listed request reached a final state; returns the states.
  std::vector<std::string> StreamUntilFinished(client::Client& c, Replay& replay,
                                               const std::vector<std::uint64_t>& ids) {
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    for (;;) {
      ReadUntil(c, replay, Sentinel());
      std::vector<std::string> states;
      bool all = true;
      for (auto id : ids) {
        states.push_back(State(id));
        all = all && (states.back() == "done" || states.back() == "failed");
      }
      if (all) return states;
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "requests did not finish";
        return states;
      }
      std::this_thread::sleep_for(50ms);
    }
  }
  // Reads until the server closes with an Error; returns its message.
  std::string Refused() {
    try {
      client::Client c = Connect();
      client::Item item;
      while (c.Next(item)) EXPECT_FALSE(std::holds_alternative<dblog::v1::StreamEvent>(item));
    } catch (const client::ServerError& e) {
      EXPECT_EQ(e.code(), Error::SOURCE_ERROR);
      return e.server_message();
    }
    ADD_FAILURE() << "the server did not refuse";
    return "";
  }
};

// Every alias and name dblogd's copy and chunk queries use, as column names: `t` (the table's
// alias) as text, and as a composite whose own fields are named id and t, so that capturing
// the column instead of the row would send a plausible but wrong row.
TEST_F(SecurityTest, ColumnsNamedLikeTheQueriesAliasesAreCopiedAndRepaired) {
  const std::string s = schema();
  db().exec("CREATE TABLE " + s + ".ts (id int PRIMARY KEY, t text, a text, x text, e text,"
            " k0 int, ord int, asked text, \"T\" text, \"select\" text)");
  db().exec("INSERT INTO " + s + ".ts SELECT g, 't' || g, 'a', 'x', 'e', g, g, 'q', 'T', 's'"
            " FROM generate_series(1, 50) g");
  // a key column whose name holds \1 (any character but NUL may be in a name)
  db().exec("CREATE TABLE " + s + ".odd (U&\"a\\0001b\" int, \"x\"\"y\" text, v text,"
            " PRIMARY KEY (U&\"a\\0001b\", \"x\"\"y\"))");
  db().exec("INSERT INTO " + s + ".odd SELECT g, 'k' || g, 'v' FROM generate_series(1, 30) g");
  db().exec("CREATE TYPE " + s + ".pair AS (id int, t text)");
  db().exec("CREATE TABLE " + s + ".ct (id int PRIMARY KEY, t " + s + ".pair)");
  db().exec("INSERT INTO " + s + ".ct SELECT g, ROW(1000 + g, 'inner')::" + s +
            ".pair FROM generate_series(1, 50) g");
  StartDblogd({"--chunk-size=20"});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"ts", "ct", "odd"});

  for (const std::string table : {"ts", "ct"}) {
    const std::uint32_t oid = TableOid(db(), s + "." + table);
    for (std::int64_t id = 1; id <= 50; id += 3) replay.Erase(oid, IntKey(id));
    for (std::int64_t id = 2; id <= 50; id += 5) replay.Corrupt(oid, IntKey(id));
  }
  const auto states = StreamUntilFinished(
      c, replay,
      {Request("dblog.repair('" + s + ".ts')"), Request("dblog.repair('" + s + ".ct')"),
       Request("dblog.repair_keys('" + s + ".ct', '[{\"id\": 1}, {\"id\": 7}, {\"id\": 999}]')"),
       Request("dblog.repair_range('" + s + ".ts', '{\"id\": 10}', '{\"id\": 30}')"),
       Request("dblog.repair('" + s + ".odd')"),
       Request("dblog.repair_keys('" + s + ".odd', '[{\"a\\u0001b\": 3, \"x\\\"y\": \"k3\"}]')")});
  EXPECT_EQ(states, std::vector<std::string>(6, "done"));
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"ts", "ct", "odd"});
}

// A table owner's domain CHECK (on its key type) and an operator a role planted in public never
// run with dblogd's privileges: not while it connects, bootstraps, or runs repairs of each kind.
TEST_F(SecurityTest, DomainChecksAndPlantedOperatorsNeverRunAsDblogd) {
  const std::string s = schema();
  struct Cleanup {
    PgConn& db;
    ~Cleanup() {
      try {
        db.exec("DROP OPERATOR IF EXISTS public.= (oid, regclass)");
        db.exec("DROP FUNCTION IF EXISTS public.e2e_trap_eq(oid, regclass)");
      } catch (...) {
      }
    }
  } cleanup{db()};
  db().exec("CREATE TABLE " + s + ".seen (n serial PRIMARY KEY, who name, app text)");
  db().exec("GRANT INSERT ON " + s + ".seen TO PUBLIC");
  db().exec("GRANT USAGE ON ALL SEQUENCES IN SCHEMA " + s + " TO PUBLIC");
  db().exec("CREATE FUNCTION " + s + ".note() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN"
            " INSERT INTO " + s + ".seen (who, app) VALUES (current_user,"
            " current_setting('application_name')); RETURN true; END $$");
  db().exec("CREATE DOMAIN " + s + ".trapped AS int CHECK (" + s + ".note())");
  db().exec("CREATE TABLE " + s + ".dk (id " + s + ".trapped PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + s + ".dk SELECT g, 'v' FROM generate_series(1, 40) g");
  db().exec("CREATE FUNCTION public.e2e_trap_eq(oid, regclass) RETURNS boolean LANGUAGE sql AS"
            " $$ SELECT " + s + ".note() AND $1 OPERATOR(pg_catalog.=) $2::oid $$");
  db().exec("CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass,"
            " FUNCTION = public.e2e_trap_eq)");
  // an enum key whose owner added casts from and to text (pg_cast, not search_path)
  db().exec("CREATE TYPE " + s + ".color AS ENUM ('red', 'green', 'blue')");
  db().exec("CREATE FUNCTION " + s + ".color_in(t text) RETURNS " + s + ".color LANGUAGE plpgsql"
            " AS $$ BEGIN PERFORM " + s + ".note(); RETURN pg_catalog.enum_in(t::cstring,"
            " '" + s + ".color'::regtype); END $$");
  db().exec("CREATE CAST (text AS " + s + ".color) WITH FUNCTION " + s + ".color_in(text)");
  db().exec("CREATE FUNCTION " + s + ".color_out(c " + s + ".color) RETURNS text LANGUAGE"
            " plpgsql AS $$ BEGIN PERFORM " + s + ".note(); RETURN pg_catalog.enum_out(c)::text;"
            " END $$");
  db().exec("CREATE CAST (" + s + ".color AS text) WITH FUNCTION " + s + ".color_out(" + s +
            ".color)");
  db().exec("CREATE TABLE " + s + ".ek (k " + s + ".color PRIMARY KEY, v int)");
  db().exec("INSERT INTO " + s + ".ek VALUES ('red', 1), ('green', 2), ('blue', 3)");
  db().exec("TRUNCATE " + s + ".seen");

  StartDblogd({"--chunk-size=15"});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  const std::uint32_t oid = TableOid(db(), s + ".dk");
  replay.Erase(oid, IntKey(3));
  replay.Corrupt(oid, IntKey(20));
  const auto states = StreamUntilFinished(
      c, replay,
      {Request("dblog.repair('" + s + ".dk')"),
       Request("dblog.repair_range('" + s + ".dk', '{\"id\": 5}', '{\"id\": 25}')"),
       Request("dblog.repair_keys('" + s + ".dk', '[{\"id\": 3}, {\"id\": 99}]')"),
       Request("dblog.repair('" + s + ".ek')"),
       Request("dblog.repair_range('" + s + ".ek', '{\"k\": \"red\"}', '{\"k\": \"blue\"}')"),
       Request("dblog.repair_keys('" + s + ".ek', '[{\"k\": \"green\"}]')")});
  EXPECT_EQ(states, std::vector<std::string>(6, "done"));
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"dk", "ek"});
  EXPECT_EQ(db().scalar("SELECT count(*) FROM " + s + ".seen WHERE app LIKE 'dblogd%'"), "0")
      << db().scalar("SELECT coalesce(string_agg(who || ' via ' || app, ', '), '') FROM " + s +
                     ".seen");
}

// Row-level security hides rows from dblogd's role: it must fail closed. A repair of a table
// whose policy now hides rows fails (it does not delete what the policy hid), and a connection
// is refused with the table's name and the fix until the role may bypass the policy.
TEST_F(SecurityTest, RowLevelSecurityFailsClosed) {
  const std::string s = schema();
  struct Role {
    PgConn& db;
    std::string schema;
    ~Role() {
      try {
        db.exec("REVOKE ALL ON dblog.consumers, dblog.request_progress, dblog.request_queue FROM "
                "e2e_rls");
        db.exec("REVOKE ALL ON SEQUENCE dblog.request_queue_id_seq FROM e2e_rls");
        db.exec("DROP OWNED BY e2e_rls");
        db.exec("DROP ROLE e2e_rls");
      } catch (...) {
      }
    }
  } role{db(), s};
  db().exec("DROP ROLE IF EXISTS e2e_rls");
  db().exec("CREATE ROLE e2e_rls LOGIN REPLICATION");
  db().exec("GRANT SELECT, INSERT, UPDATE ON dblog.consumers, dblog.request_progress TO e2e_rls");
  db().exec("GRANT SELECT, INSERT ON dblog.request_queue TO e2e_rls");
  db().exec("GRANT USAGE ON SEQUENCE dblog.request_queue_id_seq TO e2e_rls");
  db().exec("GRANT USAGE ON SCHEMA " + s + " TO e2e_rls");
  db().exec("CREATE TABLE " + s + ".guarded (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + s + ".guarded SELECT g, 'v' FROM generate_series(1, 10) g");
  db().exec("GRANT SELECT ON ALL TABLES IN SCHEMA " + s + " TO e2e_rls");
  db().exec("ALTER DEFAULT PRIVILEGES IN SCHEMA " + s + " GRANT SELECT ON TABLES TO e2e_rls");
  const std::string as_role = "--source=" + conninfo() + " user=e2e_rls";

  StartDblogd({as_role});
  Replay replay;
  {
    client::Client c = Connect();
    ReadUntil(c, replay, 0);
    ReadUntil(c, replay, Sentinel());
    ExpectConverged(replay, {"guarded"});
    // now a policy shows dblogd's role half the rows
    db().exec("ALTER TABLE " + s + ".guarded ENABLE ROW LEVEL SECURITY");
    db().exec("CREATE POLICY even ON " + s + ".guarded USING (id % 2 = 0)");
    const auto states =
        StreamUntilFinished(c, replay, {Request("dblog.repair('" + s + ".guarded')")});
    EXPECT_EQ(states, std::vector<std::string>{"failed"});
    EXPECT_NE(db().scalar("SELECT error FROM dblog.requests WHERE table_name = '" + s +
                          ".guarded'").find("row-level security"),
              std::string::npos);
    ReadUntil(c, replay, Sentinel());
    EXPECT_EQ(replay.Table(TableOid(db(), s + ".guarded")).size(), 10u);
    EXPECT_EQ(CountLogEvents(dblogd_->log(), "source_role_is_superuser"), 0);
  }
  dblogd_->Stop();

  StartDblogd({as_role});
  const std::string message = Refused();
  EXPECT_NE(message.find(s + ".guarded"), std::string::npos) << message;
  EXPECT_NE(message.find("BYPASSRLS"), std::string::npos) << message;
  dblogd_->Stop();

  db().exec("ALTER ROLE e2e_rls BYPASSRLS");
  StartDblogd({as_role});
  client::Client c = Connect(replay.last_position());
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"guarded"});
}

// A table's owner holds ACCESS EXCLUSIVE on it and asks for a repair. While dblogd waits for the
// lock, the owner renames the table and puts a view of the same name in its place, whose
// function would run as dblogd; and renames the key's enum and puts a domain with a CHECK of
// its own under the enum's name. dblogd reads the table by its oid under the lock (its name and
// key types as they are then): neither the view's function nor the domain's check runs, and
// the repair sends the real table's rows.
TEST_F(SecurityTest, NamesSwappedWhileDblogdWaitsForTheLockNeverRunTheOwnersCode) {
  const std::string s = schema();
  ScopedRole role(db(), "e2e_owner");
  db().exec("GRANT USAGE, CREATE ON SCHEMA " + s + " TO e2e_owner");
  PgConn owner(conninfo() + " user=e2e_owner");
  // it raises what it saw (dblogd reads in read-only transactions: a write would fail anyway)
  owner.exec("CREATE FUNCTION " + s + ".evil() RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN"
             " RAISE EXCEPTION 'EVIL ran as % via %', current_user,"
             " current_setting('application_name'); END $$");
  owner.exec("CREATE TYPE " + s + ".color AS ENUM ('red', 'green', 'blue')");
  owner.exec("CREATE TABLE " + s + ".items (id int PRIMARY KEY, v text)");
  owner.exec("CREATE TABLE " + s + ".paint (k " + s + ".color PRIMARY KEY, v int)");
  owner.exec("INSERT INTO " + s + ".items SELECT g, 'real' FROM generate_series(1, 30) g");
  owner.exec("INSERT INTO " + s + ".paint VALUES ('red', 1), ('green', 2), ('blue', 3)");

  StartDblogd({"--chunk-size=10"});
  client::Client c = Connect();
  Replay replay;
  ReadUntil(c, replay, 0);
  const std::uint32_t items = TableOid(db(), s + ".items");
  const std::uint32_t paint = TableOid(db(), s + ".paint");
  for (std::int64_t id = 1; id <= 30; id += 4) replay.Corrupt(items, IntKey(id));

  // The owner holds the table from a second session and asks for its repair; once dblogd
  // waits for the lock, the owner swaps names and lets go. One swap at a time: dblogd describes
  // a request when it reaches it, so a second request would be described after the swap.
  PgConn locker(conninfo() + " user=e2e_owner");
  auto attack = [&](const std::string& table, const std::string& request,
                    const std::vector<std::string>& swap) {
    locker.exec("BEGIN; LOCK TABLE " + s + "." + table + " IN ACCESS EXCLUSIVE MODE");
    const std::uint64_t id = std::stoull(owner.scalar("SELECT " + request));
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (db().scalar("SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
                       " WHERE NOT l.granted AND a.application_name LIKE 'dblogd%'") == "0") {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "dblogd never waited for the lock on " << table;
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    for (const std::string& statement : swap) locker.exec(statement);
    locker.exec("COMMIT");
    return StreamUntilFinished(c, replay, {id}).front();
  };
  const std::string item_state =
      attack("items", "dblog.repair('" + s + ".items')",
             {"ALTER TABLE " + s + ".items RENAME TO items_real",
              "CREATE VIEW " + s + ".items AS SELECT id, 'fake'::text AS v FROM " + s +
                  ".items_real WHERE " + s + ".evil()"});
  // a range: its bounds are read as the key's type (a whole table's chunks name no type)
  const std::string paint_state =
      attack("paint",
             "dblog.repair_range('" + s + ".paint', '{\"k\": \"red\"}', '{\"k\": \"blue\"}')",
             {"ALTER TYPE " + s + ".color RENAME TO color_real",
              "CREATE DOMAIN " + s + ".color AS " + s + ".color_real CHECK (" + s + ".evil())"});
  const std::vector<std::string> states{item_state, paint_state};
  EXPECT_EQ(states, (std::vector<std::string>{"done", "done"}))
      << db().scalar("SELECT coalesce(string_agg(coalesce(error, ''), '; '), '') FROM dblog.requests");
  EXPECT_EQ(CountLogEvents(dblogd_->log(), "repair_failed"), 0) << dblogd_->log();
  ReadUntil(c, replay, Sentinel());
  ExpectConverged(replay, {"items_real", "paint"});
  EXPECT_EQ(replay.Table(paint).size(), 3u);
  EXPECT_GE(replay.chunks_seen(), 4u);  // items: 30 rows in chunks of 10; paint: one
  // the fixture's dblogd connects as the superuser: it says so
  EXPECT_GE(CountLogEvents(dblogd_->log(), "source_role_is_superuser"), 1);
}

// Anyone may write a message of any size, and a field may hold up to 1 GB: neither may stop a
// consumer's stream. A 270 MB message nobody asked for never reaches dblogd; one a consumer
// asked for arrives without its content beyond --max-message-bytes; a 300 MB row is copied by
// the bootstrap and streamed when it changes, with dblogd's memory a small multiple of the row.
TEST_F(SecurityTest, HugeMessagesAndRowsDoNotStopTheStream) {
  const std::string s = schema();
  constexpr long kRowBytes = 300L << 20;
  db().exec("CREATE TABLE " + s + ".big (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + s + ".big VALUES (1, repeat('x', " + std::to_string(kRowBytes) + "))");
  StartDblogd();
  client::ConnectOptions options;
  options.port = dblogd_->port();
  options.consumer = consumer();
  options.client_name = "dblogd-test";
  options.message_prefixes = {"app."};
  client::Client c = client::Client::Connect(options);
  Replay replay;
  ReadUntil(c, replay, 0);
  const std::uint32_t oid = TableOid(db(), s + ".big");
  ASSERT_EQ(replay.Table(oid).size(), 1u);

  db().exec("SELECT pg_logical_emit_message(false, 'x', repeat('a', 270000000))");
  db().exec("SELECT pg_logical_emit_message(true, 'app.big', repeat('b', 5000000))");
  db().exec("SELECT pg_logical_emit_message(true, 'app.small', 'hello')");
  db().exec("UPDATE " + s + ".big SET v = repeat('y', " + std::to_string(kRowBytes) + ")");
  // read until the update, noting the messages on the way
  std::vector<dblog::v1::Message> messages;
  const std::uint64_t until = Sentinel();
  const auto deadline = std::chrono::steady_clock::now() + 300s;
  bool done = false;
  while (!done) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    client::Item item;
    ASSERT_TRUE(c.Next(item));
    if (!std::holds_alternative<dblog::v1::StreamEvent>(item)) continue;
    const auto& event = std::get<dblog::v1::StreamEvent>(item);
    replay.Apply(event);
    if (event.has_message()) messages.push_back(event.message());
    if (event.has_commit() && event.commit().commit_lsn() >= until) done = true;
  }
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].prefix(), "app.big");
  EXPECT_EQ(messages[0].content(), "");
  EXPECT_EQ(messages[0].omitted_bytes(), 5000000u);
  EXPECT_EQ(messages[1].prefix(), "app.small");
  EXPECT_EQ(messages[1].content(), "hello");
  EXPECT_EQ(messages[1].omitted_bytes(), 0u);
  ExpectConverged(replay, {"big"});
  const long peak_mb = dblogd_->PeakRssKb() / 1024;
  std::cerr << "dblogd peak RSS: " << peak_mb << " MB for a " << (kRowBytes >> 20)
            << " MB row and a 270 MB message\n";
  EXPECT_LT(peak_mb, 4 * (kRowBytes >> 20) + 200);
}

}  // namespace
}  // namespace dblog::test
