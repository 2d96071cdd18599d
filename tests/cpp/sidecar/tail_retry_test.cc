// tests/cpp/sidecar/tail_retry_test.cc: `dblog tail` keeps running (issue 13, 4), with the real
// dblogd and the real `dblog` binary as child processes: started before dblogd; dblogd
// SIGKILLed and restarted while a workload runs (every position printed once, every change
// printed); --once exits 1 at the first loss; a refused token exits 1 at once without --once.
// Outcomes only: the waits are generous deadlines, never assertions about time.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "dblogd_fixture.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One NDJSON line as the checks need it.
struct Line {
  std::optional<std::pair<std::uint64_t, std::uint32_t>> position;
  std::string op;
  std::string table;
  std::optional<long> key;  // a single integer key
};

// The text after `name":` up to the next `stop` (or the end), within `text`.
std::optional<std::string> Field(const std::string& text, const std::string& name, char stop) {
  const std::string marker = "\"" + name + "\":";
  const auto at = text.find(marker);
  if (at == std::string::npos) return std::nullopt;
  const auto from = at + marker.size();
  return text.substr(from, text.find(stop, from) - from);
}

std::vector<Line> ParseLines(const std::string& out) {
  std::vector<Line> lines;
  std::istringstream in(out);
  std::string text;
  while (std::getline(in, text)) {
    Line line;
    if (text.rfind("{\"position\":", 0) != 0) {
      ADD_FAILURE() << "not a dblog tail line: " << text;
      continue;
    }
    if (text.rfind("{\"position\":null", 0) != 0) {
      const auto lsn = Field(text, "commit_lsn", ',');  // "X/Y"
      const auto seq = Field(text, "seq", '}');
      if (!lsn || !seq || lsn->size() < 5) {
        ADD_FAILURE() << "no position in: " << text;
        continue;
      }
      const std::string hex = lsn->substr(1, lsn->size() - 2);
      const auto slash = hex.find('/');
      line.position = {std::stoull(hex.substr(0, slash), nullptr, 16) << 32 |
                           std::stoull(hex.substr(slash + 1), nullptr, 16),
                       static_cast<std::uint32_t>(std::stoul(*seq))};
    }
    if (const auto op = Field(text, "op", ',')) line.op = op->substr(1, op->size() - 2);
    if (const auto op = Field(text, "op", '}'); line.op.empty() && op) {
      line.op = op->substr(1, op->size() - 2);
    }
    if (const auto table = Field(text, "table", ',')) {
      line.table = table->substr(1, table->size() - 2);
    }
    if (const auto key = Field(text, "key", '}')) {  // {"name":value, one integer column
      const auto colon = key->find("\":");
      if (colon != std::string::npos && key->find(',') == std::string::npos) {
        line.key = std::stol(key->substr(colon + 2));
      }
    }
    lines.push_back(line);
  }
  return lines;
}

// True when `out` has a line of `table` (schema.name) with the single-column key `id`.
bool HasRow(const std::string& out, const std::string& table, long id) {
  const std::string table_field = "\"table\":\"" + table + "\"";
  for (auto at = out.find(table_field); at != std::string::npos;
       at = out.find(table_field, at + 1)) {
    const auto end = out.find('\n', at);
    const std::string rest = out.substr(at, end == std::string::npos ? end : end - at);
    const auto key = Field(rest, "key", '}');  // {"name":value
    if (key && key->size() > 2 && key->substr(key->find("\":") + 2) == std::to_string(id)) {
      return true;
    }
  }
  return false;
}

