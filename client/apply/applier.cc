// client/apply/applier.cc: the stream -> target SQL mapping (see applier.h).
#include "client/apply/applier.h"

#include <cctype>
#include <cstdio>
#include <cstring>

#include "client/position.h"
#include "client/repair_call.h"
#include "client/relation_cache.h"

namespace dblog::apply {

using dblog::v1::Change;
using dblog::v1::Position;
using dblog::v1::Relation;
using dblog::v1::Row;
using dblog::v1::StreamEvent;
using dblog::v1::Value;

namespace {

constexpr char kDurableStatement[] = "dblog_apply_durable";
constexpr std::uint64_t kMissingRowsLogged = 100;  // one line each; then one per 1000
// A COPY's rows go out in pieces of this size while the next are read: the server inserts one
// piece while dblog apply reads the next.
constexpr std::size_t kCopyPieceBytes = 256u << 10;

bool HasUnchanged(const Row& row) {
  for (const Value& v : row.values())
    if (v.kind_case() == Value::kUnchanged) return true;
  return false;
}



}  // namespace

Applier::Applier(PgConnection target, ApplierOptions options, Log log)
    : target_(std::move(target)),
      options_(std::move(options)),
      log_(std::move(log)),
      store_(target_, options_.bookkeeping_schema, options_.consumer, log_),
      target_tables_(target_, store_,
                     TargetTablesOptions{options_.consumer, options_.bookkeeping_schema,
                                         options_.create_tables, options_.allow_lossy_columns,
                                         options_.dropped_columns},
                     [this](const std::string& line) { log_(line); }) {
  if (!log_) log_ = [](const std::string&) {};
  if (options_.batch_rows == 0) options_.batch_rows = 1;
  if (options_.bootstrap_commit_rows == 0) options_.bootstrap_commit_rows = 1;
}

std::optional<Position> Applier::Start() {
  const std::optional<Position> position = store_.Open();
  // Transactions commit without waiting for their WAL to be flushed (as a subscription's apply
  // worker does); a durable commit every so often (WaitForCommits) flushes everything before
  // it, and only that advances durable(). Durable commits use the session's own level (a
  // synchronous standby's confirmation included), at least 'local'.
  const std::string level =
      target_
          .Query("SELECT pg_catalog.current_setting('synchronous_commit')", {},
                 "reading synchronous_commit")
          .get(0, 0);
  durable_level_ = level == "off" ? "local" : level;
  target_.Exec("SET synchronous_commit = off", "setting synchronous_commit");
  store_.StartPipeline();
  target_.SendPrepare(kDurableStatement,
                      "SELECT pg_catalog.set_config('synchronous_commit', $1, true)", 1,
                      "preparing the durable commit's setting");
  had_position_ = position.has_value();
  durable_ = position;
  committed_ = position;
  sent_ = position;
  last_position_ = position;
  return position;
}

// ---- events -----------------------------------------------------------------------------

void Applier::Advance(const Position& position) {
  if (last_position_ && client::ComparePositions(position, *last_position_) <= 0)
    throw StreamError("an event at " + client::FormatPosition(position) +
                      " is not after the last applied position " +
                      client::FormatPosition(*last_position_));
  last_position_ = position;
}

void Applier::Apply(const wire::ChangeView& change) {
  // The bootstrap's rows of a table filled by COPY (chosen at its first row, parsed below): the
  // values go from the frame into the COPY data. OnChange and OnCopiedRow do the same, in this
  // order, for a parsed one.
  if (change.kind == Change::READ && bootstrap_open_ && !chunk_.open &&
      !change.new_row.HasUnchanged()) {
    const auto table = tables_.find(change.relation_oid);
    if (table != tables_.end() && table->second.prepared &&
        table->second.bootstrap_fill == Table::Fill::kCopy) {
      const Position position = client::MakePosition(change.commit_lsn, change.seq);
      Advance(position);
      BeginTarget();
      Register(table->second);
      AddToCopy(table->second, change.new_row);
      CountBootstrapRow(position);
      return;
    }
  }
  parsed_.Clear();
  if (!change.ParseInto(parsed_.mutable_change()))  // (it parsed in place: it parses)
    throw StreamError("a Change read in place does not parse");
  Apply(parsed_);
}

void Applier::Apply(const StreamEvent& event) {
  if (const auto position = client::PositionOf(event)) Advance(*position);
  switch (event.event_case()) {
    case StreamEvent::kRelation:
      return OnRelation(event.relation());
    case StreamEvent::kBegin:
      return OnBegin(event.begin());
    case StreamEvent::kChange:
      return OnChange(event.change());
    case StreamEvent::kTruncate:
      return OnTruncate(event.truncate());
    case StreamEvent::kMessage:
      // Messages carry nothing to apply. A non-transactional one sits between transactions:
      // acknowledging it is fine once everything before it is durable.
      if (!source_txn_open_ && !bootstrap_open_) {
        if (const auto position = client::PositionOf(event)) OnPositionOnly(*position);
      }
      return;
    case StreamEvent::kCommit:
      return OnCommit(event.commit());
    case StreamEvent::kBootstrapBegin:
      return OnBootstrapBegin(event.bootstrap_begin());
    case StreamEvent::kBootstrapEnd:
      return OnBootstrapEnd(event.bootstrap_end());
    case StreamEvent::kChunkBegin:
      return OnChunkBegin(event.chunk_begin());
    case StreamEvent::kChunkEnd:
      return OnChunkEnd(event.chunk_end());
    case StreamEvent::kValuePiece:  // put together by the client library, never handed out
    case StreamEvent::EVENT_NOT_SET:
      break;
  }
  throw StreamError("an event of a kind this applier does not know");
}

void Applier::OnHeartbeat(const dblog::v1::Heartbeat& heartbeat) {
  if (in_source_transaction() || !heartbeat.has_position()) return;
  const Position& position = heartbeat.position();
  if (position.commit_lsn() == 0 && position.seq() == 0) return;
  if (last_position_ && client::ComparePositions(position, *last_position_) < 0) return;
  last_position_ = position;
  OnPositionOnly(position);
}

void Applier::RefuseBookkeeping(const std::string& schema, const std::string& name) const {
  const std::string& bookkeeping = options_.bookkeeping_schema;
  if (options_.schema_map.Map(schema, name).schema != bookkeeping) return;
  throw SchemaError("source table " + DisplayName(schema, name) + " would be applied into" +
                    " target schema " + DisplayName(bookkeeping) + ", which holds dblog apply's" +
                    " bookkeeping (positions, the tables written, the relation mapping):" +
                    " refusing to apply it. Keep the bookkeeping elsewhere" +
                    " (--bookkeeping-schema NAME), apply that source schema elsewhere" +
                    " (--schema-map " + DisplayName(schema) +
                    "=NAME), or leave it out of the consumer's scope");
}

void Applier::OnRelation(const Relation& relation) {
  // Before anything of it is kept: nothing the source names may change the bookkeeping.
  RefuseBookkeeping(relation.schema(), relation.name());
  std::string bytes = relation.SerializeAsString();
  auto it = tables_.find(relation.oid());
  if (it != tables_.end() && it->second.relation_bytes == bytes) return;
  // Statements of the old definition go out first.
  if (batch_.oid == relation.oid()) FlushBatch();
  if (chunk_.open && chunk_.begin.relation_oid() == relation.oid())
    throw StreamError("the Relation of " + DisplayName(relation.schema(), relation.name()) +
                      " changed inside one of its repair chunks");
  Table& table = tables_[relation.oid()];
  table.relation = relation;
  table.relation_bytes = std::move(bytes);
  table.target = options_.schema_map.Map(relation);
  table.quoted = table.target.Quoted();
  table.prepared = false;  // checked again (and its statements prepared) at its next use
}

void Applier::OnBegin(const dblog::v1::Begin& begin) {
  if (source_txn_open_ || bootstrap_open_)
    throw StreamError("Begin of " + client::FormatLsn(begin.commit_lsn()) +
                      " while a transaction or the bootstrap is open");
  source_txn_open_ = true;
}

void Applier::OnCommit(const dblog::v1::Commit& commit) {
  if (!source_txn_open_)
    throw StreamError("Commit of " + client::FormatLsn(commit.commit_lsn()) +
                      " outside a transaction");
  if (chunk_.open) throw StreamError("Commit inside a repair chunk");
  const Position position = client::MakePosition(commit.commit_lsn(), commit.seq());
  source_txn_open_ = false;
  if (target_txn_open_) {
    CommitTarget(position);
  } else {
    OnPositionOnly(position);
  }
}

void Applier::OnChange(const Change& change) {
  if (!source_txn_open_ && !bootstrap_open_)
    throw StreamError("a Change at " + client::FormatLsn(change.commit_lsn()) + ":" +
                      std::to_string(change.seq()) + " outside a transaction");
  Table& table = TableFor(change.relation_oid(), "a Change");
  BeginTarget();
  Register(table);
  switch (change.kind()) {
    case Change::READ:
      return OnCopiedRow(table, change);
    case Change::INSERT:
      if (HasUnchanged(change.new_row())) {
        UpdateKeepingUnchanged(table, change.new_row());
      } else {
        Upsert(table, change.new_row());
      }
      return;
    case Change::UPDATE:
      return OnUpdate(table, change);
    case Change::DELETE:
      Delete(table, change.old_key());
      return;
    default:
      break;
  }
  throw StreamError("a Change of unknown kind " + std::to_string(change.kind()) + " for " +
                    table.target.Display());
}

void Applier::OnCopiedRow(Table& table, const Change& change) {
  if (HasUnchanged(change.new_row()))
    throw StreamError("a copied row of " + table.target.Display() +
                      " with an unchanged-TOAST marker");
  if (chunk_.open) {
    if (chunk_.begin.relation_oid() != change.relation_oid())
      throw StreamError("a copied row of another table inside a repair chunk of " +
                        table.target.Display());
    const Row key = KeyOf(table, change.new_row());
    for (int i = 0; i < key.values_size(); ++i)
      chunk_.keys[static_cast<std::size_t>(i)].Add(ValueText(key.values(i)));
  }
  if (bootstrap_open_ && table.bootstrap_fill == Table::Fill::kUnknown) ChooseBootstrapFill(table);
  if (bootstrap_open_ && table.bootstrap_fill == Table::Fill::kCopy) {
    AddToCopy(table, change.new_row());
  } else {
    Upsert(table, change.new_row(), BatchKind::kRefresh);  // written where it differs
  }
  if (bootstrap_open_) CountBootstrapRow(client::MakePosition(change.commit_lsn(), change.seq()));
}

void Applier::CountBootstrapRow(const Position& position) {
  ++bootstrap_rows_;
  if (++bootstrap_rows_in_txn_ >= options_.bootstrap_commit_rows) CommitTarget(position);
}

void Applier::ChooseBootstrapFill(Table& table) {
  FlushBatch();  // a TRUNCATE of the restart comes first
  PgResult empty = target_.QueryNow("SELECT NOT EXISTS (SELECT FROM " + table.quoted + ")", {},
                                    "looking into target table " + table.target.Display());
  const bool is_empty = empty.get(0, 0) == "t";
  // COPY only into the source's own types: it reads values with the target's input
  // functions, which do not convert (integer cannot read "1.25").
  table.bootstrap_fill = is_empty && table.same_types ? Table::Fill::kCopy : Table::Fill::kUpsert;
  if (!is_empty)
    log_("note: target table " + table.target.Display() +
         " has rows this consumer did not write: the bootstrap upserts into it, and rows"
         " the source lacks stay (empty the table first, or repair it)");
}

void Applier::OnUpdate(Table& table, const Change& change) {
  const Row new_key = KeyOf(table, change.new_row());
  const bool same_key =
      !change.has_old_key() || change.old_key().SerializeAsString() == new_key.SerializeAsString();
  if (HasUnchanged(change.new_row())) {
    if (same_key) {
      UpdateKeepingUnchanged(table, change.new_row());
    } else {
      MoveKeepingUnchanged(table, change.old_key(), change.new_row());
    }
    return;
  }
  if (!same_key) Delete(table, change.old_key());
  Upsert(table, change.new_row());
}

void Applier::OnTruncate(const dblog::v1::Truncate& truncate) {
  if (!source_txn_open_) throw StreamError("a Truncate outside a transaction");
  std::string names;
  std::vector<Table*> truncated;
  for (const std::uint32_t oid : truncate.relation_oids()) {
    Table& table = TableFor(oid, "a Truncate");
    names += (names.empty() ? "" : ", ") + table.quoted;
    truncated.push_back(&table);
  }
  if (truncated.empty()) return;
  FlushBatch();
  BeginTarget();
  for (Table* table : truncated) Register(*table);
  Send("TRUNCATE TABLE " + names, {}, "truncating " + names);
  stats_.truncates += truncated.size();
}

void Applier::OnBootstrapBegin(const dblog::v1::BootstrapBegin& begin) {
  if (source_txn_open_ || bootstrap_open_)
    throw StreamError("BootstrapBegin while a transaction or another bootstrap is open");
  for (const auto& t : begin.tables()) RefuseBookkeeping(t.schema(), t.name());
  bootstrap_open_ = true;
  bootstrap_rows_ = 0;
  bootstrap_rows_in_txn_ = 0;
  bootstrap_started_ = std::chrono::steady_clock::now();
  for (auto& [oid, table] : tables_) {
    table.bootstrap_fill = Table::Fill::kUnknown;
    table.copy_as_text = false;
  }
  std::uint64_t estimated = 0;
  for (const auto& t : begin.tables()) estimated += t.rows_estimated();
  log_("bootstrap started at consistent point " + client::FormatLsn(begin.consistent_point()) +
       ": " + std::to_string(begin.tables_size()) + " tables, about " + std::to_string(estimated) +
       " rows" + (begin.restarted() ? " (restarted)" : ""));
  if (begin.restarted() || had_position_ || !store_.registered_tables().empty())
    ClearForBootstrap(begin.restarted());
}

void Applier::ClearForBootstrap(bool restarted) {
  // The bootstrap is a complete image: whatever an earlier attempt (or an earlier life of this
  // consumer) left in the target must go, in the same transaction as the first copied rows.
  BeginTarget();
  std::vector<std::pair<std::string, std::string>> existing;
  cleared_.clear();
  for (const auto& [table, registered_oid] : store_.registered_tables()) {
    const TargetName name{table.first, table.second};
    const std::uint32_t oid = target_tables_.Oid(name);
    if (oid == 0) continue;
    if (registered_oid != 0 && oid != registered_oid) RefuseUnregistered(name, registered_oid, oid);
    existing.push_back(table);
    cleared_.insert(oid);
  }
  stats_.catalog_reads = target_tables_.catalog_reads();
  std::string names;
  for (const auto& [schema, name] : existing)
    names += (names.empty() ? "" : ", ") + QualifiedName(schema, name);
  if (!names.empty())
    Send("TRUNCATE TABLE " + names, {}, "clearing " + names + " for a new bootstrap");
  store_.SendClearPosition();
  std::string display;
  for (const auto& [schema, name] : existing)
    display += (display.empty() ? "" : ", ") + schema + "." + name;
  log_(std::string(restarted ? "an earlier bootstrap did not finish"
                             : "this consumer applied here before") +
       ": clearing " + std::to_string(existing.size()) + " target tables" +
       (display.empty() ? "" : " (" + display + ")") + " and the stored position");
}

void Applier::RefuseUnregistered(const TargetName& name, std::uint32_t registered,
                                 std::uint32_t now) {
  const std::string fix =
      "UPDATE " + store_.Table("tables") +
      " SET target_oid = NULL WHERE consumer = " + target_.QuoteLiteral(options_.consumer) +
      " AND table_schema = " + target_.QuoteLiteral(name.schema) +
      " AND table_name = " + target_.QuoteLiteral(name.name);
  throw SchemaError(
      DisplayName(options_.bookkeeping_schema, "tables") + " lists target table " + name.Display() +
      " for consumer " + options_.consumer + " as table oid " + std::to_string(registered) +
      ", but " + name.Display() + " is table oid " + std::to_string(now) +
      " now: not a table this consumer wrote, and a new bootstrap would truncate it. Nothing"
      " was applied. If it is this consumer's table (recreated, or the target restored from a"
      " dump), record it again with " +
      fix + "; otherwise delete that row");
}

void Applier::OnBootstrapEnd(const dblog::v1::BootstrapEnd& end) {
  if (!bootstrap_open_) throw StreamError("BootstrapEnd without a bootstrap");
  BeginTarget();
  CommitTarget(client::MakePosition(end.commit_lsn(), end.seq()));
  bootstrap_open_ = false;
  cleared_.clear();
  std::uint64_t copied = 0;
  for (const auto& t : end.tables()) copied += t.rows_copied();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - bootstrap_started_).count();
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.1f s, %.0f rows/s", seconds,
                seconds > 0 ? static_cast<double>(bootstrap_rows_) / seconds : 0.0);
  log_("bootstrap received: " + std::to_string(bootstrap_rows_) + " rows applied (" + rate +
       "), dblogd copied " + std::to_string(copied) + " rows");
}

