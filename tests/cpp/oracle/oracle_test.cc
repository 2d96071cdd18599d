// tests/cpp/oracle/oracle_test.cc: the end-to-end correctness oracle. A seeded, randomized
// workload on several tables (single and composite keys, several key and value types, TOASTed
// values, NULLs; inserts, updates, deletes, key changes, truncates, small and large
// transactions, rollbacks, two concurrent sessions) runs while a consumer bootstraps and
// `dblog apply` applies its stream into a second database. During the bootstrap a repair is
// requested, and in half the seeds dblogd is killed right after (the bootstrap is redone from a
// new slot; the request must still run). Then, at seeded moments:
// repairs (table, range, keys) are requested, dblogd and the applier are killed with SIGKILL and
// restarted, PostgreSQL is restarted once, and a target table is damaged on purpose and then
// repaired. At the end the workload stops, the applier catches up, and every table is compared
// with the source (row count and an order-independent hash; the first differing key on a
// mismatch). Any divergence fails with the seed. A second test runs the same seeds on a
// primary of their own with an asynchronous standby that is promoted in the middle (issue 24):
// dblogd and the writers follow it by a multi-host connection string, the consumer is
// reconciled, and the target must equal the new primary. One more table (DdlTable) has its schema
// changed all along, after the bootstrap: columns added, dropped, renamed, swapped, widened,
// the table renamed (issue 15, item 5); the target must follow it by identity. A third runs the
// seeds through dblogd --source-plugin=pgoutput on a cluster of each major, 15 to 18, with no
// extension (issue 23, item 8).
//
// CI runs DBLOG_ORACLE_SEEDS seeds (default 2, from base seed 1130) of DBLOG_ORACLE_SECONDS
// (default 20) each. Soak locally: DBLOG_ORACLE_BASE_SEED=0 (random) DBLOG_ORACLE_SEEDS=50
// DBLOG_ORACLE_SECONDS=120, or DBLOG_ORACLE_BUDGET_SECONDS=3600 for as many seeds as an hour
// takes (it stops at the first failing seed); DBLOG_ORACLE_SEED=N replays one seed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "apply_process.h"
#include "dblogd_fixture.h"
#include "oracle_workload.h"
#include "server_util.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;

// Large transactions of 2000 rows; a key moves only where it cannot collide.
constexpr WorkloadOptions kOracleWorkload{2000, true, false};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

class OracleTest : public DblogdTest {
 protected:
  void TearDown() override {
    DblogdTest::TearDown();
    if (HasFailure())  // the servers' errors, with where in PostgreSQL (log_error_verbosity)
      for (const auto* c : {primary_.get(), standby_.get()})
        if (c)
          std::cerr << "---- errors in " << c->dir() << "/server.log ----\n"
                    << dblog::test::Run("grep -A3 -E '\\] (ERROR|FATAL|PANIC): ' " +
                                        c->dir() + "/server.log | grep -v -E 'terminating "
                                        "connection|deadlock|57P03|canceling statement|waits "
                                        "for|ProcessStartupPacket|DeadLockReport|Process"
                                        "Interrupts|STATEMENT|^--' | tail -n 60").first;
    standby_.reset();
    primary_.reset();
  }
  // failover: the source is a primary of the seed's own with an asynchronous standby, which is
  // promoted in the middle of the seed (issue 24).
  void RunSeed(std::uint64_t seed, int seconds, bool failover = false);
  void RunSeeds(bool failover, int default_seeds);
  // A cluster of PostgreSQL `major` without the extension, the test's source from now on, for
  // dblogd --source-plugin=pgoutput (pgoutput_major_).
  void MakePgoutputSource(int major);
  // A PostgreSQL 15 primary and its asynchronous standby; the test's source from now on is
  // both hosts with target_session_attrs=read-write, so that every session of the test, the
  // writers' and dblogd's follow the promotion.
  void MakePrimaryAndStandby();
  // The primary dies (immediate) and the standby is promoted. With `lose_commits`, the
  // standby is down for a while before, so that the primary commits what the promoted standby
  // never has, and the sink may have applied.
  void FailOver(bool lose_commits, std::mt19937_64& rng);
  std::string StallReport(const std::string& target);
  std::string target_db_;
  std::unique_ptr<Cluster> primary_, standby_;
  bool failed_over_ = false;
  int pgoutput_major_ = 0;  // the seeds run in pgoutput mode on this major (0: the extension)
};

// tests/pg-cluster.sh COMMAND DIR, which must succeed.
void PgCluster(const std::string& command, const Cluster& cluster) {
  const auto [out, status] = cluster.Command(command);
  ASSERT_EQ(status, 0) << command << ": " << out;
}

