// tests/cpp/apply/sql_text_test.cc: values as PostgreSQL input text (client/apply/sql_text.h),
// and `dblog apply`'s command line. No database: the round trip through the real input
// functions is covered by apply_e2e_test's type matrix.
#include "client/apply/sql_text.h"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <sstream>

#include "client/cli/apply.h"

namespace dblog::apply {
namespace {

dblog::v1::Value V() { return dblog::v1::Value(); }

TEST(SqlText, NativeValues) {
  auto v = V();
  v.set_null_value(true);
  EXPECT_EQ(ValueText(v), std::nullopt);
  v.set_bool_value(false);
  EXPECT_EQ(ValueText(v), "f");
  v.set_int_value(INT64_MIN);
  EXPECT_EQ(ValueText(v), "-9223372036854775808");
  v.set_text_value("a\"b\\c");
  EXPECT_EQ(ValueText(v), "a\"b\\c");
  v.set_bytes_value(std::string("\x00\xff\x10", 3));
  EXPECT_EQ(ValueText(v), "\\x00ff10");
  v.set_bytes_value("");
  EXPECT_EQ(ValueText(v), "\\x");
  v.set_uuid_value(
      std::string("\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11", 16));
  EXPECT_EQ(ValueText(v), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
  v.set_uuid_value("short");
  EXPECT_THROW(ValueText(v), std::invalid_argument);
  v.set_literal("{1,2,3}");
  EXPECT_EQ(ValueText(v), "{1,2,3}");
  v.set_unchanged(true);
  EXPECT_THROW(ValueText(v), std::invalid_argument);
  EXPECT_THROW(ValueText(V()), std::invalid_argument);
}

TEST(SqlText, FloatsRoundTripWithPostgresSpellings) {
  EXPECT_EQ(PgFloatText(0.1), "0.1");
  EXPECT_EQ(PgFloatText(-0.0), "-0");
  EXPECT_EQ(PgFloatText(1e300), "1e+300");
  EXPECT_EQ(PgFloatText(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(PgFloatText(-std::numeric_limits<double>::infinity()), "-Infinity");
  EXPECT_EQ(PgFloatText(1.5f), "1.5");
  EXPECT_EQ(PgFloatText(0.1f), "0.1");  // shortest for float, not 0.100000001
  EXPECT_EQ(PgFloatText(std::numeric_limits<float>::infinity()), "Infinity");
  double back = std::stod(PgFloatText(1.0 / 3));
  EXPECT_EQ(back, 1.0 / 3);
}

TEST(SqlText, DatesAndTimestampsUsePostgresEras) {
  EXPECT_EQ(PgDateText(0), "1970-01-01");
  EXPECT_EQ(PgDateText(19782), "2024-02-29");
  EXPECT_EQ(PgDateText(-2440588), "4714-11-24 BC");  // PostgreSQL's first date
  EXPECT_EQ(PgDateText(-719163), "0001-12-31 BC");   // astronomical year 0 is 1 BC
  EXPECT_EQ(PgDateText(-719528), "0001-01-01 BC");
  EXPECT_EQ(PgDateText(-719162), "0001-01-01");
  EXPECT_EQ(PgDateText(2145042905), "5874897-12-31");  // its last
  EXPECT_EQ(PgTimestampText(1709210096789012LL, false), "2024-02-29 12:34:56.789012");
  EXPECT_EQ(PgTimestampText(-1, false), "1969-12-31 23:59:59.999999");
  EXPECT_EQ(PgTimestampText(-210866803200000000LL, true), "4714-11-24 00:00:00.000000+00 BC");
  EXPECT_EQ(PgTimestampText(0, true), "1970-01-01 00:00:00.000000+00");
}

// The dates and timestamps as printf wrote them before the digits were written by hand (the
// oracle of the test below).
std::string PrintfTimestamp(std::int64_t micros, bool date_only, bool with_time_zone) {
  constexpr std::int64_t kDay = 86'400'000'000;
  std::int64_t days = date_only ? micros : micros / kDay;
  std::int64_t in_day = date_only ? 0 : micros % kDay;
  if (in_day < 0) {
    in_day += kDay;
    --days;
  }
  // the civil date of `days` since 1970 (Hinnant's days_from_civil inverse)
  const std::int64_t z = days + 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const std::int64_t doe = z - era * 146097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  const std::int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const std::int64_t m = mp < 10 ? mp + 3 : mp - 9;
  std::int64_t y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  const bool bc = y <= 0;
  if (bc) y = 1 - y;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04" PRId64 "-%02" PRId64 "-%02" PRId64, y, m, d);
  std::string out = buf;
  if (!date_only) {
    const std::int64_t s = in_day / 1'000'000;
    std::snprintf(buf, sizeof buf, " %02" PRId64 ":%02" PRId64 ":%02" PRId64 ".%06" PRId64,
                  s / 3600, s / 60 % 60, s % 60, in_day % 1'000'000);
    out += buf;
    if (with_time_zone) out += "+00";
  }
  if (bc) out += " BC";
  return out;
}

// COPY's text format, one character at a time (the oracle of the test below).
std::string CopyFieldOracle(const std::optional<std::string>& value) {
  if (!value) return "\\N";
  std::string out;
  for (const char c : *value) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else out.push_back(c);
  }
  return out;
}

// A bootstrap's COPY text is written straight from the values (AppendCopyValue); it must be each
// value's text (ValueText) escaped as COPY reads it, for every kind, as AppendCopyField writes
// it too, and the dates and timestamps what printf wrote. Random values, special characters and
// extremes included.
TEST(SqlText, CopyValuesAreTheirTextEscaped) {
  std::mt19937_64 rng(20261207);
  auto pick = [&rng](std::uint64_t n) { return rng() % n; };
  const std::int64_t kExtremes[] = {0, -1, 1, std::numeric_limits<std::int64_t>::min(),
                                    std::numeric_limits<std::int64_t>::max()};
  int read_in_place = 0;
  for (int i = 0; i < 20000; ++i) {
    dblog::v1::Value v;
    const auto any = static_cast<std::int64_t>(rng());
    const std::int64_t i64 = pick(4) == 0 ? kExtremes[pick(5)] : any;
    std::string text;
    // COPY's special characters, NUL, and the two bytes of a UTF-8 character (alone or not)
    static constexpr char kChars[] = {'a', 'b', '\\', '\n', '\r', '\t', '"', 'x', '\xc3', '\xa9', '\0'};
    for (std::uint64_t n = pick(12); n > 0; --n) text.push_back(kChars[pick(sizeof kChars)]);
    const double kFloats[] = {std::nan(""), HUGE_VAL, -HUGE_VAL, -0.0, 0.1};
    switch (pick(12)) {
      case 0: v.set_null_value(true); break;
      case 1: v.set_bool_value(pick(2) == 0); break;
      case 2: v.set_int_value(i64); break;
      case 3: v.set_float8_value(pick(3) == 0 ? kFloats[pick(5)] : std::ldexp(static_cast<double>(any), -static_cast<int>(pick(120)))); break;
      case 4: v.set_float4_value(pick(3) == 0 ? static_cast<float>(kFloats[pick(5)]) : static_cast<float>(any % 100000) / 7.0f); break;
      case 5: v.set_text_value(text); break;
      case 6: v.set_bytes_value(text); break;
      case 7: v.set_literal(text); break;
      case 8: {
        std::string uuid;
        for (int b = 0; b < 16; ++b) uuid.push_back(static_cast<char>(rng()));
        v.set_uuid_value(uuid);
        break;
      }
      // PostgreSQL's dates: 4714-11-24 BC to 5874897-12-31
      case 9: v.set_date_value(-2440588 + static_cast<std::int64_t>(pick(2145042905ULL + 2440589))); break;
      case 10: v.set_timestamp_value(any % 9'000'000'000'000'000'000LL); break;
      default: v.set_timestamptz_value(pick(2) == 0 ? i64 : any % 300'000'000'000'000'000LL); break;
    }
    std::string fast = "x\t", field = "x\t";
    AppendCopyValue(fast, v);
    AppendCopyField(field, ValueText(v));
    ASSERT_EQ(fast, "x\t" + CopyFieldOracle(ValueText(v))) << v.DebugString();
    ASSERT_EQ(field, fast) << v.DebugString();
    // the same text from the value read in place (wire/change_view.h), when it can be: text
    // that is not UTF-8 is refused there (and by protobuf's parse of a stream)
    dblog::v1::Row row;
    *row.add_values() = v;
    const std::string row_bytes = row.SerializeAsString();  // the views point into it
    dblog::wire::RowView view;
    if (view.Parse(row_bytes)) {
      std::string in_place = "x\t";
      AppendCopyValue(in_place, view[0]);
      ASSERT_EQ(in_place, fast) << v.DebugString();
      ++read_in_place;
    }
    if (v.has_date_value()) {
      ASSERT_EQ(PgDateText(v.date_value()), PrintfTimestamp(v.date_value(), true, false));
    } else if (v.has_timestamp_value()) {
      ASSERT_EQ(*ValueText(v), PrintfTimestamp(v.timestamp_value(), false, false));
    } else if (v.has_timestamptz_value()) {
      ASSERT_EQ(*ValueText(v), PrintfTimestamp(v.timestamptz_value(), false, true));
    }
  }
  EXPECT_GT(read_in_place, 15000);
  std::string out;
  dblog::v1::Value unchanged;
  unchanged.set_unchanged(true);
  EXPECT_THROW(AppendCopyValue(out, unchanged), std::invalid_argument);
  EXPECT_THROW(AppendCopyValue(out, dblog::v1::Value()), std::invalid_argument);
}

TEST(SqlText, ArraysQuoteEveryElement) {
  TextArray a;
  EXPECT_EQ(a.Take(), "{}");
  a.Add(std::string_view("plain"));
  a.AddNull();
  a.Add(std::string_view("NULL"));
  a.Add(std::string_view("q\"b\\,{}"));
  a.Add(std::string_view(""));
  EXPECT_EQ(a.size(), 5u);
  EXPECT_EQ(a.Take(), R"({"plain",NULL,"NULL","q\"b\\,{}",""})");
  EXPECT_EQ(a.size(), 0u);
}

TEST(SqlText, Identifiers) {
  EXPECT_EQ(QuoteIdent("Mixed \"q\""), "\"Mixed \"\"q\"\"\"");
  EXPECT_EQ(QualifiedName("s", "t"), "\"s\".\"t\"");
}

// ---- `dblog apply` flags ----

std::optional<cli::ApplyCommandOptions> Parse(std::vector<std::string> args,
                                              std::map<std::string, std::string> env = {}) {
  std::ostringstream help;
  return cli::ParseApplyArgs(
      args,
      [env](const std::string& name) -> std::optional<std::string> {
        auto it = env.find(name);
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      help);
}

// What dblog apply does to target rows it did not write is said where users look first.
TEST(ApplyFlags, HelpSaysTheTargetIsAMirror) {
  const std::string help = cli::ApplyHelp();
  for (const char* text : {"The target tables are a mirror", "deletes the target rows it covers",
                           "first TRUNCATEs every target table the consumer ever wrote",
                           "--create-tables also alters existing tables", "--allow-lossy-columns"})
    EXPECT_NE(help.find(text), std::string::npos) << text << "\n" << help;
}

TEST(ApplyFlags, Tls) {  // the same flags and environment as dblog tail (tail_options_test)
  EXPECT_FALSE(Parse({"--consumer", "c1", "--target", "x"})->connect.tls);
  auto o = Parse({"--consumer", "c1", "--target", "x", "--tls-server-name", "db.example"},
                 {{"DBLOG_TLS", "1"}});
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->connect.tls);
  EXPECT_EQ(o->connect.tls_server_name, "db.example");
  EXPECT_TRUE(Parse({"--consumer", "c1", "--target", "x", "--tls"})->connect.tls);
  EXPECT_THROW(Parse({"--consumer", "c1", "--target", "x", "--tls-key", "/nonexistent"}),
               cli::UsageError);
  EXPECT_NE(cli::ApplyHelp().find("--tls-ca"), std::string::npos);
}

TEST(ApplyFlags, Retry) {  // the same flags as dblog tail (tail_options_test: TailArgs.Retry)
  auto o = Parse({"--consumer", "c1", "--target", "x"});
  ASSERT_TRUE(o);
  EXPECT_FALSE(o->retry.once);
  EXPECT_EQ(o->retry.backoff.min, std::chrono::milliseconds(500));
  EXPECT_EQ(o->retry.backoff.max, std::chrono::milliseconds(30000));
  EXPECT_EQ(o->connect.io_timeout, std::chrono::milliseconds(60000));
  o = Parse({"--consumer", "c1", "--target", "x", "--once", "--retry-min", "1", "--retry-max", "10",
             "--idle-timeout", "0"});
  ASSERT_TRUE(o);
  EXPECT_TRUE(o->retry.once);
  EXPECT_EQ(o->retry.backoff.min, std::chrono::milliseconds(1000));
  EXPECT_EQ(o->retry.backoff.max, std::chrono::milliseconds(10000));
  EXPECT_EQ(o->connect.io_timeout, std::chrono::milliseconds(0));
  EXPECT_THROW(Parse({"--consumer", "c1", "--target", "x", "--retry-max", "0"}), cli::UsageError);
  EXPECT_THROW(Parse({"--consumer", "c1", "--target", "host=h bogus=1"}), cli::UsageError);
  const std::string help = cli::ApplyHelp();
  for (const char* text : {"--once", "--retry-min", "--retry-max", "--idle-timeout",
                           "It keeps running", "nothing is applied twice or skipped"})
    EXPECT_NE(help.find(text), std::string::npos) << text << "\n" << help;
}

TEST(ApplyFlags, ParsesEverything) {
  auto o = Parse({"--consumer", "c1", "--target", "dbname=x", "--port", "7000", "--create-tables",
                  "--schema-map", "a=b", "--schema-map=c=d", "--batch-rows", "50"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->connect.consumer, "c1");
  EXPECT_EQ(o->applier.consumer, "c1");
  EXPECT_EQ(o->target, "dbname=x");
  EXPECT_EQ(o->connect.port, 7000);
  EXPECT_TRUE(o->applier.create_tables);
  EXPECT_FALSE(o->applier.allow_lossy_columns);
  EXPECT_TRUE(Parse({"--consumer", "c1", "--target", "x", "--allow-lossy-columns"})
                  ->applier.allow_lossy_columns);
  EXPECT_EQ(o->applier.batch_rows, 50u);
  EXPECT_EQ(o->applier.bootstrap_commit_rows, 1000u);
  dblog::v1::Relation rel;
  rel.set_schema("a");
  EXPECT_EQ(o->applier.schema_map.Map(rel).schema, "b");
  rel.set_schema("other");
  EXPECT_EQ(o->applier.schema_map.Map(rel).schema, "other");
  auto env = Parse({"--consumer", "c1"}, {{"DBLOG_TARGET", "dbname=y"}, {"DBLOG_PORT", "9"}});
  EXPECT_EQ(env->target, "dbname=y");
  EXPECT_EQ(env->connect.port, 9);
  EXPECT_FALSE(Parse({"--help"}));
}

// The bookkeeping schema (security review): configurable, and never a --schema-map target.
TEST(ApplyFlags, BookkeepingSchema) {
  EXPECT_EQ(Parse({"--consumer", "c1", "--target", "x"})->applier.bookkeeping_schema,
            "dblog_apply");
  auto o = Parse({"--consumer", "c1", "--target", "x", "--bookkeeping-schema", "bk", "--schema-map",
                  "dblog_apply=dblog_apply"});
  ASSERT_TRUE(o);
  EXPECT_EQ(o->applier.bookkeeping_schema, "bk");
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--schema-map", "a=dblog_apply"},
        {"--bookkeeping-schema", "bk", "--schema-map", "a=bk"},
        {"--bookkeeping-schema", ""},
        {"--bookkeeping-schema", "pg_bk"},
        {"--bookkeeping-schema", std::string(64, 'b')}}) {
    std::vector<std::string> args = {"--consumer", "c1", "--target", "x"};
    args.insert(args.end(), extra.begin(), extra.end());
    EXPECT_THROW(Parse(args), cli::UsageError) << extra.back();
  }
  const std::string help = cli::ApplyHelp();
  for (const char* text :
       {"--bookkeeping-schema", "never applies the stream into its own", "never renames,"})
    EXPECT_NE(help.find(text), std::string::npos) << text << "\n" << help;
}

TEST(ApplyFlags, RefusesBadCommandLines) {
  EXPECT_THROW(Parse({"--target", "x"}), cli::UsageError);     // no consumer
  EXPECT_THROW(Parse({"--consumer", "c1"}), cli::UsageError);  // no target
  EXPECT_THROW(Parse({"--consumer", "Bad", "--target", "x"}), cli::UsageError);
  EXPECT_THROW(Parse({"--consumer", "c", "--target", "x", "--schema-map", "nope"}),
               cli::UsageError);
  EXPECT_THROW(
      Parse({"--consumer", "c", "--target", "x", "--schema-map", "a=b", "--schema-map", "a=c"}),
      cli::UsageError);
  EXPECT_THROW(Parse({"--consumer", "c", "--target", "x", "--batch-rows", "0"}), cli::UsageError);
  EXPECT_THROW(Parse({"--consumer", "c", "--target", "x", "stray"}), cli::UsageError);
  EXPECT_THROW(Parse({"--consumer", "c", "--target", "x", "--create"}), cli::UsageError);
}

}  // namespace
}  // namespace dblog::apply
