// tests/cpp/pgoutput/pgoutput_mode_test.cc: dblogd --source-plugin pgoutput end to end, on
// PostgreSQL 15, 16, 17 and 18 (each its own cluster, tests/pg-cluster.sh), with the real
// dblogd, the real client library over TCP and a role as managed services give one: LOGIN and
// REPLICATION, no superuser, no dblog extension in the database, dblog absent from
// output_plugin_libraries where the server has that setting (Debian's 15).
//
// The oracle: replaying the stream must give the source's tables, read through the copy path of
// this mode (each column's output text under pgoutput::kOutputSettings, through the one
// converter, pgoutput::RowFromText), key by key and value by value.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "client/client.h"
#include "common/lsn.h"
#include "dblogd_fixture.h"
#include "oracle_workload.h"
#include "pg_test_util.h"
#include "pgoutput/translate.h"
#include "pgoutput/values.h"
#include "server_util.h"

namespace {

namespace po = dblog::pgoutput;
using dblog::test::Cluster;
using dblog::test::DblogdProcess;
using dblog::test::PgConn;
using dblog::test::Replay;
using namespace std::chrono_literals;

constexpr const char* kSchema = "app";
constexpr const char* kConsumer = "sink";
constexpr const char* kRole = "cdc";

// The conninfo of `cluster` as role `role`.
std::string As(const Cluster& cluster, const std::string& role) {
  std::string c = cluster.conninfo();
  const auto at = c.find("user=");
  if (at != std::string::npos) c.erase(at, c.find(' ', at) - at);
  return c + " user=" + role;
}

// The table as the copy path of pgoutput mode reads it: key bytes -> row bytes.
std::map<std::string, std::string> CopyPathTable(PgConn& pinned, const std::string& table) {
  const std::string oid = pinned.scalar("SELECT '" + table + "'::regclass::oid");
  std::vector<std::vector<std::optional<std::string>>> catalog;
  for (auto& r : pinned.exec(std::string(po::kRelationQuery)
                                 .replace(std::string(po::kRelationQuery).find("$1"), 2, oid)))
    catalog.push_back(r);
  const po::CatalogRelation rel =
      po::ParseRelationRows(static_cast<std::uint32_t>(std::stoul(oid)), catalog);
  std::vector<po::ValueKind> kinds;
  std::string columns;
  for (const auto& c : rel.columns) {
    kinds.push_back(po::KindOfBaseType(c.base_type_oid));
    columns += (columns.empty() ? "" : ", ") + std::string("\"") + c.name + "\"";
  }
  std::map<std::string, std::string> out;
  for (const auto& cells : pinned.exec("SELECT " + columns + " FROM " + table)) {
    dblog::v1::Row row, key;
    po::RowFromText(kinds, cells, &row);
    for (std::uint32_t k : rel.key_columns) *key.add_values() = row.values(static_cast<int>(k));
    out[key.SerializeAsString()] = row.SerializeAsString();
  }
  return out;
}

class PgoutputModeTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(GetParam());
    if (cluster_->status() == 3)
      FAIL() << "PostgreSQL " << GetParam() << " binaries absent: run scripts/fetch-postgres.sh "
             << GetParam();
    ASSERT_EQ(cluster_->status(), 0) << "tests/pg-cluster.sh start " << GetParam();
    PgConn admin(cluster_->conninfo());
    // The role a managed service gives: no superuser, REPLICATION, CREATE on the database (for
    // the publication), the owner of the application's tables (as the service's main user is).
    admin.exec(std::string("CREATE ROLE ") + kRole + " LOGIN REPLICATION NOSUPERUSER");
    admin.exec(std::string("GRANT CREATE ON DATABASE postgres TO ") + kRole);
    admin.exec(std::string("CREATE SCHEMA ") + kSchema + " AUTHORIZATION " + kRole);
    EXPECT_EQ(admin.scalar("SELECT count(*) FROM pg_extension WHERE extname = 'dblog'"), "0");
    db_ = std::make_unique<PgConn>(As(*cluster_, kRole));
    pinned_ = std::make_unique<PgConn>(As(*cluster_, kRole) + " options='" +
                                       po::OutputSettingsOptions() + "'");
  }

  DblogdProcess& StartDblogd(const std::string& scope = std::string(kSchema) + ".*",
                             const std::vector<std::string>& more = {"--copy-workers=2"}) {
    std::vector<std::string> args{"--source=" + As(*cluster_, kRole), "--source-plugin=pgoutput",
                                  std::string("--consumer=") + kConsumer + "=" + scope,
                                  "--reconnect-max=1"};
    args.insert(args.end(), more.begin(), more.end());
    dblogd_ = std::make_unique<DblogdProcess>(args);
    dblogd_->Start();
    return *dblogd_;
  }

  dblog::client::Client Connect(std::optional<dblog::v1::Position> resume_after = {},
                                const std::string& consumer = kConsumer) {
    dblog::client::ConnectOptions o;
    o.port = dblogd_->port();
    o.consumer = consumer;
    o.resume_after = resume_after;
    o.client_name = "pgoutput-mode-test";
    o.io_timeout = 30000ms;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      try {
        return dblog::client::Client::Connect(o);
      } catch (const dblog::client::TransportError&) {  // dblogd not listening yet
        if (std::chrono::steady_clock::now() > deadline) throw;
        std::this_thread::sleep_for(200ms);
      }
    }
  }

  // Connects as `consumer` and reads until dblogd ends the session: its Error.
  std::optional<dblog::client::ServerError> Refusal(const std::string& consumer = kConsumer) {
    try {
      auto c = Connect({}, consumer);
      dblog::client::Item item;
      while (c.Next(item)) {
      }
    } catch (const dblog::client::ServerError& e) {
      return e;
    }
    return std::nullopt;
  }

  // Drops the consumer's slot as an operator does after a SOURCE_ERROR: the walsender that
  // served it may take a moment to end after the error reached the consumer.
  void DropSlot() {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      if (db_->scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'dblog_sink' "
                      "AND active") == "0")
        break;
      if (std::chrono::steady_clock::now() > deadline) FAIL() << "slot dblog_sink stays active";
      std::this_thread::sleep_for(100ms);
    }
    db_->exec("SELECT pg_drop_replication_slot('dblog_sink')");
  }

  // A streaming standby of the cluster (physical slot "standby1"), made now; db_ and pinned_
  // are closed meanwhile (the caller opens what it needs again). Null (a failure recorded) when
  // tests/pg-cluster.sh could not make it.
  std::unique_ptr<Cluster> MakeStandby() {
    db_.reset();
    pinned_.reset();
    auto [made, status] =
        dblog::test::Run(std::string(DBLOG_SOURCE_DIR) + "/tests/pg-cluster.sh standby " +
                         cluster_->dir() + " standby1");
    if (status != 0) {
      ADD_FAILURE() << made;
      return nullptr;
    }
    const auto nl = made.find('\n');
    return std::make_unique<Cluster>(made.substr(0, nl),
                                     made.substr(nl + 1, made.find('\n', nl + 1) - nl - 1));
  }

  // The primary and `standby` in one conninfo as role kRole, target_session_attrs=read-write:
  // after a failover, connections land on whichever is primary.
  std::string BothHosts(const Cluster& standby) const {
    const auto host_port = [](const std::string& conninfo, const char* key) {
      const auto at = conninfo.find(std::string(key) + "=") + std::strlen(key) + 1;
      return conninfo.substr(at, conninfo.find(' ', at) - at);
    };
    return "host=" + host_port(cluster_->conninfo(), "host") + "," +
           host_port(standby.conninfo(), "host") + " port=" +
           host_port(cluster_->conninfo(), "port") + "," + host_port(standby.conninfo(), "port") +
           " user=" + kRole + " dbname=postgres target_session_attrs=read-write";
  }

  // dblogd started, its bootstrap and the stream up to now read into `replay`, then stopped.
  void StreamedThenStopped(Replay& replay, const std::vector<std::string>& flags = {}) {
    StartDblogd(std::string(kSchema) + ".*", flags);
    {
      auto c = Connect();
      ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
      ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    }
    dblogd_->Stop();
  }

  // app.a (id int PRIMARY KEY, v text) with `rows` rows 'v1'.., and app.sentinel.
  void CreateTableAAndSentinel(int rows) {
    const std::string s = kSchema;
    db_->exec("CREATE TABLE " + s + ".a (id int PRIMARY KEY, v text)");
    db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
    db_->exec("INSERT INTO " + s + ".a SELECT g, 'v' || g FROM generate_series(1, " +
              std::to_string(rows) + ") g");
  }

  // A committed row in scope; returns the WAL insert position after it (its commit's LSN is
  // at or past it).
  std::uint64_t Sentinel() {
    db_->exec("BEGIN");
    db_->exec(std::string("INSERT INTO ") + kSchema + ".sentinel VALUES (" +
              std::to_string(++sentinel_) + ")");
    const std::uint64_t lsn =
        dblog::common::ParseLsn(db_->scalar("SELECT pg_current_wal_insert_lsn()"));
    db_->exec("COMMIT");
    return lsn;
  }

  // Reads into `replay` until a Commit at or past `lsn` (lsn 0: the BootstrapEnd), acknowledging
  // every Commit and the BootstrapEnd; at most `events` events (then returns).
  void ReadUntil(dblog::client::Client& c, Replay& replay, std::uint64_t lsn,
                 std::uint64_t events = UINT64_MAX) {
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    dblog::client::Item item;
    while (std::chrono::steady_clock::now() < deadline && events-- > 0) {
      if (!c.Next(item)) FAIL() << "dblogd closed the stream\n" << dblogd_->log();
      if (auto* ev = std::get_if<dblog::v1::StreamEvent>(&item)) {
        ASSERT_NO_THROW(replay.Apply(*ev)) << dblogd_->log();
        if (ev->has_bootstrap_begin()) bootstrap_begins_.push_back(ev->bootstrap_begin());
        if (ev->has_relation()) relations_.push_back(ev->relation());
        if (ev->has_relation() || ev->has_change()) described_.push_back(*ev);
        if (ev->has_commit() || ev->has_bootstrap_end()) {
          c.Ack(*dblog::client::Client::PositionOf(*ev));
          if (ev->has_commit() && lsn != 0 && ev->commit().commit_lsn() >= lsn) return;
          if (ev->has_bootstrap_end() && lsn == 0) return;
        }
      }
    }
    if (events == UINT64_MAX) return;
    FAIL() << "the stream did not reach " << dblog::common::FormatLsn(lsn) << "\n"
           << dblogd_->log();
  }

  // pad: rows the replay holds from before a column was added get it as NULL, as a consumer
  // that follows the Relation does (ADD COLUMN without a default rewrites no row).
  void ExpectConverged(const Replay& replay, const std::vector<std::string>& tables,
                       bool pad = false) {
    for (const auto& t : tables) {
      const std::string q = std::string(kSchema) + "." + t;
      const auto source = CopyPathTable(*pinned_, q);
      const auto replayed = replay.Table(
          static_cast<std::uint32_t>(std::stoul(db_->scalar("SELECT '" + q + "'::regclass::oid"))));
      EXPECT_EQ(source.size(), replayed.size()) << q;
      if (t != "sentinel") {
        EXPECT_GT(source.size(), 0u) << q << ": the workload left it empty";
      }
      int differing = 0;
      for (const auto& [key, row] : source) {
        auto it = replayed.find(key);
        if (it == replayed.end()) {
          ++differing;
          continue;
        }
        std::string got = it->second;
        if (pad) {
          dblog::v1::Row r, want;
          r.ParseFromString(got);
          want.ParseFromString(row);
          while (r.values_size() < want.values_size()) r.add_values()->set_null_value(true);
          got = r.SerializeAsString();
        }
        differing += got != row;
      }
      EXPECT_EQ(differing, 0) << q << ": rows missing from the replay or different";
    }
  }

  // The sink loses every n-th row of app.<table> (the replay damaged on purpose).
  void EraseEvery(Replay& replay, const std::string& table, int n) {
    const auto oid = static_cast<std::uint32_t>(std::stoul(
        db_->scalar("SELECT '" + std::string(kSchema) + "." + table + "'::regclass::oid")));
    int i = 0;
    for (const auto& [key, row] : replay.Table(oid))
      if (i++ % n == 0) replay.Erase(oid, key);
  }

  // A whole-table repair of app.<table>, read until its first chunk was done while it still
  // runs: its id in *id.
  void RepairUnderWay(dblog::client::Client& c, Replay& replay, const std::string& table,
                      std::string* id) {
    *id = db_->scalar("SELECT dblog.repair('" + std::string(kSchema) + "." + table + "')");
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (db_->scalar("SELECT chunks_done FROM dblog.requests WHERE id = " + *id) == "0") {
      ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << dblogd_->log();
    }
    ASSERT_EQ(db_->scalar("SELECT state FROM dblog.requests WHERE id = " + *id), "running");
  }

  // Reads (acknowledging) until request `id` is in `state`, at most `timeout`.
  void ReadUntilRequest(dblog::client::Client& c, Replay& replay, const std::string& id,
                        const std::string& state, std::chrono::seconds timeout = 60s) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (db_->scalar("SELECT state FROM dblog.requests WHERE id = " + id) != state) {
      ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
      ASSERT_LT(std::chrono::steady_clock::now(), until)
          << "request " << id << " never " << state << ": "
          << db_->scalar("SELECT state || ' ' || coalesce(error, '') FROM dblog.requests "
                         "WHERE id = " + id)
          << "\n" << dblogd_->log();
      std::this_thread::sleep_for(50ms);
    }
  }

  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<PgConn> db_, pinned_;
  std::unique_ptr<DblogdProcess> dblogd_;
  int sentinel_ = 0;
  std::vector<dblog::v1::BootstrapBegin> bootstrap_begins_;
  std::vector<dblog::v1::Relation> relations_;  // every Relation event ReadUntil read
  std::vector<dblog::v1::StreamEvent> described_;  // every Relation and Change event, in order
};