void OracleTest::MakePrimaryAndStandby() {
  primary_ = std::make_unique<Cluster>(15);
  ASSERT_EQ(primary_->status(), 0) << "tests/pg-cluster.sh start 15";
  {  // where an error came from, in the log a failure prints (copied to the standby)
    PgConn p(primary_->conninfo());
    p.exec("ALTER SYSTEM SET log_error_verbosity = 'verbose'");
    p.exec("SELECT pg_reload_conf()");
  }
  std::string error;
  standby_ = primary_->MakeStandby("standby1", &error);
  ASSERT_TRUE(standby_) << error;
  UseSource(FailoverConninfo(*primary_, *standby_));
}

void OracleTest::MakePgoutputSource(int major) {
  primary_ = std::make_unique<Cluster>(major);
  if (primary_->status() == 3)
    FAIL() << "PostgreSQL " << major << " binaries absent: run scripts/fetch-postgres.sh " << major;
  ASSERT_EQ(primary_->status(), 0) << "tests/pg-cluster.sh start " << major;
  {
    PgConn p(primary_->conninfo());
    p.exec("ALTER SYSTEM SET log_error_verbosity = 'verbose'");
    p.exec("SELECT pg_reload_conf()");
  }
  UseSource(primary_->conninfo(), SourceMode::kPgoutput);
}

void OracleTest::FailOver(bool lose_commits, std::mt19937_64& rng) {
  if (lose_commits) {
    ASSERT_NO_FATAL_FAILURE(PgCluster("kill", *standby_));
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 700));
  }
  ASSERT_NO_FATAL_FAILURE(PgCluster("kill", *primary_));
  if (lose_commits) {
    ASSERT_NO_FATAL_FAILURE(PgCluster("restart", *standby_));
  }
  ASSERT_NO_FATAL_FAILURE(PgCluster("promote", *standby_));
  ReconnectDb();
  failed_over_ = true;
}


// Issue 15, item 5: a table whose schema changes while everything else goes on. One writer
// owns it (so that its statements always use the current names): mostly rows, and now and then
// DDL: a column added, dropped or renamed, two columns' names swapped in one transaction, a
// column widened (integer -> bigint, text -> varchar(200)), the table renamed, a column added
// with a default (constant or volatile) and a type change USING an expression, whose new values
// reach the target only through the repair the DDL's trigger queues (issue 28). The target must
// follow by identity (docs/operations.md, Schema changes: dropped columns are dropped).
class DdlTable {
 public:
  // In pgoutput mode, dblogd lags behind the writer whenever the seed kills it: the columns
  // dropped and retyped before it read the table's earlier changes are mapped through the DDL
  // trigger's layouts (docs/pgoutput.md, "Identity across DDL"; without them the seeds stop).
  explicit DdlTable(std::string schema) : schema_(std::move(schema)) {}
  void Create(PgConn& db) {
    db.exec("CREATE TABLE " + Name() + " (id int PRIMARY KEY, c1 int, c2 text)");
    columns_ = {{"c1", "int"}, {"c2", "text"}};
    next_ = 3;
    oid_ = db.scalar("SELECT '" + Name() + "'::regclass::oid");
  }
  // After an error the last DDL may or may not have committed (a connection lost at COMMIT,
  // a failover that lost it): the names are read back from the catalog.
  void Resync(PgConn& db) {
    table_ = db.scalar("SELECT relname FROM pg_class WHERE oid = " + oid_);
    columns_.clear();
    for (const auto& r : db.exec("SELECT attname, format_type(atttypid, atttypmod) FROM"
                                 " pg_attribute WHERE attrelid = " + oid_ +
                                 " AND attnum > 1 AND NOT attisdropped ORDER BY attnum")) {
      const std::string type = *r[1] == "integer" ? "int" : *r[1] == "character varying(200)"
                                                                 ? "varchar(200)"
                                                                 : *r[1];
      columns_.push_back({*r[0], type});
    }
    // a table moved in on a primary that then died before its standby had the move
    std::vector<std::string> moved;
    for (const std::string& t : moved_)
      if (db.scalar("SELECT to_regclass('" + schema_ + "." + t + "') IS NOT NULL") == "t")
        moved.push_back(t);
    moved_ = std::move(moved);
  }
  std::string Name() const { return schema_ + "." + table_; }
  // A schema change reaches a consumer with the table's next change: one at the end, so that
  // the last DDL is in the stream before the comparison.
  void Touch(PgConn& db) {
    db.exec("INSERT INTO " + Name() + " (id) VALUES (-1) ON CONFLICT (id) DO UPDATE SET id = -1");
  }
  const std::string& table() const { return table_; }
  int ddl() const { return ddl_; }
  // Tables created outside the scope, filled, then moved into it (issue 15, item 2): their rows
  // reach the target only if dblogd copies a table that enters the scope by DDL.
  const std::vector<std::string>& moved() const { return moved_; }
  std::string OutsideSchema() const { return schema_ + "_out"; }

