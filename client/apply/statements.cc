// client/apply/statements.cc: the applier's SQL text (see statements.h).
#include "client/apply/statements.h"

#include <set>

#include "client/apply/sql_text.h"

namespace dblog::apply {

using dblog::v1::Relation;
using dblog::v1::Row;
using dblog::v1::Value;

namespace {

std::string Placeholder(std::size_t index) { return "$" + std::to_string(index); }

std::string ColumnAlias(std::size_t i) { return "c" + std::to_string(i); }

}  // namespace

bool ByteEqualKeyType(std::uint32_t oid) {
  switch (oid) {
    case type_oid::kBool:
    case type_oid::kBytea:
    case type_oid::kName:
    case type_oid::kInt8:
    case type_oid::kInt2:
    case type_oid::kInt4:
    case type_oid::kText:
    case type_oid::kOid:
    case type_oid::kVarchar:
    case type_oid::kDate:
    case type_oid::kTimestamp:
    case type_oid::kTimestamptz:
    case type_oid::kUuid:
      return true;
    default:
      return false;
  }
}

bool ByteEqualKeys(const Relation& rel) {
  for (const std::uint32_t k : rel.key_columns())
    if (!ByteEqualKeyType(rel.columns(static_cast<int>(k)).type_oid())) return false;
  return true;
}

namespace {

// The quoted names of the table's columns, in order: "a", "b".
std::string ColumnList(const Relation& rel) {
  std::string columns;
  for (int i = 0; i < rel.columns_size(); ++i)
    columns += (i ? ", " : "") + QuoteIdent(rel.columns(i).name());
  return columns;
}

// " ON CONFLICT (key columns) DO UPDATE SET" every other column from EXCLUDED, or DO NOTHING
// when every column is a key column.
std::string OnConflict(const Relation& rel) {
  std::string keys;
  for (int k = 0; k < rel.key_columns_size(); ++k)
    keys += (k ? ", " : "") + QuoteIdent(rel.columns(static_cast<int>(rel.key_columns(k))).name());
  const std::set<std::uint32_t> key_positions(rel.key_columns().begin(), rel.key_columns().end());
  std::string set;
  for (int i = 0; i < rel.columns_size(); ++i) {
    if (key_positions.count(static_cast<std::uint32_t>(i))) continue;
    const std::string name = QuoteIdent(rel.columns(i).name());
    set += (set.empty() ? "" : ", ") + name + " = EXCLUDED." + name;
  }
  return " ON CONFLICT (" + keys + ") DO " + (set.empty() ? "NOTHING" : "UPDATE SET " + set);
}

// The rows of a batch: one text[] parameter per column, unnested and cast to the source's
// types. When the key is not byte-equal, the last row per key wins, by PostgreSQL's own
// equality.
std::string UnnestedRows(const Relation& rel) {
  const std::size_t n = static_cast<std::size_t>(rel.columns_size());
  std::string casts, arrays, aliases;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string sep = i ? ", " : "";
    casts += sep + "u." + ColumnAlias(i) + "::" + rel.columns(static_cast<int>(i)).type_name() +
             " AS " + ColumnAlias(i);
    arrays += sep + Placeholder(i + 1) + "::text[]";
    aliases += sep + ColumnAlias(i);
  }
  if (ByteEqualKeys(rel))
    return "SELECT " + casts + " FROM unnest(" + arrays + ") AS u(" + aliases + ")";
  std::string distinct_keys;
  for (int k = 0; k < rel.key_columns_size(); ++k)
    distinct_keys += (k ? ", " : "") + std::string("s.") + ColumnAlias(rel.key_columns(k));
  std::string outer;
  for (std::size_t i = 0; i < n; ++i) outer += (i ? ", " : "") + std::string("s.") + ColumnAlias(i);
  return "SELECT DISTINCT ON (" + distinct_keys + ") " + outer + " FROM (SELECT " + casts +
         ", u.ord FROM unnest(" + arrays + ") WITH ORDINALITY AS u(" + aliases +
         ", ord)) AS s ORDER BY " + distinct_keys + ", s.ord DESC";
}

// One row as plain parameters cast to the source's types: $1::integer, $2::text.
std::string RowParameters(const Relation& rel) {
  std::string values;
  for (std::size_t i = 0; i < static_cast<std::size_t>(rel.columns_size()); ++i)
    values +=
        (i ? ", " : "") + Placeholder(i + 1) + "::" + rel.columns(static_cast<int>(i)).type_name();
  return values;
}

// DELETE of the rows whose key is in the batch's keys: one text[] parameter per key column.
std::string DeleteKeys(const Relation& rel, const std::string& table) {
  std::string key_arrays, key_aliases, match;
  for (int k = 0; k < rel.key_columns_size(); ++k) {
    const auto& c = rel.columns(static_cast<int>(rel.key_columns(k)));
    const std::string sep = k ? ", " : "";
    key_arrays += sep + Placeholder(static_cast<std::size_t>(k) + 1) + "::text[]";
    key_aliases += sep + ColumnAlias(static_cast<std::size_t>(k));
    match += (k ? " AND " : "") + std::string("t.") + QuoteIdent(c.name()) + " = u." +
             ColumnAlias(static_cast<std::size_t>(k)) + "::" + c.type_name();
  }
  return "DELETE FROM " + table + " AS t USING unnest(" + key_arrays + ") AS u(" + key_aliases +
         ") WHERE " + match;
}

// DELETE of the row at one key, as plain parameters.
std::string DeleteKey(const Relation& rel, const std::string& table) {
  std::string match;
  for (int k = 0; k < rel.key_columns_size(); ++k) {
    const auto& c = rel.columns(static_cast<int>(rel.key_columns(k)));
    match += (k ? " AND " : "") + QuoteIdent(c.name()) + " = " +
             Placeholder(static_cast<std::size_t>(k) + 1) + "::" + c.type_name();
  }
  return "DELETE FROM " + table + " WHERE " + match;
}

}  // namespace