// The randomized workload of the oracle (inserts, updates, deletes, key changes, TOASTed values
// an update leaves alone, truncates, rollbacks, a 2,000-row transaction now and then): rows
// written before the consumer's first connection come through the bootstrap (COPY's text
// through the converter, spliced at the slot's exported snapshot) while the workload goes on,
// then the stream, while dblogd is SIGKILLed and restarted and the server itself restarts: the
// replay equals the source, every table; Welcome says pgoutput; dblogd made the slot, the
// publication (the scope's tables and dblog.watermarks), dblog.consumers and the repair API of
// sidecar/consumer/repair_api.sql, nothing else.
TEST_P(PgoutputModeTest, BootstrapsAndStreamsTheWorkloadThroughKillsAndAServerRestart) {
  const std::string s = kSchema;
  dblog::test::CreateWorkloadTables(*db_, s);
  db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  db_->exec("ALTER TABLE " + s + ".t_uuid REPLICA IDENTITY FULL");
  std::mt19937_64 rng(2300 + static_cast<unsigned>(GetParam()));
  dblog::test::WorkloadOptions options;
  options.large_rows = 2000;
  for (int i = 0; i < 40; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
  db_->exec("INSERT INTO " + s +
            ".t_int SELECT g, g, 'bulk', NULL, g / 7.0"
            " FROM generate_series(100000, 150000) g");
  StartDblogd();
  Replay replay;
  {
    auto c = Connect();
    EXPECT_EQ(c.welcome().source_plugin(), "pgoutput");
    EXPECT_TRUE(c.welcome().slot_created());
    // the workload goes on while the bootstrap copies (its own session)
    std::thread writer([&] {
      PgConn w(As(*cluster_, kRole));
      std::mt19937_64 wrng(77);
      for (int i = 0; i < 20; ++i) dblog::test::RandomTransaction(w, s, wrng, options);
    });
    dblog::test::OnScopeExit join([&] {
      if (writer.joinable()) writer.join();
    });
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
    writer.join();
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    ExpectConverged(replay, {"t_int", "t_comp", "t_uuid"});
    for (int i = 0; i < 30; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
    dblogd_->Signal(SIGKILL);
    dblogd_->Wait();
  }
  ASSERT_EQ(bootstrap_begins_.size(), 1u);
  EXPECT_FALSE(bootstrap_begins_[0].restarted());
  EXPECT_EQ(db_->scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = 'sink'"), "done");
  for (int i = 0; i < 20; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
  StartDblogd();
  {
    auto c = Connect(replay.last_position());
    EXPECT_FALSE(c.welcome().slot_created());
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    ExpectConverged(replay, {"t_int", "t_comp", "t_uuid"});
    // the server restarts under dblogd: it reconnects and streams on from the slot
    ASSERT_TRUE(cluster_->Restart());
    db_ = std::make_unique<PgConn>(As(*cluster_, kRole));
    pinned_ = std::make_unique<PgConn>(As(*cluster_, kRole) + " options='" +
                                       po::OutputSettingsOptions() + "'");
    for (int i = 0; i < 30; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    ExpectConverged(replay, {"t_int", "t_comp", "t_uuid", "sentinel"});
  }
  EXPECT_EQ(bootstrap_begins_.size(), 1u);
  EXPECT_GE(dblog::test::CountLogEvents(dblogd_->log(), "source_reconnected"), 1);
  EXPECT_GT(replay.events(), 50000u);
  // What dblogd made in the database: the slot, the publication, dblog.consumers.
  EXPECT_EQ(db_->scalar("SELECT string_agg(pubname || ':' || (SELECT string_agg(tablename, ',' "
                        "ORDER BY tablename) FROM pg_publication_tables t WHERE t.pubname = "
                        "p.pubname), ' ') FROM pg_publication p"),
            "dblog_sink:sentinel,t_comp,t_int,t_uuid,watermarks");
  EXPECT_EQ(db_->scalar("SELECT string_agg(slot_name || ':' || plugin, ' ') FROM "
                        "pg_replication_slots"),
            "dblog_sink:pgoutput");
  EXPECT_EQ(
      db_->scalar("SELECT string_agg(c.relname || ':' || c.relkind::text, ' ' ORDER BY relname) "
                  "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                  "WHERE n.nspname = 'dblog'"),
      "consumers:r consumers_pkey:i ddl_taken:r ddl_taken_pkey:i request_progress:r request_progress_pkey:i request_queue:r "
      "request_queue_id_seq:S request_queue_pkey:i requests:v watermarks:r watermarks_pkey:i");
}

// Repairs without the extension (docs/pgoutput.md, "Repairs"): the repair API as plain SQL that
// dblogd made, windows marked by its role's rows of dblog.watermarks, the chunks read through
// this mode's copy path. A replay damaged every way a sink can be (rows lost, changed, rows that
// the source does not have) is mended by dblog.repair (t_int), repair_range (t_comp, a two-column
// text and bigint key) and repair_keys (t_uuid, with keys the table does not have, which become
// deletes) while the oracle's workload writes the same tables in another session and dblogd is
// SIGKILLed once in the middle: the replay equals the source, every table; dblog.requests says
// done, with the rows emitted; a role that may not ask is refused.
TEST_P(PgoutputModeTest, RepairsMendADamagedReplayWhileTheWorkloadRuns) {
  const std::string s = kSchema;
  dblog::test::CreateWorkloadTables(*db_, s);
  db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  std::mt19937_64 rng(2400 + static_cast<unsigned>(GetParam()));
  dblog::test::WorkloadOptions options;
  options.large_rows = 300;
  for (int i = 0; i < 30; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
  db_->exec("INSERT INTO " + s +
            ".t_int SELECT g, g, 'bulk', NULL, g / 7.0 FROM generate_series(100000, 104000) g");
  const std::vector<std::string> dblogd_args{"--copy-workers=2", "--chunk-size=300"};
  StartDblogd(s + ".*", dblogd_args);
  Replay replay;
  auto c = std::make_unique<dblog::client::Client>(Connect());
  ASSERT_NO_FATAL_FAILURE(ReadUntil(*c, replay, 0));
  ASSERT_NO_FATAL_FAILURE(ReadUntil(*c, replay, Sentinel()));
  ExpectConverged(replay, {"t_int", "t_comp", "t_uuid"});
  EXPECT_EQ(db_->scalar("SELECT string_agg(tablename, ',' ORDER BY tablename) FROM "
                        "pg_publication_tables WHERE pubname = 'dblog_sink' AND schemaname = "
                        "'dblog'"),
            "watermarks");

  // the sink loses, changes and gains rows
  std::size_t damaged = 0;
  for (const std::string t : {"t_int", "t_comp", "t_uuid"}) {
    const std::uint32_t oid = static_cast<std::uint32_t>(
        std::stoul(db_->scalar("SELECT '" + s + "." + t + "'::regclass::oid")));
    int i = 0;
    for (const auto& [key, row] : replay.Table(oid)) {
      if (i % 7 == 0) replay.Erase(oid, key), ++damaged;
      else if (i % 11 == 0) replay.Corrupt(oid, key), ++damaged;
      else if (t == "t_int" && i % 13 == 0) replay.Copy(oid, key, 900000 + i), ++damaged;
      ++i;
    }
  }
  ASSERT_GT(damaged, 500u);
  // a key list with keys the table does not have: the sink holds rows for them
  const std::uint32_t uuid_oid = static_cast<std::uint32_t>(
      std::stoul(db_->scalar("SELECT '" + s + ".t_uuid'::regclass::oid")));
  std::string keys = "[";
  for (const auto& id : db_->exec("SELECT id::text FROM " + s + ".t_uuid ORDER BY id"))
    keys += "{\"id\": \"" + *id[0] + "\"},";
  for (const char* ghost : {"00000000-0000-0000-0000-000000000000",
                            "ffffffff-ffff-ffff-ffff-ffffffffffff"}) {
    keys += std::string("{\"id\": \"") + ghost + "\"},";
    dblog::v1::Row key, row;
    key.add_values()->set_uuid_value(std::string(16, ghost[0] == '0' ? '\0' : '\xff'));
    *row.add_values() = key.values(0);
    for (int v = 0; v < 3; ++v) row.add_values()->set_null_value(true);
    replay.Put(uuid_oid, key, row);
  }
  keys.back() = ']';

  PgConn other(cluster_->conninfo());
  other.exec("CREATE ROLE nobody LOGIN");
  PgConn nobody(As(*cluster_, "nobody"));
  EXPECT_THROW(nobody.exec("SELECT dblog.repair('" + s + ".t_int')"), std::exception);

  const std::string ids = db_->scalar(
      "SELECT concat_ws(',', dblog.repair('" + s + ".t_int'),"
      " dblog.repair_range('" + s + ".t_comp', '{\"a\": \"k\", \"b\": 0}',"
      " '{\"a\": \"zzzz\", \"b\": 0}'),"
      " dblog.repair_keys('" + s + ".t_uuid', '" + keys + "'))");
  std::thread writer([&] {
    PgConn w(As(*cluster_, kRole));
    std::mt19937_64 wrng(91);
    for (int i = 0; i < 30; ++i) dblog::test::RandomTransaction(w, s, wrng, options);
  });
  dblog::test::OnScopeExit join([&] {
    if (writer.joinable()) writer.join();
  });
  bool killed = false;
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  for (;;) {
    ASSERT_NO_FATAL_FAILURE(ReadUntil(*c, replay, Sentinel()));
    if (!killed && replay.chunks_seen() >= 3) {
      // a crash in the middle: the next connection resumes the requests where their
      // acknowledged chunks ended
      killed = true;
      c.reset();
      dblogd_->Signal(SIGKILL);
      dblogd_->Wait();
      StartDblogd(s + ".*", dblogd_args);
      c = std::make_unique<dblog::client::Client>(Connect(replay.last_position()));
      continue;
    }
    if (db_->scalar("SELECT count(*) FROM dblog.requests WHERE state <> 'done' AND id IN (" +
                    ids + ")") == "0")
      break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << db_->scalar("SELECT string_agg(id || ':' || state || ':' || coalesce(error, ''), ' ') "
                       "FROM dblog.requests")
        << dblogd_->log();
  }
  writer.join();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(*c, replay, Sentinel()));
  ExpectConverged(replay, {"t_int", "t_comp", "t_uuid", "sentinel"});
  EXPECT_TRUE(killed);
  EXPECT_GE(replay.chunks_seen(), 5u);
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM dblog.requests WHERE rows_emitted > 0"), "3");
  // (markers of the killed dblogd's last window may come again from the slot: ignored, logged)
}

// dblog.watermarks taken out of the publication (by its owner, dblogd's role here, or a
// superuser) while a repair runs: the windows' markers written since are not in the stream, and
// a window waiting for them waited for ever (before: the repair below never ended). dblogd puts
// it back at the next heartbeat and reads the windows in flight again under new markers; the
// repair ends and the damaged replay converges.
TEST_P(PgoutputModeTest, WatermarksTakenOutOfThePublicationArePutBackAndTheRepairEnds) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(40000);
  StartDblogd(s + ".*", {"--chunk-size=200", "--max-chunk-size=200", "--heartbeat-interval=1"});
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  EraseEvery(replay, "a", 9);
  std::string id;
  ASSERT_NO_FATAL_FAILURE(RepairUnderWay(c, replay, "a", &id));
  db_->exec("ALTER PUBLICATION dblog_sink DROP TABLE dblog.watermarks");
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "done"));
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a", "sentinel"});
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM pg_publication_tables WHERE pubname = 'dblog_sink' "
                        "AND schemaname = 'dblog' AND tablename = 'watermarks'"),
            "1");
  EXPECT_GE(dblog::test::CountLogEvents(dblogd_->log(), "publication_watermarks_restored"), 1);
  EXPECT_GE(dblog::test::CountLogEvents(dblogd_->log(), "repair_windows_abandoned"), 1);

  // A publication dblogd's role does not own: taken out by its owner, repairs fail naming the
  // statement that puts it back; once put back, they run again.
  PgConn admin(cluster_->conninfo());
  admin.exec("ALTER PUBLICATION dblog_sink OWNER TO postgres");
  admin.exec("ALTER PUBLICATION dblog_sink DROP TABLE dblog.watermarks");
  std::this_thread::sleep_for(2500ms);  // a heartbeat or two
  const std::string refused = db_->scalar("SELECT dblog.repair('" + s + ".a')");
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, refused, "failed"));
  const std::string error = db_->scalar("SELECT error FROM dblog.requests WHERE id = " + refused);
  EXPECT_NE(error.find("ALTER PUBLICATION \"dblog_sink\" ADD TABLE dblog.watermarks"),
            std::string::npos)
      << error;
  admin.exec("ALTER PUBLICATION dblog_sink ADD TABLE dblog.watermarks");
  std::this_thread::sleep_for(2500ms);
  ASSERT_NO_FATAL_FAILURE(
      ReadUntilRequest(c, replay, db_->scalar("SELECT dblog.repair('" + s + ".a')"), "done"));
  EXPECT_GE(dblog::test::CountLogEvents(dblogd_->log(), "repairs_available"), 1);
}

// The re-add of dblog.watermarks waits for a lock another session holds (5 s lock_timeout, then
// again at the next heartbeat): the requests meanwhile stay queued, never failed (before: the
// first timeout failed every queued request for good), and run once it is back.
TEST_P(PgoutputModeTest, AReAddOfTheWatermarksThatWaitsForALockLeavesTheRequestsQueued) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(2000);
  StartDblogd(s + ".*", {"--chunk-size=200", "--heartbeat-interval=1"});
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  EraseEvery(replay, "a", 9);
  db_->exec("ALTER PUBLICATION dblog_sink DROP TABLE dblog.watermarks");
  PgConn holder(cluster_->conninfo());
  holder.exec("BEGIN");
  holder.exec("LOCK TABLE dblog.watermarks IN ACCESS EXCLUSIVE MODE");
  const std::string id = db_->scalar("SELECT dblog.repair('" + s + ".a')");
  std::this_thread::sleep_for(8s);  // a heartbeat, the 5 s lock_timeout, the next heartbeat
  EXPECT_NE(db_->scalar("SELECT state FROM dblog.requests WHERE id = " + id), "failed")
      << dblogd_->log();
  EXPECT_GE(dblog::test::CountLogEvents(dblogd_->log(), "publication_watermarks_restore_failed"),
            1);
  holder.exec("COMMIT");
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "done"));
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a", "sentinel"});
  EXPECT_GE(dblog::test::CountLogEvents(dblogd_->log(), "publication_watermarks_restored"), 1);
}

