// tests/cpp/pg/pg_slot_test.cc: slot management against a real server: CREATE_REPLICATION_SLOT
// with an exported snapshot that other sessions import, GetSlot/DropSlot, and the explained
// refusal of a plugin that output_plugin_libraries does not list (PostgreSQL 15.19+).
#include <gtest/gtest.h>

#include <string>

#include "pg/connection.h"
#include "pg/slot.h"
#include "pg_fixture.h"

namespace dblog::pg::test {
namespace {

class SlotTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (IsSkipped()) return;
    sql().Exec("CREATE EXTENSION IF NOT EXISTS dblog");
  }
};

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string Ids(Connection& conn, const std::string& table) {
  return std::string(
      conn.Exec("SELECT coalesce(string_agg(id::text, ',' ORDER BY id), '') FROM " + table)
          .value(0, 0));
}

TEST_F(SlotTest, ExportedSnapshotIsImportableWhileTheReplicationConnectionIsIdle) {
  const std::string schema = Schema();
  const std::string table = schema + ".t";
  sql().Exec("CREATE TABLE " + table + " (id int PRIMARY KEY)");
  sql().Exec("INSERT INTO " + table + " VALUES (1)");

  Connection repl = OpenReplication();
  const std::string slot = SlotName();
  const CreatedSlot created = CreateSlot(repl, slot, "dblog", /*export_snapshot=*/true);
  EXPECT_EQ(created.name, slot);
  EXPECT_GT(created.consistent_point, 0u);
  ASSERT_FALSE(created.snapshot_name.empty());

  // Committed after the consistent point: the stream has it, the snapshot must not.
  sql().Exec("INSERT INTO " + table + " VALUES (2)");

  const SlotInfo info = GetSlot(sql(), slot);
  EXPECT_TRUE(info.exists);
  EXPECT_EQ(info.plugin, "dblog");
  EXPECT_EQ(info.slot_type, "logical");
  EXPECT_EQ(info.database, PQdb(sql().raw()));
  EXPECT_EQ(info.confirmed_flush_lsn, created.consistent_point)
      << "a new slot starts at its consistent point";
  EXPECT_GT(info.restart_lsn, 0u);
  EXPECT_LE(info.restart_lsn, created.consistent_point);

  // Two workers import it, as bootstrap copy workers do.
  for (int worker = 0; worker < 2; ++worker) {
    Connection importer = OpenSql();
    importer.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    importer.Exec("SET TRANSACTION SNAPSHOT " + importer.QuoteLiteral(created.snapshot_name));
    EXPECT_EQ(Ids(importer, table), "1") << "worker " << worker;
    importer.Exec("COMMIT");
  }
  EXPECT_EQ(Ids(sql(), table), "1,2");

  // The snapshot lives only until the exporting connection runs its next command.
  repl.Exec("IDENTIFY_SYSTEM");
  Connection late = OpenSql();
  late.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  try {
    late.Exec("SET TRANSACTION SNAPSHOT " + late.QuoteLiteral(created.snapshot_name));
    FAIL() << "the snapshot outlived the exporting command";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "22023") << e.what();
  }
}

TEST_F(SlotTest, CreateWithoutSnapshot) {
  Connection repl = OpenReplication();
  const std::string slot = SlotName();
  const CreatedSlot created = CreateSlot(repl, slot, "dblog", /*export_snapshot=*/false);
  EXPECT_TRUE(created.snapshot_name.empty());
  EXPECT_GT(created.consistent_point, 0u);
  EXPECT_EQ(GetSlot(sql(), slot).confirmed_flush_lsn, created.consistent_point);
  // The same connection is free for the next command at once (no snapshot to keep alive).
  EXPECT_EQ(repl.Exec("IDENTIFY_SYSTEM").ntuples(), 1);

  try {
    CreateSlot(repl, slot, "dblog", false);
    FAIL() << "created the same slot twice";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "42710");
    EXPECT_TRUE(Contains(e.what(), "CREATE_REPLICATION_SLOT \"" + slot + "\"")) << e.what();
  }
}

TEST_F(SlotTest, CreateChecksItsArguments) {
  Connection repl = OpenReplication();
  EXPECT_THROW(CreateSlot(repl, "Bad-Name", "dblog", false), std::invalid_argument);
  EXPECT_THROW(CreateSlot(sql(), SlotName(), "dblog", false), std::invalid_argument)
      << "needs a replication connection";
}