void Applier::OnChunkBegin(const dblog::v1::ChunkBegin& begin) {
  if (!source_txn_open_) throw StreamError("ChunkBegin outside a transaction");
  if (chunk_.open) throw StreamError("ChunkBegin inside another chunk");
  Table& table = TableFor(begin.relation_oid(), "a ChunkBegin");
  chunk_ = Chunk{};
  chunk_.open = true;
  chunk_.begin = begin;
  chunk_.keys.resize(static_cast<std::size_t>(table.relation.key_columns_size()));
}

void Applier::OnChunkEnd(const dblog::v1::ChunkEnd& end) {
  if (!chunk_.open) throw StreamError("ChunkEnd without ChunkBegin");
  if (end.relation_oid() != chunk_.begin.relation_oid() ||
      end.request_id() != chunk_.begin.request_id())
    throw StreamError("ChunkEnd of another chunk (request " + std::to_string(end.request_id()) +
                      ")");
  if (chunk_.begin.is_range()) {
    Table& table = TableFor(end.relation_oid(), "a ChunkEnd");
    BeginTarget();
    Register(table);
    FlushBatch();
    RangeDelete(table, end);
  }
  chunk_ = Chunk{};
}

void Applier::OnPositionOnly(const Position& position) {
  target_.SendMarker([this, position] {
    // Needs nothing written: durable as soon as every commit before it is.
    const bool all_durable =
        committed_.has_value() == durable_.has_value() &&
        (!committed_ || client::ComparePositions(*committed_, *durable_) == 0);
    MarkCommitted(position);
    if (all_durable) MarkDurable(position);
  });
  sent_ = position;
  AckableSent();
}