  // One transaction: a DDL statement (1 in 12), a table moved into the scope (1 in 60, at most
  // 3 per seed), or a few rows.
  void Step(PgConn& db, std::mt19937_64& rng) {
    if (rng() % 60 == 0 && moved_.size() < 3) {
      MoveIn(db, rng);
      return;
    }
    if (rng() % 12 == 0) {
      Ddl(db, rng);
      return;
    }
    db.exec("BEGIN");
    const int rows = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < rows; ++i) {
      const std::string id = std::to_string(rng() % 400);
      switch (rng() % 4) {
        case 0:
        case 1: {
          std::string names = "id", values = id, set = "id = EXCLUDED.id";
          for (const auto& [name, type] : columns_) {
            names += ", " + name;
            values += ", " + Value(type, rng);
            set += ", " + name + " = EXCLUDED." + name;
          }
          db.exec("INSERT INTO " + Name() + " (" + names + ") VALUES (" + values +
                  ") ON CONFLICT (id) DO UPDATE SET " + set);
          break;
        }
        case 2:
          if (!columns_.empty()) {
            const auto& [name, type] = columns_[rng() % columns_.size()];
            db.exec("UPDATE " + Name() + " SET " + name + " = " + Value(type, rng) +
                    " WHERE id = " + id);
          }
          break;
        case 3:
          db.exec("DELETE FROM " + Name() + " WHERE id = " + id);
          break;
      }
    }
    db.exec("COMMIT");
  }

 private:
  static std::string Value(const std::string& type, std::mt19937_64& rng) {
    if (rng() % 8 == 0) return "NULL";
    if (type == "int") return std::to_string(rng() % 100000);
    if (type == "bigint") return std::to_string(rng() % 100000 + 5000000000LL);
    return "'x" + std::to_string(rng() % 1000) + "'";
  }
  // Alternately ALTER TABLE ... SET SCHEMA and a rename-and-move in one transaction; a row
  // changed in the scope right after, in the same transaction or the next.
  void MoveIn(PgConn& db, std::mt19937_64& rng) {
    const std::string name = "t_moved_" + std::to_string(moved_.size());
    const std::string out = OutsideSchema() + "." + name + "_staging";
    db.exec("CREATE SCHEMA IF NOT EXISTS " + OutsideSchema());
    db.exec("DROP TABLE IF EXISTS " + out);
    db.exec("CREATE TABLE " + out + " (id int PRIMARY KEY, v int, s text)");
    db.exec("INSERT INTO " + out + " SELECT g, g * 7, 'before ' || g FROM generate_series(1, " +
            std::to_string(50 + rng() % 500) + ") g");
    if (moved_.size() % 2 == 0)
      db.exec("BEGIN; ALTER TABLE " + out + " RENAME TO " + name + "; ALTER TABLE " +
              OutsideSchema() + "." + name + " SET SCHEMA " + schema_ + "; COMMIT");
    else
      db.exec("BEGIN; ALTER TABLE " + out + " SET SCHEMA " + schema_ + "; ALTER TABLE " +
              schema_ + "." + name + "_staging RENAME TO " + name + "; UPDATE " + schema_ +
              "." + name + " SET v = -v WHERE id % 5 = 0; COMMIT");
    moved_.push_back(name);
    db.exec("UPDATE " + schema_ + "." + name + " SET s = 'after' WHERE id % 3 = 0");
    ++ddl_;
  }

  void Ddl(PgConn& db, std::mt19937_64& rng) {
    const std::string t = Name();
    std::vector<std::pair<std::string, std::string>> after = columns_;
    std::string table = table_;
    std::string sql;
    const std::uint64_t kind = rng() % 8;
    switch (kind) {
      case 0: {  // add
        const std::string name = "c" + std::to_string(next_++);
        const std::string type = rng() % 2 ? "int" : "text";
        sql = "ALTER TABLE " + t + " ADD COLUMN " + name + " " + type;
        after.push_back({name, type});
        break;
      }
      case 1:  // drop
        if (after.size() < 2) return;
        {
          const std::size_t i = rng() % after.size();
          sql = "ALTER TABLE " + t + " DROP COLUMN " + after[i].first;
          after.erase(after.begin() + static_cast<long>(i));
        }
        break;
      case 2: {  // rename, with a row written in the same transaction
        if (after.empty()) return;
        auto& column = after[rng() % after.size()];
        const std::string name = "c" + std::to_string(next_++);
        sql = "BEGIN; ALTER TABLE " + t + " RENAME COLUMN " + column.first + " TO " + name +
              "; UPDATE " + t + " SET " + name + " = " + name + " WHERE id = " +
              std::to_string(rng() % 400) + "; COMMIT";
        column.first = name;
        break;
      }
      case 3:  // swap two names in one transaction
        if (after.size() < 2) return;
        {
          auto& a = after[0];
          auto& b = after[1 + rng() % (after.size() - 1)];
          sql = "BEGIN; ALTER TABLE " + t + " RENAME COLUMN " + a.first + " TO swap_tmp;" +
                " ALTER TABLE " + t + " RENAME COLUMN " + b.first + " TO " + a.first + ";" +
                " ALTER TABLE " + t + " RENAME COLUMN swap_tmp TO " + b.first + "; COMMIT";
          std::swap(a.first, b.first);
        }
        break;
      case 4: {  // widen
        std::vector<std::size_t> widenable;
        for (std::size_t i = 0; i < after.size(); ++i)
          if (after[i].second == "int" || after[i].second == "text") widenable.push_back(i);
        if (widenable.empty()) return;
        auto& column = after[widenable[rng() % widenable.size()]];
        column.second = column.second == "int" ? "bigint" : "varchar(200)";
        sql = "ALTER TABLE " + t + " ALTER COLUMN " + column.first + " TYPE " + column.second;
        break;
      }
      case 5:  // rename the table
        table = "t_ddl_" + std::to_string(next_++);
        sql = "ALTER TABLE " + t + " RENAME TO " + table;
        break;
      case 6: {  // add a column filled by its default, constant or volatile: no row written
        const std::string name = "c" + std::to_string(next_++);
        const bool text = rng() % 2;
        const bool volatile_default = rng() % 2;
        const std::string fill = text ? (volatile_default ? "'r' || (random() * 1000)::int" : "'d'")
                                      : (volatile_default ? "(random() * 1000)::int" : "42");
        sql = "ALTER TABLE " + t + " ADD COLUMN " + name + " " + (text ? "text" : "int") +
              " DEFAULT " + fill;
        after.push_back({name, text ? "text" : "int"});
        break;
      }
      case 7: {  // a type change that rewrites every value (USING): no row written
        if (after.empty()) return;
        auto& column = after[rng() % after.size()];
        if (column.second == "int" || column.second == "bigint")
          sql = "ALTER TABLE " + t + " ALTER COLUMN " + column.first + " TYPE bigint USING " +
                column.first + " * 3 + 1";
        else
          sql = "ALTER TABLE " + t + " ALTER COLUMN " + column.first + " TYPE " +
                column.second + " USING " + column.first + " || '!'";
        if (column.second == "int") column.second = "bigint";
        break;
      }
    }
    db.exec(sql);
    columns_ = std::move(after);
    table_ = std::move(table);
    ++ddl_;
  }

  std::string schema_;
  std::string oid_;
  std::string table_ = "t_ddl";
  std::vector<std::pair<std::string, std::string>> columns_;  // besides id: name, type
  std::vector<std::string> moved_;
  int next_ = 3;
  std::atomic<int> ddl_{0};
};