TEST_F(SlotTest, GetAndDrop) {
  const std::string slot = SlotName();
  EXPECT_FALSE(GetSlot(sql(), slot).exists);
  sql().ExecParams("SELECT pg_create_logical_replication_slot($1, 'dblog')", {slot});
  const SlotInfo info = GetSlot(sql(), slot);
  EXPECT_TRUE(info.exists);
  EXPECT_FALSE(info.active);
  EXPECT_FALSE(info.active_pid.has_value());
  EXPECT_EQ(info.wal_status, "reserved");

  EXPECT_TRUE(DropSlot(sql(), slot));
  EXPECT_FALSE(GetSlot(sql(), slot).exists);
  EXPECT_FALSE(DropSlot(sql(), slot, /*missing_ok=*/true));
  try {
    DropSlot(sql(), slot);
    FAIL() << "dropped a missing slot";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "42704");
  }
}

// The server refuses plugins missing from output_plugin_libraries, superusers included. The
// setting is superuser-settable per session, so a superuser can make the server refuse dblog
// for one connection without touching the cluster's configuration.
TEST_F(SlotTest, PluginRefusalIsExplainedForSuperusers) {
  if (!IsSuperuser()) GTEST_SKIP() << "needs a superuser to set output_plugin_libraries";
  Connection repl = OpenReplication({{"options", "-c output_plugin_libraries=pgoutput"}});
  const std::string slot = SlotName();
  try {
    CreateSlot(repl, slot, "dblog", true);
    FAIL() << "the server accepted a plugin missing from output_plugin_libraries";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "42501");
    EXPECT_EQ(e.server_message(), "library \"dblog\" may not be used as an output plugin");
    const std::string what = e.what();
    EXPECT_TRUE(Contains(what, "output_plugin_libraries (currently 'pgoutput')")) << what;
    EXPECT_TRUE(Contains(what,
                         "ALTER SYSTEM SET output_plugin_libraries = 'pgoutput', 'dblog'; "
                         "SELECT pg_reload_conf();"))
        << what;
    EXPECT_TRUE(Contains(what, "superusers included")) << what;
    EXPECT_TRUE(Contains(what, "[SQLSTATE 42501] while running: CREATE_REPLICATION_SLOT")) << what;
  }
  EXPECT_FALSE(GetSlot(sql(), slot).exists);
}

// The same for a REPLICATION role without superuser rights, with the list set for that role.
TEST_F(SlotTest, PluginRefusalIsExplainedForReplicationRoles) {
  if (!IsSuperuser()) GTEST_SKIP() << "needs a superuser to create roles";
  const std::string role = Role();
  sql().Exec("CREATE ROLE " + role + " LOGIN REPLICATION");
  sql().Exec("ALTER ROLE " + role + " SET output_plugin_libraries = 'pgoutput, test_decoding'");
  const std::string slot = SlotName();
  {
    Connection repl = OpenReplication({{"user", role}});
    try {
      CreateSlot(repl, slot, "dblog", false);
      FAIL() << "the server accepted a plugin missing from output_plugin_libraries";
    } catch (const Error& e) {
      EXPECT_EQ(e.sqlstate(), "42501");
      EXPECT_TRUE(Contains(e.what(),
                           "ALTER SYSTEM SET output_plugin_libraries = "
                           "'pgoutput', 'test_decoding', 'dblog'; SELECT pg_reload_conf();"))
          << e.what();
      EXPECT_TRUE(Contains(e.what(), "ALTER ROLE")) << "mentions the per-role precedence";
    }
    // A non-superuser cannot lift the restriction for its own session.
    try {
      Connection::Open(conninfo(), true,
                       {{"user", role}, {"options", "-c output_plugin_libraries=dblog"}});
      FAIL() << "a non-superuser changed output_plugin_libraries";
    } catch (const Error& e) {
      EXPECT_TRUE(Contains(e.what(), "permission denied to set parameter")) << e.what();
    }
  }
  // With the role's own setting gone, the cluster's list (which has dblog) applies.
  sql().Exec("ALTER ROLE " + role + " RESET output_plugin_libraries");
  Connection repl = OpenReplication({{"user", role}});
  EXPECT_NO_THROW(CreateSlot(repl, slot, "dblog", false));
  EXPECT_TRUE(GetSlot(sql(), slot).exists);
}

TEST_F(SlotTest, OtherErrorsAreNotMistakenForTheRefusal) {
  Connection repl = OpenReplication();
  try {
    CreateSlot(repl, SlotName(), "no_such_plugin_library", false);
    FAIL() << "no error";
  } catch (const Error& e) {
    // Not listed either, so this is the same refusal, named for that library.
    EXPECT_EQ(e.sqlstate(), "42501");
    EXPECT_TRUE(Contains(e.what(), "refuses output plugin \"no_such_plugin_library\"")) << e.what();
  }
  Error other("permission denied for table x", "42501", "SELECT 1",
              "permission denied for table x");
  Error same = ExplainPluginRefusal(repl, other, "dblog");
  EXPECT_STREQ(same.what(), other.what()) << "dblog is listed, and the message is another one";
}

}  // namespace
}  // namespace dblog::pg::test