// ---- tables ------------------------------------------------------------------------------

Applier::Table& Applier::TableFor(std::uint32_t oid, const char* what) {
  auto it = tables_.find(oid);
  if (it == tables_.end())
    throw StreamError(std::string(what) + " for relation oid " + std::to_string(oid) +
                      " that no Relation described");
  if (!it->second.prepared) {
    // Schema changes it brings land in the target transaction of its source transaction.
    BeginTarget();
    PrepareTable(it->second);
  }
  return it->second;
}

void Applier::PrepareTable(Table& table) {
  FlushBatch();
  struct CountReads {  // also when Prepare throws
    Applier& applier;
    ~CountReads() { applier.stats_.catalog_reads = applier.target_tables_.catalog_reads(); }
  } count_reads{*this};
  const TargetTables::Prepared prepared = target_tables_.Prepare(
      table.relation, table.target,
      TargetTables::Host{
          [this](std::uint32_t target_oid) {
            return bootstrap_open_ && cleared_.count(target_oid) > 0;
          },
          [this](std::uint32_t relation_oid) {
            if (const auto t = tables_.find(relation_oid); t != tables_.end())
              t->second.prepared = false;
          }});
  const RelationMapping& mapping = prepared.mapping;
  table.same_types = prepared.fit.same_types;
  table.target_oid = prepared.fit.oid;
  const Relation& rel = table.relation;
  table.byte_equal_keys = ByteEqualKeys(rel);
  if (table.generation > 0) {
    for (const auto& name :
         {table.upsert_name, table.upsert_name + "_1", table.refresh_name,
          table.refresh_name + "_1", table.delete_name, table.delete_name + "_1"})
      Send("DEALLOCATE " + name, {}, "dropping an old statement");
  }
  ++table.generation;
  const std::string suffix = std::to_string(rel.oid()) + "_" + std::to_string(table.generation);
  table.upsert_name = "dblog_apply_u" + suffix;
  table.refresh_name = "dblog_apply_r" + suffix;
  table.delete_name = "dblog_apply_d" + suffix;
  const TableStatements statements = BuildTableStatements(rel, table.quoted);
  const int columns = rel.columns_size(), keys = rel.key_columns_size();
  const std::string into = "preparing the upsert into " + table.target.Display();
  const std::string from = "preparing the delete from " + table.target.Display();
  target_.SendPrepare(table.upsert_name, statements.upsert, columns, into);
  // One row (the common case of small transactions): plain parameters, no arrays.
  target_.SendPrepare(table.upsert_name + "_1", statements.upsert_one, columns, into);
  target_.SendPrepare(table.refresh_name, statements.refresh, columns, into);
  target_.SendPrepare(table.refresh_name + "_1", statements.refresh_one, columns, into);
  target_.SendPrepare(table.delete_name, statements.remove, keys, from);
  target_.SendPrepare(table.delete_name + "_1", statements.remove_one, keys, from);
  table.copy_sql = statements.copy;
  table.copy_binary_sql = statements.copy_binary;
  table.binary_types.clear();
  if (options_.copy_binary && prepared.fit.same_types &&
      prepared.fit.target_type_oids.size() == static_cast<std::size_t>(columns)) {
    // Only built-in types, the same in the target (by oid, not by the name format_type gives).
    for (int i = 0; i < columns; ++i) {
      const std::uint32_t type_oid = rel.columns(i).type_oid();
      const BinaryType type = type_oid == prepared.fit.target_type_oids[static_cast<std::size_t>(i)]
                                  ? BinaryTypeOf(type_oid)
                                  : BinaryType::kNone;
      if (type == BinaryType::kNone) {
        table.binary_types.clear();
        break;
      }
      table.binary_types.push_back(type);
    }
  }
  table.registered = store_.registered(table.target, table.target_oid);
  if (const auto it = store_.mappings().find(rel.oid());
      it == store_.mappings().end() || it->second.target != mapping.target ||
      it->second.columns != mapping.columns || it->second.target_oid != mapping.target_oid)
    store_.SaveMapping(rel.oid(), mapping);
  table.prepared = true;
}

