// tests/cpp/config/config_reload_test.cc: config::PlanReload, what SIGHUP changes in a running
// dblogd (settings read with the real config::Parse, no database).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "config/config.h"

namespace dblog::config {
namespace {

Config Read(std::vector<std::string> args) {
  args.insert(args.begin(), "dblogd");
  args.push_back("--source=dbname=x");
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return *Parse(static_cast<int>(argv.size()), argv.data());
}

std::string TokenFile(const std::string& token) {
  char path[] = "/tmp/dblog-reload-token-XXXXXX";
  const int fd = mkstemp(path);
  close(fd);
  std::ofstream(path) << token << "\n";
  chmod(path, 0600);
  return path;
}

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST(PlanReload, NothingChangedEndsNothing) {
  const Config a = Read({"--consumer=c1=public.*", "--consumer=c2=s.t"});
  const Reload r = PlanReload(a, Read({"--consumer=c1=public.*", "--consumer=c2=s.t"}));
  EXPECT_TRUE(r.end_consumers.empty());
  EXPECT_FALSE(r.end_unconfigured);
  EXPECT_TRUE(r.needs_restart.empty());
  EXPECT_TRUE(r.added.empty() && r.removed.empty() && r.changed.empty());
}

TEST(PlanReload, AChangedScopeEndsThatConsumerOnly) {
  const Config a = Read({"--consumer=c1=public.*", "--consumer=c2=s.t"});
  const Reload r = PlanReload(a, Read({"--consumer=c1=public.*,s.u", "--consumer=c2=s.t"}));
  EXPECT_EQ(r.end_consumers, std::vector<std::string>{"c1"});
  EXPECT_EQ(r.changed, std::vector<std::string>{"c1"});
  EXPECT_EQ(r.next.consumers.at("c1").scope.text(), "public.*,s.u");
  EXPECT_FALSE(r.end_unconfigured);
}

TEST(PlanReload, ARemovedConsumerEndsAndAnAddedOneIsAccepted) {
  const Config a = Read({"--consumer=c1=public.*", "--consumer=c2=s.t"});
  const Reload r = PlanReload(a, Read({"--consumer=c1=public.*", "--consumer=c3=s.*"}));
  EXPECT_EQ(r.end_consumers, std::vector<std::string>{"c2"});
  EXPECT_EQ(r.removed, std::vector<std::string>{"c2"});
  EXPECT_EQ(r.added, std::vector<std::string>{"c3"});
  EXPECT_EQ(r.next.consumers.count("c2"), 0u);
  EXPECT_EQ(r.next.consumers.count("c3"), 1u);
}

TEST(PlanReload, ARotatedTokenEndsWhoeverOpenedWithIt) {
  const std::string t1 = TokenFile("first-token-0123456789"), t2 = TokenFile("second-token-0123456789");
  const std::string own1 = TokenFile("own-token-of-c2-aaaaaaaa");
  const std::string own2 = TokenFile("own-token-of-c2-bbbbbbbb");
  const Config a = Read({"--token-file=" + t1, "--consumer=c1=public.*", "--consumer=c2=s.t",
                         "--consumer-token-file=c2=" + own1, "--default-scope=public.*"});
  // the global token rotated: c1 (no token of its own) and unnamed consumers end, c2 does not
  Reload r = PlanReload(a, Read({"--token-file=" + t2, "--consumer=c1=public.*",
                                 "--consumer=c2=s.t", "--consumer-token-file=c2=" + own1,
                                 "--default-scope=public.*"}));
  EXPECT_EQ(r.end_consumers, std::vector<std::string>{"c1"});
  EXPECT_TRUE(r.end_unconfigured);
  EXPECT_EQ(r.next.token, "second-token-0123456789");
  // c2's own token rotated: c2 ends, nobody else
  r = PlanReload(a, Read({"--token-file=" + t1, "--consumer=c1=public.*", "--consumer=c2=s.t",
                          "--consumer-token-file=c2=" + own2, "--default-scope=public.*"}));
  EXPECT_EQ(r.end_consumers, std::vector<std::string>{"c2"});
  EXPECT_FALSE(r.end_unconfigured);
  for (const auto& f : {t1, t2, own1, own2}) unlink(f.c_str());
}

TEST(PlanReload, AChangedDefaultScopeEndsUnnamedConsumers) {
  const Config a = Read({"--consumer=c1=public.*", "--default-scope=public.*"});
  Reload r = PlanReload(a, Read({"--consumer=c1=public.*", "--default-scope=public.a*"}));
  EXPECT_TRUE(r.end_unconfigured);
  EXPECT_TRUE(r.end_consumers.empty());
  r = PlanReload(a, Read({"--consumer=c1=public.*"}));
  EXPECT_TRUE(r.end_unconfigured);
  EXPECT_FALSE(r.next.default_scope.has_value());
}

TEST(PlanReload, OtherSettingsWaitForARestartAndKeepTheirRunningValues) {
  const Config a = Read({"--consumer=c1=public.*", "--listen=127.0.0.1:7000", "--chunk-size=100",
                         "--log-level=info", "--max-unconfigured-consumers=3"});
  const Reload r = PlanReload(a, Read({"--consumer=c1=public.*", "--listen=127.0.0.1:7001",
                                       "--chunk-size=200", "--log-level=debug",
                                       "--max-unconfigured-consumers=5"}));
  EXPECT_TRUE(Has(r.needs_restart, "listen"));
  EXPECT_TRUE(Has(r.needs_restart, "chunk-size"));
  // --chunk-size alone sets --max-chunk-size too (every chunk that size)
  EXPECT_TRUE(Has(r.needs_restart, "max-chunk-size"));
  EXPECT_EQ(r.needs_restart.size(), 3u);
  EXPECT_EQ(r.next.listen.port, 7000);
  EXPECT_EQ(r.next.chunk_size, 100);
  // these apply at once
  EXPECT_EQ(r.next.log_level, "debug");
  EXPECT_EQ(r.next.max_unconfigured_consumers, 5);
  EXPECT_TRUE(r.end_consumers.empty());
}

// Switching between the extension's plugin and pgoutput takes a restart: the slots and the
// events' source differ, a running consumer keeps the mode it started with.
TEST(PlanReload, TheSourcePluginWaitsForARestart) {
  const Config a = Read({"--consumer=c1=public.*"});
  const Reload r = PlanReload(a, Read({"--consumer=c1=public.*", "--source-plugin=pgoutput"}));
  EXPECT_TRUE(Has(r.needs_restart, "source-plugin"));
  EXPECT_EQ(r.next.source_plugin, SourcePlugin::kDblog);
}

}  // namespace
}  // namespace dblog::config
