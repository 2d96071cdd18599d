// tests/cpp/sidecar/dblogd_fixture.h: end-to-end test support: the real dblogd binary as a child
// process on free ports, the real client library, and an oracle that replays a consumer's stream
// and compares it, key by key, with the source tables read through dblog.encode_row().
#pragma once

#include "common/lsn.h"

#include <gtest/gtest.h>
#include <sys/types.h>

#include <functional>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"
#include "dblog/v1/consumer.pb.h"
#include "pg_test_util.h"

namespace dblog::test {

std::uint16_t FreePort();

// Runs `f` when the scope ends, also when an assertion returns early (ends what a test started
// on another thread, then joins it).
class OnScopeExit {
 public:
  explicit OnScopeExit(std::function<void()> f) : f_(std::move(f)) {}
  ~OnScopeExit() {
    if (f_) f_();
  }
  OnScopeExit(const OnScopeExit&) = delete;
  OnScopeExit& operator=(const OnScopeExit&) = delete;

 private:
  std::function<void()> f_;
};

// dblogd as a child process. Its log goes to a temp file (log() reads it).
class DblogdProcess {
 public:
  explicit DblogdProcess(std::vector<std::string> args);
  ~DblogdProcess();
  void Start();
  // RLIMIT_NOFILE of the process, set before it starts (0: inherited).
  void set_fd_limit(long limit) { fd_limit_ = limit; }
  void Signal(int signo);      // e.g. SIGKILL; does not wait
  int Wait();                  // waits for exit, returns the wait status
  void Stop();                 // SIGTERM + wait
  bool running() const { return pid_ > 0; }
  // Once a test has read a port (to configure a client before Start(), say), a restart keeps it.
  std::uint16_t port() const {
    ports_read_ = true;
    return port_;
  }
  std::uint16_t metrics_port() const {
    ports_read_ = true;
    return metrics_port_;
  }
  pid_t pid() const { return pid_; }
  std::string log() const;
  std::string Metrics() const;  // GET /metrics
  long PeakRssKb() const;       // VmHWM of the running process

 private:
  std::vector<std::string> args_;
  std::uint16_t port_;
  std::uint16_t metrics_port_;
  std::string log_path_;
  long fd_limit_ = 0;
  pid_t pid_ = -1;
  mutable bool ports_read_ = false;
  int bind_retries_ = 0;
};

// The state a consumer holds after applying the stream: per relation oid, key bytes -> Row.
class Replay {
 public:
  // Applies one event; throws std::runtime_error on a stream that breaks the protocol rules
  // (decreasing positions, a Change before its Relation, ...).
  void Apply(const dblog::v1::StreamEvent& event);
  // key (serialized Row of key values) -> row (serialized Row), for one table
  std::map<std::string, std::string> Table(std::uint32_t relation_oid) const;
  const std::optional<dblog::v1::Position>& last_position() const { return last_; }
  // Damage for repair tests: the sink loses, changes or gains rows.
  void Erase(std::uint32_t relation_oid, const std::string& key);
  void Corrupt(std::uint32_t relation_oid, const std::string& key);  // a wrong value
  void Copy(std::uint32_t relation_oid, const std::string& from_key, std::int64_t new_id);
  void Put(std::uint32_t relation_oid, const dblog::v1::Row& key, const dblog::v1::Row& row);
  std::uint64_t chunks_seen() const { return chunks_; }
  // A Welcome said Reconcile (changes between two positions are not sent): an update of a row
  // the replay lacks, with unchanged TOAST values, leaves it absent (its repair brings it)
  // instead of failing.
  void Reconciled() { reconciled_ = true; }
  std::uint64_t events() const { return events_; }
  bool restarted_seen() const { return restarted_; }

 private:
  std::map<std::uint32_t, dblog::v1::Relation> relations_;
  std::map<std::uint32_t, std::map<std::string, dblog::v1::Row>> tables_;
  std::optional<dblog::v1::Position> last_;
  std::uint64_t events_ = 0;
  bool restarted_ = false;
  bool reconciled_ = false;
  // the open repair chunk
  std::optional<dblog::v1::ChunkBegin> chunk_;
  std::set<std::string> chunk_keys_;
  std::uint64_t chunks_ = 0;
};

// The source table as the encoder sees it: key bytes -> row bytes.
std::map<std::string, std::string> SourceTable(PgConn& db, const std::string& qualified_table);
std::uint32_t TableOid(PgConn& db, const std::string& qualified_table);

// Fixture: a database-backed test with dblogd. SetUp skips when there is no database.
class DblogdTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  PgConn& db() { return *db_; }
  void ReconnectDb() { db_.emplace(conninfo_); }
  std::string conninfo() const { return conninfo_; }
  // From here on the test's source is another server (a cluster of the test's own, or a
  // multi-host string for a failover): the extension (unless the source serves dblogd
  // --source-plugin=pgoutput, where dblogd makes its own tables), the test's schema and its
  // sentinel table are made there, and the schema made on the shared cluster is dropped.
  enum class SourceMode { kExtension, kPgoutput };
  void UseSource(const std::string& conninfo, SourceMode mode = SourceMode::kExtension);
  // Whether dblog's bookkeeping exists on the source (a pgoutput source before dblogd made it
  // at its consumer's first connection: no).
  bool HasBookkeeping();
  // A fresh schema and consumer name per test.
  const std::string& schema() const { return schema_; }
  const std::string& consumer() const { return consumer_; }
  std::string Slot() const { return "dblog_" + consumer_; }