void Applier::Register(Table& table) {
  if (table.registered) return;
  FlushCopy();  // another table's COPY may be open
  store_.Register(table.target, table.target_oid);
  table.registered = true;
}

// ---- transactions ------------------------------------------------------------------------

void Applier::BeginTarget() {
  if (target_txn_open_) return;
  target_.BeginTransaction();  // no statement: pg.h, "transactions"
  store_.TransactionBegins();
  target_txn_open_ = true;
  bootstrap_rows_in_txn_ = 0;
}

void Applier::CommitTarget(const Position& position, bool counted) {
  FlushBatch();
  store_.SendPosition(position);
  const bool durable = durable_requested_;
  if (durable) {
    target_.RequireTransactionBlock();  // where a local setting is a transaction's for sure
    target_.SendPrepared(kDurableStatement, {durable_level_},
                         "setting the durable commit's synchronous_commit");
    ++stats_.statements;
  }
  target_.CommitTransaction([this, position, durable, counted] {
    if (counted) ++stats_.transactions;
    MarkCommitted(position);
    // Its commit record was flushed (and confirmed as the session's level asks), and with it
    // every transaction committed before it.
    if (durable) MarkDurable(position);
  });
  target_txn_open_ = false;
  durable_requested_ = false;
  bootstrap_rows_in_txn_ = 0;
  sent_ = position;
  AckableSent();
}

