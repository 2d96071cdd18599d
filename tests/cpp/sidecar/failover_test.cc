// tests/cpp/sidecar/failover_test.cc: a failover of a PostgreSQL 15 source (issue 24 item 2),
// end to end: a primary with the dblog extension and a physical standby of it (asynchronous
// streaming replication, tests/pg-cluster.sh standby), the real dblogd given both hosts with
// target_session_attrs=read-write, the real client library over TCP and the replay oracle.
// PostgreSQL 15 has no failover slots: the promoted standby has no slot of dblogd's.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "apply_process.h"
#include "client/client.h"
#include "common/lsn.h"
#include "dblogd_fixture.h"
#include "oracle_workload.h"
#include "pg_test_util.h"
#include "server_util.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSchema = "app";
const std::vector<std::string> kTables = {"t_int", "t_comp", "t_uuid", "sentinel"};

class FailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    primary_ = std::make_unique<Cluster>(15);
    ASSERT_EQ(primary_->status(), 0) << "tests/pg-cluster.sh start 15";
    db_ = std::make_unique<PgConn>(primary_->conninfo());
    db_->exec("CREATE EXTENSION dblog");
    db_->exec(std::string("CREATE SCHEMA ") + kSchema);
    CreateWorkloadTables(*db_, kSchema);
    db_->exec(std::string("CREATE TABLE ") + kSchema + ".sentinel (id int PRIMARY KEY)");
  }

  // The standby (asynchronous), made now: it has no slot of dblogd's.
  void MakeStandby() {
    db_.reset();
    std::string error;
    standby_ = primary_->MakeStandby("standby1", &error);
    ASSERT_TRUE(standby_) << error;
    db_ = std::make_unique<PgConn>(primary_->conninfo());
  }

  // tests/pg-cluster.sh COMMAND DIR, which must succeed.
  static void PgCluster(const std::string& command, const Cluster& cluster) {
    const auto [out, status] = cluster.Command(command);
    ASSERT_EQ(status, 0) << command << ": " << out;
  }

  // The standby goes down, so the primary's next commits never reach it.
  void StopTheStandby() { ASSERT_NO_FATAL_FAILURE(PgCluster("kill", *standby_)); }

  // The primary dies (immediate) and the standby, up again, is promoted: db_ then points at it.
  void PromoteTheStandby(bool standby_was_down) {
    db_.reset();
    ASSERT_NO_FATAL_FAILURE(PgCluster("kill", *primary_));
    if (standby_was_down) {
      ASSERT_NO_FATAL_FAILURE(PgCluster("restart", *standby_));
    }
    ASSERT_NO_FATAL_FAILURE(PgCluster("promote", *standby_));
    db_ = std::make_unique<PgConn>(standby_->conninfo());
  }

  // Commits of the primary that the stopped standby will never have: the workload, and 100
  // rows (ids 900000..900099 of t_int) that must be gone from every sink after the failover.
  void CommitWhatTheStandbyWillNotHave(std::mt19937_64& rng, const WorkloadOptions& options) {
    for (int i = 0; i < 15; ++i) RandomTransaction(*db_, kSchema, rng, options);
    db_->exec(std::string("INSERT INTO ") + kSchema +
              ".t_int SELECT g, g, 'lost', NULL, 1 FROM generate_series(900000, 900099) g");
  }

  void StartDblogd(const std::string& on_slot_lost) {
    const std::string both = FailoverConninfo(*primary_, *standby_);
    dblogd_ = std::make_unique<DblogdProcess>(std::vector<std::string>{
        "--source=" + both, std::string("--consumer=sink=") + kSchema + ".*",
        "--on-slot-lost=" + on_slot_lost, "--reconnect-max=1", "--status-interval=1",
        "--heartbeat-interval=1", "--chunk-size=500"});
    dblogd_->Start();
  }

  client::Client Connect() {
    client::ConnectOptions o;
    o.port = dblogd_->port();
    o.consumer = "sink";
    o.resume_after = replay_.last_position();
    o.io_timeout = 30000ms;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      try {
        return client::Client::Connect(o);
      } catch (const client::TransportError&) {
        if (std::chrono::steady_clock::now() > deadline) throw;
        std::this_thread::sleep_for(200ms);
      }
    }
  }

  std::uint64_t Sentinel() {
    db_->exec("BEGIN");
    db_->exec(std::string("INSERT INTO ") + kSchema + ".sentinel VALUES (" +
              std::to_string(++sentinel_) + ")");
    const std::uint64_t lsn = common::ParseLsn(db_->scalar("SELECT pg_current_wal_insert_lsn()"));
    db_->exec("COMMIT");
    return lsn;
  }

  // Reads into the replay (acknowledging) until a Commit at or past `lsn` (0: the
  // BootstrapEnd; or a BootstrapEnd past it); a session dblogd ends (the source failed over under it) is reconnected,
  // resuming after the replay's last position. Returns the Welcomes of those sessions.
  std::vector<dblog::v1::Welcome> ReadUntil(std::optional<client::Client>& c, std::uint64_t lsn) {
    std::vector<dblog::v1::Welcome> welcomes;
    const auto deadline = std::chrono::steady_clock::now() + 180s;
    client::Item item;
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        if (!c) {
          c.emplace(Connect());
          welcomes.push_back(c->welcome());
          if (c->welcome().has_reconcile()) replay_.Reconciled();
        }
        if (!c->Next(item)) {
          c.reset();
          continue;
        }
      } catch (const client::ServerError&) {
        c.reset();
        std::this_thread::sleep_for(500ms);
        continue;
      } catch (const client::TransportError&) {
        c.reset();
        std::this_thread::sleep_for(500ms);
        continue;
      }
      auto* ev = std::get_if<dblog::v1::StreamEvent>(&item);
      if (!ev) continue;
      replay_.Apply(*ev);
      if (ev->has_bootstrap_begin()) ++bootstraps_;
      if (ev->has_commit() || ev->has_bootstrap_end()) {
        try {
          c->Ack(*client::Client::PositionOf(*ev));
        } catch (const client::TransportError&) {
          // dblogd ended the session under the ack (the failover): the next connection resumes
          // after the replay's last position
          c.reset();
        }
        if (ev->has_commit() && lsn != 0 && ev->commit().commit_lsn() >= lsn) return welcomes;
        // a bootstrap (again) whose snapshot holds the commit at `lsn`
        if (ev->has_bootstrap_end() && (lsn == 0 || ev->bootstrap_end().consistent_point() > lsn))
          return welcomes;
      }
    }
    ADD_FAILURE() << "the stream did not reach " << common::FormatLsn(lsn) << "\n"
                  << dblogd_->log();
    return welcomes;
  }

  void ExpectConverged() {
    for (const auto& t : kTables) {
      const std::string q = std::string(kSchema) + "." + t;
      const auto source = SourceTable(*db_, q);
      const auto replayed = replay_.Table(
          static_cast<std::uint32_t>(std::stoul(db_->scalar("SELECT '" + q + "'::regclass::oid"))));
      EXPECT_EQ(source.size(), replayed.size()) << q;
      int differing = 0;
      for (const auto& [key, row] : source) {
        auto it = replayed.find(key);
        differing += it == replayed.end() || it->second != row;
      }
      EXPECT_EQ(differing, 0) << q << ": rows missing from the replay or different";
    }
  }

  std::unique_ptr<Cluster> primary_, standby_;
  std::unique_ptr<PgConn> db_;
  std::unique_ptr<DblogdProcess> dblogd_;
  Replay replay_;
  int sentinel_ = 0;
  int bootstraps_ = 0;
};

