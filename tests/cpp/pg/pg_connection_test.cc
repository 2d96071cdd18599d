// tests/cpp/pg/pg_connection_test.cc: pg::Connection, pg::Result, pg::Error and pg::CopyBuffer
// against a real server: results and NULLs, errors with SQLSTATE/SQL/detail, conninfo strings
// and URIs, overrides, replication connections, notices, moves.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "pg/connection.h"
#include "pg/slot.h"
#include "pg_fixture.h"

namespace dblog::pg::test {
namespace {

class ConnectionTest : public PgTest {};

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_F(ConnectionTest, ResultValuesNullsAndColumnsByName) {
  Result r = sql().Exec("SELECT 1 AS a, NULL::text AS b, 'x y' AS c UNION ALL SELECT 2, 'b', ''");
  EXPECT_EQ(r.status(), PGRES_TUPLES_OK);
  ASSERT_EQ(r.ntuples(), 2);
  ASSERT_EQ(r.nfields(), 3);
  EXPECT_EQ(r.value(0, 0), "1");
  EXPECT_TRUE(r.is_null(0, 1));
  EXPECT_FALSE(r.optional_value(0, 1).has_value());
  EXPECT_THROW(r.value(0, 1), std::runtime_error) << "value() of a NULL must not look like ''";
  EXPECT_EQ(r.value(0, "c"), "x y");
  EXPECT_EQ(r.column("b"), 1);
  EXPECT_EQ(r.optional_value(1, "b").value(), "b");
  EXPECT_FALSE(r.is_null(1, 2));
  EXPECT_EQ(r.value(1, 2), "") << "an empty string is not NULL";
  EXPECT_THROW(r.value(2, 0), std::out_of_range);
  EXPECT_THROW(r.value(0, 3), std::out_of_range);
  EXPECT_THROW(r.value(-1, 0), std::out_of_range);
  EXPECT_THROW(r.column("A"), std::out_of_range) << "names match exactly";
}

TEST_F(ConnectionTest, BadSqlGivesSyntaxErrorWithTheSql) {
  const std::string bad = "SELEC 1 FROM nowhere";
  try {
    sql().Exec(bad);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "42601");
    EXPECT_EQ(e.sql(), bad);
    EXPECT_TRUE(Contains(e.server_message(), "syntax error")) << e.server_message();
    const std::string what = e.what();
    EXPECT_TRUE(Contains(what, "syntax error")) << what;
    EXPECT_TRUE(Contains(what, "[SQLSTATE 42601] while running: " + bad)) << what;
  }
  // The connection stays usable after an error.
  EXPECT_EQ(sql().Exec("SELECT 'still here'").value(0, 0), "still here");
}

TEST_F(ConnectionTest, ServerDetailAndHintAreKept) {
  sql().Exec("CREATE TEMP TABLE dup (id int PRIMARY KEY)");
  sql().Exec("INSERT INTO dup VALUES (1)");
  try {
    sql().ExecParams("INSERT INTO dup VALUES ($1)", {std::string("1")});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "23505");
    EXPECT_EQ(e.detail(), "Key (id)=(1) already exists.");
    EXPECT_TRUE(Contains(e.what(), "Key (id)=(1) already exists.")) << e.what();
    EXPECT_EQ(e.sql(), "INSERT INTO dup VALUES ($1)");
  }
  try {
    sql().Exec("SELECT nosuchfunction(1)");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "42883");
    EXPECT_FALSE(e.hint().empty());
    EXPECT_TRUE(Contains(e.what(), e.hint())) << e.what();
  }
}

TEST_F(ConnectionTest, ExecParamsPassesNullAndQuotesSafely) {
  Result r = sql().ExecParams("SELECT $1::text IS NULL, $2::text, length($2)",
                              {std::nullopt, std::string("it's; DROP TABLE x; --")});
  EXPECT_EQ(r.value(0, 0), "t");
  EXPECT_EQ(r.value(0, 1), "it's; DROP TABLE x; --");
  EXPECT_EQ(r.value(0, 2), "22");
}