void Applier::MarkCommitted(const Position& position) {
  if (!committed_ || client::ComparePositions(position, *committed_) > 0) committed_ = position;
}

void Applier::MarkDurable(const Position& position) {
  if (!durable_ || client::ComparePositions(position, *durable_) > 0) durable_ = position;
}

void Applier::AckableSent() { ackable_sent_ = target_.queued_total(); }

bool Applier::durable_behind() const {
  return sent_ && (!durable_ || client::ComparePositions(*sent_, *durable_) > 0);
}

void Applier::SendDurableCommit() {
  if (!durable_behind()) return;
  if (target_txn_open_) {
    durable_requested_ = true;  // the open transaction's commit will do
    return;
  }
  // A transaction of its own that writes the stored position again (a commit that wrote
  // nothing would flush nothing).
  BeginTarget();
  durable_requested_ = true;
  CommitTarget(*sent_, /*counted=*/false);
}

void Applier::Poll() { target_.Poll(); }

void Applier::WaitForCommits() {
  // A COPY is not left open while the caller waits for the stream (a target's
  // statement_timeout would count the wait).
  FlushCopy();
  SendDurableCommit();
  target_.DrainThrough(ackable_sent_);
}

void Applier::Stop() {
  batch_ = Batch{};
  if (copy_.open) target_.CopyAbort();  // its rows go with the transaction
  copy_ = CopyBuffer{};
  chunk_ = Chunk{};
  if (target_txn_open_) {
    target_.RollbackTransaction();
    store_.TransactionRolledBack();
    target_txn_open_ = false;
    durable_requested_ = false;
  }
  target_.Drain();  // an earlier failure throws here, before anything else is committed
  SendDurableCommit();  // so that the last acknowledgement covers every commit
  target_.Drain();
}

