// tests/cpp/apply/statements_test.cc: the applier's SQL text (client/apply/statements.h),
// without a database: quoting, casts, parameter order, the key-dedup form for keys that are not
// byte-equal, and malformed rows refused. That the statements do the right thing in a real
// target is applier_test's and apply_e2e_test's.
#include <gtest/gtest.h>

#include "client/apply/statements.h"
#include "proto_values.h"

namespace dblog::apply {
namespace {

struct Col {
  std::string name;
  std::string type;
  std::uint32_t oid;
};

dblog::v1::Relation Rel(const std::vector<Col>& columns, const std::vector<std::uint32_t>& keys) {
  dblog::v1::Relation r;
  r.set_oid(16400);
  r.set_schema("app");
  r.set_name("t");
  for (const auto& c : columns) {
    auto* col = r.add_columns();
    col->set_name(c.name);
    col->set_type_name(c.type);
    col->set_type_oid(c.oid);
  }
  for (auto k : keys) r.add_key_columns(k);
  return r;
}

using dblog::test::Int;
using dblog::test::MakeRow;
using dblog::test::Text;
using dblog::test::Unchanged;

const TableRef kTable{"\"app\".\"t\"", "app.t"};

TEST(Statements, TypeOidsNameTheCatalogsOids) {
  EXPECT_TRUE(ByteEqualKeyType(type_oid::kInt4));
  EXPECT_TRUE(ByteEqualKeyType(23));
  EXPECT_TRUE(ByteEqualKeyType(type_oid::kUuid));
  EXPECT_FALSE(ByteEqualKeyType(1700));  // numeric: 1.0 = 1.00
  EXPECT_FALSE(ByteEqualKeyType(701));   // float8: 0 = -0
  EXPECT_FALSE(ByteEqualKeyType(1042));  // bpchar: trailing blanks
}

TEST(Statements, TableStatementsQuoteCastAndKeepKeyOrder) {
  // key (b, "Id"), in that order; a column name that needs quoting
  const auto rel =
      Rel({{"Id", "integer", 23}, {"v x", "text", 25}, {"b", "bigint", 20}}, {2, 0});
  const TableStatements s = BuildTableStatements(rel, kTable.quoted);
  EXPECT_EQ(s.upsert_one,
            "INSERT INTO \"app\".\"t\" (\"Id\", \"v x\", \"b\") OVERRIDING SYSTEM VALUE VALUES "
            "($1::integer, $2::text, $3::bigint) ON CONFLICT (\"b\", \"Id\") DO UPDATE SET "
            "\"v x\" = EXCLUDED.\"v x\"");
  EXPECT_EQ(s.upsert,
            "INSERT INTO \"app\".\"t\" (\"Id\", \"v x\", \"b\") OVERRIDING SYSTEM VALUE SELECT "
            "u.c0::integer AS c0, u.c1::text AS c1, u.c2::bigint AS c2 FROM unnest($1::text[], "
            "$2::text[], $3::text[]) AS u(c0, c1, c2) ON CONFLICT (\"b\", \"Id\") DO UPDATE SET "
            "\"v x\" = EXCLUDED.\"v x\"");
  EXPECT_EQ(s.remove_one, "DELETE FROM \"app\".\"t\" WHERE \"b\" = $1::bigint AND \"Id\" = $2::integer");
  EXPECT_EQ(s.remove,
            "DELETE FROM \"app\".\"t\" AS t USING unnest($1::text[], $2::text[]) AS u(c0, c1) "
            "WHERE t.\"b\" = u.c0::bigint AND t.\"Id\" = u.c1::integer");
  EXPECT_EQ(s.copy, "COPY \"app\".\"t\" (\"Id\", \"v x\", \"b\") FROM STDIN");
}

TEST(Statements, KeysThatAreNotByteEqualKeepTheLastRowPerKeyInPostgres) {
  const auto rel = Rel({{"k", "numeric", 1700}, {"v", "text", 25}}, {0});
  EXPECT_FALSE(ByteEqualKeys(rel));
  const TableStatements s = BuildTableStatements(rel, kTable.quoted);
  EXPECT_NE(s.upsert.find("SELECT DISTINCT ON (s.c0) s.c0, s.c1 FROM (SELECT u.c0::numeric AS c0,"
                          " u.c1::text AS c1, u.ord FROM unnest($1::text[], $2::text[]) WITH"
                          " ORDINALITY AS u(c0, c1, ord)) AS s ORDER BY s.c0, s.ord DESC"),
            std::string::npos)
      << s.upsert;
}

TEST(Statements, AKeyOnlyTableUpsertsDoNothingOnConflict) {
  const TableStatements s = BuildTableStatements(Rel({{"id", "integer", 23}}, {0}), kTable.quoted);
  EXPECT_NE(s.upsert_one.find("ON CONFLICT (\"id\") DO NOTHING"), std::string::npos);
}

TEST(Statements, UpdateKeepingUnchangedSetsOnlyWhatChanged) {
  const auto rel = Rel({{"id", "integer", 23}, {"a", "text", 25}, {"big", "text", 25}}, {0});
  const UpdateStatement u =
      BuildUpdateKeepingUnchanged(rel, kTable, MakeRow({Int(7), Text("x"), Unchanged()}));
  EXPECT_FALSE(u.check_only);
  EXPECT_EQ(u.statement.sql,
            "UPDATE \"app\".\"t\" SET \"a\" = $1::text WHERE \"id\" = $2::integer");
  EXPECT_EQ(u.statement.params, (TextParams{"x", "7"}));
  // nothing but unchanged values besides the key: only look for the row
  const UpdateStatement check =
      BuildUpdateKeepingUnchanged(rel, kTable, MakeRow({Int(7), Unchanged(), Unchanged()}));
  EXPECT_TRUE(check.check_only);
  EXPECT_EQ(check.statement.sql, "SELECT FROM \"app\".\"t\" WHERE \"id\" = $1::integer");
  EXPECT_THROW(BuildUpdateKeepingUnchanged(rel, kTable, MakeRow({Int(7)})), StreamError);
  EXPECT_THROW(BuildUpdateKeepingUnchanged(rel, kTable, MakeRow({Unchanged(), Text("x"), Text("y")})),
               StreamError);
}

TEST(Statements, MoveKeepingUnchangedTakesUnchangedColumnsFromTheOldRow) {
  const auto rel = Rel({{"id", "integer", 23}, {"big", "text", 25}}, {0});
  const Statement m =
      BuildMoveKeepingUnchanged(rel, kTable, MakeRow({Int(1)}), MakeRow({Int(2), Unchanged()}));
  EXPECT_EQ(m.sql,
            "WITH old AS (DELETE FROM \"app\".\"t\" AS t WHERE t.\"id\" = $1::integer RETURNING "
            "t.*) INSERT INTO \"app\".\"t\" (\"id\", \"big\") OVERRIDING SYSTEM VALUE SELECT "
            "$2::integer, old.\"big\" FROM old ON CONFLICT (\"id\") DO UPDATE SET \"big\" = "
            "EXCLUDED.\"big\"");
  EXPECT_EQ(m.params, (TextParams{"1", "2"}));
  EXPECT_THROW(BuildMoveKeepingUnchanged(rel, kTable, MakeRow({}), MakeRow({Int(2), Unchanged()})),
               StreamError);
}

TEST(Statements, RangeDeleteBoundsCollationsAndKeptKeys) {
  const auto rel = Rel({{"a", "text", 25}, {"b", "integer", 23}, {"v", "text", 25}}, {0, 1});
  dblog::v1::ChunkBegin begin;
  *begin.mutable_from_key() = MakeRow({Text("k"), Int(1)});
  begin.set_from_inclusive(true);
  const Statement d = BuildRangeDelete(rel, kTable, begin, {" COLLATE pg_catalog.\"C\"", ""},
                                       {"{\"k\"}", "{\"1\"}"});
  EXPECT_EQ(d.sql,
            "DELETE FROM \"app\".\"t\" AS t WHERE ROW(t.\"a\" COLLATE pg_catalog.\"C\", t.\"b\") >= "
            "ROW($1::text, $2::integer) AND NOT EXISTS (SELECT 1 FROM unnest($3::text[], "
            "$4::text[]) AS u(c0, c1) WHERE t.\"a\" = u.c0::text AND t.\"b\" = u.c1::integer)");
  EXPECT_EQ(d.params, (TextParams{"k", "1", "{\"k\"}", "{\"1\"}"}));
  // a bound that is not a whole key
  *begin.mutable_to_key() = MakeRow({Text("z")});
  EXPECT_THROW(BuildRangeDelete(rel, kTable, begin, {"", ""}, {"{}", "{}"}), StreamError);
}

}  // namespace
}  // namespace dblog::apply