void OracleTest::RunSeed(std::uint64_t seed, int seconds, bool failover) {
  SCOPED_TRACE("oracle seed " + std::to_string(seed) + " (replay: DBLOG_ORACLE_SEED=" +
               std::to_string(seed) + ")");
  // the target lives on the shared cluster, whatever the source
  const std::string target_server = conninfo();
  failed_over_ = false;
  if (failover) {
    ASSERT_NO_FATAL_FAILURE(MakePrimaryAndStandby());
  } else if (pgoutput_major_ != 0) {
    ASSERT_NO_FATAL_FAILURE(MakePgoutputSource(pgoutput_major_));
  }
  const std::string s = schema();
  CreateWorkloadTables(db(), s);
  DdlTable ddl_table(s);
  ddl_table.Create(db());
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 50; ++i) RandomTransaction(db(), s, rng, kOracleWorkload);
  // Rows outside the writers' keys, so that the bootstrap takes long enough for what is done
  // during it (below) to land inside it.
  db().exec("INSERT INTO " + s + ".t_int (id, v, s) SELECT g, g, 'bulk' FROM "
            "generate_series(1000000, 1030000) g");

  target_db_ = "oracle_" + std::to_string(getpid());
  {
    PgConn server(target_server);
    server.exec("DROP DATABASE IF EXISTS " + target_db_);
    server.exec("CREATE DATABASE " + target_db_);
  }
  const std::string target = target_server + " dbname=" + target_db_;

  // chunks of 300 rows that grow to 2400 on the bulk rows (NextChunkRows): windows of every
  // size race the writers; after a failover the new primary's slot is reconciled (repairs of
  // the whole scope), not bootstrapped again
  std::vector<std::string> flags = {"--chunk-size=300", "--max-chunk-size=2400"};
  if (failover) flags.push_back("--on-slot-lost=reconcile");
  if (pgoutput_major_ != 0) flags.push_back("--source-plugin=pgoutput");
  StartDblogd(flags);
  char tmpl[] = "/tmp/dblog-apply-XXXXXX";
  close(mkstemp(tmpl));
  ApplyProcess apply({"--consumer=" + consumer(), "--port=" + std::to_string(dblogd_->port()),
                      "--target=" + target, "--create-tables"},
                     tmpl);
  apply.Start();
  int dblogd_kills = 0, apply_kills = 0, repairs = 0, bootstrap_kills = 0;
  std::vector<std::uint64_t> requests;
  // Issue 13, item 2: a repair requested while the bootstrap copies, and in half the seeds
  // dblogd killed before the bootstrap can end, so that it is redone from a new slot. Every
  // request must still run (checked with the others at the end).
  {  // the consumer exists once its bootstrap began (a repair before names no consumer); in
     // pgoutput mode dblogd makes dblog.consumers at the consumer's first connection
    const auto until = std::chrono::steady_clock::now() + 60s;
    auto begun = [&] {
      return HasBookkeeping() && db().scalar("SELECT count(*) FROM dblog.consumers WHERE name = '" +
                                             consumer() + "'") != "0";
    };
    while (!begun()) {
      ASSERT_LT(std::chrono::steady_clock::now(), until) << "the bootstrap never began";
      std::this_thread::sleep_for(5ms);
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 100));
  requests.push_back(std::stoull(db().scalar(
      "SELECT dblog.repair('" + s + "." +
      std::vector<std::string>{"t_int", "t_comp", "t_uuid"}[rng() % 3] + "')")));
  ++repairs;
  if (rng() % 2 == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 150));
    dblogd_->Signal(SIGKILL);
    dblogd_->Wait();
    // killed before the bootstrap was done: the next connection redoes it from a new slot
    if (db().scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = '" + consumer() +
                    "'") != "done")
      ++bootstrap_kills;
    dblogd_->Start();
    ++dblogd_kills;
  }

  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  struct JoinOnExit {  // an early return (a failed ASSERT) must not leave threads running
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~JoinOnExit() {
      stop = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } join_on_exit{stop, writers};
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937_64 wrng(seed * 31 + static_cast<std::uint64_t>(w));
      std::optional<PgConn> conn;
      while (!stop) {
        try {
          if (!conn) conn.emplace(conninfo());
          RandomTransaction(*conn, s, wrng, kOracleWorkload);
        } catch (const PgError&) {
          conn.reset();  // a constraint race, or PostgreSQL restarting
          std::this_thread::sleep_for(50ms);
        }
      }
    });
  }

  // The DDL writer, from the end of the bootstrap on (DDL during a bootstrap is issue 15's
  // item 3, not this table's).
  writers.emplace_back([&] {
    std::mt19937_64 wrng(seed * 31 + 7);
    std::optional<PgConn> conn;
    bool bootstrapped = false;
    while (!stop) {
      try {
        if (!conn) {
          conn.emplace(conninfo());
          ddl_table.Resync(*conn);
        }
        if (!bootstrapped) {
          bootstrapped = conn->scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = '" +
                                      consumer() + "'") == "done";
          if (!bootstrapped) std::this_thread::sleep_for(50ms);
          continue;
        }
        ddl_table.Step(*conn, wrng);
        std::this_thread::sleep_for(5ms);
      } catch (const PgError&) {
        conn.reset();  // PostgreSQL restarting; the names are read again (Resync)
        std::this_thread::sleep_for(50ms);
      }
    }
  });

  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  const char* pgdata = std::getenv("DBLOG_TEST_PGDATA");
  const char* bindir = std::getenv("DBLOG_TEST_PG_BINDIR");
  bool restarted_pg = false, damaged = false, lost_commits = false;
  // whether the new primary holds the consumer's bootstrap as done: then it is reconciled,
  // never emptied by a new bootstrap
  bool bootstrapped_before_failover = false;
  auto BootstrapDone = [&] {
    return db().scalar("SELECT count(*) FROM dblog.consumers WHERE name = '" + consumer() +
                       "' AND bootstrap_state = 'done'") == "1";
  };
  // Requests the promoted standby never received are gone with the old primary (their rows
  // with it): they are not waited for. The reconcile's repairs cover what they would have.
  auto ForgetLostRequests = [&](std::vector<std::uint64_t>& ids) {
    std::vector<std::uint64_t> kept;
    for (auto id : ids)
      if (db().scalar("SELECT count(*) FROM dblog.requests WHERE id = " + std::to_string(id)) ==
          "1")
        kept.push_back(id);
    ids = std::move(kept);
  };
  while (std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 700));
    apply.Supervise();
    const auto left = end - std::chrono::steady_clock::now();
    try {
      switch (rng() % 8) {
        case 0: {
          const std::string t = std::vector<std::string>{"t_int", "t_comp", "t_uuid"}[rng() % 3];
          requests.push_back(std::stoull(db().scalar("SELECT dblog.repair('" + s + "." + t + "')")));
          ++repairs;
          break;
        }
        case 1:
          requests.push_back(std::stoull(db().scalar(
              "SELECT dblog.repair_range('" + s + ".t_int', '{\"id\": " +
              std::to_string(rng() % 1000) + "}', '{\"id\": " + std::to_string(1000 + rng() % 3000) +
              "}')")));
          requests.push_back(std::stoull(db().scalar(
              "SELECT dblog.repair_keys('" + s + ".t_comp', '[{\"a\": \"k1\", \"b\": 1}, "
              "{\"a\": \"k2\", \"b\": 2}, {\"a\": \"nope\", \"b\": 3}]')")));
          repairs += 2;
          break;
        case 2:
          dblogd_->Signal(SIGKILL);
          dblogd_->Wait();
          dblogd_->Start();
          ++dblogd_kills;
          break;
        case 3:
          apply.Kill();
          apply.Start();
          ++apply_kills;
          break;
        case 4:
          if (!damaged && left < std::chrono::seconds(seconds) / 2) {
            PgConn t(target);
            t.exec("DELETE FROM " + s + ".t_int WHERE id % 7 = 0");
            t.exec("UPDATE " + s + ".t_int SET v = -1 WHERE id % 11 = 0");
            t.exec("INSERT INTO " + s + ".t_int (id, v) VALUES (999999, 1) ON CONFLICT DO NOTHING");
            requests.push_back(std::stoull(db().scalar("SELECT dblog.repair('" + s + ".t_int')")));
            damaged = true;
          }
          break;
        case 5:
          if (!restarted_pg && primary_) {  // a source of the seed's own
            ASSERT_TRUE((failed_over_ ? standby_ : primary_)->Restart());
            ReconnectDb();
            restarted_pg = true;
          } else if (!restarted_pg && pgdata && bindir) {
            const std::string as_pg = geteuid() == 0 ? "runuser -u postgres -- " : "";
            ASSERT_EQ(std::system((as_pg + bindir + "/pg_ctl -D " + pgdata +
                                   " -m fast -w restart >/dev/null 2>&1").c_str()),
                      0);
            ReconnectDb();
            restarted_pg = true;
          }
          break;
        case 6:
          if (failover && !failed_over_ && left < std::chrono::seconds(seconds) * 3 / 4) {
            lost_commits = rng() % 2 == 0;
            ASSERT_NO_FATAL_FAILURE(FailOver(lost_commits, rng));
            ForgetLostRequests(requests);
            bootstrapped_before_failover = BootstrapDone();
          }
          break;
      }
    } catch (const PgError&) {
      ReconnectDb();
    }
  }
  // a failover seed fails over, whatever the dice said
  if (failover && !failed_over_) {
    lost_commits = rng() % 2 == 0;
    ASSERT_NO_FATAL_FAILURE(FailOver(lost_commits, rng));
    ForgetLostRequests(requests);
    bootstrapped_before_failover = BootstrapDone();
  }
  // the damage and the restart happen in every seed, whatever the dice said
  if (!damaged) {
    // The applier writes the same rows: a deadlock with it (the target's error 40P01) is
    // retried, as the damage inside the loop is. On a slow machine the kills and the restart
    // can leave the bootstrap still running: the target's table may not exist yet.
    const auto until = std::chrono::steady_clock::now() + 120s;
    for (;;) {
      try {
        PgConn t(target);
        t.exec("DELETE FROM " + s + ".t_int WHERE id % 7 = 0");
        break;
      } catch (const PgError&) {
        apply.Supervise();
        if (std::chrono::steady_clock::now() > until) throw;
        std::this_thread::sleep_for(100ms);
      }
    }
    requests.push_back(std::stoull(db().scalar("SELECT dblog.repair('" + s + ".t_int')")));
  }
  stop = true;
  for (auto& w : writers)
    if (w.joinable()) w.join();
  ddl_table.Resync(db());  // the writer may have lost its connection at a COMMIT
  ddl_table.Touch(db());

  // catch up: every request done and the sentinel applied
  Sentinel();
  const std::string last_sentinel = db().scalar("SELECT max(id) FROM " + s + ".sentinel");
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  for (;;) {
    apply.Supervise();
    bool done = true;
    // pgoutput mode: the DDL trigger's notes become requests at dblogd's next poll (a second):
    // a DDL right before the end may not have its request yet. Checked before the requests
    // (a note taken between the two checks has its request queued already)
    if (pgoutput_major_ != 0)
      done = db().scalar("SELECT count(*) FROM dblog_ddl.changed_tables d WHERE NOT "
                         "EXISTS (SELECT 1 FROM dblog.ddl_taken t WHERE t.xid = d.xid "
                         "AND t.table_oid = d.table_oid)") == "0";
    for (auto id : requests)
      done = done && db().scalar("SELECT state FROM dblog.requests WHERE id = " +
                                 std::to_string(id)) == "done";
    // and those dblogd queued itself (tables moved into the scope), and those the DDL's
    // trigger queued (rows the DDL changed without writing them: every consumer, a reason)
    done = done && db().scalar("SELECT count(*) FROM dblog.requests WHERE (consumer = '" +
                               consumer() + "' OR (consumer IS NULL AND reason IS NOT NULL AND"
                               " table_name LIKE '" + s + ".%')) AND state IS DISTINCT FROM"
                               " 'done'") == "0";
    if (done) {
      try {
        PgConn t(target);
        if (t.scalar("SELECT count(*) FROM " + s + ".sentinel WHERE id = " + last_sentinel) == "1")
          break;
      } catch (const PgError&) {
      }
    }
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "did not catch up; apply log: " << tmpl << "\n" << StallReport(target) << "\n"
        << dblogd_->log();
    std::this_thread::sleep_for(200ms);
  }
  apply.Kill();
  if (bootstrapped_before_failover) {
    // a reconcile that began (a dblogd killed before it ended is followed by one that resumes
    // from the new slot, its repairs queued: limit 15 of docs/correctness.md)
    EXPECT_GE(CountLogEvents(dblogd_->log(), "slot_missing_reconcile"), 1)
        << "the consumer's bootstrap was done on the new primary: it must be reconciled";
  }

  PgConn t(target);
  t.exec("SET timezone = 'UTC'");
  db().exec("SET timezone = 'UTC'");
  std::vector<std::string> compared{"t_int", "t_comp", "t_uuid", ddl_table.table()};
  compared.insert(compared.end(), ddl_table.moved().begin(), ddl_table.moved().end());
  for (const std::string& table : compared) {
    // Whole rows; after a failover column by column, by name: the same columns on both sides,
    // compared in the source's order (a failover that lost a DROP COLUMN has the target add
    // the column back at its end: same values, another position).
    const std::string names =
        "SELECT string_agg(quote_ident(attname), ', ' ORDER BY %s) FROM pg_attribute WHERE "
        "attrelid = '" + s + "." + table + "'::regclass AND attnum > 0 AND NOT attisdropped";
    auto columns = [&](PgConn& c, const char* order) {
      return c.scalar(std::string(names).replace(names.find("%s"), 2, order));
    };
    EXPECT_EQ(columns(db(), "attname"), columns(t, "attname")) << table << ": the columns differ";
    const std::string list = failover ? columns(db(), "attnum") : "*";
    const std::string q = "SELECT count(*) || ' ' || coalesce(md5(string_agg(x::text, '|' ORDER BY "
                          "x::text)), '') FROM (SELECT " + list + " FROM " + s + "." + table +
                          ") x";
    const std::string want = db().scalar(q), got = t.scalar(q);
    if (want != got) {
      const std::string diff =
          "SELECT x::text FROM (SELECT " + list + " FROM " + s + "." + table + ") x ORDER BY 1";
      const auto a = db().exec(diff), b = t.exec(diff);
      std::size_t i = 0;
      while (i < a.size() && i < b.size() && a[i][0] == b[i][0]) ++i;
      ADD_FAILURE() << table << " diverged (count+hash source " << want << ", target " << got
                    << "); first difference: source "
                    << (i < a.size() ? *a[i][0] : std::string("(end)")) << " vs target "
                    << (i < b.size() ? *b[i][0] : std::string("(end)"));
    }
  }
  RecordProperty("seed", std::to_string(seed));
  std::printf("oracle seed %llu: %d dblogd kills (%d during the bootstrap, after a repair was "
              "requested), %d apply kills (%d starts), %d repairs, %d DDL statements (table now "
              "%s, %zu tables moved into the scope), PostgreSQL restarted: %s, failover: %s%s\n",
              static_cast<unsigned long long>(seed), dblogd_kills, bootstrap_kills, apply_kills,
              apply.starts(), repairs, ddl_table.ddl(), ddl_table.table().c_str(),
              ddl_table.moved().size(), restarted_pg ? "yes" : "no",
              !failover ? "no" : lost_commits ? "yes, with commits the standby never received"
                                              : "yes",
              pgoutput_major_ ? (", pgoutput mode on " + std::to_string(pgoutput_major_)).c_str()
                              : "");
  db().exec("DROP SCHEMA IF EXISTS " + ddl_table.OutsideSchema() + " CASCADE");
  if (!HasFailure()) unlink(tmpl);
}

