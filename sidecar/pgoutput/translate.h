// sidecar/pgoutput/translate.h: pgoutput's messages as the dblog.v1 events the extension's
// plugin writes for the same transactions (issue 23 items 1 and 4), so that nothing after the
// source can tell the modes apart: the same Begin, Relation, Change, Truncate, Message and
// Commit, with the same positions (commit LSN, seq), the same Relation content (oid, columns
// with attnums, key columns in key order) and the same Values (values.h).
//
// What pgoutput leaves out, and where it comes from:
//   - a column's attnum, not-null flag and type name, a domain's base type, the key columns in
//     key order (pgoutput flags the replica identity's columns, unordered): the layout the DDL
//     trigger noted last before the change the message came for, when it lists the message's
//     columns (CatalogFor), else the catalog now; read by the caller at that change
//     (kRelationQuery, consumer/ddl_trigger.h's NotedLayout) and mapped onto the message here
//     (MappedRelation: through the catalog now, renames and added columns since are mapped by
//     attnum when the table never dropped a column); a catalog that cannot be mapped is a
//     TranslateError, never a guessed mapping;
//   - a change's own LSN: the XLogData header's dataStart, which the walsender sets to it;
//   - 64-bit xids: widened from the 32-bit xid next to the caller's reference (the server's
//     next full xid when the stream started), as the plugin widens them;
//   - the end LSN in Begin: 0 here, known at the Commit (which carries it), where the emitter
//     takes it from.
// As the plugin does, a transaction's Begin is sent only before its first event in scope (a
// transaction of nothing but Type messages sends nothing), the new row of an UPDATE under
// REPLICA IDENTITY FULL takes its unchanged TOAST values from the whole old row, and the key
// of an UPDATE that did not change it is taken from the new row.
// Asks for `binary 'false'` and no streaming (messages 'true'); binary values, streamed blocks
// and two-phase messages are refused.
// Owns: the mapping, and the SQL of the catalog facts it needs. Must not: do I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dblog/v1/change.pb.h"
#include "pgoutput/decoder.h"
#include "pgoutput/values.h"

namespace dblog::pgoutput {

// A message dblog cannot map onto its events. what() says which and why.
class TranslateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One live column as the catalog has it now.
struct CatalogColumn {
  std::string name;
  std::uint32_t type_oid = 0;       // atttypid (a domain's own)
  std::uint32_t base_type_oid = 0;  // domains resolved
  std::int32_t typmod = -1;
  std::uint32_t attnum = 0;
  bool not_null = false;
  std::string type_name;  // format_type(atttypid, atttypmod)
};

// A table as the catalog has it now: what kRelationQuery returns for its oid.
struct CatalogRelation {
  std::uint32_t oid = 0;
  std::string schema, name;
  char replica_identity = 'd';
  std::vector<CatalogColumn> columns;      // live columns in attnum order
  std::vector<std::uint32_t> key_columns;  // 0-based positions in `columns`, in key order
  std::uint32_t dropped_columns = 0;       // columns ever dropped (pg_attribute keeps them)
  std::uint32_t generated_columns = 0;     // live generated columns (pgoutput does not send them)
};

// $1: the table's oid. One row per live column in attnum order: nspname, relname,
// relreplident, attname, atttypid, the base type's oid, atttypmod, attnum, attnotnull,
// format_type(atttypid, atttypmod), the column's 1-based position in the key (NULL if not in
// it), the number of the table's dropped columns and of its generated columns (the same in
// every row). The key is the plugin's: the primary key, or under REPLICA IDENTITY INDEX that index;
// none under REPLICA IDENTITY NOTHING. Everything schema-qualified: safe under any search_path.
extern const char* const kRelationQuery;

// The rows of kRelationQuery (text cells; nullopt is SQL NULL) as a CatalogRelation.
// Throws TranslateError for rows of another shape.
CatalogRelation ParseRelationRows(std::uint32_t oid,
                                  const std::vector<std::vector<std::optional<std::string>>>& rows);

// The dblog Relation of a table as the catalog has it (the extension's relation_info of it),
// and the converter's kind of each of its columns. The translator's Relation events and the
// copy path of this mode (bootstrap/) both come from here.
dblog::v1::Relation RelationOf(const CatalogRelation& catalog);
std::vector<ValueKind> KindsOf(const CatalogRelation& catalog);

// The dblog Relation a Relation message announces (kinds: the converter's kind of each of its
// columns), completed from the catalog as it is now: the names, the replica identity and the
// table's name are the message's (as they were when the change was written); the attnums, the
// not-null flags, the type names and the key's order are the catalog's. When columns changed
// since the message was written, the catalog still maps it if the table never dropped a
// column (attnums are then dense: the message's i-th column is attnum i+1) and no column of
// the message was retyped; otherwise a TranslateError, never a guessed mapping.
dblog::v1::Relation MappedRelation(const Relation& message, const CatalogRelation& catalog,
                                   std::vector<ValueKind>* kinds);

// What the caller knows of a table a Relation message announces: the catalog now, and the
// table's layout when the change that brought the message was written, where one was noted
// (consumer/ddl_trigger.sql's dblog_ddl.layouts: kRelationQuery's rows at each layout DDL).
struct CatalogAt {
  CatalogRelation now;
  std::optional<CatalogRelation> then;
};

// Whether two readings of a table have the same live columns (attnum, name, type, typmod), key
// and replica identity: the DDL trigger's last note of a table against its catalog now.
bool SameLayout(const CatalogRelation& a, const CatalogRelation& b);

// The catalog the message is mapped through: `then` when it lists the message's columns by
// position (names, types and typmods), which makes its attnums the ones the change was written
// with, whatever was dropped, added or retyped since; `now` otherwise (MappedRelation's rules).
// (The Translator gives `then` the catalog's type names where a column kept its type: a type
// renamed since, which takes no lock on the table and is not noted, prints as it does now.)
const CatalogRelation& CatalogFor(const Relation& message, const CatalogAt& at);

class Translator {
 public:
  // What the caller knows of a table a Relation message announces (it runs kRelationQuery, and
  // looks the layout up for the LSN of the change the message came for, and the transaction's
  // 64-bit xid). Called once per Relation message, at the change after it.
  using Catalog =
      std::function<CatalogAt(const Relation&, std::uint64_t lsn, std::uint64_t xid)>;

