// client/apply/applier.h: applies a consumer's stream (dblog.v1.StreamEvent, in order) to a
// target PostgreSQL database, exactly once.
//
// Transactions and positions:
//  - Each source transaction becomes one target transaction, opened at its first change and
//    committed at its Commit together with an UPDATE of dblog_apply.progress to the Commit's
//    position. A transaction with nothing to write (only messages) writes nothing.
//  - Bootstrap rows (READ between BootstrapBegin and BootstrapEnd) are committed in batches of
//    bootstrap_commit_rows, each storing the position of its last row; BootstrapEnd commits the
//    rest with its own position.
//  - Target transactions commit with synchronous_commit off (as a subscription's apply worker
//    does): a commit does not wait for its WAL to reach disk. WaitForCommits makes them durable
//    with one commit at the session's own synchronous_commit level (at least local): the open
//    transaction's, or one of its own that stores the last position again. Its flush covers
//    every commit before it; a crash of the target loses at most what came after.
//  - durable() is the latest position whose effects are durable in the target that way (or that
//    needed nothing: messages, heartbeats between transactions). Only that may be acknowledged
//    to dblogd; on restart Start() returns the stored position for Hello.resume_after.
//  - A restarted BootstrapBegin, or any BootstrapBegin of a consumer that applied here before
//    (a stored position, or tables listed in dblog_apply.tables), first TRUNCATEs the tables
//    listed for the consumer and clears the stored position, in the bootstrap's first target
//    transaction: a bootstrap is a complete image.
//
// Changes: INSERT, READ and UPDATE without unchanged-TOAST markers are full rows: upserts
// (INSERT .. ON CONFLICT (key) DO UPDATE). DELETE deletes by key. An UPDATE whose old_key
// differs from its new row's key deletes the old key first. Rows with unchanged-TOAST markers
// never write those columns: an UPDATE at the same key sets only the other columns, an UPDATE
// that moves the key moves the old row in one statement (DELETE .. RETURNING feeding the
// INSERT) and keeps its unchanged columns. When the target lacks that row, nothing is invented:
// the update is counted (stats().missing_rows) and logged with its key and the exact
// dblog.repair_keys call that restores the row. Truncate truncates the mapped target tables.
// Repair chunks: READ rows are upserts; DELETE rows deletes; at ChunkEnd of a range chunk the
// target rows whose key is in [from_key, to_key] (bounds as flagged, absent = unbounded) that
// were neither READ in the chunk nor listed in kept_keys are deleted. Key ranges are compared by
// PostgreSQL with the columns' real types (row comparison), never in C++, each text column in
// the source's collation (ChunkBegin.key_collations, created in dblog_apply as needed): the
// target column's own collation may order differently. When the target cannot have that
// collation the chunk's range deletion is skipped (logged, counted), never guessed.
//
// Batching: bootstrap rows of a table that was empty when the bootstrap reached it go in with
// COPY (the connection leaves pipeline mode for it; in binary format where every column's type
// has one, copy_binary.h, else text), one COPY per run of a table's rows within
// a target transaction, its rows sent in pieces of 256 kB as they are read (the server inserts
// one piece while the next is read); anything else sent ends the COPY first. Otherwise
// consecutive upserts (or deletes) of one table are collected and sent as one
// statement whose values travel as one text[] per column, cast to the column types by
// unnest(...) (one prepared statement per table, whatever the batch size; a batch of one row
// uses plain parameters). Anything else (a
// different table or kind, a key move, a truncate, a chunk end, a commit, batch_rows or
// batch_bytes reached) sends the batch first, so statements run in stream order. Statements
// go through libpq's pipeline mode: nothing waits for the server except where a result is
// needed (catalog checks), so a stream of small transactions costs no round trip each.
// Memory: one batch or COPY piece, the unanswered statements (bounded in pg.h) and, in a range
// chunk, the chunk's keys. A source transaction of any size streams through.
//
// Schema changes: a table's changed Relation is followed by identity (relation_map.h) at the
// table's next use, in the target transaction of the source transaction that carries it
// (TargetTables, target_tables.h, reads the target's catalog and runs the DDL); a change that
// cannot be applied safely throws SchemaError before anything of that transaction is committed.
//
// Owns: the target connection, the order and batching of what is sent, the per-table prepared
// statements. The statements' text is statements.h's; the dblog_apply schema and the advisory
// lock are progress_store.h's. Does not read the network: the caller feeds events and acknowledges
// durable() positions.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/apply/copy_binary.h"
#include "client/apply/pg.h"
#include "client/apply/progress_store.h"
#include "client/apply/relation_map.h"
#include "client/apply/sql_text.h"
#include "client/apply/statements.h"
#include "client/apply/target_schema.h"
#include "client/apply/target_tables.h"
#include "dblog/v1/consumer.pb.h"
#include "wire/change_view.h"