// dblog.watermarks out of the publication for a moment, between two heartbeats (here never
// noticed: one a minute): the windows whose markers were written meanwhile are not in the
// stream. A high watermark without its low one, or the stream past the point where the high
// watermark was written, abandons them and they are read again (before: the repair waited for
// them for ever).
TEST_P(PgoutputModeTest, WatermarksOutOfThePublicationForAMomentLoseNoWindow) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(40000);
  StartDblogd(s + ".*", {"--chunk-size=200", "--max-chunk-size=200", "--heartbeat-interval=60"});
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  EraseEvery(replay, "a", 9);
  std::string id;
  ASSERT_NO_FATAL_FAILURE(RepairUnderWay(c, replay, "a", &id));
  db_->exec("ALTER PUBLICATION dblog_sink DROP TABLE dblog.watermarks");
  std::this_thread::sleep_for(300ms);
  db_->exec("ALTER PUBLICATION dblog_sink ADD TABLE dblog.watermarks");
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "done"));
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a", "sentinel"});
  EXPECT_GE(dblog::test::CountLogEvents(dblogd_->log(), "repair_windows_abandoned"), 1);
  EXPECT_EQ(dblog::test::CountLogEvents(dblogd_->log(), "publication_watermarks_restored"), 0);
}

// A table renamed while the window waits for its lock (found by the pgoutput oracle: a DDL
// repair of its table renamed meanwhile failed for good, "relation ... does not exist"): the
// window read the name, the rename held the table, and the LOCK by the old name found nothing
// once it got through. The window is read again under the new name and the repair ends.
TEST_P(PgoutputModeTest, ATableRenamedWhileTheWindowWaitsForItsLockIsRepairedUnderItsNewName) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(1000);
  StartDblogd(s + ".*", {"--chunk-size=100", "--reconnect-min=0.2"});
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  EraseEvery(replay, "a", 7);
  PgConn renamer(As(*cluster_, kRole));
  renamer.exec("BEGIN");
  renamer.exec("ALTER TABLE " + s + ".a RENAME TO a2");  // holds the table until COMMIT
  const std::string id = db_->scalar("SELECT dblog.repair('" + s + ".a')");
  std::this_thread::sleep_for(2500ms);  // the window reads the name 'a' and waits in LOCK
  renamer.exec("COMMIT");
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "done"));
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a2", "sentinel"});
  EXPECT_NE(dblogd_->log().find("was renamed or dropped while the window waited for its lock"),
            std::string::npos)
      << "the window never met the rename in its lock wait: the race was not set up";
}

// The extension mode's cancel, rate-cap, forged-marker and source-restart repair tests
// (RepairTest.*, DblogdTest.ForgedMarkersAreCountedAndLoggedRateLimited), in this mode.

// dblog.cancel stops a running request; what was repaired before is right.
TEST_P(PgoutputModeTest, CancelStopsARequest) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(20000);
  StartDblogd(s + ".*", {"--chunk-size=10", "--max-chunk-size=10"});
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  const std::string id = db_->scalar("SELECT dblog.repair('" + s + ".a')");
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "running"));
  EXPECT_EQ(db_->scalar("SELECT dblog.cancel(" + id + ")"), "t");
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "cancelled"));
  EXPECT_LT(std::stoll(db_->scalar("SELECT rows_emitted FROM dblog.requests WHERE id = " + id)),
            20000);
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a"});
}

// --repair-rows-per-second spaces the windows: 1,500 rows at 1,000 rows/s take over 1.25 s.
TEST_P(PgoutputModeTest, RepairRateCapSpacesTheWindows) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(1500);
  StartDblogd(s + ".*", {"--chunk-size=250", "--repair-rows-per-second=1000"});
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  const auto started = std::chrono::steady_clock::now();
  const std::string id = db_->scalar("SELECT dblog.repair('" + s + ".a')");
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "done"));
  EXPECT_GE(std::chrono::steady_clock::now() - started, 1250ms);
  ExpectConverged(replay, {"a"});
}

// The sink lost every row of app.<table>.
void EraseAll(Replay& replay, std::uint32_t oid) {
  for (const auto& [key, row] : replay.Table(oid)) replay.Erase(oid, key);
}

// RepairTest's tests of the window path, in this mode (issue 23 item 5): a chunk resumes after
// its last key, carried as JSON text between windows: keys with quotes, backslashes, control
// characters and non-ASCII text come back as the same values, or chunks would skip or repeat.
TEST_P(PgoutputModeTest, TextKeysNeedingEscapesResumeAcrossChunks) {
  const std::string s = kSchema;
  db_->exec("CREATE TABLE " + s + ".tricky (k text, n int, v text, PRIMARY KEY (k, n))");
  db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  db_->exec("INSERT INTO " + s + ".tricky SELECT s || g, g, 'v' FROM generate_series(1, 40) g,"
            " unnest(ARRAY['a\"q', 'b\\\\s', E'c\\nl', E'd\\tt', 'e€ü', 'f''q', '{x,y}']) s");
  StartDblogd(s + ".*", {"--chunk-size=7", "--max-chunk-size=7"});
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  const auto oid = static_cast<std::uint32_t>(
      std::stoul(db_->scalar("SELECT '" + s + ".tricky'::regclass::oid")));
  ASSERT_EQ(replay.Table(oid).size(), 280u);
  EraseAll(replay, oid);
  const std::string id = db_->scalar("SELECT dblog.repair('" + s + ".tricky')");
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "done"));
  EXPECT_GE(replay.chunks_seen(), 40u) << "280 rows in chunks of 7";
  ExpectConverged(replay, {"tricky"});
}

// A request's chunks adapt to their bytes: narrow rows double them, window after window, up to
// --max-chunk-size; wide ones shrink them to what --chunk-memory-mb holds.
TEST_P(PgoutputModeTest, ChunksGrowToTheirByteTargetAndShrinkForWideRows) {
  const std::string s = kSchema;
  db_->exec("CREATE TABLE " + s + ".narrow (id int PRIMARY KEY, v text)");
  db_->exec("INSERT INTO " + s + ".narrow SELECT g, 'v' || g FROM generate_series(1, 1000) g");
  db_->exec("CREATE TABLE " + s + ".wide (id int PRIMARY KEY, body text)");
  db_->exec("INSERT INTO " + s + ".wide SELECT g, repeat(md5(g::text), 12500)"
            " FROM generate_series(1, 15) g");  // 400 KB a row
  db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  StartDblogd(s + ".*", {"--chunk-size=10", "--max-chunk-size=80", "--chunk-memory-mb=1"});
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  auto chunk_rows = [&](const std::string& table) {
    const auto oid = static_cast<std::uint32_t>(
        std::stoul(db_->scalar("SELECT '" + s + "." + table + "'::regclass::oid")));
    EraseAll(replay, oid);
    const std::string id = db_->scalar("SELECT dblog.repair('" + s + "." + table + "')");
    std::vector<std::uint64_t> rows;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (rows.empty() ||
           db_->scalar("SELECT state FROM dblog.requests WHERE id = " + id) != "done") {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "the repair of " << table << " did not finish\n" << dblogd_->log();
        break;
      }
      dblog::client::Item item;
      if (!c.Next(item)) break;
      auto* ev = std::get_if<dblog::v1::StreamEvent>(&item);
      if (!ev) continue;
      replay.Apply(*ev);
      if (ev->has_chunk_end() && std::to_string(ev->chunk_end().request_id()) == id)
        rows.push_back(ev->chunk_end().rows());
      if (ev->has_commit()) c.Ack(*dblog::client::Client::PositionOf(*ev));
    }
    return rows;
  };
  std::vector<std::uint64_t> growing = {10, 20, 40};  // then 80 eleven times, the last 50
  for (int i = 0; i < 11; ++i) growing.push_back(80);
  growing.push_back(50);
  EXPECT_EQ(chunk_rows("narrow"), growing);
  EXPECT_EQ(chunk_rows("wide"), (std::vector<std::uint64_t>{10, 2, 2, 1}));
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"narrow", "wide"});
}

// A repair reports its progress on the stream: Progress{phase "repair"} while it runs, then
// once with done when its last chunk was sent.
TEST_P(PgoutputModeTest, RepairProgressIsReportedOnTheStream) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(1000);
  db_->exec("ANALYZE " + s + ".a");
  StartDblogd(s + ".*", {"--chunk-size=100", "--max-chunk-size=100",
                         "--repair-rows-per-second=800"});  // about 1.25 s
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  db_->exec("SELECT dblog.repair('" + s + ".a')");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  std::vector<dblog::v1::TableProgress> reports;
  dblog::client::Item item;
  while (reports.empty() || !reports.back().done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no final repair progress";
    ASSERT_TRUE(c.Next(item));
    if (auto* ev = std::get_if<dblog::v1::StreamEvent>(&item)) {
      replay.Apply(*ev);
      if (ev->has_commit()) c.Ack(*dblog::client::Client::PositionOf(*ev));
    } else if (auto* p = std::get_if<dblog::v1::Progress>(&item); p && p->phase() == "repair") {
      ASSERT_EQ(p->tables_size(), 1);
      reports.push_back(p->tables(0));
    }
  }
  ASSERT_GE(reports.size(), 2u) << "a report while it runs, and the final one";
  EXPECT_FALSE(reports.front().done());
  const auto& last = reports.back();
  EXPECT_EQ(last.schema(), s);
  EXPECT_EQ(last.name(), "a");
  EXPECT_EQ(last.relation_oid(), std::stoul(db_->scalar("SELECT '" + s + ".a'::regclass::oid")));
  EXPECT_EQ(last.rows_copied(), 1000u);
  EXPECT_EQ(last.rows_estimated(), 1000u);
  for (std::size_t i = 1; i < reports.size(); ++i)
    EXPECT_LE(reports[i - 1].rows_copied(), reports[i].rows_copied()) << "never goes back";
}

// A deadlock that takes the window's transaction as its victim defers the window, which is read
// again: a REINDEX holds the index while the window, its table lock granted, waits for it; the
// same session then asks for the table. The victim is the waiter whose deadlock_timeout runs out
// first: the session (a superuser, to set it) waits with 60 s against the window's 1 s, so the
// window finds the cycle first (RepairTest.AWindowChosenAsADeadlockVictimIsReadAgain).
TEST_P(PgoutputModeTest, AWindowChosenAsADeadlockVictimIsReadAgain) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(200);
  StartDblogd();
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  EraseEvery(replay, "a", 7);
  PgConn ddl(cluster_->conninfo());
  ddl.exec("SET deadlock_timeout = '60s'");
  ddl.exec("BEGIN");
  ddl.exec("REINDEX INDEX " + s + ".a_pkey");  // the index until COMMIT; the table shared
  const std::string id = db_->scalar("SELECT dblog.repair('" + s + ".a')");
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (db_->scalar("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = '" + s +
                     ".a_pkey'::regclass") != "1") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no window waited for the index\n"
                                                          << dblogd_->log();
    std::this_thread::sleep_for(20ms);
  }
  std::string ddl_error;
  std::thread lock([&] {
    try {
      ddl.exec("LOCK TABLE " + s + ".a IN ACCESS EXCLUSIVE MODE");  // waits for the window
      ddl.exec("COMMIT");
    } catch (const std::exception& e) {
      ddl_error = e.what();
    }
  });
  dblog::test::OnScopeExit join([&] {
    if (lock.joinable()) lock.join();
  });
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "done"));
  lock.join();
  EXPECT_EQ(ddl_error, "") << "the DDL session, not the window, was the victim: nothing tested";
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a"});
  EXPECT_NE(dblogd_->log().find("deadlock detected"), std::string::npos) << dblogd_->log();
}

// dblogd is down when a request is committed: the consumer resumes from its slot, and the
// request is taken from the queue.
TEST_P(PgoutputModeTest, RepairRequestedWhileDblogdIsDownRuns) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(1000);
  Replay replay;
  ASSERT_NO_FATAL_FAILURE(StreamedThenStopped(replay, {"--chunk-size=300"}));
  EraseEvery(replay, "a", 3);
  const std::string id = db_->scalar("SELECT dblog.repair('" + s + ".a')");
  db_->exec("UPDATE " + s + ".a SET v = 'after' WHERE id % 10 = 0");
  StartDblogd(s + ".*", {"--chunk-size=300"});
  auto c = Connect(replay.last_position());
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "done"));
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a"});
  EXPECT_GT(replay.chunks_seen(), 0u);
}

// The slot is dropped after the request was committed and before the consumer took it: the
// next connection bootstraps again from a new slot, and the request runs after that bootstrap.
TEST_P(PgoutputModeTest, RepairRequestedBeforeTheSlotWasRecreatedRuns) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(1000);
  Replay first;
  ASSERT_NO_FATAL_FAILURE(StreamedThenStopped(first, {"--chunk-size=300"}));
  const std::string id = db_->scalar("SELECT dblog.repair('" + s + ".a')");
  DropSlot();
  StartDblogd(s + ".*", {"--chunk-size=300"});
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));  // the new bootstrap
  EXPECT_TRUE(replay.restarted_seen());
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "done"));
  ExpectConverged(replay, {"a"});
  EXPECT_GT(replay.chunks_seen(), 0u);
}

