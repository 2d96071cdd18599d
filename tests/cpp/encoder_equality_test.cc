// tests/cpp/encoder_equality_test.cc: the "one encoder" proof. For a table with a column of
// every type family, the new_row bytes the plugin writes for an INSERT must equal, byte for
// byte, what dblog.encode_row(t) returns for the same row on the copy path; those bytes must be
// canonical protobuf; and the natively encoded values must decode to the expected values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "plugin_test_util.h"

namespace dblog::test {
namespace {

using dblog::v1::Change;
using dblog::v1::Relation;
using dblog::v1::Row;
using dblog::v1::Value;

constexpr const char* kTypesSql = R"sql(
  CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
  CREATE DOMAIN posint AS int4 CHECK (VALUE > 0);
  CREATE TYPE pair AS (n int4, f float8, s text);
  CREATE TABLE all_types (
    id int4 PRIMARY KEY,
    c_bool bool, c_int2 int2, c_int4 int4, c_int8 int8, c_oid oid,
    c_float4 float4, c_float8 float8,
    c_text text, c_varchar varchar(10), c_char char(5), c_name name,
    c_bytea bytea, c_uuid uuid,
    c_date date, c_ts timestamp, c_tstz timestamptz, c_time time,
    c_numeric numeric, c_json json, c_jsonb jsonb, c_interval interval,
    c_int4s int4[], c_texts text[], c_tstzs timestamptz[], c_byteas bytea[],
    c_inet inet, c_domain posint, c_enum mood, c_pair pair,
    c_wide text, c_wide_ext text);
  ALTER TABLE all_types ALTER COLUMN c_wide_ext SET STORAGE EXTERNAL;
)sql";

// Row 1: ordinary values of every type. c_wide compresses inline, c_wide_ext is stored
// out of line uncompressed.
constexpr const char* kRow1 = R"sql(
  INSERT INTO all_types (id, c_bool, c_int2, c_int4, c_int8, c_oid, c_float4, c_float8,
    c_text, c_varchar, c_char, c_name, c_bytea, c_uuid, c_date, c_ts, c_tstz, c_time,
    c_numeric, c_json, c_jsonb, c_interval, c_int4s, c_texts, c_tstzs, c_byteas,
    c_inet, c_domain, c_enum, c_pair, c_wide, c_wide_ext)
  VALUES (1, true, -32768, 2147483647, -9223372036854775808, 4294967295, 1.5, 0.1,
    'héllo ☃', 'abc', 'ab', 'nm', '\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
    '2024-02-29', '2024-02-29 12:34:56.789012', '2024-02-29 12:34:56.789012+02', '12:00:01',
    '12345678901234567890.123456789012345678901234567890',
    '{"b": 1,  "a": [1,2]}', '{"b": 1,  "a": [1,2]}', '1 year 2 mons 3 days 04:05:06.789',
    '{1,2,3}', ARRAY['a', 'b c', NULL, '"q"'], ARRAY['2024-02-29 12:34:56.789012+02'::timestamptz],
    ARRAY['\x00ff'::bytea], '192.168.0.1/24', 7, 'happy', ROW(1, 1.0::float8 / 3, 'x y'),
    repeat('x', 100000), repeat('y', 5000))
)sql";

// Row 8: timestamps PostgreSQL accepts that do not fit int64 microseconds since 1970
// (PostgreSQL counts from 2000), and the largest date.
constexpr const char* kRow8 = R"sql(
  INSERT INTO all_types (id, c_date, c_ts, c_tstz) VALUES (8, '5874897-12-31',
    '294276-12-31 23:59:59.999999', '294276-12-31 23:59:59.999999+00')
)sql";

