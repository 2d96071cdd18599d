// sidecar/bootstrap/scope.cc: scope enumeration and validation (see scope.h).
#include "bootstrap/scope.h"

#include "common/quote.h"
#include "pgoutput/translate.h"

namespace dblog::bootstrap {
namespace {

// The scope's candidates without the extension: kScopeCandidatesWhere, with whether a table has
// generated columns.
const std::string kCandidates =
    "SELECT c.oid, n.nspname, c.relname, GREATEST(c.reltuples, 0)::pg_catalog.int8,"
    "       EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a"
    "                WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid"
    "                  AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped"
    "                  AND a.attgenerated OPERATOR(pg_catalog.<>) '')"
    "  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
    "    ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
    " WHERE " + std::string(kScopeCandidatesWhere) + " ORDER BY n.nspname, c.relname";

// The key's quoted columns and whether it is one integer column, from the Relation.
void SetKey(Table& t) {
  bool integer = t.relation.key_columns_size() == 1;
  for (std::uint32_t k : t.relation.key_columns()) {
    const auto& col = t.relation.columns(static_cast<int>(k));
    t.key_columns.push_back(common::QuoteIdent(col.name()));
    integer = integer && (col.type_oid() == 20 || col.type_oid() == 21 || col.type_oid() == 23);
  }
  t.single_integer_key = integer;
}

ScopeError Keyless(const std::string& tables) {
  return ScopeError("tables in scope have no primary key or replica identity index: " + tables +
                    " (add a primary key, or leave them out of the consumer's scope)");
}

}  // namespace

const char* const kScopeCandidatesWhere =
    "c.relkind OPERATOR(pg_catalog.=) 'r' AND c.relpersistence OPERATOR(pg_catalog.=) 'p'"
    " AND n.nspname OPERATOR(pg_catalog.<>) ALL"
    "     ('{pg_catalog,information_schema,dblog}'::pg_catalog.name[])"
    " AND n.nspname::pg_catalog.text NOT LIKE 'pg\\_toast%'"
    " AND n.nspname::pg_catalog.text NOT LIKE 'pg\\_temp%'";

std::vector<std::vector<std::optional<std::string>>> CatalogRows(pg::Connection& conn,
                                                                std::uint32_t oid) {
  return conn.ExecParams(pgoutput::kRelationQuery, {std::to_string(oid)}).text_rows();
}

dblog::v1::Relation DescribeTableFromCatalog(pg::Connection& conn, std::uint32_t oid,
                                             std::vector<pgoutput::ValueKind>* kinds) {
  const auto rows = CatalogRows(conn, oid);
  if (rows.empty())
    throw std::runtime_error("the table with oid " + std::to_string(oid) + " is gone");
  const pgoutput::CatalogRelation cat = pgoutput::ParseRelationRows(oid, rows);
  if (kinds) *kinds = pgoutput::KindsOf(cat);
  return pgoutput::RelationOf(cat);
}

std::vector<Table> EnumerateScopeFromCatalog(pg::Connection& conn, const config::Scope& scope) {
  pg::Result r = conn.Exec(kCandidates);
  std::vector<Table> tables;
  std::string keyless, generated;
  for (int i = 0; i < r.ntuples(); ++i) {
    Table t;
    t.schema = std::string(r.value(i, 1));
    t.name = std::string(r.value(i, 2));
    if (!ScopeMatches(scope, t.schema, t.name)) continue;
    t.oid = static_cast<std::uint32_t>(r.u64_value(i, 0));
    t.estimated_rows = r.i64_value(i, 3);
    if (r.bool_value(i, 4)) {
      // pgoutput leaves generated columns out of its messages (before 18, and virtual ones on
      // 18), where the extension sends stored ones; and reading a virtual one would run its
      // owner's expression as dblogd. Refused rather than sent differently.
      generated += (generated.empty() ? "" : ", ") + t.schema + "." + t.name;
      continue;
    }
    t.relation = DescribeTableFromCatalog(conn, t.oid, &t.kinds);
    if (t.relation.key_columns_size() == 0) {
      keyless += (keyless.empty() ? "" : ", ") + t.schema + "." + t.name;
      continue;
    }
    SetKey(t);
    tables.push_back(std::move(t));
  }
  if (!keyless.empty()) throw Keyless(keyless);
  if (!generated.empty())
    throw ScopeError("tables in scope have generated columns, which pgoutput does not send as "
                     "the extension does: " + generated +
                     " (leave them out of the consumer's scope, or use the extension's mode)");
  return tables;
}

std::vector<Table> EnumerateScope(pg::Connection& conn, const config::Scope& scope, Reader reader) {
  return reader == Reader::kCatalog ? EnumerateScopeFromCatalog(conn, scope)
                                    : EnumerateScope(conn, scope);
}

std::string UnhexBytea(std::string_view bytea_hex) {
  // text-format bytea: \x followed by hex digits
  std::string out;
  if (bytea_hex.size() < 2 || bytea_hex[0] != '\\' || bytea_hex[1] != 'x')
    throw std::runtime_error("expected a hex bytea from dblog.relation_info");
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::runtime_error("bad hex digit in bytea");
  };
  out.reserve((bytea_hex.size() - 2) / 2);
  for (std::size_t i = 2; i + 1 < bytea_hex.size(); i += 2)
    out.push_back(static_cast<char>(nibble(bytea_hex[i]) << 4 | nibble(bytea_hex[i + 1])));
  return out;
}