namespace dblog::apply {

struct ApplierOptions {
  std::string consumer;
  // Where the applier keeps its own tables in the target (progress_store.h). The stream never
  // writes there: a source table whose target would be in it is refused (SchemaError).
  std::string bookkeeping_schema = "dblog_apply";
  bool create_tables = false;
  // Target columns whose type cannot hold every source value (column_types.h) are refused
  // before anything is applied to their table; with this they are used, with one warning each.
  bool allow_lossy_columns = false;
  // A column the source dropped: dropped in the target too, or kept (--keep-dropped-columns).
  DroppedColumns dropped_columns = DroppedColumns::kDrop;
  SchemaMap schema_map;
  std::size_t batch_rows = 1000;              // rows per multi-row statement
  std::size_t batch_bytes = 8u << 20;         // bytes of value text per statement
  std::size_t bootstrap_commit_rows = 20000;  // bootstrap rows per target transaction
  // The bootstrap's COPY in binary format where every column's type has one (copy_binary.h);
  // false: always COPY text (`dblog apply --copy-text`).
  bool copy_binary = true;
};

struct ApplierStats {
  std::uint64_t transactions = 0;   // target transactions committed
  std::uint64_t rows_written = 0;   // rows upserted, updated or moved
  std::uint64_t rows_unchanged = 0;  // copied rows (repairs) the target had already, not written
  std::uint64_t rows_deleted = 0;   // rows deleted by key (not by truncate or range)
  std::uint64_t range_deleted = 0;  // rows deleted by range chunks
  std::uint64_t truncates = 0;
  std::uint64_t statements = 0;
  // UPDATEs keeping unchanged TOAST values of a row the target lacked: their other columns
  // were not applied (each logged with the repair_keys call that restores the row)
  std::uint64_t missing_rows = 0;
  // range chunks whose deletion was skipped: a key column's collation (ChunkBegin.
  // key_collations) is not available in the target, so it cannot tell which rows are in range
  std::uint64_t range_deletes_skipped = 0;
  // queries of the target's catalog (target_tables.h: one per table name a preparation, or a
  // bootstrap clearing its tables, looks at, and one more after each change made to the table)
  std::uint64_t catalog_reads = 0;
  // bootstrap rows that went into the target by COPY in binary format, counted when their
  // COPY ended (the rest of the copied rows went as COPY text)
  std::uint64_t rows_copied_binary = 0;

  ApplierStats& operator+=(const ApplierStats& o) {
    transactions += o.transactions;
    rows_written += o.rows_written;
    rows_unchanged += o.rows_unchanged;
    rows_deleted += o.rows_deleted;
    range_deleted += o.range_deleted;
    truncates += o.truncates;
    statements += o.statements;
    missing_rows += o.missing_rows;
    range_deletes_skipped += o.range_deletes_skipped;
    catalog_reads += o.catalog_reads;
    rows_copied_binary += o.rows_copied_binary;
    return *this;
  }
};

class Applier {
 public:
  using Log = std::function<void(const std::string&)>;

  Applier(PgConnection target, ApplierOptions options, Log log);
  Applier(const Applier&) = delete;
  Applier& operator=(const Applier&) = delete;

  // Sets up the session and the dblog_apply schema, takes this consumer's advisory lock on the
  // target (one applier per consumer and target), and returns the stored position, if any.
  std::optional<dblog::v1::Position> Start();

  // Applies one event, in stream order. Throws StreamError, TargetError, SchemaError.
  void Apply(const dblog::v1::StreamEvent& event);
  // The same for a Change read in place (client::Client::NextView): a bootstrap's row of a
  // table filled by COPY is written from the frame's values; any other is parsed and applied
  // as above.
  void Apply(const wire::ChangeView& change);
  // Between transactions, the heartbeat's position needs nothing more: it becomes durable once
  // everything before it is.
  void OnHeartbeat(const dblog::v1::Heartbeat& heartbeat);

  // Handles target results that have arrived, without blocking.
  void Poll();
  // Blocks until every commit sent so far is confirmed (not the statements of an open
  // transaction after it), and makes them durable (a durable commit; inside an open transaction,
  // its commit will be the durable one), and ends an open COPY: call before waiting on the
  // network, then acknowledge durable().
  void WaitForCommits();
  // Ends cleanly: rolls back an open target transaction (its source transaction comes again
  // after a restart) and waits for everything before it.
  void Stop();
  // Stop(), then releases the consumer's advisory lock, so that the next Applier (on a new
  // connection) can Start at once: what dblog apply does before it reconnects. Throws
  // TargetError when the target is gone (the lock goes with its session).
  void Release();