TEST_F(ConnectionTest, ExecPreparedPreparesOnceFollowsDdlAndStaysBounded) {
  sql().Exec("CREATE TEMP TABLE prep (v int)");
  sql().Exec("INSERT INTO prep VALUES (1), (2), (3)");
  const std::string count = "SELECT count(*) FROM prep WHERE v > $1";
  const auto prepared = [&] {
    return sql().Exec("SELECT count(*) FROM pg_prepared_statements").u64_value(0, 0);
  };
  EXPECT_EQ(sql().ExecPrepared(count, {std::string("1")}).value(0, 0), "2");
  EXPECT_EQ(sql().ExecPrepared(count, {std::string("2")}).value(0, 0), "1");
  EXPECT_EQ(sql().prepared_count(), 1u);
  EXPECT_EQ(prepared(), 1u) << "prepared once, run twice";
  EXPECT_EQ(sql().ExecPrepared(count, {std::nullopt}).value(0, 0), "0") << "NULL stays NULL";

  // Analyzed again after DDL, by name: a table dropped and created again under the name is the
  // one the statement reads.
  sql().Exec("ALTER TABLE prep ADD COLUMN w text");
  EXPECT_EQ(sql().ExecPrepared(count, {std::string("0")}).value(0, 0), "3");
  sql().Exec("DROP TABLE prep");
  sql().Exec("CREATE TEMP TABLE prep (v bigint, x text)");
  sql().Exec("INSERT INTO prep VALUES (10, 'a')");
  EXPECT_EQ(sql().ExecPrepared(count, {std::string("5")}).value(0, 0), "1");

  // A statement the server refuses is an Error like ExecParams's, and is not kept.
  try {
    sql().ExecPrepared("SELEC $1", {std::string("1")});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "42601");
    EXPECT_EQ(e.sql(), "SELEC $1");
  }
  EXPECT_EQ(sql().prepared_count(), 1u);

  // Bounded: past kPreparedLimit statements, they are deallocated and prepared anew.
  for (std::size_t i = 0; i < Connection::kPreparedLimit + 6; ++i)
    EXPECT_EQ(sql().ExecPrepared("SELECT $1::int + " + std::to_string(i), {std::string("1")})
                  .value(0, 0),
              std::to_string(i + 1));
  EXPECT_LE(sql().prepared_count(), Connection::kPreparedLimit);
  EXPECT_EQ(prepared(), sql().prepared_count());
  EXPECT_EQ(sql().ExecPrepared(count, {std::string("5")}).value(0, 0), "1");
}

TEST_F(ConnectionTest, QuotingHelpers) {
  EXPECT_EQ(sql().QuoteLiteral("it's"), "'it''s'");
  EXPECT_EQ(sql().QuoteIdentifier("My \"T\""), "\"My \"\"T\"\"\"");
  EXPECT_EQ(sql().Exec("SELECT " + sql().QuoteLiteral("a'b\\c")).value(0, 0), "a'b\\c");
}

TEST_F(ConnectionTest, UnreachableServerIs08001) {
  try {
    Connection::Open("host=127.0.0.1 port=1 connect_timeout=5", false);
    FAIL() << "connected to port 1?";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "08001");
    EXPECT_TRUE(Contains(e.what(), "cannot connect to PostgreSQL")) << e.what();
  }
}

