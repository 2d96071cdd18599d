// tests/cpp/client/tail_cli_test.cc: the `dblog` executable end to end against the fake dblogd:
// NDJSON on stdout, acknowledgements only after the lines are written (checked by reading the
// child's stdout at the moment the Ack arrives), --ack-every, heartbeats, SIGINT/SIGTERM,
// exit codes 0/1/2 and one-line errors, reconnecting (resume point, nothing written twice),
// --once. The binary's path comes from CMake (DBLOG_CLI_PATH).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fake_server.h"
#include "test_events.h"

extern char** environ;

namespace dblog::client {
namespace {

using dblog::v1::Change;
using dblog::v1::ClientMessage;
using dblog::v1::StreamEvent;
using namespace dblog::client::testing;
using namespace std::chrono_literals;

constexpr std::int64_t kTime = 1796013963044138;

// A running `dblog` with its stdout and stderr on pipes.
class Cli {
 public:
  Cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0) {
      ADD_FAILURE() << "pipe: " << std::strerror(errno);
      return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addclose(&actions, err[0]);

    std::vector<std::string> argv_storage = {DBLOG_CLI_PATH};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<std::string> env_storage;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, "DBLOG_", 6) != 0) env_storage.emplace_back(*e);  // no leaks in
    }
    env_storage.insert(env_storage.end(), env.begin(), env.end());
    std::vector<char*> argv, envp;
    for (auto& a : argv_storage) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_storage) envp.push_back(e.data());
    envp.push_back(nullptr);

    pid_t pid = -1;
    const int rc = posix_spawn(&pid, DBLOG_CLI_PATH, &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
    fcntl(out_fd_, F_SETFL, O_NONBLOCK);
    fcntl(err_fd_, F_SETFL, O_NONBLOCK);
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn " << DBLOG_CLI_PATH << ": " << std::strerror(rc);
      return;
    }
    pid_ = pid;
  }

  ~Cli() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }

  pid_t pid() const { return pid_; }

  // Everything the child has written to stdout so far (this call does not wait). Safe to call
  // from the fake server's thread while the test's thread is in Wait.
  std::string StdoutSoFar() {
    std::lock_guard<std::mutex> lock(mutex_);
    Drain(out_fd_, &out_);
    return out_;
  }

  std::string StderrSoFar() {
    std::lock_guard<std::mutex> lock(mutex_);
    Drain(err_fd_, &err_);
    return err_;
  }

  // Waits until stdout contains `text`, bounded.
  bool WaitForStdout(const std::string& text, std::chrono::milliseconds timeout = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (StdoutSoFar().find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }

  // Waits for the exit status, bounded (the child is killed and -1 returned on timeout).
  int Wait(std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        Drain(out_fd_, &out_);
        Drain(err_fd_, &err_);
      }
      const pid_t done = waitpid(pid_, &status, WNOHANG);
      if (done == pid_) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "dblog did not exit in time";
        return -1;
      }
      std::this_thread::sleep_for(5ms);
    }
    reaped_ = true;
    std::lock_guard<std::mutex> lock(mutex_);
    Drain(out_fd_, &out_);
    Drain(err_fd_, &err_);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // After Wait: all the child wrote.
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  static void Drain(int fd, std::string* to) {
    char buffer[4096];
    for (;;) {
      const ssize_t n = read(fd, buffer, sizeof buffer);
      if (n <= 0) return;
      to->append(buffer, static_cast<std::size_t>(n));
    }
  }

  std::mutex mutex_;     // out_ and the stdout pipe: read by the test and the fake server
  pid_t pid_ = -1;       // set once, before any other thread can see this object
  bool reaped_ = false;  // test thread only
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_, err_;
};

std::string Port(const FakeServer& server) { return std::to_string(server.port()); }