// The refresh's condition on ON CONFLICT's update: some column other than the key's differs
// from the copied row's. Compared as the target type's output text (and NULL apart), which
// every type has (json has no equality operator), through its output function, never a cast
// another role could define; the operators are pg_catalog's by name, never the search path's;
// byte for byte (COLLATE "C": a column's case-insensitive collation would take 'ABC' for
// 'abc'). Output text tells values apart because the session pins what shapes it
// (extra_float_digits = 3, TimeZone, DateStyle: progress_store.cc).
// Empty when every column is a key column (DO NOTHING).
std::string RefreshCondition(const Relation& rel) {
  const std::set<std::uint32_t> key_positions(rel.key_columns().begin(), rel.key_columns().end());
  std::string same;
  for (int i = 0; i < rel.columns_size(); ++i) {
    if (key_positions.count(static_cast<std::uint32_t>(i))) continue;
    const std::string name = QuoteIdent(rel.columns(i).name());
    same += std::string(same.empty() ? "" : " AND ") + "pg_catalog.format('%s', t." + name +
            ") COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.=) pg_catalog.format('%s', EXCLUDED." +
            name + ") AND (t." + name + " IS NULL) OPERATOR(pg_catalog.=) (EXCLUDED." + name +
            " IS NULL)";
  }
  return same.empty() ? "" : " WHERE NOT (" + same + ")";
}

TableStatements BuildTableStatements(const Relation& rel, const std::string& table) {
  const std::string columns = ColumnList(rel);
  const std::string on_conflict = OnConflict(rel);
  TableStatements out;
  // a copied row (a repair chunk's, a bootstrap's into a table that had rows) writes only when
  // the target's row differs: a repair of a sink that is mostly right rewrites what is wrong
  const std::string refresh = on_conflict + RefreshCondition(rel);
  out.refresh = "INSERT INTO " + table + " AS t (" + columns + ") OVERRIDING SYSTEM VALUE " +
                UnnestedRows(rel) + refresh;
  out.refresh_one = "INSERT INTO " + table + " AS t (" + columns +
                    ") OVERRIDING SYSTEM VALUE VALUES (" + RowParameters(rel) + ")" + refresh;
  out.upsert = "INSERT INTO " + table + " (" + columns + ") OVERRIDING SYSTEM VALUE " +
               UnnestedRows(rel) + on_conflict;
  out.copy = "COPY " + table + " (" + columns + ") FROM STDIN";
  out.copy_binary = out.copy + " (FORMAT binary)";
  // One row (the common case of small transactions): plain parameters, no arrays.
  out.upsert_one = "INSERT INTO " + table + " (" + columns + ") OVERRIDING SYSTEM VALUE VALUES (" +
                   RowParameters(rel) + ")" + on_conflict;
  out.remove = DeleteKeys(rel, table);
  out.remove_one = DeleteKey(rel, table);
  return out;
}

