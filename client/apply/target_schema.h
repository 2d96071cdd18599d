// client/apply/target_schema.h: where a source table lands in the target, and making sure it
// can take the stream: created from the Relation (--create-tables) or checked against it.
//
// A target table fits a Relation when it exists, has a column of the same name for every
// source column (types may differ: values are cast to the source's type and then assigned),
// none of those columns is generated, every target column the source does not send can be
// left out (nullable or with a default), and it has a primary key or a unique index (not
// partial, no expressions) over exactly the source's key columns (the ON CONFLICT target).
// A misfit throws SchemaError naming the table and the column.
// Owns: the schema mapping, the DDL for --create-tables and the catalog checks. Runs its
// queries synchronously (PgConnection::Query).
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "client/apply/pg.h"
#include "dblog/v1/change.pb.h"

namespace dblog::apply {

class SchemaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TargetName {
  std::string schema;
  std::string name;
  std::string Display() const { return schema + "." + name; }  // for messages
  std::string Quoted() const;                                  // for SQL
};

// from=to pairs of --schema-map; schemas not listed keep their name.
class SchemaMap {
 public:
  void Add(const std::string& from, const std::string& to) { map_[from] = to; }
  TargetName Map(const dblog::v1::Relation& relation) const;

 private:
  std::map<std::string, std::string> map_;
};

// Creates (create=true: schema, table, missing columns) and checks the target table for
// `relation`. `log` gets one line per change made to the target's schema and per notable
// difference (a column type that differs).
void PrepareTargetTable(PgConnection& target, const dblog::v1::Relation& relation,
                        const TargetName& name, bool create,
                        const std::function<void(const std::string&)>& log);

// The CREATE TABLE statement --create-tables runs (IF NOT EXISTS).
std::string CreateTableSql(const dblog::v1::Relation& relation, const TargetName& name);

}  // namespace dblog::apply
