// tests/cpp/pgoutput/pgoutput_values_test.cc: representation agreement (the paper's O5) in
// pgoutput mode, over the whole type matrix, on every server major dblog targets (15 to 18).
// For a table with a column of every built-in type a user table can hold (and enums, domains,
// domains over domains, composites, arrays of each, a user range), rows of ordinary values,
// NULLs, extremes, BC dates, infinities, NaNs and values past an int64 count of microseconds:
//   - the log path (pgoutput, `binary 'false'`, on a replication connection pinning
//     pgoutput::kOutputSettings) and the copy paths (COPY TO STDOUT in text format, read by
//     pgoutput::CopyTextParser, as a bootstrap will; and a query's text results, as a repair
//     chunk will), on sessions pinning the same, give the same text to the one converter
//     (pgoutput::FromText), and the Rows it makes are equal byte for byte;
//   - on 15, where the extension is installed, those Rows equal dblog.encode_row(t) of the
//     same row byte for byte: this mode sends what the extension mode sends. The one difference
//     (a NaN with its sign bit set arrives as the quiet NaN, docs/pgoutput.md) is asserted as
//     such, so that it cannot grow unseen.
// A major whose binaries are absent is skipped with the command that fetches them.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "pg_test_util.h"
#include "pgoutput/copy_text.h"
#include "pgoutput/decoder.h"
#include "pgoutput/values.h"
#include "server_util.h"

namespace {

namespace po = dblog::pgoutput;
using dblog::test::Cluster;
using dblog::test::PgConn;
using dblog::test::Read;
using dblog::v1::Row;
using dblog::v1::Value;

constexpr const char* kTypesSql = R"sql(
  CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
  CREATE DOMAIN posint AS int4 CHECK (VALUE > 0);
  CREATE DOMAIN posint2 AS posint;
  CREATE DOMAIN short_text AS varchar(20);
  CREATE DOMAIN ts_domain AS timestamptz;
  CREATE TYPE pair AS (n int4, f float8, s text, d posint);
  CREATE TYPE floatrange AS RANGE (subtype = float8);
  CREATE TABLE all_types (
    id int4 PRIMARY KEY,
    c_bool bool, c_int2 int2, c_int4 int4, c_int8 int8, c_oid oid,
    c_float4 float4, c_float8 float8, c_numeric numeric, c_numeric_t numeric(10,2),
    c_money money,
    c_text text, c_varchar varchar(10), c_char char(5), c_char1 "char", c_name name,
    c_bytea bytea, c_uuid uuid,
    c_date date, c_time time, c_timetz timetz, c_ts timestamp, c_tstz timestamptz,
    c_ts3 timestamp(3), c_interval interval,
    c_json json, c_jsonb jsonb, c_jsonpath jsonpath, c_xml xml,
    c_inet inet, c_cidr cidr, c_macaddr macaddr, c_macaddr8 macaddr8,
    c_bit bit(4), c_varbit varbit,
    c_point point, c_line line, c_lseg lseg, c_box box, c_path path, c_polygon polygon,
    c_circle circle,
    c_tsvector tsvector, c_tsquery tsquery,
    c_int4range int4range, c_int8range int8range, c_numrange numrange, c_tsrange tsrange,
    c_tstzrange tstzrange, c_daterange daterange, c_multirange int4multirange,
    c_floatrange floatrange,
    c_pg_lsn pg_lsn, c_snapshot pg_snapshot, c_txid txid_snapshot,
    c_int4s int4[], c_texts text[], c_matrix int4[], c_lower int4[], c_tstzs timestamptz[],
    c_byteas bytea[], c_moods mood[], c_pairs pair[], c_float8s float8[],
    c_domain posint, c_domain2 posint2, c_short short_text, c_tsdomain ts_domain,
    c_enum mood, c_pair pair,
    c_wide text, c_wide_ext text);
  ALTER TABLE all_types ALTER COLUMN c_wide_ext SET STORAGE EXTERNAL;
  CREATE PUBLICATION pub FOR TABLE all_types;
)sql";

