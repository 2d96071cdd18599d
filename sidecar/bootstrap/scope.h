// sidecar/bootstrap/scope.h: which tables a consumer's scope holds, enumerated inside a given
// snapshot (so that for a bootstrap, scope and copy agree), with the plugin's own description
// of each (dblog.relation_info) and a refusal naming every table that has no identity key.
// Owns: scope enumeration and validation. Does not copy rows.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.h"
#include "dblog/v1/change.pb.h"
#include "pg/connection.h"
#include "pgoutput/values.h"

namespace dblog::bootstrap {

// How tables are described and read. kExtension: through the dblog extension's functions
// (relation_info, encode_row, _bind_relation). kCatalog, for pgoutput mode (docs/pgoutput.md):
// without them, the definition from the catalog (pgoutput::kRelationQuery, as the log path of
// that mode reads it) and the rows as COPY TO's text through pgoutput's one converter.
enum class Reader { kExtension, kCatalog };

struct Table {
  std::uint32_t oid = 0;
  std::string schema;
  std::string name;
  std::int64_t estimated_rows = 0;
  dblog::v1::Relation relation;            // as the plugin describes it
  std::vector<std::string> key_columns;    // quoted identifiers, key order
  bool single_integer_key = false;         // one int2/int4/int8 key column: splittable into ranges
  std::vector<pgoutput::ValueKind> kinds;  // Reader::kCatalog: each column's converter kind
  std::string qualified() const;           // "schema"."name", quoted
};

// A table in scope cannot be captured (no primary key or replica identity index).
class ScopeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A bytea in PostgreSQL's text form (\x followed by hex digits), as raw bytes.
std::string UnhexBytea(std::string_view text);

// dblog.relation_info of one table now: the definition its rows are encoded with while the
// caller's transaction holds a lock on it. Throws pg::Error, or std::runtime_error when it is
// unreadable.
dblog::v1::Relation DescribeTable(pg::Connection& conn, std::uint32_t oid);

// In the caller's transaction: locks the table by its oid and binds the transaction's later
// statements to it (dblog._bind_relation, plugin/guard.c: one that names a view, another table
// or a type swapped in under a name resolved earlier fails before any of it runs); returns the
// table's name as it is now, quoted, for those statements. Throws pg::Error.
std::string BindRelation(pg::Connection& conn, std::uint32_t oid);

// pgoutput::kRelationQuery's rows for one table (text cells, nullopt for NULL; none when the
// table is gone), for pgoutput::ParseRelationRows. Throws pg::Error.
std::vector<std::vector<std::optional<std::string>>> CatalogRows(pg::Connection& conn,
                                                                std::uint32_t oid);
// Reader::kCatalog's DescribeTable: the Relation and the kinds of its columns, from the catalog
// as it is now. Throws pg::Error, or std::runtime_error when the table is gone.
dblog::v1::Relation DescribeTableFromCatalog(pg::Connection& conn, std::uint32_t oid,
                                             std::vector<pgoutput::ValueKind>* kinds = nullptr);

bool ScopeMatches(const config::Scope& scope, const std::string& schema, const std::string& table);

// Ordinary permanent tables (leaf partitions included, partitioned parents not: their rows
// live in, and are logged for, the leaves) matching the scope, outside the dblog schema.
// Throws ScopeError naming every matching table without an identity key.
std::vector<Table> EnumerateScope(pg::Connection& conn, const config::Scope& scope);
// Which relations a scope may hold, without the extension: a WHERE condition on pg_class c and
// its pg_namespace n (ordinary permanent tables outside the system schemas and dblog's own, the
// filter EnumerateScope applies). Schema-qualified; for pgoutput mode's queries.
extern const char* const kScopeCandidatesWhere;
// The same tables without the extension (Reader::kCatalog), described from the catalog.
std::vector<Table> EnumerateScopeFromCatalog(pg::Connection& conn, const config::Scope& scope);
std::vector<Table> EnumerateScope(pg::Connection& conn, const config::Scope& scope, Reader reader);

}  // namespace dblog::bootstrap