// What a stalled catch-up looks like from the databases: the requests and their progress, every
// session of the source and the target (what each waits on), the locks not granted, the slots.
std::string OracleTest::StallReport(const std::string& target) {
  std::string out;
  auto dump = [&out](const std::string& title, PgConn& c, const std::string& q) {
    out += "-- " + title + "\n";
    try {
      for (const auto& row : c.exec(q)) {
        for (std::size_t i = 0; i < row.size(); ++i)
          out += (i ? " | " : "") + (row[i] ? *row[i] : std::string("NULL"));
        out += "\n";
      }
    } catch (const PgError& e) {
      out += std::string("(failed: ") + e.what() + ")\n";
    }
  };
  const std::string activity =
      "SELECT pid, backend_type, state, wait_event_type, wait_event, backend_xmin, "
      "now() - state_change, left(query, 160) FROM pg_stat_activity "
      "WHERE pid <> pg_backend_pid() AND backend_type IN ('client backend', 'walsender')";
  const std::string locks =
      "SELECT pid, locktype, relation::regclass, mode, granted FROM pg_locks "
      "WHERE NOT granted OR pid IN (SELECT pid FROM pg_locks WHERE NOT granted)";
  try {
    PgConn src(conninfo());
    dump("source dblog.requests", src, "SELECT id, table_name, kind, consumer, state, requested_at, started_at, error FROM dblog.requests ORDER BY id");
    dump("source dblog.request_progress", src, "SELECT * FROM dblog.request_progress ORDER BY 1");
    dump("source dblog.consumers", src, "SELECT * FROM dblog.consumers");
    dump("source slots", src, "SELECT slot_name, active, active_pid, confirmed_flush_lsn, "
                              "pg_current_wal_lsn() FROM pg_replication_slots");
    dump("source sessions", src, activity);
    dump("source locks waited on", src, locks);
  } catch (const PgError& e) {
    out += std::string("(source unreachable: ") + e.what() + ")\n";
  }
  try {
    PgConn t(target);
    dump("target sessions", t, activity);
    dump("target locks waited on", t, locks);
  } catch (const PgError& e) {
    out += std::string("(target unreachable: ") + e.what() + ")\n";
  }
  return out;
}