// The rows; each its own transaction. Row 4 holds the one documented difference.
const std::vector<std::string> kRows = {
    // 1: ordinary values of every type; c_wide compresses inline, c_wide_ext is out of line.
    R"sql(INSERT INTO all_types VALUES (1, true, -32768, 2147483647, -9223372036854775808,
      4294967295, 1.5, 0.1, '12345678901234567890.123456789012345678901234567890', 12.5,
      '1234.56', 'héllo ☃ "q" \ x', 'abc', 'ab', 'z', 'nm', '\x00ff10',
      'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29', '12:00:01.5', '12:00:01+05:30',
      '2024-02-29 12:34:56.789012', '2024-02-29 12:34:56.789012+02', '2024-02-29 12:34:56.789',
      '1 year 2 mons 3 days 04:05:06.789', '{"b": 1,  "a": [1,2]}', '{"b": 1,  "a": [1,2]}',
      '$.a[*] ? (@ > 1)', '<a x="1">t</a>', '192.168.0.1/24', '10.0.0.0/8',
      '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', B'1010', B'101', '(1.5,-2)',
      '{1,-1,0.5}', '[(0,0),(1,1)]', '((0,0),(1,1))', '[(0,0),(1,1),(2,0)]',
      '((0,0),(1,1),(2,0))', '<(0,0),1.5>', 'a fat:2 cat', 'fat & !cat', '[1,10)',
      '(,5]', '[1.5,2.5]', '[2024-01-01 00:00,2024-01-02 00:00)',
      '[2024-01-01 00:00+00,infinity)', '[2024-01-01,2024-02-01)', '{[1,3),[5,7)}',
      '[0.1,0.3)', '16/B374D848', '10:20:10,14,15', '10:20:10,14,15', '{1,2,3}',
      ARRAY['a', 'b c', NULL, '"q"', 'NULL', ''], '{{1,2},{3,4}}', '[0:1]={7,8}',
      ARRAY['2024-02-29 12:34:56.789012+02'::timestamptz], ARRAY['\x00ff'::bytea],
      '{happy,sad}', ARRAY[ROW(1, 0.5, 'x,y', 3)::pair, NULL], '{0.1,NaN,-Infinity}',
      7, 8, 'short', '2024-02-29 12:34:56+00', 'happy', ROW(1, 1.0::float8 / 3, 'x y', 2),
      repeat('x', 100000), repeat('y', 5000)))sql",
    // 2: NULL in every column but the key.
    "INSERT INTO all_types (id) VALUES (2)",
    // 3: NaNs, infinities, empty arrays and ranges, a compressed out-of-line value.
    "INSERT INTO all_types (id, c_float4, c_float8, c_numeric, c_date, c_ts, c_tstz, c_interval,"
    " c_int4s, c_texts, c_int4range, c_multirange, c_tsrange, c_floatrange, c_wide)"
    " VALUES (3, 'NaN', 'NaN', 'NaN', 'infinity', 'infinity', '-infinity',"
    " @INFINITE_INTERVAL@,"
    " '{}', '{}', 'empty', '{}', '(,)', '(-Infinity,NaN]',"
    " (SELECT string_agg(md5(i::text) || repeat('-', 64), '') FROM generate_series(1, 1000) i))",
    // 4: negative zeros; a NaN with its sign bit set (the documented difference).
    "INSERT INTO all_types (id, c_float4, c_float8, c_numeric, c_int4s)"
    " VALUES (4, -('NaN'::float4), -('NaN'::float8), '-0.000', '{-0}')",
    // 5: every native value at its protobuf default, which a oneof must still carry.
    "INSERT INTO all_types (id, c_bool, c_int2, c_int4, c_int8, c_oid, c_float4, c_float8,"
    " c_text, c_varchar, c_char, c_name, c_bytea, c_uuid, c_date, c_ts, c_tstz, c_numeric,"
    " c_json, c_jsonb, c_interval, c_money, c_bit, c_varbit, c_char1, c_tsvector)"
    " VALUES (5, false, 0, 0, 0, 0, 0, 0, '', '', '', '', '\\x',"
    " '00000000-0000-0000-0000-000000000000', '1970-01-01', '1970-01-01 00:00',"
    " '1970-01-01 00:00+00', 0, 'null', '{}', '0', 0, B'0000', B'', '', '')",
    // 6: the other infinities.
    "INSERT INTO all_types (id, c_float4, c_float8, c_numeric, c_date, c_ts, c_tstz)"
    " VALUES (6, 'Infinity', '-Infinity', '-Infinity', '-infinity', '-infinity', 'infinity')",
    // 7: before 1970, BC, and the smallest values PostgreSQL accepts.
    "INSERT INTO all_types (id, c_int2, c_int4, c_float4, c_float8, c_date, c_ts, c_tstz,"
    " c_time, c_timetz, c_interval, c_money, c_tsdomain)"
    " VALUES (7, -1, -1, -3.4028235e+38, -1.7976931348623157e+308, '4714-11-24 BC',"
    " '1900-01-01 00:00:00.000001', '4714-11-24 00:00:00+00 BC', '00:00', '00:00+15:59',"
    " '-178000000 years', '-92233720368547758.08', '0044-03-15 12:00 BC')",
    // 8: the largest values: past INT64_MAX microseconds after 1970, the largest date.
    "INSERT INTO all_types (id, c_int2, c_int8, c_float4, c_float8, c_date, c_ts, c_tstz,"
    " c_time, c_timetz, c_money, c_numeric, c_pg_lsn, c_oid)"
    " VALUES (8, 32767, 9223372036854775807, 1e-45, 5e-324, '5874897-12-31',"
    " '294276-12-31 23:59:59.999999', '294276-12-31 23:59:59.999999+00', '24:00:00',"
    " '24:00:00-15:59', '92233720368547758.07', 1e1000::numeric / 3, 'FFFFFFFF/FFFFFFFF', 1)",
    // 9: text that output functions escape or quote.
    "INSERT INTO all_types (id, c_text, c_texts, c_json, c_jsonb, c_pair, c_bytea, c_xml)"
    " VALUES (9, E'tab\\there\\nnew line \\\\ back \\u00e9 \\U0001F600', "
    " ARRAY[E'a\\tb', 'x\\y', 'with \"quotes\"', ' lead', '{brace}'],"
    " '\"\\u00e9 \\ud83d\\ude00\"', '{\"k\": \"\\u00e9 \\ud83d\\ude00\", \"n\": 1e3}',"
    " ROW(NULL, 'NaN', E'\\\\ \"(,)\"', NULL), '\\x5c00', '<!-- c -->')",
};