// Issue 24 item 2: the consumer bootstrapped and streams; the standby stops receiving (it is
// stopped), the primary commits more, which the consumer applies; the primary dies (immediate)
// and the standby, started again, is promoted without those commits. dblogd, given both hosts,
// finds the new primary without its slot, and with --on-slot-lost=reconcile makes a new one,
// brings the WAL past the consumer's position, and queues a whole-table repair of every table
// in scope instead of a bootstrap: no second BootstrapBegin (the consumer is never emptied),
// Welcome.reconcile names the repairs, and once they are done the replay equals the new
// primary, table by table: the rows of the lost commits are gone from it too, and the changes
// made on the new primary before the consumer came back are there.
TEST_F(FailoverTest, ASlotLostByAFailoverIsReconciledWithoutANewBootstrap) {
  std::mt19937_64 rng(2402);
  WorkloadOptions options;
  options.large_rows = 300;
  for (int i = 0; i < 30; ++i) RandomTransaction(*db_, kSchema, rng, options);
  ASSERT_NO_FATAL_FAILURE(MakeStandby());
  StartDblogd("reconcile");
  std::optional<client::Client> c;
  ReadUntil(c, 0);
  for (int i = 0; i < 20; ++i) RandomTransaction(*db_, kSchema, rng, options);
  ReadUntil(c, Sentinel());
  ExpectConverged();
  ASSERT_EQ(bootstraps_, 1);

  // The standby stops receiving (it goes down); the consumer applies commits it will never have.
  ASSERT_NO_FATAL_FAILURE(StopTheStandby());
  CommitWhatTheStandbyWillNotHave(rng, options);
  ReadUntil(c, Sentinel());
  const std::uint64_t applied = replay_.last_position()->commit_lsn();
  ASSERT_NO_FATAL_FAILURE(PromoteTheStandby(true));
  EXPECT_LT(common::ParseLsn(db_->scalar("SELECT pg_current_wal_insert_lsn()")), applied)
      << "the promoted standby should lack WAL the consumer applied";
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM app.t_int WHERE id >= 900000"), "0");
  for (int i = 0; i < 15; ++i) RandomTransaction(*db_, kSchema, rng, options);

  // dblogd moves over; the session it had ends, the next one reconciles.
  const auto welcomes = ReadUntil(c, Sentinel());
  ASSERT_FALSE(welcomes.empty()) << "the consumer never reconnected";
  const dblog::v1::Welcome& w = welcomes.back();
  ASSERT_TRUE(w.has_reconcile()) << dblogd_->log();
  EXPECT_TRUE(w.slot_created());
  EXPECT_EQ(static_cast<std::size_t>(w.reconcile().request_ids_size()), kTables.size());
  // the repairs run while the workload goes on; read until every one is done
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  for (;;) {
    for (int i = 0; i < 3; ++i) RandomTransaction(*db_, kSchema, rng, options);
    ReadUntil(c, Sentinel());
    const std::string done = db_->scalar(
        "SELECT count(*) FROM dblog.requests WHERE consumer = 'sink' AND state = 'done' AND "
        "id = ANY('{" +
        [&] {
          std::string ids;
          for (auto id : w.reconcile().request_ids())
            ids += (ids.empty() ? "" : ",") + std::to_string(id);
          return ids;
        }() + "}'::bigint[])");
    if (done == std::to_string(kTables.size())) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "repairs not done\n" << dblogd_->log();
  }
  ReadUntil(c, Sentinel());
  EXPECT_EQ(bootstraps_, 1) << "bootstrapped again: the consumer was emptied";
  EXPECT_GT(replay_.chunks_seen(), 0u);
  ExpectConverged();
  EXPECT_GE(CountLogEvents(dblogd_->log(), "slot_reconciled"), 1);
  EXPECT_EQ(CountLogEvents(dblogd_->log(), "source_promoted"), 1) << "timeline 1, then 2";
  EXPECT_NE(dblogd_->Metrics().find("dblog_source_timeline_changes_total{consumer=\"sink\"} 1"),
            std::string::npos)
      << dblogd_->Metrics();
  // and dblog.consumer_status (extension 0.6), for whoever looks at the source
  const auto status = db_->exec(
      "SELECT timeline, failed_over_at IS NOT NULL, failover FROM dblog.consumer_status"
      " WHERE name = 'sink'");
  ASSERT_EQ(status.size(), 1u);
  EXPECT_EQ(*status[0][0], "2");
  EXPECT_EQ(*status[0][1], "t");
  EXPECT_EQ(status[0][2]->rfind("timeline 1 to 2: reconciled: a new slot at ", 0), 0u)
      << *status[0][2];
}