// kSilentPeerDefaults reach the socket of a TCP connection (a blackholed source is noticed
// within about a minute), and a conninfo's own values win over them.
TEST_F(ConnectionTest, TcpConnectionsGetKeepalivesAndAUserTimeoutUnlessTheConninfoSetsThem) {
  const char* port = std::getenv("PGPORT");
  if (!port) GTEST_SKIP() << "PGPORT is not set (tests/run.sh sets it)";
  const std::string tcp = conninfo() + " host=127.0.0.1 port=" + port;
  auto option = [](const Connection& c, int level, int name) {
    int value = -1;
    socklen_t size = sizeof(value);
    EXPECT_EQ(getsockopt(c.socket(), level, name, &value, &size), 0);
    return value;
  };
  Connection defaults = Connection::Open(tcp, false);
  EXPECT_EQ(option(defaults, SOL_SOCKET, SO_KEEPALIVE), 1);
  EXPECT_EQ(option(defaults, IPPROTO_TCP, TCP_KEEPIDLE), 30);
  EXPECT_EQ(option(defaults, IPPROTO_TCP, TCP_KEEPINTVL), 10);
  EXPECT_EQ(option(defaults, IPPROTO_TCP, TCP_KEEPCNT), 3);
  EXPECT_EQ(option(defaults, IPPROTO_TCP, TCP_USER_TIMEOUT), 60000);
  Connection replication = Connection::Open(tcp, true);
  EXPECT_EQ(option(replication, IPPROTO_TCP, TCP_USER_TIMEOUT), 60000);
  Connection own = Connection::Open(tcp + " keepalives_idle=7 tcp_user_timeout=0", false);
  EXPECT_EQ(option(own, IPPROTO_TCP, TCP_KEEPIDLE), 7);
  EXPECT_EQ(option(own, IPPROTO_TCP, TCP_USER_TIMEOUT), 0);
  // PGCONNECT_TIMEOUT, and a service file's values, stay in force
  auto setting = [](const Connection& c, const std::string& keyword) {
    std::string value;
    PQconninfoOption* options = PQconninfo(c.raw());
    for (const PQconninfoOption* o = options; o && o->keyword; ++o)
      if (keyword == o->keyword && o->val) value = o->val;
    PQconninfoFree(options);
    return value;
  };
  EXPECT_EQ(setting(defaults, "connect_timeout"), "15");
  setenv("PGCONNECT_TIMEOUT", "7", 1);
  Connection from_env = Connection::Open(tcp, false);
  unsetenv("PGCONNECT_TIMEOUT");
  EXPECT_EQ(setting(from_env, "connect_timeout"), "7");
  EXPECT_EQ(option(from_env, IPPROTO_TCP, TCP_KEEPIDLE), 30);
  char dir[] = "/tmp/dblog-service-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/pg_service.conf";
  {
    std::ofstream out(file);
    out << "[dblog_test]\nhost=127.0.0.1\nport=" << port << "\nkeepalives_idle=11\n";
  }
  setenv("PGSERVICEFILE", file.c_str(), 1);
  Connection service = Connection::Open(conninfo() + " host=127.0.0.1 port=" + port +
                                            " service=dblog_test", false);
  unsetenv("PGSERVICEFILE");
  std::remove(file.c_str());
  rmdir(dir);
  EXPECT_EQ(option(service, IPPROTO_TCP, TCP_KEEPIDLE), 11);
  EXPECT_EQ(setting(service, "tcp_user_timeout"), "");
}

TEST_F(ConnectionTest, UriConninfoAndOverrides) {
  const std::string host = PQhost(sql().raw()), port = PQport(sql().raw());
  const std::string user = PQuser(sql().raw()), db = PQdb(sql().raw());
  ASSERT_EQ(host.find_first_of("&?# "), std::string::npos) << "host would need URI escaping";
  const std::string uri = "postgresql://" + user + "@/" + db + "?host=" + host + "&port=" + port;
  Connection c = Connection::Open(uri, false);
  EXPECT_EQ(c.Exec("SELECT current_database()").value(0, 0), db);
  if (std::getenv("PGAPPNAME") == nullptr) {
    EXPECT_EQ(c.Exec("SHOW application_name").value(0, 0), "dblogd") << "fallback name";
  }

  // Later keywords win over what the conninfo string says.
  Connection o = Connection::Open(
      conninfo() + " application_name=from_conninfo", false,
      {{"application_name", "from_override"}, {"options", "-c lock_timeout=12345"}});
  EXPECT_EQ(o.Exec("SHOW application_name").value(0, 0), "from_override");
  EXPECT_EQ(o.Exec("SHOW lock_timeout").value(0, 0), "12345ms");
}