dblog::v1::ServerMessage Transaction(std::uint64_t lsn, std::uint64_t xid, std::int64_t id,
                                     bool with_relation) {
  dblog::v1::ServerMessage message = BatchMessage({BeginEvent(lsn, xid, kTime, lsn + 0x30)});
  auto& events = *message.mutable_events();
  if (with_relation) {
    *events.add_events() =
        RelationEvent(16384, "public", "items", {{"id", "integer"}, {"name", "text"}}, {0});
  }
  StreamEvent insert = ChangeEvent(Change::INSERT, 16384, lsn, 1, xid, kTime);
  *insert.mutable_change()->mutable_new_row() = MakeRow({Int(id), Text("n")});
  *events.add_events() = insert;
  *events.add_events() = CommitEvent(lsn, 2, xid, kTime, lsn + 0x30);
  return message;
}

bool ReadAck(FakeConnection& connection, std::uint64_t lsn, std::uint32_t seq) {
  ClientMessage message;
  if (!connection.Read(&message)) return false;
  EXPECT_TRUE(message.has_ack());
  EXPECT_EQ(message.ack().position().commit_lsn(), lsn);
  EXPECT_EQ(message.ack().position().seq(), seq);
  return message.has_ack() && message.ack().position().commit_lsn() == lsn &&
         message.ack().position().seq() == seq;
}

TEST(TailCli, PrintsNdjsonAndAcksOnlyWrittenLines) {
  std::atomic<Cli*> cli{nullptr};
  FakeServer server([&cli](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    EXPECT_EQ(hello.hello().consumer(), "orders");
    EXPECT_EQ(hello.hello().token(), "from-env");  // DBLOG_TOKEN
    EXPECT_EQ(hello.hello().client_name(), "dblog-tail/0.1");
    connection.Send(WelcomeMessage());

    connection.Send(Transaction(0x1000, 771, 1, true));
    ASSERT_TRUE(ReadAck(connection, 0x1000, 2));
    // The commit's line was flushed before its Ack was sent.
    EXPECT_NE(cli.load()->StdoutSoFar().find(R"("op":"commit")"), std::string::npos);

    connection.Send(HeartbeatMessage(0x1000, 2));  // nothing new: no ack
    connection.Send(Transaction(0x2000, 772, 2, false));
    ASSERT_TRUE(ReadAck(connection, 0x2000, 2));
    connection.Send(HeartbeatMessage(0x3000, 0));  // the stream moved on without events
    ASSERT_TRUE(ReadAck(connection, 0x3000, 0));
    connection.Close();
  });
  Cli child({"tail", "--consumer", "orders", "--once"},
            {"DBLOG_PORT=" + Port(server), "DBLOG_TOKEN=from-env"});
  cli = &child;
  EXPECT_EQ(child.Wait(), 0) << child.err();
  server.Join();
  EXPECT_EQ(child.err(), "");
  EXPECT_EQ(child.out(),
            R"({"position":{"commit_lsn":"0/1000","seq":0},"op":"begin","xid":771,)"
            R"("commit_time":"2026-11-30T04:46:03.044138Z","end_lsn":"0/1030"})"
            "\n"
            R"({"position":{"commit_lsn":"0/1000","seq":1},"op":"insert","table":"public.items",)"
            R"("xid":771,"commit_time":"2026-11-30T04:46:03.044138Z","key":{"id":1},)"
            R"("row":{"id":1,"name":"n"}})"
            "\n"
            R"({"position":{"commit_lsn":"0/1000","seq":2},"op":"commit","xid":771,)"
            R"("commit_time":"2026-11-30T04:46:03.044138Z","end_lsn":"0/1030"})"
            "\n"
            R"({"position":{"commit_lsn":"0/2000","seq":0},"op":"begin","xid":772,)"
            R"("commit_time":"2026-11-30T04:46:03.044138Z","end_lsn":"0/2030"})"
            "\n"
            R"({"position":{"commit_lsn":"0/2000","seq":1},"op":"insert","table":"public.items",)"
            R"("xid":772,"commit_time":"2026-11-30T04:46:03.044138Z","key":{"id":2},)"
            R"("row":{"id":2,"name":"n"}})"
            "\n"
            R"({"position":{"commit_lsn":"0/2000","seq":2},"op":"commit","xid":772,)"
            R"("commit_time":"2026-11-30T04:46:03.044138Z","end_lsn":"0/2030"})"
            "\n");
}

