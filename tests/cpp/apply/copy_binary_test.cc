// tests/cpp/apply/copy_binary_test.cc: the bootstrap's COPY in binary format
// (client/apply/copy_binary.h) against a real server. The oracle is the text path: random rows
// of every type with a binary form, edge values included, go into one table by COPY binary and
// into another by COPY text (AppendCopyValue), and the two tables must hold the same values; a
// numeric is also compared byte for byte with the server's own numeric_send, and every row's
// bytes read in place (wire::RowView) with the parsed row's. Plus the values with no binary form
// (the caller copies those rows as text) and fixed encodings.
#include "client/apply/copy_binary.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "client/apply/sql_text.h"
#include "pg_cluster.h"
#include "pg_test_util.h"

namespace dblog::apply {
namespace {

using dblog::test::PgConn;
using dblog::v1::Row;
using dblog::v1::Value;

std::string Hex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

std::string NumericBytes(std::string_view text) {
  std::string out;
  EXPECT_TRUE(AppendNumericBinary(out, text)) << text;
  return Hex(out);
}

TEST(CopyBinary, NumericIsWrittenAsNumericSendWritesIt) {
  // ndigits, weight, sign, dscale, then base-10000 digits, each 16 bits big-endian
  EXPECT_EQ(NumericBytes("0"), "0000000000000000");
  EXPECT_EQ(NumericBytes("0.00"), "0000000000000002");
  EXPECT_EQ(NumericBytes("-0.00"), "0000000000000002");  // zero has no sign
  EXPECT_EQ(NumericBytes("123.45"), "00020000000000020" "07b1194");
  EXPECT_EQ(NumericBytes("-0.0012"), "0001ffff40000004000c");
  EXPECT_EQ(NumericBytes("10000"), "0001000100000000" "0001");
  EXPECT_EQ(NumericBytes("NaN"), "00000000c0000000");
  EXPECT_EQ(NumericBytes("Infinity"), "00000000d0000000");
  EXPECT_EQ(NumericBytes("-Infinity"), "00000000f0000000");
  for (const char* bad : {"", "-", "1.", ".5", "1e5", "abc", "1.2.3", "+1", " 1", "--1", "nan"}) {
    std::string out = "x";
    EXPECT_FALSE(AppendNumericBinary(out, bad)) << bad;
    EXPECT_EQ(out, "x") << bad;
  }
}

Value Int(std::int64_t v) {
  Value out;
  out.set_int_value(v);
  return out;
}

TEST(CopyBinary, AValueWithoutABinaryFormLeavesTheRowToText) {
  const std::vector<BinaryType> types = {BinaryType::kInt2, BinaryType::kDate, BinaryType::kUuid};
  const auto row_of = [](Value a, Value b, Value c) {
    Row row;
    *row.add_values() = std::move(a);
    *row.add_values() = std::move(b);
    *row.add_values() = std::move(c);
    return row;
  };
  Value date;
  date.set_date_value(1);
  Value uuid;
  uuid.set_uuid_value(std::string(16, '\x01'));
  Value infinity;
  infinity.set_literal("infinity");
  Value short_uuid;
  short_uuid.set_uuid_value(std::string(15, '\x01'));
  Value null;
  null.set_null_value(true);
  Value unchanged;
  unchanged.set_unchanged(true);

  std::string out = "before";
  ASSERT_TRUE(AppendCopyBinaryRow(out, types, row_of(Int(-32768), date, uuid)));
  EXPECT_EQ(Hex(out.substr(6)), "0003" "00000002" "8000" "00000004" "ffffd534" "00000010" +
                                    Hex(std::string(16, '\x01')));
  ASSERT_TRUE(AppendCopyBinaryRow(out = "", types, row_of(Int(1), null, null)));
  EXPECT_EQ(Hex(out), "0003" "00000002" "0001" "ffffffff" "ffffffff");
  // the infinities are the receive functions' sentinels, the int32 extremes for a date
  ASSERT_TRUE(AppendCopyBinaryRow(out = "", types, row_of(Int(1), infinity, null)));
  EXPECT_EQ(Hex(out), "0003" "00000002" "0001" "00000004" "7fffffff" "ffffffff");
  infinity.set_literal("-infinity");
  ASSERT_TRUE(AppendCopyBinaryRow(out = "", types, row_of(Int(1), infinity, null)));
  EXPECT_EQ(Hex(out), "0003" "00000002" "0001" "00000004" "80000000" "ffffffff");
  Value not_a_date;
  not_a_date.set_literal("5874898-01-01");
  Value onto_the_sentinel;  // a finite date that would read as -infinity
  onto_the_sentinel.set_date_value(std::numeric_limits<std::int32_t>::min() + 10957);
  const std::vector<std::pair<Row, std::size_t>> refused = {
      {row_of(Int(32768), date, uuid), 0}, {row_of(Int(1), not_a_date, uuid), 1},
      {row_of(Int(1), onto_the_sentinel, uuid), 1}, {row_of(Int(1), date, short_uuid), 2},
      {row_of(Int(1), Int(3), uuid), 1}};
  for (const auto& [row, column] : refused) {
    out = "before";
    std::size_t failed = 99;
    EXPECT_FALSE(AppendCopyBinaryRow(out, types, row, &failed)) << row.ShortDebugString();
    EXPECT_EQ(out, "before");
    EXPECT_EQ(failed, column) << row.ShortDebugString();
  }
  Value micros;  // a finite timestamp that would read as -infinity
  micros.set_timestamp_value(std::numeric_limits<std::int64_t>::min() + 946684800000000);
  Row timestamp_row;
  *timestamp_row.add_values() = micros;
  EXPECT_FALSE(AppendCopyBinaryRow(out, {BinaryType::kTimestamp}, timestamp_row));
  Value beyond;  // beyond int64 microseconds since 1970: the stream carries it as a literal
  beyond.set_literal("294270-01-01 00:00:00");
  *timestamp_row.mutable_values(0) = beyond;
  EXPECT_FALSE(AppendCopyBinaryRow(out, {BinaryType::kTimestamp}, timestamp_row));
  out = "before";
  EXPECT_THROW(AppendCopyBinaryRow(out, types, row_of(Int(1), unchanged, uuid)),
               std::invalid_argument);
  EXPECT_EQ(out, "before");
  out = "before";
  std::size_t failed = 0;
  EXPECT_FALSE(AppendCopyBinaryRow(out, {BinaryType::kInt2}, row_of(Int(1), date, uuid), &failed))
      << "a row of another width";
  EXPECT_EQ(failed, 3u);
  EXPECT_EQ(out, "before");
  EXPECT_EQ(BinaryTypeOf(23), BinaryType::kInt4);
  EXPECT_EQ(BinaryTypeOf(19), BinaryType::kNone) << "name: namein truncates, namerecv refuses";
  EXPECT_EQ(BinaryTypeOf(1007), BinaryType::kNone) << "int4[]";
  EXPECT_EQ(BinaryTypeOf(16384), BinaryType::kNone) << "a user type";
}

// ---- against a real server -----------------------------------------------------------------

class CopyBinaryDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto ci = dblog::test::test_conninfo();
    if (!ci) GTEST_SKIP() << "DBLOG_TEST_CONNINFO is not set (tests/run.sh sets it)";
    db_ = std::make_unique<PgConn>(*ci);
    schema_ = "copy_binary_" + std::to_string(getpid());
    db_->exec("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE; CREATE SCHEMA " + schema_);
  }
  void TearDown() override {
    if (db_) db_->exec("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE");
  }