// Issue 24 item 4: the same failover with `dblog apply` as the sink, into a third cluster. It
// keeps running through it (SOURCE_ERROR is retried), logs the reconcile, and its target ends
// equal to the new primary, table by table, without a second bootstrap (which would have
// emptied its tables).
TEST_F(FailoverTest, DblogApplyKeepsRunningThroughItAndItsTargetEndsEqualToTheNewPrimary) {
  std::mt19937_64 rng(2404);
  WorkloadOptions options;
  options.large_rows = 300;
  for (int i = 0; i < 30; ++i) RandomTransaction(*db_, kSchema, rng, options);
  ASSERT_NO_FATAL_FAILURE(MakeStandby());
  StartDblogd("reconcile");
  Cluster target_cluster(15);
  ASSERT_EQ(target_cluster.status(), 0);
  PgConn target(target_cluster.conninfo());
  ApplyProcess apply({"--consumer", "sink", "--port", std::to_string(dblogd_->port()),
                      "--target", target_cluster.conninfo(), "--create-tables",
                      "--retry-min=0.05", "--retry-max=0.5"});
  apply.Start();
  const auto wait_for = [](const std::function<bool()>& done, std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(100ms);
    }
    return done();
  };
  const auto applied = [&](std::uint64_t lsn) {
    try {
      return target.scalar("SELECT commit_lsn >= '" + common::FormatLsn(lsn) +
                           "'::pg_lsn FROM dblog_apply.progress WHERE consumer = 'sink'") == "t";
    } catch (const PgError&) {
      return false;  // not made yet
    }
  };
  const auto same = [&] {
    for (const auto& t : kTables) {
      const std::string sql = "SELECT count(*) || ' ' || coalesce(md5(string_agg(t::text, ',' "
                              "ORDER BY t::text)), '-') FROM " + std::string(kSchema) + "." + t +
                              " t";
      try {
        if (db_->scalar(sql) != target.scalar(sql)) return false;
      } catch (const PgError&) {
        return false;
      }
    }
    return true;
  };
  ASSERT_TRUE(wait_for([&] { return applied(Sentinel()) && same(); }, 120s)) << apply.log();
  ASSERT_TRUE(wait_for([&] {
    return db_->scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = 'sink'") == "done";
  }, 60s));

  ASSERT_NO_FATAL_FAILURE(StopTheStandby());
  CommitWhatTheStandbyWillNotHave(rng, options);
  ASSERT_TRUE(wait_for([&] { return applied(Sentinel()); }, 120s)) << apply.log();
  EXPECT_EQ(target.scalar("SELECT count(*) FROM app.t_int WHERE id >= 900000"), "100");
  ASSERT_NO_FATAL_FAILURE(PromoteTheStandby(true));
  for (int i = 0; i < 15; ++i) RandomTransaction(*db_, kSchema, rng, options);
  const auto repairs_done = [&] {
    return db_->scalar("SELECT count(*) FROM dblog.requests WHERE consumer = 'sink' AND "
                       "reason LIKE 'reconcile%' AND state = 'done'") ==
           std::to_string(kTables.size());
  };
  ASSERT_TRUE(wait_for([&] { return repairs_done() && same(); }, 180s))
      << apply.log() << "\n" << dblogd_->log();
  EXPECT_FALSE(apply.Exited()) << apply.log();
  EXPECT_EQ(target.scalar("SELECT count(*) FROM app.t_int WHERE id >= 900000"), "0");
  EXPECT_NE(apply.log().find("queued 4 whole-table repair(s) instead of a new bootstrap"),
            std::string::npos)
      << apply.log();
  EXPECT_EQ(CountLogEvents(dblogd_->log(), "bootstrap_started"), 1);
}