void Applier::Release() {
  Stop();
  store_.Unlock();
}

// ---- rows --------------------------------------------------------------------------------

Row Applier::KeyOf(const Table& table, const Row& row) const {
  auto key = client::KeyOfRow(table.relation, row);
  if (!key)
    throw StreamError("a row of " + table.target.Display() + " with " +
                      std::to_string(row.values_size()) + " values lacks its key columns");
  return std::move(*key);
}

void Applier::Upsert(Table& table, const Row& row, BatchKind kind) {
  if (row.values_size() != table.relation.columns_size())
    throw StreamError("a row of " + table.target.Display() + " with " +
                      std::to_string(row.values_size()) + " values for " +
                      std::to_string(table.relation.columns_size()) + " columns");
  std::vector<std::optional<std::string>> values;
  values.reserve(static_cast<std::size_t>(row.values_size()));
  for (const Value& v : row.values()) values.push_back(ValueText(v));
  AddToBatch(table, kind, std::move(values));
}

void Applier::Delete(Table& table, const Row& key) {
  if (key.values_size() != table.relation.key_columns_size())
    throw StreamError("a key of " + table.target.Display() + " with " +
                      std::to_string(key.values_size()) + " values for " +
                      std::to_string(table.relation.key_columns_size()) + " key columns");
  std::vector<std::optional<std::string>> values;
  for (const Value& v : key.values()) {
    if (v.kind_case() == Value::kUnchanged)
      throw StreamError("a key of " + table.target.Display() + " with an unchanged-TOAST marker");
    values.push_back(ValueText(v));
  }
  AddToBatch(table, BatchKind::kDelete, std::move(values));
}

void Applier::AddToBatch(Table& table, BatchKind kind,
                         std::vector<std::optional<std::string>> values) {
  const std::uint32_t oid = table.relation.oid();
  FlushCopy();
  if (batch_.kind != kind || batch_.oid != oid) {
    SendBatch();
    batch_.kind = kind;
    batch_.oid = oid;
  }
  std::size_t bytes = 0;
  for (const auto& v : values) bytes += v ? v->size() + 3 : 5;
  if (kind != BatchKind::kDelete) {
    // A key seen earlier in this batch: its new full row replaces the old one (one INSERT ..
    // ON CONFLICT may not touch a row twice). Keys are compared by their text here; key types
    // whose equality is not textual are deduplicated by PostgreSQL (see PrepareTable).
    std::string key;
    for (const std::uint32_t k : table.relation.key_columns()) {
      const auto& v = values[k];
      key += v ? std::to_string(v->size()) + ":" + *v : std::string("N");
      key.push_back(',');
    }
    const auto [it, inserted] = batch_.index.emplace(std::move(key), batch_.rows.size());
    if (!inserted) {
      batch_.rows[it->second] = std::move(values);
      batch_.bytes += bytes;
      return;
    }
  }
  batch_.rows.push_back(std::move(values));
  batch_.bytes += bytes;
  if (batch_.rows.size() >= options_.batch_rows || batch_.bytes >= options_.batch_bytes)
    SendBatch();
}

namespace {
int Width(const Row& row) { return row.values_size(); }
int Width(const wire::RowView& row) { return static_cast<int>(row.size()); }
const dblog::v1::Value& At(const Row& row, int i) { return row.values(i); }
const wire::ValueView& At(const wire::RowView& row, int i) {
  return row[static_cast<std::size_t>(i)];
}
}  // namespace

template <typename RowOf>
void Applier::AddToCopy(Table& table, const RowOf& row) {
  const int width = Width(row);
  if (width != table.relation.columns_size())
    throw StreamError("a row of " + table.target.Display() + " with " + std::to_string(width) +
                      " values for " + std::to_string(table.relation.columns_size()) +
                      " columns");
  SendBatch();
  // In binary where the table's columns allow it and the row has a binary form (copy_binary.h);
  // the first row without one turns the rest of the table's bootstrap to text.
  bool binary = false;
  if (!table.binary_types.empty() && !table.copy_as_text) {
    copy_row_.clear();
    std::size_t failed = 0;
    binary = AppendCopyBinaryRow(copy_row_, table.binary_types, row, &failed);
    if (!binary) {
      table.copy_as_text = true;
      const int column = static_cast<int>(failed);
      log_("a row of " + table.target.Display() + " has a value with no binary COPY form" +
           (column < width ? " in column " + table.relation.columns(column).name() + " (" +
                                 table.relation.columns(column).type_name() + ")"
                           : std::string()) +
           " (a timestamp beyond int64 microseconds, say): the rest of its bootstrap is"
           " copied as text");
    }
  }
  if (copy_.open && (copy_.oid != table.relation.oid() || copy_.binary != binary)) FlushCopy();
  if (!copy_.open) {
    target_.CopyBegin(binary ? table.copy_binary_sql : table.copy_sql,
                      "copying rows into " + table.target.Display());
    copy_.open = true;
    copy_.binary = binary;
    copy_.oid = table.relation.oid();
    if (binary) AppendCopyBinaryHeader(copy_.data);
  }
  if (binary) {
    copy_.data += copy_row_;
    ++copy_.binary_rows;
    if (copy_row_.capacity() > kCopyPieceBytes) std::string().swap(copy_row_);  // a huge row
  } else {
    for (int i = 0; i < width; ++i) {
      if (i) copy_.data.push_back('\t');
      AppendCopyValue(copy_.data, At(row, i));
    }
    copy_.data.push_back('\n');
  }
  ++copy_.rows;
  if (copy_.data.size() >= kCopyPieceBytes) {
    target_.CopyPut(copy_.data);
    copy_.data.clear();
  }
}

