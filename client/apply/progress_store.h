// client/apply/progress_store.h: what `dblog apply` keeps about a consumer in the target's
// dblog_apply schema, and the lock that makes it that consumer's only applier there:
//  - dblog_apply.progress: the position whose effects are committed (stored in the same target
//    transaction as those effects; Hello.resume_after on restart);
//  - dblog_apply.tables: every target table the consumer wrote (what a new bootstrap clears);
//  - dblog_apply.relations, dblog_apply.columns: the target table of each source relation oid
//    and the target column of each attnum (relation_map.h);
//  - the session advisory lock hashtext('dblog apply'), hashtext(consumer).
// Open() runs outside pipeline mode (waits for results); everything after StartPipeline() is
// queued in the target connection's pipeline, inside whatever target transaction is open.
// Owns: those tables' SQL and their in-memory copies. Does not own: when a transaction begins
// or commits (applier.cc).
#pragma once

#include <cstdint>
#include <functional>
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

  ProgressStore(PgConnection& target, std::string consumer, Log log);

  // Pins the session's settings, takes the consumer's advisory lock (waiting up to 30 s for a
  // previous applier's session to end), creates the schema if needed and reads the stored
  // position, the registered tables and the mapping.
  std::optional<dblog::v1::Position> Open();
  // Enters pipeline mode and prepares the statements sent per transaction.
  void StartPipeline();

  // ---- in the open target transaction ----
  // The UPDATE of the consumer's position; a missing progress row fails (TargetError).
  void SendPosition(const dblog::v1::Position& position);
  // A new bootstrap: no position until its first commit.
  void SendClearPosition();
  bool registered(const TargetName& table) const;
  const std::set<std::pair<std::string, std::string>>& registered_tables() const {
    return registered_;
  }
  // Lists `table` in dblog_apply.tables (in the transaction that first writes it: a bootstrap
  // restart clears every table this consumer ever wrote, and no other).
  void Register(const TargetName& table);
  void MoveRegistration(const TargetName& from, const TargetName& to);
  std::unordered_map<std::uint32_t, RelationMapping>& mappings() { return mappings_; }
  void SaveMapping(std::uint32_t oid, const RelationMapping& mapping);

  // Releases the advisory lock (waits for the answer).
  void Unlock();

 private:
  // The steps of Open(), in its order.
  void Lock();          // the consumer's session advisory lock
  void CreateSchema();  // dblog_apply's tables, if missing
  std::optional<dblog::v1::Position> ReadPosition();
  void ReadRegisteredTables();
  void ReadMappings();

  PgConnection& target_;
  std::string consumer_;
  Log log_;
  std::set<std::pair<std::string, std::string>> registered_;  // (schema, name) in the target
  std::unordered_map<std::uint32_t, RelationMapping> mappings_;
};

}  // namespace dblog::apply