const std::vector<std::string> kOtherRows = {
    // Row 2: NULL in every column but the key.
    "INSERT INTO all_types (id) VALUES (2)",
    // Row 3: NaNs, infinities as literals, empty arrays, a value stored out of line compressed.
    "INSERT INTO all_types (id, c_float4, c_float8, c_date, c_ts, c_tstz, c_numeric, c_int4s,"
    " c_texts, c_wide) VALUES (3, 'NaN', 'NaN', 'infinity', 'infinity', '-infinity', 'NaN',"
    " '{}', '{}', (SELECT string_agg(md5(i::text) || repeat('-', 64), '')"
    " FROM generate_series(1, 1000) i))",
    // Row 4: negative zeros.
    "INSERT INTO all_types (id, c_float4, c_float8) VALUES (4, '-0', '-0')",
    // Row 5: every native value at its protobuf default, which a oneof must still carry.
    "INSERT INTO all_types (id, c_bool, c_int2, c_int4, c_int8, c_oid, c_float4, c_float8,"
    " c_text, c_varchar, c_char, c_name, c_bytea, c_uuid, c_date, c_ts, c_tstz, c_numeric,"
    " c_json, c_jsonb, c_interval) VALUES (5, false, 0, 0, 0, 0, 0, 0, '', '', '', '', '\\x',"
    " '00000000-0000-0000-0000-000000000000', '1970-01-01', '1970-01-01 00:00',"
    " '1970-01-01 00:00+00', 0, 'null', '{}', '0')",
    // Row 6: the other infinities.
    "INSERT INTO all_types (id, c_float4, c_float8, c_date, c_ts, c_tstz)"
    " VALUES (6, 'Infinity', '-Infinity', '-infinity', '-infinity', 'infinity')",
    // Row 7: before 1970, and the smallest values PostgreSQL accepts.
    "INSERT INTO all_types (id, c_date, c_ts, c_tstz) VALUES (7, '4714-11-24 BC',"
    " '1900-01-01 00:00:00.000001', '4714-11-24 00:00:00+00 BC')",
    kRow8,
};

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

uint64_t bits_of(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  return u;
}

class EncoderEqualityTest : public DblogSlotTest {
 protected:
  void SetUp() override {
    DblogSlotTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    db().exec(kTypesSql);
  }

  // Decodes the slot and checks, for every INSERT into all_types, that the plugin's raw
  // new_row bytes equal dblog.encode_row() of the same row, read through `copy_conn`, and are
  // canonical. Returns the decoded rows by id and fills column_index from the Relation.
  std::map<int64_t, Row> decode_and_compare(PgConn& copy_conn) {
    std::map<int64_t, std::string> copied;
    for (const auto& r :
         copy_conn.exec_binary("SELECT id::text, dblog.encode_row(t) FROM all_types t ORDER BY id"))
      copied[std::stoll(r.at(0).value())] = r.at(1).value();

    std::map<int64_t, Row> logged;
    for (const auto& txn : decode()) {
      for (const auto& rel : txn.relations())
        for (int i = 0; i < rel.columns_size(); ++i) column_index[rel.columns(i).name()] = i;
      for (const auto& e : txn.events) {
        if (!e.event.has_change() || e.event.change().kind() != Change::INSERT) continue;
        const Row& row = e.event.change().new_row();
        EXPECT_TRUE(e.raw_new_row.has_value());
        if (row.values_size() == 0 || !e.raw_new_row) continue;
        const int64_t id = row.values(0).int_value();
        SCOPED_TRACE("row id " + std::to_string(id));
        logged[id] = row;

        auto it = copied.find(id);
        if (it == copied.end()) {
          ADD_FAILURE() << "encode_row returned no row with this id";
          continue;
        }
        EXPECT_TRUE(BytesEqual(it->second, *e.raw_new_row))
            << "log path and copy path encode the same row differently";
        Row reparsed;
        EXPECT_TRUE(reparsed.ParseFromString(it->second)) << "encode_row output is not a Row";
        EXPECT_TRUE(BytesEqual(it->second, reparsed.SerializeAsString()))
            << "encode_row output is not canonical protobuf";
      }
    }
    EXPECT_EQ(logged.size(), copied.size()) << "every inserted row must be logged once";
    return logged;
  }

