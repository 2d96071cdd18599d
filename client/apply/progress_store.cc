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

std::uint32_t ParseOid(const PgResult& r, int row, int column) {
  return r.is_null(row, column) ? 0 : ParseOid(r.get(row, column));
}

}  // namespace

ProgressStore::ProgressStore(PgConnection& target, std::string schema, std::string consumer,
                             Log log)
    : target_(target),
      schema_(std::move(schema)),
      quoted_(QuoteIdent(schema_)),
      consumer_(std::move(consumer)),
      log_(std::move(log)) {
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
  target_.Query(
      "INSERT INTO " + Table("progress") + " (consumer) VALUES ($1) ON CONFLICT DO NOTHING",
      {consumer_}, "creating the consumer's progress row");
  RecordMissingOids();
  const std::optional<Position> position = ReadPosition();
  chain_ = position;
  ReadRegisteredTables();
  ReadMappings();
  ReadWentBack();
  return position;
}

void ProgressStore::ReadWentBack() {
  went_back_ = false;
  followed_.clear();
  const std::string sql = "SELECT u.o::pg_catalog.text FROM " + Table("reconciles") +
                          " r LEFT JOIN LATERAL pg_catalog.unnest(r.followed) AS u(o)"
                          " ON true WHERE r.consumer OPERATOR(pg_catalog.=) $1";
  const std::string what = "reading the consumer's last reconcile";
  PgResult row = target_.in_pipeline() ? target_.QueryNow(sql, {consumer_}, what)
                                       : target_.Query(sql, {consumer_}, what);
  for (int i = 0; i < row.rows(); ++i) {
    went_back_ = true;
    if (!row.is_null(i, 0)) followed_.insert(ParseOid(row.get(i, 0)));
  }
}

void ProgressStore::RecordWentBack(std::uint64_t consistent_point) {
  // The same reconcile said again (dblogd repeats it until the consumer reads past its slot's
  // start): the relations followed since stay followed.
  target_.QueryNow("INSERT INTO " + Table("reconciles") +
                       " AS r (consumer, consistent_point) VALUES ($1, $2::pg_catalog.pg_lsn)"
                       " ON CONFLICT (consumer) DO UPDATE SET consistent_point ="
                       " EXCLUDED.consistent_point, reconciled_at = CASE WHEN r.consistent_point"
                       " OPERATOR(pg_catalog.=) EXCLUDED.consistent_point THEN r.reconciled_at"
                       " ELSE pg_catalog.now() END, followed = CASE WHEN r.consistent_point"
                       " OPERATOR(pg_catalog.=) EXCLUDED.consistent_point THEN r.followed"
                       " ELSE '{}' END",
                   {consumer_, client::FormatLsn(consistent_point)},
                   "recording the reconcile of the source");
  ReadWentBack();
}

bool ProgressStore::Follow(std::uint32_t oid) {
  if (!went_back_ || !followed_.insert(oid).second) return false;
  target_.SendQuery("UPDATE " + Table("reconciles") +
                        " SET followed = pg_catalog.array_append(followed, $2::pg_catalog.oid)"
                        " WHERE consumer OPERATOR(pg_catalog.=) $1",
                    {consumer_, std::to_string(oid)},
                    "recording relation " + std::to_string(oid) + " as followed since the reconcile");
  return true;
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
      "BEGIN; SELECT pg_advisory_xact_lock(hashtext('dblog apply setup'));"
      " CREATE SCHEMA IF NOT EXISTS " +
          quoted_ + "; CREATE TABLE IF NOT EXISTS " + Table("progress") +
          " (consumer text PRIMARY KEY, commit_lsn pg_lsn, seq bigint,"
          "   updated_at timestamptz NOT NULL DEFAULT now());"
          " CREATE TABLE IF NOT EXISTS " +
          Table("tables") +
          " (consumer text, table_schema text, table_name text,"
          "   added_at timestamptz NOT NULL DEFAULT now(), target_oid oid,"
          "   PRIMARY KEY (consumer, table_schema, table_name));"
          " CREATE TABLE IF NOT EXISTS " +
          Table("reconciles") +
          " (consumer text PRIMARY KEY, consistent_point pg_lsn,"
          "   reconciled_at timestamptz NOT NULL DEFAULT now(),"
          "   followed oid[] NOT NULL DEFAULT '{}');" +
          RelationMapDdl(quoted_),
      "creating the bookkeeping schema " + schema_ + " in the target");
  // Made by a dblog apply that did not record target oids yet.
  for (const char* table : {"tables", "relations"}) {
    PgResult has = target_.Query(
        "SELECT EXISTS (SELECT FROM pg_catalog.pg_attribute WHERE attrelid = $1::regclass"
        " AND attname = 'target_oid' AND NOT attisdropped)",
        {Table(table)}, "reading the columns of " + Table(table));
    if (has.get(0, 0) != "t")
      target_.Exec("ALTER TABLE " + Table(table) + " ADD COLUMN target_oid oid",
                   "adding target_oid to " + Table(table));
  }
  target_.Exec("COMMIT");
}