template <typename T>
auto Bits(T f) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  U u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

struct Column {
  std::string name;
  po::ValueKind kind;
};

// The converter's Row of one tuple of text (nullopt: SQL NULL).
Row ToRow(const std::vector<Column>& columns, const std::vector<std::optional<std::string>>& cells) {
  Row row;
  EXPECT_EQ(cells.size(), columns.size());
  for (std::size_t i = 0; i < cells.size() && i < columns.size(); ++i) {
    Value* v = row.add_values();
    if (!cells[i]) {
      v->set_null_value(true);
      continue;
    }
    try {
      po::FromText(columns[i].kind, *cells[i], v);
    } catch (const po::ValueError& e) {
      ADD_FAILURE() << columns[i].name << ": " << e.what();
    }
  }
  return row;
}

// Where two Rows differ, by column name.
std::string Differences(const std::vector<Column>& columns, const Row& a, const Row& b) {
  std::string out;
  for (int i = 0; i < std::max(a.values_size(), b.values_size()); ++i) {
    const Value& x = i < a.values_size() ? a.values(i) : Value::default_instance();
    const Value& y = i < b.values_size() ? b.values(i) : Value::default_instance();
    if (x.SerializeAsString() == y.SerializeAsString()) continue;
    out += "\n  " + (i < static_cast<int>(columns.size()) ? columns[i].name : "?") + ": " +
           x.ShortDebugString() + " vs " + y.ShortDebugString();
  }
  return out;
}

class PgoutputValuesTest : public ::testing::TestWithParam<int> {};