// Issue 24's synchronous case: the standby is synchronous (synchronous_standby_names = '*'),
// so every commit the workload saw confirmed is on it; the primary dies and the standby is
// promoted. Nothing the consumer applied is missing there (its WAL reaches the consumer's
// position, the 100 confirmed rows are in it), the slot is gone (PostgreSQL 15), and the
// reconcile brings the replay to the new primary without a second bootstrap, the 100 rows kept.
TEST_F(FailoverTest, WithASynchronousStandbyNothingConfirmedIsLostAndTheSinkConverges) {
  std::mt19937_64 rng(2407);
  WorkloadOptions options;
  options.large_rows = 300;
  for (int i = 0; i < 20; ++i) RandomTransaction(*db_, kSchema, rng, options);
  ASSERT_NO_FATAL_FAILURE(MakeStandby());
  db_->exec("ALTER SYSTEM SET synchronous_standby_names = '*'");
  db_->exec("SELECT pg_reload_conf()");
  const auto synced = std::chrono::steady_clock::now() + 60s;
  while (db_->scalar("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") != "1") {
    ASSERT_LT(std::chrono::steady_clock::now(), synced) << "the standby never became synchronous";
    std::this_thread::sleep_for(100ms);
  }
  StartDblogd("reconcile");
  std::optional<client::Client> c;
  ReadUntil(c, 0);
  for (int i = 0; i < 15; ++i) RandomTransaction(*db_, kSchema, rng, options);
  db_->exec(std::string("INSERT INTO ") + kSchema +
            ".t_int SELECT g, g, 'confirmed', NULL, 1 FROM generate_series(900000, 900099) g");
  ReadUntil(c, Sentinel());
  const std::uint64_t applied = replay_.last_position()->commit_lsn();
  ASSERT_NO_FATAL_FAILURE(PromoteTheStandby(false));
  EXPECT_GE(common::ParseLsn(db_->scalar("SELECT pg_current_wal_insert_lsn()")), applied)
      << "the synchronous standby lacks WAL the consumer applied";
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM app.t_int WHERE id >= 900000"), "100");
  for (int i = 0; i < 10; ++i) RandomTransaction(*db_, kSchema, rng, options);
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  for (;;) {
    ReadUntil(c, Sentinel());
    const std::string pending = db_->scalar(
        "SELECT count(*) FROM dblog.requests WHERE consumer = 'sink' AND state <> 'done'");
    if (pending == "0" && replay_.chunks_seen() > 0) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "repairs not done\n" << dblogd_->log();
  }
  ReadUntil(c, Sentinel());
  EXPECT_EQ(bootstraps_, 1) << "bootstrapped again: the consumer was emptied";
  EXPECT_GE(CountLogEvents(dblogd_->log(), "slot_reconciled"), 1);
  ExpectConverged();
}

