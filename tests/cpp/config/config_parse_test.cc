// tests/cpp/config/config_parse_test.cc: config::Parse, dblogd's settings from flags, a --config
// file and DBLOG_* variables: what each refusal says, which comes first, what is derived. No
// database.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "config/config.h"

namespace dblog::config {
namespace {

std::optional<Config> ParseArgs(std::vector<std::string> args) {
  args.insert(args.begin(), "dblogd");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return Parse(static_cast<int>(argv.size()), argv.data());
}

// The ConfigError's message ("" when the settings are accepted).
std::string Refusal(std::vector<std::string> args) {
  try {
    ParseArgs(std::move(args));
    return "";
  } catch (const ConfigError& e) {
    return e.what();
  }
}

std::string TempFile(const std::string& text) {
  char path[] = "/tmp/dblog-parse-test-XXXXXX";
  const int fd = mkstemp(path);
  close(fd);
  std::ofstream(path) << text;
  chmod(path, 0600);
  return path;
}

const std::string kSource = "--source=dbname=x";
const std::string kConsumer = "--consumer=a=public.*";

TEST(ConfigParse, DefaultsAndDerivedValues) {
  const Config c = *ParseArgs({kSource, kConsumer});
  EXPECT_EQ(c.listen, (Endpoint{"127.0.0.1", 7654}));
  ASSERT_TRUE(c.metrics);
  EXPECT_EQ(*c.metrics, (Endpoint{"127.0.0.1", 9187}));
  EXPECT_EQ(c.status_interval.count(), 10000);
  EXPECT_EQ(c.reconnect_min.count(), 500);
  EXPECT_EQ(c.max_buffer_bytes, 16u << 20);
  EXPECT_EQ(c.chunk_size, 2000);
  EXPECT_EQ(c.max_chunk_size, 32000);
  EXPECT_EQ(c.chunk_memory_bytes, 8u << 20);
  EXPECT_EQ(c.copy_workers, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_EQ(c.consumers.at("a").scope.text(), "public.*");

  const Config d =
      *ParseArgs({kSource, kConsumer, "--listen=[::1]:99", "--metrics-listen=off",
                  "--status-interval=2.5", "--max-buffer-mb=3", "--window-key-memory-mb=2",
                  "--copy-workers=5", "--repair-rows-per-second=10", "--chunk-memory-mb=3"});
  EXPECT_EQ(d.listen, (Endpoint{"::1", 99}));
  EXPECT_FALSE(d.metrics);
  EXPECT_EQ(d.status_interval.count(), 2500);
  EXPECT_EQ(d.max_buffer_bytes, 3u << 20);
  EXPECT_EQ(d.window_key_memory_bytes, 2u << 20);
  EXPECT_EQ(d.copy_workers, 5);
  EXPECT_EQ(d.repair_rows_per_second, 10u);
  EXPECT_EQ(d.chunk_memory_bytes, 3u << 20);
  // --chunk-size alone: every chunk that size, as before chunks adapted; with --max-chunk-size
  // (or the default of both) they grow
  EXPECT_EQ(ParseArgs({kSource, kConsumer, "--chunk-size=7"})->max_chunk_size, 7);
  EXPECT_EQ(ParseArgs({kSource, kConsumer, "--chunk-size=7", "--max-chunk-size=50"})->max_chunk_size,
            50);
  EXPECT_EQ(ParseArgs({kSource, kConsumer, "--max-chunk-size=50"})->chunk_size, 2000);
}

// --source-plugin: the extension's plugin unless pgoutput is asked for.
TEST(ConfigParse, TheSourcePlugin) {
  EXPECT_EQ(ParseArgs({kSource, kConsumer})->source_plugin, SourcePlugin::kDblog);
  EXPECT_EQ(ParseArgs({kSource, kConsumer, "--source-plugin=pgoutput"})->source_plugin,
            SourcePlugin::kPgoutput);
  EXPECT_EQ(Refusal({kSource, kConsumer, "--source-plugin=wal2json"}),
            "source-plugin: 'wal2json' is neither dblog nor pgoutput");
  EXPECT_STREQ(SourcePluginName(SourcePlugin::kPgoutput), "pgoutput");
  EXPECT_STREQ(SourcePluginName(SourcePlugin::kDblog), "dblog");
}

TEST(ConfigParse, WhatALostSlotGets) {
  using SlotLost = dblog::config::Config::SlotLost;
  EXPECT_EQ(ParseArgs({kSource, kConsumer})->on_slot_lost, SlotLost::kBootstrap);
  EXPECT_EQ(ParseArgs({kSource, kConsumer, "--on-slot-lost=reconcile"})->on_slot_lost,
            SlotLost::kReconcile);
  EXPECT_EQ(Refusal({kSource, kConsumer, "--on-slot-lost=ignore"}),
            "on-slot-lost: 'ignore' is neither bootstrap nor reconcile");
  // pgoutput mode repairs too (docs/pgoutput.md)
  EXPECT_EQ(ParseArgs({kSource, kConsumer, "--source-plugin=pgoutput", "--on-slot-lost=reconcile"})
                ->on_slot_lost,
            SlotLost::kReconcile);
}

TEST(ConfigParse, HelpAndVersionReturnNothing) {
  testing::internal::CaptureStdout();
  EXPECT_FALSE(ParseArgs({"--version"}));
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "dblogd 0.1.0\n");
  testing::internal::CaptureStdout();
  EXPECT_FALSE(ParseArgs({"--help"}));
  EXPECT_NE(testing::internal::GetCapturedStdout().find("  --source arg"), std::string::npos);
}

// --ddl-trigger-sql is a command (main prints pgoutput mode's DDL trigger): it needs no source,
// and the environment cannot turn it on.
TEST(ConfigParse, TheDdlTriggerSqlNeedsNoOtherSetting) {
  const std::optional<Config> c = ParseArgs({"--ddl-trigger-sql"});
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->ddl_trigger_sql);
  EXPECT_FALSE(ParseArgs({kSource, kConsumer})->ddl_trigger_sql);
  setenv("DBLOG_DDL_TRIGGER_SQL", "true", 1);
  EXPECT_EQ(Refusal({}), "source: required (a libpq connection string)");
  unsetenv("DBLOG_DDL_TRIGGER_SQL");
}

TEST(ConfigParse, FlagsWinOverTheFileAndTheFileOverTheEnvironment) {
  const std::string file = TempFile("chunk-size = 7\nbatch-bytes = 100\n");
  setenv("DBLOG_CHUNK_SIZE", "5", 1);
  setenv("DBLOG_BATCH_BYTES", "5", 1);
  setenv("DBLOG_COPY_WORKERS", "3", 1);
  setenv("DBLOG_HELP", "1", 1);  // not a setting from the environment
  const Config c = *ParseArgs({kSource, kConsumer, "--config=" + file, "--batch-bytes=200"});
  unsetenv("DBLOG_CHUNK_SIZE");
  unsetenv("DBLOG_BATCH_BYTES");
  unsetenv("DBLOG_COPY_WORKERS");
  unsetenv("DBLOG_HELP");
  EXPECT_EQ(c.batch_bytes, 200);
  EXPECT_EQ(c.chunk_size, 7);
  EXPECT_EQ(c.max_chunk_size, 7);  // set in the file: the same as a flag
  EXPECT_EQ(c.copy_workers, 3);
  EXPECT_EQ(Refusal({kSource, kConsumer, "--config=/nonexistent/dblogd.conf"}),
            "config: cannot read '/nonexistent/dblogd.conf'");
}

TEST(ConfigParse, ConsumersAndTheirTokens) {
  const std::string t1 = TempFile("one\n"), t2 = TempFile("  two \r\n"), same = TempFile("one\n");
  const Config c = *ParseArgs({kSource, kConsumer, "--consumer= b =s.t", "--token-file=" + t1,
                               "--consumer-token-file=b=" + t2});
  EXPECT_EQ(c.token, "one");
  EXPECT_EQ(c.consumers.at("b").token, "two");
  EXPECT_EQ(Refusal({kSource, "--consumer=a"}), "consumer: expected NAME=SCOPE, got 'a'");
  EXPECT_EQ(Refusal({kSource, "--consumer=Ab=s.t"}),
            "consumer: 'Ab' is not a valid name (a-z first, then a-z, 0-9, _; at most 48)");
  EXPECT_EQ(Refusal({kSource, kConsumer, kConsumer}), "consumer: 'a' is configured twice");
  EXPECT_EQ(Refusal({kSource, "--consumer=a=s.\"t"}).rfind("consumer 'a': scope 's.\"t': ", 0), 0u);
  EXPECT_EQ(Refusal({kSource, "--default-scope=s.\"t"}).rfind("default-scope: scope '", 0), 0u);
  EXPECT_EQ(Refusal({kSource, kConsumer, "--consumer-token-file=a"}),
            "consumer-token-file: expected NAME=FILE, got 'a'");
  EXPECT_EQ(Refusal({kSource, kConsumer, "--consumer-token-file=z=" + t1}),
            "consumer-token-file: 'z' is not a configured consumer (--consumer z=SCOPE)");
  EXPECT_EQ(Refusal({kSource, kConsumer, "--consumer-token-file=a=" + t1,
                     "--consumer-token-file=a=" + t2}),
            "consumer-token-file: 'a' is given twice");
  EXPECT_EQ(Refusal({kSource, kConsumer, "--token-file=" + t1, "--consumer-token-file=a=" + same}),
            "consumer-token-file: consumer 'a' has the same token as the global token; each "
            "consumer needs its own");
  const std::string blank = TempFile(" \n");
  EXPECT_EQ(Refusal({kSource, kConsumer, "--token-file=" + blank}),
            "token-file: '" + blank + "' is empty");
  EXPECT_EQ(Refusal({kSource, kConsumer, "--token-file=/nonexistent"}),
            "token-file: cannot read '/nonexistent'");
  EXPECT_EQ(Refusal({kSource}),
            "consumer: configure at least one (--consumer NAME=SCOPE) or a --default-scope");
}

TEST(ConfigParse, ANonLoopbackListenerNeedsTokensAndTls) {
  const std::string own = TempFile("own\n");
  const std::string listen = "--listen=0.0.0.0:1";
  EXPECT_EQ(Refusal({kSource, kConsumer, listen}),
            "listen: 0.0.0.0 is not a loopback address, so a token is required (--token or "
            "--token-file, or --consumer-token-file per consumer)");
  EXPECT_EQ(Refusal({kSource, kConsumer, listen, "--default-scope=s.*",
                     "--consumer-token-file=a=" + own}),
            "listen: 0.0.0.0 is not a loopback address, so a token is required (--token or "
            "--token-file: --default-scope needs the global one)");
  EXPECT_EQ(
      Refusal({kSource, kConsumer, "--consumer=b=s.t", listen, "--consumer-token-file=a=" + own}),
      "listen: 0.0.0.0 is not a loopback address, so every consumer needs a token; 'b' has "
      "none (--consumer-token-file b=FILE, or --token/--token-file)");
  EXPECT_EQ(Refusal({kSource, kConsumer, listen, "--token=t"}),
            "listen: 0.0.0.0 is not a loopback address, so TLS is required (--tls-cert and "
            "--tls-key; or --insecure-no-tls when only a tunnel reaches it)");
  EXPECT_EQ(Refusal({kSource, kConsumer, listen, "--token=t", "--insecure-no-tls"}), "");
  EXPECT_EQ(Refusal({kSource, kConsumer, "--tls-cert=" + own}),
            "tls-key: required with --tls-cert");
  EXPECT_EQ(Refusal({kSource, kConsumer, "--tls-key=" + own}), "tls-cert: required with --tls-key");
  EXPECT_EQ(Refusal({kSource, kConsumer, "--tls-client-ca=" + own}),
            "tls-client-ca: requires --tls-cert and --tls-key (the listener's own certificate)");
  EXPECT_EQ(Refusal({kSource, kConsumer, "--tls-cert=/nonexistent", "--tls-key=" + own}),
            "tls-cert: cannot read '/nonexistent'");
  EXPECT_EQ(
      Refusal({kSource, kConsumer, "--tls-cert=" + own, "--tls-key=" + own, "--insecure-no-tls"}),
      "insecure-no-tls: contradicts --tls-cert; give one of them");
}

TEST(ConfigParse, NumbersOutOfRange) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--listen=nocolon", "listen: expected host:port, got 'nocolon'"},
      {"--listen=h:70000", "listen: port must be 1 to 65535, got '70000'"},
      {"--metrics-listen=h:", "metrics-listen: expected host:port, got 'h:'"},
      {"--max-unconfigured-consumers=-1", "max-unconfigured-consumers: must be 0 to 10000"},
      {"--status-interval=0", "status-interval: must be more than 0 and at most 86400 seconds"},
      {"--heartbeat-interval=86401",
       "heartbeat-interval: must be more than 0 and at most 86400 seconds"},
      {"--reconnect-min=31", "reconnect-max: must not be below reconnect-min"},
      {"--max-pending-handshakes=0", "max-pending-handshakes: must be 1 to 100000"},
      {"--max-buffer-mb=0", "max-buffer-mb: must be 1 to 4096"},
      {"--max-message-bytes=1073741825", "max-message-bytes: must be 0 to 1073741824"},
      {"--value-piece-bytes=1023", "value-piece-bytes: must be 0 (off) or 1024 to 67108864"},
      {"--value-piece-bytes=67108865", "value-piece-bytes: must be 0 (off) or 1024 to 67108864"},
      {"--batch-bytes=-1", "batch-bytes: must be 0 to 67108864"},
      {"--copy-workers=65", "copy-workers: must be 0 to 64"},
      {"--chunk-size=0", "chunk-size: must be 1 to 1000000"},
      {"--max-chunk-size=1000001", "max-chunk-size: must be 1 to 1000000"},
      {"--chunk-memory-mb=0", "chunk-memory-mb: must be 1 to 4096"},
      {"--repair-rows-per-second=-1", "repair-rows-per-second: must be 0 or more"},
      {"--window-key-memory-mb=4097", "window-key-memory-mb: must be 1 to 4096"},
  };
  for (const auto& [arg, message] : cases) EXPECT_EQ(Refusal({kSource, kConsumer, arg}), message);
  EXPECT_EQ(Refusal({kConsumer}), "source: required (a libpq connection string)");
  EXPECT_NE(Refusal({kSource, kConsumer, "--chunk-size=x"}), "");  // boost's own wording
}