  // The source went back (Welcome.reconcile: a failover, dblogd reconciling with repairs of
  // every table): at the next Relation of each table, a column type the target cannot follow
  // without loss is followed emptied (relation_map.h), since the repairs write every row again.
  // Later Relations are the live source's: such a change stops as before.
  // Recorded in the target at once, with each relation followed since, so that a dblog apply
  // restarted before a relation's first Relation still knows it.
  void SourceWentBack(std::uint64_t consistent_point) { store_.RecordWentBack(consistent_point); }

  const std::optional<dblog::v1::Position>& durable() const { return durable_; }
  // A position was applied (or needed nothing) that is not durable yet: WaitForCommits would
  // advance durable().
  bool durable_behind() const;
  // A bootstrap's COPY is open on the target connection (WaitForCommits ends it).
  bool copying() const { return copy_.open; }
  const ApplierStats& stats() const { return stats_; }
  bool in_source_transaction() const { return source_txn_open_ || bootstrap_open_; }
  // Between BootstrapBegin and BootstrapEnd: the rows that Apply(ChangeView) copies in place.
  bool in_bootstrap() const { return bootstrap_open_; }

 private:
  enum class BatchKind { kNone, kUpsert, kRefresh, kDelete };

  struct Table {
    dblog::v1::Relation relation;
    std::string relation_bytes;
    TargetName target;
    std::string quoted;
    bool prepared = false;        // checked/created, statements prepared
    bool registered = false;      // listed in the bookkeeping's tables for this consumer
    std::uint32_t target_oid = 0;  // the target table's oid, as last prepared
    bool byte_equal_keys = true;  // every key type compares equal iff our text is equal
    bool same_types = true;       // every target column has the source's type: COPY can fill it
    int generation = 0;
    std::string upsert_name;
    std::string refresh_name;
    std::string delete_name;
    std::string copy_sql;
    std::string copy_binary_sql;
    // Per column, its binary COPY form (copy_binary.h); empty when a column has none (or the
    // target's type oid differs, or options say text): COPY text.
    std::vector<BinaryType> binary_types;
    // The open bootstrap met a row of it with no binary form: the rest of its rows go as text
    // (one switch, not one per such row).
    bool copy_as_text = false;
    // How the current bootstrap fills it: COPY when it was empty at the bootstrap's first row
    // for it (no key can be there twice: the copy is one snapshot) and its column types are
    // the source's (COPY reads values with the target type's input or receive function),
    // upserts otherwise.
    enum class Fill { kUnknown, kCopy, kUpsert } bootstrap_fill = Fill::kUnknown;
  };

  struct CopyBuffer {
    bool open = false;   // a COPY into table oid is running on the target connection
    bool binary = false;  // in COPY's binary format (else text)
    bool trailer = false;  // the binary format's trailer is in data (or sent)
    std::uint64_t binary_rows = 0;  // rows of it in binary (counted at its end)
    std::uint32_t oid = 0;
    std::string data;    // COPY data, not sent yet (up to kCopyPieceBytes)
    std::size_t rows = 0;
  };

  struct Batch {
    std::uint32_t oid = 0;
    BatchKind kind = BatchKind::kNone;
    std::vector<std::vector<std::optional<std::string>>> rows;
    std::unordered_map<std::string, std::size_t> index;  // key text -> row (upserts)
    std::size_t bytes = 0;
  };

  struct Chunk {
    bool open = false;
    dblog::v1::ChunkBegin begin;
    std::vector<TextArray> keys;  // per key column: keys of the chunk's READ rows
  };

  void OnRelation(const dblog::v1::Relation& relation);
  void OnBegin(const dblog::v1::Begin& begin);
  void OnCommit(const dblog::v1::Commit& commit);
  void OnChange(const dblog::v1::Change& change);
  void OnCopiedRow(Table& table, const dblog::v1::Change& change);  // READ: bootstrap, repair
  // At the bootstrap's first row for `table`: COPY or upserts (Table::bootstrap_fill).
  void ChooseBootstrapFill(Table& table);
  void OnUpdate(Table& table, const dblog::v1::Change& change);
  void OnTruncate(const dblog::v1::Truncate& truncate);
  void OnBootstrapBegin(const dblog::v1::BootstrapBegin& begin);
  void OnBootstrapEnd(const dblog::v1::BootstrapEnd& end);
  void OnChunkBegin(const dblog::v1::ChunkBegin& begin);
  void OnChunkEnd(const dblog::v1::ChunkEnd& end);
  void OnPositionOnly(const dblog::v1::Position& position);
  // SchemaError when source table schema.name would be applied into the bookkeeping schema.
  void RefuseBookkeeping(const std::string& schema, const std::string& name) const;