// `dblog tail` as a child process: stdout and stderr each to a temp file.
class TailProcess {
 public:
  explicit TailProcess(std::vector<std::string> args) : args_(std::move(args)) {
    for (std::string* path : {&out_path_, &err_path_}) {
      char tmpl[] = "/tmp/dblog-tail-test-XXXXXX";
      close(mkstemp(tmpl));
      *path = tmpl;
    }
    pid_ = fork();
    if (pid_ == 0) {
      const int out = open(out_path_.c_str(), O_WRONLY | O_APPEND);
      const int err = open(err_path_.c_str(), O_WRONLY | O_APPEND);
      dup2(out, 1);
      dup2(err, 2);
      std::vector<std::string> argv = {DBLOG_PATH, "tail"};
      argv.insert(argv.end(), args_.begin(), args_.end());
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
  }
  ~TailProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (!::testing::Test::HasFailure()) {
      unlink(out_path_.c_str());
      unlink(err_path_.c_str());
    }
  }
  std::string out() const { return ReadFile(out_path_); }
  std::string err() const { return ReadFile(err_path_); }
  void Signal(int signo) {
    if (pid_ > 0) kill(pid_, signo);
  }
  bool Exited() {
    if (pid_ <= 0) return true;
    if (waitpid(pid_, &status_, WNOHANG) == pid_) pid_ = -1;
    return pid_ <= 0;
  }
  // The exit code once it has exited within `timeout`, else nullopt.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!Exited()) {
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(20ms);
    }
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
  }
  bool WaitForErr(const std::string& text, std::chrono::seconds timeout) {
    return WaitFor([&] { return err().find(text) != std::string::npos; }, timeout);
  }
  bool WaitForOut(const std::string& text, std::chrono::seconds timeout) {
    return WaitFor([&] { return out().find(text) != std::string::npos; }, timeout);
  }
  // Waits until a line of `table` with the integer key `id` was printed.
  bool WaitForRow(const std::string& table, long id, std::chrono::seconds timeout) {
    return WaitFor([&] { return HasRow(out(), table, id); }, timeout);
  }

 private:
  bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline || Exited()) return done();
      std::this_thread::sleep_for(20ms);
    }
    return true;
  }

  std::vector<std::string> args_;
  std::string out_path_, err_path_;
  pid_t pid_ = -1;
  int status_ = 0;
};

class TailKeepsRunningTest : public DblogdTest {
 protected:
  void TearDown() override {
    StopWriters();
    if (HasFailure() && tail_) {
      std::cerr << "---- dblog tail stderr ----\n" << tail_->err();
    }
    tail_.reset();
    DblogdTest::TearDown();
  }

  void CreateTables() {
    db().exec("CREATE TABLE " + schema() + ".counter (id int PRIMARY KEY, n bigint)");
    db().exec("CREATE TABLE " + schema() + ".events (n bigint PRIMARY KEY)");
    db().exec("CREATE TABLE " + schema() + ".bulk (id bigint PRIMARY KEY, v text)");
    db().exec("CREATE TABLE " + schema() + ".big (id bigint PRIMARY KEY, v text)");
    db().exec("INSERT INTO " + schema() + ".counter VALUES (1, 0)");
  }
  // One writer of small transactions (an update and an insert each), one of larger ones (300
  // inserts each, so that a loss may cut one in the middle).
  void StartWriters() {
    writers_.emplace_back([this] {
      PgConn w(conninfo());
      while (!stop_)
        w.exec("WITH c AS (UPDATE " + schema() +
               ".counter SET n = n + 1 WHERE id = 1 RETURNING n) INSERT INTO " + schema() +
               ".events SELECT n FROM c");
    });
    writers_.emplace_back([this] {
      PgConn w(conninfo());
      for (long next = 1; !stop_; next += 300) {
        w.exec("INSERT INTO " + schema() + ".bulk SELECT g, repeat('x', 100) FROM " +
               "generate_series(" + std::to_string(next) + ", " + std::to_string(next + 299) +
               ") g");
        std::this_thread::sleep_for(50ms);
      }
    });
  }
  void StopWriters() {
    stop_ = true;
    for (auto& w : writers_)
      if (w.joinable()) w.join();
    writers_.clear();
  }
  long SourceCount(const std::string& table) {
    return std::stol(db().scalar("SELECT count(*) FROM " + schema() + "." + table));
  }
  // Waits until tail printed the sentinel row `id`.
  void WaitForSentinel(int id) {
    ASSERT_TRUE(tail_->WaitForRow(schema() + ".sentinel", id, 120s)) << tail_->err();
  }
  // Waits until tail printed the event `n` (the workload reached and printed it).
  void WaitForEvent(long n) {
    ASSERT_TRUE(tail_->WaitForRow(schema() + ".events", n, 120s)) << tail_->err();
  }
  // Every positioned line once, in increasing order; every row of the source tables printed
  // exactly once (as a copied row or an insert); every transaction begun is committed.
  void ExpectEverythingOnce() {
    const std::vector<Line> lines = ParseLines(tail_->out());
    std::optional<std::pair<std::uint64_t, std::uint32_t>> last;
    std::size_t disordered = 0;
    for (const Line& line : lines) {
      if (!line.position) continue;
      if (last && !(*last < *line.position)) ++disordered;
      last = line.position;
    }
    EXPECT_EQ(disordered, 0u) << "positions printed twice or out of order";
    for (const std::string table : {"events", "bulk", "big"}) {
      std::map<long, int> printed;
      for (const Line& line : lines) {
        if (line.table == schema() + "." + table && (line.op == "insert" || line.op == "read") &&
            line.key)
          ++printed[*line.key];
      }
      const long rows = SourceCount(table);
      EXPECT_EQ(static_cast<long>(printed.size()), rows) << table << ": rows missing";
      long twice = 0;
      for (const auto& [key, n] : printed) twice += n > 1;
      EXPECT_EQ(twice, 0) << table << ": rows printed more than once";
      if (table == "events") {
        EXPECT_EQ(printed.empty() ? 0 : printed.rbegin()->first, rows) << "a gap in the events";
      }
    }
    std::optional<std::uint64_t> open;
    std::size_t unfinished = 0;
    for (const Line& line : lines) {
      if (line.op == "begin") {
        if (open) ++unfinished;
        open = line.position->first;
      } else if (line.op == "commit") {
        EXPECT_EQ(open, line.position->first);
        open.reset();
      }
    }
    EXPECT_EQ(unfinished, 0u) << "a transaction without its commit";
  }
  std::vector<std::string> TailArgs(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--consumer", consumer(), "--port",
                                     std::to_string(dblogd_->port())};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  std::unique_ptr<TailProcess> tail_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> writers_;
};