  // Starts dblogd with a consumer whose scope is this test's schema, plus extra flags.
  DblogdProcess& StartDblogd(std::vector<std::string> extra = {});
  // The same dblogd, not started yet (its ports are chosen): a sink can be pointed at it first.
  DblogdProcess& CreateDblogd(std::vector<std::string> extra = {});
  client::Client Connect(std::optional<dblog::v1::Position> resume_after = std::nullopt,
                         const std::string& name = "");
  // Reads items into `replay` until a Commit whose commit_lsn >= lsn (or BootstrapEnd when
  // lsn == 0 and until_bootstrap_end), acking every Commit. Fails the test after `timeout`.
  void ReadUntil(client::Client& c, Replay& replay, std::uint64_t lsn,
                 std::chrono::seconds timeout = std::chrono::seconds(60), bool ack = true);
  // Commits a marker row in scope and returns its commit LSN (the WAL insert position after it).
  std::uint64_t Sentinel();
  // Asserts that replay equals the source for these tables.
  void ExpectConverged(const Replay& replay, const std::vector<std::string>& tables);
  std::uint64_t ConfirmedFlush();
  // A consumer bootstrapped into `replay` (its bootstrap recorded done), then away, and its
  // slot dropped as a failover loses it: its next connection reconciles (dblogd runs with
  // --on-slot-lost=reconcile).
  void BootstrapThenLoseTheSlot(Replay& replay);
  // A DDL statement while the bootstrap copies: tables a_big (300,000 rows) and b (10), one
  // copy worker, held inside a_big by a consumer that stops reading after 1,000 rows; then
  // `ddl` runs and the consumer reads on. Returns the message of the SOURCE_ERROR the bootstrap
  // ended with ("" when it ended without one).
  std::string DdlDuringTheBootstrap(const std::string& ddl);
  // The next connection redoes the bootstrap (flagged restarted) and converges on `tables`.
  void ExpectBootstrapRedone(const std::vector<std::string>& tables);

  std::unique_ptr<DblogdProcess> dblogd_;
  long dblogd_fd_limit_ = 0;  // RLIMIT_NOFILE for the next StartDblogd (0: inherited)

 private:
  void PrepareSource(const std::string& conninfo, SourceMode mode);

  std::optional<PgConn> db_;
  std::string conninfo_;
  std::string schema_;
  std::string consumer_;
  int sentinel_ = 0;
};

// A role of one test, created (dropped first if a crashed run left it) with `attributes`, and
// dropped with everything it owns when the scope ends, also when an assertion returns early.
class ScopedRole {
 public:
  ScopedRole(PgConn& db, std::string name, const std::string& attributes = "LOGIN");
  ~ScopedRole();
  ScopedRole(const ScopedRole&) = delete;
  ScopedRole& operator=(const ScopedRole&) = delete;

 private:
  PgConn& db_;
  std::string name_;
};

// The key bytes of a single integer key (as the Replay and the emitter see them).
std::string IntKey(std::int64_t id);

// Connects and reads until the server closes with an Error; returns its code (a test failure,
// and CODE_UNSPECIFIED, when it never refuses).
dblog::v1::Error::Code ExpectRefused(const std::function<client::Client()>& connect);

// The value of one series (`name{labels}` as rendered) in a /metrics page; -1 when absent.
double MetricValue(const std::string& metrics, const std::string& series);

// Lines of a log that carry `event=<event>`.
int CountLogEvents(const std::string& log, const std::string& event);

// One raw TCP exchange with a deadline (plain sockets and poll, so that a server that never
// accepts or never answers cannot hang the test): connects, sends `request`, reads until the
// server closes or `timeout` passes. `closed` tells which.
// A TCP connection to 127.0.0.1:port that has sent nothing yet; -1 when refused.
int RawConnect(std::uint16_t port);

struct RawReply {
  std::string bytes;
  bool closed = false;
};
RawReply RawExchange(std::uint16_t port, const std::string& request,
                     std::chrono::milliseconds timeout);

}  // namespace dblog::test
