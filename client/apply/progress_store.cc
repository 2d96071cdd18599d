// client/apply/progress_store.cc: the dblog_apply schema and the consumer's advisory lock (see
// progress_store.h).
#include "client/apply/progress_store.h"

#include "client/apply/sql_text.h"
#include "client/position.h"
#include "common/lsn.h"

namespace dblog::apply {

using dblog::v1::Position;

namespace {

constexpr char kProgressStatement[] = "dblog_apply_progress";
constexpr char kRegisterStatement[] = "dblog_apply_register";
constexpr char kLockArguments[] = "hashtext('dblog apply'), hashtext($1)";

std::uint32_t ParseOid(const std::string& text) {
  return static_cast<std::uint32_t>(std::stoul(text));
}

}  // namespace

ProgressStore::ProgressStore(PgConnection& target, std::string consumer, Log log)
    : target_(target), consumer_(std::move(consumer)), log_(std::move(log)) {
  if (!log_) log_ = [](const std::string&) {};
}

std::optional<Position> ProgressStore::Open() {
  // Input functions read ISO dates and postgres-style intervals whatever these say, but
  // IntervalStyle sql_standard would read signs differently: pin the session's settings.
  target_.Exec(
      "SET DateStyle = ISO; SET IntervalStyle = postgres; SET TimeZone = 'UTC';"
      " SET extra_float_digits = 3; SET client_encoding = 'UTF8'",
      "setting up the target session");
  Lock();
  CreateSchema();
  target_.Query("INSERT INTO dblog_apply.progress (consumer) VALUES ($1) ON CONFLICT DO NOTHING",
                {consumer_}, "creating the consumer's progress row");
  const std::optional<Position> position = ReadPosition();
  ReadRegisteredTables();
  ReadMappings();
  return position;
}

// One applier per consumer and target. A killed applier's backend may still be finishing what
// it had been sent: wait for it a while.
void ProgressStore::Lock() {
  const std::string lock_sql = kLockArguments;
  PgResult lock = target_.Query("SELECT pg_try_advisory_lock(" + lock_sql + ")", {consumer_},
                                "taking the consumer's advisory lock on the target");
  if (lock.get(0, 0) == "t") return;
  log_("another session holds consumer " + consumer_ +
       "'s advisory lock on the target (a previous applier still finishing?): waiting up to"
       " 30 s");
  try {
    target_.Exec("SET lock_timeout = '30s'");
    target_.Query("SELECT pg_advisory_lock(" + lock_sql + ")", {consumer_},
                  "waiting for the consumer's advisory lock on the target");
    target_.Exec("RESET lock_timeout");
  } catch (const TargetError& e) {
    throw TargetError("another dblog apply for consumer " + consumer_ +
                          " is connected to this target database (it holds the consumer's"
                          " advisory lock): " +
                          e.what(),
                      e.sqlstate());
  }
}

void ProgressStore::CreateSchema() {
  target_.Exec(
      "BEGIN;"
      " SELECT pg_advisory_xact_lock(hashtext('dblog apply setup'));"
      " CREATE SCHEMA IF NOT EXISTS dblog_apply;"
      " CREATE TABLE IF NOT EXISTS dblog_apply.progress ("
      "   consumer text PRIMARY KEY, commit_lsn pg_lsn, seq bigint,"
      "   updated_at timestamptz NOT NULL DEFAULT now());"
      " CREATE TABLE IF NOT EXISTS dblog_apply.tables ("
      "   consumer text, table_schema text, table_name text,"
      "   added_at timestamptz NOT NULL DEFAULT now(),"
      "   PRIMARY KEY (consumer, table_schema, table_name));" +
          std::string(kRelationMapDdl) + " COMMIT",
      "creating the dblog_apply schema in the target");
}

std::optional<Position> ProgressStore::ReadPosition() {
  PgResult stored =
      target_.Query("SELECT commit_lsn::text, seq FROM dblog_apply.progress WHERE consumer = $1",
                    {consumer_}, "reading the stored position");
  if (stored.rows() != 1 || stored.is_null(0, 0)) return std::nullopt;
  return client::MakePosition(common::ParseLsn(stored.get(0, 0)),
                              static_cast<std::uint32_t>(std::stoull(stored.get(0, 1))));
}

void ProgressStore::ReadRegisteredTables() {
  PgResult tables =
      target_.Query("SELECT table_schema, table_name FROM dblog_apply.tables WHERE consumer = $1",
                    {consumer_}, "reading the consumer's tables");
  for (int i = 0; i < tables.rows(); ++i) registered_.insert({tables.get(i, 0), tables.get(i, 1)});
}

void ProgressStore::ReadMappings() {
  PgResult relations = target_.Query(
      "SELECT relation_oid::text, table_schema, table_name FROM dblog_apply.relations"
      " WHERE consumer = $1",
      {consumer_}, "reading the consumer's relation mapping");
  for (int i = 0; i < relations.rows(); ++i)
    mappings_[ParseOid(relations.get(i, 0))].target =
        TargetName{relations.get(i, 1), relations.get(i, 2)};
  PgResult columns = target_.Query(
      "SELECT relation_oid::text, attnum, column_name, type_name, dropped"
      " FROM dblog_apply.columns WHERE consumer = $1 ORDER BY relation_oid, attnum",
      {consumer_}, "reading the consumer's column mapping");
  for (int i = 0; i < columns.rows(); ++i) {
    const auto it = mappings_.find(ParseOid(columns.get(i, 0)));
    if (it == mappings_.end()) continue;
    it->second.columns.push_back(MappedColumn{ParseOid(columns.get(i, 1)), columns.get(i, 2),
                                              columns.get(i, 3), columns.get(i, 4) == "t"});
  }
}

void ProgressStore::StartPipeline() {
  target_.StartPipeline();
  target_.SendPrepare(kProgressStatement,
                      "UPDATE dblog_apply.progress SET commit_lsn = $2::pg_lsn, seq = $3::bigint,"
                      " updated_at = now() WHERE consumer = $1",
                      3, "preparing the progress update");
  target_.SendPrepare(kRegisterStatement,
                      "INSERT INTO dblog_apply.tables (consumer, table_schema, table_name)"
                      " VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                      3, "preparing the table registration");
}

void ProgressStore::SendPosition(const Position& position) {
  const std::string consumer = consumer_;
  target_.SendPrepared(
      kProgressStatement,
      {consumer, client::FormatLsn(position.commit_lsn()), std::to_string(position.seq())},
      "storing the position " + client::FormatPosition(position), [consumer](const PgResult& r) {
        if (r.affected() != 1)
          throw TargetError("the progress row of consumer " + consumer +
                                " in dblog_apply.progress is gone: refusing to apply without"
                                " recording positions",
                            "");
      });
}

void ProgressStore::SendClearPosition() {
  target_.SendQuery(
      "UPDATE dblog_apply.progress SET commit_lsn = NULL, seq = NULL, updated_at = now()"
      " WHERE consumer = $1",
      {consumer_}, "clearing the stored position for a new bootstrap");
}

bool ProgressStore::registered(const TargetName& table) const {
  return registered_.count({table.schema, table.name}) > 0;
}

void ProgressStore::Register(const TargetName& table) {
  if (registered(table)) return;
  target_.SendPrepared(kRegisterStatement, {consumer_, table.schema, table.name},
                       "registering " + table.Display() + " in dblog_apply.tables");
  registered_.insert({table.schema, table.name});
}

void ProgressStore::MoveRegistration(const TargetName& from, const TargetName& to) {
  if (!registered_.erase({from.schema, from.name})) return;
  target_.SendQuery(
      "DELETE FROM dblog_apply.tables WHERE consumer = $1 AND table_schema = $2"
      " AND table_name = $3",
      {consumer_, from.schema, from.name},
      "moving the registration of " + from.Display() + " in dblog_apply.tables");
  Register(to);
}

void ProgressStore::SaveMapping(std::uint32_t oid, const RelationMapping& mapping) {
  const std::string oid_text = std::to_string(oid);
  target_.SendQuery(
      "INSERT INTO dblog_apply.relations (consumer, relation_oid, table_schema, table_name)"
      " VALUES ($1, $2::oid, $3, $4) ON CONFLICT (consumer, relation_oid) DO UPDATE SET"
      " table_schema = EXCLUDED.table_schema, table_name = EXCLUDED.table_name,"
      " updated_at = now()",
      {consumer_, oid_text, mapping.target.schema, mapping.target.name},
      "storing the target table of relation " + oid_text);
  TextArray attnums, names, types, dropped;
  for (const MappedColumn& c : mapping.columns) {
    attnums.Add(std::string_view(std::to_string(c.attnum)));
    names.Add(std::string_view(c.name));
    types.Add(std::string_view(c.type));
    dropped.Add(std::string_view(c.dropped ? "t" : "f"));
  }
  target_.SendQuery(
      "DELETE FROM dblog_apply.columns WHERE consumer = $1 AND relation_oid = $2::oid",
      {consumer_, oid_text}, "storing the target columns of relation " + oid_text);
  target_.SendQuery(
      "INSERT INTO dblog_apply.columns (consumer, relation_oid, attnum, column_name, type_name,"
      " dropped) SELECT $1, $2::oid, u.a, u.n, u.t, u.d FROM ROWS FROM ("
      " pg_catalog.unnest($3::int[]), pg_catalog.unnest($4::text[]),"
      " pg_catalog.unnest($5::text[]), pg_catalog.unnest($6::boolean[])) AS u(a, n, t, d)",
      {consumer_, oid_text, attnums.Take(), names.Take(), types.Take(), dropped.Take()},
      "storing the target columns of relation " + oid_text);
  mappings_[oid] = mapping;
}

void ProgressStore::Unlock() {
  target_.Query("SELECT pg_advisory_unlock(" + std::string(kLockArguments) + ")", {consumer_},
                "releasing the consumer's advisory lock on the target");
}

}  // namespace dblog::apply