// (1) Started before dblogd: tail retries, saying why, until dblogd is up, then prints the
// bootstrap and the live changes.
TEST_F(TailKeepsRunningTest, StartedBeforeDblogdPrintsEverythingOnceItIsUp) {
  CreateTables();
  CreateDblogd();
  tail_ = std::make_unique<TailProcess>(TailArgs({"--retry-min=0.05", "--retry-max=0.5"}));
  ASSERT_TRUE(tail_->WaitForErr("(attempt 3)", 60s)) << tail_->err();
  EXPECT_NE(
      tail_->err().find("dblog: cannot connect to dblogd at 127.0.0.1:" +
                        std::to_string(dblogd_->port()) + ": Connection refused; retrying in "),
      std::string::npos)
      << tail_->err();
  StartWriters();
  while (SourceCount("events") < 100) std::this_thread::sleep_for(20ms);
  dblogd_->Start();
  ASSERT_TRUE(tail_->WaitForOut("\"op\":\"bootstrap_end\"", 120s)) << tail_->err();
  const long after = SourceCount("events") + 100;
  while (SourceCount("events") < after) std::this_thread::sleep_for(20ms);  // live changes
  StopWriters();
  Sentinel();  // the fixture numbers them: this is id 1
  WaitForSentinel(1);
  ExpectEverythingOnce();
  EXPECT_FALSE(tail_->Exited()) << tail_->err();
}