  // COPY `data` into `table` (format text or binary) on the test connection.
  void Copy(const std::string& table, bool binary, const std::string& data) {
    PGconn* c = db_->raw();
    const std::string sql = "COPY " + schema_ + "." + table + " FROM STDIN" +
                            (binary ? " (FORMAT binary)" : "");
    PGresult* r = PQexec(c, sql.c_str());
    ASSERT_EQ(PQresultStatus(r), PGRES_COPY_IN) << PQerrorMessage(c);
    PQclear(r);
    ASSERT_EQ(PQputCopyData(c, data.data(), static_cast<int>(data.size())), 1);
    ASSERT_EQ(PQputCopyEnd(c, nullptr), 1);
    r = PQgetResult(c);
    EXPECT_EQ(PQresultStatus(r), PGRES_COMMAND_OK) << table << ": " << PQerrorMessage(c);
    PQclear(r);
    while ((r = PQgetResult(c)) != nullptr) PQclear(r);
  }

  std::unique_ptr<PgConn> db_;
  std::string schema_;
};

TEST_F(CopyBinaryDbTest, NumericsAreTheBytesOfTheServersNumericSend) {
  std::mt19937_64 rng(20261207);
  std::vector<std::string> texts = {"0", "0.000", "1", "-1", "9999", "10000", "0.0001",
                                    "-0.00010", "123456789.123456789", "NaN", "Infinity",
                                    "-Infinity", "1" + std::string(1000, '0'),
                                    "0." + std::string(999, '0') + "1"};
  const auto digits = [&rng](std::size_t n, bool leading_nonzero) {
    std::string s;
    for (std::size_t i = 0; i < n; ++i)
      s.push_back(
          static_cast<char>('0' + (i == 0 && leading_nonzero ? 1 + rng() % 9 : rng() % 10)));
    return s;
  };
  for (int i = 0; i < 1500; ++i) {
    const std::size_t whole = rng() % 3 == 0 ? 0 : rng() % 40;
    const std::size_t scale = rng() % 3 == 0 ? 0 : rng() % 40;
    std::string text = (rng() % 2 ? "-" : "") + (whole ? digits(whole, true) : "0");
    if (scale) text += "." + digits(scale, false);
    texts.push_back(text);
  }
  for (const std::string& text : texts) {
    const auto rows =
        db_->exec_binary("SELECT pg_catalog.numeric_send($1::pg_catalog.numeric)", {text});
    ASSERT_EQ(rows.size(), 1u);
    std::string mine;
    ASSERT_TRUE(AppendNumericBinary(mine, text)) << text;
    if (text == "NaN" || text == "Infinity" || text == "-Infinity") {
      // numeric_send writes whatever display scale the stored special value carries, and
      // numeric_recv ignores it for these: ndigits, weight and sign must agree
      ASSERT_EQ(Hex(mine).substr(0, 12), Hex(*rows[0][0]).substr(0, 12)) << text;
      continue;
    }
    ASSERT_EQ(Hex(mine), Hex(*rows[0][0])) << text;
  }
}