void ProgressStore::RecordMissingOids() {
  for (const char* table : {"tables", "relations"})
    target_.Query("UPDATE " + Table(table) +
                      " SET target_oid = pg_catalog.to_regclass(pg_catalog.format('%I.%I',"
                      " table_schema, table_name))::oid WHERE consumer = $1 AND target_oid IS NULL",
                  {consumer_}, "recording the target oids of " + Table(table));
}

std::optional<Position> ProgressStore::ReadPosition() {
  PgResult stored = target_.Query(
      "SELECT commit_lsn::text, seq FROM " + Table("progress") + " WHERE consumer = $1",
      {consumer_}, "reading the stored position");
  if (stored.rows() != 1 || stored.is_null(0, 0)) return std::nullopt;
  return client::MakePosition(common::ParseLsn(stored.get(0, 0)),
                              static_cast<std::uint32_t>(std::stoull(stored.get(0, 1))));
}

void ProgressStore::ReadRegisteredTables() {
  PgResult tables = target_.Query("SELECT table_schema, table_name, target_oid::text FROM " +
                                      Table("tables") + " WHERE consumer = $1",
                                  {consumer_}, "reading the consumer's tables");
  for (int i = 0; i < tables.rows(); ++i)
    registered_[{tables.get(i, 0), tables.get(i, 1)}] = ParseOid(tables, i, 2);
}

