// tests/cpp/sidecar/identity_test.cc: who may connect as which consumer. Per-consumer tokens
// (one consumer's token opens no other), the global token as fallback, settings dblogd refuses
// to start with, and the cap on slots of consumers not named by --consumer (--default-scope).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "dblogd_fixture.h"

namespace dblog::test {
namespace {

using dblog::v1::Error;

// A file holding `token`, removed at the end of the test.
class TokenFile {
 public:
  explicit TokenFile(const std::string& token) {
    char tmpl[] = "/tmp/dblog-token-XXXXXX";
    const int fd = mkstemp(tmpl);
    close(fd);
    path_ = tmpl;
    std::ofstream(path_) << token << "\n";
  }
  ~TokenFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// dblogd with these arguments only; returns its exit status and stderr.
std::pair<int, std::string> RunDblogd(const std::string& args) {
  char tmpl[] = "/tmp/dblogd-config-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  const int status =
      std::system((std::string(DBLOGD_PATH) + " " + args + " 2>" + tmpl + " >/dev/null").c_str());
  std::ifstream in(tmpl);
  std::stringstream err;
  err << in.rdbuf();
  unlink(tmpl);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, err.str()};
}

TEST(DblogdConfig, RefusesSettingsThatLeaveConsumersOpenOrShareTokens) {
  TokenFile a("token-a"), b("token-a"), g("token-a");
  const std::string base = "--source=dbname=none --metrics-listen=off ";
  struct Case {
    std::string args;
    std::string message;
  } cases[] = {
      {"--listen=0.0.0.0:1 --consumer=a=public.*", "a token is required"},
      // one consumer with its own token does not cover the other
      {"--listen=0.0.0.0:1 --consumer=a=public.* --consumer=b=public.* "
       "--consumer-token-file=a=" + a.path(),
       "every consumer needs a token; 'b' has none"},
      // unnamed consumers can only present the global token
      {"--listen=0.0.0.0:1 --consumer=a=public.* --consumer-token-file=a=" + a.path() +
           " --default-scope=public.*",
       "--default-scope needs the global one"},
      {"--consumer=a=public.* --consumer=b=public.* --consumer-token-file=a=" + a.path() +
           " --consumer-token-file=b=" + b.path(),
       "consumer 'b' has the same token as consumer 'a'"},
      {"--consumer=a=public.* --consumer-token-file=a=" + a.path() + " --token-file=" + g.path(),
       "the same token as the global token"},
      {"--consumer=a=public.* --consumer-token-file=x=" + a.path(),
       "'x' is not a configured consumer"},
      {"--consumer=a=public.* --consumer-token-file=a=/nonexistent", "cannot read"},
      {"--default-scope=public.* --max-unconfigured-consumers=-1",
       "max-unconfigured-consumers: must be 0 to 10000"},
  };
  for (const auto& c : cases) {
    const auto [status, err] = RunDblogd(base + c.args);
    EXPECT_EQ(status, 2) << c.args << "\n" << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << c.args << "\n" << err;
  }
}

class IdentityTest : public DblogdTest {
 protected:
  client::Client ConnectAs(const std::string& name, const std::string& token) {
    client::ConnectOptions o;
    o.port = dblogd_->port();
    o.consumer = name;
    o.token = token;
    o.client_name = "identity-test";
    o.io_timeout = std::chrono::milliseconds(30000);
    return client::Client::Connect(o);
  }
  // Drops the slots and bookkeeping of this test's other consumers (names starting with
  // consumer() + "_"), as docs/operations.md tells an operator to.
  void DropOtherConsumers() {
    const std::string like = consumer() + "\\_%";
    for (int i = 0; i < 100; ++i) {
      try {
        db().exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                  " WHERE slot_name LIKE 'dblog\\_" + like + "'");
        break;
      } catch (const PgError&) {  // still active for a moment after a disconnect
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    db().exec("DELETE FROM dblog.request_progress WHERE consumer LIKE '" + like + "'");
    db().exec("DELETE FROM dblog.consumers WHERE name LIKE '" + like + "'");
  }
  void SetUp() override {
    DblogdTest::SetUp();
    if (!IsSkipped()) DropOtherConsumers();
  }
  void TearDown() override {
    if (dblogd_) dblogd_->Stop();
    if (!IsSkipped()) DropOtherConsumers();
    DblogdTest::TearDown();
  }
};

TEST_F(IdentityTest, EachConsumersTokenOpensOnlyThatConsumer) {
  const std::string a = consumer(), b = consumer() + "_b", c = consumer() + "_c";
  TokenFile token_a("secret-of-a"), token_b("secret-of-b"), global("global-secret");
  StartDblogd({"--bootstrap=false", "--consumer=" + a + "=" + schema() + ".*",
               "--consumer=" + b + "=" + schema() + ".*",
               "--consumer=" + c + "=" + schema() + ".*",
               "--consumer-token-file=" + a + "=" + token_a.path(),
               "--consumer-token-file=" + b + "=" + token_b.path(),
               "--token-file=" + global.path()});
  // a's token does not open b, nor b's a; the global token opens neither (they have their own)
  EXPECT_EQ(ExpectRefused([&] { return ConnectAs(b, "secret-of-a"); }), Error::AUTH_FAILED);
  EXPECT_EQ(ExpectRefused([&] { return ConnectAs(a, "secret-of-b"); }), Error::AUTH_FAILED);
  EXPECT_EQ(ExpectRefused([&] { return ConnectAs(a, "global-secret"); }), Error::AUTH_FAILED);
  // no token is refused when tokens are configured
  EXPECT_EQ(ExpectRefused([&] { return ConnectAs(a, ""); }), Error::AUTH_FAILED);
  EXPECT_EQ(ExpectRefused([&] { return ConnectAs(c, ""); }), Error::AUTH_FAILED);
  // c has no token of its own: the global one opens it, a's does not
  EXPECT_EQ(ExpectRefused([&] { return ConnectAs(c, "secret-of-a"); }), Error::AUTH_FAILED);
  // the right tokens open each
  client::Client ca = ConnectAs(a, "secret-of-a");
  client::Client cb = ConnectAs(b, "secret-of-b");
  client::Client cc = ConnectAs(c, "global-secret");
  EXPECT_EQ(ca.welcome().slot(), "dblog_" + a);
  EXPECT_EQ(cb.welcome().slot(), "dblog_" + b);
  EXPECT_EQ(cc.welcome().slot(), "dblog_" + c);
  Replay replay;
  ReadUntil(ca, replay, Sentinel());
  EXPECT_NE(dblogd_->Metrics().find("dblog_connections_refused_total 6"), std::string::npos);
  EXPECT_EQ(dblogd_->log().find("consumers_without_token"), std::string::npos);
}

TEST_F(IdentityTest, WithoutTokensOnLoopbackEveryConsumerIsOpenAndTheLogSaysSo) {
  TokenFile token_b("secret-of-b");
  const std::string b = consumer() + "_b";
  StartDblogd({"--bootstrap=false", "--consumer=" + consumer() + "=" + schema() + ".*",
               "--consumer=" + b + "=" + schema() + ".*",
               "--consumer-token-file=" + b + "=" + token_b.path()});
  client::Client ca = ConnectAs(consumer(), "");  // the README's quick start
  EXPECT_EQ(ca.welcome().slot(), Slot());
  EXPECT_EQ(ExpectRefused([&] { return ConnectAs(b, ""); }), Error::AUTH_FAILED);
  const std::string log = dblogd_->log();
  const auto warning = log.find("event=consumers_without_token");
  ASSERT_NE(warning, std::string::npos) << log;
  const std::string line = log.substr(warning, log.find('\n', warning) - warning);
  EXPECT_NE(line.find("consumers=" + consumer()), std::string::npos) << line;
  EXPECT_EQ(line.find(b), std::string::npos) << line;
}

TEST_F(IdentityTest, UnconfiguredConsumersNeedTheGlobalTokenAndAreCapped) {
  const std::string u1 = consumer() + "_u1", u2 = consumer() + "_u2", u3 = consumer() + "_u3";
  // slots of unnamed consumers that exist already (other tests' leftovers) count against the cap
  const int existing = std::stoi(db().scalar(
      "SELECT count(*) FROM pg_replication_slots WHERE plugin = 'dblog'"
      " AND database = current_database() AND slot_name LIKE 'dblog\\_%'"
      " AND slot_name <> '" + Slot() + "'"));
  StartDblogd({"--bootstrap=false", "--token=global-secret",
               "--default-scope=" + schema() + ".*",
               "--max-unconfigured-consumers=" + std::to_string(existing + 2)});
  EXPECT_EQ(ExpectRefused([&] { return ConnectAs(u1, ""); }), Error::AUTH_FAILED);
  EXPECT_EQ(ExpectRefused([&] { return ConnectAs(u1, "wrong"); }), Error::AUTH_FAILED);
  {
    client::Client c1 = ConnectAs(u1, "global-secret");
    client::Client c2 = ConnectAs(u2, "global-secret");
    EXPECT_TRUE(c1.welcome().slot_created());
    EXPECT_TRUE(c2.welcome().slot_created());
    EXPECT_NE(dblogd_->Metrics().find("consumer=\"" + u1 + "\""), std::string::npos);
  }
  // the cap is reached: a third new name is refused, and gets no series of its own
  EXPECT_EQ(ExpectRefused([&] { return ConnectAs(u3, "global-secret"); }), Error::TOO_MANY_CONSUMERS);
  EXPECT_EQ(db().scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'dblog_" +
                        u3 + "'"),
            "0");
  // names that have their slot come back; the configured consumer still connects
  client::Client again = [&] {
    for (int i = 0;; ++i) {  // u1's previous session may still be closing (ALREADY_CONNECTED)
      try {
        return ConnectAs(u1, "global-secret");
      } catch (const client::ServerError& e) {
        if (e.code() != Error::ALREADY_CONNECTED || i == 50) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }();
  EXPECT_FALSE(again.welcome().slot_created());
  client::Client configured = ConnectAs(consumer(), "global-secret");
  Replay replay;
  ReadUntil(configured, replay, Sentinel());
  const std::string metrics = dblogd_->Metrics();
  EXPECT_NE(metrics.find("dblog_unconfigured_consumers_refused_total 1"), std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find(u3), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("consumer=\"" + u2 + "\""), std::string::npos)
      << "a disconnected unnamed consumer keeps no series\n" << metrics;

  // The cleanup operators are told to run once dblogd is stopped: every dblog slot and
  // bookkeeping row of a name not given to --consumer goes.
  dblogd_->Stop();
  // The stopped dblogd's walsenders end a moment after it; until then their slots are active,
  // and the cleanup (which drops only inactive slots) would leave them.
  for (int i = 0; i < 100 && db().scalar("SELECT count(*) FROM pg_replication_slots WHERE "
                                         "slot_name LIKE 'dblog\\_" + consumer() +
                                         "\\_u%' AND active") != "0";
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::string keep = "'" + consumer() + "'";
  for (int i = 0; i < 100; ++i) {
    try {
      db().exec(
          "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
          " WHERE plugin = 'dblog' AND database = current_database()"
          "   AND slot_name LIKE 'dblog\\_" + consumer() + "\\_u%' AND NOT active"
          "   AND slot_name <> ALL (ARRAY['dblog_' || " + keep + "])");
      break;
    } catch (const PgError&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  db().exec("DELETE FROM dblog.request_progress WHERE consumer LIKE '" + consumer() +
            "\\_u%' AND consumer <> ALL (ARRAY[" + keep + "])");
  db().exec("DELETE FROM dblog.consumers WHERE name LIKE '" + consumer() +
            "\\_u%' AND name <> ALL (ARRAY[" + keep + "])");
  EXPECT_EQ(db().scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name LIKE 'dblog\\_" +
                        consumer() + "\\_u%'"),
            "0");
  EXPECT_EQ(db().scalar("SELECT count(*) FROM dblog.consumers WHERE name LIKE '" + consumer() +
                        "\\_u%'"),
            "0");
}

}  // namespace
}  // namespace dblog::test