// Markers nobody's window wrote: rows of dblog.watermarks that a superuser writes for this
// consumer's windows that do not exist, or for another consumer, are ignored (this consumer's
// counted); no other role may write the table; a logical message with the extension's marker
// prefix is not in this mode's stream at all. Nothing is forwarded, nothing lost.
TEST_P(PgoutputModeTest, ForgedMarkersAreIgnoredAndCounted) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(0);  // no bootstrap: the replay has what is written after
  StartDblogd(s + ".*", {"--bootstrap=false"});
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  PgConn admin(cluster_->conninfo());
  // one row per consumer (dblogd sets its consumer's row for each marker)
  admin.exec("DO $$ BEGIN FOR i IN 1..50 LOOP INSERT INTO dblog.watermarks (consumer, content) "
             "VALUES ('sink', 'lo:bogus' || i) ON CONFLICT (consumer) DO UPDATE SET content = "
             "EXCLUDED.content; END LOOP; END $$");
  admin.exec("INSERT INTO dblog.watermarks (consumer, content) VALUES ('someone_else', 'hi:x')");
  admin.exec("CREATE ROLE forger LOGIN");
  PgConn forger(As(*cluster_, "forger"));
  EXPECT_THROW(forger.exec("INSERT INTO dblog.watermarks (consumer, content) VALUES "
                           "('sink', 'lo:x')"),
               std::exception);
  forger.exec("SELECT pg_logical_emit_message(true, 'dblog.watermark/sink', 'lo:y')");
  db_->exec("INSERT INTO " + s + ".a VALUES (-1, 'after')");
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a", "sentinel"});
  EXPECT_EQ(dblog::test::MetricValue(dblogd_->Metrics(),
                                     "dblog_foreign_markers_total{consumer=\"sink\"}"),
            50);
  EXPECT_GE(dblog::test::CountLogEvents(dblogd_->log(), "foreign_watermark_ignored"), 1);
}

// The server restarts (fast shutdown) in the middle of a repair while the consumer reads on:
// the repair finishes and the replay converges.
TEST_P(PgoutputModeTest, ASourceRestartDuringARepairIsRecoveredFrom) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(4000);
  StartDblogd(s + ".*", {"--chunk-size=20", "--max-chunk-size=20",
                         "--repair-rows-per-second=2000", "--reconnect-min=0.1",
                         "--heartbeat-interval=0.2"});
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  EraseEvery(replay, "a", 5);
  const std::string id = db_->scalar("SELECT dblog.repair('" + s + ".a')");
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "running"));
  db_.reset();
  pinned_.reset();
  // the consumer reads and acknowledges while the server restarts: a shutdown waits for its
  // walsenders' receivers to confirm what they were sent
  std::atomic<bool> restarted{false};
  bool restart_ok = false;
  std::thread restart([&] {
    restart_ok = cluster_->Restart();
    restarted = true;
  });
  dblog::test::OnScopeExit join([&] {
    if (restart.joinable()) restart.join();
  });
  dblog::client::Item item;  // the session outlives the source's restart
  while (!restarted && c.Next(item))
    if (auto* e = std::get_if<dblog::v1::StreamEvent>(&item)) {
      replay.Apply(*e);
      if (e->has_commit()) c.Ack(*dblog::client::Client::PositionOf(*e));
    }
  restart.join();
  ASSERT_TRUE(restart_ok);
  db_ = std::make_unique<PgConn>(As(*cluster_, kRole));
  pinned_ = std::make_unique<PgConn>(As(*cluster_, kRole) + " options='" +
                                     po::OutputSettingsOptions() + "'");
  ASSERT_NO_FATAL_FAILURE(ReadUntilRequest(c, replay, id, "done"));
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a", "sentinel"});
  EXPECT_GE(dblog::test::CountLogEvents(dblogd_->log(), "source_reconnected"), 1);
}

// Tables joining the scope of a consumer that has bootstrapped, as in the extension's mode: each
// goes into the publication with a whole-table repair, in one transaction, so that its rows
// written before (not in the stream) come through the repair's windows and its changes after
// through the stream. While streaming (noticed at the next heartbeat): a table created with rows,
// and one moved into the scope's schema (SET SCHEMA) with rows; while dblogd was down: one
// created with rows. No bootstrap again; the replay equals the source (before: the first two
// ended the session with SCOPE_ERROR, the third was refused until the slot was dropped).
TEST_P(PgoutputModeTest, ATableJoiningTheScopeIsCopiedByARepair) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(100);
  db_->exec("CREATE SCHEMA side");
  const std::vector<std::string> args{"--heartbeat-interval=1"};
  StartDblogd(s + ".*", args);
  Replay replay;
  auto done = [&](const std::string& table) {
    return db_->scalar("SELECT count(*) FROM dblog.requests WHERE state = 'done' AND "
                       "table_name = '" + s + "." + table + "'") == "1";
  };
  auto read_until_done = [&](dblog::client::Client& c, const std::vector<std::string>& tables) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
      bool all = true;
      for (const auto& t : tables) all = all && done(t);
      if (all) break;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << db_->scalar("SELECT string_agg(table_name || ':' || state || ':' || "
                         "coalesce(error, ''), ' ') FROM dblog.requests")
          << dblogd_->log();
      std::this_thread::sleep_for(200ms);
    }
  };
  {
    auto c = Connect();
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    db_->exec("BEGIN");
    db_->exec("CREATE TABLE " + s + ".b (id int PRIMARY KEY, v text)");
    db_->exec("INSERT INTO " + s + ".b SELECT g, 'b' || g FROM generate_series(1, 700) g");
    db_->exec("COMMIT");
    db_->exec("CREATE TABLE side.c (id bigint PRIMARY KEY, w jsonb)");
    db_->exec("INSERT INTO side.c SELECT g, jsonb_build_object('g', g) FROM generate_series(1, 300) g");
    db_->exec("ALTER TABLE side.c SET SCHEMA " + s);
    db_->exec("UPDATE " + s + ".a SET v = 'changed' WHERE id % 10 = 0");
    ASSERT_NO_FATAL_FAILURE(read_until_done(c, {"b", "c"}));
    // changes after the table joined come through the stream
    db_->exec("UPDATE " + s + ".b SET v = 'later' WHERE id % 3 = 0");
    db_->exec("DELETE FROM " + s + ".c WHERE id % 4 = 0");
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    ExpectConverged(replay, {"a", "b", "c", "sentinel"});
  }
  dblogd_->Stop();
  db_->exec("CREATE TABLE " + s + ".d (id int PRIMARY KEY)");
  db_->exec("INSERT INTO " + s + ".d SELECT generate_series(1, 50)");
  StartDblogd(s + ".*", args);
  {
    auto c = Connect(replay.last_position());
    EXPECT_FALSE(c.welcome().slot_created());
    ASSERT_NO_FATAL_FAILURE(read_until_done(c, {"d"}));
    ExpectConverged(replay, {"a", "b", "c", "d", "sentinel"});
  }
  EXPECT_EQ(bootstrap_begins_.size(), 1u) << "bootstrapped again";
  EXPECT_EQ(db_->scalar("SELECT string_agg(tablename, ',' ORDER BY tablename) FROM "
                        "pg_publication_tables WHERE pubname = 'dblog_sink' AND schemaname = 'app'"),
            "a,b,c,d,sentinel");
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM dblog.requests WHERE reason = 'the table joined "
                        "the scope'"),
            "3");
}

// The W6 caveat in this mode, deterministically, as VisibilityRaceTest does in the extension's: a
// transaction's commit record is in the WAL (so the walsender streams it) while its backend
// still waits for a synchronous standby that does not exist, so it is still running for every
// snapshot. A repair window opened then reads the old row; with the widening (the default) the
// window leaves it out and the replay keeps the log's newer value; a plain DBLog window
// (--unsafe-plain-windows) emits the stale row after it, which proves the race was set up.
class PgoutputRaceTest : public PgoutputModeTest {
 protected:
  void TearDown() override {
    try {
      PgConn admin(cluster_->conninfo());
      admin.exec("ALTER SYSTEM RESET synchronous_standby_names");
      admin.exec("SELECT pg_reload_conf()");
    } catch (...) {
    }
    PgoutputModeTest::TearDown();
  }

  // Returns whether the replay converged; nullopt when the race could not be set up.
  // toast: the last column is stored out of line, the sink's values of it are damaged and the
  // invisible transaction updates rows 1-5 leaving it unchanged (issue 28, 1b).
  std::optional<bool> Race(bool plain, bool toast = false) {
    const std::string s = kSchema;
    PgConn admin(cluster_->conninfo());
    if (toast) {
      db_->exec("CREATE TABLE " + s + ".t (id int PRIMARY KEY, n int, body text)");
      db_->exec("ALTER TABLE " + s + ".t ALTER COLUMN body SET STORAGE EXTERNAL");
      db_->exec("INSERT INTO " + s + ".t SELECT g, 0, repeat(md5(g::text), 200)"
                " FROM generate_series(1, 10) g");
    } else {
      db_->exec("CREATE TABLE " + s + ".t (id int PRIMARY KEY, v text)");
      db_->exec("INSERT INTO " + s + ".t VALUES (1, 'old'), (2, 'other')");
    }
    db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
    // dblogd's own writes (watermarks, bookkeeping) must not wait for the missing standby
    std::vector<std::string> args{
        "--source=" + As(*cluster_, kRole) + " options='-c synchronous_commit=local'",
        "--source-plugin=pgoutput", std::string("--consumer=") + kConsumer + "=" + s + ".*",
        "--status-interval=0.5", "--heartbeat-interval=0.5", "--chunk-size=100"};
    if (plain) args.push_back("--unsafe-plain-windows");
    dblogd_ = std::make_unique<DblogdProcess>(args);
    dblogd_->Start();
    auto c = Connect();
    Replay replay;
    ReadUntil(c, replay, 0);
    // the stream has started before the stuck transaction takes its xid (as in
    // VisibilityRaceTest: one taken before the stream's start makes every window fail closed)
    ReadUntil(c, replay, Sentinel());
    const auto oid =
        static_cast<std::uint32_t>(std::stoul(db_->scalar("SELECT '" + s + ".t'::regclass::oid")));
    if (toast)
      for (std::int64_t id = 1; id <= 10; ++id) replay.Corrupt(oid, dblog::test::IntKey(id));
    db_->exec("SET synchronous_commit = local");
    admin.exec("ALTER SYSTEM SET synchronous_standby_names = 'dblog_nobody'");
    admin.exec("SELECT pg_reload_conf()");
    std::thread stuck([&] {
      std::optional<PgConn> conn;  // pg_reload_conf() only signals: a backend that has it
      for (int i = 0; i < 500; ++i) {
        conn.emplace(As(*cluster_, kRole));
        if (conn->scalar("SHOW synchronous_standby_names") == "dblog_nobody") break;
        std::this_thread::sleep_for(10ms);
      }
      conn->exec("SET synchronous_commit = on");
      conn->exec("SET application_name = 'dblog_stuck'");
      if (toast)  // the body unchanged: the WAL does not carry it
        conn->exec("UPDATE " + s + ".t SET n = n + 1 WHERE id <= 5");  // waits in SyncRep
      else
        conn->exec("UPDATE " + s + ".t SET v = 'new' WHERE id = 1");  // waits in SyncRep
    });
    dblog::test::OnScopeExit join([&] {
      if (stuck.joinable()) stuck.join();
    });
    bool set_up = true;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (admin.scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                        "'dblog_stuck' AND wait_event = 'SyncRep'") != "1") {
      if (std::chrono::steady_clock::now() > deadline) {
        set_up = false;  // the commit went through without waiting: nothing to conclude
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    const std::string id = db_->scalar("SELECT dblog.repair('" + s + ".t')");
    // the window closes while the update is invisible to every snapshot
    const auto until = std::chrono::steady_clock::now() + 60s;
    while (db_->scalar("SELECT state FROM dblog.requests WHERE id = " + id) != "done") {
      ReadUntil(c, replay, 0, 1);
      if (std::chrono::steady_clock::now() > until) {
        ADD_FAILURE() << "the repair never finished\n" << dblogd_->log();
        return false;
      }
    }
    admin.exec("ALTER SYSTEM RESET synchronous_standby_names");
    admin.exec("SELECT pg_reload_conf()");
    stuck.join();
    ReadUntil(c, replay, Sentinel());
    if (!set_up) return std::nullopt;
    const auto source = CopyPathTable(*pinned_, s + ".t");
    return replay.Table(oid) == source;
  }
};

// Issue 28, 1b, in this mode: rows whose TOASTed value is damaged in the sink, updated (value
// unchanged: pgoutput's 'u') by a transaction the chunk's snapshot misses, get the source's value.
TEST_P(PgoutputRaceTest, DamagedToastedValuesOfRowsTheSnapshotMissedAreRepaired) {
  const std::optional<bool> converged = Race(false, /*toast=*/true);
  if (!converged) GTEST_SKIP() << "the transaction never waited for the standby: race not set up";
  EXPECT_TRUE(*converged) << dblogd_->log();
}

TEST_P(PgoutputRaceTest, TheWidenedWindowKeepsTheLogsNewerValue) {
  const std::optional<bool> converged = Race(false);
  if (!converged) GTEST_SKIP() << "the transaction never waited for the standby: race not set up";
  EXPECT_TRUE(*converged) << dblogd_->log();
}

TEST_P(PgoutputRaceTest, APlainDblogWindowEmitsTheStaleRow) {
  const std::optional<bool> converged = Race(true);
  if (!converged) GTEST_SKIP() << "the transaction never waited for the standby: race not set up";
  EXPECT_FALSE(*converged) << "the race did not reproduce: this test would prove nothing";
}

// Repairs read a chunk with a planned SELECT, and planning runs the table owner's index and
// statistics expressions (an IMMUTABLE PL/pgSQL function in an expression index, say) as dblogd's
// role; a schema's owner could swap a view in under the name. Without the extension's C guard,
// this mode repairs only tables whose owner and schema owner are dblogd's role or a superuser:
// a repair of a table another role owns (published by an administrator) fails with the reason,
// and the index's function never runs as dblogd's role.
TEST_P(PgoutputModeTest, RepairsOfATableAnotherRoleOwnsAreRefused) {
  const std::string s = kSchema;
  PgConn admin(cluster_->conninfo());
  admin.exec("CREATE ROLE other NOLOGIN");
  admin.exec("CREATE TABLE " + s + ".o (id int PRIMARY KEY, v int)");
  admin.exec("INSERT INTO " + s + ".o SELECT g, g FROM generate_series(1, 50) g");
  admin.exec("ALTER TABLE " + s + ".o OWNER TO other");
  admin.exec("GRANT SELECT ON " + s + ".o TO " + kRole);
  // the owner's function, which would run as whoever plans a query on the table: run as
  // dblogd's role, it says so (the error would end the repair with that message)
  admin.exec(std::string("CREATE FUNCTION public.evil(int) RETURNS int LANGUAGE plpgsql IMMUTABLE "
             "AS $$BEGIN IF current_user = '") + kRole + "' THEN RAISE EXCEPTION 'evil ran as %', "
             "current_user; END IF; RETURN $1; END$$");
  admin.exec("ALTER FUNCTION public.evil(int) OWNER TO other");
  admin.exec("GRANT USAGE, CREATE ON SCHEMA " + s + " TO other");
  admin.exec("SET ROLE other");
  admin.exec("CREATE INDEX ON " + s + ".o ((v + public.evil(1)))");
  admin.exec("RESET ROLE");
  db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  StartDblogd(s + ".*,public.mine");
  // dblogd's role may not publish a table it does not own: its first connection makes the
  // repair API and is refused with the statement for an administrator, who runs it
  const auto refused = Refusal();
  ASSERT_TRUE(refused) << dblogd_->log();
  EXPECT_NE(std::string(refused->what()).find("dblog.watermarks"), std::string::npos)
      << refused->what();
  admin.exec("CREATE PUBLICATION dblog_sink FOR TABLE " + s + ".o, " + s +
             ".sentinel, dblog.watermarks");
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));  // the copy path plans nothing: copied
  EXPECT_EQ(replay.Table(static_cast<std::uint32_t>(std::stoul(
                             admin.scalar("SELECT '" + s + ".o'::regclass::oid"))))
                .size(),
            50u);
  const std::string id = admin.scalar("SELECT dblog.repair('" + s + ".o')");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  std::string state;
  while ((state = admin.scalar("SELECT state || ': ' || coalesce(error, '') FROM dblog.requests "
                               "WHERE id = " + id)).rfind("failed", 0) != 0) {
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << state << "\n" << dblogd_->log();
  }
  EXPECT_NE(state.find("app.o belongs to another role"), std::string::npos) << state;
  EXPECT_EQ(state.find("evil ran"), std::string::npos) << "the owner's function ran as dblogd's role";
  EXPECT_EQ(dblogd_->log().find("evil ran"), std::string::npos) << dblogd_->log();
  // schema public belongs to pg_database_owner, which stands for the database's owner (a
  // superuser here): a table of dblogd's role there is repaired
  // (the administrator's publication takes it in the same transaction, as the scope names it)
  admin.exec("BEGIN");
  admin.exec("CREATE TABLE public.mine (id int PRIMARY KEY)");
  admin.exec("INSERT INTO public.mine SELECT generate_series(1, 20)");
  admin.exec(std::string("ALTER TABLE public.mine OWNER TO ") + kRole);
  admin.exec("ALTER PUBLICATION dblog_sink ADD TABLE public.mine");
  admin.exec("COMMIT");
  const std::string mine = admin.scalar("SELECT dblog.repair('public.mine')");
  while ((state = admin.scalar("SELECT state || ': ' || coalesce(error, '') FROM dblog.requests "
                               "WHERE id = " + mine)).rfind("done", 0) != 0) {
    ASSERT_EQ(state.rfind("failed", 0), std::string::npos) << state;
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    ASSERT_LT(std::chrono::steady_clock::now(), deadline + 60s) << state << "\n" << dblogd_->log();
  }
}