// Whatever the conninfo, the role's or the database's settings say, dblogd's sessions resolve
// names in pg_catalog only and never read through row-level security (docs/operations.md,
// "Security model").
TEST_F(ConnectionTest, SessionsPinSearchPathAndRowSecurity) {
  for (bool replication : {false, true}) {
    Connection c = Connection::Open(
        conninfo() +
            " options='-c search_path=public -c row_security=on -c constraint_exclusion=on'",
        replication);
    EXPECT_EQ(c.Exec("SHOW search_path").value(0, 0), "") << replication;
    EXPECT_EQ(c.Exec("SHOW row_security").value(0, 0), "off") << replication;
    // "on" would fold a table's CHECK constraints (its owner's code) when dblogd plans a read
    EXPECT_EQ(c.Exec("SHOW constraint_exclusion").value(0, 0), "partition") << replication;
  }
}

TEST_F(ConnectionTest, ReplicationConnectionRunsReplicationCommands) {
  Connection repl = OpenReplication();
  EXPECT_TRUE(repl.is_replication());
  EXPECT_FALSE(sql().is_replication());
  Result r = repl.Exec("IDENTIFY_SYSTEM");
  ASSERT_EQ(r.ntuples(), 1);
  EXPECT_EQ(r.value(0, "dbname"), PQdb(sql().raw())) << "replication=database names the db";
  EXPECT_GT(common::ParseLsn(r.value(0, "xlogpos")), 0u);
  // A replication=database walsender also runs plain SQL (simple query protocol).
  EXPECT_EQ(repl.Exec("SELECT 40 + 2").value(0, 0), "42");
  try {
    sql().Exec("IDENTIFY_SYSTEM");
    FAIL() << "a plain connection accepted a replication command";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "42601");
  }
}

TEST_F(ConnectionTest, ServerVersionCheck) {
  EXPECT_GE(sql().server_version(), kMinServerVersion);
  EXPECT_NO_THROW(sql().CheckServerVersion());
  try {
    sql().CheckServerVersion(990000);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "0A000");
    EXPECT_TRUE(Contains(e.what(), "needs PostgreSQL 99.0 or later")) << e.what();
  }
}

TEST_F(ConnectionTest, NoticesGoToTheHandlerAlsoAfterAMove) {
  Connection c = OpenSql();
  std::vector<std::string> notices;
  c.SetNoticeHandler([&](const std::string& n) { notices.push_back(n); });
  Connection moved = std::move(c);
  EXPECT_FALSE(c.is_open());  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_THROW(c.Exec("SELECT 1"), Error);
  moved.Exec("DO $$ BEGIN RAISE NOTICE 'hello %', 42; END $$");
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0], "NOTICE:  hello 42");
  Connection assigned;
  assigned = std::move(moved);
  assigned.Exec("DO $$ BEGIN RAISE WARNING 'second'; END $$");
  ASSERT_EQ(notices.size(), 2u);
  EXPECT_EQ(notices[1], "WARNING:  second");
  assigned.Close();
  EXPECT_FALSE(assigned.is_open());
  EXPECT_EQ(assigned.socket(), -1);
}

TEST_F(ConnectionTest, CopyBufferOwnsLibpqMemory) {
  Result started(PQexec(sql().raw(), "COPY (SELECT g FROM generate_series(1, 2) g) TO STDOUT"));
  ASSERT_EQ(started.status(), PGRES_COPY_OUT);
  std::string all;
  for (;;) {
    char* data = nullptr;
    const int n = PQgetCopyData(sql().raw(), &data, 0);
    CopyBuffer buffer(data, n);
    if (n < 0) break;
    CopyBuffer moved(std::move(buffer));
    EXPECT_TRUE(buffer.view().empty());
    all += std::string(moved.view());
  }
  EXPECT_EQ(all, "1\n2\n");
  Result done(PQgetResult(sql().raw()));
  EXPECT_EQ(done.status(), PGRES_COMMAND_OK);
  EXPECT_FALSE(Result(PQgetResult(sql().raw())));
}

TEST_F(ConnectionTest, ExecRefusesCopyResultsReadably) {
  Connection c = OpenSql();
  try {
    c.Exec("COPY (SELECT 1) TO STDOUT");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_TRUE(Contains(e.what(), "returned PGRES_COPY_OUT, which Exec does not handle"))
        << e.what();
  }
}

}  // namespace
}  // namespace dblog::pg::test
