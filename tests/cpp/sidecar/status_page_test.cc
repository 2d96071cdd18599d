// tests/cpp/sidecar/status_page_test.cc: dblogd's status page (GET /status) in a real browser:
// Debian's Chromium, headless, loads it from a real dblogd (DblogdTest) whose consumers are in
// different phases (streaming, repairing with a paced repair in flight, bootstrapping held by a
// client that stopped reading, never connected) after a handshake was refused for a name full
// of markup; the test reads the DOM Chromium rendered (--dump-dom) and keeps a screenshot
// (build/test-artifacts/status-page.png); then the repairing consumer leaves and its repair is
// no longer shown in flight. Chromium comes from scripts/install-deps.sh; without
// it the test fails and says so (as the NATS tests do without nats-server).
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "dblogd_fixture.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Chromium's path ("" when it is not installed).
std::string Chromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (access(path, X_OK) == 0) return path;
  return "";
}

// Runs headless Chromium on `url` with `mode` (--dump-dom, --screenshot=PATH ...), its own
// profile directory, at most 90 s; returns what it printed on stdout.
std::string RunChromium(const std::string& chromium, const std::string& mode,
                        const std::string& url, int* status) {
  char dir_template[] = "/tmp/dblog-chromium-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string out = dir + "/out";
  // As root Chromium needs --no-sandbox; it loads only this test's page.
  const std::string command =
      "timeout 90 " + chromium + " --headless " + (geteuid() == 0 ? "--no-sandbox " : "") +
      "--disable-gpu --no-first-run --user-data-dir=" + dir + "/profile " + mode + " '" + url +
      "' >" + out + " 2>" + dir + "/err";
  *status = std::system(command.c_str());
  const std::string text = ReadFile(out);
  std::system(("rm -rf '" + dir + "'").c_str());
  return text;
}

// The HTML of GET /status as dblogd serves it (for polling; the checks use Chromium's DOM).
std::string FetchPage(std::uint16_t port) {
  const RawReply reply = RawExchange(port, "GET /status HTTP/1.0\r\n\r\n", 10000ms);
  const auto body = reply.bytes.find("\r\n\r\n");
  return body == std::string::npos ? "" : reply.bytes.substr(body + 4);
}

// The row of consumer `name` in a page or DOM: from its <tr ... data-consumer="name"> to </tr>.
std::string ConsumerRow(const std::string& html, const std::string& name) {
  const auto start = html.find("<tr class=\"consumer");
  if (start == std::string::npos) return "";
  const auto at = html.find("data-consumer=\"" + name + "\"", start);
  if (at == std::string::npos) return "";
  const auto row = html.rfind("<tr", at);
  return html.substr(row, html.find("</tr>", at) - row);
}

// The number in attribute `attribute="..."` of the element with class `cls` in `row`; -1 if
// absent or not a number.
double Attribute(const std::string& row, const std::string& cls, const std::string& attribute) {
  std::smatch m;
  if (!std::regex_search(row, m,
                         std::regex("class=\"" + cls + "\"[^>]*" + attribute +
                                    "=\"([0-9]+(\\.[0-9]+)?)\"")))
    return -1;
  return std::stod(m[1]);
}

// The value of the first repair progress bar in `html` (percent); -1 when there is none.
double ProgressValue(const std::string& html) {
  std::smatch m;
  if (!std::regex_search(html, m, std::regex("<progress max=\"100\" value=\"([0-9]+)\">")))
    return -1;
  return std::stod(m[1]);
}

// Polls the page until `done` holds (a test failure after `timeout`).
void WaitForPage(std::uint16_t port, const std::string& what,
                 const std::function<bool(const std::string&)>& done,
                 std::chrono::seconds timeout = 120s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string page;
  while (std::chrono::steady_clock::now() < deadline) {
    page = FetchPage(port);
    if (done(page)) return;
    std::this_thread::sleep_for(200ms);
  }
  ADD_FAILURE() << "the status page never showed " << what << ":\n" << page;
}