void Applier::FlushCopy() {
  if (!copy_.open) return;
  if (copy_.binary && !copy_.trailer) {
    AppendCopyBinaryTrailer(copy_.data);
    copy_.trailer = true;  // once, even if what follows throws
  }
  target_.CopyPut(copy_.data);
  copy_.data.clear();
  stats_.rows_written += target_.CopyEnd();
  stats_.rows_copied_binary += copy_.binary_rows;
  ++stats_.statements;
  copy_ = CopyBuffer{};
}

void Applier::FlushBatch() {
  FlushCopy();
  SendBatch();
}

void Applier::SendBatch() {
  if (batch_.kind == BatchKind::kNone || batch_.rows.empty()) {
    batch_ = Batch{};
    return;
  }
  Table& table = tables_.at(batch_.oid);
  const std::size_t count = batch_.rows.size();
  Params params;
  std::string suffix;
  if (count == 1) {
    params = std::move(batch_.rows.front());
    suffix = "_1";
  } else {
    const std::size_t width = batch_.rows.front().size();
    std::vector<TextArray> arrays(width);
    for (const auto& row : batch_.rows)
      for (std::size_t c = 0; c < width; ++c) arrays[c].Add(row[c]);
    params.reserve(width);
    for (auto& a : arrays) params.emplace_back(a.Take());
  }
  if (batch_.kind == BatchKind::kUpsert) {
    target_.SendPrepared(
        table.upsert_name + suffix, params,
        "upserting " + std::to_string(count) + " rows into " + table.target.Display());
    stats_.rows_written += count;
  } else if (batch_.kind == BatchKind::kRefresh) {
    // the rows inserted or changed; the others were right already
    target_.SendPrepared(
        table.refresh_name + suffix, params,
        "upserting " + std::to_string(count) + " copied rows into " + table.target.Display(),
        [this, count](const PgResult& r) {
          stats_.rows_written += r.affected();
          stats_.rows_unchanged += count - std::min<std::uint64_t>(count, r.affected());
        });
  } else {
    target_.SendPrepared(
        table.delete_name + suffix, params,
        "deleting " + std::to_string(count) + " keys from " + table.target.Display(),
        [this](const PgResult& r) { stats_.rows_deleted += r.affected(); });
  }
  ++stats_.statements;
  batch_ = Batch{};
}

void Applier::Send(const std::string& sql, const Params& params, const std::string& what,
                   PgConnection::Check check) {
  target_.SendQuery(sql, params, what, std::move(check));
  ++stats_.statements;
}

void Applier::UpdateKeepingUnchanged(Table& table, const Row& row) {
  FlushBatch();
  UpdateStatement update = BuildUpdateKeepingUnchanged(table.relation, Ref(table), row);
  const Row key = KeyOf(table, row);
  const std::uint32_t oid = table.relation.oid();
  if (update.check_only) {
    Send(update.statement.sql, update.statement.params,
         "looking for a row of " + table.target.Display() + " (its unchanged TOAST values)",
         [this, oid, key](const PgResult& r) {
           if (r.rows() == 0) MissingRow(oid, key);
         });
    return;
  }
  Send(update.statement.sql, update.statement.params,
       "updating a row of " + table.target.Display() + " (keeping its unchanged TOAST values)",
       [this, oid, key](const PgResult& r) {
         ++stats_.rows_written;
         if (r.affected() == 0) MissingRow(oid, key);
       });
}

void Applier::MissingRow(std::uint32_t oid, const Row& key) {
  const Table& table = tables_.at(oid);  // the latest definition: the callback runs later
  // The source kept TOAST values the WAL did not carry: only the row we lack had them. Nothing
  // is invented; the row stays missing until the source writes it whole again, or a repair of
  // its key copies it (REPLICA IDENTITY FULL at the source avoids this: docs/protocol.md).
  const std::uint64_t n = ++stats_.missing_rows;
  if (n > kMissingRowsLogged && n % 1000 != 0) return;
  std::string key_text, call;
  try {
    key_text = client::KeyJson(table.relation, key);
    call = client::RepairKeysCall(table.relation, {key}, options_.consumer);
  } catch (const std::exception& e) {
    key_text = "(" + std::string(e.what()) + ")";
  }
  if (n > kMissingRowsLogged) {
    log_("warning: " + std::to_string(n) + " updates so far kept unchanged TOAST values of rows" +
         " the target does not have (the latest: " + table.target.Display() + " key " + key_text +
         "); only the first " + std::to_string(kMissingRowsLogged) +
         " were logged one by one. Restore the table from the source with: " +
         client::RepairTableCall(table.relation, options_.consumer));
    return;
  }
  log_("warning: an update of " + table.target.Display() + " key " + key_text +
       " keeps unchanged TOAST values of a row the target does not have: its other columns were"
       " not applied (" + std::to_string(n) + " such update" + (n == 1 ? "" : "s") +
       " so far). Restore the row from the source with: " + call);
}

