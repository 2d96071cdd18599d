// tests/cpp/bootstrap/plan_in_snapshot_test.cc: bootstrap::PlanInSnapshot against a real server
// and a real exported snapshot: the plan describes each table as the snapshot (and so the log's
// first transactions) sees it, or fails so that the bootstrap is redone (issue 15, DDL between
// a slot's consistent point and the bootstrap's planning).
#include <gtest/gtest.h>

#include <string>

#include "bootstrap/copier.h"
#include "config/config.h"
#include "pg/connection.h"
#include "pg/slot.h"
#include "pg_fixture.h"

namespace dblog::bootstrap {
namespace {

using pg::test::PgTest;

class PlanInSnapshotTest : public PgTest {
 protected:
  void SetUp() override {
    PgTest::SetUp();
    if (IsSkipped()) return;
    sql().Exec("CREATE EXTENSION IF NOT EXISTS dblog");
    schema_ = Schema();
    sql().Exec("CREATE TABLE " + schema_ + ".a (id int PRIMARY KEY, v text)");
    sql().Exec("CREATE UNIQUE INDEX a_v ON " + schema_ + ".a (v)");
    sql().Exec("ALTER TABLE " + schema_ + ".a ALTER COLUMN v SET NOT NULL");
    sql().Exec("CREATE TABLE " + schema_ + ".b (id int PRIMARY KEY)");
    sql().Exec("INSERT INTO " + schema_ + ".a VALUES (1, 'x'), (2, 'y')");
  }

  // A slot whose snapshot is exported, then `ddl` committed, then the plan made in the
  // snapshot (while the replication connection stays idle, as dblogd keeps it).
  Plan PlanAfter(const std::string& ddl) {
    pg::Connection repl = OpenReplication();
    const pg::CreatedSlot created = pg::CreateSlot(repl, SlotName(), "dblog", true);
    if (!ddl.empty()) sql().Exec(ddl);
    pg::Connection planner = OpenSql();
    return PlanInSnapshot(planner, created.snapshot_name, config::ParseScope(schema_ + ".*"),
                          1000);
  }

  void ExpectRedone(const std::string& ddl) {
    try {
      PlanAfter(ddl);
      ADD_FAILURE() << "planned although the catalog changed after the consistent point: " << ddl;
    } catch (const DefinitionChanged& e) {
      EXPECT_NE(std::string(e.what()).find("\"a\" changed after the slot's consistent point"),
                std::string::npos)
          << e.what();
    }
  }

  std::string schema_;
};

TEST_F(PlanInSnapshotTest, WithoutDdlEveryTableIsPlannedAsTheSnapshotSeesIt) {
  const Plan plan = PlanAfter("");
  ASSERT_EQ(plan.tables.size(), 2u);
  EXPECT_EQ(plan.tables[0].name, "a");
  EXPECT_EQ(plan.tables[0].relation.columns_size(), 2);
  EXPECT_EQ(plan.tables[1].name, "b");
}

TEST_F(PlanInSnapshotTest, DdlBeforeTheSlotIsSimplyTheDefinition) {
  sql().Exec("ALTER TABLE " + schema_ + ".a ADD COLUMN w int");
  const Plan plan = PlanAfter("");
  ASSERT_EQ(plan.tables.size(), 2u);
  EXPECT_EQ(plan.tables[0].relation.columns_size(), 3);
}

TEST_F(PlanInSnapshotTest, ChangesOfAnyDescribedFieldAfterTheConsistentPointRedoTheBootstrap) {
  const std::string a = schema_ + ".a";
  ExpectRedone("ALTER TABLE " + a + " ADD COLUMN w int");
  ExpectRedone("ALTER TABLE " + a + " RENAME COLUMN v TO v2");
  // (each step's DDL stays: the next one names the column as it is now)
  ExpectRedone("ALTER TABLE " + a + " ALTER COLUMN v2 TYPE varchar(20)");
  ExpectRedone("ALTER TABLE " + a + " ALTER COLUMN v2 DROP NOT NULL");
  ExpectRedone("ALTER TABLE " + a + " REPLICA IDENTITY FULL");
}

TEST_F(PlanInSnapshotTest, ADroppedColumnOrAnotherKeyAfterTheConsistentPointRedoesIt) {
  const std::string a = schema_ + ".a";
  sql().Exec("ALTER TABLE " + a + " ADD COLUMN w int");
  ExpectRedone("ALTER TABLE " + a + " DROP COLUMN w");
  // the identity key becomes the unique index on v (REPLICA IDENTITY USING INDEX needs the
  // primary key gone for the key to change: the primary key wins otherwise)
  ExpectRedone("BEGIN; ALTER TABLE " + a + " DROP CONSTRAINT a_pkey; ALTER TABLE " + a +
               " REPLICA IDENTITY USING INDEX a_v; COMMIT");
}

TEST_F(PlanInSnapshotTest, ARenamedTableAfterTheConsistentPointRedoesIt) {
  try {
    PlanAfter("ALTER TABLE " + schema_ + ".a RENAME TO a2");
    ADD_FAILURE() << "planned a table renamed after the consistent point";
  } catch (const DefinitionChanged& e) {
    EXPECT_NE(std::string(e.what()).find("\"a\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dblog::bootstrap