TEST_P(PgoutputValuesTest, LogPathCopyPathsAndExtensionAgreeOnEveryType) {
  const int major = GetParam();
  Cluster cluster(major);
  if (cluster.status() == 3) {
    GTEST_SKIP() << "PostgreSQL " << major << " binaries absent: run scripts/fetch-postgres.sh "
                 << major;
  }
  ASSERT_EQ(cluster.status(), 0) << "tests/pg-cluster.sh start " << major << " failed";
  // Both connections pin the converter's settings; a third session with other settings writes.
  const std::string pinned =
      cluster.conninfo() + " options='" + po::OutputSettingsOptions() + "'";
  PgConn writer(cluster.conninfo());
  writer.exec(
      "SET DateStyle = 'SQL, DMY'; SET IntervalStyle = 'iso_8601'; SET extra_float_digits = 0;"
      " SET TimeZone = 'Asia/Kolkata'; SET bytea_output = 'escape'");
  writer.exec(kTypesSql);
  writer.exec("SELECT pg_create_logical_replication_slot('s', 'pgoutput')");
  for (std::string sql : kRows) {
    // interval has infinities from 17 on
    const std::string mark = "@INFINITE_INTERVAL@";
    if (auto at = sql.find(mark); at != std::string::npos)
      sql.replace(at, mark.size(), major >= 17 ? "'infinity'" : "'178000000 years'");
    writer.exec(sql);
  }
  writer.exec("SELECT pg_logical_emit_message(false, 'test.end', '')");

  // Each column's kind, from its type with domains resolved to their base type.
  PgConn copy(pinned);
  ASSERT_EQ(copy.scalar("SHOW DateStyle"), "ISO, YMD");
  std::vector<Column> columns;
  for (const auto& r : copy.exec(R"sql(
        SELECT a.attname, (WITH RECURSIVE d(t, base) AS (
                   SELECT a.atttypid, ty.typbasetype FROM pg_catalog.pg_type ty
                    WHERE ty.oid = a.atttypid
                   UNION ALL
                   SELECT d.base, ty.typbasetype FROM d JOIN pg_catalog.pg_type ty
                       ON ty.oid = d.base)
                 SELECT t FROM d WHERE base = 0)
          FROM pg_catalog.pg_attribute a
         WHERE a.attrelid = 'public.all_types'::pg_catalog.regclass AND a.attnum > 0
           AND NOT a.attisdropped ORDER BY a.attnum)sql"))
    columns.push_back({*r[0], po::KindOfBaseType(static_cast<std::uint32_t>(std::stoul(*r[1])))});
  ASSERT_EQ(columns.size(), 72u);

  // The copy path.
  std::map<int, Row> copied;
  for (const auto& r : copy.exec("SELECT * FROM public.all_types ORDER BY id"))
    copied[std::stoi(*r[0])] = ToRow(columns, r);
  ASSERT_EQ(copied.size(), kRows.size());

  // The COPY path: each CopyData cut in two, so that rows span pieces.
  std::map<int, Row> copied_out;
  {
    PGresult* res = PQexec(copy.raw(), "COPY (SELECT * FROM public.all_types) TO STDOUT");
    ASSERT_EQ(PQresultStatus(res), PGRES_COPY_OUT) << PQerrorMessage(copy.raw());
    PQclear(res);
    po::CopyTextParser parser;
    po::Cells cells;
    char* buf = nullptr;
    int n, pieces = 0;
    while ((n = PQgetCopyData(copy.raw(), &buf, 0)) > 0) {
      const std::string_view data(buf, static_cast<std::size_t>(n));
      const std::size_t cut = (static_cast<std::size_t>(pieces++) * 7919) % data.size();
      parser.Feed(data.substr(0, cut));
      while (parser.Next(&cells)) copied_out[std::stoi(*cells.at(0))] = ToRow(columns, cells);
      parser.Feed(data.substr(cut));
      while (parser.Next(&cells)) copied_out[std::stoi(*cells.at(0))] = ToRow(columns, cells);
      PQfreemem(buf);
    }
    EXPECT_FALSE(parser.pending());
    while ((res = PQgetResult(copy.raw())) != nullptr) {
      EXPECT_EQ(PQresultStatus(res), PGRES_COMMAND_OK);
      PQclear(res);
    }
  }
  ASSERT_EQ(copied_out.size(), kRows.size());

  // The log path.
  Read read = dblog::test::ReadSlot(pinned, "s",
                                    {{"proto_version", "1"},
                                     {"publication_names", "pub"},
                                     {"messages", "true"},
                                     {"binary", "false"}},
                                    {1, false});
  ASSERT_EQ(read.error, "");
  std::map<int, Row> logged;
  for (const po::LogicalMessage& m : read.messages) {
    if (const auto* rel = std::get_if<po::Relation>(&m)) {
      ASSERT_EQ(rel->columns.size(), columns.size());
      for (std::size_t i = 0; i < columns.size(); ++i)
        EXPECT_EQ(rel->columns[i].name, columns[i].name);
    }
    const auto* ins = std::get_if<po::Insert>(&m);
    if (ins == nullptr) continue;
    std::vector<std::optional<std::string>> cells;
    for (const po::Datum& d : ins->new_tuple) {
      ASSERT_NE(d.kind, po::Datum::Kind::kBinary);
      ASSERT_NE(d.kind, po::Datum::Kind::kUnchanged) << "an INSERT carries every value";
      cells.push_back(d.kind == po::Datum::Kind::kNull ? std::nullopt
                                                        : std::optional<std::string>(d.bytes));
    }
    const int id = std::stoi(*cells.at(0));
    EXPECT_EQ(logged.count(id), 0u) << "row " << id << " logged twice";
    logged[id] = ToRow(columns, cells);
  }
  ASSERT_EQ(logged.size(), kRows.size());

  for (const auto& [id, row] : copied) {
    SCOPED_TRACE("PostgreSQL " + std::to_string(major) + ", row " + std::to_string(id));
    EXPECT_EQ(row.SerializeAsString(), logged[id].SerializeAsString())
        << "the log path and the query path differ:" << Differences(columns, logged[id], row);
    EXPECT_EQ(copied_out[id].SerializeAsString(), logged[id].SerializeAsString())
        << "the log path and the COPY path differ:"
        << Differences(columns, logged[id], copied_out[id]);
  }
  // The converter kept the native kinds (not every value a literal).
  const Row& r1 = copied[1];
  EXPECT_EQ(r1.values(1).kind_case(), Value::kBoolValue);
  EXPECT_EQ(r1.values(3).int_value(), 2147483647);
  EXPECT_EQ(copied[4].values(7).kind_case(), Value::kFloat8Value);
  EXPECT_EQ(Bits(copied[4].values(7).float8_value()),
            Bits(std::numeric_limits<double>::quiet_NaN()))
      << "a NaN arrives as the quiet NaN";

  if (major != 15) return;
  // 15 has the extension (tests/run.sh installs it): this mode sends what it sends.
  writer.exec("CREATE EXTENSION dblog");
  std::map<int, Row> encoded;
  for (const auto& r : writer.exec_binary(
           "SELECT id::text, dblog.encode_row(t) FROM public.all_types t ORDER BY id")) {
    Row row;
    ASSERT_TRUE(row.ParseFromString(*r[1]));
    encoded[std::stoi(*r[0])] = row;
  }
  ASSERT_EQ(encoded.size(), kRows.size());
  // The documented difference: the sign bit of a NaN (row 4's c_float4 and c_float8).
  const int f4 = 6, f8 = 7;
  ASSERT_EQ(columns[f4].name, "c_float4");
  ASSERT_EQ(columns[f8].name, "c_float8");
  Row& e4 = encoded[4];
  EXPECT_EQ(Bits(e4.values(f4).float4_value()), Bits(-std::numeric_limits<float>::quiet_NaN()));
  EXPECT_EQ(Bits(e4.values(f8).float8_value()), Bits(-std::numeric_limits<double>::quiet_NaN()));
  e4.mutable_values(f4)->set_float4_value(std::numeric_limits<float>::quiet_NaN());
  e4.mutable_values(f8)->set_float8_value(std::numeric_limits<double>::quiet_NaN());
  for (const auto& [id, row] : encoded) {
    SCOPED_TRACE("row " + std::to_string(id));
    EXPECT_EQ(row.SerializeAsString(), logged[id].SerializeAsString())
        << "pgoutput mode and the extension's encoder differ:"
        << Differences(columns, logged[id], row);
  }
}

INSTANTIATE_TEST_SUITE_P(Majors, PgoutputValuesTest, ::testing::Values(15, 16, 17, 18),
                         [](const auto& info) { return "pg" + std::to_string(info.param); });

}  // namespace