// (2) dblogd SIGKILLed and restarted while transactions, small and large, are written: once in
// the middle of a 150 000-row transaction, so that tail resumes inside it, then twice more.
// tail reconnects each time and prints every position once and every change.
TEST_F(TailKeepsRunningTest, DblogdKilledUnderLoadPrintsEachPositionOnce) {
  CreateTables();
  StartDblogd({"--max-buffer-mb=1"});  // dblogd stays close to what tail has read
  tail_ = std::make_unique<TailProcess>(TailArgs({"--retry-min=0.05", "--retry-max=0.5"}));
  ASSERT_TRUE(tail_->WaitForOut("\"op\":\"bootstrap_end\"", 60s)) << tail_->err();
  // acknowledged and recorded: a loss from now on does not redo the bootstrap
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (db().scalar("SELECT coalesce(max(bootstrap_state), '') FROM dblog.consumers WHERE "
                     "name = '" +
                     consumer() + "'") != "done") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(20ms);
  }
  StartWriters();
  // A kill inside a large transaction, so that tail resumes inside it. Whether the kill lands
  // inside is timing: the test sees the 5,000th row and kills dblogd a moment later, and tail
  // had often read the whole transaction by then (its resume came after it: 2 runs in 4 with
  // the dblogd of c1ddad1; 5 tries in 5 in one clean-clone run; a transaction of 600,000 rows
  // did not help; why is not understood yet). A miss is tried again once with another
  // transaction; when both miss, the run goes on without that case, said on stderr (the rule
  // itself, a resume inside a transaction, is ProtocolRulesTest's, deterministically); every
  // other check below stands.
  constexpr long kBig = 150000;
  const auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  bool landed = false;
  std::string misses;
  for (int attempt = 0; attempt < 2 && !landed; ++attempt) {
    const long first = attempt * kBig + 1;
    db().exec("INSERT INTO " + schema() + ".big SELECT g, repeat('b', 40) FROM generate_series(" +
              std::to_string(first) + ", " + std::to_string(first + kBig - 1) + ") g");
    ASSERT_TRUE(tail_->WaitForRow(schema() + ".big", first + 4999, 120s)) << tail_->err();
    const std::size_t reconnects = count(tail_->err(), "dblog: reconnected to dblogd");
    dblogd_->Signal(SIGKILL);
    dblogd_->Wait();
    dblogd_->Start();
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (count(tail_->err(), "dblog: reconnected to dblogd") == reconnects) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << tail_->err();
      std::this_thread::sleep_for(20ms);
    }
    // this transaction's commit LSN, from its rows; the reconnection's resume point
    std::optional<std::uint64_t> big_lsn;
    for (const Line& line : ParseLines(tail_->out()))
      if (line.table == schema() + ".big" && line.key && *line.key >= first) {
        big_lsn = line.position->first;
        break;
      }
    ASSERT_TRUE(big_lsn);
    char lsn_text[32];
    std::snprintf(lsn_text, sizeof lsn_text, "%X/%X", static_cast<unsigned>(*big_lsn >> 32),
                  static_cast<unsigned>(*big_lsn));
    const std::string err = tail_->err();
    const auto line_at = err.rfind("dblog: reconnected to dblogd");
    const std::string line = err.substr(line_at, err.find('\n', line_at) - line_at);
    const std::string resumed = "; resuming after " + std::string(lsn_text) + ":";
    const auto at = line.find(resumed);
    if (at == std::string::npos) {
      misses += "\n  " + line;
      continue;
    }
    const long seq = std::stol(line.substr(at + resumed.size()));
    EXPECT_GT(seq, 0) << line;
    EXPECT_LE(seq, kBig) << line;  // before its commit, at seq kBig + 1
    landed = true;
  }
  if (!landed)
    std::cerr << "note: no kill landed inside a large transaction in 2 tries; the resume inside "
                 "one was not exercised this run:" << misses << "\n";
  for (int round = 0; round < 2; ++round) {
    WaitForEvent(SourceCount("events") + 50);  // some of the workload printed since the restart
    dblogd_->Signal(SIGKILL);
    dblogd_->Wait();
    dblogd_->Start();
  }
  WaitForEvent(SourceCount("events") + 50);
  StopWriters();
  Sentinel();
  WaitForSentinel(1);
  ExpectEverythingOnce();
  EXPECT_FALSE(tail_->Exited()) << tail_->err();
  EXPECT_GE(count(tail_->err(), "dblog: reconnected to dblogd"), 3u) << tail_->err();
}

// (3) --once: the first loss ends it with status 1 and the reason.
TEST_F(TailKeepsRunningTest, OnceExitsAtTheFirstLoss) {
  CreateTables();
  StartDblogd();
  tail_ = std::make_unique<TailProcess>(TailArgs({"--once"}));
  ASSERT_TRUE(tail_->WaitForOut("\"op\":\"bootstrap_end\"", 60s)) << tail_->err();
  dblogd_->Stop();  // SIGTERM: consumers get SHUTTING_DOWN
  EXPECT_EQ(tail_->Wait(30s), 1) << tail_->err();
  EXPECT_EQ(tail_->err(), "dblog: dblogd refused: SHUTTING_DOWN: dblogd is shutting down\n");
  // and with dblogd not up at all
  tail_ = std::make_unique<TailProcess>(TailArgs({"--once"}));
  EXPECT_EQ(tail_->Wait(30s), 1) << tail_->err();
  EXPECT_EQ(tail_->err().rfind("dblog: cannot connect to dblogd at 127.0.0.1:", 0), 0u)
      << tail_->err();
}

// (4) A refused token ends it at once, without --once, with dblogd's message.
TEST_F(TailKeepsRunningTest, BadTokenExitsAtOnce) {
  CreateTables();
  const std::string token_file = ::testing::TempDir() + "dblog_tail_token_" + consumer();
  std::ofstream(token_file) << "the-right-token\n";
  StartDblogd({"--consumer-token-file=" + consumer() + "=" + token_file});
  tail_ = std::make_unique<TailProcess>(TailArgs({"--token", "a-wrong-token"}));
  EXPECT_EQ(tail_->Wait(30s), 1) << "dblog tail keeps retrying a refused token:\n" << tail_->err();
  EXPECT_EQ(tail_->err(),
            "dblog: dblogd refused: AUTH_FAILED: wrong or missing token for consumer '" +
                consumer() + "'\n");
  EXPECT_EQ(tail_->out(), "");
  // the right one streams
  tail_ = std::make_unique<TailProcess>(TailArgs({"--token-file", token_file}));
  EXPECT_TRUE(tail_->WaitForOut("\"op\":\"bootstrap_end\"", 60s)) << tail_->err();
  std::remove(token_file.c_str());
}

}  // namespace
}  // namespace dblog::test