std::string BindRelation(pg::Connection& conn, std::uint32_t oid) {
  return std::string(
      conn.ExecParams("SELECT dblog._bind_relation($1::pg_catalog.oid)", {std::to_string(oid)})
          .value(0, 0));
}

dblog::v1::Relation DescribeTable(pg::Connection& conn, std::uint32_t oid) {
  pg::Result r = conn.ExecParams("SELECT dblog.relation_info($1::oid)", {std::to_string(oid)});
  dblog::v1::Relation relation;
  if (!relation.ParseFromString(UnhexBytea(r.value(0, 0))))
    throw std::runtime_error("dblog.relation_info returned an unreadable Relation for oid " +
                             std::to_string(oid));
  return relation;
}

std::string Table::qualified() const { return common::QuoteQualified(schema, name); }

bool ScopeMatches(const config::Scope& scope, const std::string& schema,
                  const std::string& table) {
  return scope.Holds(schema, table);
}

std::vector<Table> EnumerateScope(pg::Connection& conn,
                                  const config::Scope& scope) {
  pg::Result r = conn.Exec(
      "SELECT c.oid, n.nspname, c.relname, greatest(c.reltuples, 0)::bigint,"
      "       dblog.relation_info(c.oid)"
      "  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
      " WHERE c.relkind = 'r' AND c.relpersistence = 'p'"
      "   AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'dblog')"
      "   AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'"
      " ORDER BY n.nspname, c.relname");
  std::vector<Table> tables;
  std::string keyless;
  for (int i = 0; i < r.ntuples(); ++i) {
    Table t;
    t.schema = std::string(r.value(i, 1));
    t.name = std::string(r.value(i, 2));
    if (!ScopeMatches(scope, t.schema, t.name)) continue;
    t.oid = static_cast<std::uint32_t>(r.u64_value(i, 0));
    t.estimated_rows = r.i64_value(i, 3);
    if (!t.relation.ParseFromString(UnhexBytea(r.value(i, 4))))
      throw std::runtime_error("dblog.relation_info returned an unreadable Relation for " +
                               t.qualified());
    if (t.relation.key_columns_size() == 0) {
      keyless += (keyless.empty() ? "" : ", ") + t.schema + "." + t.name;
      continue;
    }
    SetKey(t);
    tables.push_back(std::move(t));
  }
  if (!keyless.empty()) throw Keyless(keyless);
  return tables;
}

}  // namespace dblog::bootstrap