// A bootstrap cut by a SIGKILL of dblogd is not a resume point: the next connection makes a new
// slot and copies again, flagged restarted, and the replay converges.
TEST_P(PgoutputModeTest, ABootstrapCutByAKillIsRedone) {
  const std::string s = kSchema;
  db_->exec("CREATE TABLE " + s + ".big (id int PRIMARY KEY, v text)");
  db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  db_->exec("INSERT INTO " + s +
            ".big SELECT g, repeat('x', g % 50) FROM generate_series(1, 100000) g");
  StartDblogd();
  {
    auto c = Connect();
    Replay first;
    ReadUntil(c, first, 0, 2000);  // a part of the copy, unacknowledged
    dblogd_->Signal(SIGKILL);
    dblogd_->Wait();
  }
  EXPECT_EQ(db_->scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = 'sink'"),
            "copying");
  db_->exec("UPDATE " + s + ".big SET v = 'changed' WHERE id % 1000 = 0");
  StartDblogd();
  Replay replay;
  {
    auto c = Connect();
    EXPECT_TRUE(c.welcome().slot_created());
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
    db_->exec("DELETE FROM " + s + ".big WHERE id % 3 = 0");
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  }
  ASSERT_EQ(bootstrap_begins_.size(), 2u);
  EXPECT_TRUE(bootstrap_begins_[1].restarted());
  EXPECT_TRUE(replay.restarted_seen());
  ExpectConverged(replay, {"big", "sentinel"});
}

// DDL committed after the slot's snapshot, while the one copy worker is inside a_big (held
// there by this consumer, which stops reading) and before it reaches b and c. In this mode the
// plan is read from the catalog inside the snapshot, so each check that compared the catalog
// with the plan inside the snapshot compared the snapshot with itself, and the COPY, which
// resolves names and storage as they are now, read: a rewritten table as empty (its new
// storage holds only rows the snapshot cannot see), c's rows as b's after the two were swapped
// by name, w's values as v's after the columns were swapped by name; all without an error. Now
// each copy compares, with the table locked, the catalog as it is now (to_regclass, the
// storage's relfilenode, the columns read outside the snapshot) with the plan: SOURCE_ERROR,
// and the next connection redoes the bootstrap from a new slot and converges.
TEST_P(PgoutputModeTest, DdlDuringTheBootstrapRedoesItInsteadOfLosingOrSwappingRows) {
  const std::string s = kSchema;
  db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  db_->exec("CREATE TABLE " + s + ".a_big (id int PRIMARY KEY, v text)");
  db_->exec("INSERT INTO " + s +
            ".a_big SELECT g, repeat('v', 50) FROM generate_series(1, 300000) g");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a rewrite adding a column", "ALTER TABLE " + s + ".b ADD COLUMN x float8 DEFAULT random()"},
      {"a rewrite keeping the definition",
       "ALTER TABLE " + s + ".b ALTER COLUMN v TYPE text USING v || '!'"},
      {"two tables swapped by name", "ALTER TABLE " + s + ".b RENAME TO tmp; ALTER TABLE " + s +
                                         ".c RENAME TO b; ALTER TABLE " + s + ".tmp RENAME TO c"},
      {"two columns swapped by name",
       "ALTER TABLE " + s + ".b RENAME COLUMN v TO tmp; ALTER TABLE " + s +
           ".b RENAME COLUMN w TO v; ALTER TABLE " + s + ".b RENAME COLUMN tmp TO w"},
      // LOCK by the planned name finds nothing (was a worker's failure, not a redo)
      {"a table renamed", "ALTER TABLE " + s + ".b RENAME TO b_renamed"},
  };
  for (const auto& [what, ddl] : cases) {
    const std::string b = what == "a table renamed" ? "b_renamed" : "b";
    SCOPED_TRACE(what);
    db_->exec("DROP TABLE IF EXISTS " + s + ".b, " + s + ".c, " + s + ".b_renamed");
    for (const std::string t : {"b", "c"}) {
      db_->exec("CREATE TABLE " + s + "." + t + " (id int PRIMARY KEY, v text, w text)");
      db_->exec("INSERT INTO " + s + "." + t + " SELECT g, '" + t + ".v' || g, '" + t +
                ".w' || g FROM generate_series(" + (t == "b" ? "1, 10" : "101, 120") + ") g");
    }
    StartDblogd(s + ".*", {"--copy-workers=1", "--max-buffer-mb=1"});
    Replay first;
    std::string error;
    {
      auto c = Connect();
      ASSERT_TRUE(c.welcome().slot_created());
      ReadUntil(c, first, 0, 1000);  // inside a_big; the worker waits for this consumer
      db_->exec(ddl);
      try {
        ReadUntil(c, first, 0);
      } catch (const dblog::client::ServerError& e) {
        EXPECT_EQ(e.code(), dblog::v1::Error::SOURCE_ERROR);
        error = e.what();
      }
    }
    if (error.empty()) {
      ADD_FAILURE() << "the bootstrap went on after " << what;
      ExpectConverged(first, {"a_big", b, "c"});
    } else {
      EXPECT_NE(error.find("the bootstrap is redone"), std::string::npos) << error;
      Replay again;
      {
        auto c = Connect();
        ASSERT_NO_FATAL_FAILURE(ReadUntil(c, again, 0));
        ASSERT_NO_FATAL_FAILURE(ReadUntil(c, again, Sentinel()));
      }
      EXPECT_TRUE(again.restarted_seen());
      ExpectConverged(again, {"a_big", b, "c"});
    }
    dblogd_->Stop();
    DropSlot();
  }
}

// Security review F4: a change, then DDL on its table, both before dblogd reads the change
// (here: dblogd stopped). pgoutput's Relation message for the change lists the columns as they
// were, the catalog read now lists them renamed and one more: the stream stopped until the slot
// was dropped. A table that never dropped a column has dense attnums, so each Relation is
// mapped (the message's names, the catalog's attnums): v then v2 at attnum 2, then x at 3.
TEST_P(PgoutputModeTest, ColumnsRenamedOrAddedRightAfterAChangeAreMappedByAttnum) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(10);
  Replay replay;
  ASSERT_NO_FATAL_FAILURE(StreamedThenStopped(replay));
  db_->exec("INSERT INTO " + s + ".a VALUES (11, 'before')");
  db_->exec("ALTER TABLE " + s + ".a RENAME COLUMN v TO v2");
  db_->exec("INSERT INTO " + s + ".a VALUES (12, 'renamed')");
  db_->exec("ALTER TABLE " + s + ".a ADD COLUMN x int");
  db_->exec("INSERT INTO " + s + ".a VALUES (13, 'added', 5)");
  StartDblogd();
  relations_.clear();
  {
    auto c = Connect(replay.last_position());
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  }
  ExpectConverged(replay, {"a"}, /*pad=*/true);
  std::vector<std::string> seen;
  for (const auto& r : relations_) {
    if (r.name() != "a") continue;
    std::string cols;
    for (const auto& col : r.columns()) cols += col.name() + ":" + std::to_string(col.attnum()) + " ";
    seen.push_back(cols);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"id:1 v:2 ", "id:1 v2:2 ", "id:1 v2:2 x:3 "}));
}

// Security review F3: the publication's owner (here a superuser) alters it under a streaming
// consumer: publish = 'insert'. pgoutput decodes each change with the publication as it was, so
// the deletes after it never reached the stream, and dblogd went on. Now each heartbeat reads the
// publication's shape: the session ends with SOURCE_ERROR saying what changed and what to do,
// the next connection is refused the same way, and after the slot and the publication are
// dropped the consumer bootstraps again and converges.
TEST_P(PgoutputModeTest, APublicationAlteredUnderTheConsumerEndsItsSessionNeverSilently) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(100);
  StartDblogd(s + ".*", {"--copy-workers=2", "--heartbeat-interval=1"});
  PgConn admin(cluster_->conninfo());
  {
    auto c = Connect();
    Replay replay;
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    admin.exec("ALTER PUBLICATION dblog_sink SET (publish = 'insert')");
    db_->exec("DELETE FROM " + s + ".a WHERE id <= 10");
    Sentinel();
    std::string error;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    try {
      dblog::client::Item item;
      while (std::chrono::steady_clock::now() < deadline && c.Next(item)) {
        if (auto* ev = std::get_if<dblog::v1::StreamEvent>(&item)) {
          replay.Apply(*ev);
          if (ev->has_commit()) c.Ack(*dblog::client::Client::PositionOf(*ev));
        }
      }
    } catch (const dblog::client::ServerError& e) {
      EXPECT_EQ(e.code(), dblog::v1::Error::SOURCE_ERROR);
      error = e.what();
    }
    ASSERT_NE(error.find("publication dblog_sink was altered under consumer sink: it no longer "
                         "publishes inserts, updates, deletes and truncates"),
              std::string::npos)
        << "the stream went on without the deletes: " << error;
    EXPECT_NE(error.find("SELECT pg_drop_replication_slot('dblog_sink')"), std::string::npos);
  }
  const auto refused = Refusal();
  ASSERT_TRUE(refused);
  EXPECT_NE(std::string(refused->what()).find("drop the slot too"), std::string::npos)
      << refused->what();
  admin.exec("DROP PUBLICATION dblog_sink");
  DropSlot();
  Replay again;
  {
    auto c = Connect();
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, again, 0));
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, again, Sentinel()));
  }
  EXPECT_TRUE(again.restarted_seen());
  ExpectConverged(again, {"a", "sentinel"});
}

