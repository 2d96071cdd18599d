// sidecar/consumer/chunk_query.cc: the SQL of one repair chunk (see chunk_query.h).
#include "consumer/chunk_query.h"

#include <algorithm>
#include <stdexcept>

namespace dblog::consumer {
namespace {

// "col" -> col (the JSON key a quoted identifier stands for)
std::string Unquote(const std::string& ident) {
  if (ident.size() < 2 || ident.front() != '"') return ident;
  std::string out;
  for (std::size_t i = 1; i + 1 < ident.size(); ++i) {
    out += ident[i];
    if (ident[i] == '"') ++i;
  }
  return out;
}

std::string SqlLiteral(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

std::string Join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// The key's columns and values as the chunk statements write them, one entry per key column.
struct KeyExpressions {
  std::vector<std::string> tcols;         // t."col": the table's key columns
  std::vector<std::string> typed_resume;  // $1's elements, by position, read as the column's type
  std::vector<std::string> typed_from;    // $2's and $3's values, by column name
  std::vector<std::string> typed_to;
  std::vector<std::string> typed_asked;   // a listed key's values, as k0, k1, ...
  std::vector<std::string> asked_cols;    // a.k0, a.k1, ...
  std::string key;                        // (t."col1", t."col2")
};

KeyExpressions KeyExpressionsOf(const ChunkRequest& r) {
  KeyExpressions k;
  for (std::size_t i = 0; i < r.key_columns.size(); ++i) {
    k.tcols.push_back("t." + r.key_columns[i]);
    const auto in = [&](const std::string& text) {
      return "dblog._key_in(" + text + ", NULL::" + r.key_types[i] + ")";
    };
    const std::string name = SqlLiteral(Unquote(r.key_columns[i]));
    k.typed_resume.push_back(in("($1::jsonb)->>" + std::to_string(i)));
    k.typed_from.push_back(in("($2::jsonb)->>" + name));
    k.typed_to.push_back(in("($3::jsonb)->>" + name));
    k.typed_asked.push_back(in("x.e->>" + name) + " AS k" + std::to_string(i));
    k.asked_cols.push_back("a.k" + std::to_string(i));
  }
  k.key = "(" + Join(k.tcols, ", ") + ")";
  return k;
}

// The collation of every collatable column of table `oid` (attnum=descriptor, the descriptor
// hex encoded), for ChunkBegin.key_collations; the database's default resolved.
// server_version: 17 renamed colliculocale and daticulocale to colllocale and datlocale (and
// added the builtin provider, 'b').
std::string CollationsOf(const std::string& oid, int server_version = 150000) {
  const bool v17 = server_version >= 170000;
  const std::string coll = v17 ? "co.colllocale" : "co.colliculocale";
  const std::string dat = v17 ? "d.datlocale" : "d.daticulocale";
  return "(SELECT pg_catalog.string_agg(a.attnum::text || '=' || pg_catalog.encode("
         "    pg_catalog.convert_to(CASE"
         "      WHEN co.collprovider = 'i' THEN 'icu:' || " + coll +
         "      WHEN co.collprovider = 'b' THEN 'builtin:' || " + coll +
         "      WHEN co.collprovider = 'c' THEN 'libc:' || co.collcollate"
         "      WHEN d.datlocprovider = 'i' THEN 'icu:' || " + dat +
         "      WHEN d.datlocprovider = 'b' THEN 'builtin:' || " + dat +
         "      ELSE 'libc:' || d.datcollate END, 'UTF8'), 'hex'), ',')"
         "    FROM pg_catalog.pg_attribute a"
         "    JOIN pg_catalog.pg_collation co ON co.oid = a.attcollation,"
         "         pg_catalog.pg_database d"
         "   WHERE a.attrelid = " + oid + " AND a.attnum > 0 AND NOT a.attisdropped"
         "     AND d.datname = pg_catalog.current_database())";
}

std::string BoundsQuery(const KeyExpressions& k) {
  return "SELECT dblog.relation_info($4::oid),"
         " CASE WHEN $1 <> '' THEN dblog.encode_row(ROW(" + Join(k.typed_resume, ", ") + ")) END,"
         " CASE WHEN $2 <> '' THEN dblog.encode_row(ROW(" + Join(k.typed_from, ", ") + ")) END,"
         " CASE WHEN $3 <> '' THEN dblog.encode_row(ROW(" + Join(k.typed_to, ", ") + ")) END, " +
         CollationsOf("$4::oid");
}

// A key list's chunk: each asked key, with its row when the table has one.
std::string KeysRowsQuery(const ChunkRequest& r, const KeyExpressions& k) {
  return "WITH asked AS (SELECT x.ord, " + Join(k.typed_asked, ", ") +
         " FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS x(e, ord)"
         " WHERE x.ord > $2 AND x.ord <= $3)"
         " SELECT dblog.encode_row(ROW(" + Join(k.asked_cols, ", ") +
         ")), CASE WHEN t." + r.key_columns[0] +
         " IS NULL THEN NULL ELSE dblog.encode_row(t.*) END,"
         " (SELECT jsonb_array_length($1::jsonb))::text"
         " FROM asked a LEFT JOIN ONLY " + r.table + " t ON " + k.key +
         " OPERATOR(pg_catalog.=) (" + Join(k.asked_cols, ", ") + ") ORDER BY a.ord";
}

// A table's or a range's chunk: the next chunk_size rows in key order within the bounds.
std::string RangeRowsQuery(const ChunkRequest& r, const KeyExpressions& k) {
  std::vector<std::string> conds;
  if (r.has_resume)
    conds.push_back(k.key + " OPERATOR(pg_catalog.>) (" + Join(k.typed_resume, ", ") + ")");
  else if (r.has_from)
    conds.push_back(k.key + " OPERATOR(pg_catalog.>=) (" + Join(k.typed_from, ", ") + ")");
  if (r.has_to)
    conds.push_back(k.key + " OPERATOR(pg_catalog.<) (" + Join(k.typed_to, ", ") + ")");
  // The key's values also come back as text: dblogd writes the JSON array of the last row's
  // key (where the next chunk resumes) itself, rather than have the server build one per row.
  std::vector<std::string> key_text;
  for (const auto& c : k.tcols) key_text.push_back("pg_catalog.format('%s', " + c + ")");
  return "SELECT dblog.encode_row(ROW(" + Join(k.tcols, ", ") + ")), dblog.encode_row(t.*), " +
         Join(key_text, ", ") + " FROM ONLY " + r.table + " t" +
         // every parameter is referenced, used or not (PostgreSQL insists)
         " WHERE length($1::text || $2::text || $3::text) >= 0" +
         (conds.empty() ? "" : " AND " + Join(conds, " AND ")) + " ORDER BY " +
         Join(k.tcols, ", ") + " LIMIT " + std::to_string(r.chunk_size);
}

}  // namespace

ChunkQueries BuildChunkQueries(const ChunkRequest& r) {
  const std::size_t n = r.key_columns.size();
  if (n == 0 || r.key_types.size() != n)
    throw std::invalid_argument("a chunk needs one type per key column");
  const KeyExpressions k = KeyExpressionsOf(r);
  ChunkQueries q;
  q.bounds = BoundsQuery(k);
  q.rows = r.keys ? KeysRowsQuery(r, k) : RangeRowsQuery(r, k);
  return q;
}

std::string KeyTextsQuery(const std::vector<std::string>& key_columns) {
  if (key_columns.empty()) throw std::invalid_argument("a chunk needs a key column");
  std::vector<std::string> resume, from, to, listed, nulls;
  for (std::size_t i = 0; i < key_columns.size(); ++i) {
    const std::string name = SqlLiteral(Unquote(key_columns[i]));
    resume.push_back("($1::pg_catalog.jsonb) OPERATOR(pg_catalog.->>) " + std::to_string(i));
    from.push_back("($2::pg_catalog.jsonb) OPERATOR(pg_catalog.->>) " + name);
    to.push_back("($3::pg_catalog.jsonb) OPERATOR(pg_catalog.->>) " + name);
    listed.push_back("x.e OPERATOR(pg_catalog.->>) " + name);
    nulls.push_back(i == 0 ? "pg_catalog.jsonb_array_length($4::pg_catalog.jsonb)::pg_catalog.text"
                           : "NULL::pg_catalog.text");
  }
  return "SELECT 0::pg_catalog.int8, " + Join(resume, ", ") + " WHERE $1 IS NOT NULL"
         " UNION ALL SELECT 1, " + Join(from, ", ") + " WHERE $2 IS NOT NULL"
         " UNION ALL SELECT 2, " + Join(to, ", ") + " WHERE $3 IS NOT NULL"
         " UNION ALL SELECT 3, " + Join(nulls, ", ") + " WHERE $4 IS NOT NULL"
         " UNION ALL SELECT 4 OPERATOR(pg_catalog.+) x.o, " + Join(listed, ", ") +
         " FROM pg_catalog.jsonb_array_elements($4::pg_catalog.jsonb) WITH ORDINALITY AS x(e, o)"
         " WHERE x.o OPERATOR(pg_catalog.>) $5::pg_catalog.int8"
         "   AND x.o OPERATOR(pg_catalog.<=) $6::pg_catalog.int8"
         " ORDER BY 1";
}

ParamQuery CanonicalKeyQuery(const std::vector<std::uint32_t>& key_types,
                             const std::vector<std::string>& values) {
  if (key_types.empty() || key_types.size() != values.size())
    throw std::invalid_argument("a key needs one value per key column");
  ParamQuery q;
  std::vector<std::string> out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    q.params.emplace_back(values[i]);
    q.types.push_back(key_types[i]);
    out.push_back("pg_catalog.format('%s', $" + std::to_string(i + 1) + ")");
  }
  q.sql = "SELECT " + Join(out, ", ");
  return q;
}

std::int64_t NextChunkRows(std::int64_t asked, std::int64_t read, std::size_t bytes,
                           std::size_t target_bytes, std::int64_t most) {
  if (read <= 0) return std::max<std::int64_t>(1, std::min(asked, most));
  const std::size_t per_row = std::max<std::size_t>(1, bytes / static_cast<std::size_t>(read));
  std::size_t fit = std::min<std::size_t>(target_bytes / per_row, static_cast<std::size_t>(1) << 40);
  // a power of two: a table whose rows vary in size asks for a few chunk sizes, not a new one
  // (a new prepared statement: the size is the query's LIMIT) every window
  std::size_t pow2 = 1;
  while (pow2 * 2 <= fit) pow2 *= 2;
  const auto fits = static_cast<std::int64_t>(fit == 0 ? 0 : pow2);
  return std::max<std::int64_t>(1, std::min({fits, 2 * asked, most}));
}

std::int64_t KeysPerChunk(std::int64_t chunk_size, std::size_t key_columns) {
  const auto most = static_cast<std::int64_t>(65535 / std::max<std::size_t>(key_columns, 1));
  return std::min(chunk_size, most);
}

std::string KeyCollationsQuery(int server_version) {
  return "SELECT " + CollationsOf("$1::pg_catalog.oid", server_version);
}

ParamQuery CatalogRowsQuery(const CatalogChunk& c) {
  const std::size_t n = c.key_columns.size();
  if (n == 0 || c.key_types.size() != n)
    throw std::invalid_argument("a chunk needs one type per key column");
  if (c.keys && c.asked.empty()) throw std::invalid_argument("a key list's chunk needs keys");
  ParamQuery q;
  std::vector<std::string> tcols, cols;
  for (const auto& k : c.key_columns) tcols.push_back("t." + k);
  for (const auto& col : c.columns) cols.push_back("t." + col);
  const std::string key = "(" + Join(tcols, ", ") + ")";
  const std::string own = "t.tableoid OPERATOR(pg_catalog.=) " + std::to_string(c.oid) +
                          "::pg_catalog.oid";
  // ($k, $k+1, ...): one parameter per key column, typed by the column's base type's oid
  auto typed = [&](const std::vector<std::string>& values) {
    if (values.size() != n) throw std::invalid_argument("a bound needs one value per key column");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < n; ++i) {
      q.params.emplace_back(values[i]);
      q.types.push_back(c.key_types[i]);
      out.push_back("$" + std::to_string(q.params.size()));
    }
    return Join(out, ", ");
  };
  if (c.keys) {
    std::vector<std::string> rows, names, acols, shown;
    for (std::size_t j = 0; j < c.asked.size(); ++j)
      rows.push_back("(" + std::to_string(j + 1) + ", " + typed(c.asked[j]) + ")");
    for (std::size_t i = 0; i < n; ++i) {
      names.push_back("k" + std::to_string(i));
      acols.push_back("a.k" + std::to_string(i));
      shown.push_back("pg_catalog.format('%s', a.k" + std::to_string(i) + ")");
    }
    q.sql = "SELECT " + Join(shown, ", ") + ", t.tableoid IS NOT NULL, " + Join(cols, ", ") +
            " FROM (VALUES " + Join(rows, ", ") + ") AS a(ord, " + Join(names, ", ") + ")" +
            " LEFT JOIN ONLY " + c.table + " t ON " + key + " OPERATOR(pg_catalog.=) (" +
            Join(acols, ", ") + ") AND " + own + " ORDER BY a.ord";
    return q;
  }
  std::vector<std::string> conds{own};
  if (!c.after.empty())
    conds.push_back(key + " OPERATOR(pg_catalog.>) (" + typed(c.after) + ")");
  else if (!c.from.empty())
    conds.push_back(key + " OPERATOR(pg_catalog.>=) (" + typed(c.from) + ")");
  if (!c.to.empty()) conds.push_back(key + " OPERATOR(pg_catalog.<) (" + typed(c.to) + ")");
  q.sql = "SELECT " + Join(cols, ", ") + " FROM ONLY " + c.table + " t WHERE " +
          Join(conds, " AND ") + " ORDER BY " + Join(tcols, ", ") + " LIMIT " +
          std::to_string(c.chunk_size);
  return q;
}

std::string HexList(const std::string& array) {
  return "(SELECT pg_catalog.string_agg(coalesce(pg_catalog.encode(pg_catalog.textsend(e), "
         "'hex'), '-'), ',' ORDER BY o) FROM pg_catalog.unnest(" +
         array + ") WITH ORDINALITY AS u(e, o))";
}

std::vector<std::string> SplitHexList(std::string_view s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto sep = s.find(',', start);
    const std::string_view hex = s.substr(start, sep == std::string_view::npos ? sep : sep - start);
    if (hex == "-") {
      out.emplace_back(kNoType);
    } else {
      std::string bytes;
      for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
        bytes.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
      out.push_back(std::move(bytes));
    }
    if (sep == std::string_view::npos) break;
    start = sep + 1;
  }
  return out;
}

}  // namespace dblog::consumer
