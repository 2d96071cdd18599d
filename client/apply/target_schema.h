// client/apply/target_schema.h: where a source table lands in the target, and making sure it
// can take the stream: created from the Relation (--create-tables) or checked against it.
//
// A target table fits a Relation when it exists, has a column of the same name for every
// source column whose type holds every value of the source column's type (column_types.h;
// values are cast to the source's type and then assigned, so a narrower type would round,
// truncate or refuse them: refused unless allow_lossy_columns), none of those columns is
// generated, every target column the source does not send can be
// left out (nullable or with a default), and it has a primary key or a unique index (not
// partial, no expressions) over exactly the source's key columns (the ON CONFLICT target).
// A misfit throws SchemaError naming the table and the column.
// Owns: the schema mapping (--schema-map), the CREATE TABLE text of --create-tables and the
// checks of a target table's catalog. Pure: target_tables.h reads the catalog and runs the DDL.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dblog/v1/change.pb.h"

namespace dblog::apply {

class SchemaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Names in messages: "schema.name" (or one name) as one logfmt value (common/logfmt.h), quoted
// and escaped when it holds a space, '"', '=', '\' or a control character, so that a source
// table named "a\nlevel=error ..." cannot break or forge a line of the log.
std::string DisplayName(std::string_view schema, std::string_view name);
std::string DisplayName(std::string_view name);

struct TargetName {
  std::string schema;
  std::string name;
  std::string Display() const { return DisplayName(schema, name); }  // for messages
  std::string Quoted() const;                                  // for SQL
  bool operator==(const TargetName& o) const { return schema == o.schema && name == o.name; }
  bool operator!=(const TargetName& o) const { return !(*this == o); }
};

// from=to pairs of --schema-map; schemas not listed keep their name.
class SchemaMap {
 public:
  void Add(const std::string& from, const std::string& to) { map_[from] = to; }
  TargetName Map(const dblog::v1::Relation& relation) const {
    return Map(relation.schema(), relation.name());
  }
  TargetName Map(const std::string& schema, const std::string& name) const;

 private:
  std::map<std::string, std::string> map_;
};

struct TargetTableOptions {
  bool create = false;               // --create-tables: schema, table, missing columns
  bool allow_lossy_columns = false;  // --allow-lossy-columns: narrower target types pass
};

// A target column whose type cannot hold every value of the source column's type.
struct LossyColumn {
  std::string column;
  std::string source_type;
  std::string target_type;
};

// How a target table that fits takes the source's columns.
struct TargetTableFit {
  std::vector<LossyColumn> lossy;  // only with allow_lossy_columns: for the caller to warn
  // Every source column has the identical type in the target. Only then can values go in
  // through COPY, which reads them with the target type's input function instead of casting
  // from the source's type (integer cannot read "1.25"; real -> double precision would read
  // "0.1" as a different value than the cast gives).
  bool same_types = true;
  // Per source column (in the Relation's order), the target column's type oid (atttypid).
  std::vector<std::uint32_t> target_type_oids;
  std::uint32_t oid = 0;  // the target table's
};

// The names of `relation`'s key columns, in key order; SchemaError for a key position outside
// its columns.
std::vector<std::string> SourceKeyNames(const dblog::v1::Relation& relation);

// The checks of what target_tables.h read from the target's catalog; each throws SchemaError
// naming `display`, the target table.
struct TargetColumn {
  std::string type;  // format_type(atttypid, atttypmod)
  bool not_null = false;
  bool has_default = false;
  bool generated = false;  // GENERATED ALWAYS AS (...) STORED
  bool identity = false;
  std::uint32_t type_oid = 0;  // atttypid
};
using TargetColumns = std::map<std::string, TargetColumn>;  // by column name
// Every source column has a target column that is not generated and whose type holds its values
// (or options.allow_lossy_columns), and every other target column can be left out.
TargetTableFit CheckTargetColumns(const dblog::v1::Relation& relation, const TargetColumns& columns,
                                  const TargetTableOptions& options, const std::string& display);
struct UniqueIndex {
  bool primary = false;
  std::vector<std::string> columns;  // "" for an expression
};
// One of `indexes` (the target table's valid, non-partial unique indexes) is on exactly the
// source's `key` columns, in any order: the ON CONFLICT target.
void CheckConflictTarget(const std::vector<UniqueIndex>& indexes,
                         const std::vector<std::string>& key, const std::string& display);

// "target column s.t.c is <target type>, the source's is <source type>": for messages.
std::string DescribeLossyColumn(const TargetName& name, const LossyColumn& column);

// The CREATE TABLE statement --create-tables runs (IF NOT EXISTS).
std::string CreateTableSql(const dblog::v1::Relation& relation, const TargetName& name);

}  // namespace dblog::apply
