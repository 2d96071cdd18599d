// tests/cpp/plugin_binary_test.cc: integration tests of the dblog output plugin's binary path:
// event order within a transaction, the (commit_lsn, seq) coordinates, Relation messages,
// identity keys on UPDATE and DELETE, and full row images.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "plugin_test_util.h"
#include "proto_values.h"

namespace dblog::test {
namespace {

using dblog::v1::Change;
using dblog::v1::Relation;
using dblog::v1::Row;
using dblog::v1::Value;

constexpr uint32_t kInt4Oid = 23;
constexpr uint32_t kTextOid = 25;

// Int, Text, MakeRow: proto_values.h

// Protobuf messages compare by their canonical encoding; print them readably on failure.
::testing::AssertionResult SameRow(const Row& expected, const Row& actual) {
  if (expected.SerializeAsString() == actual.SerializeAsString())
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "expected row { " << expected.ShortDebugString() << " }\n  actual row { "
         << actual.ShortDebugString() << " }";
}

// Invariants every transaction must keep: Begin first, Commit last, all coordinates agreeing,
// change seq 1..n, Commit.seq n+1, change LSNs inside the transaction.
void expect_well_formed(const Transaction& txn) {
  ASSERT_GE(txn.events.size(), 2u);
  ASSERT_TRUE(txn.events.front().event.has_begin());
  ASSERT_TRUE(txn.events.back().event.has_commit());
  const auto& begin = txn.begin();
  const auto& commit = txn.commit();
  EXPECT_NE(begin.xid(), 0u);
  EXPECT_NE(begin.commit_lsn(), 0u);
  EXPECT_NE(begin.commit_time(), 0);
  EXPECT_GT(begin.end_lsn(), begin.commit_lsn());
  EXPECT_EQ(commit.commit_lsn(), begin.commit_lsn());
  EXPECT_EQ(commit.end_lsn(), begin.end_lsn());
  EXPECT_EQ(commit.commit_time(), begin.commit_time());
  EXPECT_EQ(commit.xid(), begin.xid());

  uint32_t seq = 0;
  uint64_t last_lsn = 0;
  for (size_t i = 1; i + 1 < txn.events.size(); ++i) {
    const auto& ev = txn.events[i].event;
    EXPECT_FALSE(ev.has_begin() || ev.has_commit()) << "event " << i << " inside a transaction";
    if (!ev.has_change()) continue;
    const Change& c = ev.change();
    SCOPED_TRACE("change " + c.ShortDebugString());
    EXPECT_NE(c.kind(), Change::KIND_UNSPECIFIED);
    EXPECT_EQ(c.seq(), ++seq) << "seq must count 1, 2, 3... within the transaction";
    EXPECT_EQ(c.commit_lsn(), begin.commit_lsn());
    EXPECT_EQ(c.xid(), begin.xid());
    EXPECT_EQ(c.commit_time(), begin.commit_time());
    EXPECT_NE(c.lsn(), 0u);
    EXPECT_LT(c.lsn(), begin.commit_lsn());
    EXPECT_GE(c.lsn(), last_lsn) << "changes come in WAL order (equal LSNs are allowed)";
    last_lsn = c.lsn();
  }
  EXPECT_EQ(commit.seq(), seq + 1);
}

void expect_ordered_across(const std::vector<Transaction>& txns) {
  std::tuple<uint64_t, uint32_t> last{0, 0};
  for (const auto& txn : txns)
    for (const auto& c : txn.changes()) {
      std::tuple<uint64_t, uint32_t> pos{c.commit_lsn(), c.seq()};
      EXPECT_LT(last, pos) << "(commit_lsn, seq) must strictly increase: " << c.ShortDebugString();
      last = pos;
    }
}

class PluginBinaryTest : public DblogSlotTest {};

TEST_F(PluginBinaryTest, InsertUpdateDeleteCarryCoordinatesAndKeys) {
  db().exec("CREATE TABLE t (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO t VALUES (1, 'a')");
  db().exec("UPDATE t SET v = 'b' WHERE id = 1");
  db().exec("UPDATE t SET id = 2 WHERE id = 1");
  db().exec("DELETE FROM t WHERE id = 2");
  db().exec(
      "BEGIN; INSERT INTO t VALUES (10, 'x'); INSERT INTO t VALUES (11, 'y');"
      " UPDATE t SET v = 'z' WHERE id = 10; COMMIT");
  const uint32_t oid = std::stoul(db().scalar("SELECT 't'::regclass::oid"));

  auto txns = decode();
  ASSERT_EQ(txns.size(), 5u);
  for (const auto& txn : txns) expect_well_formed(txn);
  expect_ordered_across(txns);

  // One Relation in the whole session, placed before the table's first change.
  ASSERT_EQ(txns[0].relations().size(), 1u);
  for (size_t i = 1; i < txns.size(); ++i)
    EXPECT_TRUE(txns[i].relations().empty()) << "Relation repeated in transaction " << i;
  ASSERT_TRUE(txns[0].events[1].event.has_relation()) << "Relation must precede the change";
  const Relation rel = txns[0].relations()[0];
  EXPECT_EQ(rel.oid(), oid);
  EXPECT_EQ(rel.schema(), schema());
  EXPECT_EQ(rel.name(), "t");
  ASSERT_EQ(rel.columns_size(), 2);
  EXPECT_EQ(rel.columns(0).name(), "id");
  EXPECT_EQ(rel.columns(0).type_oid(), kInt4Oid);
  EXPECT_EQ(rel.columns(0).type_name(), "integer");
  EXPECT_EQ(rel.columns(0).attnum(), 1u);
  EXPECT_TRUE(rel.columns(0).not_null());
  EXPECT_EQ(rel.columns(1).name(), "v");
  EXPECT_EQ(rel.columns(1).type_oid(), kTextOid);
  EXPECT_EQ(rel.columns(1).attnum(), 2u);
  EXPECT_FALSE(rel.columns(1).not_null());
  EXPECT_EQ(rel.replica_identity(), "d");
  ASSERT_EQ(rel.key_columns_size(), 1);
  EXPECT_EQ(rel.key_columns(0), 0u);

  for (const auto& txn : txns)
    for (const auto& c : txn.changes()) EXPECT_EQ(c.relation_oid(), oid);

  // INSERT: the new row, no key, no old row.
  auto c = txns[0].changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind(), Change::INSERT);
  EXPECT_TRUE(SameRow(MakeRow({Int(1), Text("a")}), c[0].new_row()));
  EXPECT_FALSE(c[0].has_old_key());
  EXPECT_FALSE(c[0].has_old_row());