// docs/operations.md, "Failover": repairs queued before the failover keep their progress (the
// request tables are the source's, replicated to the standby) and run on. A whole-table repair
// of a 60,000-row table in 500-row windows is in flight (some of its chunks applied, the
// request not done) when the primary dies and the standby, streaming all along, is promoted:
// on the new primary the same request runs to `done` (not failed, not dropped), next to the
// reconcile's own repairs, and the replay, which had lost every 100th row of the table before
// the repair, equals the new primary without a second bootstrap.
TEST_F(FailoverTest, ARepairInFlightAtTheFailoverRunsOnOnTheNewPrimary) {
  std::mt19937_64 rng(2405);
  WorkloadOptions options;
  options.large_rows = 300;
  for (int i = 0; i < 20; ++i) RandomTransaction(*db_, kSchema, rng, options);
  db_->exec(std::string("INSERT INTO ") + kSchema +
            ".t_int SELECT g, g, 'bulk', NULL, 1 FROM generate_series(100000, 159999) g");
  ASSERT_NO_FATAL_FAILURE(MakeStandby());
  StartDblogd("reconcile");
  std::optional<client::Client> c;
  ReadUntil(c, 0);
  ReadUntil(c, Sentinel());
  const auto oid = static_cast<std::uint32_t>(
      std::stoul(db_->scalar(std::string("SELECT '") + kSchema + ".t_int'::regclass::oid")));
  int lost = 0, i = 0;
  for (const auto& [key, row] : replay_.Table(oid))
    if (i++ % 100 == 0) replay_.Erase(oid, key), ++lost;
  ASSERT_GT(lost, 500);
  const std::string id =
      db_->scalar(std::string("SELECT dblog.repair('") + kSchema + ".t_int', 'sink')");
  // read until some of its chunks were applied, the request still running
  const auto started = std::chrono::steady_clock::now() + 120s;
  while (replay_.chunks_seen() < 5) {
    ASSERT_LT(std::chrono::steady_clock::now(), started) << dblogd_->log();
    ReadUntil(c, Sentinel());
  }
  ASSERT_NE(db_->scalar("SELECT state FROM dblog.requests WHERE id = " + id), "done")
      << "the repair ended before the failover: nothing in flight to test";
  ASSERT_NO_FATAL_FAILURE(PromoteTheStandby(false));
  for (int k = 0; k < 10; ++k) RandomTransaction(*db_, kSchema, rng, options);
  const auto deadline = std::chrono::steady_clock::now() + 240s;
  for (;;) {
    ReadUntil(c, Sentinel());
    const std::string state = db_->scalar("SELECT state FROM dblog.requests WHERE id = " + id);
    ASSERT_TRUE(state == "queued" || state == "running" || state == "done")
        << "request " << id << " is " << state << " on the new primary\n" << dblogd_->log();
    const std::string pending = db_->scalar(
        "SELECT count(*) FROM dblog.requests WHERE consumer = 'sink' AND state <> 'done'");
    if (state == "done" && pending == "0") break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "repairs not done\n" << dblogd_->log();
  }
  ReadUntil(c, Sentinel());
  EXPECT_EQ(bootstraps_, 1) << "bootstrapped again: the consumer was emptied";
  ExpectConverged();
  EXPECT_GE(CountLogEvents(dblogd_->log(), "slot_reconciled"), 1);
}