// dblog.consumers decides whether a consumer bootstraps: one that another role controls (here a
// schema dblog and a view consumers made by a role with CREATE on the database, saying every
// bootstrap is done) is refused, never read; a view, even of dblogd's own role, is not the table
// either. dblogd makes the schema and the table in one transaction, without IF NOT EXISTS, so
// that one slipped in after its check fails the statement (security review F5).
TEST_P(PgoutputModeTest, ABookkeepingTableAnotherRoleControlsIsRefused) {
  const std::string s = kSchema;
  db_->exec("CREATE TABLE " + s + ".a (id int PRIMARY KEY)");
  PgConn admin(cluster_->conninfo());
  admin.exec("DROP ROLE IF EXISTS mallory");
  admin.exec("CREATE ROLE mallory LOGIN");
  admin.exec("GRANT CREATE ON DATABASE postgres TO mallory");
  {
    PgConn mallory(As(*cluster_, "mallory"));
    mallory.exec("CREATE SCHEMA dblog");
    mallory.exec("CREATE VIEW dblog.consumers AS SELECT 'sink'::text AS name, "
                 "'done'::text AS bootstrap_state");
    mallory.exec("GRANT USAGE ON SCHEMA dblog TO PUBLIC");
    mallory.exec("GRANT SELECT ON dblog.consumers TO PUBLIC");
  }
  StartDblogd();
  auto refused = Refusal();
  ASSERT_TRUE(refused);
  EXPECT_NE(std::string(refused->what()).find("belongs to another role than dblogd's"),
            std::string::npos)
      << refused->what();
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM pg_replication_slots"), "0");
  // dblogd's own schema with a view in it: not the table either
  admin.exec("DROP SCHEMA dblog CASCADE");
  db_->exec("CREATE SCHEMA dblog");
  db_->exec("CREATE VIEW dblog.consumers AS SELECT 'sink'::text AS name, "
            "'done'::text AS bootstrap_state");
  refused = Refusal();
  ASSERT_TRUE(refused);
  EXPECT_NE(std::string(refused->what()).find("belongs to another role than dblogd's"),
            std::string::npos)
      << refused->what();
  // gone: dblogd makes its own, and the consumer bootstraps
  db_->exec("DROP SCHEMA dblog CASCADE");
  Replay replay;
  {
    auto c = Connect();
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  }
  EXPECT_EQ(db_->scalar("SELECT c.relkind::text || ':' || pg_get_userbyid(c.relowner) FROM "
                        "pg_class c WHERE c.oid = 'dblog.consumers'::regclass"),
            "r:cdc");
  admin.exec("DROP OWNED BY mallory");
  admin.exec("DROP ROLE mallory");
}

// pgoutput leaves generated columns out of its messages, so a table that gains one while
// streaming has messages whose columns are not the live ones by position: a column added after
// it would take its attnum and type name. The stream stops instead (as the bootstrap refuses
// such a table), saying why.
TEST_P(PgoutputModeTest, AGeneratedColumnAddedWhileStreamingStopsTheStream) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(10);
  StartDblogd();
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  db_->exec("ALTER TABLE " + s + ".a ADD COLUMN g int GENERATED ALWAYS AS (id * 2) STORED");
  db_->exec("ALTER TABLE " + s + ".a ADD COLUMN b int");
  db_->exec("INSERT INTO " + s + ".a (id, v, b) VALUES (11, 'x', 7)");
  std::string error;
  try {
    ReadUntil(c, replay, Sentinel());
  } catch (const dblog::client::ServerError& e) {
    EXPECT_EQ(e.code(), dblog::v1::Error::SOURCE_ERROR);
    error = e.what();
  }
  EXPECT_NE(error.find("has a generated column, which pgoutput does not send"), std::string::npos)
      << "the stream went on: " << error;
}

// DDL in this mode: a column added while dblogd streams arrives as a new Relation and the
// stream goes on; two changes of a table's columns that dblogd reads only after both (it was
// stopped) leave pgoutput's Relation and the catalog describing different columns: the session
// ends with SOURCE_ERROR saying to drop the slot, never a guessed mapping, and after the drop the
// consumer bootstraps again (restarted) and converges.
TEST_P(PgoutputModeTest, ColumnsChangedBehindTheStreamStopItUntilTheSlotIsDropped) {
  const std::string s = kSchema;
  CreateTableAAndSentinel(100);
  StartDblogd();
  Replay replay;
  {
    auto c = Connect();
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
    db_->exec("ALTER TABLE " + s + ".a ADD COLUMN w int");
    db_->exec("INSERT INTO " + s + ".a VALUES (101, 'new', 7)");
    db_->exec("UPDATE " + s + ".a SET w = id WHERE id <= 10");
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    ExpectConverged(replay, {"a"}, /*pad=*/true);
  }
  dblogd_->Stop();
  db_->exec("ALTER TABLE " + s + ".a ADD COLUMN x int");
  db_->exec("INSERT INTO " + s + ".a VALUES (102, 'x', 1, 2)");
  db_->exec("ALTER TABLE " + s + ".a DROP COLUMN v");
  db_->exec("INSERT INTO " + s + ".a VALUES (103, 3, 4)");
  StartDblogd();
  {
    auto c = Connect(replay.last_position());
    std::string error;
    try {
      dblog::client::Item item;
      while (c.Next(item)) {
      }
    } catch (const dblog::client::ServerError& e) {
      EXPECT_EQ(e.code(), dblog::v1::Error::SOURCE_ERROR);
      error = e.what();
    }
    EXPECT_NE(error.find("SELECT pg_drop_replication_slot('dblog_sink')"), std::string::npos)
        << error;
  }
  DropSlot();
  Replay again;
  {
    auto c = Connect();
    EXPECT_TRUE(c.welcome().slot_created());
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, again, 0));
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, again, Sentinel()));
  }
  EXPECT_TRUE(again.restarted_seen());
  ExpectConverged(again, {"a", "sentinel"});
}

// Issue 23, item 6: the same DDL behind the stream (dblogd stopped), and worse, once an
// administrator installed the DDL trigger: a column dropped, added again under its name, a
// column retyped, and a column dropped between two changes of one transaction. pgoutput's
// Relation messages carry the columns as they were, without attnums, and the catalog read now
// maps none of them; the trigger's layouts (noted when dblogd's publication took the table, and
// at each ALTER TABLE) give each message the attnums, types and key it was written with, as
// the extension's historic catalog does: the v dropped is attnum 2, the v added again 4, and n
// a varchar(10) until its retype. The stream goes on, each change's values under its columns.
TEST_P(PgoutputModeTest, ColumnsDroppedAddedAgainOrRetypedBehindTheStreamKeepTheirAttnums) {
  const std::string s = kSchema;
  PgConn admin(cluster_->conninfo());
  const auto [sql, printed] = dblog::test::Run(std::string(DBLOGD_PATH) + " --ddl-trigger-sql");
  ASSERT_EQ(printed, 0) << sql;
  admin.exec(sql);
  // n's retype needs no rewrite, so the trigger queues no repair, whose rows would interleave
  db_->exec("CREATE TABLE " + s + ".a (id int PRIMARY KEY, v text, n varchar(10))");
  db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  db_->exec("INSERT INTO " + s + ".a SELECT g, 'v' || g, g FROM generate_series(1, 10) g");
  Replay replay;
  ASSERT_NO_FATAL_FAILURE(StreamedThenStopped(replay));
  EXPECT_EQ(admin.scalar("SELECT count(*) FROM dblog_ddl.layouts WHERE table_oid = '" + s +
                         ".a'::regclass"),
            "1")
      << "the layout noted when dblogd's publication took the table";
  db_->exec("INSERT INTO " + s + ".a VALUES (11, 'before', 1)");
  db_->exec("ALTER TABLE " + s + ".a DROP COLUMN v");
  db_->exec("INSERT INTO " + s + ".a VALUES (12, 2)");
  db_->exec("ALTER TABLE " + s + ".a ADD COLUMN v text");
  db_->exec("INSERT INTO " + s + ".a VALUES (13, 3, 'again')");
  db_->exec("ALTER TABLE " + s + ".a ALTER COLUMN n TYPE varchar(20)");
  // the changes before the DDL of their own transaction keep their layout: its Relation
  // message comes with the first of them, before the DDL's note, the transaction's commit after
  db_->exec("BEGIN");
  db_->exec("INSERT INTO " + s + ".a VALUES (14, '4000000000', 'retyped')");
  db_->exec("UPDATE " + s + ".a SET v = 'in the transaction' WHERE id = 14");
  db_->exec("ALTER TABLE " + s + ".a DROP COLUMN v");
  db_->exec("INSERT INTO " + s + ".a VALUES (15, 5)");
  db_->exec("COMMIT");
  StartDblogd();
  relations_.clear();
  described_.clear();
  try {
    auto c = Connect(replay.last_position());
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  } catch (const std::exception& e) {
    FAIL() << e.what() << "\n" << dblogd_->log();
  }
  // "Relation id:1 v:2 n:3" for each Relation of a, "1=11 2=before 3=1" for each of its changes
  const auto oid = static_cast<std::uint32_t>(
      std::stoul(db_->scalar("SELECT '" + s + ".a'::regclass::oid")));
  std::vector<std::string> seen;
  dblog::v1::Relation rel;
  for (const auto& ev : described_) {
    if (ev.has_relation() && ev.relation().oid() == oid) {
      rel = ev.relation();
      std::string line = "Relation";
      for (const auto& col : rel.columns())
        line += " " + col.name() + ":" + std::to_string(col.attnum()) + ":" + col.type_name();
      seen.push_back(line);
    }
    if (!ev.has_change() || ev.change().relation_oid() != oid ||
        ev.change().kind() == dblog::v1::Change::READ)
      continue;
    const auto& row = ev.change().new_row();
    std::string line;
    for (int i = 0; i < row.values_size() && i < rel.columns_size(); ++i) {
      const auto& v = row.values(i);
      line += (i ? " " : "") + std::to_string(rel.columns(i).attnum()) + "=" +
              (v.has_text_value() ? v.text_value()
                                  : v.has_int_value() ? std::to_string(v.int_value()) : "?");
    }
    seen.push_back(line);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "Relation id:1:integer v:2:text n:3:character varying(10)",
                      "1=11 2=before 3=1",
                      "Relation id:1:integer n:3:character varying(10)",
                      "1=12 3=2",
                      "Relation id:1:integer n:3:character varying(10) v:4:text",
                      "1=13 3=3 4=again",
                      "Relation id:1:integer n:3:character varying(20) v:4:text",
                      "1=14 3=4000000000 4=retyped",
                      "1=14 3=4000000000 4=in the transaction",
                      "Relation id:1:integer n:3:character varying(20)",
                      "1=15 3=5",
                  }))
      << dblogd_->log();
  EXPECT_EQ(dblogd_->log().find("SOURCE_ERROR"), std::string::npos) << dblogd_->log();

  // DDL the trigger does not see (event triggers do not fire for a replica session): n dropped
  // and added again under its name and type. The last note (id:1 n:3) lists the message's
  // columns, but it is not the catalog any more, so the notes are not trusted: the catalog maps
  // n at its new attnum 5 (the note would have said 3, the dropped one).
  dblogd_->Stop();
  admin.exec("SET session_replication_role = replica");
  admin.exec("ALTER TABLE " + s + ".a DROP COLUMN n");
  admin.exec("ALTER TABLE " + s + ".a ADD COLUMN n varchar(20)");
  admin.exec("RESET session_replication_role");
  db_->exec("INSERT INTO " + s + ".a VALUES (16, 'unseen')");
  StartDblogd();
  described_.clear();
  try {
    auto c = Connect(replay.last_position());
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  } catch (const std::exception& e) {
    FAIL() << e.what() << "\n" << dblogd_->log();
  }
  seen.clear();
  for (const auto& ev : described_) {
    if (ev.has_relation() && ev.relation().oid() == oid) {
      std::string line = "Relation";
      for (const auto& col : ev.relation().columns())
        line += " " + col.name() + ":" + std::to_string(col.attnum());
      seen.push_back(line);
    }
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"Relation id:1 n:5"})) << dblogd_->log();
  EXPECT_NE(dblogd_->log().find("pgoutput_layouts_behind"), std::string::npos) << dblogd_->log();
}

