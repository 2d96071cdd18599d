// sidecar/consumer/bookkeeping.cc: see bookkeeping.h.
#include "consumer/bookkeeping.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/lsn.h"

#include "consumer/chunk_query.h"
#include "consumer/repair_api_sql.h"  // generated from consumer/repair_api.sql
#include "pg/slot.h"

namespace dblog::consumer {

Bookkeeping::Bookkeeping(const config::Config& config, const config::ConsumerConfig& consumer)
    : config_(config), consumer_(consumer), scope_(config::FormatScope(consumer.scope)) {}

pg::Connection& Bookkeeping::Sql() {
  if (Lost())
    sql_ = pg::Connection::Open(config_.source, false,
                                {{"application_name", "dblogd " + consumer_.name}});
  return *sql_;
}

bool Bookkeeping::BestEffort(log::Level level, std::string_view event,
                             std::initializer_list<log::Field> fields,
                             const std::function<void()>& statement) {
  try {
    statement();
    return true;
  } catch (const std::exception& e) {
    log::Write(level, event, fields, log::Field("error", e.what()));
    Reset();
    return false;
  }
}

void Bookkeeping::CheckExtension() {
  pg::Result ext = Sql().Exec("SELECT extversion FROM pg_extension WHERE extname = 'dblog'");
  if (ext.ntuples() == 0)
    throw std::runtime_error(
        "the dblog extension is not installed in the source database: run CREATE EXTENSION "
        "dblog there (see docs/operations.md), or, where it cannot be installed (a managed "
        "service, PostgreSQL 16-18), start dblogd with --source-plugin pgoutput "
        "(docs/pgoutput.md)");
  if (ext.value(0, 0) != kExtensionVersion)
    throw std::runtime_error(
        "the dblog extension in the source database is version " + std::string(ext.value(0, 0)) +
        "; this dblogd needs " + std::string(kExtensionVersion) +
        ": run ALTER EXTENSION dblog UPDATE there (as its owner; see docs/operations.md, "
        "\"Upgrading the extension\")");
}

std::vector<std::string> Bookkeeping::RoleProblems(bool* superuser) {
  std::vector<std::string> problems;
  pg::Connection& sql = Sql();
  pg::Result r = sql.Exec(
      "SELECT current_user, (SELECT rolreplication OR rolsuper FROM pg_roles"
      "                       WHERE rolname = current_user),"
      " has_table_privilege('dblog.consumers', 'SELECT, INSERT, UPDATE')"
      "  AND has_table_privilege('dblog.request_queue', 'SELECT, INSERT')"
      "  AND has_table_privilege('dblog.request_progress', 'SELECT, INSERT, UPDATE')"
      "  AND has_sequence_privilege('dblog.request_queue_id_seq', 'USAGE'),"
      " (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)");
  const std::string role(r.value(0, 0));
  *superuser = r.bool_value(0, 3);
  if (!r.bool_value(0, 1))
    problems.push_back("role " + role +
                       " lacks the REPLICATION attribute dblogd needs for slots: ALTER ROLE " +
                       role + " REPLICATION");
  if (!r.bool_value(0, 2))
    problems.push_back(
        "role " + role + " cannot write dblog's bookkeeping: GRANT SELECT, INSERT, UPDATE ON "
        "dblog.consumers, dblog.request_progress TO " + role + "; GRANT SELECT, INSERT ON "
        "dblog.request_queue TO " + role + "; GRANT USAGE ON SEQUENCE dblog.request_queue_id_seq "
        "TO " + role);
  // One pass over the tables in scope: those the role may not read, and those whose
  // row-level security would hide rows from it (dblogd reads with row_security = off, so they
  // would fail later; say so now, by name).
  pg::Result tables = sql.ExecParams(
      "SELECT string_agg(format('%I.%I', n.nspname, c.relname), ', ' ORDER BY 1)"
      "         FILTER (WHERE NOT has_table_privilege(c.oid, 'SELECT')),"
      "       string_agg(format('%I.%I', n.nspname, c.relname), ', ' ORDER BY 1)"
      "         FILTER (WHERE c.relrowsecurity"
      "           AND NOT (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user)"
      "           AND (c.relforcerowsecurity OR NOT pg_has_role(c.relowner, 'USAGE')))"
      "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
      " WHERE c.relkind = 'r' AND c.relpersistence = 'p'"
      "   AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'dblog')"
      "   AND n.nspname NOT LIKE 'pg\\_%' AND dblog._scope_holds($1, c.oid)",
      {scope_});
  if (!tables.is_null(0, 0))
    problems.push_back("role " + role + " may not SELECT from tables in scope: " +
                       std::string(tables.value(0, 0)) + " (GRANT SELECT ON ... TO " + role + ")");
  if (!tables.is_null(0, 1))
    problems.push_back(
        "row-level security is enabled on tables in scope: " + std::string(tables.value(0, 1)) +
        "; role " + role + " would see only the rows their policies show it, so dblogd refuses "
        "to read them (ALTER ROLE " + role + " BYPASSRLS, or leave them out of the consumer's "
        "scope)");
  return problems;
}

void Bookkeeping::Preflight() {
  bool superuser = false;
  const std::vector<std::string> problems = RoleProblems(&superuser);
  // A table's owner decides what runs when its table is read (PostgreSQL runs some of it as
  // the reader, whatever dblogd does): as a superuser, dblogd would lend them everything.
  if (superuser)
    log::Warn("source_role_is_superuser",
              {{"consumer", consumer_.name},
               {"hint", "connect as a role with REPLICATION and SELECT on the scope only "
                        "(docs/operations.md, The role dblogd uses)"}});
  if (!problems.empty()) throw std::runtime_error(problems.front());
}

namespace {

// dblog.consumers as the extension makes it (plugin/dblog--0.1.sql, with 0.6's columns).
// Without IF NOT EXISTS: made in one transaction after the check that they are absent, so
// that a schema or a relation another role slips in between fails the statement instead of
// being used.
constexpr const char* kConsumersTable =
    "CREATE TABLE dblog.consumers ("
    "  name pg_catalog.text PRIMARY KEY,"
    "  slot_name pg_catalog.text NOT NULL,"
    "  scope pg_catalog.text NOT NULL,"
    "  bootstrap_state pg_catalog.text NOT NULL DEFAULT 'pending'"
    "    CHECK (bootstrap_state OPERATOR(pg_catalog.=) ANY"
    "           ('{pending,copying,done,skipped}'::pg_catalog.text[])),"
    "  consistent_point pg_catalog.pg_lsn,"
    "  rows_copied pg_catalog.int8,"
    "  created_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),"
    "  bootstrap_started_at pg_catalog.timestamptz,"
    "  bootstrap_done_at pg_catalog.timestamptz,"
    "  timeline pg_catalog.int8,"
    "  failed_over_at pg_catalog.timestamptz,"
    "  failover pg_catalog.text);"
    " REVOKE ALL ON TABLE dblog.consumers FROM PUBLIC";

// Whether a whole-table copy of table `oid` (an SQL expression) for consumer `consumer` (a
// parameter) is queued and not started yet: one for that consumer or for every consumer, made
// since the consumer's row was (an older one belongs to a consumer of the same name started
// afresh), not cancelled, with no progress of that consumer's. Such a copy is enough: another
// one is not queued (a table added to the scope, or entering it by DDL).
std::string CopyQueuedNotStarted(const std::string& oid, const std::string& consumer) {
  return "EXISTS (SELECT 1 FROM dblog.request_queue q"
         " WHERE q.table_oid = " + oid + " AND q.kind = 'table' AND NOT q.cancelled"
         "   AND (q.consumer IS NULL OR q.consumer = " + consumer + ")"
         "   AND q.requested_at >= (SELECT created_at FROM dblog.consumers WHERE name = " +
         consumer + ")"
         "   AND NOT EXISTS (SELECT 1 FROM dblog.request_progress p"
         "                    WHERE p.request_id = q.id AND p.consumer = " + consumer + "))";
}

}  // namespace

void Bookkeeping::EnsureConsumersTable() {
  pg::Connection& sql = Sql();
  // Trusted: the schema and the table are this role's, or the extension's (installed by a
  // superuser); a missing one is made by this role.
  const char* kTrusted =
      "SELECT n.oid IS NOT NULL,"
      "       c.oid IS NOT NULL,"
      "       EXISTS (SELECT 1 FROM pg_catalog.pg_extension e"
      "                WHERE e.extname OPERATOR(pg_catalog.=) 'dblog'"
      "                  AND e.extnamespace OPERATOR(pg_catalog.=) n.oid)"
      "       OR (n.nspowner OPERATOR(pg_catalog.=) r.oid"
      "           AND (c.oid IS NULL OR (c.relowner OPERATOR(pg_catalog.=) r.oid"
      "                                  AND c.relkind OPERATOR(pg_catalog.=) 'r')))"
      "  FROM pg_catalog.pg_roles r"
      "  LEFT JOIN pg_catalog.pg_namespace n ON n.nspname OPERATOR(pg_catalog.=) 'dblog'"
      "  LEFT JOIN pg_catalog.pg_class c ON c.relnamespace OPERATOR(pg_catalog.=) n.oid"
      "        AND c.relname OPERATOR(pg_catalog.=) 'consumers'"
      " WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER";
  pg::Result r = sql.Exec(kTrusted);
  if (r.bool_value(0, 0) && !r.bool_value(0, 2))
    throw std::runtime_error(
        "schema dblog or its table consumers in the source database belongs to another role "
        "than dblogd's: whoever controls it decides whether consumers bootstrap. Drop it (DROP "
        "SCHEMA dblog CASCADE, as its owner) and dblogd makes its own, or have it owned by "
        "dblogd's role");
  if (r.bool_value(0, 1)) return;
  try {
    sql.Exec("BEGIN");
    if (!r.bool_value(0, 0)) sql.Exec("CREATE SCHEMA dblog");
    sql.Exec(kConsumersTable);
    sql.Exec("COMMIT");
  } catch (const pg::Error& e) {
    EndTransaction();
    throw std::runtime_error(
        "cannot create dblog.consumers, the table where dblogd keeps whether each consumer's "
        "bootstrap finished: " +
        e.server_message() +
        " (grant dblogd's role CREATE on the "
        "database, or have an administrator run, and then ALTER SCHEMA dblog OWNER TO and "
        "ALTER TABLE dblog.consumers OWNER TO dblogd's role: CREATE SCHEMA IF NOT EXISTS dblog; " +
        std::string(kConsumersTable) + ")");
  }
}

std::string Bookkeeping::EnsureRepairApi() {
  pg::Connection& sql = Sql();
  // Per table of the API: exists, and is a table of this role's; whether the schema is the
  // extension's (EnsureConsumersTable refused one that is neither the extension's nor ours).
  pg::Result r = sql.Exec(
      "SELECT t.name, c.oid IS NOT NULL,"
      "       c.relkind OPERATOR(pg_catalog.=) 'r' AND c.relowner OPERATOR(pg_catalog.=) r.oid,"
      "       EXISTS (SELECT 1 FROM pg_catalog.pg_extension e"
      "                WHERE e.extname OPERATOR(pg_catalog.=) 'dblog'"
      "                  AND e.extnamespace OPERATOR(pg_catalog.=) n.oid)"
      "  FROM pg_catalog.pg_roles r CROSS JOIN pg_catalog.pg_namespace n CROSS JOIN"
      "       pg_catalog.unnest('{request_queue,request_progress,watermarks}'::pg_catalog.text[])"
      "         AS t(name)"
      "  LEFT JOIN pg_catalog.pg_class c ON c.relname OPERATOR(pg_catalog.=) t.name"
      "        AND c.relnamespace OPERATOR(pg_catalog.=) n.oid"
      " WHERE r.rolname OPERATOR(pg_catalog.=) CURRENT_USER"
      "   AND n.nspname OPERATOR(pg_catalog.=) 'dblog'");
  bool queue = false, watermarks = false, extension = false;
  for (int i = 0; i < r.ntuples(); ++i) {
    const std::string name(r.value(i, 0));
    extension = r.bool_value(i, 3);
    if (!r.bool_value(i, 1)) continue;
    if (!extension && !r.bool_value(i, 2))
      throw std::runtime_error("dblog." + name +
                               " in the source database is not a table of dblogd's role: "
                               "whoever controls it decides what dblogd repairs. Drop it (as "
                               "its owner) and dblogd makes its own");
    if (name == "request_queue") queue = true;
    if (name == "watermarks") watermarks = watermarks || !extension || r.bool_value(i, 2);
  }
  if (watermarks) return "";
  if (extension)
    return "the dblog extension is installed in the source database and its schema has no "
           "dblog.watermarks of dblogd's role (repairs in pgoutput mode need one): run dblogd "
           "in the extension's mode (without --source-plugin pgoutput)";
  if (queue)
    throw std::runtime_error("dblog.request_queue exists without dblog.watermarks: drop schema "
                             "dblog's repair tables (as their owner) and dblogd makes them again");
  try {
    sql.Exec("BEGIN");
    sql.Exec(kRepairApiSql);
    sql.Exec("COMMIT");
  } catch (const pg::Error& e) {
    EndTransaction();
    throw std::runtime_error("cannot create the repair API in schema dblog (sidecar/consumer/"
                             "repair_api.sql): " + e.server_message());
  }
  log::Info("repair_api_created", {{"consumer", consumer_.name}, {"schema", "dblog"}});
  return "";
}

DdlTriggerState Bookkeeping::EnsureDdlTrigger() {
  pg::Connection& sql = Sql();
  EnsureDdlTakenTable(sql);
  ddl_taken_ready_ = true;
  DdlTriggerState state = ReadDdlTriggerState(sql);
  // absent, or installed by an older dblogd (no layouts): a superuser dblogd (re)installs it
  const bool outdated = state == DdlTriggerState::kInstalled && !DdlTriggerHasLayouts(sql);
  if ((state == DdlTriggerState::kAbsent || outdated) &&
      sql.Exec("SELECT rolsuper FROM pg_catalog.pg_roles"
               " WHERE rolname OPERATOR(pg_catalog.=) CURRENT_USER")
          .bool_value(0, 0)) {
    try {
      InstallDdlTrigger(sql);
      state = ReadDdlTriggerState(sql);
      log::Info("ddl_trigger_installed", {{"consumer", consumer_.name}, {"schema", "dblog_ddl"}});
    } catch (const pg::Error& e) {
      log::Warn("ddl_trigger_install_failed",
                {{"consumer", consumer_.name}, {"error", e.server_message()}});
    }
  }
  if (state != DdlTriggerState::kInstalled)
    log::Warn("ddl_trigger_missing",
              {{"consumer", consumer_.name}, {"reason", DdlTriggerProblem(state)}});
  else if (!DdlTriggerKeepsLayouts(sql))
    log::Warn("ddl_trigger_outdated",
              {{"consumer", consumer_.name},
               {"reason", DdlTriggerHasLayouts(sql) ? kDdlLayoutsUntrusted
                                                    : kDdlTriggerWithoutLayouts}});
  return state;
}

void Bookkeeping::TakeDdlRepairs() {
  if (!ddl_taken_ready_) return;  // repairs cannot run (EnsureDdlTrigger was not called)
  pg::Connection& sql = Sql();
  sql.Exec("BEGIN");
  std::vector<DdlRepair> queued;
  std::vector<DdlRefusal> refused;
  try {
    queued = consumer::TakeDdlRepairs(sql, &refused);
    sql.Exec("COMMIT");
  } catch (...) {
    EndTransaction();
    throw;
  }
  for (const DdlRepair& q : queued)
    log::Info("ddl_repair_queued", {{"consumer", consumer_.name},
                                    {"request", q.request},
                                    {"table", q.table},
                                    {"reason", q.reason}});
  for (const DdlRefusal& r : refused)
    log::Warn("ddl_repair_not_queued",
              {{"consumer", consumer_.name}, {"table_oid", r.table_oid}, {"error", r.error}});
}

std::optional<std::string> Bookkeeping::BootstrapState() {
  pg::Result row = Sql().ExecParams(
      "SELECT bootstrap_state FROM dblog.consumers WHERE name = $1", {consumer_.name});
  if (row.ntuples() == 0) return std::nullopt;
  return std::string(row.value(0, 0));
}

std::pair<std::string, std::int64_t> Bookkeeping::SlotState(const std::string& slot) {
  pg::Result row = Sql().ExecParams(
      "SELECT wal_status, safe_wal_size FROM pg_catalog.pg_replication_slots"
      " WHERE slot_name = $1",
      {slot});
  if (row.ntuples() == 0) return {"missing", -1};
  return {row.is_null(0, 0) ? std::string("unknown") : std::string(row.value(0, 0)),
          row.is_null(0, 1) ? -1 : std::stoll(std::string(row.value(0, 1)))};
}

void Bookkeeping::RecordSkippedBootstrap(const std::string& slot,
                                         std::uint64_t consistent_point) {
  Sql().ExecParams(
      "INSERT INTO dblog.consumers (name, slot_name, scope, bootstrap_state, consistent_point)"
      " VALUES ($1, $2, $3, 'skipped', $4::pg_lsn) ON CONFLICT (name) DO UPDATE SET"
      " slot_name = EXCLUDED.slot_name, scope = EXCLUDED.scope, bootstrap_state = 'skipped',"
      " consistent_point = EXCLUDED.consistent_point",
      {consumer_.name, slot, scope_, common::FormatLsn(consistent_point)});
}

void Bookkeeping::RecordBootstrapStarted(const std::string& slot,
                                         std::uint64_t consistent_point) {
  Sql().ExecParams(
      "INSERT INTO dblog.consumers (name, slot_name, scope, bootstrap_state, consistent_point,"
      " bootstrap_started_at, bootstrap_done_at, rows_copied)"
      " VALUES ($1, $2, $3, 'copying', $4::pg_lsn, now(), NULL, NULL)"
      " ON CONFLICT (name) DO UPDATE SET slot_name = EXCLUDED.slot_name, scope = EXCLUDED.scope,"
      " bootstrap_state = 'copying', consistent_point = EXCLUDED.consistent_point,"
      " bootstrap_started_at = now(), bootstrap_done_at = NULL, rows_copied = NULL",
      {consumer_.name, slot, scope_, common::FormatLsn(consistent_point)});
}

bool Bookkeeping::MarkBootstrapDone(std::uint64_t rows) {
  return BestEffort(log::Level::kWarn, "bootstrap_mark_failed", {{"consumer", consumer_.name}},
                    [&] {
                      Sql().ExecParams(
                          "UPDATE dblog.consumers SET bootstrap_state = 'done',"
                          " bootstrap_done_at = now(), rows_copied = $2"
                          " WHERE name = $1 AND bootstrap_state = 'copying'",
                          {consumer_.name, std::to_string(rows)});
                    });
}

bool Bookkeeping::QueueTablesAddedToScope(const std::vector<bootstrap::Table>& tables) {
  pg::Connection& sql = Sql();
  pg::Result old = sql.ExecParams("SELECT scope FROM dblog.consumers WHERE name = $1",
                                  {consumer_.name});
  if (old.ntuples() == 0 || old.value(0, 0) == scope_) return false;
  const config::Scope before = config::ParseScope(std::string(old.value(0, 0)));
  sql.Exec("BEGIN");
  for (const auto& t : tables) {
    if (bootstrap::ScopeMatches(before, t.schema, t.name)) continue;
    pg::Result r = sql.ExecParams(
        "INSERT INTO dblog.request_queue (table_oid, table_name, kind, consumer, key_columns,"
        " key_types) SELECT $1::oid, $1::oid::regclass::text, 'table', $2, k.key_columns,"
        " k.key_types FROM dblog._identity_key($1::oid::regclass) AS k"
        " WHERE NOT " + CopyQueuedNotStarted("$1::oid", "$2") + " RETURNING id",
        {std::to_string(t.oid), consumer_.name});
    log::Info("scope_table_added", {{"consumer", consumer_.name},
                                    {"table", t.schema + "." + t.name},
                                    {"copy", r.ntuples() > 0 ? "queued" : "already_queued"}});
  }
  sql.ExecParams("UPDATE dblog.consumers SET scope = $2 WHERE name = $1",
                 {consumer_.name, scope_});
  sql.Exec("COMMIT");
  return true;
}

std::optional<std::uint64_t> Bookkeeping::RecordTimeline(std::uint64_t timeline,
                                                         const std::string& action) {
  if (!HasTimelineColumn()) return std::nullopt;
  pg::Connection& sql = Sql();
  // The row's timeline before, and the new one with the failover when they differ (no row yet:
  // a consumer whose bootstrap has not begun; it is recorded at its next stream start).
  pg::Result r = sql.ExecParams(
      "UPDATE dblog.consumers AS c SET timeline = $2::pg_catalog.int8,"
      " failed_over_at = CASE WHEN b.timeline OPERATOR(pg_catalog.<>) $2::pg_catalog.int8"
      "   THEN pg_catalog.now() ELSE c.failed_over_at END,"
      " failover = CASE WHEN b.timeline OPERATOR(pg_catalog.<>) $2::pg_catalog.int8"
      "   THEN pg_catalog.format('timeline %s to %s: %s', b.timeline, $2, $3::pg_catalog.text)"
      "   ELSE c.failover END"
      " FROM (SELECT timeline FROM dblog.consumers WHERE name OPERATOR(pg_catalog.=) $1"
      "       FOR UPDATE) AS b"
      " WHERE c.name OPERATOR(pg_catalog.=) $1 RETURNING b.timeline",
      {consumer_.name, std::to_string(timeline), action});
  if (r.ntuples() == 0 || r.is_null(0, 0)) return std::nullopt;
  return r.u64_value(0, 0);
}

bool Bookkeeping::HasTimelineColumn() {
  // A dblog.consumers made by a dblogd in pgoutput mode before 0.6 has no such column: the
  // failover is then only in the log and /metrics.
  if (!has_timeline_column_)
    has_timeline_column_ =
        Sql().Exec("SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid OPERATOR(pg_catalog.=)"
                   " 'dblog.consumers'::pg_catalog.regclass AND attname OPERATOR(pg_catalog.=)"
                   " 'failover' AND NOT attisdropped")
            .ntuples() > 0;
  return *has_timeline_column_;
}

void Bookkeeping::RecordReconcile(const std::string& action) {
  if (!HasTimelineColumn()) return;
  // (RecordTimeline may have written it already, after "timeline A to B: ")
  Sql().ExecParams("UPDATE dblog.consumers SET failover = $2::pg_catalog.text"
                   " WHERE name OPERATOR(pg_catalog.=) $1 AND (failover IS NULL OR"
                   " pg_catalog.strpos(failover, $2::pg_catalog.text) OPERATOR(pg_catalog.=) 0)",
                   {consumer_.name, action});
}

std::optional<std::uint64_t> Bookkeeping::ReconcilePoint() {
  if (!HasTimelineColumn()) return std::nullopt;
  pg::Result r = Sql().ExecParams(
      "SELECT pg_catalog.substring(failover, 'reconciled: a new slot at ([0-9A-F]+/[0-9A-F]+)')"
      " FROM dblog.consumers WHERE name OPERATOR(pg_catalog.=) $1",
      {consumer_.name});
  if (r.ntuples() == 0 || r.is_null(0, 0)) return std::nullopt;
  return common::ParseLsn(r.value(0, 0));
}

std::vector<std::uint64_t> Bookkeeping::QueueReconcile(const std::vector<bootstrap::Table>& tables) {
  pg::Connection& sql = Sql();
  std::vector<std::uint32_t> oids;
  for (const auto& t : tables) oids.push_back(t.oid);
  sql.Exec("BEGIN");
  std::vector<std::uint64_t> ids = QueueWholeTables(oids, "reconcile: the slot was gone");
  sql.Exec("COMMIT");
  return ids;
}

std::vector<std::uint64_t> Bookkeeping::QueueWholeTables(const std::vector<std::uint32_t>& oids,
                                                         const std::string& reason) {
  std::vector<std::uint64_t> ids;
  for (std::uint32_t oid : oids) {
    pg::Result r = Sql().ExecParams(
        "INSERT INTO dblog.request_queue (table_oid, table_name, kind, consumer, key_columns,"
        " key_types, reason) SELECT $1::oid, $1::oid::regclass::text, 'table', $2,"
        " k.key_columns, k.key_types, $3"
        " FROM dblog._identity_key($1::oid::regclass) AS k RETURNING id",
        {std::to_string(oid), consumer_.name, reason});
    if (r.ntuples() == 1) ids.push_back(r.u64_value(0, 0));
  }
  return ids;
}

void Bookkeeping::PadWalPast(std::uint64_t lsn) {
  constexpr std::uint64_t kMaxGap = std::uint64_t{1} << 30;
  constexpr std::uint64_t kStep = std::uint64_t{16} << 20;
  const std::uint64_t start = CurrentWalInsertLsn();
  if (start > lsn) return;
  if (lsn - start > kMaxGap)
    throw std::runtime_error("the consumer's resume position " + common::FormatLsn(lsn) +
                             " is more than 1 GiB past the source's WAL (" +
                             common::FormatLsn(start) +
                             "): it does not come from this source's stream");
  for (std::uint64_t now = start; now <= lsn; now = CurrentWalInsertLsn())
    Sql().ExecParams("SELECT pg_catalog.pg_logical_emit_message(false, 'dblogd.pad',"
                     " pg_catalog.repeat('x', $1::pg_catalog.int4))",
                     {std::to_string(std::min(kStep, lsn - now + 1024))});
  log::Info("wal_padded", {{"consumer", consumer_.name},
                           {"from", common::FormatLsn(start)},
                           {"past", common::FormatLsn(lsn)}});
}

Bookkeeping::Entering Bookkeeping::QueueTableEnteringScope(std::uint32_t oid,
                                                           std::uint64_t xid) {
  pg::Connection& sql = Sql();
  const std::string table_oid = std::to_string(oid);
  // The DDL's commit reaches us before every snapshot sees it (WAL order is not visibility
  // order): read the catalogs once a new snapshot does, or the table still has its old name.
  for (int attempt = 0; xid != 0; ++attempt) {
    pg::Result visible = sql.ExecParams(
        "SELECT pg_catalog.pg_visible_in_snapshot($1::text::pg_catalog.xid8,"
        "                                         pg_catalog.pg_current_snapshot())",
        {std::to_string(xid)});
    if (visible.bool_value(0, 0)) break;
    if (attempt >= 500)
      throw std::runtime_error("the DDL's transaction " + std::to_string(xid) +
                               " is decoded but still not visible after 5 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pg::Result r = sql.ExecParams(
      "SELECT dblog._scope_holds($2, c.oid), k.key_columns IS NOT NULL, " +
          CopyQueuedNotStarted("c.oid", "$3") +
          "  FROM pg_catalog.pg_class c LEFT JOIN LATERAL dblog._identity_key(c.oid::regclass) AS k"
      "       ON true"
      " WHERE c.oid = $1::oid AND c.relkind = 'r' AND c.relpersistence = 'p'",
      {table_oid, scope_, consumer_.name});
  if (r.ntuples() == 0) return Entering::kGone;
  if (!r.bool_value(0, 0)) return Entering::kOutOfScopeNow;
  if (!r.bool_value(0, 1)) return Entering::kKeyless;
  if (r.bool_value(0, 2)) return Entering::kAlreadyQueued;
  sql.ExecParams(
      "INSERT INTO dblog.request_queue (table_oid, table_name, kind, consumer, key_columns,"
      " key_types) SELECT $1::oid, $1::oid::regclass::text, 'table', $2, k.key_columns,"
      " k.key_types FROM dblog._identity_key($1::oid::regclass) AS k",
      {table_oid, consumer_.name});
  return Entering::kQueued;
}

std::string Bookkeeping::Blockers(int pid) {
  try {
    pg::Result r = Sql().ExecParams(
        "SELECT a.pid, coalesce(a.datname, ''), coalesce(a.usename, ''),"
        "       coalesce(a.application_name, ''), coalesce(a.state, ''),"
        "       coalesce(a.backend_xid::text, ''),"
        "       coalesce(extract(epoch FROM now() - a.xact_start)::bigint::text, '')"
        "  FROM pg_catalog.pg_stat_activity a"
        " WHERE a.pid = ANY (pg_catalog.pg_blocking_pids($1::int)) ORDER BY a.xact_start",
        {std::to_string(pid)});
    std::string out;
    for (int i = 0; i < r.ntuples(); ++i) {
      if (!out.empty()) out += "; ";
      out += "pid " + std::string(r.value(i, 0)) + " (database " + std::string(r.value(i, 1)) +
             ", user " + std::string(r.value(i, 2)) + ", application '" +
             std::string(r.value(i, 3)) + "', " + std::string(r.value(i, 4)) + ", xid " +
             std::string(r.value(i, 5)) + ", transaction open " + std::string(r.value(i, 6)) +
             " s)";
    }
    return out.empty() ? "no transaction holds it now (it is between two waits)" : out;
  } catch (const std::exception& e) {
    return std::string("unknown: ") + e.what();
  }
}

std::uint64_t Bookkeeping::CurrentWalInsertLsn() {
  return common::ParseLsn(std::string(
      Sql().Exec("SELECT pg_catalog.pg_current_wal_insert_lsn()::text").value(0, 0)));
}

std::uint64_t Bookkeeping::NextXid() {
  // Not pg_snapshot_xmax(pg_current_snapshot()): that is one past the latest *completed* xid,
  // and a transaction committed in the WAL (streamed and acknowledged before this start) but
  // not yet visible (waiting for a synchronous standby) can be newer than all of them
  // (window_exhaustive_test found it). An xid taken and rolled back is above every xid that
  // began before; the rollback waits for no standby.
  pg::Connection& sql = Sql();
  sql.Exec("BEGIN");
  const std::uint64_t xid = sql.Exec("SELECT pg_catalog.pg_current_xact_id()").u64_value(0, 0);
  sql.Exec("ROLLBACK");
  return xid;
}

std::uint64_t Bookkeeping::OldestRunningXid() {
  return Sql()
      .Exec("SELECT pg_catalog.pg_snapshot_xmin(pg_catalog.pg_current_snapshot())")
      .u64_value(0, 0);
}

std::vector<RepairRequest> Bookkeeping::LoadRequests(const std::set<std::uint64_t>& known) {
  pg::Result r = Sql().ExecParams(
      "SELECT q.id, q.table_oid, coalesce(q.from_key::text, ''), coalesce(q.to_key::text, ''),"
      "       coalesce(q.keys::text, ''), q.kind, " + HexList("k.key_columns") + ", " +
          HexList("k.key_types") + ", coalesce(p.chunks_done, 0),"
      "       coalesce(p.rows_emitted, 0), coalesce(p.deletes_emitted, 0),"
      "       coalesce(p.resume_key::text, ''), coalesce(p.keys_done, 0),"
      "       format('%I.%I', n.nspname, c.relname), n.nspname, c.relname"
      "  FROM dblog.request_queue q"
      "  JOIN pg_class c ON c.oid = q.table_oid JOIN pg_namespace n ON n.oid = c.relnamespace"
      "  LEFT JOIN dblog.request_progress p ON p.request_id = q.id AND p.consumer = $1,"
      // the key's columns and the types to compare them as, from the catalogs now (never
      // from the queue: a row there is no reason to cast to a type)
      "  LATERAL dblog._identity_key(q.table_oid::regclass) AS k"
      " WHERE NOT q.cancelled AND (q.consumer IS NULL OR q.consumer = $1)"
      "   AND k.key_columns IS NOT NULL"
      "   AND coalesce(p.state, 'running') = 'running'"
      "   AND q.requested_at >= (SELECT created_at FROM dblog.consumers WHERE name = $1)"
      // known ones are not read again (pgoutput mode polls every second; a key list is large)
      "   AND q.id <> ALL ($2::int8[])"
      " ORDER BY q.id",
      {consumer_.name, [&] {
         std::string ids = "{";
         for (std::uint64_t id : known) ids += (ids.size() > 1 ? "," : "") + std::to_string(id);
         return ids + "}";
       }()});
  std::vector<RepairRequest> out;
  for (int i = 0; i < r.ntuples(); ++i) {
    RepairRequest q;
    q.id = r.u64_value(i, 0);
    // the scope as dblogd matches it (the plugin's matcher, config/): also in pgoutput mode,
    // which has no SQL function for it
    if (known.count(q.id) || !consumer_.scope.Holds(std::string(r.value(i, 14)), std::string(r.value(i, 15)))) continue;
    q.table_oid = static_cast<std::uint32_t>(r.u64_value(i, 1));
    q.from_key = std::string(r.value(i, 2));
    q.to_key = std::string(r.value(i, 3));
    q.keys = std::string(r.value(i, 4));
    q.kind = std::string(r.value(i, 5));
    q.key_columns = SplitHexList(r.value(i, 6));
    q.key_types = SplitHexList(r.value(i, 7));
    q.chunks = static_cast<std::uint32_t>(r.u64_value(i, 8));
    q.rows = r.u64_value(i, 9);
    q.deletes = r.u64_value(i, 10);
    q.resume_key = std::string(r.value(i, 11));
    q.keys_done = r.u64_value(i, 12);
    q.table = std::string(r.value(i, 13));
    out.push_back(std::move(q));
  }
  return out;
}

void Bookkeeping::EndTransaction() {
  if (!sql_ || !sql_->ok() || !sql_->in_transaction()) return;
  try {
    sql_->Exec("ROLLBACK");
  } catch (const std::exception&) {
    Reset();
  }
}

std::string UntrustedOwnerMessage(const std::string& tables) {
  return "pgoutput mode repairs only tables whose owner and whose schema's owner are dblogd's "
         "role or a superuser, and " + tables +
         " belongs to another role: reading a chunk plans a query, which runs the table owner's "
         "index and statistics expressions as dblogd's role, and a schema's owner could swap a "
         "view in under the name (the extension's mode guards both in C). Have dblogd's role own "
         "the table and its schema (ALTER TABLE ... OWNER TO, ALTER SCHEMA ... OWNER TO), leave "
         "it out of the scope, or use the extension's mode (docs/pgoutput.md)";
}

std::vector<std::string> Bookkeeping::UntrustedOwners(const std::vector<std::uint32_t>& oids) {
  std::vector<std::string> out;
  if (oids.empty()) return out;
  std::string list = "{";
  for (std::uint32_t oid : oids) list += (list.size() > 1 ? "," : "") + std::to_string(oid);
  pg::Result r = Sql().ExecParams(
      "SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) FROM pg_catalog.pg_class c"
      "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
      " WHERE c.oid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.oid[]) AND NOT " +
          std::string(kTrustedOwners),
      {list + "}"});
  for (int i = 0; i < r.ntuples(); ++i) out.emplace_back(r.value(i, 0));
  return out;
}

std::set<std::uint64_t> Bookkeeping::CancelledAmong(const std::vector<std::uint64_t>& ids) {
  std::set<std::uint64_t> out;
  if (ids.empty()) return out;
  std::string list = "{";
  for (std::uint64_t id : ids) list += (list.size() > 1 ? "," : "") + std::to_string(id);
  pg::Result r = Sql().ExecParams(
      "SELECT id FROM dblog.request_queue WHERE cancelled AND id = ANY ($1::int8[])",
      {list + "}"});
  for (int i = 0; i < r.ntuples(); ++i) out.insert(r.u64_value(i, 0));
  return out;
}

bool Bookkeeping::DescribeRequestTable(RepairRequest& q) {
  pg::Result r = Sql().ExecParams(
      "SELECT format('%I.%I', n.nspname, c.relname), n.nspname, c.relname,"
      "       " + HexList("k.key_columns") + ", " + HexList("k.key_types") +
      "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,"
      "       dblog._identity_key(c.oid) AS k"
      " WHERE c.oid = $1::oid AND k.key_columns IS NOT NULL",
      {std::to_string(q.table_oid)});
  if (r.ntuples() == 0 || !consumer_.scope.Holds(std::string(r.value(0, 1)), std::string(r.value(0, 2)))) return false;
  q.table = std::string(r.value(0, 0));
  q.key_columns = SplitHexList(r.value(0, 3));
  q.key_types = SplitHexList(r.value(0, 4));
  return true;
}

void Bookkeeping::DescribeForProgress(RepairRequest& q) {
  if (q.described) return;
  // progress is best effort: report what we have
  BestEffort(log::Level::kWarn, "repair_progress_failed", {{"consumer", consumer_.name}}, [&] {
    pg::Result t = Sql().ExecParams(
        "SELECT n.nspname, c.relname, greatest(c.reltuples, 0)::bigint"
        "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1",
        {std::to_string(q.table_oid)});
    if (t.ntuples() == 1) {
      q.schema = std::string(t.value(0, 0));
      q.name = std::string(t.value(0, 1));
      if (q.kind == "table") q.rows_estimated = t.u64_value(0, 2);
    }
    q.described = true;
  });
}

bool Bookkeeping::RecordProgress(const PendingProgress& p) {
  const RepairRequest& q = p.snapshot;
  // The source went away (a restart, a failover): the chunk was emitted and acknowledged, and
  // its request would stay queued (this pipeline knows it: it does not load it again).
  const auto write = [&] {
    Sql().ExecParams(
        "INSERT INTO dblog.request_progress AS p (request_id, consumer, state, chunks_done,"
        " rows_emitted, deletes_emitted, resume_key, keys_done, finished_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, nullif($7, '')::jsonb, $8,"
        "         CASE WHEN $3 = 'done' THEN now() END)"
        " ON CONFLICT (request_id, consumer) DO UPDATE SET state = EXCLUDED.state,"
        " chunks_done = EXCLUDED.chunks_done, rows_emitted = EXCLUDED.rows_emitted,"
        " deletes_emitted = EXCLUDED.deletes_emitted, resume_key = EXCLUDED.resume_key,"
        " keys_done = EXCLUDED.keys_done, finished_at = EXCLUDED.finished_at"
        // an end recorded meanwhile (failed, cancelled: those do not wait for an
        // acknowledgement as a chunk's progress does) stays
        " WHERE p.state OPERATOR(pg_catalog.=) 'running'",
        {std::to_string(q.id), consumer_.name, p.last ? "done" : "running",
         std::to_string(q.chunks), std::to_string(q.rows), std::to_string(q.deletes),
         q.resume_key, std::to_string(q.keys_done)});
  };
  if (!UnlessLost("repair_progress_not_recorded", q.id, write)) return false;
  if (p.last)
    log::Info("repair_done", {{"consumer", consumer_.name}, {"request", q.id},
                              {"rows", q.rows}, {"deletes", q.deletes}});
  return true;
}

bool Bookkeeping::FinishRequest(std::uint64_t id, const std::string& state,
                                const std::string& error) {
  return UnlessLost("repair_state_not_recorded", id, [&] {
    Sql().ExecParams(
        "INSERT INTO dblog.request_progress (request_id, consumer, state, error,"
        " finished_at) VALUES ($1, $2, $3, nullif($4, ''), now())"
        " ON CONFLICT (request_id, consumer) DO UPDATE SET state = EXCLUDED.state,"
        " error = EXCLUDED.error, finished_at = now()",
        {std::to_string(id), consumer_.name, state, error});
  });
}

bool Bookkeeping::UnlessLost(std::string_view event, std::uint64_t request,
                             const std::function<void()>& statement) {
  try {
    statement();
    return true;
  } catch (const std::exception& e) {
    const bool lost = Lost();
    log::Warn(event, {{"consumer", consumer_.name}, {"request", request}, {"error", e.what()},
                      {"again", lost ? "true" : "false"}});
    Reset();
    return !lost;
  }
}

}  // namespace dblog::consumer
