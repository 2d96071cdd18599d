// client/apply/target_schema.cc: the target table's DDL text and checks (see target_schema.h).
#include "client/apply/target_schema.h"

#include <algorithm>
#include <optional>
#include <set>

#include "client/apply/column_types.h"
#include "client/apply/sql_text.h"
#include "common/logfmt.h"

namespace dblog::apply {
namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

std::vector<std::string> SourceKeyNames(const dblog::v1::Relation& relation) {
  std::vector<std::string> out;
  for (const std::uint32_t k : relation.key_columns()) {
    if (k >= static_cast<std::uint32_t>(relation.columns_size()))
      throw SchemaError("source table " + DisplayName(relation.schema(), relation.name()) +
                        ": key column position " + std::to_string(k) + " is outside its " +
                        std::to_string(relation.columns_size()) + " columns");
    out.push_back(relation.columns(static_cast<int>(k)).name());
  }
  return out;
}

std::string DisplayName(std::string_view schema, std::string_view name) {
  std::string qualified(schema);
  qualified += '.';
  qualified += name;
  return common::LogfmtValue(qualified);
}

std::string DisplayName(std::string_view name) { return common::LogfmtValue(name); }

std::string TargetName::Quoted() const { return QualifiedName(schema, name); }

TargetName SchemaMap::Map(const std::string& schema, const std::string& name) const {
  const auto it = map_.find(schema);
  return TargetName{it == map_.end() ? schema : it->second, name};
}

std::string CreateTableSql(const dblog::v1::Relation& relation, const TargetName& name) {
  std::string sql = "CREATE TABLE IF NOT EXISTS " + name.Quoted() + " (";
  for (int i = 0; i < relation.columns_size(); ++i) {
    const auto& c = relation.columns(i);
    sql += (i ? ", " : "") + QuoteIdent(c.name()) + " " + c.type_name();
    if (c.not_null()) sql += " NOT NULL";
  }
  sql += ", PRIMARY KEY (";
  const auto keys = SourceKeyNames(relation);
  for (std::size_t i = 0; i < keys.size(); ++i) sql += (i ? ", " : "") + QuoteIdent(keys[i]);
  sql += "))";
  return sql;
}

std::string DescribeLossyColumn(const TargetName& name, const LossyColumn& column) {
  return "target column " + name.Display() + "." + column.column + " is " + column.target_type +
         ", the source's is " + column.source_type;
}


TargetTableFit CheckTargetColumns(const dblog::v1::Relation& relation, const TargetColumns& columns,
                                  const TargetTableOptions& options, const std::string& display) {
  std::set<std::string> source_names;
  TargetTableFit fit;
  std::vector<LossyColumn>& lossy = fit.lossy;
  for (const auto& c : relation.columns()) {
    source_names.insert(c.name());
    const auto it = columns.find(c.name());
    if (it == columns.end())
      throw SchemaError("target table " + display + " has no column \"" + c.name() +
                        "\" (source type " + c.type_name() +
                        "); add it or run with --create-tables");
    if (it->second.generated)
      throw SchemaError("target table " + display + ": column \"" + c.name() +
                        "\" is generated in the target and cannot take the source's values");
    // Identical and widening types pass silently; values are converted by assignment.
    fit.target_type_oids.push_back(it->second.type_oid);
    const Conversion conversion = ClassifyConversion(c.type_name(), it->second.type);
    if (conversion != Conversion::kSame) fit.same_types = false;
    if (conversion == Conversion::kLossy)
      lossy.push_back(LossyColumn{c.name(), c.type_name(), it->second.type});
  }
  for (const auto& [column, info] : columns) {
    if (source_names.count(column)) continue;
    if (info.not_null && !info.has_default && !info.identity && !info.generated)
      throw SchemaError("target table " + display + ": column \"" + column +
                        "\" is NOT NULL without a default, and the source has no such column");
  }
  if (!lossy.empty() && !options.allow_lossy_columns) {
    // Before anything is applied to the table: the values would be rounded, truncated or
    // refused half-way through the stream.
    std::string named;
    for (const auto& l : lossy)
      named += (named.empty() ? "" : "; ") + ("column \"" + l.column + "\" is " + l.target_type +
                                              ", the source's is " + l.source_type);
    throw SchemaError("target table " + display + ": " + named +
                      (lossy.size() == 1 ? ": it cannot" : ": they cannot") +
                      " hold every value of the source's type without loss (values would be"
                      " rounded, truncated or refused); change the target's type, or run with"
                      " --allow-lossy-columns to apply anyway");
  }
  return fit;
}

void CheckConflictTarget(const std::vector<UniqueIndex>& indexes,
                         const std::vector<std::string>& key, const std::string& display) {
  const std::set<std::string> key_set(key.begin(), key.end());
  std::optional<std::vector<std::string>> primary;
  for (const UniqueIndex& index : indexes) {
    if (index.primary) primary = index.columns;
    if (std::set<std::string>(index.columns.begin(), index.columns.end()) == key_set &&
        index.columns.size() == key.size())
      return;  // fits
  }
  if (primary)
    throw SchemaError("target table " + display + ": its primary key (" + JoinNames(*primary) +
                      ") differs from the source's key (" + JoinNames(key) + ")");
  throw SchemaError("target table " + display + " has no primary key or unique index on (" +
                    JoinNames(key) + "), the source's key");
}

}  // namespace dblog::apply