  const Value& col(const Row& row, const std::string& name) {
    auto it = column_index.find(name);
    if (it == column_index.end() || it->second >= row.values_size()) {
      ADD_FAILURE() << "no value for column " << name;
      return Value::default_instance();
    }
    return row.values(it->second);
  }

  std::map<std::string, int> column_index;
};

// Shorthands for value expectations; each names the column on failure.
#define EXPECT_KIND(row, name, expected)                 \
  EXPECT_EQ(col(row, name).kind_case(), Value::expected) \
      << name << ": " << col(row, name).ShortDebugString()
#define EXPECT_LITERAL(row, name, text)                \
  do {                                                 \
    EXPECT_KIND(row, name, kLiteral);                  \
    EXPECT_EQ(col(row, name).literal(), text) << name; \
  } while (0)

TEST_F(EncoderEqualityTest, LogAndCopyPathsAgreeOnEveryType) {
  db().exec("SET TimeZone = 'UTC'");
  db().exec(kRow1);
  for (const auto& sql : kOtherRows) db().exec(sql);
  const std::string wide3 = db().scalar("SELECT c_wide FROM all_types WHERE id = 3");
  ASSERT_EQ(db().scalar("SELECT pg_column_compression(c_wide) IS NOT NULL"
                        " AND pg_column_size(c_wide) > 2000 FROM all_types WHERE id = 3"),
            "t")
      << "row 3 must hold a compressed out-of-line value";

  auto rows = decode_and_compare(db());
  ASSERT_EQ(rows.size(), 8u);
  ASSERT_EQ(column_index.size(), 32u);

  const Row& r1 = rows[1];
  EXPECT_KIND(r1, "c_bool", kBoolValue);
  EXPECT_TRUE(col(r1, "c_bool").bool_value());
  EXPECT_EQ(col(r1, "c_int2").int_value(), -32768);
  EXPECT_EQ(col(r1, "c_int4").int_value(), 2147483647);
  EXPECT_EQ(col(r1, "c_int8").int_value(), INT64_MIN);
  EXPECT_EQ(col(r1, "c_oid").int_value(), 4294967295LL);
  EXPECT_KIND(r1, "c_float4", kFloat4Value);
  EXPECT_EQ(bits_of(col(r1, "c_float4").float4_value()), bits_of(1.5f));
  EXPECT_KIND(r1, "c_float8", kFloat8Value);
  EXPECT_EQ(bits_of(col(r1, "c_float8").float8_value()), bits_of(0.1));
  EXPECT_EQ(col(r1, "c_text").text_value(), "héllo ☃");
  EXPECT_EQ(col(r1, "c_varchar").text_value(), "abc");
  EXPECT_EQ(col(r1, "c_char").text_value(), "ab   ") << "bpchar keeps its padding";
  EXPECT_EQ(col(r1, "c_name").text_value(), "nm");
  EXPECT_EQ(col(r1, "c_bytea").bytes_value(), std::string("\x00\xff\x10", 3));
  EXPECT_EQ(col(r1, "c_uuid").uuid_value(),
            std::string("\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11", 16));
  EXPECT_KIND(r1, "c_date", kDateValue);
  EXPECT_EQ(col(r1, "c_date").date_value(), 19782);
  EXPECT_KIND(r1, "c_ts", kTimestampValue);
  EXPECT_EQ(col(r1, "c_ts").timestamp_value(), 1709210096789012LL);
  EXPECT_KIND(r1, "c_tstz", kTimestamptzValue);
  EXPECT_EQ(col(r1, "c_tstz").timestamptz_value(), 1709202896789012LL);
  EXPECT_LITERAL(r1, "c_time", "12:00:01");
  EXPECT_LITERAL(r1, "c_numeric", "12345678901234567890.123456789012345678901234567890");
  EXPECT_LITERAL(r1, "c_json", R"({"b": 1,  "a": [1,2]})");
  EXPECT_LITERAL(r1, "c_jsonb", R"({"a": [1, 2], "b": 1})");
  EXPECT_LITERAL(r1, "c_interval", "1 year 2 mons 3 days 04:05:06.789");
  EXPECT_LITERAL(r1, "c_int4s", "{1,2,3}");
  EXPECT_LITERAL(r1, "c_texts", R"({a,"b c",NULL,"\"q\""})");
  EXPECT_LITERAL(r1, "c_tstzs", R"({"2024-02-29 10:34:56.789012+00"})");
  EXPECT_LITERAL(r1, "c_byteas", R"({"\\x00ff"})");
  EXPECT_LITERAL(r1, "c_inet", "192.168.0.1/24");
  EXPECT_KIND(r1, "c_domain", kIntValue) << "a domain is encoded as its base type";
  EXPECT_EQ(col(r1, "c_domain").int_value(), 7);
  EXPECT_LITERAL(r1, "c_enum", "happy");
  EXPECT_LITERAL(r1, "c_pair", R"((1,0.3333333333333333,"x y"))");
  EXPECT_EQ(col(r1, "c_wide").text_value(), std::string(100000, 'x'));
  EXPECT_EQ(col(r1, "c_wide_ext").text_value(), std::string(5000, 'y'));

  const Row& r2 = rows[2];
  for (const auto& [name, index] : column_index) {
    if (name == "id") continue;
    EXPECT_KIND(r2, name, kNullValue);
    EXPECT_TRUE(col(r2, name).null_value()) << name;
  }

  const Row& r3 = rows[3];
  EXPECT_KIND(r3, "c_float4", kFloat4Value);
  EXPECT_TRUE(std::isnan(col(r3, "c_float4").float4_value()));
  EXPECT_KIND(r3, "c_float8", kFloat8Value);
  EXPECT_TRUE(std::isnan(col(r3, "c_float8").float8_value()));
  EXPECT_LITERAL(r3, "c_date", "infinity");
  EXPECT_LITERAL(r3, "c_ts", "infinity");
  EXPECT_LITERAL(r3, "c_tstz", "-infinity");
  EXPECT_LITERAL(r3, "c_numeric", "NaN");
  EXPECT_LITERAL(r3, "c_int4s", "{}");
  EXPECT_LITERAL(r3, "c_texts", "{}");
  EXPECT_EQ(col(r3, "c_wide").text_value(), wide3);

  const Row& r4 = rows[4];
  EXPECT_EQ(bits_of(col(r4, "c_float4").float4_value()), bits_of(-0.0f));
  EXPECT_EQ(bits_of(col(r4, "c_float8").float8_value()), bits_of(-0.0));

  const Row& r5 = rows[5];
  EXPECT_KIND(r5, "c_bool", kBoolValue);
  EXPECT_FALSE(col(r5, "c_bool").bool_value());
  for (const char* name : {"c_int2", "c_int4", "c_int8", "c_oid"}) {
    EXPECT_KIND(r5, name, kIntValue);
    EXPECT_EQ(col(r5, name).int_value(), 0) << name;
  }
  EXPECT_KIND(r5, "c_float4", kFloat4Value);
  EXPECT_EQ(bits_of(col(r5, "c_float4").float4_value()), 0u);
  EXPECT_KIND(r5, "c_float8", kFloat8Value);
  EXPECT_EQ(bits_of(col(r5, "c_float8").float8_value()), 0u);
  for (const char* name : {"c_text", "c_varchar", "c_name"}) {
    EXPECT_KIND(r5, name, kTextValue);
    EXPECT_EQ(col(r5, name).text_value(), "") << name;
  }
  EXPECT_EQ(col(r5, "c_char").text_value(), "     ");
  EXPECT_KIND(r5, "c_bytea", kBytesValue);
  EXPECT_EQ(col(r5, "c_bytea").bytes_value(), "");
  EXPECT_EQ(col(r5, "c_uuid").uuid_value(), std::string(16, '\0'));
  EXPECT_KIND(r5, "c_date", kDateValue);
  EXPECT_EQ(col(r5, "c_date").date_value(), 0);
  EXPECT_KIND(r5, "c_ts", kTimestampValue);
  EXPECT_EQ(col(r5, "c_ts").timestamp_value(), 0);
  EXPECT_KIND(r5, "c_tstz", kTimestamptzValue);
  EXPECT_EQ(col(r5, "c_tstz").timestamptz_value(), 0);
  EXPECT_LITERAL(r5, "c_numeric", "0");
  EXPECT_LITERAL(r5, "c_json", "null");
  EXPECT_LITERAL(r5, "c_jsonb", "{}");
  EXPECT_LITERAL(r5, "c_interval", "00:00:00");

  const Row& r6 = rows[6];
  EXPECT_EQ(bits_of(col(r6, "c_float4").float4_value()),
            bits_of(std::numeric_limits<float>::infinity()));
  EXPECT_EQ(bits_of(col(r6, "c_float8").float8_value()),
            bits_of(-std::numeric_limits<double>::infinity()));
  EXPECT_LITERAL(r6, "c_date", "-infinity");
  EXPECT_LITERAL(r6, "c_ts", "-infinity");
  EXPECT_LITERAL(r6, "c_tstz", "infinity");

  const Row& r7 = rows[7];
  EXPECT_EQ(col(r7, "c_date").date_value(), -2440588);
  EXPECT_EQ(col(r7, "c_ts").timestamp_value(), -2208988799999999LL);
  EXPECT_EQ(col(r7, "c_tstz").timestamptz_value(), -210866803200000000LL);

  // Finite, but past INT64_MAX microseconds after 1970: only the literal can carry them.
  const Row& r8 = rows[8];
  EXPECT_EQ(col(r8, "c_date").date_value(), 2145042905);
  EXPECT_LITERAL(r8, "c_ts", "294276-12-31 23:59:59.999999");
  EXPECT_LITERAL(r8, "c_tstz", "294276-12-31 23:59:59.999999+00");
}