  // UPDATE of a non-key column: old_key equals the key of the new row.
  c = txns[1].changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind(), Change::UPDATE);
  EXPECT_TRUE(SameRow(MakeRow({Int(1), Text("b")}), c[0].new_row()));
  EXPECT_TRUE(SameRow(MakeRow({Int(1)}), c[0].old_key()));
  EXPECT_FALSE(c[0].has_old_row());

  // UPDATE of the key: old_key has the OLD key, new_row the new one.
  c = txns[2].changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind(), Change::UPDATE);
  EXPECT_TRUE(SameRow(MakeRow({Int(2), Text("b")}), c[0].new_row()));
  EXPECT_TRUE(SameRow(MakeRow({Int(1)}), c[0].old_key()));

  // DELETE: the old key only.
  c = txns[3].changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind(), Change::DELETE);
  EXPECT_TRUE(SameRow(MakeRow({Int(2)}), c[0].old_key()));
  EXPECT_FALSE(c[0].has_new_row());
  EXPECT_FALSE(c[0].has_old_row());

  // Several changes in one transaction.
  c = txns[4].changes();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].kind(), Change::INSERT);
  EXPECT_TRUE(SameRow(MakeRow({Int(10), Text("x")}), c[0].new_row()));
  EXPECT_EQ(c[1].kind(), Change::INSERT);
  EXPECT_TRUE(SameRow(MakeRow({Int(11), Text("y")}), c[1].new_row()));
  EXPECT_EQ(c[2].kind(), Change::UPDATE);
  EXPECT_TRUE(SameRow(MakeRow({Int(10), Text("z")}), c[2].new_row()));
  EXPECT_TRUE(SameRow(MakeRow({Int(10)}), c[2].old_key()));
}

TEST_F(PluginBinaryTest, CompositeKeyIsSentInKeyOrder) {
  db().exec("CREATE TABLE t (a int, b text, c int, PRIMARY KEY (b, a))");
  db().exec("INSERT INTO t VALUES (1, 'x', 3)");
  db().exec("UPDATE t SET c = 4");
  db().exec("UPDATE t SET a = 2");
  db().exec("DELETE FROM t");

  auto txns = decode();
  ASSERT_EQ(txns.size(), 4u);
  for (const auto& txn : txns) expect_well_formed(txn);
  expect_ordered_across(txns);

  ASSERT_EQ(txns[0].relations().size(), 1u);
  const Relation rel = txns[0].relations()[0];
  ASSERT_EQ(rel.key_columns_size(), 2);
  EXPECT_EQ(rel.key_columns(0), 1u) << "b is the first key column";
  EXPECT_EQ(rel.key_columns(1), 0u);
  EXPECT_TRUE(rel.columns(0).not_null());
  EXPECT_TRUE(rel.columns(1).not_null());
  EXPECT_FALSE(rel.columns(2).not_null());

  auto c = txns[1].changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(SameRow(MakeRow({Int(1), Text("x"), Int(4)}), c[0].new_row()));
  EXPECT_TRUE(SameRow(MakeRow({Text("x"), Int(1)}), c[0].old_key()));

  c = txns[2].changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(SameRow(MakeRow({Int(2), Text("x"), Int(4)}), c[0].new_row()));
  EXPECT_TRUE(SameRow(MakeRow({Text("x"), Int(1)}), c[0].old_key()));

  c = txns[3].changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind(), Change::DELETE);
  EXPECT_TRUE(SameRow(MakeRow({Text("x"), Int(2)}), c[0].old_key()));
}