UpdateStatement BuildUpdateKeepingUnchanged(const Relation& rel, const TableRef& table,
                                            const Row& row) {
  if (row.values_size() != rel.columns_size())
    throw StreamError("a row of " + table.display + " with " +
                      std::to_string(row.values_size()) + " values for " +
                      std::to_string(rel.columns_size()) + " columns");
  std::set<std::uint32_t> key_positions(rel.key_columns().begin(), rel.key_columns().end());
  TextParams params;
  std::string set;
  for (int i = 0; i < rel.columns_size(); ++i) {
    if (key_positions.count(static_cast<std::uint32_t>(i))) continue;
    const Value& v = row.values(i);
    if (v.kind_case() == Value::kUnchanged) continue;  // the target keeps its value
    params.push_back(ValueText(v));
    set += (set.empty() ? "" : ", ") + QuoteIdent(rel.columns(i).name()) + " = " +
           Placeholder(params.size()) + "::" + rel.columns(i).type_name();
  }
  std::string where;
  TextParams key_params;
  for (int k = 0; k < rel.key_columns_size(); ++k) {
    const int pos = static_cast<int>(rel.key_columns(k));
    const Value& v = row.values(pos);
    if (v.kind_case() == Value::kUnchanged)
      throw StreamError("an update of " + table.display +
                        " whose key value is an unchanged-TOAST marker and no old key");
    key_params.push_back(ValueText(v));
    where += (k ? " AND " : "") + QuoteIdent(rel.columns(pos).name()) + " = " +
             Placeholder((set.empty() ? 0 : params.size()) + key_params.size()) +
             "::" + rel.columns(pos).type_name();
  }
  if (set.empty()) {
    // Only unchanged values besides the key: nothing to write, but the row must be there.
    return {{"SELECT FROM " + table.quoted + " WHERE " + where, std::move(key_params)}, true};
  }
  params.insert(params.end(), key_params.begin(), key_params.end());
  return {{"UPDATE " + table.quoted + " SET " + set + " WHERE " + where, std::move(params)}, false};
}

Statement BuildMoveKeepingUnchanged(const Relation& rel, const TableRef& table, const Row& old_key,
                                    const Row& row) {
  if (row.values_size() != rel.columns_size() || old_key.values_size() != rel.key_columns_size())
    throw StreamError("a key-changing update of " + table.display +
                      " with a malformed row or old key");
  TextParams params;
  std::string where;
  for (int k = 0; k < rel.key_columns_size(); ++k) {
    const auto& c = rel.columns(static_cast<int>(rel.key_columns(k)));
    params.push_back(ValueText(old_key.values(k)));
    where += (k ? " AND " : "") + std::string("t.") + QuoteIdent(c.name()) + " = " +
             Placeholder(params.size()) + "::" + c.type_name();
  }
  std::string columns, select, set, keys;
  std::set<std::uint32_t> key_positions(rel.key_columns().begin(), rel.key_columns().end());
  for (int i = 0; i < rel.columns_size(); ++i) {
    const auto& c = rel.columns(i);
    const std::string sep = i ? ", " : "";
    columns += sep + QuoteIdent(c.name());
    const Value& v = row.values(i);
    if (v.kind_case() == Value::kUnchanged) {
      select += sep + "old." + QuoteIdent(c.name());  // the moved row keeps it
    } else {
      params.push_back(ValueText(v));
      select += sep + Placeholder(params.size()) + "::" + c.type_name();
    }
    if (!key_positions.count(static_cast<std::uint32_t>(i)))
      set +=
          (set.empty() ? "" : ", ") + QuoteIdent(c.name()) + " = EXCLUDED." + QuoteIdent(c.name());
  }
  for (int k = 0; k < rel.key_columns_size(); ++k)
    keys += (k ? ", " : "") + QuoteIdent(rel.columns(static_cast<int>(rel.key_columns(k))).name());
  const std::string sql = "WITH old AS (DELETE FROM " + table.quoted + " AS t WHERE " + where +
                          " RETURNING t.*) INSERT INTO " + table.quoted + " (" + columns +
                          ") OVERRIDING SYSTEM VALUE SELECT " + select + " FROM old ON CONFLICT (" +
                          keys + ") DO " + (set.empty() ? "NOTHING" : "UPDATE SET " + set);
  return {sql, std::move(params)};
}