TEST(TailCli, AckEveryAndSigintSendsAFinalAck) {
  std::atomic<Cli*> cli{nullptr};
  const std::string token_file = ::testing::TempDir() + "dblog_tail_cli_token";
  {
    FILE* f = std::fopen(token_file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("file-token\n", f);
    std::fclose(f);
  }
  FakeServer server([&cli](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    EXPECT_EQ(hello.hello().token(), "file-token");
    connection.Send(WelcomeMessage());
    dblog::v1::ServerMessage progress;  // stderr is a pipe: no progress line may appear
    progress.mutable_progress()->set_phase("bootstrap");
    progress.mutable_progress()->add_tables()->set_rows_estimated(10);
    connection.Send(progress);
    connection.Send(Transaction(0x1000, 1, 1, true));
    connection.Send(Transaction(0x2000, 2, 2, false));
    connection.Send(Transaction(0x3000, 3, 3, false));
    ASSERT_TRUE(ReadAck(connection, 0x2000, 2));  // the 2nd commit; the 1st and 3rd wait
    // The third transaction is written (flushed before blocking), then Ctrl-C.
    ASSERT_TRUE(cli.load()->WaitForStdout(R"("commit_lsn":"0/3000","seq":2},"op":"commit")"));
    kill(cli.load()->pid(), SIGINT);
    ASSERT_TRUE(ReadAck(connection, 0x3000, 2));  // the final ack of what was written
    EXPECT_TRUE(connection.WaitForEof());
  });
  Cli child({"tail", "--consumer", "orders", "--port", Port(server), "--token-file", token_file,
             "--ack-every", "2", "--relations"});
  cli = &child;
  EXPECT_EQ(child.Wait(), 0) << child.err();
  server.Join();
  EXPECT_EQ(child.err(), "");
  EXPECT_NE(child.out().find(R"("op":"relation")"), std::string::npos);
  std::remove(token_file.c_str());
}

TEST(TailCli, BootstrapIsAcknowledgedAtItsEnd) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    connection.Send(WelcomeMessage());
    constexpr std::uint64_t kConsistentPoint = 0x5000;
    dblog::v1::ServerMessage batch = BatchMessage({});
    auto& events = *batch.mutable_events();
    events.add_events()->mutable_bootstrap_begin()->set_consistent_point(kConsistentPoint);
    *events.add_events() =
        RelationEvent(16384, "public", "items", {{"id", "integer"}, {"name", "text"}}, {0});
    for (std::uint32_t seq = 1; seq <= 2; ++seq) {  // copied rows: one below the point
      StreamEvent read = ChangeEvent(Change::READ, 16384, kConsistentPoint - 1, seq, 0, 0);
      *read.mutable_change()->mutable_new_row() = MakeRow({Int(seq), Text("r")});
      *events.add_events() = read;
    }
    auto& end = *events.add_events()->mutable_bootstrap_end();
    end.set_consistent_point(kConsistentPoint);
    end.set_commit_lsn(kConsistentPoint - 1);
    end.set_seq(3);
    connection.Send(batch);
    ASSERT_TRUE(ReadAck(connection, kConsistentPoint - 1, 3));  // nothing before the end
    connection.Send(Transaction(kConsistentPoint, 9, 3, false));
    ASSERT_TRUE(ReadAck(connection, kConsistentPoint, 2));
    connection.Close();
  });
  Cli child({"tail", "--consumer", "orders", "--port", Port(server), "--once"});
  EXPECT_EQ(child.Wait(), 0) << child.err();
  EXPECT_EQ(std::count(child.out().begin(), child.out().end(), '\n'), 7) << child.out();
  EXPECT_NE(child.out().find(R"({"position":{"commit_lsn":"0/4FFF","seq":2},"op":"read",)"
                             R"("table":"public.items","key":{"id":2},"row":{"id":2,"name":"r"}})"),
            std::string::npos)
      << child.out();
}

TEST(TailCli, SigtermWhileIdleExitsZero) {
  std::atomic<Cli*> cli{nullptr};
  FakeServer server([&cli](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    connection.Send(WelcomeMessage());
    connection.Send(HeartbeatMessage(0, 0));
    std::this_thread::sleep_for(200ms);
    kill(cli.load()->pid(), SIGTERM);
    EXPECT_TRUE(connection.WaitForEof());  // nothing to acknowledge: just a close
  });
  Cli child({"tail", "--consumer", "orders", "--port", Port(server)});
  cli = &child;
  EXPECT_EQ(child.Wait(), 0) << child.err();
  EXPECT_EQ(child.out(), "");
}