void Applier::MoveKeepingUnchanged(Table& table, const Row& old_key, const Row& row) {
  FlushBatch();
  Statement move = BuildMoveKeepingUnchanged(table.relation, Ref(table), old_key, row);
  const Row key = KeyOf(table, row);  // where the row belongs now
  Send(move.sql, move.params,
       "moving a row of " + table.target.Display() +
           " to its new key (keeping its unchanged TOAST values)",
       [this, oid = table.relation.oid(), key](const PgResult& r) {
         ++stats_.rows_written;
         if (r.affected() == 0) MissingRow(oid, key);
       });
}

void Applier::RangeDelete(Table& table, const dblog::v1::ChunkEnd& end) {
  const Relation& rel = table.relation;
  const auto& begin = chunk_.begin;
  const int width = rel.key_columns_size();
  const auto key_column = [&](int k) -> const dblog::v1::Column& {
    return rel.columns(static_cast<int>(rel.key_columns(k)));
  };
  const std::string display = table.target.Display();
  const std::string chunk_name = "chunk " + std::to_string(begin.chunk()) + " of repair request " +
                                 std::to_string(begin.request_id());
  // Each key column compared as the source orders it: its collation, when it has one.
  std::vector<std::string> collate(static_cast<std::size_t>(width));
  if (begin.key_collations_size() != 0) {
    if (begin.key_collations_size() != width)
      throw StreamError("a repair chunk of " + display + " with " +
                        std::to_string(begin.key_collations_size()) + " key collations for " +
                        std::to_string(width) + " key columns");
    for (int k = 0; k < width; ++k) {
      const std::string& descriptor = begin.key_collations(k);
      if (descriptor.empty()) continue;
      const auto name = TargetCollation(descriptor);
      if (!name) {
        ++stats_.range_deletes_skipped;
        log_("warning: " + chunk_name + ": key column " + key_column(k).name() + " of " + display +
             " is ordered by the source's collation " + descriptor +
             ", which the target does not have: rows of its range that the source lacks are not"
             " deleted (a repair_keys request of such rows deletes them)");
        return;
      }
      collate[static_cast<std::size_t>(k)] = " COLLATE " + *name;
    }
  }
  for (const Row& kept : end.kept_keys()) {
    if (kept.values_size() != width)
      throw StreamError("a kept key of " + table.target.Display() + " with " +
                        std::to_string(kept.values_size()) + " values for " +
                        std::to_string(width) + " key columns");
    for (int k = 0; k < width; ++k)
      chunk_.keys[static_cast<std::size_t>(k)].Add(ValueText(kept.values(k)));
  }
  std::vector<std::string> key_arrays;
  for (auto& keys : chunk_.keys) key_arrays.push_back(keys.Take());
  Statement statement = BuildRangeDelete(rel, Ref(table), begin, collate, std::move(key_arrays));
  Send(statement.sql, statement.params,
       "deleting the rows of " + display + " in the range of " + chunk_name +
           " that the source lacks",
       [this, display, chunk_name](const PgResult& r) {
         stats_.range_deleted += r.affected();
         if (r.affected() > 0)
           log_("repair: " + chunk_name + " removed " + std::to_string(r.affected()) + " rows of " +
                display + " that the source does not have");
       });
}

std::optional<std::string> Applier::TargetCollation(const std::string& descriptor) {
  if (const auto it = collations_.find(descriptor); it != collations_.end()) return it->second;
  std::optional<std::string> name;
  const auto colon = descriptor.find(':');
  const std::string provider = descriptor.substr(0, colon);
  const std::string locale = colon == std::string::npos ? "" : descriptor.substr(colon + 1);
  bool plain = !locale.empty();  // a locale name needs no quoting beyond '...'
  for (const char c : locale)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || std::strchr("_.@=;:-", c));
  if (provider == "libc" && (locale == "C" || locale == "POSIX")) {
    name = "pg_catalog." + QuoteIdent(locale);  // byte order, in every database
  } else if ((provider == "libc" || provider == "icu") && plain) {
    const std::string qualified = store_.schema() + "." + QuoteIdent(descriptor);
    // Created at most once per target; a locale the target's system lacks fails here, inside
    // a subtransaction, and leaves the collation missing.
    Send("DO $dblog$BEGIN CREATE COLLATION IF NOT EXISTS " + qualified + " (provider = " +
             provider + ", locale = '" + locale +
             "'); EXCEPTION WHEN OTHERS THEN NULL; END$dblog$",
         {}, "creating collation " + qualified + " in the target");
    PgResult r = target_.QueryNow("SELECT pg_catalog.to_regcollation($1) IS NOT NULL", {qualified},
                                  "looking up collation " + qualified + " in the target");
    if (r.get(0, 0) == "t") name = qualified;
  }
  collations_[descriptor] = name;
  return name;
}

}  // namespace dblog::apply