// Issue 28, item 1, in this mode (issue 23, item 6): DDL that changes existing rows without
// writing them (the log never carries the new values) is repaired with nothing run by hand once
// an administrator installed the DDL trigger (dblogd --ddl-trigger-sql): a column added with a
// constant default (stored as its missing value) and one with a volatile default (a rewrite), a
// type changed USING an expression (a rewrite), an enum's label renamed (a column of it and an
// array of it). DDL that changes no value (a column without a default, an enum's label added)
// queues nothing. Before that, a schema dblog_ddl another role made, with a note naming a table,
// is ignored (the administrator's script refuses to reuse it), and the notes table cannot be
// written, nor its functions called, by dblogd's role.
TEST_P(PgoutputModeTest, DdlChangingRowsWithoutWritingThemIsRepairedThroughTheDdlTrigger) {
  const std::string s = kSchema;
  PgConn admin(cluster_->conninfo());
  db_->exec("CREATE TABLE " + s + ".a (id int PRIMARY KEY, v text, n int)");
  db_->exec("INSERT INTO " + s + ".a SELECT g, 'v' || g, g FROM generate_series(1, 100) g");
  db_->exec("CREATE TABLE " + s + ".b (id int PRIMARY KEY, v text)");
  db_->exec("INSERT INTO " + s + ".b SELECT g, 'b' || g FROM generate_series(1, 50) g");
  db_->exec("CREATE TYPE " + s + ".mood AS ENUM ('sad', 'ok')");
  db_->exec("CREATE TABLE " + s + ".e (id int PRIMARY KEY, m " + s + ".mood, ms " + s +
            ".mood[])");
  db_->exec("INSERT INTO " + s + ".e SELECT g, CASE WHEN g % 2 = 0 THEN 'sad' ELSE 'ok' END::" +
            s + ".mood, ARRAY['ok', 'sad']::" + s + ".mood[] FROM generate_series(1, 30) g");
  db_->exec("CREATE TABLE " + s + ".c (id int PRIMARY KEY, v text)");
  db_->exec("INSERT INTO " + s + ".c SELECT g, 'c' FROM generate_series(1, 20) g");
  db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  // another role's schema dblog_ddl (dblogd's role may create schemas) with a forged note
  db_->exec("CREATE SCHEMA dblog_ddl");
  db_->exec("CREATE TABLE dblog_ddl.changed_tables (id int8, xid xid8, table_oid oid, reason "
            "text, ddl_by name, noted_at timestamptz)");
  db_->exec("INSERT INTO dblog_ddl.changed_tables VALUES (1, '1', '" + s +
            ".c'::regclass, 'forged', 'x', now())");
  const auto [sql, printed] = dblog::test::Run(std::string(DBLOGD_PATH) + " --ddl-trigger-sql");
  ASSERT_EQ(printed, 0) << sql;
  try {
    admin.exec(sql);
    ADD_FAILURE() << "the DDL trigger's script reused a schema dblog_ddl of another role";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to another role"), std::string::npos)
        << e.what();
    admin.exec("ROLLBACK");
  }
  // also when run by psql without -1 or ON_ERROR_STOP: the script is one transaction, so
  // nothing after the refusal takes effect (functions of the administrator's in another role's
  // schema would run as the administrator whatever that role put in their place)
  {
    char path[] = "/tmp/dblog-ddl-trigger-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, sql.data(), sql.size()), static_cast<ssize_t>(sql.size()));
    close(fd);
    const auto [out, status] = dblog::test::Run("psql -X '" + cluster_->conninfo() + "' -f " +
                                                path + " 2>&1");
    unlink(path);
    EXPECT_NE(out.find("belongs to another role"), std::string::npos) << out;
    EXPECT_EQ(admin.scalar("SELECT count(*) FROM pg_proc WHERE pronamespace = "
                           "'dblog_ddl'::regnamespace"),
              "0")
        << out;
    EXPECT_EQ(admin.scalar("SELECT count(*) FROM pg_event_trigger"), "0") << out;
  }
  const auto check = [&] {
    return dblog::test::Run(std::string(DBLOGD_PATH) + " --check --source '" +
                            As(*cluster_, kRole) + "' --source-plugin pgoutput --consumer " +
                            kConsumer + "='" + s + ".*' 2>&1");
  };
  EXPECT_NE(check().first.find("warn  ddl_trigger                 schema dblog_ddl is not as the "
                               "DDL trigger makes it"),
            std::string::npos)
      << check().first;
  StartDblogd();
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  for (int i = 0; i < 3; ++i) {  // three polls of the queue
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    std::this_thread::sleep_for(1s);
  }
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM dblog.requests"), "0")
      << "a note in another role's dblog_ddl queued a repair";
  EXPECT_NE(dblogd_->log().find("schema dblog_ddl is not as the DDL trigger makes it"),
            std::string::npos)
      << dblogd_->log();
  db_->exec("DROP SCHEMA dblog_ddl CASCADE");
  EXPECT_NE(check().first.find("warn  ddl_trigger                 the DDL trigger is not installed"),
            std::string::npos)
      << check().first;
  admin.exec(sql);
  EXPECT_NE(check().first.find("ok    ddl_trigger                 installed"), std::string::npos)
      << check().first;
  // a trigger an older dblogd installed keeps no layouts: said, and mended by running it again
  admin.exec("DROP TABLE dblog_ddl.layouts");
  EXPECT_NE(check().first.find("warn  ddl_trigger                 the DDL trigger was installed "
                               "by an older dblogd and keeps no layouts"),
            std::string::npos)
      << check().first;
  admin.exec(sql);
  EXPECT_NE(check().first.find("ok    ddl_trigger                 installed"), std::string::npos)
      << check().first;
  // another role allowed to write a column of the layouts: not trusted, and said
  admin.exec(std::string("GRANT UPDATE (columns) ON dblog_ddl.layouts TO ") + kRole);
  EXPECT_NE(check().first.find("warn  ddl_trigger                 dblog_ddl.layouts is not as "
                               "the DDL trigger's script makes it"),
            std::string::npos)
      << check().first;
  admin.exec(std::string("REVOKE UPDATE (columns) ON dblog_ddl.layouts FROM ") + kRole);
  EXPECT_NE(check().first.find("ok    ddl_trigger                 installed"), std::string::npos)
      << check().first;
  // no role but the administrator writes a note, or runs what the triggers call
  for (const std::string& forge :
       {"INSERT INTO dblog_ddl.changed_tables (table_oid, reason) VALUES ('" + s +
            ".c'::regclass, 'forged')",
        std::string("SELECT dblog_ddl.on_ddl_end()"),
        "SELECT dblog_ddl.note('" + s + ".c'::regclass, 'forged')",
        "INSERT INTO dblog_ddl.layouts (table_oid, at_lsn, columns) VALUES ('" + s +
            ".c'::regclass, '0/0', '[]')",
        std::string("UPDATE dblog_ddl.layouts SET columns = NULL"),
        "SELECT dblog_ddl.note_layout('" + s + ".c'::regclass)",
        "SELECT dblog_ddl.note_unknown('" + s + ".c'::regclass)",
        std::string("SELECT dblog_ddl.note_layouts()")}) {
    EXPECT_THROW(db_->exec(forge), std::exception) << forge;
  }

  db_->exec("ALTER TABLE " + s + ".a ADD COLUMN w text DEFAULT 'x'");
  db_->exec("UPDATE " + s + ".a SET v = 'changed' WHERE id <= 9");
  // dblogd reads the update's Relation before the type changes (behind it, the trigger's
  // layouts map it: ColumnsDroppedAddedAgainOrRetypedBehindTheStreamKeepTheirAttnums)
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  db_->exec("ALTER TABLE " + s + ".a ALTER COLUMN n TYPE bigint USING n * 1000 + 7");
  db_->exec("ALTER TABLE " + s + ".b ADD COLUMN r float8 DEFAULT random()");
  db_->exec("ALTER TYPE " + s + ".mood ADD VALUE 'happy'");
  db_->exec("ALTER TYPE " + s + ".mood RENAME VALUE 'sad' TO 'blue'");
  db_->exec("ALTER TABLE " + s + ".c ADD COLUMN z int");
  const auto deadline = std::chrono::steady_clock::now() + 90s;
  const std::string pending =
      "SELECT count(*) FROM dblog.requests WHERE state <> 'done' OR table_name <> ALL "
      "('{app.a,app.b,app.e}')";
  while (db_->scalar("SELECT count(DISTINCT table_name) FROM dblog.requests") != "3" ||
         db_->scalar(pending) != "0") {
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << db_->scalar("SELECT string_agg(table_name || ':' || state || ':' || reason || ':' || "
                       "coalesce(error, ''), ' ') FROM dblog.requests")
        << dblogd_->log();
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a", "b", "c", "e", "sentinel"}, /*pad=*/true);
  // the reasons of one table's notes are joined when one poll takes them together
  auto reasons = [&](const std::string& table) {
    return db_->scalar("SELECT string_agg(reason, '; ' ORDER BY id) FROM dblog.requests WHERE "
                       "table_name = 'app." + table + "'");
  };
  EXPECT_NE(reasons("a").find("ALTER TABLE ADD COLUMN w DEFAULT"), std::string::npos)
      << reasons("a");
  EXPECT_NE(reasons("a").find("ALTER TABLE ALTER COLUMN TYPE (rewrite)"), std::string::npos)
      << reasons("a");
  EXPECT_EQ(reasons("b"), "ALTER TABLE ADD COLUMN DEFAULT (rewrite) by cdc");
  EXPECT_EQ(reasons("e"), "ALTER TYPE app.mood RENAME VALUE by cdc") << "ADD VALUE queued one";
  EXPECT_NE(dblogd_->log().find("ddl_repair_queued"), std::string::npos);
  const std::string requests_of_a =
      db_->scalar("SELECT count(*) FROM dblog.requests WHERE table_name = 'app.a'");

  // an enum's ADD VALUE and a later ALTER TYPE in the same transaction queue nothing; a table
  // no publication holds is not noted
  db_->exec("BEGIN");
  db_->exec("ALTER TYPE " + s + ".mood ADD VALUE 'meh'");
  db_->exec("ALTER TYPE " + s + ".mood RENAME TO mood2");
  db_->exec("COMMIT");
  db_->exec("CREATE SCHEMA side");
  db_->exec("CREATE TABLE side.o (id int PRIMARY KEY)");
  db_->exec("INSERT INTO side.o VALUES (1)");
  db_->exec("ALTER TABLE side.o ADD COLUMN w int DEFAULT 1");
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM dblog_ddl.changed_tables WHERE table_oid = "
                        "'side.o'::regclass"),
            "0");

  // the trigger made again (its notes' ids start over): a note is still taken once, and new
  // ones are not mistaken for those taken before; the request is dblogd's role's, the DDL's
  // role (an administrator here) named in the reason
  admin.exec("DROP SCHEMA dblog_ddl CASCADE");
  admin.exec(sql);
  admin.exec("ALTER TABLE " + s + ".c ADD COLUMN y int DEFAULT 3");
  while (db_->scalar("SELECT count(*) FROM dblog.requests WHERE table_name = 'app.c' AND state "
                     "= 'done'") != "1") {
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    ASSERT_LT(std::chrono::steady_clock::now(), deadline + 60s)
        << db_->scalar("SELECT string_agg(table_name || ':' || state, ' ') FROM dblog.requests")
        << dblogd_->log();
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a", "b", "c", "e", "sentinel"}, /*pad=*/true);
  EXPECT_EQ(reasons("c"), "ALTER TABLE ADD COLUMN y DEFAULT by postgres");
  // DDL that changes no value of a column that still has its missing value queues nothing
  db_->exec("ALTER TABLE " + s + ".c RENAME COLUMN y TO y2");
  db_->exec("ALTER TABLE " + s + ".c ALTER COLUMN y2 SET STATISTICS 10");
  for (int i = 0; i < 3; ++i) {  // three polls of the notes
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    std::this_thread::sleep_for(1s);
  }
  EXPECT_EQ(reasons("c"), "ALTER TABLE ADD COLUMN y DEFAULT by postgres");
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM dblog.requests WHERE requested_by <> 'cdc'"), "0");
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM dblog.requests WHERE table_name = 'app.a'"),
            requests_of_a)
      << reasons("a");
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM dblog.requests WHERE table_name = 'app.e'"), "1")
      << reasons("e");
}

// A dblogd whose role is a superuser (a self-managed server) installs the DDL trigger itself at
// its consumer's connection, and the DDL it was made for is repaired with nothing run by hand.
TEST_P(PgoutputModeTest, ASuperuserDblogdInstallsTheDdlTriggerItself) {
  const std::string s = kSchema;
  PgConn admin(cluster_->conninfo());
  // the superuser's schema and tables (repairs in this mode read only tables of dblogd's role
  // or a superuser); the test's role writes the sentinel and reads the tables
  admin.exec("ALTER SCHEMA " + s + " OWNER TO postgres");
  admin.exec("CREATE TABLE " + s + ".a (id int PRIMARY KEY, v text)");
  admin.exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  admin.exec("INSERT INTO " + s + ".a SELECT g, 'v' || g FROM generate_series(1, 50) g");
  admin.exec(std::string("GRANT USAGE ON SCHEMA ") + s + " TO " + kRole);
  admin.exec(std::string("GRANT SELECT ON ALL TABLES IN SCHEMA ") + s + " TO " + kRole);
  admin.exec(std::string("GRANT INSERT ON ") + s + ".sentinel TO " + kRole);
  const std::vector<std::string> args{"--source=" + cluster_->conninfo(),
                                      "--source-plugin=pgoutput",
                                      std::string("--consumer=") + kConsumer + "=" + s + ".*",
                                      "--reconnect-max=1"};
  dblogd_ = std::make_unique<DblogdProcess>(args);
  dblogd_->Start();
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  EXPECT_NE(dblogd_->log().find("event=ddl_trigger_installed"), std::string::npos)
      << dblogd_->log();
  EXPECT_EQ(admin.scalar("SELECT string_agg(evtname, ',' ORDER BY evtname) FROM pg_event_trigger"),
            "dblog_ddl_end,dblog_ddl_rewrite");
  admin.exec("ALTER TABLE " + s + ".a ADD COLUMN w text DEFAULT 'x'");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (admin.scalar("SELECT count(*) FROM dblog.requests WHERE state = 'done' AND reason = "
                      "'ALTER TABLE ADD COLUMN w DEFAULT by postgres'") != "1") {
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << dblogd_->log();
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"a", "sentinel"});
  // one an older dblogd installed (no layouts) is installed again at the next connection
  dblogd_->Stop();
  admin.exec("DROP TABLE dblog_ddl.layouts");
  dblogd_ = std::make_unique<DblogdProcess>(args);
  dblogd_->Start();
  {
    auto again = Connect(replay.last_position());
    ASSERT_NO_FATAL_FAILURE(ReadUntil(again, replay, Sentinel()));
  }
  EXPECT_NE(dblogd_->log().find("event=ddl_trigger_installed"), std::string::npos)
      << dblogd_->log();
  EXPECT_EQ(admin.scalar("SELECT count(*) FROM dblog_ddl.layouts WHERE table_oid = '" + s +
                         ".a'::regclass"),
            "1")
      << "the layout of the table the publication holds, noted at the installation";
}

// Failover on 17 and 18: dblogd makes its slot a failover slot; a standby that synchronizes slots
// (here by pg_sync_replication_slots(), as its slotsync worker does with sync_replication_slots)
// holds it; the primary, with synchronized_standby_slots, sends the consumer nothing the standby
// has not received. The primary is killed and the standby promoted: dblogd, given both hosts
// with target_session_attrs=read-write, reconnects to the new primary and streams on from the
// synchronized slot, the consumer on the same session: no bootstrap again, nothing lost, and the
// replay equals the new primary's tables.
class PgoutputFailoverTest : public PgoutputModeTest {};

