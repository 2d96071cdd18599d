// tests/cpp/apply/sql_text_test.cc: values as PostgreSQL input text (client/apply/sql_text.h),
// and `dblog apply`'s command line. No database: the round trip through the real input
// functions is covered by apply_e2e_test's type matrix.
#include "client/apply/sql_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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
