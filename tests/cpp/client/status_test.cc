// tests/cpp/client/status_test.cc: `dblog status`'s pure parts: its flags, reading the status
// document (escaped names decoded), the table, and what counts as unhealthy. The command
// against a real dblogd: tests/cpp/sidecar/status_test.cc.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <sstream>
#include <thread>

#include "client/cli/status.h"

namespace dblog::cli {
namespace {

Environment FakeEnvironment(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

StatusOptions Parse(const std::vector<std::string>& args,
                    std::map<std::string, std::string> env = {}) {
  std::ostringstream help;
  const auto options = ParseStatusArgs(args, FakeEnvironment(std::move(env)), help);
  EXPECT_TRUE(options.has_value());
  return options.value_or(StatusOptions{});
}

std::string UsageErrorOf(const std::vector<std::string>& args) {
  std::ostringstream help;
  try {
    ParseStatusArgs(args, FakeEnvironment({}), help);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(StatusOptions, DefaultsEnvironmentAndFlags) {
  StatusOptions o = Parse({});
  EXPECT_EQ(o.host, "127.0.0.1");
  EXPECT_EQ(o.port, 9187);
  EXPECT_FALSE(o.json);
  EXPECT_FALSE(o.max_lag_bytes.has_value());
  EXPECT_FALSE(o.max_lag_seconds.has_value());
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(5000));

  o = Parse({}, {{"DBLOG_METRICS_ADDRESS", "db1:9200"}});
  EXPECT_EQ(o.host, "db1");
  EXPECT_EQ(o.port, 9200);
  o = Parse({"--metrics-address", "[::1]:9300", "--json", "--max-lag-bytes", "1000",
             "--max-lag-seconds", "2.5", "--timeout", "0.5"},
            {{"DBLOG_METRICS_ADDRESS", "db1:9200"}});
  EXPECT_EQ(o.host, "::1");
  EXPECT_EQ(o.port, 9300);
  EXPECT_TRUE(o.json);
  EXPECT_EQ(o.max_lag_bytes, 1000u);
  EXPECT_EQ(o.max_lag_seconds, 2.5);
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(500));

  EXPECT_NE(UsageErrorOf({"--metrics-address", "nohost"}).find("expected HOST:PORT"),
            std::string::npos);
  EXPECT_NE(UsageErrorOf({"--metrics-address", "h:0"}).find("--metrics-address"),
            std::string::npos);
  EXPECT_NE(UsageErrorOf({"--max-lag-bytes", "-1"}).find("--max-lag-bytes"), std::string::npos);
  EXPECT_NE(UsageErrorOf({"extra"}).find("unexpected argument"), std::string::npos);
  std::ostringstream help;
  EXPECT_FALSE(ParseStatusArgs({"--help"}, FakeEnvironment({}), help).has_value());
  EXPECT_NE(help.str().find("Exit status"), std::string::npos);
}

// A document as dblogd writes it (sidecar/metrics/status.h), with a name that needs escapes;
// the first consumer as an older dblogd wrote it (no disconnected_*, last_ack, sink, repairs).
const char kDocument[] =
    "{\"now\":\"2025-12-05T16:00:00.000Z\",\"consumers\":["
    "{\"name\":\"b\",\"connected\":true,\"connected_since\":\"2025-12-05T15:00:00.000Z\","
    "\"phase\":\"bootstrapping\",\"bootstrap_rows_copied\":1200,\"bootstrap_rows_estimated\":5000,"
    "\"lag_bytes\":20,\"lag_seconds\":0,\"retained_bytes\":20,\"acked_lsn\":\"0/0\","
    "\"confirmed_lsn\":\"0/50\",\"source_wal_lsn\":\"0/64\",\"reconciles\":0,\"window_redos\":0},"
    "{\"name\":\"q\\\"uo\\\\te\\nnew\\u0001line\",\"connected\":false,\"connected_since\":null,"
    "\"disconnected_since\":\"2025-12-05T15:59:48.000Z\",\"disconnected_seconds\":12,"
    "\"last_ack\":null,\"sink\":null,\"client\":null,\"repairs\":[],"
    "\"phase\":\"disconnected\",\"bootstrap_rows_copied\":0,\"bootstrap_rows_estimated\":0,"
    "\"lag_bytes\":0,\"lag_seconds\":12.3,\"retained_bytes\":0,\"acked_lsn\":\"0/9\","
    "\"confirmed_lsn\":\"0/0\",\"source_wal_lsn\":\"0/5\",\"reconciles\":1,\"window_redos\":0},"
    "{\"name\":\"streaming_one\",\"connected\":true,"
    "\"connected_since\":\"2025-12-05T15:58:29.750Z\",\"disconnected_since\":null,"
    "\"disconnected_seconds\":0,\"last_ack\":\"2025-12-05T15:59:59.500Z\","
    "\"sink\":\"127.0.0.1:50312\",\"client\":\"dblog-apply/1\",\"slot_state\":\"reserved\","
    "\"slot_safe_wal_bytes\":null,\"repairs\":["
    "{\"id\":7,\"table\":\"public.t\",\"kind\":\"table\",\"done\":450,\"estimated\":1000,"
    "\"chunks\":1,\"running\":true},"
    "{\"id\":8,\"table\":\"public.u\",\"kind\":\"keys\",\"done\":0,\"estimated\":0,"
    "\"chunks\":0,\"running\":false}],"
    "\"phase\":\"streaming\",\"bootstrap_rows_copied\":0,\"bootstrap_rows_estimated\":0,"
    "\"lag_bytes\":500,\"lag_seconds\":1.5,\"retained_bytes\":550,\"acked_lsn\":\"1/64\","
    "\"confirmed_lsn\":\"1/32\",\"source_wal_lsn\":\"1/258\",\"reconciles\":2,\"window_redos\":3}"
    "]}\n";

TEST(StatusDocument, ReadsEveryConsumerAndDecodesNames) {
  const std::vector<ConsumerStatus> consumers = ParseStatusDocument(kDocument);
  ASSERT_EQ(consumers.size(), 3u);
  EXPECT_EQ(consumers[0].name, "b");
  EXPECT_TRUE(consumers[0].connected);
  EXPECT_EQ(consumers[0].phase, "bootstrapping");
  EXPECT_EQ(consumers[0].bootstrap_rows_copied, 1200u);
  EXPECT_EQ(consumers[0].bootstrap_rows_estimated, 5000u);
  EXPECT_EQ(consumers[1].name, "q\"uo\\te\nnew\x01line");
  EXPECT_FALSE(consumers[1].connected);
  EXPECT_EQ(consumers[1].connected_since, "");
  EXPECT_EQ(consumers[1].lag_seconds, 12.3);
  EXPECT_EQ(consumers[2].lag_bytes, 500u);
  EXPECT_EQ(consumers[2].retained_bytes, 550u);
  EXPECT_EQ(consumers[2].acked_lsn, "1/64");
  EXPECT_EQ(consumers[2].window_redos, 3u);
  EXPECT_EQ(consumers[0].disconnected_seconds, 0);  // an older dblogd's document
  EXPECT_EQ(consumers[0].sink, "");
  EXPECT_TRUE(consumers[0].repairs.empty());
  EXPECT_EQ(consumers[1].disconnected_seconds, 12);
  EXPECT_EQ(consumers[1].last_ack, "");
  EXPECT_EQ(consumers[2].last_ack, "2025-12-05T15:59:59.500Z");
  EXPECT_EQ(consumers[2].sink, "127.0.0.1:50312");
  EXPECT_EQ(consumers[2].slot_state, "reserved");
  EXPECT_EQ(consumers[1].slot_state, "");
  ASSERT_EQ(consumers[2].repairs.size(), 2u);
  EXPECT_EQ(consumers[2].repairs[0].id, 7u);
  EXPECT_EQ(consumers[2].repairs[0].table, "public.t");
  EXPECT_EQ(consumers[2].repairs[0].done, 450u);
  EXPECT_EQ(consumers[2].repairs[0].estimated, 1000u);
  EXPECT_TRUE(consumers[2].repairs[0].running);
  EXPECT_FALSE(consumers[2].repairs[1].running);
  EXPECT_TRUE(ParseStatusDocument("{\"now\":\"x\",\"consumers\":[]}").empty());
  EXPECT_THROW(ParseStatusDocument("not json"), std::runtime_error);
  EXPECT_THROW(ParseStatusDocument("{\"consumers\":[{\"name\":\"a\"}]}"), std::runtime_error);
}

TEST(StatusTable, AlignedRowsWithPrintableNames) {
  EXPECT_EQ(RenderStatusTable(ParseStatusDocument(kDocument)),
            "CONSUMER          PHASE                                  CONNECTED SINCE           LAG BYTES  LAG S  RETAINED BYTES  SLOT      ACKED  CONFIRMED  LAST ACK                  SINK             RECONCILES  REDOS\n"
            "b                 bootstrapping 1200/5000 rows           2025-12-05T15:00:00.000Z         20    0.0              20  -         0/0    0/50       -                         -                         0      0\n"
            "q\"uo\\te?new?line  disconnected 12.0 s                    -                                 0   12.3               0  -         0/9    0/0        -                         -                         1      0\n"
            "streaming_one     repairing #7 public.t 45% (+1 queued)  2025-12-05T15:58:29.750Z        500    1.5             550  reserved  1/64   1/32       2025-12-05T15:59:59.500Z  127.0.0.1:50312           2      3\n");
}

TEST(StatusHealth, DisconnectedOrLagAboveTheMaximums) {
  const std::vector<ConsumerStatus> c = ParseStatusDocument(kDocument);
  StatusOptions none;
  EXPECT_TRUE(Unhealthy(c[0], none).empty());
  EXPECT_EQ(Unhealthy(c[1], none), std::vector<std::string>{"disconnected"});
  EXPECT_TRUE(Unhealthy(c[2], none).empty());
  StatusOptions strict;
  strict.max_lag_bytes = 500;   // not exceeded: equal
  strict.max_lag_seconds = 1;
  EXPECT_EQ(Unhealthy(c[2], strict),
            std::vector<std::string>{"lag_seconds 1.5 exceeds --max-lag-seconds 1.0"});
  strict.max_lag_bytes = 499;
  EXPECT_EQ(Unhealthy(c[2], strict).size(), 2u);
  EXPECT_EQ(Unhealthy(c[2], strict)[0], "lag_bytes 500 exceeds --max-lag-bytes 499");
  // disconnected for 12 s: healthy under a longer allowance, not under a shorter one
  StatusOptions patient;
  patient.max_disconnected_seconds = 30;
  EXPECT_TRUE(Unhealthy(c[1], patient).empty());
  patient.max_disconnected_seconds = 10;
  EXPECT_EQ(Unhealthy(c[1], patient),
            std::vector<std::string>{
                "disconnected for 12.0 s, longer than --max-disconnected-seconds 10.0"});
  EXPECT_EQ(Parse({"--max-disconnected-seconds", "90"}).max_disconnected_seconds, 90);
  EXPECT_NE(UsageErrorOf({"--max-disconnected-seconds", "x"}).find("--max-disconnected-seconds"),
            std::string::npos);
}

// A listening socket on 127.0.0.1 (an ephemeral port) that the test accepts on, or not.
struct Listener {
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(fd, 4), 0);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~Listener() { close(fd); }
  int fd;
  std::uint16_t port;
};

std::string FetchError(std::uint16_t port, std::chrono::milliseconds timeout) {
  try {
    FetchStatus("127.0.0.1", port, timeout);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// What makes `dblog status` exit 2: no listener, one that never answers, one that answers
// something else than a status document.
TEST(StatusFetch, UnreachableSilentOrNotDblogdIsAnError) {
  std::uint16_t closed_port;
  {
    Listener gone;
    closed_port = gone.port;
  }
  EXPECT_NE(FetchError(closed_port, std::chrono::milliseconds(5000)).find("connecting 127.0.0.1:"),
            std::string::npos);

  Listener silent;  // the kernel accepts; nobody reads or answers
  EXPECT_NE(FetchError(silent.port, std::chrono::milliseconds(200)).find("within the timeout"),
            std::string::npos);

  Listener other;
  std::thread server([&other] {
    const int c = accept(other.fd, nullptr, nullptr);
    char buf[1024];
    std::string request;
    while (request.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = read(c, buf, sizeof buf);
      if (n <= 0) break;
      request.append(buf, static_cast<std::size_t>(n));
    }
    const std::string answer = "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n";
    EXPECT_EQ(write(c, answer.data(), answer.size()), static_cast<ssize_t>(answer.size()));
    close(c);
  });
  EXPECT_NE(FetchError(other.port, std::chrono::milliseconds(10000)).find("404 Not Found"),
            std::string::npos);
  server.join();
}

}  // namespace
}  // namespace dblog::cli
