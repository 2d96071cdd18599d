// client/apply/progress_store.h: what `dblog apply` keeps about a consumer in the target's
// bookkeeping schema (dblog_apply unless --bookkeeping-schema), and the lock that makes it that
// consumer's only applier there:
//  - progress: the position whose effects are committed (stored in the same target transaction
//    as those effects; Hello.resume_after on restart);
//  - tables: every target table the consumer wrote, with its oid (what a new bootstrap clears:
//    only while the name still holds that table);
//  - relations, columns: the target table (and its oid) of each source relation oid and the
//    target column of each attnum (relation_map.h);
//  - reconciles: the consumer's last reconcile (a failover) and the relations followed since
//    (Applier::SourceWentBack: their first Relation since may follow a lossy type emptied);
//  - the session advisory lock hashtext('dblog apply'), hashtext(consumer).
// The stream never writes into this schema (Applier refuses a source table whose target is in
// it), so nothing a source can name changes what these tables say. Oids missing in rows of an
// older dblog apply (or set to NULL by an operator) are filled by name when it opens.
// Open() runs outside pipeline mode (waits for results); everything after StartPipeline() is
// queued in the target connection's pipeline, inside whatever target transaction is open.
// Owns: those tables' SQL and their in-memory copies. Does not own: when a transaction begins
// or commits (applier.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "client/apply/pg.h"
#include "client/apply/relation_map.h"
#include "client/apply/target_schema.h"
#include "dblog/v1/consumer.pb.h"

namespace dblog::apply {

class ProgressStore {
 public:
  using Log = std::function<void(const std::string&)>;

  // `schema`: the bookkeeping schema's name (unquoted).
  ProgressStore(PgConnection& target, std::string schema, std::string consumer, Log log);

  // Pins the session's settings, takes the consumer's advisory lock (waiting up to 30 s for a
  // previous applier's session to end), creates the schema if needed and reads the stored
  // position, the registered tables and the mapping.
  std::optional<dblog::v1::Position> Open();
  // Enters pipeline mode and prepares the statements sent per transaction.
  void StartPipeline();

  // ---- in the open target transaction ----
  // The UPDATE of the consumer's position. It fails in the server unless the row holds what
  // the previous one of these statements wrote (or Open() read): a transaction sent after one
  // that failed rolls back too, though the pipeline's sync between them let it run. A missing
  // progress row fails as well.
  void SendPosition(const dblog::v1::Position& position);
  // A new bootstrap: no position until its first commit (chained the same way).
  void SendClearPosition();
  // A target transaction begins; one rolled back takes its position statements with it, so the
  // chain goes back to what the row held at its beginning.
  void TransactionBegins() { chain_at_begin_ = chain_; }
  void TransactionRolledBack() { chain_ = chain_at_begin_; }
  // `table` is listed, as table oid `oid`.
  bool registered(const TargetName& table, std::uint32_t oid) const;
  // (schema, name) in the target -> the table's oid as registered (0: not recorded).
  using Registered = std::map<std::pair<std::string, std::string>, std::uint32_t>;
  const Registered& registered_tables() const { return registered_; }
  // Lists `table` (whose oid is `oid`) in the tables table, in the transaction that first
  // writes it: a bootstrap restart clears every table this consumer ever wrote, and no other.
  // A name listed with another oid gets this one: the applier writes into this table now (it
  // passed the mapping's checks).
  void Register(const TargetName& table, std::uint32_t oid);
  void MoveRegistration(const TargetName& from, const TargetName& to);
  // The bookkeeping schema, quoted, and a table of it ("tables" -> "dblog_apply"."tables").
  const std::string& schema() const { return quoted_; }
  std::string Table(const char* name) const { return quoted_ + "." + name; }
  std::unordered_map<std::uint32_t, RelationMapping>& mappings() { return mappings_; }
  void SaveMapping(std::uint32_t oid, const RelationMapping& mapping);

  // ---- after a reconcile (a failover: the source went back, Welcome.reconcile) ----
  // Recorded at once (its own transaction): the reconcile at `consistent_point`, no relation
  // followed since (the same reconcile said again keeps those followed). Kept until the next
  // one, so that a restarted dblog apply still knows it.
  void RecordWentBack(std::uint64_t consistent_point);
  // True, and `oid` recorded as followed (in the open target transaction), at the first sight
  // of relation `oid` since the last reconcile; false afterwards, and when there was none.
  bool Follow(std::uint32_t oid);

  // Releases the advisory lock (waits for the answer).
  void Unlock();

 private:
  // The steps of Open(), in its order.
  void Lock();          // the consumer's session advisory lock
  void CreateSchema();  // dblog_apply's tables, if missing
  std::optional<dblog::v1::Position> ReadPosition();
  void ReadRegisteredTables();
  void ReadMappings();
  void ReadWentBack();  // the reconciles row
  void RecordMissingOids();  // rows without a target oid: the table of that name now

  PgConnection& target_;
  std::string schema_;
  std::string quoted_;  // schema_, quoted
  std::string consumer_;
  Log log_;
  Registered registered_;
  // What the progress row holds once everything sent so far committed (SendStored's chain).
  std::optional<dblog::v1::Position> chain_;
  std::optional<dblog::v1::Position> chain_at_begin_;
  void SendStored(const std::optional<dblog::v1::Position>& position, const std::string& what);
  std::unordered_map<std::uint32_t, RelationMapping> mappings_;
  bool went_back_ = false;              // a reconciles row: the source went back
  std::set<std::uint32_t> followed_;    // relations followed since
};

}  // namespace dblog::apply