TEST(TailCli, RefusalIsOneLineAndExitOne) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    connection.Send(ErrorMessage(dblog::v1::Error::AUTH_FAILED, "bad token"));
    connection.Close();
  });
  Cli child({"tail", "--consumer", "orders", "--port", Port(server), "--token", "x"});
  EXPECT_EQ(child.Wait(), 1);
  EXPECT_EQ(child.err(), "dblog: dblogd refused: AUTH_FAILED: bad token\n");
  EXPECT_EQ(child.out(), "");
}

// The refusal's message comes from the server: its control characters must not reach the
// terminal (the class of bug client_stream_fuzz found in the progress line), nor break the line;
// they are escaped as dblogd escapes its log's values (common/logfmt.h).
TEST(TailCli, RefusalWithControlCharactersStaysOneLine) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    connection.Send(ErrorMessage(dblog::v1::Error::AUTH_FAILED, "bad\ntoken\x1b[2J"));
    connection.Close();
  });
  Cli child({"tail", "--consumer", "orders", "--port", Port(server), "--token", "x"});
  EXPECT_EQ(child.Wait(), 1);
  EXPECT_EQ(child.err(), "dblog: dblogd refused: AUTH_FAILED: bad\\ntoken\\x1b[2J\n");
}

TEST(TailCli, TruncatedStreamIsAnErrorAfterTheWrittenLinesWithOnce) {
  FakeServer server([](FakeConnection& connection) {
    ClientMessage hello;
    ASSERT_TRUE(connection.Read(&hello));
    connection.Send(WelcomeMessage());
    connection.Send(BatchMessage({BeginEvent(0x1000, 1, kTime, 0x1030)}));
    connection.SendRaw(std::string_view("\x10\x1a", 2));  // 16 bytes announced, 1 sent
    connection.Close();
  });
  Cli child({"tail", "--consumer", "orders", "--port", Port(server), "--once"});
  EXPECT_EQ(child.Wait(), 1);
  EXPECT_NE(child.err().find("in the middle of a frame"), std::string::npos) << child.err();
  EXPECT_EQ(std::count(child.err().begin(), child.err().end(), '\n'), 1) << child.err();
  EXPECT_NE(child.out().find(R"("op":"begin")"), std::string::npos);
}

TEST(TailCli, ConnectionRefusedExitsOneWithOnce) {
  RefusingPort refusing;
  Cli child({"tail", "--consumer", "orders", "--port", std::to_string(refusing.port()), "--once"});
  EXPECT_EQ(child.Wait(), 1);
  EXPECT_EQ(child.err().rfind("dblog: cannot connect to dblogd at 127.0.0.1:", 0), 0u)
      << child.err();
}

// Without --once a refused connection is retried, each attempt logged with its reason and
// wait, until a signal stops it (exit 0).
TEST(TailCli, RefusedConnectionIsRetriedUntilStopped) {
  RefusingPort refusing;
  Cli child({"tail", "--consumer", "orders", "--port", std::to_string(refusing.port()),
             "--retry-min", "0.01", "--retry-max", "0.05"});
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::string err;
  while (std::chrono::steady_clock::now() < deadline) {
    err = child.StderrSoFar();
    if (err.find("(attempt 3)") != std::string::npos) break;
    std::this_thread::sleep_for(5ms);
  }
  kill(child.pid(), SIGTERM);
  EXPECT_EQ(child.Wait(), 0) << child.err();
  EXPECT_NE(
      child.err().find("dblog: cannot connect to dblogd at 127.0.0.1:" +
                       std::to_string(refusing.port()) + ": Connection refused; retrying in 0."),
      std::string::npos)
      << child.err();
  EXPECT_NE(child.err().find("(attempt 1)\n"), std::string::npos) << child.err();
  EXPECT_NE(child.err().find("(attempt 3)\n"), std::string::npos) << child.err();
  EXPECT_EQ(child.out(), "");
}

