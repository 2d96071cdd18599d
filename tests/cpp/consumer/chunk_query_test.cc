// tests/cpp/consumer/chunk_query_test.cc: the SQL of a repair chunk (consumer/chunk_query.h),
// as text: the rules that keep user-chosen names and types from changing what it does. The
// repair and security tests run these statements against PostgreSQL.
#include "consumer/chunk_query.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace dblog::consumer {
namespace {

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::size_t Count(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

ChunkRequest Range() {
  ChunkRequest r;
  r.table = "\"my schema\".\"T\"";
  r.key_columns = {"\"t\"", "id"};
  r.key_types = {"text", "public.my_enum"};
  r.chunk_size = 2000;
  return r;
}

TEST(ChunkQuery, ColumnsGoThroughTheAliasAndRowsThroughTStar) {
  const ChunkQueries q = BuildChunkQueries(Range());
  // a column named t is t."t", never the alias itself
  EXPECT_TRUE(Has(q.rows, "dblog.encode_row(ROW(t.\"t\", t.id))")) << q.rows;
  EXPECT_TRUE(Has(q.rows, "dblog.encode_row(t.*)")) << q.rows;
  EXPECT_TRUE(Has(q.rows, "FROM ONLY \"my schema\".\"T\" t")) << q.rows;
  EXPECT_TRUE(Has(q.rows, "ORDER BY t.\"t\", t.id LIMIT 2000")) << q.rows;
}

TEST(ChunkQuery, KeyValuesUseTheTypesInputAndOutputFunctionsNeverACast) {
  ChunkRequest r = Range();
  r.has_resume = true;
  const ChunkQueries q = BuildChunkQueries(r);
  EXPECT_TRUE(Has(q.rows, "dblog._key_in(($1::jsonb)->>1, NULL::public.my_enum)")) << q.rows;
  EXPECT_TRUE(Has(q.rows, "pg_catalog.format('%s', t.id)")) << q.rows;
  // the type is named only as NULL::type, the input function's type argument
  EXPECT_EQ(Count(q.rows, "::public.my_enum"), Count(q.rows, "NULL::public.my_enum")) << q.rows;
  EXPECT_FALSE(Has(q.rows, "t.id::text")) << q.rows;
  // from/to bounds by column name (the JSON key a quoted identifier stands for)
  EXPECT_TRUE(Has(q.bounds, "dblog._key_in(($2::jsonb)->>'t', NULL::text)")) << q.bounds;
  EXPECT_TRUE(Has(q.bounds, "dblog.relation_info($4::oid)")) << q.bounds;
  // and every collatable column's collation, for ChunkBegin.key_collations
  EXPECT_TRUE(Has(q.bounds, "JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation"))
      << q.bounds;
}

TEST(ChunkQuery, OperatorsAreSchemaQualifiedAndResumeWinsOverFrom) {
  ChunkRequest r = Range();
  r.has_resume = r.has_from = r.has_to = true;
  const ChunkQueries q = BuildChunkQueries(r);
  EXPECT_TRUE(Has(q.rows, "(t.\"t\", t.id) OPERATOR(pg_catalog.>) (")) << q.rows;
  EXPECT_FALSE(Has(q.rows, "OPERATOR(pg_catalog.>=)")) << "the resume key replaces the from key";
  EXPECT_TRUE(Has(q.rows, "OPERATOR(pg_catalog.<) (")) << q.rows;
  EXPECT_FALSE(Has(q.rows, " > ") || Has(q.rows, " < ")) << "an unqualified operator: " << q.rows;

  r.has_resume = false;
  const ChunkQueries from = BuildChunkQueries(r);
  EXPECT_TRUE(Has(from.rows, "OPERATOR(pg_catalog.>=) (")) << from.rows;
}

TEST(ChunkQuery, EveryParameterIsReferencedWithoutBounds) {
  const ChunkQueries q = BuildChunkQueries(Range());
  for (const char* p : {"$1", "$2", "$3"}) EXPECT_TRUE(Has(q.rows, p)) << p << ": " << q.rows;
  EXPECT_FALSE(Has(q.rows, "OPERATOR(")) << "no bound asked, none applied: " << q.rows;
}

TEST(ChunkQuery, KeyListsJoinTheAskedKeysInOrder) {
  ChunkRequest r = Range();
  r.keys = true;
  const ChunkQueries q = BuildChunkQueries(r);
  EXPECT_TRUE(Has(q.rows, "jsonb_array_elements($1::jsonb) WITH ORDINALITY")) << q.rows;
  EXPECT_TRUE(Has(q.rows, "x.ord > $2 AND x.ord <= $3")) << q.rows;
  EXPECT_TRUE(Has(q.rows, "LEFT JOIN ONLY \"my schema\".\"T\" t ON (t.\"t\", t.id) "
                          "OPERATOR(pg_catalog.=) (a.k0, a.k1)"))
      << q.rows;
  EXPECT_TRUE(Has(q.rows, "ORDER BY a.ord")) << q.rows;
  EXPECT_TRUE(Has(q.rows, "CASE WHEN t.\"t\" IS NULL THEN NULL ELSE dblog.encode_row(t.*) END"))
      << q.rows;
}

TEST(ChunkQuery, QuotesInColumnNamesStayInsideTheirLiteral) {
  ChunkRequest r = Range();
  r.key_columns = {"\"a'b\"\"c\"", "id"};  // the column a'b"c
  r.has_from = true;
  const ChunkQueries q = BuildChunkQueries(r);
  EXPECT_TRUE(Has(q.bounds, "->>'a''b\"c'")) << q.bounds;
}

TEST(ChunkQuery, RefusesMismatchedKeys) {
  ChunkRequest r = Range();
  r.key_types.pop_back();
  EXPECT_THROW(BuildChunkQueries(r), std::invalid_argument);
  r.key_columns.clear();
  r.key_types.clear();
  EXPECT_THROW(BuildChunkQueries(r), std::invalid_argument);
}

TEST(HexList, SplitsWhatTheServerJoined) {
  // "a,b" and "\x01" hex-encoded, then NULL
  const auto parts = SplitHexList("612c62,01,-");
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], "a,b");
  EXPECT_EQ(parts[1], "\x01");
  EXPECT_EQ(parts[2], kNoType);
  EXPECT_TRUE(Has(HexList("k.key_columns"), "pg_catalog.unnest(k.key_columns)"));
}