// Literals are printed under fixed settings, so a copy session whose settings differ from the
// decoding session's produces the same bytes: here the log is decoded in a session with odd
// output settings and encode_row runs in a second session with other odd ones.
TEST_F(EncoderEqualityTest, LiteralsIgnoreSessionOutputSettings) {
  db().exec(
      "SET DateStyle = 'SQL, DMY'; SET IntervalStyle = 'iso_8601';"
      " SET extra_float_digits = 0; SET TimeZone = 'Asia/Kolkata';"
      " SET bytea_output = 'escape'");
  db().exec(kRow1);
  db().exec(kRow8);
  PgConn copy_conn(test_conninfo().value());
  copy_conn.exec("SET search_path = " + schema() +
                 ", public; SET DateStyle = 'German';"
                 " SET IntervalStyle = 'sql_standard'; SET extra_float_digits = -15;"
                 " SET TimeZone = 'America/St_Johns'");

  auto rows = decode_and_compare(copy_conn);
  ASSERT_EQ(rows.size(), 2u);
  const Row& r1 = rows[1];
  EXPECT_LITERAL(r1, "c_interval", "1 year 2 mons 3 days 04:05:06.789");
  EXPECT_LITERAL(r1, "c_pair", R"((1,0.3333333333333333,"x y"))");
  EXPECT_LITERAL(r1, "c_tstzs", R"({"2024-02-29 10:34:56.789012+00"})");
  EXPECT_LITERAL(r1, "c_byteas", R"({"\\x00ff"})");
  EXPECT_EQ(col(r1, "c_tstz").timestamptz_value(), 1709202896789012LL);
  const Row& r8 = rows[8];
  EXPECT_LITERAL(r8, "c_ts", "294276-12-31 23:59:59.999999");
  EXPECT_LITERAL(r8, "c_tstz", "294276-12-31 23:59:59.999999+00");
}

}  // namespace
}  // namespace dblog::test
