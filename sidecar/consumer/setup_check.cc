// sidecar/consumer/setup_check.cc: see setup_check.h.
#include "consumer/setup_check.h"

#include <string>

#include "bootstrap/scope.h"
#include "consumer/bookkeeping.h"
#include "pg/connection.h"

namespace dblog::consumer {
namespace {

class Report {
 public:
  explicit Report(std::ostream& out) : out_(out) {}
  void Ok(const std::string& check, const std::string& detail) { Line("ok", check, detail); }
  void Warn(const std::string& check, const std::string& detail) { Line("warn", check, detail); }
  void Fail(const std::string& check, const std::string& detail) {
    Line("FAIL", check, detail);
    failed_ = true;
  }
  bool failed() const { return failed_; }

 private:
  void Line(const char* status, const std::string& check, const std::string& detail) {
    std::string pad(check.size() < 28 ? 28 - check.size() : 1, ' ');
    out_ << status << std::string(6 - std::string(status).size(), ' ') << check << pad << detail
         << "\n";
  }
  std::ostream& out_;
  bool failed_ = false;
};

// The server's settings as the extension's dblog.check_setup() judges them.
void CheckServerSettings(pg::Connection& sql, Report& report) {
  pg::Result rows;
  try {
    rows = sql.Exec("SELECT check_name, ok, detail FROM dblog.check_setup()");
  } catch (const pg::Error& e) {
    // it reads settings only superusers and pg_read_all_settings may read
    if (e.sqlstate() != "42501") throw;
    report.Warn("check_setup", "this role may not read every setting dblog.check_setup() "
                               "checks: run SELECT * FROM dblog.check_setup() as a superuser (" +
                                   e.server_message() + ")");
    return;
  }
  for (int i = 0; i < rows.ntuples(); ++i) {
    const std::string name(rows.value(i, 0));
    const std::string detail(rows.value(i, 2));
    if (rows.bool_value(i, 1)) report.Ok(name, detail);
    else if (name == "max_slot_wal_keep_size") report.Warn(name, detail);  // advice, not a stop
    else report.Fail(name, detail);
  }
}

// Each table as the bootstrap's and repairs' reads bind it (dblog._bind_relation): a table
// whose indexes or statistics would run a non-superuser's function when planned is refused
// there, so say so now. Each is locked for a moment (ACCESS SHARE, 2 s at most). True when
// none is refused.
bool RefuseUnbindable(pg::Connection& sql, const std::vector<bootstrap::Table>& tables,
                      const std::string& check, Report& report) {
  bool all = true;
  for (const bootstrap::Table& t : tables) {
    try {
      sql.Exec("BEGIN; SET LOCAL lock_timeout = '2s'");
      bootstrap::BindRelation(sql, t.oid);
      sql.Exec("ROLLBACK");
    } catch (const pg::Error& e) {
      sql.Exec("ROLLBACK");
      report.Fail(check, t.schema + "." + t.name + ": " + e.server_message());
      all = false;
    }
  }
  return all;
}

// What the consumer's first connection would refuse: the role's grants, and the tables of
// its scope (unreadable, hidden by row-level security, without a key).
void CheckConsumer(const config::Config& config, const config::ConsumerConfig& consumer,
                   Report& report, bool& superuser_reported) {
  const std::string check = "consumer " + consumer.name;
  Bookkeeping bookkeeping(config, consumer);
  bool superuser = false;
  const std::vector<std::string> problems = bookkeeping.RoleProblems(&superuser);
  for (const std::string& problem : problems) report.Fail(check, problem);
  if (superuser && !superuser_reported) {
    report.Warn("role", "dblogd's role is a superuser: connect as a role with REPLICATION and "
                        "SELECT on the scope only (docs/operations.md, \"The role dblogd uses\")");
    superuser_reported = true;
  }
  if (!problems.empty()) return;
  try {
    const std::vector<bootstrap::Table> tables =
        bootstrap::EnumerateScope(bookkeeping.Sql(), consumer.scope);
    if (tables.empty())
      report.Warn(check, "its scope (" + consumer.scope.text() + ") holds no table yet");
    else if (RefuseUnbindable(bookkeeping.Sql(), tables, check, report))
      report.Ok(check, "tables in scope: " + std::to_string(tables.size()) +
                           ", each readable, with a key");
  } catch (const std::exception& e) {
    report.Fail(check, e.what());
  }
}

}  // namespace

bool RunSetupChecks(const config::Config& config, std::ostream& out) {
  Report report(out);
  pg::Connection sql;
  try {
    sql = pg::Connection::Open(config.source, false, {{"application_name", "dblogd --check"}});
    pg::Result who = sql.Exec(
        "SELECT current_user, current_database(), current_setting('server_version')");
    report.Ok("connection", "as " + std::string(who.value(0, 0)) + " to database " +
                                std::string(who.value(0, 1)) + ", PostgreSQL " +
                                std::string(who.value(0, 2)));
    sql.CheckServerVersion();
  } catch (const std::exception& e) {
    report.Fail("connection", e.what());
    out << "some checks failed: fix them and run dblogd --check again\n";
    return false;
  }
  bool extension = true;
  try {
    Bookkeeping(config, config::ConsumerConfig{"check", {}, ""}).CheckExtension();
    report.Ok("extension", std::string("dblog ") + kExtensionVersion);
  } catch (const std::exception& e) {
    report.Fail("extension", e.what());
    extension = false;
  }
  if (!extension) {
    // without the extension's checks, at least the one a restart fixes
    const std::string wal_level(sql.Exec("SELECT current_setting('wal_level')").value(0, 0));
    if (wal_level == "logical") report.Ok("wal_level", "wal_level is logical");
    else report.Fail("wal_level", "wal_level is " + wal_level +
                                      "; set wal_level = logical and restart the server");
  } else {
    CheckServerSettings(sql, report);
    bool superuser_reported = false;
    for (const auto& [name, consumer] : config.consumers)
      CheckConsumer(config, consumer, report, superuser_reported);
    if (config.consumers.empty())
      report.Warn("consumers", "none configured (--consumer NAME=SCOPE); with --default-scope, "
                               "its consumers are checked when they connect");
  }
  out << (report.failed() ? "some checks failed: fix them and run dblogd --check again\n"
                          : "all checks passed\n");
  return !report.failed();
}

}  // namespace dblog::consumer
