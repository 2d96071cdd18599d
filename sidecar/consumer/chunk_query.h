// sidecar/consumer/chunk_query.h: the SQL of one repair chunk, built from a request's key
// columns and types. Pure (no connection): tests/cpp/consumer/chunk_query_test.cc checks the
// text, and the repair tests run it.
// Owns: the rules every chunk statement follows, whatever a user named their table, columns
// and types: the table's and types' names are those read under the transaction's lock after
// dblog._bind_relation bound it to the table's oid (Repairs::BindTable, plugin/guard.c);
// columns through the alias `t` and its `t.*` row (no column can capture the alias);
// key values read by the type's input function (`dblog._key_in`, never a cast, which may be
// the type owner's code) and written by its output function (`format('%s', ...)`); comparison
// operators schema-qualified (`OPERATOR(pg_catalog.>)`); `ONLY` (a partition or child is its own
// table); every parameter referenced (PostgreSQL insists).
// Also: the hex list that carries key names and types out of the catalogs (HexList, and
// SplitHexList to read it back).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dblog::consumer {

struct ChunkRequest {
  std::string table;                     // qualified, as regclass prints it
  bool keys = false;                     // a key list (else a table or a range)
  std::vector<std::string> key_columns;  // quoted identifiers, key order
  std::vector<std::string> key_types;    // as format_type prints them, same order
  std::int64_t chunk_size = 0;
  // Which bounds the rows query has (a table or range chunk): the row after the resume key
  // (which wins over the from key), from the from key, below the to key. Given as plain
  // comparisons, so that the key's index serves them.
  bool has_resume = false, has_from = false, has_to = false;
};

struct ChunkQueries {
  // $1 resume key (JSON array of text, '' = none), $2 from key and $3 to key (JSON objects by
  // column name, '' = none), $4 the table's oid. One row: dblog.relation_info of the table, then
  // the encoded resume, from and to bounds (NULL where the parameter is ''), then the collation
  // of each collatable column as "attnum=hex,..." (hex: "<provider>:<locale>" in UTF-8, the
  // database's default resolved; NULL when none), for ChunkBegin.key_collations.
  std::string bounds;
  // keys: $1 the keys (JSON array of objects), $2 keys done, $3 keys done + chunk size; rows:
  // the asked key (encoded), its row (encoded, NULL when absent), the number of keys.
  // Otherwise: $1 resume key, $2 from key, $3 to key as above; rows in key order, at most
  // chunk_size: the key (encoded), the row (encoded), then each key value as text.
  std::string rows;
};

// Throws std::invalid_argument when key_columns and key_types differ in length or are empty.
ChunkQueries BuildChunkQueries(const ChunkRequest& request);

// ---- pgoutput mode (no extension: no dblog._key_in, encode_row or _bind_relation) ----------
// Key values are parameters whose type is given by oid (the key column's base type, read under
// the table's lock): the server reads them with that type's input function, and no type's name
// is ever in the statement (a domain or another type swapped in under it cannot be picked up).
// Values come back as each column's output text (read under pgoutput::kOutputSettings through
// the one converter), the table is named as locked and checked by oid, and every statement reads
// t.tableoid and keeps only the table's own rows. Names in the statement are the table's and its
// columns' (quoted): pgoutput mode repairs only tables whose owner and schema's owner are
// dblogd's role or a superuser (Bookkeeping's kTrustedOwners).

// A statement and its parameters, each with its type's oid.
struct ParamQuery {
  std::string sql;
  std::vector<std::optional<std::string>> params;
  std::vector<std::uint32_t> types;
};

// The key values a request's JSON holds, as text, extracted by the server (jsonb is built in):
// $1 resume key (JSON array of text), $2 from key, $3 to key (JSON objects by column name), each
// NULL when absent; $4 a key list (JSON array of objects, or NULL), $5 keys done, $6 keys done +
// keys per chunk. Rows: a tag (0 resume, 1 from, 2 to, 3 the key list's length in the first
// value, 4 + n the list's n-th key), then one text per key column (NULL where absent).
std::string KeyTextsQuery(const std::vector<std::string>& key_columns);

// One row: each of `values` (one per key column, of type key_types[i] by oid) printed by its
// type's output function (format('%s')): the canonical text of a bound.
ParamQuery CanonicalKeyQuery(const std::vector<std::uint32_t>& key_types,
                             const std::vector<std::string>& values);

// $1 the table's oid. One row: the collation of every collatable column, as ChunkQueries.bounds'
// last column (server_version: the catalog's column names changed in 17).
std::string KeyCollationsQuery(int server_version);

// The rows (or keys) of a request's next chunk, after one that asked for `asked` and read `read`
// rows of `bytes` in all (keys and rows encoded): as many as hold about `target_bytes` at that
// chunk's average row size (rounded down to a power of two), at most twice `asked` and at most
// `most`, at least 1. After a chunk that read nothing: `asked`. A bound on memory only while
// the next rows are about as wide as the last: 32,000 narrow rows followed by wide ones make
// one large chunk before the next shrinks.
std::int64_t NextChunkRows(std::int64_t asked, std::int64_t read, std::size_t bytes,
                           std::size_t target_bytes, std::int64_t most);

// The most keys a key list's chunk asks for with `key_columns` columns: chunk_size, or fewer so
// that the parameters stay within the protocol's 65,535.
std::int64_t KeysPerChunk(std::int64_t chunk_size, std::size_t key_columns);

struct CatalogChunk {
  std::string table;                     // quoted, qualified: as locked and checked by oid
  std::uint32_t oid = 0;
  std::vector<std::string> columns;      // quoted names of the Relation's columns, in order
  std::vector<std::string> key_columns;  // quoted, key order
  std::vector<std::uint32_t> key_types;  // the base type of each key column, by oid
  std::int64_t chunk_size = 0;
  // a table's or range's chunk: each bound's values in key order, empty when absent (after: the
  // resume key, rows after it; from: rows at or after it; to: rows before it)
  std::vector<std::string> after, from, to;
  // a key list's chunk: the asked keys, each its values in key order (not empty)
  std::vector<std::vector<std::string>> asked;
  bool keys = false;
};

// A table's or range's chunk: the next chunk_size rows in key order, every column as text.
// A key list's: per asked key in order, each key value as text (its type's output), whether the
// table has the row, then the row's columns (NULL when it has none).
// Throws std::invalid_argument as BuildChunkQueries, or for a key list without keys.
ParamQuery CatalogRowsQuery(const CatalogChunk& chunk);

// A text[] SQL expression as one text value that no name can break: each element hex-encoded
// (its bytes in the client encoding), ',' between them, '-' for NULL. Identifiers may hold any
// character but NUL, so a separator character alone would not do.
std::string HexList(const std::string& array_expression);
// HexList's text back into its elements; NULL becomes kNoType.
inline constexpr const char* kNoType = "\x02";
std::vector<std::string> SplitHexList(std::string_view text);

}  // namespace dblog::consumer
