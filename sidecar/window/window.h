// sidecar/window/window.h: DBLog watermark windows (repairs), as pure logic.
//
// A window is one chunk: dblogd writes a low watermark, reads the chunk in its own transaction
// (recording that transaction's pg_current_snapshot()), and writes a high watermark. While the
// stream moves from low to high, log events pass through as usual and every chunk row whose key
// they touch is dropped: the log wins (paper, 6.2 window-discard). At the high watermark the
// surviving rows are emitted.
//
// PostgreSQL's visibility order is not its WAL order: a transaction can have its commit record
// before the low watermark and still be invisible to the chunk's snapshot (it had not left the
// proc array yet). Its events came out of the log before the window opened, and a plain window
// would emit the stale chunk row after them. So the window is widened: keys written by
// transactions the snapshot does not see, committed at or before the high watermark, are
// dropped too, wherever they were in the log. TransactionLog remembers recently streamed
// transactions' keys for that; when it cannot answer (a transaction the snapshot does not see
// has been forgotten), the window fails closed: the chunk is read again under a new window.
//
// A dropped key's log events may not carry every column: an unchanged TOASTed value is marked
// "keep yours", so a sink whose value was damaged keeps it. A column that none of the key's
// events in the window, nor any event of a transaction the snapshot does not see, carried was
// not changed by any transaction the chunk's snapshot misses: the chunk's value of it is the
// source's at the high watermark. Such columns come back as a fill (docs/correctness.md, W7).
//
// Owns: reconciliation. Does not read, write or emit anything (consumer/ drives it; emit/ sends).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dblog::window {

// pg_current_snapshot(): "xmin:xmax:xip,xip,..." with 64-bit xids.
struct Snapshot {
  std::uint64_t xmin = 0;
  std::uint64_t xmax = 0;
  std::vector<std::uint64_t> xip;  // sorted

  static Snapshot Parse(std::string_view text);  // throws std::invalid_argument
  // Whether a committed transaction's effects are visible to this snapshot.
  bool Sees(std::uint64_t xid) const;
};

// Keys written by recently streamed transactions, in commit order, within a memory budget.
class TransactionLog {
 public:
  explicit TransactionLog(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  void Begin(std::uint64_t xid, std::uint64_t commit_lsn);
  // Between Begin and Commit; an empty key means the whole relation (TRUNCATE). `unchanged`:
  // the columns (indexes into the row) the event did not carry (unchanged TOAST), sorted.
  void Touch(std::uint32_t relation, std::string key, std::vector<int> unchanged = {});
  void Commit();
  // Transactions with xid below `xid` were streamed before this log existed (dblogd started):
  // treat them as forgotten.
  void ForgetBelow(std::uint64_t xid);
  // `xid` is at or below the xmin of every snapshot a window will still be closed with (a
  // snapshot's xmin taken after every open window's, bounded by theirs): such a snapshot sees
  // every transaction below it, so their keys are never asked for. They are dropped and count
  // as forgotten (ForgetBelow), so a snapshot below `xid`, were there one, fails closed instead
  // of missing them. Keeps the log near empty while no transaction stays open for long.
  void PruneBelow(std::uint64_t xid);

  // Adds to `keys` the keys of `relation` written by transactions that `snapshot` does not see
  // and that committed at or before `up_to_lsn`. Returns false when that set cannot be known:
  // a transaction the snapshot might not see was forgotten to stay within the budget.
  bool InvisibleKeys(const Snapshot& snapshot, std::uint32_t relation, std::uint64_t up_to_lsn,
                     std::set<std::string>* keys) const;
  // The same keys, each with the columns that none of those transactions' events of it carried
  // (intersected into what `keys` already holds for it).
  bool InvisibleKeys(const Snapshot& snapshot, std::uint32_t relation, std::uint64_t up_to_lsn,
                     std::map<std::string, std::vector<int>>* keys) const;

  std::size_t bytes() const { return bytes_; }
  std::size_t transactions() const { return txns_.size(); }
  // Transactions dropped so far: by PruneBelow, and forgotten to stay within the budget.
  std::uint64_t pruned() const { return pruned_; }
  std::uint64_t forgotten() const { return forgotten_; }

 private:
  struct KeyTouch {
    std::uint32_t relation = 0;
    std::string key;
    std::vector<int> unchanged;
  };
  struct Txn {
    std::uint64_t xid = 0;
    std::uint64_t commit_lsn = 0;
    std::vector<KeyTouch> keys;
    std::size_t bytes = 0;
  };
  void Trim();

  std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  std::deque<Txn> txns_;
  Txn open_;
  bool in_txn_ = false;
  std::uint64_t max_forgotten_xid_ = 0;
  bool forgot_any_ = false;
  std::uint64_t pruned_ = 0;
  std::uint64_t forgotten_ = 0;
};

// One chunk's reconciliation.
class Window {
 public:
  struct Chunk {
    Snapshot snapshot;
    std::vector<std::pair<std::string, std::string>> rows;  // (key bytes, row bytes) as read
    std::vector<std::string> asked_keys;                    // key-list chunks only
  };
  // A kept key's chunk row and the columns (sorted indexes) whose chunk values are the
  // source's at the high watermark although no event the sink applied carried them.
  struct Fill {
    std::string row;
    std::vector<int> columns;
  };
  struct Outcome {
    bool redo = false;                // fail closed: read this chunk again under a new window
    std::string reason;
    std::vector<std::string> rows;     // surviving row bytes, in chunk order
    std::vector<std::string> deletes;  // key-list chunks: asked keys the source does not have
    std::vector<std::string> kept;     // keys the log carried during the window (or widened)
    std::vector<Fill> fills;           // kept keys with columns no such event carried
  };

  Window(std::string id, std::uint32_t relation) : id_(std::move(id)), relation_(relation) {}

  const std::string& id() const { return id_; }
  std::uint32_t relation() const { return relation_; }
  bool opened() const { return opened_; }

  void Open() { opened_ = true; }  // the low watermark came out of the log
  // A log event between the low and the high watermark; `unchanged` as TransactionLog::Touch.
  void Touch(std::uint32_t relation, const std::string& key, const std::vector<int>& unchanged = {});
  // At the high watermark. widen=false is the plain DBLog window (for tests only). The
  // surviving rows are moved out of `chunk` (pass it moved when it is not needed after).
  Outcome Close(Chunk chunk, const TransactionLog& log, std::uint64_t high_lsn,
                bool widen = true) const;

 private:
  std::string id_;
  std::uint32_t relation_;
  bool opened_ = false;
  // key -> the columns none of its events in the window carried
  std::map<std::string, std::vector<int>> touched_;
};

// Repair pacing: when the next window may start, so that a window started at `started` that
// read `rows` rows keeps the repair at or below `rows_per_second` on average (0: no limit, the
// next window may start at once). Time is the caller's (any clock's) in nanoseconds.
std::int64_t PacedNextWindowNs(std::int64_t started_ns, std::uint64_t rows,
                               std::uint64_t rows_per_second);

}  // namespace dblog::window