TEST_F(PluginBinaryTest, DroppedColumnsAreNotSent) {
  db().exec("CREATE TABLE t (id int PRIMARY KEY, gone int, v text)");
  db().exec("ALTER TABLE t DROP COLUMN gone");
  db().exec("INSERT INTO t VALUES (1, 'a')");

  auto txns = decode();
  ASSERT_EQ(txns.size(), 1u);
  expect_well_formed(txns[0]);
  ASSERT_EQ(txns[0].relations().size(), 1u);
  const Relation rel = txns[0].relations()[0];
  ASSERT_EQ(rel.columns_size(), 2);
  EXPECT_EQ(rel.columns(1).name(), "v");
  EXPECT_EQ(rel.columns(1).attnum(), 3u);
  auto c = txns[0].changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(SameRow(MakeRow({Int(1), Text("a")}), c[0].new_row()));
}

TEST_F(PluginBinaryTest, RelationIsResentAfterDdlAndInANewSession) {
  db().exec("CREATE TABLE t (id int PRIMARY KEY)");
  db().exec("INSERT INTO t VALUES (1)");
  db().exec("INSERT INTO t VALUES (2)");
  db().exec("ALTER TABLE t ADD COLUMN v text");
  db().exec("INSERT INTO t VALUES (3, 'c')");

  auto txns = decode();
  ASSERT_EQ(txns.size(), 3u);
  ASSERT_EQ(txns[0].relations().size(), 1u);
  EXPECT_EQ(txns[0].relations()[0].columns_size(), 1);
  EXPECT_TRUE(txns[1].relations().empty());
  ASSERT_EQ(txns[2].relations().size(), 1u) << "the ALTER must cause a new Relation";
  EXPECT_TRUE(txns[2].events[1].event.has_relation());
  EXPECT_EQ(txns[2].relations()[0].columns_size(), 2);
  ASSERT_EQ(txns[2].changes().size(), 1u);
  EXPECT_TRUE(SameRow(MakeRow({Int(3), Text("c")}), txns[2].changes()[0].new_row()));

  db().exec("INSERT INTO t VALUES (4, 'd')");
  txns = decode();
  ASSERT_EQ(txns.size(), 1u);
  ASSERT_EQ(txns[0].relations().size(), 1u) << "a new decoding session describes it again";
  EXPECT_EQ(txns[0].relations()[0].columns_size(), 2);
}

// S-IMG: an UPDATE that leaves an out-of-line TOASTed value alone does not carry it in the WAL.
// With the default replica identity it must be marked unchanged, never invented; with
// REPLICA IDENTITY FULL the old tuple has it and the new row must be complete.
TEST_F(PluginBinaryTest, UnchangedToastIsMarkedOrTakenFromFullOldRow) {
  const std::string big(10000, 'x');
  db().exec(
      "CREATE TABLE d (id int PRIMARY KEY, big text, n int);"
      "ALTER TABLE d ALTER COLUMN big SET STORAGE EXTERNAL;"
      "CREATE TABLE f (id int PRIMARY KEY, big text, n int);"
      "ALTER TABLE f ALTER COLUMN big SET STORAGE EXTERNAL;"
      "ALTER TABLE f REPLICA IDENTITY FULL");
  db().exec("INSERT INTO d VALUES (1, repeat('x', 10000), 0)");
  db().exec("INSERT INTO f VALUES (1, repeat('x', 10000), 0)");
  db().exec("UPDATE d SET n = 1");
  db().exec("UPDATE f SET n = 1");

  auto txns = decode();
  ASSERT_EQ(txns.size(), 4u);
  for (const auto& txn : txns) expect_well_formed(txn);

  auto c = txns[0].changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(SameRow(MakeRow({Int(1), Text(big), Int(0)}), c[0].new_row()));

  Value unchanged;
  unchanged.set_unchanged(true);
  c = txns[2].changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].kind(), Change::UPDATE);
  EXPECT_TRUE(SameRow(MakeRow({Int(1), unchanged, Int(1)}), c[0].new_row()));
  EXPECT_TRUE(SameRow(MakeRow({Int(1)}), c[0].old_key()));
  EXPECT_FALSE(c[0].has_old_row());

  ASSERT_EQ(txns[1].relations().size(), 1u);
  EXPECT_EQ(txns[1].relations()[0].replica_identity(), "f");
  c = txns[3].changes();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(SameRow(MakeRow({Int(1), Text(big), Int(1)}), c[0].new_row()));
  EXPECT_TRUE(SameRow(MakeRow({Int(1)}), c[0].old_key()));
  EXPECT_TRUE(SameRow(MakeRow({Int(1), Text(big), Int(0)}), c[0].old_row()));
}

}  // namespace
}  // namespace dblog::test
