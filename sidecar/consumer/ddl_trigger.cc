// sidecar/consumer/ddl_trigger.cc: see ddl_trigger.h.
#include "consumer/ddl_trigger.h"

#include "consumer/ddl_trigger_sql.h"  // generated from consumer/ddl_trigger.sql
#include "common/lsn.h"
#include "pgoutput/translate.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

namespace dblog::consumer {

const char* DdlTriggerSql() {
  // dblog_ddl.layout_of runs the query dblogd maps Relation messages with: pasted in, so that a
  // noted layout parses as the catalog's rows do (ParseRelationRows).
  static const std::string sql = [] {
    std::string text = kDdlTriggerSql;
    const std::string mark = "@RELATION_QUERY@";
    const auto at = text.find(mark);
    if (at == std::string::npos) throw std::logic_error("ddl_trigger.sql lost " + mark);
    text.replace(at, mark.size(), pgoutput::kRelationQuery);
    return text;
  }();
  return sql.c_str();
}

DdlTriggerState ReadDdlTriggerState(pg::Connection& sql) {
  // dblog_ddl's owner must own the notes table, the functions the event triggers call and the
  // two enabled event triggers: only a role that may own event triggers is trusted with it.
  pg::Result r = sql.Exec(
      "SELECT n.oid IS NOT NULL,"
      "       coalesce(c.relkind OPERATOR(pg_catalog.=) 'r'"
      "         AND c.relowner OPERATOR(pg_catalog.=) n.nspowner AND NOT c.relrowsecurity"
      "         AND (SELECT pg_catalog.count(*) FROM pg_catalog.pg_event_trigger e"
      "                JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) e.evtfoid"
      "               WHERE e.evtowner OPERATOR(pg_catalog.=) n.nspowner"
      "                 AND p.proowner OPERATOR(pg_catalog.=) n.nspowner"
      "                 AND p.pronamespace OPERATOR(pg_catalog.=) n.oid"
      "                 AND e.evtenabled OPERATOR(pg_catalog.<>) 'D'"
      "                 AND e.evtname OPERATOR(pg_catalog.=) ANY ("
      "                       '{dblog_ddl_rewrite,dblog_ddl_end}'::pg_catalog.name[]))"
      "             OPERATOR(pg_catalog.=) 2, false)"
      "  FROM (SELECT 1) AS one"
      "  LEFT JOIN pg_catalog.pg_namespace n ON n.nspname OPERATOR(pg_catalog.=) 'dblog_ddl'"
      "  LEFT JOIN pg_catalog.pg_class c ON c.relnamespace OPERATOR(pg_catalog.=) n.oid"
      "        AND c.relname OPERATOR(pg_catalog.=) 'changed_tables'");
  if (!r.bool_value(0, 0)) return DdlTriggerState::kAbsent;
  return r.bool_value(0, 1) ? DdlTriggerState::kInstalled : DdlTriggerState::kUntrusted;
}

std::string DdlTriggerProblem(DdlTriggerState state) {
  const std::string install =
      "an administrator who may create event triggers runs dblogd --ddl-trigger-sql | psql "
      "-v ON_ERROR_STOP=1 <the source database> (docs/pgoutput.md)";
  switch (state) {
    case DdlTriggerState::kInstalled:
      return "";
    case DdlTriggerState::kAbsent:
      return "the DDL trigger is not installed: DDL that changes rows without writing them "
             "(ADD COLUMN with a default, ALTER COLUMN TYPE, an enum's RENAME VALUE) needs "
             "dblog.repair(...) by hand; to have dblogd queue those repairs, " + install;
    case DdlTriggerState::kUntrusted:
      break;
  }
  return "schema dblog_ddl is not as the DDL trigger makes it (another owner than its event "
         "triggers', a trigger missing or disabled): dblogd ignores it, and DDL that changes "
         "rows without writing them needs dblog.repair(...) by hand; drop it (DROP SCHEMA "
         "dblog_ddl CASCADE, as its owner) and " + install;
}

namespace {

// dblog_ddl.layouts is the owner's of dblog_ddl (the trigger's), an ordinary table, no RLS.
// No other role may do more than read it (a default privilege of the administrator's could have
// granted more).
constexpr const char* kLayoutsTrusted =
    "EXISTS (SELECT 1 FROM pg_catalog.pg_class c"
    "          JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
    "         WHERE n.nspname OPERATOR(pg_catalog.=) 'dblog_ddl'"
    "           AND c.relname OPERATOR(pg_catalog.=) 'layouts'"
    "           AND c.relkind OPERATOR(pg_catalog.=) 'r'"
    "           AND c.relowner OPERATOR(pg_catalog.=) n.nspowner"
    "           AND NOT c.relrowsecurity"
    "           AND pg_catalog.has_schema_privilege(n.oid, 'USAGE')"
    "           AND pg_catalog.has_table_privilege(c.oid, 'SELECT')"
    "           AND NOT EXISTS (SELECT 1 FROM pg_catalog.aclexplode(c.relacl) AS a"
    "                            WHERE a.grantee OPERATOR(pg_catalog.<>) c.relowner"
    "                              AND a.privilege_type OPERATOR(pg_catalog.<>) 'SELECT')"
    "           AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute att,"  // column grants
    "                                  pg_catalog.aclexplode(att.attacl) AS a"
    "                            WHERE att.attrelid OPERATOR(pg_catalog.=) c.oid"
    "                              AND a.grantee OPERATOR(pg_catalog.<>) c.relowner"
    "                              AND a.privilege_type OPERATOR(pg_catalog.<>) 'SELECT'))";

}  // namespace

const char* const kDdlTriggerWithoutLayouts =
    "the DDL trigger was installed by an older dblogd and keeps no layouts: a column dropped or "
    "retyped before dblogd read the table's earlier changes stops the consumer; an administrator "
    "runs dblogd --ddl-trigger-sql | psql -v ON_ERROR_STOP=1 <the source database> again "
    "(docs/pgoutput.md, Identity across DDL)";

const char* const kDdlLayoutsUntrusted =
    "dblog_ddl.layouts is not as the DDL trigger's script makes it (another owner than the "
    "schema's, row security, another role granted more than SELECT on it or a column of it, or "
    "no SELECT for dblogd's role): dblogd ignores the layouts, so a column dropped or retyped "
    "before dblogd read the table's earlier changes stops the consumer; its owner fixes the "
    "grants (docs/pgoutput.md, Identity across DDL)";

bool DdlTriggerHasLayouts(pg::Connection& sql) {
  return !sql.Exec("SELECT pg_catalog.to_regclass('dblog_ddl.layouts')").is_null(0, 0);
}

bool DdlTriggerKeepsLayouts(pg::Connection& sql) {
  return sql.Exec(std::string("SELECT ") + kLayoutsTrusted).bool_value(0, 0);
}

namespace {

// dblog_ddl.layouts' columns of the note `which` selects, as kRelationQuery's rows.
LayoutRows LayoutRowsOf(pg::Connection& sql, const std::string& which,
                        const std::vector<std::optional<std::string>>& params) {
  pg::Result res = sql.ExecParams(
      "SELECT e.r OPERATOR(pg_catalog.->>) 0, e.r OPERATOR(pg_catalog.->>) 1,"
      "       e.r OPERATOR(pg_catalog.->>) 2, e.r OPERATOR(pg_catalog.->>) 3,"
      "       e.r OPERATOR(pg_catalog.->>) 4, e.r OPERATOR(pg_catalog.->>) 5,"
      "       e.r OPERATOR(pg_catalog.->>) 6, e.r OPERATOR(pg_catalog.->>) 7,"
      "       e.r OPERATOR(pg_catalog.->>) 8, e.r OPERATOR(pg_catalog.->>) 9,"
      "       e.r OPERATOR(pg_catalog.->>) 10, e.r OPERATOR(pg_catalog.->>) 11,"
      "       e.r OPERATOR(pg_catalog.->>) 12"
      "  FROM (SELECT l.columns FROM dblog_ddl.layouts l"
      "         WHERE l.table_oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid " + which +
          "         ORDER BY l.at_lsn DESC, l.id DESC LIMIT 1) AS l,"
          "       pg_catalog.jsonb_array_elements(CASE WHEN pg_catalog.jsonb_typeof(l.columns)"
          "                                  OPERATOR(pg_catalog.=) 'array' THEN l.columns END)"
          "         WITH ORDINALITY AS e(r, i)"
          " WHERE pg_catalog.jsonb_typeof(e.r) OPERATOR(pg_catalog.=) 'array'"
          " ORDER BY e.i",
      params);
  return res.text_rows();
}

}  // namespace

void WaitUntilVisible(pg::Connection& sql, std::uint64_t xid, std::uint32_t oid) {
  if (xid == 0) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  // A DDL holds its ACCESS EXCLUSIVE lock on the table until after its commit is visible: with
  // none held, whatever the transaction did to the table's definition is visible already (the
  // common case: no wait, also while a commit waits for a synchronous standby).
  while (!sql.ExecParams("SELECT pg_catalog.pg_visible_in_snapshot($1::pg_catalog.xid8,"
                         "                                        pg_catalog.pg_current_snapshot())"
                         "    OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l"
                         "                    WHERE l.locktype OPERATOR(pg_catalog.=) 'relation'"
                         "                      AND l.relation OPERATOR(pg_catalog.=) $2::pg_catalog.oid"
                         "                      AND l.mode OPERATOR(pg_catalog.=) 'AccessExclusiveLock'"
                         "                      AND l.granted)",
                         {std::to_string(xid), std::to_string(oid)})
              .bool_value(0, 0)) {
    if (std::chrono::steady_clock::now() > deadline)
      throw LayoutWaitTimeout("transaction " + std::to_string(xid) +
                              " was sent by the walsender but is not visible after 10 s (is "
                              "dblogd's walsender a synchronous standby? its commit would wait "
                              "for dblogd)");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::optional<NotedLayouts> NotedLayout(pg::Connection& sql, std::uint32_t oid,
                                        std::uint64_t lsn) {
  // trusted only as a whole: the table's owner owns the schema, its functions and the triggers
  if (!DdlTriggerKeepsLayouts(sql) || ReadDdlTriggerState(sql) != DdlTriggerState::kInstalled)
    return std::nullopt;
  NotedLayouts noted;
  noted.before = LayoutRowsOf(sql, "AND l.at_lsn OPERATOR(pg_catalog.<) $2::pg_catalog.pg_lsn",
                              {std::to_string(oid), common::FormatLsn(lsn)});
  noted.latest = LayoutRowsOf(sql, "", {std::to_string(oid)});
  return noted;
}

void InstallDdlTrigger(pg::Connection& sql) {
  try {
    sql.Exec(DdlTriggerSql());  // its own transaction (BEGIN ... COMMIT)
  } catch (...) {
    try {
      sql.Exec("ROLLBACK");
    } catch (...) {
    }
    throw;
  }
}

void EnsureDdlTakenTable(pg::Connection& sql) {
  sql.Exec(
      "CREATE TABLE IF NOT EXISTS dblog.ddl_taken ("
      "  xid pg_catalog.xid8 NOT NULL,"
      "  table_oid pg_catalog.oid NOT NULL,"
      "  taken_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),"
      "  PRIMARY KEY (xid, table_oid))");
  sql.Exec("REVOKE ALL ON TABLE dblog.ddl_taken FROM PUBLIC");
}

std::vector<DdlRepair> TakeDdlRepairs(pg::Connection& sql, std::vector<DdlRefusal>* refused) {
  std::vector<DdlRepair> out;
  if (ReadDdlTriggerState(sql) != DdlTriggerState::kInstalled) return out;
  // Every new note is taken (a note is a transaction and a table: never reused, also when the
  // administrator made the notes table again and its ids start over), whatever becomes of it;
  // those of tables a publication of a consumer holds, one row per table with the reasons
  // (each with the DDL's role) joined.
  pg::Result notes = sql.Exec(
      "WITH fresh AS ("
      "  INSERT INTO dblog.ddl_taken (xid, table_oid)"
      "  SELECT d.xid, d.table_oid FROM dblog_ddl.changed_tables d"
      "   WHERE NOT EXISTS (SELECT 1 FROM dblog.ddl_taken t"
      "                      WHERE t.xid OPERATOR(pg_catalog.=) d.xid"
      "                        AND t.table_oid OPERATOR(pg_catalog.=) d.table_oid)"
      "   ORDER BY d.id LIMIT 1000"  // a backlog is taken over several polls
      "  ON CONFLICT DO NOTHING RETURNING xid, table_oid)"
      " SELECT d.table_oid,"
      "        pg_catalog.left(pg_catalog.string_agg(d.reason OPERATOR(pg_catalog.||) ' by '"
      "                          OPERATOR(pg_catalog.||) d.ddl_by::pg_catalog.text, '; '"
      "                          ORDER BY d.id), 4096)"
      "   FROM fresh JOIN dblog_ddl.changed_tables d ON d.xid OPERATOR(pg_catalog.=) fresh.xid"
      "        AND d.table_oid OPERATOR(pg_catalog.=) fresh.table_oid"
      "  WHERE EXISTS (SELECT 1 FROM dblog.consumers dc"
      "                 WHERE dblog._published_for(dc.name, d.table_oid))"
      "  GROUP BY d.table_oid ORDER BY d.table_oid");
  // One request each, for every consumer (consumer NULL: each one whose scope holds the table
  // runs it), asked by dblogd's role (the DDL's role is in the reason: it may not cancel what
  // another role's DDL needs). A table that cannot be queued (gone, no key, a key type dblogd
  // cannot read) is skipped with its error, never holding back the others or the next poll.
  for (int i = 0; i < notes.ntuples(); ++i) {
    const std::string oid(notes.value(i, 0)), reason(notes.value(i, 1));
    const auto table_oid = static_cast<std::uint32_t>(notes.u64_value(i, 0));
    sql.Exec("SAVEPOINT dblog_ddl_note");
    try {
      pg::Result r = sql.ExecParams(
          "INSERT INTO dblog.request_queue (table_oid, table_name, kind, key_columns, key_types,"
          "                                 reason)"
          " SELECT c.oid, c.oid::pg_catalog.regclass::pg_catalog.text, 'table', k.key_columns,"
          "        k.key_types, $2"
          "   FROM pg_catalog.pg_class c,"
          "        LATERAL dblog._identity_key(c.oid::pg_catalog.regclass) AS k"
          "  WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
          "    AND c.relkind OPERATOR(pg_catalog.=) 'r'"
          "    AND c.relpersistence OPERATOR(pg_catalog.=) 'p'"
          "    AND k.key_columns IS NOT NULL"
          "    AND pg_catalog.array_position(k.key_types, NULL) IS NULL"
          " RETURNING id, table_name, reason",
          {oid, reason});
      sql.Exec("RELEASE SAVEPOINT dblog_ddl_note");
      if (r.ntuples() > 0)
        out.push_back({r.u64_value(0, 0), std::string(r.value(0, 1)), std::string(r.value(0, 2))});
      else if (refused)
        refused->push_back({table_oid, "no longer an ordinary table with a key dblog can use"});
    } catch (const pg::Error& e) {
      // a refusal that would come again (bad data, a missing object or privilege, a limit, a
      // feature): skipped; anything else (a deadlock, a timeout, the connection) rolls the
      // whole poll back, notes untaken, for the next poll
      const std::string cls = e.sqlstate().substr(0, 2);
      if (cls != "22" && cls != "23" && cls != "42" && cls != "54" && cls != "0A" &&
          cls != "P0")
        throw;
      sql.Exec("ROLLBACK TO SAVEPOINT dblog_ddl_note");
      if (refused) refused->push_back({table_oid, e.server_message()});
    }
  }
  return out;
}

}  // namespace dblog::consumer
