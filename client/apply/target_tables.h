// client/apply/target_tables.h: the one owner of what dblog apply reads of the target's tables
// and of the DDL that makes a target table take a source table's Relation.
//
// Prepare reads a target table's catalog (its oid and kind, columns, unique indexes) in one
// query and keeps it until a statement of its own changes the target: a table that needs no
// change costs one round trip. It then follows the source by identity (relation_map.h: a renamed table or schema, a
// name another relation oid held, which is moved aside, renamed, dropped or retyped columns),
// creates the table or adds columns (--create-tables, target_schema.h's DDL) and checks the
// table fits (target_schema.h's checks), warning once per lossy column it lets through. The
// mapping it returns is stored by the caller once the table's statements are prepared.
//
// The applier keeps the order, the batching and the transactions: it calls Prepare at a table's
// first use after a Relation, inside the target transaction of the source transaction that
// carries it, with nothing of its own pending (Prepare's statements run synchronously).
// Owns: the target-catalog reads and the following's DDL. The bookkeeping (the mapping, the
// registrations) is progress_store.h's; the plans and checks are relation_map.h's and
// target_schema.h's, pure.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client/apply/pg.h"
#include "client/apply/progress_store.h"
#include "client/apply/relation_map.h"
#include "client/apply/target_schema.h"
#include "dblog/v1/change.pb.h"

namespace dblog::apply {

struct TargetTablesOptions {
  std::string consumer;
  std::string bookkeeping_schema;
  bool create = false;               // --create-tables
  bool allow_lossy_columns = false;  // --allow-lossy-columns
  DroppedColumns dropped_columns = DroppedColumns::kDrop;
};

class TargetTables {
 public:
  using Log = std::function<void(const std::string&)>;

  TargetTables(PgConnection& target, ProgressStore& store, TargetTablesOptions options, Log log)
      : target_(target), store_(store), options_(std::move(options)), log_(std::move(log)) {}

  struct Prepared {
    RelationMapping mapping;  // to store (ProgressStore::SaveMapping) unless it is stored as is
    TargetTableFit fit;
  };
  // What Prepare needs of the applier's state, and tells it at once.
  struct Host {
    // That target table was emptied by the open bootstrap: a column type it cannot follow
    // without loss is followed emptied (relation_map.h, source_went_back).
    std::function<bool(std::uint32_t target_oid)> cleared;
    // The target table of that relation oid was moved aside to make room: prepare it again at
    // its next use (called as it happens, also when Prepare throws later).
    std::function<void(std::uint32_t relation_oid)> moved_aside;
  };
  // Makes target table `name` take `relation` (see above). Throws SchemaError (nothing of the
  // source transaction may be committed then) or TargetError.
  Prepared Prepare(const dblog::v1::Relation& relation, const TargetName& name, const Host& host);

  // The oid of target relation `name` (of any kind), 0 when there is none: read now.
  std::uint32_t Oid(const TargetName& name);

  // Queries of the target's catalog so far (one per name Prepare or Oid looks at, and one more
  // after each change Prepare made): for tests and the applier's stats.
  std::uint64_t catalog_reads() const { return catalog_reads_; }

 private:
  // What the target's catalog says of one name.
  struct Catalog {
    std::uint32_t oid = 0;  // 0: no relation of that name
    bool table = false;     // a table or a partitioned table (relkind r or p)
    TargetColumns columns;
    std::vector<UniqueIndex> unique_indexes;  // valid, not partial; the primary key first
  };
  // Read once per name within one call of Prepare or Oid, and again after Change.
  const Catalog& Read(const TargetName& name);
  // Runs DDL on the target; what was read of the catalog is read again after it.
  void Change(const std::string& sql, const std::string& what);

  // Follows the source's renames and column changes (relation_map.h); the mapping to store.
  RelationMapping FollowIdentity(const dblog::v1::Relation& relation, const TargetName& name,
                                 const Host& host);
  void RenameTargetTable(std::uint32_t oid, const std::string& source,
                         const RelationMapping& mapping, const TargetName& to, const Host& host);
  // Renames target table `name` to <name>_dblog_<oid> when another relation oid than `except`
  // is mapped to it.
  void MoveAside(const TargetName& name, std::uint32_t except, const Host& host);
  // SchemaError unless `name` is the table recorded for relation `oid` (mapping.target_oid) or
  // holds no relation; a mapping without a recorded oid passes.
  void CheckMappedTable(std::uint32_t oid, const RelationMapping& mapping, const TargetName& name);
  // Creates (--create-tables) and checks the table: target_schema.h's fit.
  TargetTableFit Fit(const dblog::v1::Relation& relation, const TargetName& name);

  PgConnection& target_;
  ProgressStore& store_;
  TargetTablesOptions options_;
  Log log_;
  std::map<std::pair<std::string, std::string>, Catalog> read_;  // (schema, name) -> catalog
  std::set<std::string> lossy_warned_;  // lossy columns already warned about
  std::uint64_t catalog_reads_ = 0;
};

}  // namespace dblog::apply