// ---- pgoutput mode (no extension) ----

CatalogChunk Catalog() {
  CatalogChunk c;
  c.table = "\"my schema\".\"T\"";
  c.oid = 16400;
  c.columns = {"\"t\"", "id", "v"};
  c.key_columns = {"\"t\"", "id"};
  c.key_types = {25, 16500};  // text, an enum
  c.chunk_size = 300;
  return c;
}

TEST(ChunkQuery, PgoutputModeSendsKeyValuesAsParametersTypedByOidNeverAName) {
  CatalogChunk c = Catalog();
  c.after = {"x'); DROP TABLE t; --", "b"};
  c.to = {"z", "c"};
  const ParamQuery q = CatalogRowsQuery(c);
  EXPECT_TRUE(Has(q.sql, "(t.\"t\", t.id) OPERATOR(pg_catalog.>) ($1, $2)")) << q.sql;
  EXPECT_TRUE(Has(q.sql, "(t.\"t\", t.id) OPERATOR(pg_catalog.<) ($3, $4)")) << q.sql;
  EXPECT_FALSE(Has(q.sql, "DROP")) << q.sql;
  EXPECT_FALSE(Has(q.sql, "::")  && Has(q.sql, "enum")) << q.sql;
  ASSERT_EQ(q.params.size(), 4u);
  EXPECT_EQ(*q.params[0], "x'); DROP TABLE t; --");
  EXPECT_EQ(q.types, (std::vector<std::uint32_t>{25, 16500, 25, 16500}));
  const ParamQuery k = CanonicalKeyQuery({25, 23}, {"a", "1"});
  EXPECT_EQ(k.sql, "SELECT pg_catalog.format('%s', $1), pg_catalog.format('%s', $2)");
  EXPECT_EQ(k.types, (std::vector<std::uint32_t>{25, 23}));
  EXPECT_THROW(CanonicalKeyQuery({25}, {"a", "b"}), std::invalid_argument);
}