// Every type with a binary form, as the stream carries it (change.proto), edge values first.
struct Column {
  const char* name;
  const char* type;
  std::uint32_t oid;
};
const std::vector<Column> kColumns = {
    {"c_bool", "bool", 16},          {"c_int2", "int2", 21},
    {"c_int4", "int4", 23},          {"c_int8", "int8", 20},
    {"c_oid", "oid", 26},            {"c_float4", "float4", 700},
    {"c_float8", "float8", 701},     {"c_text", "text", 25},
    {"c_varchar", "varchar(10)", 1043}, {"c_bpchar", "char(5)", 1042},
    {"c_bytea", "bytea", 17},        {"c_uuid", "uuid", 2950},
    {"c_date", "date", 1082},        {"c_ts", "timestamp", 1114},
    {"c_tstz", "timestamptz", 1184}, {"c_numeric", "numeric", 1700},
    {"c_numeric_typmod", "numeric(12,3)", 1700}, {"c_json", "json", 114},
    {"c_jsonb", "jsonb", 3802},
};

class Values {
 public:
  explicit Values(std::uint64_t seed) : rng_(seed) {}

  Value Of(const Column& column, int row) {
    Value v;
    if (row > 20 && rng_() % 10 == 0) {
      v.set_null_value(true);
      return v;
    }
    const std::string type = column.type;
    const auto pick = [&](const auto& edges) { return edges[rng_() % edges.size()]; };
    const bool edge = row < 20 || rng_() % 4 == 0;
    if (type == "bool") {
      v.set_bool_value(rng_() % 2);
    } else if (type == "int2") {
      v.set_int_value(edge ? pick(std::vector<std::int64_t>{-32768, -1, 0, 1, 32767})
                           : static_cast<std::int16_t>(rng_()));
    } else if (type == "int4") {
      v.set_int_value(edge ? pick(std::vector<std::int64_t>{INT32_MIN, -1, 0, INT32_MAX})
                           : static_cast<std::int32_t>(rng_()));
    } else if (type == "int8") {
      v.set_int_value(edge ? pick(std::vector<std::int64_t>{INT64_MIN, -1, 0, INT64_MAX})
                           : static_cast<std::int64_t>(rng_()));
    } else if (type == "oid") {
      v.set_int_value(edge ? pick(std::vector<std::int64_t>{0, 1, 2147483648, 4294967295})
                           : static_cast<std::uint32_t>(rng_()));
    } else if (type == "float4") {
      const std::vector<float> edges = {0.0f, -0.0f, 1.0f / 3, std::numeric_limits<float>::min(),
                                        std::numeric_limits<float>::denorm_min(),
                                        std::numeric_limits<float>::max(), -INFINITY, INFINITY,
                                        NAN};
      float f;
      do {
        const auto bits = static_cast<std::uint32_t>(rng_());
        std::memcpy(&f, &bits, sizeof f);
      } while (std::isnan(f));
      v.set_float4_value(edge ? pick(edges) : f);
    } else if (type == "float8") {
      const std::vector<double> edges = {0.0, -0.0, 0.1, std::numeric_limits<double>::min(),
                                         std::numeric_limits<double>::denorm_min(),
                                         std::numeric_limits<double>::max(), -INFINITY,
                                         INFINITY, NAN};
      double d;
      do {
        const std::uint64_t bits = rng_();
        std::memcpy(&d, &bits, sizeof d);
      } while (std::isnan(d));
      v.set_float8_value(edge ? pick(edges) : d);
    } else if (type == "text") {
      v.set_text_value(Text(rng_() % 30));
    } else if (type == "varchar(10)") {
      v.set_text_value(Text(rng_() % 11));
    } else if (type == "char(5)") {
      std::string s = Text(rng_() % 6, /*ascii=*/true);
      v.set_text_value(s + std::string(5 - s.size(), ' '));  // bpchar comes with its padding
    } else if (type == "bytea") {
      std::string b;
      for (std::size_t i = rng_() % 20; i > 0; --i) b.push_back(static_cast<char>(rng_()));
      if (edge) b += std::string("\0\\\t\n", 4);
      v.set_bytes_value(b);
    } else if (type == "uuid") {
      std::string b;
      for (int i = 0; i < 16; ++i) b.push_back(static_cast<char>(rng_()));
      v.set_uuid_value(b);
    } else if (type == "date") {
      // 4714-11-24 BC .. 5874897-12-31, as days since 1970-01-01
      constexpr std::int64_t kMin = -2440588, kMax = 2145042905;
      if (edge && rng_() % 4 == 0) {
        v.set_literal(rng_() % 2 ? "infinity" : "-infinity");  // as the stream carries them
        return v;
      }
      v.set_date_value(static_cast<std::int32_t>(
          edge ? pick(std::vector<std::int64_t>{kMin, -1, 0, 10957, kMax})
               : kMin + static_cast<std::int64_t>(rng_() % (kMax - kMin + 1))));
    } else if (type == "timestamp" || type == "timestamptz") {
      if (edge && rng_() % 4 == 0) {
        v.set_literal(rng_() % 2 ? "infinity" : "-infinity");
        return v;
      }
      constexpr std::int64_t kMin = -210866803200000000;  // 4714-11-24 BC, as microseconds
      const std::int64_t micros =
          edge ? pick(std::vector<std::int64_t>{kMin, -1, 0, 946684800000000, INT64_MAX})
               : static_cast<std::int64_t>(
                     static_cast<std::uint64_t>(kMin) +
                     rng_() % (static_cast<std::uint64_t>(INT64_MAX) -
                               static_cast<std::uint64_t>(kMin)));
      if (type == "timestamp") v.set_timestamp_value(micros);
      else v.set_timestamptz_value(micros);
    } else if (type == "numeric" || type == "numeric(12,3)") {
      const bool bounded = type == "numeric(12,3)";
      const std::vector<std::string> edges = {"0", "-0.5", "NaN", "Infinity", "-Infinity",
                                              "999999999.999"};
      if (edge && (!bounded || rng_() % 2)) {
        v.set_literal(bounded ? pick(std::vector<std::string>{"0", "-0.500", "NaN",
                                                              "999999999.999", "0.001"})
                              : pick(edges));
      } else {
        std::string s = rng_() % 2 ? "-" : "";
        const std::size_t whole = 1 + rng_() % (bounded ? 9 : 30);
        for (std::size_t i = 0; i < whole; ++i)
          s.push_back(static_cast<char>('0' + (i == 0 ? 1 + rng_() % 9 : rng_() % 10)));
        const std::size_t scale = bounded ? 3 : rng_() % 12;
        if (scale) s.push_back('.');
        for (std::size_t i = 0; i < scale; ++i) s.push_back(static_cast<char>('0' + rng_() % 10));
        v.set_literal(s);
      }
    } else if (type == "json" || type == "jsonb") {
      v.set_literal(pick(std::vector<std::string>{
          "{}", " {\"a\" :  [1, 2.50, \"x\\ty\"], \"b\": null} ", "null", "\"\\u00e9\\\\\"",
          "[true,false, -1e-3]", "{\"k\": \"" + std::to_string(rng_()) + " é\"}"}));
    } else {
      ADD_FAILURE() << "no values for " << type;
    }
    return v;
  }