void OracleTest::RunSeeds(bool failover, int default_seeds) {
  const int seconds = EnvInt("DBLOG_ORACLE_SECONDS", 20);
  if (const char* one = std::getenv("DBLOG_ORACLE_SEED")) {
    RunSeed(std::strtoull(one, nullptr, 10), seconds, failover);
    return;
  }
  const int seeds = EnvInt("DBLOG_ORACLE_SEEDS", default_seeds);
  // CI uses fixed seeds (the interleavings still vary from run to run); DBLOG_ORACLE_BASE_SEED=0
  // draws a random base for soaking.
  std::random_device rd;
  std::uint64_t base = static_cast<std::uint64_t>(EnvInt("DBLOG_ORACLE_BASE_SEED", 1130));
  if (base == 0) base = rd() % 100000 + 1;
  // DBLOG_ORACLE_BUDGET_SECONDS: seeds one after the other until the budget is spent (then
  // DBLOG_ORACLE_SEEDS is ignored); the seeds run are printed one line each.
  const int budget = EnvInt("DBLOG_ORACLE_BUDGET_SECONDS", 0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(budget);
  for (int i = 0; (budget > 0 ? std::chrono::steady_clock::now() < until : i < seeds) &&
                  !HasFailure();
       ++i) {
    if (i > 0) {
      TearDown();
      SetUp();
    }
    RunSeed(base + static_cast<std::uint64_t>(i), seconds, failover);
  }
}

TEST_F(OracleTest, RandomizedWorkloadConverges) { RunSeeds(false, 2); }

// Issue 24: the same seeds on a source of their own, a PostgreSQL 15 primary with an
// asynchronous standby, promoted in the middle (in half the seeds after the primary committed
// what the standby never received, which the sink may have applied and must lose again).
// dblogd runs with --on-slot-lost=reconcile: the target must end equal to the new primary,
// reconciled (never emptied) when its bootstrap had finished there.
TEST_F(OracleTest, RandomizedWorkloadConvergesThroughAFailover) {
  // Not in CI yet: about one seed in ten ends with the reconcile's new slot failing to decode
  // for good (PostgreSQL's "could not map filenode" or "cache lookup failed for type 0", with
  // DDL that rewrites tables running while the slot is made on the just-promoted standby;
  // docs/correctness.md, known gaps). tests/soak.sh runs it.
  if (std::getenv("DBLOG_ORACLE_FAILOVER") == nullptr)
    GTEST_SKIP() << "DBLOG_ORACLE_FAILOVER=1 runs it (tests/soak.sh does)";
  RunSeeds(true, 1);
}

// Issue 23, item 8: the same seeds through dblogd --source-plugin=pgoutput, on a cluster of
// each major without the extension (dblogd, a superuser there, makes its tables, the
// publication and the DDL trigger itself). Its DDL table drops and retypes columns too, which
// the DDL trigger's layouts map while dblogd lags (DdlTable).
class OraclePgoutputTest : public OracleTest, public ::testing::WithParamInterface<int> {};

TEST_P(OraclePgoutputTest, RandomizedWorkloadConverges) {
  pgoutput_major_ = GetParam();
  RunSeeds(false, 1);
}

INSTANTIATE_TEST_SUITE_P(Majors, OraclePgoutputTest, ::testing::Values(15, 16, 17, 18),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "PostgreSQL" + std::to_string(i.param);
                         });

}  // namespace
}  // namespace dblog::test