// docs/operations.md, "Failover": a bootstrap that had not finished is redone on the new
// primary (there is nothing to reconcile from), flagged restarted, also with
// --on-slot-lost=reconcile. The consumer reads 1,000 rows of a 200,000-row bootstrap and stops
// reading (dblogd's copy waits on it), the primary dies, the standby is promoted; the consumer
// reads on: its session ends, the next one bootstraps again from the new primary, and the
// replay equals it.
TEST_F(FailoverTest, ABootstrapInFlightAtTheFailoverIsRedoneOnTheNewPrimary) {
  std::mt19937_64 rng(2406);
  WorkloadOptions options;
  options.large_rows = 300;
  for (int i = 0; i < 10; ++i) RandomTransaction(*db_, kSchema, rng, options);
  db_->exec(std::string("INSERT INTO ") + kSchema +
            ".t_int SELECT g, g, repeat('b', 200), NULL, 1 FROM generate_series(100000, 299999) g");
  ASSERT_NO_FATAL_FAILURE(MakeStandby());
  StartDblogd("reconcile");
  std::optional<client::Client> c;
  c.emplace(Connect());
  ASSERT_TRUE(c->welcome().slot_created());
  int rows = 0;
  client::Item item;
  while (rows < 1000) {
    ASSERT_TRUE(c->Next(item)) << dblogd_->log();
    auto* ev = std::get_if<dblog::v1::StreamEvent>(&item);
    if (!ev) continue;
    replay_.Apply(*ev);
    if (ev->has_bootstrap_begin()) ++bootstraps_;
    ASSERT_FALSE(ev->has_bootstrap_end()) << "the bootstrap ended before the failover";
    rows += ev->has_change();
  }
  ASSERT_NO_FATAL_FAILURE(PromoteTheStandby(false));
  for (int k = 0; k < 10; ++k) RandomTransaction(*db_, kSchema, rng, options);
  ReadUntil(c, 0);  // to the BootstrapEnd of the bootstrap on the new primary
  ReadUntil(c, Sentinel());
  EXPECT_EQ(bootstraps_, 2);
  EXPECT_TRUE(replay_.restarted_seen());
  ExpectConverged();
  EXPECT_EQ(db_->scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = 'sink'"), "done");
}

// The default, --on-slot-lost=bootstrap: the same failover bootstraps again (restarted), as
// before, and converges.
TEST_F(FailoverTest, ByDefaultASlotLostByAFailoverBootstrapsAgain) {
  std::mt19937_64 rng(2403);
  WorkloadOptions options;
  options.large_rows = 300;
  for (int i = 0; i < 20; ++i) RandomTransaction(*db_, kSchema, rng, options);
  ASSERT_NO_FATAL_FAILURE(MakeStandby());
  StartDblogd("bootstrap");
  std::optional<client::Client> c;
  ReadUntil(c, 0);
  ReadUntil(c, Sentinel());
  // dblogd goes down with the primary: what it knew of the timeline in memory is gone
  dblogd_->Signal(SIGKILL);
  dblogd_->Wait();
  ASSERT_NO_FATAL_FAILURE(PromoteTheStandby(false));
  for (int i = 0; i < 10; ++i) RandomTransaction(*db_, kSchema, rng, options);
  dblogd_->Start();
  const auto welcomes = ReadUntil(c, Sentinel());
  ASSERT_FALSE(welcomes.empty());
  EXPECT_FALSE(welcomes.back().has_reconcile());
  EXPECT_EQ(bootstraps_, 2);
  EXPECT_TRUE(replay_.restarted_seen());
  ExpectConverged();
  // the consumer's row, which the standby replicated, still had timeline 1: the failover is
  // named although this dblogd never streamed from the old primary (once the stream starts,
  // after the bootstrap's copy)
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (CountLogEvents(dblogd_->log(), "source_promoted") == 0 &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  EXPECT_EQ(CountLogEvents(dblogd_->log(), "source_promoted"), 1) << dblogd_->log();
  EXPECT_EQ(db_->scalar("SELECT coalesce(failover, 'none') FROM dblog.consumer_status"
                        " WHERE name = 'sink'"),
            "timeline 1 to 2: bootstrapped again from a new slot");
}

}  // namespace
}  // namespace dblog::test
