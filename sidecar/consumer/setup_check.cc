// sidecar/consumer/setup_check.cc: see setup_check.h.
#include "consumer/setup_check.h"

#include <string>

#include "bootstrap/scope.h"
#include "consumer/bookkeeping.h"
#include "consumer/ddl_trigger.h"
#include "consumer/pgoutput_source.h"
#include "consumer/pipeline.h"
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

// pgoutput mode (--source-plugin pgoutput): what the server, the role and each consumer's
// publication need, with no extension (docs/pgoutput.md). Nothing is created.
void CheckPgoutputMode(const config::Config& config, pg::Connection& sql, Report& report) {
  report.Ok("mode", "pgoutput (--source-plugin): the dblog extension is not used");
  if (sql.server_version() < 150000)
    report.Fail("server_version", "pgoutput mode needs PostgreSQL 15 or later");
  const std::string wal_level(sql.Exec("SELECT current_setting('wal_level')").value(0, 0));
  if (wal_level == "logical") report.Ok("wal_level", "wal_level is logical");
  else report.Fail("wal_level", "wal_level is " + wal_level +
                                    "; set wal_level = logical and restart the server (on a "
                                    "managed service: docs/managed-postgres.md)");
  pg::Result role = sql.Exec(
      "SELECT r.rolname, r.rolsuper, r.rolreplication OR r.rolsuper OR EXISTS ("
      "         SELECT 1 FROM pg_catalog.pg_roles g"
      "          WHERE g.rolname OPERATOR(pg_catalog.=) 'rds_replication'"
      "            AND pg_catalog.pg_has_role(r.oid, g.oid, 'MEMBER')),"
      "       pg_catalog.has_database_privilege(pg_catalog.current_database(), 'CREATE'),"
      "       pg_catalog.current_setting('max_replication_slots')::pg_catalog.int4"
      "         OPERATOR(pg_catalog.-) (SELECT pg_catalog.count(*)::pg_catalog.int4"
      "                                   FROM pg_catalog.pg_replication_slots)"
      "  FROM pg_catalog.pg_roles r WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER");
  const std::string name(role.value(0, 0));
  const bool create = role.bool_value(0, 3);
  if (role.bool_value(0, 1))
    report.Warn("role", "dblogd's role " + name + " is a superuser: connect as a role with "
                        "REPLICATION and SELECT on the scope only (docs/pgoutput.md)");
  if (role.bool_value(0, 2)) report.Ok("role", name + " may replicate");
  else report.Fail("role", name + " lacks REPLICATION: ALTER ROLE " + name +
                               " REPLICATION (on RDS and Aurora: GRANT rds_replication TO " +
                               name + ")");
  if (role.i64_value(0, 4) < static_cast<std::int64_t>(config.consumers.size()))
    report.Warn("max_replication_slots", std::to_string(role.i64_value(0, 4)) +
                                             " slots free for " +
                                             std::to_string(config.consumers.size()) +
                                             " consumers (each needs one)");
  pg::Result state = sql.Exec(
      "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
      "                 ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
      "                WHERE n.nspname OPERATOR(pg_catalog.=) 'dblog'"
      "                  AND c.relname OPERATOR(pg_catalog.=) 'consumers')");
  if (state.bool_value(0, 0)) report.Ok("dblog.consumers", "exists");
  else if (create) report.Ok("dblog.consumers", "dblogd will create it (schema dblog, one table)");
  else report.Fail("dblog.consumers", name + " may not create schema dblog, where dblogd keeps "
                                      "each consumer's bootstrap state: GRANT CREATE ON DATABASE "
                                      "to it, or have an administrator create it "
                                      "(docs/pgoutput.md)");
  const DdlTriggerState ddl = ReadDdlTriggerState(sql);
  if (ddl == DdlTriggerState::kInstalled && !DdlTriggerKeepsLayouts(sql))
    report.Warn("ddl_trigger", DdlTriggerHasLayouts(sql) ? kDdlLayoutsUntrusted
                                                         : kDdlTriggerWithoutLayouts);
  else if (ddl == DdlTriggerState::kInstalled)
    report.Ok("ddl_trigger", "installed: DDL that changes rows without writing them is repaired, "
                             "columns changed behind the stream are mapped");
  else if (ddl == DdlTriggerState::kAbsent && role.bool_value(0, 1))
    report.Ok("ddl_trigger", "dblogd will install it (its role is a superuser)");
  else
    report.Warn("ddl_trigger", DdlTriggerProblem(ddl));
  for (const auto& [consumer_name, consumer] : config.consumers) {
    const std::string check = "consumer " + consumer_name;
    try {
      PgoutputSource source(consumer, Pipeline::SlotName(consumer_name));
      const PublicationPlan plan = source.PlanPublication(sql);
      if (!plan.refused.empty()) {
        report.Fail(check, plan.refused);
        continue;
      }
      const std::string pub = "publication " + Pipeline::SlotName(consumer_name);
      if (!plan.exists && !create)
        report.Fail(check, pub + " does not exist and " + name + " may not create it: have an "
                                 "administrator run: " + plan.statements.front());
      else if (!plan.exists)
        report.Ok(check, pub + " will be created: " + plan.statements.front());
      else if (!plan.statements.empty())
        report.Ok(check, pub + " will be brought to the scope: " + plan.statements.front());
      else
        report.Ok(check, pub + " holds the " + std::to_string(plan.tables) +
                             " tables of the scope");
      if (plan.tables == 0)
        report.Warn(check, "its scope (" + consumer.scope.text() + ") holds no table yet");
      // every table readable by dblogd's role, none hiding rows behind row-level security
      std::string oids = "{";
      for (const auto& t : bootstrap::EnumerateScopeFromCatalog(sql, consumer.scope))
        oids += (oids.size() > 1 ? "," : "") + std::to_string(t.oid);
      pg::Result unreadable = sql.ExecParams(
          "SELECT pg_catalog.string_agg(pg_catalog.format('%I.%I', n.nspname, c.relname), ', ')"
          "  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
          "    ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
          " WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[])"
          "   AND (NOT pg_catalog.has_table_privilege(c.oid, 'SELECT') OR c.relrowsecurity)",
          {oids + "}"});
      if (!unreadable.is_null(0, 0))
        report.Fail(check, "not readable by " + name + " (no SELECT, or row-level security): " +
                               std::string(unreadable.value(0, 0)));
    } catch (const std::exception& e) {
      report.Fail(check, e.what());
    }
  }
  if (config.consumers.empty())
    report.Warn("consumers", "none configured (--consumer NAME=SCOPE); with --default-scope, "
                             "its consumers are checked when they connect");
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
  if (config.source_plugin == config::SourcePlugin::kPgoutput) {
    try {
      CheckPgoutputMode(config, sql, report);
    } catch (const std::exception& e) {
      report.Fail("pgoutput", e.what());
    }
    out << (report.failed() ? "some checks failed: fix them and run dblogd --check again\n"
                            : "all checks passed\n");
    return !report.failed();
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