Statement BuildRangeDelete(const Relation& rel, const TableRef& table,
                           const dblog::v1::ChunkBegin& begin, const std::vector<std::string>& collate,
                           std::vector<std::string> key_arrays) {
  const int width = rel.key_columns_size();
  const auto key_column = [&](int k) -> const dblog::v1::Column& {
    return rel.columns(static_cast<int>(rel.key_columns(k)));
  };
  const std::string& display = table.display;
  if (collate.size() != static_cast<std::size_t>(width) ||
      key_arrays.size() != static_cast<std::size_t>(width))
    throw std::invalid_argument("BuildRangeDelete: one collation and one key array per key column");
  TextParams params;
  std::vector<std::string> conditions;
  // A bound is a whole key (dblogd never sends a prefix).
  const auto bound = [&](const Row& key, const char* op) {
    if (key.values_size() == 0) return;  // unbounded
    if (key.values_size() != width)
      throw StreamError("a repair chunk bound of " + display + " with " +
                        std::to_string(key.values_size()) + " values for " + std::to_string(width) +
                        " key columns");
    std::string lhs, rhs;
    for (int k = 0; k < key.values_size(); ++k) {
      const auto& c = key_column(k);
      const auto text = ValueText(key.values(k));
      if (!text) throw StreamError("a repair chunk bound of " + display + " with a NULL");
      params.push_back(text);
      lhs += (k ? ", " : "") + std::string("t.") + QuoteIdent(c.name()) +
             collate[static_cast<std::size_t>(k)];
      rhs += (k ? ", " : "") + Placeholder(params.size()) + "::" + c.type_name();
    }
    if (key.values_size() > 1) {
      lhs = "ROW(" + lhs + ")";
      rhs = "ROW(" + rhs + ")";
    }
    conditions.push_back(lhs + " " + op + " " + rhs);
  };
  if (begin.has_from_key()) bound(begin.from_key(), begin.from_inclusive() ? ">=" : ">");
  if (begin.has_to_key()) bound(begin.to_key(), begin.to_inclusive() ? "<=" : "<");

  std::string arrays, aliases, match;
  for (int k = 0; k < width; ++k) {
    params.emplace_back(std::move(key_arrays[static_cast<std::size_t>(k)]));
    const std::string sep = k ? ", " : "";
    arrays += sep + Placeholder(params.size()) + "::text[]";
    aliases += sep + ColumnAlias(static_cast<std::size_t>(k));
    match += (k ? " AND " : "") + std::string("t.") + QuoteIdent(key_column(k).name()) + " = u." +
             ColumnAlias(static_cast<std::size_t>(k)) + "::" + key_column(k).type_name();
  }
  conditions.push_back("NOT EXISTS (SELECT 1 FROM unnest(" + arrays + ") AS u(" + aliases +
                       ") WHERE " + match + ")");
  std::string where;
  for (const auto& c : conditions) where += (where.empty() ? "" : " AND ") + c;
  return {"DELETE FROM " + table.quoted + " AS t WHERE " + where, std::move(params)};
}

}  // namespace dblog::apply
