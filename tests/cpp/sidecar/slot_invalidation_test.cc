// tests/cpp/sidecar/slot_invalidation_test.cc: a consumer that stalls until PostgreSQL
// invalidates its slot (max_slot_wal_keep_size) is told so, dblog.consumer_status says so, and
// the documented recovery (drop the slot; the next connection bootstraps with restarted = true)
// brings `dblog apply`'s target back to the source (docs/operations.md, "Slots and WAL
// retention").
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "dblogd_fixture.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;

// `dblog apply` as a child process, its output in a temp file.
class Apply {
 public:
  explicit Apply(std::vector<std::string> args) {
    char tmpl[] = "/tmp/dblog-slot-lost-apply-XXXXXX";
    close(mkstemp(tmpl));
    log_path_ = tmpl;
    std::vector<std::string> argv = {DBLOG_PATH, "apply"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_path_.c_str(), O_WRONLY | O_APPEND);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      execv(cargv[0], cargv.data());
      _exit(127);
    }
  }
  ~Apply() {
    kill(pid_, SIGCONT);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    unlink(log_path_.c_str());
  }
  void Signal(int signo) { kill(pid_, signo); }
  bool Exited() { return waitpid(pid_, nullptr, WNOHANG) == pid_; }
  std::string log() const {
    std::ifstream in(log_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
};

// Sets max_slot_wal_keep_size on the test cluster for one test, and resets it on every way out.
class SlotWalLimit {
 public:
  SlotWalLimit(PgConn& db, const std::string& size) : db_(db) {
    db_.exec("ALTER SYSTEM SET max_slot_wal_keep_size = '" + size + "'");
    db_.exec("SELECT pg_reload_conf()");
  }
  ~SlotWalLimit() { Reset(); }
  void Reset() {
    if (reset_) return;
    reset_ = true;
    try {
      db_.exec("ALTER SYSTEM RESET max_slot_wal_keep_size");
      db_.exec("SELECT pg_reload_conf()");
    } catch (const std::exception& e) {
      ADD_FAILURE() << "could not reset max_slot_wal_keep_size: " << e.what();
    }
  }

 private:
  PgConn& db_;
  bool reset_ = false;
};

std::string LsnText(std::uint64_t lsn) {
  char text[32];
  std::snprintf(text, sizeof text, "%X/%X", static_cast<unsigned>(lsn >> 32),
                static_cast<unsigned>(lsn));
  return text;
}

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

TEST_F(DblogdTest, InvalidatedSlotIsReportedAndDropThenRebootstrapConvergesIntoDblogApply) {
  const std::string items = schema() + ".items";
  db().exec("CREATE TABLE " + items + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + items + " SELECT g, 'v' || g FROM generate_series(1, 200) g");
  const std::string target_db = "t_" + consumer();
  db().exec("DROP DATABASE IF EXISTS " + target_db + " WITH (FORCE)");
  db().exec("CREATE DATABASE " + target_db);
  struct DropTarget {
    DblogdTest* test;
    std::string name;
    ~DropTarget() {
      try {
        PgConn(test_conninfo().value()).exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)");
      } catch (const std::exception&) {
      }
    }
  } drop_target{this, target_db};
  PgConn target(conninfo() + " dbname=" + target_db);
  auto same = [&] {
    const std::string sql =
        "SELECT count(*) || ' ' || coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '-')"
        " FROM " + items + " t";
    try {
      return db().scalar(sql) == target.scalar(sql);
    } catch (const PgError&) {
      return false;  // dblog apply has not created the table yet
    }
  };
  auto applied = [&](std::uint64_t lsn) {
    try {
      return target.scalar("SELECT commit_lsn >= '" + LsnText(lsn) +
                           "'::pg_lsn FROM dblog_apply.progress WHERE consumer = '" +
                           consumer() + "'") == "t";
    } catch (const PgError&) {
      return false;
    }
  };
  auto slot_state = [&] {
    return db().scalar("SELECT slot_state FROM dblog.consumer_status WHERE name = '" +
                       consumer() + "'");
  };

  StartDblogd();
  auto apply = std::make_unique<Apply>(std::vector<std::string>{
      "--consumer", consumer(), "--port", std::to_string(dblogd_->port()), "--target",
      conninfo() + " dbname=" + target_db, "--create-tables", "--retry-min=0.05",
      "--retry-max=0.5"});
  std::uint64_t lsn = Sentinel();
  ASSERT_TRUE(WaitFor([&] { return applied(lsn); }, 120s)) << apply->log();
  EXPECT_TRUE(same());
  // The bootstrap counts as done once dblogd has the sink's ack of its end; before that, a
  // lost slot is simply a bootstrap to redo (Prepare drops it), which is not this test.
  ASSERT_TRUE(WaitFor(
      [&] {
        return db().scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = '" +
                           consumer() + "'") == "done";
      },
      60s));
  EXPECT_EQ(slot_state(), "active");

  // The sink stalls, connected: nothing is acknowledged from here on.
  apply->Signal(SIGSTOP);
  {
    SlotWalLimit limit(db(), "1MB");
    int round = 0;
    const bool lost = WaitFor(
        [&] {
          ++round;
          db().exec("UPDATE " + items + " SET v = 'round " + std::to_string(round) +
                    "' WHERE id % 10 = " + std::to_string(round % 10));
          db().exec("SELECT pg_switch_wal()");
          db().exec("CHECKPOINT");
          return db().scalar("SELECT wal_status FROM pg_replication_slots WHERE slot_name = '" +
                             Slot() + "'") == "lost";
        },
        120s);
    limit.Reset();
    ASSERT_TRUE(lost) << "the slot was not invalidated";
  }
  // dblogd lost its walsender; it ends the session with the reason instead of retrying
  ASSERT_TRUE(WaitFor([&] { return CountLogEvents(dblogd_->log(), "consumer_failed") > 0; }, 60s))
      << dblogd_->log();
  EXPECT_NE(dblogd_->log().find("was invalidated by PostgreSQL (wal_status = lost)"),
            std::string::npos)
      << dblogd_->log();
  EXPECT_EQ(slot_state(), "lost");
  EXPECT_NE(db().scalar("SELECT action FROM dblog.consumer_status WHERE name = '" + consumer() +
                        "'")
                .find("pg_drop_replication_slot('" + Slot() + "')"),
            std::string::npos);

  // The sink wakes up: every attempt is refused with what happened and what to do.
  apply->Signal(SIGCONT);
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string log = apply->log();
        return log.find("was invalidated by PostgreSQL") != std::string::npos &&
               log.find("SELECT pg_drop_replication_slot('" + Slot() + "')") != std::string::npos;
      },
      60s))
      << apply->log();
  EXPECT_FALSE(apply->Exited()) << apply->log();
  db().exec("DELETE FROM " + items + " WHERE id % 7 = 0");
  db().exec("INSERT INTO " + items + " VALUES (1000, 'after the loss')");

  // The documented recovery: drop the slot. The sink's next attempt bootstraps again.
  ASSERT_TRUE(WaitFor(
      [&] {
        try {
          db().exec("SELECT pg_drop_replication_slot('" + Slot() + "')");
          return true;
        } catch (const PgError&) {
          return false;  // held for a moment by a connection attempt
        }
      },
      30s));
  lsn = Sentinel();
  ASSERT_TRUE(WaitFor([&] { return applied(lsn); }, 120s)) << apply->log();
  EXPECT_TRUE(same()) << apply->log();
  EXPECT_NE(apply->log().find("(restarted)"), std::string::npos) << apply->log();
  EXPECT_EQ(slot_state(), "active");
  apply.reset();
}

}  // namespace
}  // namespace dblog::test
