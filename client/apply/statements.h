// client/apply/statements.h: the SQL text of every statement the applier runs against a target
// table, built from the table's Relation. Pure: no libpq, no I/O; tested without a database
// (tests/cpp/apply/statements_test.cc).
//
// Every statement names the table schema-qualified and quoted (the caller passes
// TargetName::Quoted()), quotes every column, and casts every value, sent as text, to the
// source column's type_name, so that the type's own input function reads it. Aliases (t, u, s,
// old, c<i>) are the statements' own: a column name cannot capture them, columns are always
// qualified or quoted.
// Owns: statement text and the parameters' order. Does not own: when they run (applier.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dblog/v1/consumer.pb.h"

namespace dblog::apply {

// The stream broke a rule the applier relies on (a Change before its Relation, a Commit
// outside a transaction, a row with the wrong number of values, ...). The applier's state is
// unusable afterwards.
class StreamError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using TextParams = std::vector<std::optional<std::string>>;  // nullopt is NULL

struct Statement {
  std::string sql;
  TextParams params;
};

// The target table as statements name it (TargetName::Quoted(), "schema"."name") and as
// messages do (TargetName::Display()).
struct TableRef {
  std::string quoted;
  std::string display;
};

// PostgreSQL's built-in type OIDs (pg_type.oid, fixed in every database: catalog/pg_type.dat).
namespace type_oid {
constexpr std::uint32_t kBool = 16;
constexpr std::uint32_t kBytea = 17;
constexpr std::uint32_t kName = 19;
constexpr std::uint32_t kInt8 = 20;
constexpr std::uint32_t kInt2 = 21;
constexpr std::uint32_t kInt4 = 23;
constexpr std::uint32_t kText = 25;
constexpr std::uint32_t kOid = 26;
constexpr std::uint32_t kVarchar = 1043;
constexpr std::uint32_t kDate = 1082;
constexpr std::uint32_t kTimestamp = 1114;
constexpr std::uint32_t kTimestamptz = 1184;
constexpr std::uint32_t kUuid = 2950;
}  // namespace type_oid

// Key types whose equality in PostgreSQL is equality of the text the applier sends (so two
// rows of one batch with different key text never collide in the target). Others (float,
// numeric, bpchar, domains, anything sent as a literal) may be equal with different text.
bool ByteEqualKeyType(std::uint32_t type_oid);
bool ByteEqualKeys(const dblog::v1::Relation& relation);

// The statements prepared once per table definition. Upserts take one parameter per column (in
// `columns` order), deletes one per key column (in key order); the multi-row forms take each
// column's values as one text[] (unnest), the _one forms plain values. Upserts of a table whose
// keys are not byte-equal keep only the last row per key of a batch (DISTINCT ON .. ORDER BY
// ordinality DESC), by PostgreSQL's own equality.
struct TableStatements {
  std::string upsert;      // INSERT .. SELECT FROM unnest(..) ON CONFLICT (key) DO UPDATE
  std::string upsert_one;  // INSERT .. VALUES (..) ON CONFLICT (key) DO UPDATE
  std::string remove;      // DELETE .. USING unnest(..)
  std::string remove_one;  // DELETE .. WHERE key = ..
  std::string copy;        // COPY .. (columns) FROM STDIN
  std::string copy_binary;  // the same in binary format
  // The upserts of copied rows (READ): the update only where a non-key column's value differs
  // from the target's (compared as the type's output text), so that rows already right are not
  // written again.
  std::string refresh;
  std::string refresh_one;
};
TableStatements BuildTableStatements(const dblog::v1::Relation& relation,
                                     const std::string& quoted_table);

// An UPDATE at the row's key of every column that is neither a key column nor an
// unchanged-TOAST marker. When there is no such column, a SELECT of the row instead (it must be
// there: check_only). Throws StreamError for a malformed row.
struct UpdateStatement {
  Statement statement;
  bool check_only = false;  // a SELECT: zero rows means the target lacks the row
};
UpdateStatement BuildUpdateKeepingUnchanged(const dblog::v1::Relation& relation,
                                            const TableRef& table, const dblog::v1::Row& row);

// A key move that keeps the old row's unchanged-TOAST columns: DELETE .. RETURNING the old row,
// feeding an INSERT of the new one. Throws StreamError for a malformed row or key.
Statement BuildMoveKeepingUnchanged(const dblog::v1::Relation& relation, const TableRef& table,
                                    const dblog::v1::Row& old_key, const dblog::v1::Row& row);

// The deletion at the end of a range chunk: the rows of [from_key, to_key] (as flagged; an
// absent bound is open) whose key is not in `key_arrays` (one text[] literal per key column:
// the chunk's READ rows and kept keys). `collate[k]` is " COLLATE <name>" or "" for key
// column k. Throws StreamError for malformed bounds.
Statement BuildRangeDelete(const dblog::v1::Relation& relation, const TableRef& table,
                           const dblog::v1::ChunkBegin& begin,
                           const std::vector<std::string>& collate,
                           std::vector<std::string> key_arrays);

}  // namespace dblog::apply
