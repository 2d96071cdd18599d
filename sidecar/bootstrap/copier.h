// sidecar/bootstrap/copier.h: the bootstrap's copy workers. Each worker opens its own
// connection, imports the slot's exported snapshot (REPEATABLE READ READ ONLY + SET TRANSACTION
// SNAPSHOT) and copies tasks (a whole table, or a primary-key range of a large one) with
// `COPY (SELECT dblog.encode_row(t.*) ...) TO STDOUT (FORMAT binary)`, so every row is encoded
// by the extension's C encoder, byte-identical to the log path; in pgoutput mode
// (Reader::kCatalog) with COPY's text through the converter pgoutput's values go through.
// Rows reach the io thread through a bounded queue: when the consumer is slow, the queue fills
// and the workers wait, so memory stays bounded (max_queue_bytes plus one batch per worker).
// Owns: worker threads, their connections and the queue. Does not emit (the pipeline drains
// the queue into the one emitter).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/scope.h"

namespace dblog::bootstrap {

struct Task {
  std::size_t table = 0;
  std::optional<std::int64_t> from;  // inclusive key bound (single integer keys only)
  std::optional<std::int64_t> to;    // exclusive
};

// Splits large tables with a single integer key into ranges so several workers share them.
// `bounds` holds (min, max) of the key per table index, where known.
std::vector<Task> PlanTasks(const std::vector<Table>& tables,
                            const std::vector<std::optional<std::pair<std::int64_t, std::int64_t>>>& bounds,
                            std::int64_t rows_per_task);

// A table's definition changed while the bootstrap began or copied it (DDL): the bootstrap
// must be redone from a new slot (its rows and the log would describe the table differently).
class DefinitionChanged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reader::kCatalog, after a statement that named tables: the user relations the caller's
// transaction holds a lock on must be the tables in `verified` (locked by name and checked to
// be these oids before the statement), their TOAST tables, or indexes of either. A lock on a
// table holds its name, not its schema's: ALTER SCHEMA ... RENAME takes no lock on the tables
// inside, so a schema's owner could put another relation under the name between the check and
// the statement, which keeps a lock on what it read. Throws DefinitionChanged naming `name`.
void RequireOnlyVerifiedLocks(pg::Connection& conn, const std::vector<std::uint32_t>& verified,
                              const std::string& name);

// The table's storage as the transaction's snapshot knows it (pg_class read in the snapshot)
// is its storage now (pg_relation_filenode reads the syscache, which is never a snapshot's).
// False after a rewrite committed after the snapshot (ALTER TABLE ... TYPE ... USING, ADD
// COLUMN with a volatile default, TRUNCATE), whose rows the snapshot cannot see (PostgreSQL's
// MVCC exception for rewrites); VACUUM FULL, CLUSTER and SET TABLESPACE change the storage too.
// Call it with the table locked, so the storage cannot change after the check.
bool StorageUnchangedSinceSnapshot(pg::Connection& conn, std::uint32_t oid);

// What a bootstrap copies: the tables in scope and the tasks that copy them.
struct Plan {
  std::vector<Table> tables;
  std::vector<Task> tasks;
};

// Enumerates the scope inside the exported snapshot `snapshot_name` (one REPEATABLE READ
// transaction on `sql`, so that scope and copy agree) and reads the key bounds of the large
// tables with a single integer key, to split them into tasks of about `rows_per_task` rows.
// Throws ScopeError (a table without a key), DefinitionChanged (the catalog now differs from
// the snapshot's for a table in scope: DDL committed after the consistent point) or pg::Error;
// `sql` is then mid-transaction.
// Reader::kCatalog: tables are not split (each is one COPY of the table itself, see Copier).
Plan PlanInSnapshot(pg::Connection& sql, const std::string& snapshot_name,
                    const config::Scope& scope, std::int64_t rows_per_task,
                    Reader reader = Reader::kExtension);

// Binary COPY of one bytea column: hands out each row's bytes as it is complete, without
// copying them when a row lies within one piece of input (the usual case: PostgreSQL sends a
// CopyData message per row).
class CopyRowParser {
 public:
  // `data` must stay valid until the next Feed: rows handed out may point into it.
  void Feed(std::string_view data);
  // The next complete row, valid until the next Feed. False when more input is needed (or the
  // trailer was read: finished()). Throws std::runtime_error on malformed input.
  bool Next(std::string_view* row);
  bool finished() const { return finished_; }