// Refusals retrying cannot fix end the run at once, without --once, with dblogd's message.
TEST(TailCli, RefusalsThatRetryingCannotFixExitAtOnce) {
  for (const auto code : {dblog::v1::Error::UNKNOWN_CONSUMER, dblog::v1::Error::SCOPE_ERROR,
                          dblog::v1::Error::PROTOCOL_VIOLATION}) {
    FakeServer server([code](FakeConnection& connection) {
      ClientMessage hello;
      ASSERT_TRUE(connection.Read(&hello));
      connection.Send(ErrorMessage(code, "no"));
      connection.Close();
    });
    Cli child({"tail", "--consumer", "orders", "--port", Port(server)});
    EXPECT_EQ(child.Wait(), 1);
    EXPECT_EQ(child.err(),
              "dblog: dblogd refused: " + dblog::v1::Error::Code_Name(code) + ": no\n");
  }
}

// The resume rules, against a scripted dblogd that loses the connection three ways: a clean
// close inside a transaction, a frame cut in half, a refusal while shutting down. Each time
// tail reconnects with Hello.resume_after = the last commit written, and of what dblogd sends
// again it writes only what comes after the last position it wrote: every position once, and
// the relation once.
TEST(TailCli, ReconnectsAndResumesAfterTheLastPositionWritten) {
  std::atomic<Cli*> cli{nullptr};
  std::atomic<int> connections{0};
  FakeServer server(
      [&](FakeConnection& connection) {
        const int n = connections++;
        ClientMessage hello;
        ASSERT_TRUE(connection.Read(&hello));
        dblog::v1::ServerMessage welcome = WelcomeMessage();
        if (hello.hello().has_resume_after()) {
          *welcome.mutable_welcome()->mutable_resume_from() = hello.hello().resume_after();
        }
        const auto resume = [&]() {
          return std::make_pair(hello.hello().resume_after().commit_lsn(),
                                hello.hello().resume_after().seq());
        };
        // The second transaction as dblogd sends it, from its start: Begin, two inserts, Commit.
        const auto second = [&](bool whole) {
          dblog::v1::ServerMessage m = BatchMessage({BeginEvent(0x2000, 772, kTime, 0x2030)});
          *m.mutable_events()->add_events() =
              RelationEvent(16384, "public", "items", {{"id", "integer"}, {"name", "text"}}, {0});
          for (std::uint32_t seq = 1; seq <= (whole ? 2u : 1u); ++seq) {
            StreamEvent insert = ChangeEvent(Change::INSERT, 16384, 0x2000, seq, 772, kTime);
            *insert.mutable_change()->mutable_new_row() =
                MakeRow({Int(10 + seq), Text("n")});
            *m.mutable_events()->add_events() = insert;
          }
          if (whole) *m.mutable_events()->add_events() = CommitEvent(0x2000, 3, 772, kTime, 0x2030);
          return m;
        };
        switch (n) {
          case 0:  // the first transaction, then half of the second, then a clean close
            EXPECT_FALSE(hello.hello().has_resume_after());
            connection.Send(welcome);
            connection.Send(Transaction(0x1000, 771, 1, true));
            ASSERT_TRUE(ReadAck(connection, 0x1000, 2));
            connection.Send(second(false));
            ASSERT_TRUE(cli.load()->WaitForStdout(R"("commit_lsn":"0/2000","seq":1})"));
            connection.Close();
            break;
          case 1:  // from the last commit written: the second again, whole; then a cut frame
            EXPECT_EQ(resume(), std::make_pair(std::uint64_t{0x1000}, std::uint32_t{2}));
            connection.Send(welcome);
            connection.Send(HeartbeatMessage(0x1000, 2));  // the resume point: nothing to ack
            connection.Send(second(true));
            ASSERT_TRUE(ReadAck(connection, 0x2000, 3));
            connection.SendRaw(std::string_view("\x10\x1a", 2));  // 16 bytes announced, 1 sent
            connection.Close();
            break;
          case 2:  // dblogd stopping
            EXPECT_EQ(resume(), std::make_pair(std::uint64_t{0x2000}, std::uint32_t{3}));
            connection.Send(
                ErrorMessage(dblog::v1::Error::SHUTTING_DOWN, "dblogd is shutting down"));
            connection.Close();
            break;
          case 3:  // back: the third transaction, then Ctrl-C
            EXPECT_EQ(resume(), std::make_pair(std::uint64_t{0x2000}, std::uint32_t{3}));
            connection.Send(welcome);
            connection.Send(Transaction(0x3000, 773, 3, true));  // its Relation again, unchanged
            ASSERT_TRUE(ReadAck(connection, 0x3000, 2));
            kill(cli.load()->pid(), SIGINT);
            EXPECT_TRUE(connection.WaitForEof());
            break;
        }
      },
      4);
  Cli child({"tail", "--consumer", "orders", "--port", Port(server), "--relations", "--retry-min",
             "0.01", "--retry-max", "0.02"});
  cli = &child;
  EXPECT_EQ(child.Wait(), 0) << child.err();
  server.Join();
  EXPECT_EQ(connections.load(), 4);
  const std::string& out = child.out();
  const auto count = [&out](const std::string& text) {
    std::size_t n = 0;
    for (auto at = out.find(text); at != std::string::npos; at = out.find(text, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(R"("op":"relation")"), 1u) << out;
  for (const char* position :
       {R"({"commit_lsn":"0/1000","seq":0})", R"({"commit_lsn":"0/1000","seq":1})",
        R"({"commit_lsn":"0/1000","seq":2})", R"({"commit_lsn":"0/2000","seq":0})",
        R"({"commit_lsn":"0/2000","seq":1})", R"({"commit_lsn":"0/2000","seq":2})",
        R"({"commit_lsn":"0/2000","seq":3})", R"({"commit_lsn":"0/3000","seq":0})",
        R"({"commit_lsn":"0/3000","seq":1})", R"({"commit_lsn":"0/3000","seq":2})"}) {
    EXPECT_EQ(count(std::string(R"({"position":)") + position), 1u) << position << "\n" << out;
  }
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 11) << out;
  const std::string& err = child.err();
  EXPECT_NE(err.find(" closed the connection; retrying in "), std::string::npos) << err;
  EXPECT_NE(err.find("in the middle of a frame (2 bytes of it received); retrying in "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("dblogd refused: SHUTTING_DOWN: dblogd is shutting down; retrying in "),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("reconnected to dblogd at 127.0.0.1:" + Port(server) +
                     "; resuming after 0/2000:1 (the last position written)"),
            std::string::npos)
      << err;
}

TEST(TailCli, CommandLineErrorsExitTwo) {
  {
    Cli child({"tail", "--consumer", "orders", "--bogus"});
    EXPECT_EQ(child.Wait(), 2);
    EXPECT_NE(child.err().find("--bogus"), std::string::npos) << child.err();
  }
  {
    Cli child({"tail"});
    EXPECT_EQ(child.Wait(), 2);
    EXPECT_NE(child.err().find("--consumer is required"), std::string::npos) << child.err();
  }
  {
    Cli child({"tail", "--consumer", "orders"}, {"DBLOG_PORT=99999"});
    EXPECT_EQ(child.Wait(), 2);
    EXPECT_NE(child.err().find("DBLOG_PORT"), std::string::npos) << child.err();
  }
  {
    Cli child({});
    EXPECT_EQ(child.Wait(), 2);
  }
  {
    Cli child({"frobnicate"});
    EXPECT_EQ(child.Wait(), 2);
    EXPECT_NE(child.err().find("unknown command 'frobnicate'"), std::string::npos);
  }
  {
    Cli child({"apply"});
    EXPECT_EQ(child.Wait(), 2);
    EXPECT_NE(child.err().find("dblog apply: --consumer is required"), std::string::npos)
        << child.err();
  }
}

TEST(TailCli, HelpExitsZero) {
  Cli child({"tail", "--help"});
  EXPECT_EQ(child.Wait(), 0);
  EXPECT_NE(child.out().find("--ack-every"), std::string::npos);
  Cli top({"--help"});
  EXPECT_EQ(top.Wait(), 0);
  EXPECT_NE(top.out().find("tail"), std::string::npos);
  EXPECT_NE(top.out().find("apply"), std::string::npos);
}

}  // namespace
}  // namespace dblog::client
