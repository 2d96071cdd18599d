// tests/cpp/client/tail_options_test.cc: `dblog tail` flag parsing (defaults, environment,
// precedence, every kind of bad input) and the progress line's text.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "client/cli/progress_bar.h"
#include "client/cli/tail.h"

namespace dblog::cli {
namespace {

Environment FakeEnvironment(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TailOptions Parse(const std::vector<std::string>& args,
                  std::map<std::string, std::string> env = {}) {
  std::ostringstream help;
  const auto options = ParseTailArgs(args, FakeEnvironment(std::move(env)), help);
  EXPECT_TRUE(options.has_value());
  EXPECT_EQ(help.str(), "");
  return options.value_or(TailOptions{});
}

std::string UsageErrorOf(const std::vector<std::string>& args,
                         std::map<std::string, std::string> env = {}) {
  std::ostringstream help;
  try {
    ParseTailArgs(args, FakeEnvironment(std::move(env)), help);
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UsageError";
  return "";
}

TEST(TailArgs, Defaults) {
  const TailOptions options = Parse({"--consumer", "orders"});
  EXPECT_EQ(options.connect.consumer, "orders");
  EXPECT_EQ(options.connect.host, "127.0.0.1");
  EXPECT_EQ(options.connect.port, 7654);
  EXPECT_EQ(options.connect.token, "");
  EXPECT_FALSE(options.connect.resume_after);
  EXPECT_FALSE(options.render.relations);
  EXPECT_EQ(options.ack_every, 1u);
}

TEST(TailArgs, EveryFlag) {
  const TailOptions options = Parse({"--consumer=a_1", "--host", "db.example", "--port", "9000",
                                     "--token", "t", "--relations", "--ack-every", "50"});
  EXPECT_EQ(options.connect.consumer, "a_1");
  EXPECT_EQ(options.connect.host, "db.example");
  EXPECT_EQ(options.connect.port, 9000);
  EXPECT_EQ(options.connect.token, "t");
  EXPECT_TRUE(options.render.relations);
  EXPECT_EQ(options.ack_every, 50u);
}

TEST(TailArgs, EnvironmentGivesDefaultsFlagsWin) {
  const std::map<std::string, std::string> env = {
      {"DBLOG_HOST", "envhost"}, {"DBLOG_PORT", "7000"}, {"DBLOG_TOKEN", "envtoken"}};
  TailOptions options = Parse({"--consumer", "c"}, env);
  EXPECT_EQ(options.connect.host, "envhost");
  EXPECT_EQ(options.connect.port, 7000);
  EXPECT_EQ(options.connect.token, "envtoken");
  options = Parse({"--consumer", "c", "--host", "h", "--port", "1", "--token", "f"}, env);
  EXPECT_EQ(options.connect.host, "h");
  EXPECT_EQ(options.connect.port, 1);
  EXPECT_EQ(options.connect.token, "f");
}

TEST(TailArgs, TokenFile) {
  const std::string path = ::testing::TempDir() + "dblog_tail_token";
  std::ofstream(path) << "from-file\n";
  const TailOptions options =
      Parse({"--consumer", "c", "--token-file", path}, {{"DBLOG_TOKEN", "env"}});
  EXPECT_EQ(options.connect.token, "from-file");
  std::ofstream(path) << " \n";
  EXPECT_NE(UsageErrorOf({"--consumer", "c", "--token-file", path}).find("is empty"),
            std::string::npos);
  std::remove(path.c_str());
  EXPECT_NE(UsageErrorOf({"--consumer", "c", "--token-file", path}).find("cannot read"),
            std::string::npos);
  EXPECT_EQ(UsageErrorOf({"--consumer", "c", "--token", "a", "--token-file", path}),
            "--token and --token-file exclude each other");
}

TEST(TailArgs, Tls) {
  const std::string ca = ::testing::TempDir() + "dblog_tail_ca.pem";
  const std::string cert = ::testing::TempDir() + "dblog_tail_cert.pem";
  const std::string key = ::testing::TempDir() + "dblog_tail_key.pem";
  for (const auto& f : {ca, cert, key}) std::ofstream(f) << "pem\n";

  EXPECT_FALSE(Parse({"--consumer", "c"}).connect.tls);
  EXPECT_TRUE(Parse({"--consumer", "c", "--tls"}).connect.tls);
  // any other --tls-* flag implies --tls
  TailOptions o = Parse({"--consumer", "c", "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key,
                         "--tls-server-name", "db.example"});
  EXPECT_TRUE(o.connect.tls);
  EXPECT_EQ(o.connect.tls_ca_file, ca);
  EXPECT_EQ(o.connect.tls_cert_file, cert);
  EXPECT_EQ(o.connect.tls_key_file, key);
  EXPECT_EQ(o.connect.tls_server_name, "db.example");
  EXPECT_TRUE(Parse({"--consumer", "c", "--tls-server-name", "x"}).connect.tls);

  // the environment gives defaults, flags win
  o = Parse({"--consumer", "c", "--tls-ca", cert},
            {{"DBLOG_TLS_CA", ca}, {"DBLOG_TLS_CERT", cert}, {"DBLOG_TLS_KEY", key}});
  EXPECT_TRUE(o.connect.tls);
  EXPECT_EQ(o.connect.tls_ca_file, cert);
  EXPECT_EQ(o.connect.tls_cert_file, cert);
  EXPECT_EQ(o.connect.tls_key_file, key);
  EXPECT_TRUE(Parse({"--consumer", "c"}, {{"DBLOG_TLS", "1"}}).connect.tls);
  EXPECT_TRUE(Parse({"--consumer", "c"}, {{"DBLOG_TLS", "true"}}).connect.tls);
  EXPECT_FALSE(Parse({"--consumer", "c"}, {{"DBLOG_TLS", "0"}}).connect.tls);
  EXPECT_FALSE(Parse({"--consumer", "c"}, {{"DBLOG_TLS", ""}}).connect.tls);
  EXPECT_TRUE(Parse({"--consumer", "c", "--tls"}, {{"DBLOG_TLS", "0"}}).connect.tls);

  EXPECT_EQ(UsageErrorOf({"--consumer", "c"}, {{"DBLOG_TLS", "maybe"}}),
            "invalid DBLOG_TLS 'maybe': expected 1 or 0");
  EXPECT_EQ(UsageErrorOf({"--consumer", "c", "--tls-cert", cert}),
            "--tls-cert and --tls-key go together (a client certificate and its key)");
  EXPECT_EQ(UsageErrorOf({"--consumer", "c"}, {{"DBLOG_TLS_KEY", key}}),
            "--tls-cert and --tls-key go together (a client certificate and its key)");
  EXPECT_NE(UsageErrorOf({"--consumer", "c", "--tls-ca", "/nonexistent/ca.pem"})
                .find("cannot read --tls-ca /nonexistent/ca.pem"),
            std::string::npos);
  EXPECT_NE(UsageErrorOf({"--consumer", "c"}, {{"DBLOG_TLS_CA", "/nonexistent/ca.pem"}})
                .find("cannot read DBLOG_TLS_CA /nonexistent/ca.pem"),
            std::string::npos);
  EXPECT_NE(UsageErrorOf({"--consumer", "c", "--tls=1"}).find("tls"), std::string::npos);
  for (const auto& f : {ca, cert, key}) std::remove(f.c_str());
}

TEST(TailArgs, Retry) {
  using std::chrono::milliseconds;
  TailOptions o = Parse({"--consumer", "c"});
  EXPECT_FALSE(o.retry.once);
  EXPECT_EQ(o.retry.backoff.min, milliseconds(500));
  EXPECT_EQ(o.retry.backoff.max, milliseconds(30000));
  EXPECT_EQ(o.connect.io_timeout, milliseconds(60000));
  o = Parse({"--consumer", "c", "--once", "--retry-min", "0.25", "--retry-max", "120",
             "--idle-timeout", "17.5"});
  EXPECT_TRUE(o.retry.once);
  EXPECT_EQ(o.retry.backoff.min, milliseconds(250));
  EXPECT_EQ(o.retry.backoff.max, milliseconds(120000));
  EXPECT_EQ(o.connect.io_timeout, milliseconds(17500));
  EXPECT_EQ(Parse({"--consumer", "c", "--idle-timeout", "0"}).connect.io_timeout, milliseconds(0));
  EXPECT_EQ(Parse({"--consumer", "c", "--retry-min", "2", "--retry-max", "2"}).retry.backoff.max,
            milliseconds(2000));
  for (const char* bad : {"0", "-1", "x", "", ".5", "1.", "1.2345", "1e3", "86401", " 1"}) {
    EXPECT_NE(UsageErrorOf({"--consumer", "c", "--retry-min", bad}).find("invalid --retry-min"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(UsageErrorOf({"--consumer", "c", "--idle-timeout", "-1"}).find("--idle-timeout"),
            std::string::npos);
  EXPECT_EQ(UsageErrorOf({"--consumer", "c", "--retry-min", "10", "--retry-max", "5"}),
            "--retry-max must not be below --retry-min");
  // above the default maximum (30 s): the maximum follows
  EXPECT_EQ(Parse({"--consumer", "c", "--retry-min", "31"}).retry.backoff.max, milliseconds(31000));
  EXPECT_NE(UsageErrorOf({"--consumer", "c", "--once=yes"}).find("once"), std::string::npos);
}

TEST(TailArgs, TokenFileFromTheEnvironment) {
  const std::string path = ::testing::TempDir() + "dblog_tail_token_env";
  std::ofstream(path) << "env-file\n";
  EXPECT_EQ(Parse({"--consumer", "c"}, {{"DBLOG_TOKEN_FILE", path}}).connect.token, "env-file");
  // flags win over the environment
  EXPECT_EQ(Parse({"--consumer", "c", "--token", "f"}, {{"DBLOG_TOKEN_FILE", path}}).connect.token,
            "f");
  EXPECT_EQ(UsageErrorOf({"--consumer", "c"}, {{"DBLOG_TOKEN_FILE", path}, {"DBLOG_TOKEN", "t"}}),
            "DBLOG_TOKEN and DBLOG_TOKEN_FILE exclude each other");
  std::remove(path.c_str());
  EXPECT_NE(UsageErrorOf({"--consumer", "c"}, {{"DBLOG_TOKEN_FILE", path}})
                .find("cannot read DBLOG_TOKEN_FILE"),
            std::string::npos);
}

TEST(TailArgs, Help) {
  std::ostringstream help;
  EXPECT_FALSE(ParseTailArgs({"--help"}, FakeEnvironment({}), help));
  for (const char* flag :
       {"--consumer", "--host", "--port", "--token", "--token-file", "--relations", "--ack-every",
        "--once", "--retry-min", "--retry-max", "--idle-timeout", "--help", "DBLOG_HOST",
        "DBLOG_PORT", "DBLOG_TOKEN", "DBLOG_TOKEN_FILE"}) {
    EXPECT_NE(help.str().find(flag), std::string::npos) << flag;
  }
}

TEST(TailArgs, BadInput) {
  EXPECT_EQ(UsageErrorOf({}), "--consumer is required");
  EXPECT_NE(UsageErrorOf({"--consumer", "c", "--bogus"}).find("--bogus"), std::string::npos);
  EXPECT_NE(UsageErrorOf({"--consumer", "c", "--rel"}).find("--rel"), std::string::npos)
      << "abbreviations are not guessed";
  EXPECT_NE(UsageErrorOf({"--consumer"}).find("consumer"), std::string::npos);
  EXPECT_NE(UsageErrorOf({"--consumer", "a", "--consumer", "b"}).find("consumer"),
            std::string::npos);
  EXPECT_EQ(UsageErrorOf({"--consumer", "c", "stray"}), "unexpected argument 'stray'");
  for (const char* bad :
       {"Orders", "1abc", "a-b", "", "a234567890123456789012345678901234567890123456789"}) {
    EXPECT_NE(UsageErrorOf({"--consumer", bad}).find("invalid --consumer"), std::string::npos)
        << bad;
  }
  for (const char* bad : {"0", "65536", "-1", "80x", "", " 80"}) {
    EXPECT_NE(UsageErrorOf({"--consumer", "c", "--port", bad}).find("invalid --port"),
              std::string::npos)
        << bad;
  }
  EXPECT_NE(UsageErrorOf({"--consumer", "c"}, {{"DBLOG_PORT", "http"}}).find("DBLOG_PORT"),
            std::string::npos);
  for (const char* bad : {"0", "-1", "x"}) {
    EXPECT_NE(UsageErrorOf({"--consumer", "c", "--ack-every", bad}).find("invalid --ack-every"),
              std::string::npos)
        << bad;
  }
  EXPECT_EQ(UsageErrorOf({"--consumer", "c", "--host", ""}), "--host is empty");
}

TEST(TailArgs, ConsumerNames) {
  EXPECT_TRUE(IsValidConsumerName("a"));
  EXPECT_TRUE(IsValidConsumerName("orders_2"));
  EXPECT_TRUE(IsValidConsumerName("a" + std::string(47, 'b')));
  EXPECT_FALSE(IsValidConsumerName("a" + std::string(48, 'b')));
  EXPECT_FALSE(IsValidConsumerName("_a"));
  EXPECT_FALSE(IsValidConsumerName("a.b"));
}

dblog::v1::Progress MakeProgress(
    std::vector<std::tuple<std::string, std::uint64_t, std::uint64_t, bool>> tables) {
  dblog::v1::Progress progress;
  progress.set_phase("bootstrap");
  for (const auto& [name, copied, estimated, done] : tables) {
    auto& table = *progress.add_tables();
    table.set_schema("public");
    table.set_name(name);
    table.set_rows_copied(copied);
    table.set_rows_estimated(estimated);
    table.set_done(done);
  }
  return progress;
}

TEST(ProgressLine, TotalsThenTablesNotDone) {
  EXPECT_EQ(RenderProgressLine(MakeProgress({{"items", 3000, 5000, false},
                                             {"orders", 1000, 4000, false},
                                             {"small", 10, 10, true}}),
                               200),
            "bootstrap [########............]  44% 4010/9010 rows, 1/3 tables | public.items "
            "3000/5000 | public.orders 1000/4000");
}

TEST(ProgressLine, EstimatesExceededAndUnknown) {
  // 120 copied of an estimate of 100: the estimate was low; not 100% before the table is done.
  EXPECT_EQ(RenderProgressLine(MakeProgress({{"t", 120, 100, false}}), 200),
            "bootstrap [###################.]  99% 120/120 rows, 0/1 tables | public.t 120/100");
  EXPECT_EQ(RenderProgressLine(MakeProgress({{"t", 7, 0, false}, {"u", 1, 5, false}}), 200),
            "bootstrap 8 rows, 0/2 tables | public.t 7 | public.u 1/5");
  EXPECT_EQ(RenderProgressLine(MakeProgress({{"t", 5, 9, true}}), 200),
            "bootstrap [####################] 100% 5/5 rows, 1/1 tables");
  EXPECT_EQ(RenderProgressLine(dblog::v1::Progress(), 200),
            "copy [####################] 100% 0 rows, 0/0 tables");
}

// Found by tests/fuzz/client_stream_fuzz (corpus/client_stream_fuzz/crash-progress-newline): a
// table name from the server with a newline broke the line redrawn in place, and an escape
// sequence in it would have reached the terminal.
TEST(ProgressLine, ControlCharactersInNamesAreShownAsQuestionMarks) {
  auto progress = MakeProgress({{"a\nb", 1, 2, false}, {"\x1b[2J\x7f\xc2\x9b\xc3\xa9", 1, 0, false}});
  progress.set_phase("boot\rstrap");
  progress.mutable_tables(1)->set_schema(std::string("s\0", 2));
  const std::string line = RenderProgressLine(progress, 200);
  EXPECT_EQ(line, "boot?strap 2 rows, 0/2 tables | public.a?b 1/2 | s?.?[2J??\xc3\xa9 1");
}

TEST(ProgressLine, CutToWidth) {
  const std::string line = RenderProgressLine(
      MakeProgress({{"items", 3000, 5000, false}, {"orders", 1000, 4000, false}}), 40);
  EXPECT_EQ(line, "bootstrap [########............]  44%...");
  EXPECT_EQ(RenderProgressLine(MakeProgress({{"t", 1, 2, false}}), 2), "..");
}

}  // namespace
}  // namespace dblog::cli