 private:
  std::string_view input_;  // what is left to parse: in the caller's data or in buffer_
  std::string buffer_;      // the unparsed rest of earlier input, when a row spans Feeds
  bool buffered_ = false;   // input_ points into buffer_
  bool header_done_ = false;
  bool finished_ = false;
};

class Copier {
 public:
  // Rows of one table, back to back in one buffer (one allocation per batch, not per row).
  struct Batch {
    std::size_t table = 0;
    std::string data;                 // serialized dblog.v1.Row each, concatenated
    std::vector<std::uint32_t> ends;  // row i is data[ends[i-1], ends[i]) (ends[-1] = 0)
    std::size_t size() const { return ends.size(); }
    std::size_t bytes() const { return data.size(); }
    // What it holds in memory (the queue's bound counts this, not just the rows' bytes).
    std::size_t footprint() const {
      return data.capacity() + ends.capacity() * sizeof(std::uint32_t);
    }
    void Add(std::string_view row) {
      data.append(row.data(), row.size());
      ends.push_back(static_cast<std::uint32_t>(data.size()));
    }
    std::vector<std::string_view> Rows() const;
  };

  // notify is called from worker threads whenever the queue goes from empty to non-empty and
  // when the copy finishes or fails; it must only post work to the io thread.
  // Reader::kExtension: COPY (SELECT dblog.encode_row(t.*) ...) TO STDOUT (FORMAT binary), each
  // row encoded by the extension. Reader::kCatalog (pgoutput mode): COPY <table> (<columns>) TO
  // STDOUT in text format under pgoutput::kOutputSettings, each row through
  // pgoutput::RowFromText: the table form of COPY reads the table itself and refuses anything
  // else under its name (a view swapped in), runs no query and so no code of the table's
  // owner (no planner, no index expression), and its text is what pgoutput sends; the table is
  // locked by name and then checked against the catalog as it is now (its oid, its storage, its
  // columns), so neither the name nor the columns can move during the copy.
  Copier(std::string conninfo, std::string snapshot, std::vector<Table> tables,
         std::vector<Task> tasks, int workers, std::size_t max_queue_bytes,
         std::function<void()> notify, Reader reader = Reader::kExtension);
  ~Copier();  // cancels and joins

  void Start();
  // Blocks until every worker has imported the snapshot (true) or one failed (false).
  bool WaitImported();

  std::optional<Batch> Pop();  // never blocks
  bool done() const;           // every worker finished and the queue is empty
  std::optional<std::string> error() const;
  void Cancel();

  const std::vector<Table>& tables() const { return tables_; }
  std::uint64_t rows_copied(std::size_t table) const { return copied_[table].load(); }
  std::uint64_t bytes_copied() const { return bytes_copied_.load(); }

 private:
  // A worker's thread: imports the snapshot, then copies tasks until none is left.
  void Work(int worker);
  // Opens the worker's connection inside the exported snapshot and counts it imported.
  pg::Connection ImportSnapshot(int worker);
  // What a worker's tasks share beyond its connection inside the snapshot.
  struct WorkerState {
    int worker = 0;
    // Reader::kCatalog: reads the catalog as it is now, outside the snapshot (opened when
    // first needed, again when it broke).
    std::optional<pg::Connection> now;
    // Reader::kCatalog: the tables this worker locked by name and found to be the planned ones:
    // its transaction may hold locks on these (and their TOAST) only.
    std::vector<std::uint32_t> verified;
  };
  // Copies one task's rows into batches pushed onto the queue (throws; "cancelled" too).
  // `conn` is inside the snapshot.
  void CopyTask(pg::Connection& conn, WorkerState& state, const Task& task);
  // Reader::kCatalog: state.now, opened when there is none or it broke.
  pg::Connection& CatalogNow(WorkerState& state);
  void Push(Batch batch);
  // Counts a task's batch as copied, queues it and leaves an empty one of the same table.
  void PushCopied(Batch& batch);
  bool NextTask(Task* task);
  void Fail(const std::string& message);

  const std::string conninfo_;
  const std::string snapshot_;
  const std::vector<Table> tables_;
  const std::size_t max_queue_bytes_;
  const std::function<void()> notify_;
  const int workers_;
  const Reader reader_;
  // Reader::kCatalog's COPY of one task (CopyTask's other half).
  void CopyTextTask(pg::Connection& conn, WorkerState& state, const Task& task);

  mutable std::mutex mutex_;
  std::condition_variable space_;     // queue has room / cancelled
  std::condition_variable imported_;  // a worker imported or failed
  std::deque<Task> tasks_;
  std::deque<Batch> queue_;
  std::size_t queued_bytes_ = 0;
  int imported_count_ = 0;
  int running_ = 0;
  bool cancelled_ = false;
  std::optional<std::string> error_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> copied_;
  std::atomic<std::uint64_t> bytes_copied_{0};
  std::vector<std::thread> threads_;
};

}  // namespace dblog::bootstrap