// Several wrong settings: the first in the order Parse checks them is the one reported.
TEST(ConfigParse, TheFirstRefusalInCheckingOrderWins) {
  EXPECT_EQ(Refusal({"--listen=x", "--chunk-size=0"}).rfind("source: ", 0), 0u);
  EXPECT_EQ(Refusal({kSource, "--listen=x", "--metrics-listen=y"}).rfind("listen: ", 0), 0u);
  EXPECT_EQ(Refusal({kSource, "--consumer=a", "--tls-cert=c"}).rfind("consumer: ", 0), 0u);
  EXPECT_EQ(
      Refusal({kSource, kConsumer, "--tls-cert=c", "--listen=0.0.0.0:1"}).rfind("tls-key: ", 0),
      0u);
  EXPECT_EQ(
      Refusal({kSource, kConsumer, "--listen=0.0.0.0:1", "--chunk-size=0"}).rfind("listen: ", 0),
      0u);
  EXPECT_EQ(Refusal({kSource, kConsumer, "--chunk-size=0", "--copy-workers=65"}),
            "copy-workers: must be 0 to 64");
  EXPECT_EQ(Refusal({kSource, "--chunk-size=0"}), "chunk-size: must be 1 to 1000000");
}

}  // namespace
}  // namespace dblog::config