// The fixture's consumer is the repairing one; the three others, their slots and bookkeeping
// rows are this class's to remove, before (a crashed run's) and after the test: a slot left
// behind would be resumed by the next run, whose stream would start in the old one's WAL.
class StatusPageTest : public DblogdTest {
 protected:
  void SetUp() override {
    DblogdTest::SetUp();
    if (!IsSkipped()) DropOthers();
  }
  void TearDown() override {
    DblogdTest::TearDown();  // stops dblogd
    if (!IsSkipped()) DropOthers();
  }
  std::vector<std::string> Others() const {
    return {consumer() + "_live", consumer() + "_boot", consumer() + "_never"};
  }

 private:
  void DropOthers() {
    for (const std::string& name : Others()) {
      // a walsender that is shutting down may still hold the slot for a moment
      for (int i = 0; i < 100; ++i) {
        try {
          db().exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                    " WHERE slot_name = 'dblog_" + name + "'");
          break;
        } catch (const PgError&) {
          std::this_thread::sleep_for(100ms);
        }
      }
      db().exec("DELETE FROM dblog.consumers WHERE name = '" + name + "'");
      db().exec("DELETE FROM dblog.request_progress WHERE consumer = '" + name + "'");
    }
  }
};

TEST_F(StatusPageTest, ChromiumShowsEachConsumersPhaseLagSparklineRepairAndEscapedErrors) {
  const std::string chromium = Chromium();
  if (chromium.empty())
    FAIL() << "chromium is not installed: this test loads the status page in headless Chromium; "
              "install it with scripts/install-deps.sh (Debian's packages chromium and "
              "fonts-dejavu-core)";

  const std::string s = schema();
  db().exec("CREATE TABLE " + s + ".live (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + s + ".live SELECT g, 'v' || g FROM generate_series(1, 10) g");
  db().exec("CREATE TABLE " + s + ".mended (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + s + ".mended SELECT g, 'v' || g FROM generate_series(1, 12000) g");
  db().exec("ANALYZE " + s + ".mended");  // the repair's progress in percent of reltuples
  db().exec("CREATE TABLE " + s + ".huge (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + s + ".huge SELECT g, repeat('v', 50) FROM "
            "generate_series(1, 300000) g");
  db().exec("ANALYZE " + s + ".huge");
  const std::string repairing = consumer(), streaming = Others()[0], copying = Others()[1],
                    never = Others()[2];
  // One copy worker and a 1 MiB buffer: the bootstrap of huge stops while its client does not
  // read. The repair of mended reads 100 rows a second: in flight for about 120 s.
  StartDblogd({"--consumer=" + repairing + "=" + s + ".mended",
               "--consumer=" + streaming + "=" + s + ".live",
               "--consumer=" + copying + "=" + s + ".huge",
               "--consumer=" + never + "=" + s + ".live", "--max-buffer-mb=1", "--copy-workers=1",
               "--chunk-size=100", "--repair-rows-per-second=100"});
  const std::uint16_t port = dblogd_->metrics_port();

  // A handshake refused for a name full of markup: a warn line whose text the page must escape.
  const std::string evil = "<script>alert(\"x\")</script>&'";
  EXPECT_EQ(ExpectRefused([&] { return Connect(std::nullopt, evil); }),
            dblog::v1::Error::BAD_CONSUMER_NAME);

  // streaming: bootstrapped, then idle.
  client::Client live = Connect(std::nullopt, streaming);
  Replay live_replay;
  ReadUntil(live, live_replay, 0);

  // repairing: bootstrapped (a whole-table repair of mended runs below while a thread reads on).
  std::optional<client::Client> mend = Connect(std::nullopt, repairing);
  Replay mend_replay;
  ReadUntil(*mend, mend_replay, 0);

  // bootstrapping: 1,000 rows read, then no more.
  client::Client boot = Connect(std::nullopt, copying);
  {
    Replay boot_replay;
    client::Item item;
    int reads = 0;
    while (reads < 1000 && boot.Next(item))
      if (auto* ev = std::get_if<dblog::v1::StreamEvent>(&item)) {
        boot_replay.Apply(*ev);
        if (ev->has_change()) ++reads;
      }
  }

  const std::string request = db().scalar("SELECT dblog.repair('" + s + ".mended')");
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    client::Item item;
    try {
      while (!stop && mend->Next(item)) {
        if (auto* ev = std::get_if<dblog::v1::StreamEvent>(&item)) {
          mend_replay.Apply(*ev);
          if (ev->has_commit()) mend->Ack(*client::Client::PositionOf(*ev));
        }
      }
    } catch (const std::exception&) {  // the connection ends with the test
    }
  });
  OnScopeExit join([&] {
    stop = true;
    if (!reader.joinable()) return;
    if (dblogd_) dblogd_->Stop();  // ends the reader's connection
    reader.join();
  });

  WaitForPage(port, "the repair in flight past 0% and the bootstrap", [&](const std::string& p) {
    const std::string mend_row = ConsumerRow(p, repairing);
    return mend_row.find("data-phase=\"repairing\"") != std::string::npos &&
           ProgressValue(p) > 0 &&
           ConsumerRow(p, copying).find("data-phase=\"bootstrapping\"") != std::string::npos;
  });
  // Lag samples are taken every 15 s from dblogd's start: wait for the second, so that every
  // sparkline has two samples and the current point.
  WaitForPage(port, "a sparkline of 3 points", [&](const std::string& p) {
    return Attribute(ConsumerRow(p, streaming), "sparkline", "data-samples") >= 3;
  }, 60s);

  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/status";
  int status = 0;
  const std::string dom = RunChromium(chromium, "--dump-dom", url, &status);
  ASSERT_EQ(status, 0) << "chromium --dump-dom failed";
  ASSERT_NE(dom.find("<title>dblogd status</title>"), std::string::npos) << dom;
  EXPECT_NE(dom.find("<meta http-equiv=\"refresh\" content=\"5\">"), std::string::npos) << dom;

  // One row per consumer, each in its phase, with its lag numbers and its sparkline.
  for (const std::string& name : {copying, repairing, streaming, never}) {
    const std::string row = ConsumerRow(dom, name);
    ASSERT_NE(row, "") << name << " has no row:\n" << dom;
    EXPECT_NE(row.find("<td class=\"name\">" + name + "</td>"), std::string::npos) << row;
    EXPECT_GE(Attribute(row, "num lag-bytes", "data-value"), 0) << row;
    EXPECT_GE(Attribute(row, "num lag-seconds", "data-value"), 0) << row;
    EXPECT_GE(Attribute(row, "num retained-bytes", "data-value"), 0) << row;
    EXPECT_GE(Attribute(row, "sparkline", "data-samples"), 3) << row;
    EXPECT_NE(row.find("<polyline class=\"bytes\" points=\""), std::string::npos) << row;
    EXPECT_NE(row.find("<polyline class=\"seconds\" points=\""), std::string::npos) << row;
  }
  const std::string live_row = ConsumerRow(dom, streaming);
  EXPECT_NE(live_row.find("data-phase=\"streaming\">streaming</td>"), std::string::npos)
      << live_row;
  EXPECT_NE(live_row.find("<td class=\"sink\">127.0.0.1:"), std::string::npos) << live_row;
  EXPECT_NE(live_row.find("<span class=\"client\">dblogd-test</span>"), std::string::npos)
      << live_row;
  EXPECT_NE(live_row.find("<td class=\"last-ack\"><time"), std::string::npos) << live_row;
  const std::string mend_row = ConsumerRow(dom, repairing);
  EXPECT_NE(mend_row.find("data-phase=\"repairing\">repairing request " + request + " at "),
            std::string::npos)
      << mend_row;
  EXPECT_TRUE(std::regex_search(mend_row, std::regex(" at [0-9]+% \\([0-9]+ of [0-9]+ rows, ")))
      << mend_row;
  const std::string boot_row = ConsumerRow(dom, copying);
  EXPECT_TRUE(std::regex_search(
      boot_row,
      std::regex("data-phase=\"bootstrapping\">bootstrapping: [0-9]+ of ~[0-9]+ rows "
                 "\\([0-9]+%\\)</td>")))
      << boot_row;
  const std::string never_row = ConsumerRow(dom, never);
  EXPECT_NE(never_row.find("data-phase=\"disconnected\">disconnected</td>"), std::string::npos)
      << never_row;
  EXPECT_NE(never_row.find("<td class=\"sink\">-</td>"), std::string::npos) << never_row;

  // The repair in flight, with its table and a progress bar.
  const auto repair = dom.find("<tr class=\"repair\" data-consumer=\"" + repairing +
                               "\" data-request=\"" + request + "\">");
  ASSERT_NE(repair, std::string::npos) << dom;
  const std::string repair_row = dom.substr(repair, dom.find("</tr>", repair) - repair);
  EXPECT_NE(repair_row.find("<td class=\"table\">" + s + ".mended</td>"), std::string::npos)
      << repair_row;
  EXPECT_NE(repair_row.find("<td>running</td>"), std::string::npos) << repair_row;
  EXPECT_GT(ProgressValue(repair_row), 0) << repair_row;

  // The refused name among the problems, as text: the browser made no element of it.
  const auto problems = dom.find("<table id=\"problems\">");
  ASSERT_NE(problems, std::string::npos) << dom;
  const std::string problem_rows = dom.substr(problems);
  EXPECT_NE(problem_rows.find("<td class=\"event\">consumer_refused</td>"), std::string::npos)
      << problem_rows;
  EXPECT_NE(problem_rows.find("&lt;script&gt;alert("), std::string::npos) << problem_rows;
  EXPECT_NE(problem_rows.find("&lt;/script&gt;&amp;'"), std::string::npos) << problem_rows;
  EXPECT_EQ(dom.find("<script"), std::string::npos) << dom;

  // The screenshot, kept as the test's artifact.
  const std::string artifacts = std::string(DBLOG_BINARY_DIR) + "/test-artifacts";
  mkdir(artifacts.c_str(), 0755);
  const std::string png = artifacts + "/status-page.png";
  std::remove(png.c_str());
  RunChromium(chromium, "--screenshot=" + png + " --window-size=1200,800 --hide-scrollbars", url,
              &status);
  EXPECT_EQ(status, 0) << "chromium --screenshot failed";
  const std::string image = ReadFile(png);
  ASSERT_GT(image.size(), 1000u) << "no screenshot at " << png;
  EXPECT_EQ(image.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::cout << "status page screenshot: " << png << std::endl;
  RecordProperty("screenshot", png);

  // The repairing consumer gone (its repair not done): no repair in flight for it any more, in
  // the page and in /status.json (the request resumes when it is back).
  stop = true;
  reader.join();  // Next returns within a heartbeat (0.5 s)
  mend.reset();
  WaitForPage(port, "the disconnected consumer without its repair", [&](const std::string& p) {
    return ConsumerRow(p, repairing).find("data-phase=\"disconnected\"") != std::string::npos &&
           p.find("<tr class=\"repair\"") == std::string::npos;
  }, 30s);
  const RawReply json = RawExchange(port, "GET /status.json HTTP/1.0\r\n\r\n", 10000ms);
  const auto entry = json.bytes.find("{\"name\":\"" + repairing + "\",");
  ASSERT_NE(entry, std::string::npos) << json.bytes;
  const std::string object = json.bytes.substr(entry, json.bytes.find('}', entry) - entry);
  EXPECT_NE(object.find("\"sink\":null,\"client\":null,"), std::string::npos) << object;
  EXPECT_NE(object.find("\"repairs\":[]"), std::string::npos) << object;
}

}  // namespace
}  // namespace dblog::test
