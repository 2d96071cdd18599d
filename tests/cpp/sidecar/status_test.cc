// tests/cpp/sidecar/status_test.cc: `dblog status` end to end: the real dblog binary reads
// GET /status.json from a real dblogd (DblogdTest) with a consumer streaming through the real
// client and one configured that never connects; the rows it prints, --json, and its exit
// statuses (0 healthy, 1 a consumer disconnected or lagging past --max-lag-*, 2 no dblogd).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/cli/status.h"
#include "dblogd_fixture.h"

namespace dblog::test {
namespace {

struct CommandRun {
  int status = -1;  // the exit status; -1 when it did not exit
  std::string out, err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `dblog status <args>` and returns what it printed and its exit status.
CommandRun DblogStatus(std::uint16_t metrics_port, const std::string& args = "") {
  char dir_template[] = "/tmp/dblog-status-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string out = dir + "/out", err = dir + "/err";
  const int status = std::system(
      (std::string(DBLOG_PATH) + " status --metrics-address 127.0.0.1:" +
       std::to_string(metrics_port) + " " + args + " >" + out + " 2>" + err)
          .c_str());
  CommandRun run;
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.out = ReadFile(out);
  run.err = ReadFile(err);
  std::remove(out.c_str());
  std::remove(err.c_str());
  rmdir(dir.c_str());
  return run;
}

// The status document's entry for `name`, read with the command's own reader (GET /status.json
// on the metrics port); nullopt when it is not listed.
std::optional<cli::ConsumerStatus> StatusOf(const DblogdProcess& dblogd, const std::string& name) {
  const RawReply reply = RawExchange(dblogd.metrics_port(), "GET /status.json HTTP/1.0\r\n\r\n",
                                     std::chrono::milliseconds(10000));
  const auto body = reply.bytes.find("\r\n\r\n");
  if (body == std::string::npos) return std::nullopt;
  for (const auto& c : cli::ParseStatusDocument(reply.bytes.substr(body + 4)))
    if (c.name == name) return c;
  return std::nullopt;
}

// Polls the status document until `done` holds for `name` (a test failure after 60 s).
void WaitForStatus(const DblogdProcess& dblogd, const std::string& name,
                   const std::function<bool(const cli::ConsumerStatus&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto c = StatusOf(dblogd, name);
    if (c && done(*c)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "the status of " << name << " did not reach the expected state";
}

// The line of `table` that starts with `name` and a space; "" when none.
std::string Row(const std::string& table, const std::string& name) {
  std::istringstream in(table);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + " ", 0) == 0) return line;
  return "";
}

class StatusTest : public DblogdTest {};

TEST_F(StatusTest, RowsJsonAndExitStatusesFromARealDblogd) {
  db().exec("CREATE TABLE " + schema() + ".t (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + schema() + ".t SELECT g, 'v' || g FROM generate_series(1, 10) g");
  const std::string never = consumer() + "_never";
  StartDblogd({"--consumer=" + consumer() + "=" + schema() + ".*",
               "--consumer=" + never + "=" + schema() + ".*"});

  // Nothing connected yet: both listed, both disconnected.
  CommandRun run = DblogStatus(dblogd_->metrics_port());
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_EQ(run.out.rfind("CONSUMER ", 0), 0u) << run.out;
  EXPECT_NE(Row(run.out, consumer()).find(" disconnected "), std::string::npos) << run.out;
  EXPECT_NE(Row(run.out, never).find(" disconnected "), std::string::npos) << run.out;

  // One consumer streaming (bootstrapped, a commit acknowledged), the other never connected.
  Replay replay;
  std::optional<client::Client> c = Connect();
  ReadUntil(*c, replay, 0);
  const std::uint64_t lsn = Sentinel();
  ReadUntil(*c, replay, lsn);
  WaitForStatus(*dblogd_, consumer(), [](const cli::ConsumerStatus& s) {
    return s.connected && s.phase == "streaming" && s.acked_lsn != "0/0" &&
           s.slot_state == "reserved";  // read from pg_replication_slots at a heartbeat
  });
  run = DblogStatus(dblogd_->metrics_port());
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  const std::string streaming_row = Row(run.out, consumer());
  EXPECT_NE(streaming_row.find(" streaming "), std::string::npos) << run.out;
  EXPECT_EQ(streaming_row.find(" - "), std::string::npos) << run.out;  // connected since shown
  EXPECT_NE(Row(run.out, never).find(" disconnected "), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("consumer " + never + ": disconnected"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("consumer " + consumer() + ":"), std::string::npos) << run.err;

  // --json: the document as dblogd sent it, with the same exit status.
  run = DblogStatus(dblogd_->metrics_port(), "--json");
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_EQ(run.out.rfind("{\"now\":\"", 0), 0u) << run.out;
  EXPECT_NE(run.out.find("{\"name\":\"" + consumer() + "\",\"connected\":true,"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("{\"name\":\"" + never +
                         "\",\"connected\":false,\"connected_since\":null,"
                         "\"disconnected_since\":\"20"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("\"phase\":\"disconnected\","), std::string::npos) << run.out;
  const auto parsed = cli::ParseStatusDocument(run.out);
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_NE(parsed[0].connected_since, "");
  EXPECT_NE(parsed[0].acked_lsn, "0/0");

  // Only the streaming consumer configured: healthy.
  c.reset();
  dblogd_->Stop();
  StartDblogd();
  c = Connect(replay.last_position());
  const std::uint64_t lsn2 = Sentinel();
  ReadUntil(*c, replay, lsn2);
  WaitForStatus(*dblogd_, consumer(), [](const cli::ConsumerStatus& s) {
    return s.connected && s.phase == "streaming" && s.lag_seconds == 0;
  });
  run = DblogStatus(dblogd_->metrics_port());
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(Row(run.out, consumer()).find(" streaming "), std::string::npos) << run.out;
  EXPECT_EQ(Row(run.out, never), "") << run.out;
  EXPECT_EQ(DblogStatus(dblogd_->metrics_port(), "--max-lag-seconds 3600").status, 0);

  // A commit sent and not acknowledged: lagging past --max-lag-* of 0, not past large ones.
  Sentinel();
  WaitForStatus(*dblogd_, consumer(), [](const cli::ConsumerStatus& s) {
    return s.lag_bytes > 0 && s.lag_seconds > 0;
  });
  run = DblogStatus(dblogd_->metrics_port(), "--max-lag-bytes 0");
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_NE(run.err.find("exceeds --max-lag-bytes 0"), std::string::npos) << run.err;
  run = DblogStatus(dblogd_->metrics_port(), "--max-lag-seconds 0");
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_NE(run.err.find("exceeds --max-lag-seconds 0.0"), std::string::npos) << run.err;
  EXPECT_EQ(
      DblogStatus(dblogd_->metrics_port(), "--max-lag-bytes 1000000000000 --max-lag-seconds 3600")
          .status,
      0);

  // The consumer gone: disconnected, 1.
  c.reset();
  WaitForStatus(*dblogd_, consumer(), [](const cli::ConsumerStatus& s) { return !s.connected; });
  run = DblogStatus(dblogd_->metrics_port());
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_NE(Row(run.out, consumer()).find(" disconnected "), std::string::npos) << run.out;
  // ... for how long: healthy within --max-disconnected-seconds, unhealthy past it
  EXPECT_EQ(DblogStatus(dblogd_->metrics_port(), "--max-disconnected-seconds 3600").status, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  run = DblogStatus(dblogd_->metrics_port(), "--max-disconnected-seconds 0.1");
  EXPECT_EQ(run.status, 1) << run.out << run.err;
  EXPECT_NE(run.err.find("longer than --max-disconnected-seconds 0.1"), std::string::npos)
      << run.err;

  // No dblogd: 2, and why.
  const std::uint16_t port = dblogd_->metrics_port();
  dblogd_->Stop();
  run = DblogStatus(port);
  EXPECT_EQ(run.status, 2) << run.out << run.err;
  EXPECT_EQ(run.out, "");
  EXPECT_NE(run.err.find("dblog status: "), std::string::npos) << run.err;
}

}  // namespace
}  // namespace dblog::test