TEST(ChunkQuery, PgoutputModeStatementsReadTheTablesOwnRowsByTableoid) {
  // t.tableoid: a view swapped in under the name needs a column of that name, and only the
  // checked table's rows are kept
  CatalogChunk c = Catalog();
  const ParamQuery range = CatalogRowsQuery(c);
  EXPECT_EQ(range.sql, "SELECT t.\"t\", t.id, t.v FROM ONLY \"my schema\".\"T\" t WHERE "
                       "t.tableoid OPERATOR(pg_catalog.=) 16400::pg_catalog.oid ORDER BY "
                       "t.\"t\", t.id LIMIT 300");
  EXPECT_TRUE(range.params.empty());
  c.keys = true;
  c.asked = {{"a", "b"}, {"c", "d"}};
  const ParamQuery keys = CatalogRowsQuery(c);
  EXPECT_TRUE(Has(keys.sql, "(VALUES (1, $1, $2), (2, $3, $4)) AS a(ord, k0, k1)")) << keys.sql;
  EXPECT_TRUE(Has(keys.sql, "LEFT JOIN ONLY \"my schema\".\"T\" t ON (t.\"t\", t.id) "
                            "OPERATOR(pg_catalog.=) (a.k0, a.k1) AND t.tableoid "
                            "OPERATOR(pg_catalog.=) 16400::pg_catalog.oid ORDER BY a.ord"))
      << keys.sql;
  EXPECT_EQ(keys.params.size(), 4u);
  c.asked.clear();
  EXPECT_THROW(CatalogRowsQuery(c), std::invalid_argument);
  // every bound names every key column
  c.keys = false;
  c.after = {"only one"};
  EXPECT_THROW(CatalogRowsQuery(c), std::invalid_argument);
  // a key list's chunk stays within the protocol's 65,535 parameters
  EXPECT_EQ(KeysPerChunk(2000, 2), 2000);
  EXPECT_EQ(KeysPerChunk(100000, 3), 21845);
}

TEST(ChunkQuery, PgoutputModeKeyTextsComeFromJsonOperatorsOfPgCatalog) {
  const std::string q = KeyTextsQuery({"\"t\"", "id"});
  EXPECT_TRUE(Has(q, "($2::pg_catalog.jsonb) OPERATOR(pg_catalog.->>) 't'")) << q;
  EXPECT_TRUE(Has(q, "x.e OPERATOR(pg_catalog.->>) 'id'")) << q;
  EXPECT_EQ(Count(q, "UNION ALL"), 4u) << q;
  for (int p = 1; p <= 6; ++p) EXPECT_TRUE(Has(q, "$" + std::to_string(p))) << p;
  // the collation query of each catalog version
  EXPECT_TRUE(Has(KeyCollationsQuery(150000), "colliculocale"));
  EXPECT_TRUE(Has(KeyCollationsQuery(170000), "co.colllocale"));
  EXPECT_FALSE(Has(KeyCollationsQuery(170000), "iculocale"));
}

TEST(NextChunkRows, GrowsTwofoldAtMostUpToTheByteTargetAndTheMost) {
  constexpr std::size_t kMiB = 1u << 20;
  // 100-byte rows, 8 MiB: 83,886 would fit; each chunk at most doubles, up to `most`
  EXPECT_EQ(NextChunkRows(2000, 2000, 200000, 8 * kMiB, 32000), 4000);
  EXPECT_EQ(NextChunkRows(16000, 16000, 1600000, 8 * kMiB, 32000), 32000);
  EXPECT_EQ(NextChunkRows(32000, 32000, 3200000, 8 * kMiB, 32000), 32000);
  // 1 KiB rows: 8,192 fit, whatever the chunk before asked for
  EXPECT_EQ(NextChunkRows(32000, 32000, 32000 * 1024, 8 * kMiB, 32000), 8192);
  EXPECT_EQ(NextChunkRows(8192, 8192, 8192 * 1024, 8 * kMiB, 32000), 8192);
  // 1000-byte rows: 8,388 would fit, rounded down to a power of two (the LIMIT of a prepared
  // statement: a few sizes, not one per window)
  EXPECT_EQ(NextChunkRows(32000, 32000, 32000 * 1000, 8 * kMiB, 32000), 8192);
  EXPECT_EQ(NextChunkRows(8192, 8192, 8192 * 1100, 8 * kMiB, 32000), 4096);
  // wide rows (3 MiB each): the next chunk is one row, never none
  EXPECT_EQ(NextChunkRows(2000, 10, 30 * kMiB, 8 * kMiB, 32000), 2);
  EXPECT_EQ(NextChunkRows(2, 2, 6 * kMiB, 1 * kMiB, 32000), 1);
  // a chunk that read nothing (or a last, short one) says nothing about row sizes
  EXPECT_EQ(NextChunkRows(300, 0, 0, 8 * kMiB, 2400), 300);
  EXPECT_EQ(NextChunkRows(300, 0, 0, 8 * kMiB, 100), 100);
  // rows of under a byte on average (empty keys and rows cannot be, but the sum is what it is)
  EXPECT_EQ(NextChunkRows(10, 10, 0, 8 * kMiB, 1000000), 20);
}

}  // namespace
}  // namespace dblog::consumer
