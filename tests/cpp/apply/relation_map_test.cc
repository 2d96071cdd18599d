// tests/cpp/apply/relation_map_test.cc: PlanColumns, the pure planning of how a target table
// follows its source's columns by attnum (client/apply/relation_map.h). No database.
#include <gtest/gtest.h>

#include "client/apply/relation_map.h"

namespace dblog::apply {
namespace {

struct Col {
  std::uint32_t attnum;
  std::string name;
  std::string type;
};

dblog::v1::Relation Rel(const std::vector<Col>& columns) {
  dblog::v1::Relation r;
  r.set_oid(16400);
  r.set_schema("public");
  r.set_name("a");
  for (const auto& c : columns) {
    auto* col = r.add_columns();
    col->set_attnum(c.attnum);
    col->set_name(c.name);
    col->set_type_name(c.type);
  }
  r.add_key_columns(0);
  return r;
}

const TargetName kTable{"public", "a"};

std::map<std::string, std::string> Types(const std::vector<MappedColumn>& columns) {
  std::map<std::string, std::string> out;
  for (const auto& c : columns) out[c.name] = c.type;
  return out;
}

const std::vector<MappedColumn> kBefore = {
    {1, "id", "integer"}, {2, "v", "text"}, {3, "n", "integer"}};

std::vector<std::string> Plan(const std::vector<MappedColumn>& before,
                              const std::vector<Col>& now,
                              DroppedColumns policy = DroppedColumns::kDrop,
                              std::map<std::string, std::string> types = {}) {
  if (types.empty()) types = Types(before);
  return PlanColumns(before, Rel(now), kTable, types, policy, false).statements;
}

TEST(PlanColumns, FirstSightAdoptsByNameWithoutStatements) {
  const ColumnPlan plan = PlanColumns({}, Rel({{1, "id", "integer"}, {2, "v", "text"}}), kTable,
                                      {{"id", "integer"}, {"v", "text"}, {"other", "int"}},
                                      DroppedColumns::kDrop, false);
  EXPECT_TRUE(plan.statements.empty());
  EXPECT_TRUE(plan.added.empty());
  ASSERT_EQ(plan.columns.size(), 2u);
  EXPECT_EQ(plan.columns[1].name, "v");
}

TEST(PlanColumns, UnchangedNeedsNothing) {
  EXPECT_TRUE(Plan(kBefore, {{1, "id", "integer"}, {2, "v", "text"}, {3, "n", "integer"}}).empty());
}

TEST(PlanColumns, RenameIsARenameOfTheTargetColumn) {
  EXPECT_EQ(Plan(kBefore, {{1, "id", "integer"}, {2, "V x", "text"}, {3, "n", "integer"}}),
            std::vector<std::string>{
                "ALTER TABLE \"public\".\"a\" RENAME COLUMN \"v\" TO \"V x\""});
}

TEST(PlanColumns, SwappedNamesGoThroughTemporaryNames) {
  const auto statements =
      Plan(kBefore, {{1, "id", "integer"}, {2, "n", "text"}, {3, "v", "integer"}});
  EXPECT_EQ(statements, (std::vector<std::string>{
                            "ALTER TABLE \"public\".\"a\" RENAME COLUMN \"n\" TO \"dblog_tmp_dblog_3\"",
                            "ALTER TABLE \"public\".\"a\" RENAME COLUMN \"v\" TO \"dblog_tmp_dblog_2\"",
                            "ALTER TABLE \"public\".\"a\" RENAME COLUMN \"dblog_tmp_dblog_3\" TO \"v\"",
                            "ALTER TABLE \"public\".\"a\" RENAME COLUMN \"dblog_tmp_dblog_2\" TO \"n\""}));
}

TEST(PlanColumns, DroppedColumnsAreDroppedOrKept) {
  EXPECT_EQ(Plan(kBefore, {{1, "id", "integer"}, {2, "v", "text"}}),
            std::vector<std::string>{"ALTER TABLE \"public\".\"a\" DROP COLUMN \"n\""});
  const ColumnPlan kept = PlanColumns(kBefore, Rel({{1, "id", "integer"}, {2, "v", "text"}}),
                                      kTable, Types(kBefore), DroppedColumns::kKeep, false);
  EXPECT_EQ(kept.statements, std::vector<std::string>{
                                 "ALTER TABLE \"public\".\"a\" ALTER COLUMN \"n\" DROP NOT NULL"});
  ASSERT_EQ(kept.columns.size(), 3u);
  EXPECT_TRUE(kept.columns[2].dropped);
  // and a new column of its name moves it aside
  const ColumnPlan again =
      PlanColumns(kept.columns, Rel({{1, "id", "integer"}, {2, "v", "text"}, {4, "n", "text"}}),
                  kTable, Types(kBefore), DroppedColumns::kKeep, false);
  EXPECT_EQ(again.statements, std::vector<std::string>{
                                  "ALTER TABLE \"public\".\"a\" RENAME COLUMN \"n\" TO \"n_dblog_3\""});
  EXPECT_EQ(again.added, std::vector<std::string>{"n"});
  ASSERT_EQ(again.columns.size(), 4u);
  EXPECT_EQ(again.columns[2].name, "n_dblog_3");
}

TEST(PlanColumns, TypeChangesWidenTheTargetOrStop) {
  // the target already holds the new type: nothing
  EXPECT_TRUE(Plan(kBefore, {{1, "id", "integer"}, {2, "v", "character varying(20)"},
                             {3, "n", "integer"}})
                  .empty());
  // integer -> bigint: widened
  EXPECT_EQ(Plan(kBefore, {{1, "id", "integer"}, {2, "v", "text"}, {3, "n", "bigint"}}),
            std::vector<std::string>{"ALTER TABLE \"public\".\"a\" ALTER COLUMN \"n\" TYPE bigint"
                                     " USING \"n\"::bigint"});
  // integer -> text: neither holds the other losslessly by the classifier: stops
  EXPECT_THROW(Plan(kBefore, {{1, "id", "integer"}, {2, "v", "text"}, {3, "n", "text"}}),
               SchemaError);
  // unless lossy columns are allowed (TargetTables::Prepare warns then)
  EXPECT_NO_THROW(PlanColumns(kBefore, Rel({{1, "id", "integer"}, {2, "v", "text"}, {3, "n", "text"}}),
                              kTable, Types(kBefore), DroppedColumns::kDrop, true));
}

// Found by the oracle's failover seeds (issue 24): the target had applied `ADD COLUMN c89 text`
// (attnum 3 here) on a primary that then died before its standby received it; the promoted
// standby gave attnum 3 to a column it added later, c94 bigint. After the reconcile the
// target stopped for good: "changed the type of column c94 from text to bigint".
TEST(PlanColumns, AfterTheSourceWentBackAnAttnumOfTheLostHistoryIsFollowedEmptied) {
  const std::vector<MappedColumn> before = {{1, "id", "integer"}, {2, "v", "text"},
                                            {3, "c89", "text"}};
  const std::vector<Col> now = {{1, "id", "integer"}, {2, "v", "text"}, {3, "c94", "bigint"}};
  // a live source never changes a column's type this way unnoticed: it still stops
  EXPECT_THROW(PlanColumns(before, Rel(now), kTable, Types(before), DroppedColumns::kDrop, false),
               SchemaError);
  const ColumnPlan plan =
      PlanColumns(before, Rel(now), kTable, Types(before), DroppedColumns::kDrop, false, true);
  EXPECT_EQ(plan.statements,
            (std::vector<std::string>{
                "ALTER TABLE \"public\".\"a\" RENAME COLUMN \"c89\" TO \"c94\"",
                "ALTER TABLE \"public\".\"a\" ALTER COLUMN \"c94\" DROP NOT NULL, "
                "ALTER COLUMN \"c94\" TYPE bigint USING NULL"}));
  ASSERT_EQ(plan.columns.size(), 3u);
  EXPECT_EQ(plan.columns[2].name, "c94");
  EXPECT_EQ(plan.columns[2].type, "bigint");
  // the same when dblog apply had left the target column wider than the source's type (text
  // for a varchar(200): it holds every value of it)
  const std::vector<MappedColumn> widened = {{1, "id", "integer"}, {2, "v", "text"},
                                             {3, "c89", "character varying(200)"}};
  auto text = Types(widened);
  text["c89"] = "text";
  EXPECT_EQ(PlanColumns(widened, Rel(now), kTable, text, DroppedColumns::kDrop, false, true)
                .statements.back(),
            "ALTER TABLE \"public\".\"a\" ALTER COLUMN \"c94\" DROP NOT NULL, "
                "ALTER COLUMN \"c94\" TYPE bigint USING NULL");
  // a target column someone made narrower than the source's type (a choice, not what dblog
  // apply keeps) is never emptied: it stops as before
  auto narrowed = Types(before);
  narrowed["c89"] = "character varying(10)";
  EXPECT_THROW(PlanColumns(before, Rel(now), kTable, narrowed, DroppedColumns::kDrop, false, true),
               SchemaError);
}

TEST(PlanColumns, ARenameOntoAColumnTheSourceDoesNotSendStops) {
  auto types = Types(kBefore);
  types["extra"] = "text";
  EXPECT_THROW(Plan(kBefore, {{1, "id", "integer"}, {2, "extra", "text"}, {3, "n", "integer"}},
                    DroppedColumns::kDrop, types),
               SchemaError);
}

TEST(PlanColumns, AColumnWithoutAttnumIsRefused) {
  EXPECT_THROW(Plan(kBefore, {{0, "id", "integer"}}), SchemaError);
}

TEST(AsideName, FitsPostgresIdentifiersWithoutCuttingACharacter) {
  EXPECT_EQ(AsideName("q", 16384), "q_dblog_16384");
  const std::string long_name(62, 'x');
  EXPECT_EQ(AsideName(long_name, 7).size(), 63u);
  const std::string e = "\xc3\xa9";  // two bytes
  EXPECT_EQ(AsideName(std::string(50, 'x') + e + e, 16384), std::string(50, 'x') + "_dblog_16384");
  EXPECT_EQ(AsideName(std::string(49, 'x') + e + e, 16384),
            std::string(49, 'x') + e + "_dblog_16384");
}

}  // namespace
}  // namespace dblog::apply