void ProgressStore::ReadMappings() {
  PgResult relations =
      target_.Query("SELECT relation_oid::text, table_schema, table_name, target_oid::text FROM " +
                        Table("relations") + " WHERE consumer = $1",
                    {consumer_}, "reading the consumer's relation mapping");
  for (int i = 0; i < relations.rows(); ++i) {
    RelationMapping& mapping = mappings_[ParseOid(relations.get(i, 0))];
    mapping.target = TargetName{relations.get(i, 1), relations.get(i, 2)};
    mapping.target_oid = ParseOid(relations, i, 3);
  }
  PgResult columns = target_.Query(
      "SELECT relation_oid::text, attnum, column_name, type_name, dropped"
      " FROM " +
          Table("columns") + " WHERE consumer = $1 ORDER BY relation_oid, attnum",
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
  // The position written only over the one the previous position statement wrote ($4, $5;
  // NULL: none), else an error in the server: transactions in the pipeline commit at their
  // syncs without waiting for each other, and one that follows a transaction that failed (and
  // rolled back) must not commit, or the target would store a position past what it lacks.
  // The error is a cast of a message that names the row's value (so that the planner cannot
  // fold it into an error at planning time), in the SET of a plain UPDATE (no CTE).
  target_.SendPrepare(
      kProgressStatement,
      "UPDATE " + Table("progress") +
          " SET commit_lsn = $2::pg_catalog.pg_lsn, updated_at = pg_catalog.now(),"
          " seq = CASE WHEN CASE WHEN $4::pg_catalog.pg_lsn IS NULL THEN commit_lsn IS NULL"
          " ELSE commit_lsn OPERATOR(pg_catalog.=) $4::pg_catalog.pg_lsn AND"
          " seq OPERATOR(pg_catalog.=) $5::pg_catalog.int8 END THEN $3::pg_catalog.int8"
          " ELSE ('dblog apply: the stored position of consumer ' OPERATOR(pg_catalog.||) $1"
          " OPERATOR(pg_catalog.||) ' is not the one before this transaction (an earlier"
          " transaction failed, or the progress row was changed; it holds '"
          " OPERATOR(pg_catalog.||) coalesce(commit_lsn::pg_catalog.text, 'none')"
          " OPERATOR(pg_catalog.||) ')')::pg_catalog.int8 END"
          " WHERE consumer OPERATOR(pg_catalog.=) $1",
      5, "preparing the progress update");
  target_.SendPrepare(kRegisterStatement,
                      "INSERT INTO " + Table("tables") +
                          " (consumer, table_schema, table_name, target_oid)"
                          " VALUES ($1, $2, $3, $4::oid) ON CONFLICT (consumer, table_schema,"
                          " table_name) DO UPDATE SET target_oid = EXCLUDED.target_oid",
                      4, "preparing the table registration");
}

void ProgressStore::SendStored(const std::optional<Position>& position, const std::string& what) {
  const std::string consumer = consumer_, progress = Table("progress");
  Params params{consumer, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  if (position) {
    params[1] = client::FormatLsn(position->commit_lsn());
    params[2] = std::to_string(position->seq());
  }
  if (chain_) {
    params[3] = client::FormatLsn(chain_->commit_lsn());
    params[4] = std::to_string(chain_->seq());
  }
  target_.SendPrepared(kProgressStatement, params, what, [consumer, progress](const PgResult& r) {
    if (r.affected() != 1)
      throw TargetError("the progress row of consumer " + consumer + " in " + progress +
                            " is gone: refusing to apply without recording positions",
                        "");
  });
  chain_ = position;
}

void ProgressStore::SendPosition(const Position& position) {
  SendStored(position, "storing the position " + client::FormatPosition(position));
}

void ProgressStore::SendClearPosition() {
  SendStored(std::nullopt, "clearing the stored position for a new bootstrap");
}

bool ProgressStore::registered(const TargetName& table, std::uint32_t oid) const {
  const auto it = registered_.find({table.schema, table.name});
  return it != registered_.end() && it->second == oid;
}

void ProgressStore::Register(const TargetName& table, std::uint32_t oid) {
  if (registered(table, oid)) return;
  target_.SendPrepared(kRegisterStatement,
                       {consumer_, table.schema, table.name,
                        oid ? std::optional<std::string>(std::to_string(oid)) : std::nullopt},
                       "registering " + table.Display() + " in " + Table("tables"));
  registered_[{table.schema, table.name}] = oid;
}

void ProgressStore::MoveRegistration(const TargetName& from, const TargetName& to) {
  const auto it = registered_.find({from.schema, from.name});
  if (it == registered_.end()) return;
  const std::uint32_t oid = it->second;  // a renamed table keeps its oid
  registered_.erase(it);
  target_.SendQuery("DELETE FROM " + Table("tables") +
                        " WHERE consumer = $1 AND table_schema = $2 AND table_name = $3",
                    {consumer_, from.schema, from.name},
                    "moving the registration of " + from.Display() + " in " + Table("tables"));
  Register(to, oid);
}

void ProgressStore::SaveMapping(std::uint32_t oid, const RelationMapping& mapping) {
  const std::string oid_text = std::to_string(oid);
  target_.SendQuery(
      "INSERT INTO " + Table("relations") +
          " (consumer, relation_oid, table_schema, table_name, target_oid)"
          " VALUES ($1, $2::oid, $3, $4, $5::oid) ON CONFLICT (consumer, relation_oid) DO UPDATE"
          " SET table_schema = EXCLUDED.table_schema, table_name = EXCLUDED.table_name,"
          " target_oid = EXCLUDED.target_oid, updated_at = now()",
      {consumer_, oid_text, mapping.target.schema, mapping.target.name,
       mapping.target_oid ? std::optional<std::string>(std::to_string(mapping.target_oid))
                          : std::nullopt},
      "storing the target table of relation " + oid_text);
  TextArray attnums, names, types, dropped;
  for (const MappedColumn& c : mapping.columns) {
    attnums.Add(std::string_view(std::to_string(c.attnum)));
    names.Add(std::string_view(c.name));
    types.Add(std::string_view(c.type));
    dropped.Add(std::string_view(c.dropped ? "t" : "f"));
  }
  target_.SendQuery(
      "DELETE FROM " + Table("columns") + " WHERE consumer = $1 AND relation_oid = $2::oid",
      {consumer_, oid_text}, "storing the target columns of relation " + oid_text);
  target_.SendQuery(
      "INSERT INTO " + Table("columns") +
          " (consumer, relation_oid, attnum, column_name, type_name,"
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