  Table& TableFor(std::uint32_t oid, const char* what);
  void PrepareTable(Table& table);

  void Register(Table& table);
  void BeginTarget();
  // counted: a source transaction's (stats().transactions), not a durable commit's own
  void CommitTarget(const dblog::v1::Position& position, bool counted = true);
  // Unless every position sent is durable already: makes the next commit durable (the open
  // transaction's, or one of its own that stores the last position sent again).
  void SendDurableCommit();
  void ClearForBootstrap(bool restarted);
  // SchemaError: registered table `name` (oid `registered`) is another table (oid `now`).
  [[noreturn]] void RefuseUnregistered(const TargetName& name, std::uint32_t registered,
                                       std::uint32_t now);

  // kRefresh: a copied row, written only where the target's differs (statements.h)
  void Upsert(Table& table, const dblog::v1::Row& row, BatchKind kind = BatchKind::kUpsert);
  void Delete(Table& table, const dblog::v1::Row& key);
  void UpdateKeepingUnchanged(Table& table, const dblog::v1::Row& row);
  void MoveKeepingUnchanged(Table& table, const dblog::v1::Row& old_key, const dblog::v1::Row& row);
  // An update keeping unchanged TOAST values found no row at `key`: counted (missing_rows) and
  // logged with the key and the dblog.repair_keys call that restores it.
  void MissingRow(std::uint32_t oid, const dblog::v1::Row& key);
  void RangeDelete(Table& table, const dblog::v1::ChunkEnd& end);
  // The target collation (SQL, e.g. pg_catalog."C") that orders like the source's collation
  // `descriptor` (ChunkBegin.key_collations); created in dblog_apply when missing; nullopt
  // when the target cannot have it (no such locale, no ICU).
  std::optional<std::string> TargetCollation(const std::string& descriptor);
  void AddToBatch(Table& table, BatchKind kind, std::vector<std::optional<std::string>> values);
  // A row (a Row, or a wire::RowView read in place) into the table's COPY.
  template <typename RowOf>
  void AddToCopy(Table& table, const RowOf& row);
  // The bootstrap counts a copied row, and commits the target every bootstrap_commit_rows.
  void CountBootstrapRow(const dblog::v1::Position& position);
  // Refuses an event at or before the last one applied, then makes it the last.
  void Advance(const dblog::v1::Position& position);
  void FlushBatch();  // sends whatever is pending: the COPY buffer or the batch
  void SendBatch();
  void FlushCopy();
  void Send(const std::string& sql, const Params& params, const std::string& what,
            PgConnection::Check check = nullptr);
  void MarkCommitted(const dblog::v1::Position& position);
  void MarkDurable(const dblog::v1::Position& position);
  void AckableSent();

  dblog::v1::Row KeyOf(const Table& table, const dblog::v1::Row& row) const;
  static TableRef Ref(const Table& table) { return {table.quoted, table.target.Display()}; }

  PgConnection target_;
  ApplierOptions options_;
  Log log_;
  ProgressStore store_;  // dblog_apply: position, tables written, mapping; the advisory lock
  TargetTables target_tables_;  // the target's catalog, and the DDL that follows the source
  std::unordered_map<std::uint32_t, Table> tables_;
  std::map<std::string, std::optional<std::string>> collations_;  // TargetCollation's answers
  bool had_position_ = false;

  bool source_txn_open_ = false;
  bool bootstrap_open_ = false;
  bool target_txn_open_ = false;
  std::uint64_t bootstrap_rows_ = 0;
  std::uint64_t bootstrap_rows_in_txn_ = 0;
  std::chrono::steady_clock::time_point bootstrap_started_;
  Batch batch_;
  CopyBuffer copy_;
  std::string copy_row_;  // one row in COPY binary, before it is known to have that form
  Chunk chunk_;
  std::optional<dblog::v1::Position> last_position_;  // of the last positioned event applied
  dblog::v1::StreamEvent parsed_;  // a Change read in place that Apply(ChangeView) parses
  // Positions: the last sent (a commit, or one that needs nothing), the last whose commit
  // succeeded (flushed or not: sessions commit with synchronous_commit off), the last flushed
  // (a durable commit at durable_level_ succeeded at or after it).
  std::optional<dblog::v1::Position> sent_;
  std::optional<dblog::v1::Position> committed_;
  std::optional<dblog::v1::Position> durable_;
  std::string durable_level_;       // synchronous_commit of a durable commit
  bool durable_requested_ = false;  // the open target transaction commits durably
  // the oids of the target tables the open bootstrap cleared: empty until it fills them
  std::set<std::uint32_t> cleared_;
  std::uint64_t ackable_sent_ = 0;  // pipeline entries sent when the last ackable point was
  ApplierStats stats_;
};

}  // namespace dblog::apply