 private:
  // Random text with COPY's special characters and multi-byte characters (no NUL: no text
  // type holds one).
  std::string Text(std::size_t chars, bool ascii = false) {
    static const std::vector<std::string> kPieces = {"a", "Z", " ", "\\", "\t", "\n", "\r", "\\.",
                                                     "'", "\"", ",", "é", "日", "😀", "\\N"};
    std::string s;
    for (std::size_t i = 0; i < chars; ++i) {
      const std::string& p = kPieces[rng_() % kPieces.size()];
      if (ascii && static_cast<unsigned char>(p[0]) >= 0x80) {
        s.push_back('q');
      } else if (p.size() > 1 && static_cast<unsigned char>(p[0]) < 0x80) {
        s.push_back(p[0]);  // one character per step: varchar(10) counts characters
      } else {
        s += p;
      }
    }
    return s;
  }

  std::mt19937_64 rng_;
};

TEST_F(CopyBinaryDbTest, EveryTypeGoesInAsTheSameValuesAsThroughCopyText) {
  std::string ddl;
  std::vector<BinaryType> types = {BinaryType::kInt4};  // id
  for (const Column& c : kColumns) {
    ddl += std::string(", ") + c.name + " " + c.type;
    types.push_back(BinaryTypeOf(c.oid));
    ASSERT_NE(types.back(), BinaryType::kNone) << c.type;
  }
  for (const char* table : {"bin", "txt"})
    db_->exec("CREATE TABLE " + schema_ + "." + table + " (id int4 PRIMARY KEY" + ddl + ")");
  Values values(4242);
  std::string binary, text;
  AppendCopyBinaryHeader(binary);
  constexpr int kRows = 3000;
  for (int i = 0; i < kRows; ++i) {
    Row row;
    *row.add_values() = Int(i);
    for (const Column& c : kColumns) *row.add_values() = values.Of(c, i);
    const std::size_t at = binary.size();
    ASSERT_TRUE(AppendCopyBinaryRow(binary, types, row)) << row.ShortDebugString();
    // the same bytes from the row read in place (what dblog apply's bootstrap writes)
    const std::string serialized = row.SerializeAsString();
    wire::RowView view;
    ASSERT_TRUE(view.Parse(serialized));
    std::string in_place;
    ASSERT_TRUE(AppendCopyBinaryRow(in_place, types, view));
    ASSERT_EQ(Hex(in_place), Hex(std::string_view(binary).substr(at))) << row.ShortDebugString();
    for (int k = 0; k < row.values_size(); ++k) {
      if (k) text.push_back('\t');
      AppendCopyValue(text, row.values(k));
    }
    text.push_back('\n');
  }
  AppendCopyBinaryTrailer(binary);
  Copy("bin", true, binary);
  Copy("txt", false, text);
  // Column by column, so that a difference names its column; float text is exact (shortest
  // round-trip output).
  for (const Column& c : kColumns) {
    const std::string differing = db_->scalar(
        "SELECT count(*) || coalesce(' first at id ' || min(b.id) || ': ' || "
        "(array_agg(coalesce(b." + std::string(c.name) + "::text, 'NULL') || ' vs ' || "
        "coalesce(t." + c.name + "::text, 'NULL') ORDER BY b.id))[1], '') FROM " + schema_ +
        ".bin b FULL JOIN " + schema_ + ".txt t USING (id) WHERE b." + c.name +
        "::text IS DISTINCT FROM t." + c.name + "::text");
    EXPECT_EQ(differing, "0") << c.name << " (" << c.type << ")";
  }
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM " + schema_ + ".bin"), std::to_string(kRows));
}

}  // namespace
}  // namespace dblog::apply