TEST_P(PgoutputFailoverTest, AFailoverSlotResumesOnThePromotedStandby) {
  const std::string s = kSchema;
  dblog::test::CreateWorkloadTables(*db_, s);
  db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  std::mt19937_64 rng(1700 + static_cast<unsigned>(GetParam()));
  dblog::test::WorkloadOptions options;
  for (int i = 0; i < 20; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
  const std::unique_ptr<Cluster> made_standby = MakeStandby();
  ASSERT_TRUE(made_standby);
  Cluster& standby = *made_standby;
  {
    PgConn admin(cluster_->conninfo());
    admin.exec("ALTER SYSTEM SET synchronized_standby_slots = 'standby1'");
    admin.exec("SELECT pg_reload_conf()");
  }
  const std::string both = BothHosts(standby);
  db_ = std::make_unique<PgConn>(As(*cluster_, kRole));
  dblogd_ = std::make_unique<DblogdProcess>(std::vector<std::string>{
      "--source=" + both, "--source-plugin=pgoutput",
      std::string("--consumer=") + kConsumer + "=" + s + ".*", "--reconnect-max=1",
      "--status-interval=1", "--heartbeat-interval=1"});
  dblogd_->Start();
  PgConn on_standby(standby.conninfo());
  Replay replay;
  auto c = Connect();
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));
  for (int i = 0; i < 30; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  EXPECT_EQ(db_->scalar("SELECT failover FROM pg_replication_slots WHERE slot_name = 'dblog_sink'"),
            "t");
  // the standby's copy of the slot catches up with what the consumer acknowledged
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  std::string synced;
  for (;;) {
    on_standby.exec("SELECT pg_sync_replication_slots()");
    synced = on_standby.scalar(
        "SELECT coalesce((SELECT confirmed_flush_lsn >= " +
        db_->literal(db_->scalar("SELECT confirmed_flush_lsn FROM pg_replication_slots "
                                 "WHERE slot_name = 'dblog_sink'")) +
        "::pg_lsn AND synced FROM pg_replication_slots WHERE slot_name = 'dblog_sink'), false)");
    if (synced == "t" || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(500ms);
  }
  ASSERT_EQ(synced, "t") << "the standby never held the slot where the consumer was";
  // more changes, then the primary dies with some of them possibly unsent
  for (int i = 0; i < 10; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
  db_.reset();
  ASSERT_EQ(dblog::test::Run(std::string(DBLOG_SOURCE_DIR) + "/tests/pg-cluster.sh kill " +
                             cluster_->dir())
                .second,
            0);
  ASSERT_EQ(dblog::test::Run(std::string(DBLOG_SOURCE_DIR) + "/tests/pg-cluster.sh promote " +
                             standby.dir())
                .second,
            0);
  db_ = std::make_unique<PgConn>(As(standby, kRole));
  pinned_ = std::make_unique<PgConn>(As(standby, kRole) + " options='" +
                                     po::OutputSettingsOptions() + "'");
  for (int i = 0; i < 20; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
  ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, Sentinel()));
  ExpectConverged(replay, {"t_int", "t_comp", "t_uuid", "sentinel"});
  EXPECT_EQ(bootstrap_begins_.size(), 1u) << "bootstrapped again";
  EXPECT_GE(dblog::test::CountLogEvents(dblogd_->log(), "source_reconnected"), 1);
  EXPECT_EQ(dblog::test::CountLogEvents(dblogd_->log(), "source_promoted"), 1)
      << "the new timeline, noticed";
}

// PostgreSQL 15 and 16 have no failover slots: after a failover the promoted standby has no slot
// of dblogd's. With --on-slot-lost=reconcile (issue 24 item 2, in this mode): the standby stops
// receiving, the consumer applies commits it will never have (100 marked rows among them), the
// primary dies and the standby is promoted; dblogd, given both hosts, finds the new primary
// without the slot and makes a new one with a whole-table repair of every table in scope instead
// of a bootstrap: no second BootstrapBegin, Welcome.reconcile names the repairs, and once they
// are done the replay equals the new primary (the lost commits' rows gone, its own changes
// there).
class PgoutputReconcileTest : public PgoutputModeTest {};

TEST_P(PgoutputReconcileTest, ASlotLostByAFailoverIsReconciledWithoutANewBootstrap) {
  const std::string s = kSchema;
  dblog::test::CreateWorkloadTables(*db_, s);
  db_->exec("CREATE TABLE " + s + ".sentinel (id int PRIMARY KEY)");
  std::mt19937_64 rng(2410 + static_cast<unsigned>(GetParam()));
  dblog::test::WorkloadOptions options;
  options.large_rows = 300;
  for (int i = 0; i < 20; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
  const std::unique_ptr<Cluster> made_standby = MakeStandby();
  ASSERT_TRUE(made_standby);
  Cluster& standby = *made_standby;
  const std::string both = BothHosts(standby);
  db_ = std::make_unique<PgConn>(As(*cluster_, kRole));
  dblogd_ = std::make_unique<DblogdProcess>(std::vector<std::string>{
      "--source=" + both, "--source-plugin=pgoutput",
      std::string("--consumer=") + kConsumer + "=" + s + ".*", "--on-slot-lost=reconcile",
      "--reconnect-max=1", "--status-interval=1", "--heartbeat-interval=1", "--chunk-size=500"});
  dblogd_->Start();
  Replay replay;
  std::vector<dblog::v1::Welcome> welcomes;
  std::optional<dblog::client::Client> c;
  // reads on through sessions dblogd ends (the source failed over under it), resuming after the
  // replay's last position
  auto read_until = [&](std::uint64_t lsn) {
    const auto deadline = std::chrono::steady_clock::now() + 180s;
    dblog::client::Item item;
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        if (!c) {
          c.emplace(Connect(replay.last_position()));
          welcomes.push_back(c->welcome());
          if (c->welcome().has_reconcile()) replay.Reconciled();
        }
        if (!c->Next(item)) {
          c.reset();
          continue;
        }
      } catch (const dblog::client::ServerError&) {
        c.reset();
        std::this_thread::sleep_for(500ms);
        continue;
      } catch (const dblog::client::TransportError&) {
        c.reset();
        std::this_thread::sleep_for(500ms);
        continue;
      }
      auto* ev = std::get_if<dblog::v1::StreamEvent>(&item);
      if (!ev) continue;
      ASSERT_NO_THROW(replay.Apply(*ev)) << dblogd_->log();
      if (ev->has_bootstrap_begin()) bootstrap_begins_.push_back(ev->bootstrap_begin());
      if (ev->has_commit() || ev->has_bootstrap_end()) {
        try {
          c->Ack(*dblog::client::Client::PositionOf(*ev));
        } catch (const dblog::client::TransportError&) {
          c.reset();  // the session ended under the ack (the failover): resumed after the replay
        }
        if (ev->has_commit() && ev->commit().commit_lsn() >= lsn) return;
      }
    }
    FAIL() << "the stream did not reach " << dblog::common::FormatLsn(lsn) << "\n"
           << dblogd_->log();
  };
  c.emplace(Connect());
  ASSERT_NO_FATAL_FAILURE(ReadUntil(*c, replay, 0));
  for (int i = 0; i < 20; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
  ASSERT_NO_FATAL_FAILURE(read_until(Sentinel()));
  // the standby stops receiving; the consumer applies commits it will never have
  ASSERT_EQ(dblog::test::Run(std::string(DBLOG_SOURCE_DIR) + "/tests/pg-cluster.sh kill " +
                             standby.dir()).second, 0);
  for (int i = 0; i < 15; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
  db_->exec("INSERT INTO " + s +
            ".t_int SELECT g, g, 'lost', NULL, 1 FROM generate_series(900000, 900099) g");
  ASSERT_NO_FATAL_FAILURE(read_until(Sentinel()));
  db_.reset();
  for (const char* step : {"kill", "restart", "promote"})
    ASSERT_EQ(dblog::test::Run(std::string(DBLOG_SOURCE_DIR) + "/tests/pg-cluster.sh " + step +
                               " " + (std::string(step) == "kill" ? cluster_->dir() : standby.dir()))
                  .second,
              0) << step;
  db_ = std::make_unique<PgConn>(As(standby, kRole));
  pinned_ = std::make_unique<PgConn>(As(standby, kRole) + " options='" +
                                     po::OutputSettingsOptions() + "'");
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM app.t_int WHERE id >= 900000"), "0");
  for (int i = 0; i < 15; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
  ASSERT_NO_FATAL_FAILURE(read_until(Sentinel()));
  ASSERT_FALSE(welcomes.empty()) << "the consumer never reconnected";
  const dblog::v1::Welcome& w = welcomes.back();
  ASSERT_TRUE(w.has_reconcile()) << dblogd_->log();
  EXPECT_EQ(w.reconcile().request_ids_size(), 4);
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  for (;;) {
    for (int i = 0; i < 3; ++i) dblog::test::RandomTransaction(*db_, s, rng, options);
    ASSERT_NO_FATAL_FAILURE(read_until(Sentinel()));
    if (db_->scalar("SELECT count(*) FROM dblog.requests WHERE state = 'done' AND reason LIKE "
                    "'reconcile%'") == "4")
      break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "repairs not done\n" << dblogd_->log();
  }
  ASSERT_NO_FATAL_FAILURE(read_until(Sentinel()));
  EXPECT_EQ(bootstrap_begins_.size(), 1u) << "bootstrapped again: the consumer was emptied";
  ExpectConverged(replay, {"t_int", "t_comp", "t_uuid", "sentinel"});
  EXPECT_GE(dblog::test::CountLogEvents(dblogd_->log(), "slot_reconciled"), 1);
}

// What the mode refuses, each with the statement that fixes it: a table in scope without a key,
// a publication of that name that dblogd's role does not own and that does not hold the scope,
// a table with a generated column. Without the flag, the same source (no extension) is refused
// naming it.
TEST_P(PgoutputModeTest, RefusesWhatWouldLoseChangesAndSaysHowToFixIt) {
  const std::string s = kSchema;
  db_->exec("CREATE TABLE " + s + ".a (id int PRIMARY KEY, v text)");
  db_->exec("INSERT INTO " + s + ".a VALUES (1, 'one')");
  db_->exec("CREATE TABLE " + s + ".keyless (v text)");
  StartDblogd();
  auto refused = [&](const std::string& expected) {
    const auto e = Refusal();
    ASSERT_TRUE(e) << "not refused\n" << dblogd_->log();
    EXPECT_EQ(e->code(), dblog::v1::Error::SCOPE_ERROR) << e->what();
    EXPECT_NE(std::string(e->what()).find(expected), std::string::npos) << e->what();
  };
  // dblogd --check says the same before anything is made, with exit status 1
  const auto check = [&] {
    return dblog::test::Run(std::string(DBLOGD_PATH) + " --check --source '" +
                            As(*cluster_, kRole) + "' --source-plugin pgoutput --consumer " +
                            kConsumer + "='" + s + ".*' 2>&1");
  };
  auto [out, status] = check();
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("FAIL  consumer sink               tables in scope have no primary key or "
                     "replica identity index: app.keyless"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("ok    role                        cdc may replicate"), std::string::npos)
      << out;
  refused("have no primary key or replica identity index: app.keyless");
  db_->exec("DROP TABLE " + s + ".keyless");
  std::tie(out, status) = check();
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("ok    consumer sink               publication dblog_sink will be created: "
                     "CREATE PUBLICATION \"dblog_sink\" FOR TABLE \"app\".\"a\""),
            std::string::npos)
      << out;
  EXPECT_EQ(db_->scalar("SELECT count(*) FROM pg_publication"), "0") << "--check made nothing";
  // a publication of dblogd's name, made by another role, holding another table
  PgConn admin(cluster_->conninfo());
  admin.exec("CREATE TABLE public.other (id int PRIMARY KEY)");
  admin.exec("CREATE PUBLICATION dblog_sink FOR TABLE public.other");
  refused("ALTER PUBLICATION \"dblog_sink\" ADD TABLE \"app\".\"a\"");
  std::tie(out, status) = check();
  EXPECT_NE(status, 0) << out;
  EXPECT_NE(out.find("have its owner run: ALTER PUBLICATION \"dblog_sink\" ADD TABLE "
                     "\"app\".\"a\"; ALTER PUBLICATION \"dblog_sink\" DROP TABLE "
                     "public.other"),
            std::string::npos)
      << out;
  admin.exec("DROP PUBLICATION dblog_sink");
  {
    auto c = Connect();
    EXPECT_TRUE(c.welcome().slot_created());
    Replay replay;
    ASSERT_NO_FATAL_FAILURE(ReadUntil(c, replay, 0));  // the bootstrap, acknowledged
  }
  // generated columns: pgoutput does not send them as the extension does
  db_->exec("CREATE TABLE " + s + ".g (id int PRIMARY KEY, twice int GENERATED ALWAYS AS (id * 2) STORED)");
  refused("tables in scope have generated columns, which pgoutput does not send as the "
          "extension does: app.g");
  dblogd_->Stop();
  // the extension's mode on a database without the extension names the flag
  dblogd_ = std::make_unique<DblogdProcess>(std::vector<std::string>{
      "--source=" + As(*cluster_, kRole), std::string("--consumer=other=") + s + ".*"});
  dblogd_->Start();
  const auto e = Refusal("other");
  ASSERT_TRUE(e) << "not refused\n" << dblogd_->log();
  EXPECT_EQ(e->code(), dblog::v1::Error::SOURCE_ERROR) << e->what();
  EXPECT_NE(std::string(e->what()).find("--source-plugin pgoutput"), std::string::npos)
      << e->what();
}

INSTANTIATE_TEST_SUITE_P(Majors, PgoutputModeTest, ::testing::Values(15, 16, 17, 18),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "PostgreSQL" + std::to_string(i.param);
                         });
INSTANTIATE_TEST_SUITE_P(Majors, PgoutputRaceTest, ::testing::Values(15, 16, 17, 18),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "PostgreSQL" + std::to_string(i.param);
                         });
// without failover slots (15, 16): reconcile
INSTANTIATE_TEST_SUITE_P(Majors, PgoutputReconcileTest, ::testing::Values(15, 16),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "PostgreSQL" + std::to_string(i.param);
                         });
// failover slots are PostgreSQL 17's
INSTANTIATE_TEST_SUITE_P(Majors, PgoutputFailoverTest, ::testing::Values(17, 18),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "PostgreSQL" + std::to_string(i.param);
                         });

}  // namespace
