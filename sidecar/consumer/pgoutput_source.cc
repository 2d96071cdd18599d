// sidecar/consumer/pgoutput_source.cc: a consumer's source in pgoutput mode (see
// pgoutput_source.h).
#include "consumer/pgoutput_source.h"

#include <map>

#include "bootstrap/scope.h"
#include "common/quote.h"
#include "consumer/ddl_trigger.h"
#include "consumer/watermark.h"
#include "log/log.h"
#include "pgoutput/values.h"

namespace dblog::consumer {
namespace {

// Oldest major the mode runs on: protocol 1 with messages 'true' needs 14; 15 to 18 are the
// versions tested (tests/cpp/sidecar/pgoutput_mode_test.cc).
constexpr int kMinServerVersion = 150000;

std::string TableList(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

PgoutputSource::PgoutputSource(const config::ConsumerConfig& consumer, std::string publication)
    : consumer_(consumer), publication_(std::move(publication)) {}

PublicationPlan PgoutputSource::PlanPublication(pg::Connection& sql) const {
  PublicationPlan plan;
  if (sql.server_version() < kMinServerVersion) {
    plan.refused = "pgoutput mode needs PostgreSQL 15 or later (this server is " +
                   std::to_string(sql.server_version()) + ")";
    return plan;
  }
  // throws bootstrap::ScopeError naming every table in scope without a key
  const std::vector<bootstrap::Table> scope =
      bootstrap::EnumerateScopeFromCatalog(sql, consumer_.scope);
  plan.tables = scope.size();
  std::map<std::uint32_t, std::string> wanted;
  for (const auto& t : scope) wanted.emplace(t.oid, t.qualified());
  const std::string pub = common::QuoteIdent(publication_);
  // dblog.watermarks of dblogd's role (Bookkeeping::EnsureRepairApi made it): the windows'
  // markers. Held when dblogd can add it; never a reason to refuse the publication.
  pg::Result wm = sql.Exec(
      "SELECT c.oid FROM pg_catalog.pg_class c"
      "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
      "  JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) c.relowner"
      " WHERE n.nspname OPERATOR(pg_catalog.=) 'dblog'"
      "   AND c.relname OPERATOR(pg_catalog.=) 'watermarks'"
      "   AND c.relkind OPERATOR(pg_catalog.=) 'r'"
      "   AND r.rolname OPERATOR(pg_catalog.=) current_user");
  std::optional<std::uint32_t> watermarks;
  if (wm.ntuples() == 1) watermarks = static_cast<std::uint32_t>(wm.u64_value(0, 0));
  else plan.no_watermarks = "there is no dblog.watermarks of dblogd's role in the database";

  pg::Result p = sql.ExecParams(
      "SELECT p.oid, p.pubowner OPERATOR(pg_catalog.=) r.oid, p.puballtables, p.pubinsert,"
      "       p.pubupdate, p.pubdelete, p.pubtruncate, p.pubviaroot"
      "  FROM pg_catalog.pg_publication p, pg_catalog.pg_roles r"
      " WHERE p.pubname OPERATOR(pg_catalog.=) $1 AND r.rolname OPERATOR(pg_catalog.=) current_user",
      {publication_});
  if (p.ntuples() == 0) {
    // FOR TABLE of exactly the scope; an empty scope makes an empty publication.
    std::string create = "CREATE PUBLICATION " + pub;
    std::vector<std::string> names;
    for (const auto& [oid, name] : wanted) names.push_back(name);
    if (watermarks) names.push_back("dblog.watermarks");
    if (!names.empty()) create += " FOR TABLE " + TableList(names);
    create += " WITH (publish = 'insert, update, delete, truncate',"
              " publish_via_partition_root = false)";
    plan.statements.push_back(create);
    return plan;
  }
  plan.exists = true;
  const std::string oid(p.value(0, 0));
  plan.owned = p.bool_value(0, 1);
  std::string wrong;
  if (p.bool_value(0, 2)) wrong = "it is FOR ALL TABLES";
  for (int col = 3; col <= 6; ++col)
    if (!p.bool_value(0, col)) wrong = "it does not publish inserts, updates, deletes and truncates";
  if (p.bool_value(0, 7)) wrong = "it publishes via the partition root";
  pg::Result ns = sql.ExecParams(
      "SELECT count(*) FROM pg_catalog.pg_publication_namespace"
      " WHERE pnpubid OPERATOR(pg_catalog.=) $1::pg_catalog.oid",
      {oid});
  if (ns.u64_value(0, 0) > 0) wrong = "it publishes whole schemas (FOR TABLES IN SCHEMA)";
  if (!wrong.empty()) {
    plan.refused = "publication " + publication_ + " cannot serve consumer " + consumer_.name +
                   ": " + wrong + "; drop it (DROP PUBLICATION " + pub +
                   ") and dblogd makes it again, FOR TABLE of the scope; if slot " + publication_ +
                   " streamed while it was so, drop the slot too (SELECT "
                   "pg_drop_replication_slot('" + publication_ + "')): the changes it left out "
                   "are not in that slot's stream";
    return plan;
  }
  pg::Result rel = sql.ExecParams(
      "SELECT pr.prrelid, format('%I.%I', n.nspname, c.relname),"
      "       pr.prqual IS NOT NULL OR pr.prattrs IS NOT NULL"
      "  FROM pg_catalog.pg_publication_rel pr"
      "  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) pr.prrelid"
      "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
      " WHERE pr.prpubid OPERATOR(pg_catalog.=) $1::pg_catalog.oid",
      {oid});
  std::vector<std::string> drop, filtered;
  std::set<std::uint32_t> held;
  for (int i = 0; i < rel.ntuples(); ++i) {
    const auto relid = static_cast<std::uint32_t>(rel.u64_value(i, 0));
    const std::string name(rel.value(i, 1));
    held.insert(relid);
    if (watermarks && relid == *watermarks) continue;
    if (!wanted.count(relid)) drop.push_back(name);
    else if (rel.bool_value(i, 2)) filtered.push_back(name);
  }
  if (!filtered.empty()) {
    plan.refused = "publication " + publication_ + " has a row filter or a column list for " +
                   TableList(filtered) + ": changes would be left out; ALTER PUBLICATION " + pub +
                   " SET TABLE " + TableList(filtered) + " (with the other tables of the scope)";
    return plan;
  }
  for (const auto& [relid, name] : wanted)
    if (!held.count(relid)) {
      plan.added.push_back(name);
      plan.added_oids.push_back(relid);
    }
  if (!plan.added.empty())
    plan.statements.push_back("ALTER PUBLICATION " + pub + " ADD TABLE " + TableList(plan.added));
  if (!drop.empty())
    plan.statements.push_back("ALTER PUBLICATION " + pub + " DROP TABLE " + TableList(drop));
  if (watermarks && !held.count(*watermarks)) {
    const std::string add = "ALTER PUBLICATION " + pub + " ADD TABLE dblog.watermarks";
    if (plan.owned)
      plan.statements.push_back(add);
    else {
      plan.no_watermarks = "publication " + publication_ + " does not hold dblog.watermarks "
                           "and dblogd's role does not own it; have its owner run: " + add;
      plan.watermarks_unheld = true;
    }
  }
  if (!plan.statements.empty() && !plan.owned) {
    std::string fix;
    for (const auto& st : plan.statements) fix += (fix.empty() ? "" : "; ") + st;
    plan.refused = "publication " + publication_ + " does not hold the tables of consumer " +
                   consumer_.name + "'s scope and dblogd's role does not own it; have its owner "
                   "run: " + fix;
  }
  return plan;
}

void PgoutputSource::ApplyPublication(pg::Connection& sql, const PublicationPlan& plan) {
  if (!plan.refused.empty()) throw PublicationError(plan.refused);
  for (const auto& statement : plan.statements) {
    try {
      sql.Exec(statement);
    } catch (const pg::Error& e) {
      throw PublicationError(
          std::string(plan.exists ? "cannot bring publication " + publication_ + " to the scope"
                                  : "cannot create publication " + publication_) +
          ": " + e.server_message() +
          " (CREATE PUBLICATION needs CREATE on the database, adding a table needs its "
          "ownership; have an administrator run: " + statement + ")");
    }
  }
}

std::string PgoutputSource::TablesJoinedMessage(const std::vector<std::string>& tables,
                                                const std::string& why) const {
  std::string list;
  for (const auto& t : tables) list += (list.empty() ? "" : ", ") + t;
  return "tables joined consumer " + consumer_.name + "'s scope after its bootstrap: " + list +
         ". They are copied into a running consumer by a repair, and " + why +
         "; their rows would be missing from the stream. Make repairs possible, leave them out of "
         "the scope (!schema.table), or drop the slot (SELECT pg_drop_replication_slot('" +
         publication_ + "')): the next connection bootstraps again, with them, flagged "
         "restarted (docs/pgoutput.md)";
}

PgoutputSource::WatermarksCheck PgoutputSource::CheckWatermarks(pg::Connection& sql) const {
  pg::Result r = sql.ExecParams(
      "SELECT p.pubowner OPERATOR(pg_catalog.=) r.oid,"
      "       EXISTS (SELECT 1 FROM pg_catalog.pg_publication_rel pr"
      "                 JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) pr.prrelid"
      "                 JOIN pg_catalog.pg_namespace n"
      "                   ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
      "                WHERE pr.prpubid OPERATOR(pg_catalog.=) p.oid"
      "                  AND n.nspname OPERATOR(pg_catalog.=) 'dblog'"
      "                  AND c.relname OPERATOR(pg_catalog.=) 'watermarks'"
      "                  AND c.relowner OPERATOR(pg_catalog.=) r.oid)"
      "  FROM pg_catalog.pg_publication p, pg_catalog.pg_roles r"
      " WHERE p.pubname OPERATOR(pg_catalog.=) $1 AND r.rolname OPERATOR(pg_catalog.=) current_user",
      {publication_});
  WatermarksCheck check;
  if (r.ntuples() == 0) return check;  // dropped: PublicationDrift says so
  check.owned = r.bool_value(0, 0);
  check.missing = !r.bool_value(0, 1);
  check.statement =
      "ALTER PUBLICATION " + common::QuoteIdent(publication_) + " ADD TABLE dblog.watermarks";
  return check;
}

std::string PgoutputSource::PublicationDrift(pg::Connection& sql) const {
  pg::Result r = sql.ExecParams(
      "SELECT p.puballtables,"
      "       p.pubinsert AND p.pubupdate AND p.pubdelete AND p.pubtruncate, p.pubviaroot,"
      "       EXISTS (SELECT 1 FROM pg_catalog.pg_publication_namespace s"
      "                WHERE s.pnpubid OPERATOR(pg_catalog.=) p.oid),"
      "       EXISTS (SELECT 1 FROM pg_catalog.pg_publication_rel pr"
      "                WHERE pr.prpubid OPERATOR(pg_catalog.=) p.oid"
      "                  AND (pr.prqual IS NOT NULL OR pr.prattrs IS NOT NULL))"
      "  FROM pg_catalog.pg_publication p WHERE p.pubname OPERATOR(pg_catalog.=) $1",
      {publication_});
  std::string what;
  if (r.ntuples() == 0) what = "it was dropped";
  else if (r.bool_value(0, 0)) what = "it is FOR ALL TABLES now";
  else if (!r.bool_value(0, 1)) what = "it no longer publishes inserts, updates, deletes and truncates";
  else if (r.bool_value(0, 2)) what = "it publishes via the partition root now";
  else if (r.bool_value(0, 3)) what = "it publishes whole schemas now (FOR TABLES IN SCHEMA)";
  else if (r.bool_value(0, 4)) what = "it has a row filter or a column list now";
  if (what.empty()) return "";
  return "publication " + publication_ + " was altered under consumer " + consumer_.name + ": " +
         what + ". pgoutput decodes each change with the publication as it was then, so changes "
         "made since may be missing from slot " + publication_ +
         "'s stream for good. To go on: drop the slot (SELECT pg_drop_replication_slot('" +
         publication_ + "')) and, unless dblogd's role owns it, have the publication's owner "
         "drop it (DROP PUBLICATION " + common::QuoteIdent(publication_) +
         "); the next connection makes both again and bootstraps, flagged restarted. Make the "
         "publication owned by dblogd's role so that no other role can alter it "
         "(docs/pgoutput.md)";
}

std::vector<std::string> PgoutputSource::TablesMissingFromPublication(pg::Connection& sql) const {
  // One query, cheap enough for every heartbeat: the scope's candidates (bootstrap's filter)
  // that the publication does not hold.
  pg::Result r = sql.ExecParams(
      "SELECT n.nspname, c.relname"
      "  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
      "    ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
      " WHERE " + std::string(bootstrap::kScopeCandidatesWhere) +
      "   AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication_rel pr"
      "                     JOIN pg_catalog.pg_publication p"
      "                       ON p.oid OPERATOR(pg_catalog.=) pr.prpubid"
      "                    WHERE pr.prrelid OPERATOR(pg_catalog.=) c.oid"
      "                      AND p.pubname OPERATOR(pg_catalog.=) $1)",
      {publication_});
  std::vector<std::string> missing;
  for (int i = 0; i < r.ntuples(); ++i) {
    const std::string schema(r.value(i, 0)), name(r.value(i, 1));
    if (consumer_.scope.Holds(schema, name))
      missing.push_back(common::QuoteQualified(schema, name));
  }
  return missing;
}

std::vector<std::pair<std::string, std::string>> PgoutputSource::PluginOptions() const {
  // Protocol 1: a large transaction is spilled by the server and sent at its commit, as for the
  // extension (no streamed blocks to hold back). binary 'false': values.h says why text.
  return {{"proto_version", "1"},
          {"publication_names", common::QuoteIdent(publication_)},
          {"messages", "true"},
          {"binary", "false"}};
}

std::vector<std::pair<std::string, std::string>> PgoutputSource::ConnectionOverrides() {
  return {{"options", pgoutput::OutputSettingsOptions()}};
}

void PgoutputSource::StartStream(std::function<pg::Connection&()> sql,
                                 std::uint64_t next_full_xid) {
  decoder_ = std::make_unique<pgoutput::Decoder>(pgoutput::Decoder::Options{1, false});
  out_of_scope_.clear();
  watermarks_oid_.reset();
  translator_ = std::make_unique<pgoutput::Translator>(
      [this, sql = std::move(sql)](const pgoutput::Relation& r, std::uint64_t lsn,
                                   std::uint64_t xid) {
        // A column list (or any other change of the publication) since the last heartbeat would
        // make the message's columns other than the live ones by position: checked here too.
        if (const std::string drift = PublicationDrift(sql()); !drift.empty())
          throw pgoutput::TranslateError(drift);
        // The change's transaction visible first (its own DDL with it), then in one snapshot
        // the layout the DDL trigger noted last before the change (docs/pgoutput.md, "Identity
        // across DDL"), its last note and the catalog: a DDL's note and its catalog change
        // commit together.
        WaitUntilVisible(sql(), xid, r.oid);
        std::optional<NotedLayouts> noted;
        pgoutput::CatalogAt at;
        pg::Connection& conn = sql();
        conn.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
        try {
          noted = NotedLayout(conn, r.oid, lsn);
          at.now = pgoutput::ParseRelationRows(r.oid, bootstrap::CatalogRows(conn, r.oid));
          conn.Exec("COMMIT");
        } catch (...) {
          try {
            conn.Exec("ROLLBACK");
          } catch (...) {
          }
          throw;
        }
        if (!noted || noted->before.empty() || noted->latest.empty()) return at;  // "not known"
        try {
          // the notes are complete only while the last one is the catalog now: a layout change
          // the trigger did not see (DDL while event triggers do not fire, a column dropped by
          // a DROP ... CASCADE) would leave an older note to map what came after it
          if (!pgoutput::SameLayout(pgoutput::ParseRelationRows(r.oid, noted->latest), at.now)) {
            log::Warn("pgoutput_layouts_behind",
                      {{"table_oid", r.oid},
                       {"message", "the DDL trigger's last note of the table is not its catalog: "
                                   "a change of its columns was not noted; mapped by the catalog "
                                   "alone"}});
            return at;
          }
          at.then = pgoutput::ParseRelationRows(r.oid, noted->before);
        } catch (const pgoutput::TranslateError& e) {  // a note that does not parse is none
          log::Warn("pgoutput_layout_unreadable", {{"table_oid", r.oid}, {"error", e.what()}});
        }
        return at;
      },
      next_full_xid);
}

bool PgoutputSource::TakeWatermark(const pgoutput::LogicalMessage& message,
                                   std::uint64_t wal_start,
                                   std::vector<dblog::v1::Event>* out) {
  if (const auto* r = std::get_if<pgoutput::Relation>(&message)) {
    // Only dblogd's role may write the table (schema dblog is its own, Bookkeeping checks).
    if (r->nspname != "dblog" || r->relname != "watermarks") return false;
    watermarks_oid_ = r->oid;
    return true;
  }
  const pgoutput::Tuple* tuple = nullptr;
  std::uint32_t oid = 0;
  if (const auto* i = std::get_if<pgoutput::Insert>(&message)) {
    tuple = &i->new_tuple;
    oid = i->relation_oid;
  } else if (const auto* u = std::get_if<pgoutput::Update>(&message)) {
    tuple = &u->new_tuple;
    oid = u->relation_oid;
  } else if (const auto* d = std::get_if<pgoutput::Delete>(&message)) {
    return watermarks_oid_ && d->relation_oid == *watermarks_oid_;  // (never written)
  } else if (const auto* t = std::get_if<pgoutput::Truncate>(&message)) {
    return watermarks_oid_ && t->relation_oids.size() == 1 &&
           t->relation_oids.front() == *watermarks_oid_;
  }
  if (!tuple || !watermarks_oid_ || oid != *watermarks_oid_) return false;
  // (consumer, content), both text: this consumer's row is a marker of its windows
  if (tuple->size() != 2 || (*tuple)[0].kind != pgoutput::Datum::Kind::kText ||
      (*tuple)[1].kind != pgoutput::Datum::Kind::kText || (*tuple)[0].bytes != consumer_.name)
    return true;
  pgoutput::Message marker;
  marker.transactional = true;
  marker.lsn = wal_start;
  marker.prefix = Watermark::Prefix(consumer_.name);
  marker.content = (*tuple)[1].bytes;
  translator_->Translate(marker, wal_start, out);
  return true;
}

void PgoutputSource::Translate(std::uint64_t wal_start, std::string_view payload,
                               std::vector<dblog::v1::Event>* out) {
  const pgoutput::LogicalMessage message = decoder_->Decode(payload);
  if (TakeWatermark(message, wal_start, out)) return;
  if (const auto* r = std::get_if<pgoutput::Relation>(&message)) {
    // pgoutput names pg_catalog "" (never in a user's publication); the scope decides by name
    if (consumer_.scope.Holds(r->nspname, r->relname))
      out_of_scope_.erase(r->oid);
    else
      out_of_scope_.insert(r->oid);
  }
  scratch_.clear();
  translator_->Translate(message, wal_start, &scratch_);
  for (auto& ev : scratch_) {
    if (ev.has_relation() && out_of_scope_.count(ev.relation().oid())) continue;
    if (ev.has_change() && out_of_scope_.count(ev.change().relation_oid())) continue;
    if (ev.has_truncate()) {
      auto* oids = ev.mutable_truncate()->mutable_relation_oids();
      for (int i = oids->size() - 1; i >= 0; --i)
        if (out_of_scope_.count(oids->Get(i))) oids->erase(oids->begin() + i);
      if (oids->empty()) continue;
    }
    out->push_back(std::move(ev));
  }
}

}  // namespace dblog::consumer