  // next_full_xid: the server's next 64-bit xid when the stream started (pg_current_xact_id()
  // in a transaction rolled back, or txid_current_snapshot's xmax).
  Translator(Catalog catalog, std::uint64_t next_full_xid);

  // One decoded message, with its XLogData header's dataStart; appends 0, 1 or 2 events
  // (a deferred Begin, then the message's own event). Throws TranslateError.
  void Translate(const LogicalMessage& message, std::uint64_t wal_start,
                 std::vector<dblog::v1::Event>* out);

  // The dblog Relation of a table announced in this stream and mapped (at its first change
  // since), or null.
  const dblog::v1::Relation* FindRelation(std::uint32_t oid) const;

 private:
  struct Table {
    std::optional<Relation> announced;  // a Relation message not mapped yet (at the next change)
    dblog::v1::Relation relation;
    std::vector<ValueKind> kinds;  // per column
    bool sent = false;             // its Relation event went out since it was announced
  };

  std::uint64_t FullXid(std::uint32_t xid);
  void EnsureBegin(std::vector<dblog::v1::Event>* out);
  // The table of a change at `lsn`, mapped first when a Relation message announced it since.
  Table& TableOf(std::uint32_t oid, const char* what, std::uint64_t lsn,
                 std::vector<dblog::v1::Event>* out);
  // The tuple as a Row; fill: the whole old row whose values replace unchanged ones.
  void ToRow(const Table& table, const Tuple& tuple, const char* what, dblog::v1::Row* row,
             const dblog::v1::Row* fill = nullptr) const;
  void KeyOf(const Table& table, const dblog::v1::Row& row, dblog::v1::Row* key) const;
  dblog::v1::Change& NewChange(const Table& table, dblog::v1::Change::Kind kind,
                               std::uint64_t lsn, std::vector<dblog::v1::Event>* out);

  Catalog catalog_;
  std::uint64_t reference_xid_;
  std::unordered_map<std::uint32_t, Table> tables_;
  bool in_txn_ = false;
  bool began_ = false;  // the Begin event went out
  dblog::v1::Begin begin_;
  std::uint32_t seq_ = 0;
};

}  // namespace dblog::pgoutput
