// client/apply/relation_map.h: following the source's schema by identity, not by name.
//
// The target keeps, in dblog_apply.relations and dblog_apply.columns (the bookkeeping schema),
// which target table each source relation (Relation.oid) is applied into and which target column
// each source column (Column.attnum, with the source type last applied) is. When a Relation arrives
// whose table or column names or column types differ from what was applied before, the applier
// changes the target to match before applying anything more of that table, in the target
// transaction of the source transaction that carries the change:
//  - a renamed table (or one moved to another schema, through --schema-map as for any table):
//    the target table is renamed (ALTER TABLE .. RENAME, SET SCHEMA);
//  - a renamed column: the target column is renamed (two steps through a temporary name when
//    names are swapped);
//  - a dropped column (an attnum that is gone): dropped in the target (DroppedColumns::kDrop,
//    the default), or kept nullable and no longer written (kKeep, --keep-dropped-columns); a
//    kept column that a new source column's name needs is renamed <name>_dblog_<attnum>;
//  - a column whose type changed: nothing when the target column's type holds every value of
//    the new type; the target column is widened to the new type when every value it holds fits
//    it (column_types.h); otherwise SchemaError (nothing applied, the position not advanced),
//    unless allow_lossy_columns, or unless the source went back (a failover reconciled, below)
//    and the target column held every value of the source's previous type: then it takes the
//    new type empty;
//  - a new column: left to TargetTables::Prepare (--create-tables adds it).
// A relation seen for the first time (a target made before this mapping existed, or a new
// table) is adopted by name. A target name that another relation oid is mapped to (the source
// dropped that table and created another of the same name, or renamed it and reused its name
// before changing it again) is renamed <name>_dblog_<oid> first, and that oid follows it there.
// After a failover that lost changes the target holds, the new primary can give an attnum or a
// relation oid of that lost history to another column or table: the mapping then follows it as
// a rename (and a type change), and the reconcile's repairs write every row again. Only a type
// the target column cannot be converted to without loss needs more: with `source_went_back`
// (dblog apply saw Welcome.reconcile, or the table is one a redone bootstrap cleared) a target
// column as dblog apply keeps it (one that held every value of the source's previous type) is
// changed to the new type USING NULL instead of stopping the target.
// Owns: the mapping's planning (pure: PlanColumns) and its storage statements. TargetTables
// (target_tables.h) runs the plans.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "client/apply/target_schema.h"
#include "dblog/v1/change.pb.h"

namespace dblog::apply {

enum class DroppedColumns { kDrop, kKeep };

struct MappedColumn {
  std::uint32_t attnum = 0;
  std::string name;  // the target column's name (the source's, as last applied)
  std::string type;  // the source's type_name, as last applied
  bool dropped = false;  // dropped at the source, kept in the target (kKeep)
  bool operator==(const MappedColumn& o) const {
    return attnum == o.attnum && name == o.name && type == o.type && dropped == o.dropped;
  }
};

struct RelationMapping {
  TargetName target;
  std::vector<MappedColumn> columns;  // in attnum order
  // The target table's oid when it was last applied into (0: not recorded, as by a dblog apply
  // from before it was kept). A mapping is followed only while its name still holds that table.
  std::uint32_t target_oid = 0;
};

// What a Relation needs done to its target table's columns.
struct ColumnPlan {
  std::vector<std::string> statements;  // ALTER TABLE statements, in order
  std::vector<std::string> notes;       // one log line per change
  std::vector<MappedColumn> columns;    // the mapping afterwards, in attnum order
  // Columns new to an already mapped table: rows the source does not write again keep NULL in
  // the target, also where the source filled them (a default): the caller says so.
  std::vector<std::string> added;
};

// `before`: the mapping as last applied (empty: first sight, columns adopted by name).
// `table`: the target table (already under its new name). `target_types`: its columns now,
// name -> format_type() text. Throws SchemaError for a change it cannot apply safely.
ColumnPlan PlanColumns(const std::vector<MappedColumn>& before, const dblog::v1::Relation& relation,
                       const TargetName& table,
                       const std::map<std::string, std::string>& target_types,
                       DroppedColumns policy, bool allow_lossy_columns,
                       bool source_went_back = false);

// The columns of `relation` as a mapping, in attnum order.
std::vector<MappedColumn> ColumnsOf(const dblog::v1::Relation& relation);

// "<name>_dblog_<id>", cut to PostgreSQL's 63 bytes of identifier: where a table or column
// that is in the way of a new one is moved.
std::string AsideName(const std::string& name, std::uint32_t id);

// The tables holding the mapping in the bookkeeping schema `schema` (quoted), CREATE .. IF NOT
// EXISTS.
std::string RelationMapDdl(const std::string& schema);

}  // namespace dblog::apply
