// tests/cpp/window/window_exhaustive_test.cc: every interleaving of a repair window, up to a
// bound, checked against the contract (issue 28).
//
// A depth-first search enumerates every history of source events up to DBLOG_WINDOW_BOUND
// events: transactions writing or deleting keys inside and outside the chunk, each begun
// (its xid assigned), committed in the WAL and visible to new snapshots at separate moments, as
// in PostgreSQL, whose commit record can be decoded before the transaction leaves the proc
// array; dblogd's low watermark, chunk read and high watermark; crashes (a source reconnect, a
// dblogd restart) at every decoding position. Each history drives the real window library the
// way consumer/repairs.cc does (a TransactionLog fed every decoded transaction, a Window opened
// at the low watermark, touched by the changes decoded while it is open, closed at the high one
// with the chunk read under its Snapshot) and a model consumer applies the log and the chunks.
// Every history is then finished the same way (the window in progress completed, every
// transaction ended, the log decoded, one more window on the quiet source if the chunk is still
// to be delivered) and checked:
//   - no copied row, and no delete, differs from the source's state at the high watermark that
//     carries it: a copy never overwrites a newer change of its key, nor resurrects a delete;
//   - from the first chunk on, the consumer equals the source at every frontier, up to the end;
//     keys outside the chunk equal it throughout.
// The oracle is the source model (its committed transactions in commit order); nothing of the
// reconciliation is re-implemented here.
//
// Histories that reach the same state (the source, what dblogd fed the library, the consumer)
// have the same futures, so each state is explored once per remaining budget and its count of
// histories reused: every history up to the bound is checked, each distinct state once.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "window/window.h"

namespace dblog::window {
namespace {

constexpr std::uint32_t kRel = 42;
// Keys 0 and 1 are the chunk's (its range [k0, k1], or its asked keys); key 2 is outside it.
constexpr int kKeys = 3;
constexpr int kChunkKeys = 2;
constexpr int kAbsent = INT_MIN;
constexpr int kGarbage = 999;  // what the damaged sink holds for a chunk key
// With toast (issue 28, 1b) a row is (version, t): t a TOASTed column that an UPDATE may leave
// unchanged, whose event then does not carry it ("keep yours"). A value is version * 1000 + t;
// a write that carries t sets t to its own version. The damaged sink's t is garbage too.
constexpr int kGarbageToast = 999 * 1000 + 999;
int ToastOf(int v) { return v % 1000; }

using State = std::array<int, kKeys>;  // key -> value (version * 1000 + t), or kAbsent

std::string KeyBytes(int k) { return "k" + std::to_string(k); }
std::string RowBytes(int k, int v) { return std::to_string(k) + "=" + std::to_string(v); }

std::string StateText(const State& s) {
  std::string out = "{";
  for (int k = 0; k < kKeys; ++k) {
    if (s[k] == kAbsent) continue;
    if (out.size() > 1) out += ", ";
    out += "k" + std::to_string(k) + "=" + std::to_string(s[k]);
  }
  return out + "}";
}

std::string SnapshotText(const Snapshot& s) {
  std::string out = std::to_string(s.xmin) + ":" + std::to_string(s.xmax) + ":";
  for (std::size_t i = 0; i < s.xip.size(); ++i) out += (i ? "," : "") + std::to_string(s.xip[i]);
  return out;
}

struct Bounds {
  int max_events = 5;  // DBLOG_WINDOW_BOUND: about 5 s (RelWithDebInfo); each +1 costs ~5x
  int max_txns = 3;
  int max_crashes = 1;
  int max_windows = 2;  // windows the history starts (the finish may add one)
};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

Bounds BoundsFromEnv() {
  Bounds b;
  b.max_events = EnvInt("DBLOG_WINDOW_BOUND", b.max_events);
  b.max_txns = EnvInt("DBLOG_WINDOW_TXNS", b.max_txns);
  b.max_crashes = EnvInt("DBLOG_WINDOW_CRASHES", b.max_crashes);
  b.max_windows = EnvInt("DBLOG_WINDOW_WINDOWS", b.max_windows);
  return b;
}

// ---- the source ----------------------------------------------------------------------------

struct Txn {
  enum class Phase : char { kRunning, kInWal, kVisible, kAborted };
  std::uint64_t xid = 0;
  int key = 0;
  bool del = false;  // a DELETE of the key, else an INSERT or UPDATE to this txn's version
  bool keep = false;  // an UPDATE leaving t unchanged (an INSERT carries it all the same)
  bool carried = true;  // set at commit: its event carries t (not an UPDATE keeping it)
  Phase phase = Phase::kRunning;
  int version() const { return static_cast<int>(xid); }
  // the key's value after this write, given the one before
  int Written(int before) const {
    if (del) return kAbsent;
    return version() * 1000 + (carried || before == kAbsent ? version() : ToastOf(before));
  }
};

struct LogEntry {
  enum class Kind : char { kTxn, kLow, kHigh };
  Kind kind = Kind::kTxn;
  int txn = -1;     // kTxn: index into Source::txns
  int window = -1;  // markers: the window's number
  std::uint64_t xid = 0;
  std::uint64_t lsn = 0;
};

// PostgreSQL as far as a window can tell: xids in order of assignment, the WAL in commit order,
// visibility in proc-array order. A snapshot's xmax is one past the latest completed xid and its
// xip the running xids below it (GetSnapshotData), so a transaction can be in the WAL and still
// invisible, in xip or at or above xmax.
struct Source {
  State initial{};
  std::vector<Txn> txns;
  std::vector<LogEntry> log;
  State head{};  // the state after the whole log
  std::uint64_t next_xid = 100;
  std::uint64_t latest_completed = 99;  // everything before the history has ended

  std::uint64_t NextLsn() const { return 10 * (log.size() + 1); }
  void Complete(std::uint64_t xid) { latest_completed = std::max(latest_completed, xid); }

  // A marker is its own transaction, committed and visible at once (dblogd's session waits).
  void WriteMarker(LogEntry::Kind kind, int window) {
    log.push_back({kind, -1, window, next_xid++, NextLsn()});
    Complete(log.back().xid);
  }

  Snapshot TakeSnapshot() const {
    Snapshot s;
    s.xmax = latest_completed + 1;
    for (const Txn& t : txns)
      if ((t.phase == Txn::Phase::kRunning || t.phase == Txn::Phase::kInWal) && t.xid < s.xmax)
        s.xip.push_back(t.xid);
    std::sort(s.xip.begin(), s.xip.end());
    s.xmin = s.xip.empty() ? s.xmax : s.xip.front();
    return s;
  }

  static void Apply(State& s, const Txn& t) { s[t.key] = t.Written(s[t.key]); }

  const Txn& TxnOf(const LogEntry& e) const { return txns[static_cast<std::size_t>(e.txn)]; }

  // The state after the log's first n entries: the source at that frontier.
  State AtLog(std::size_t n) const {
    State s = initial;
    for (std::size_t i = 0; i < n; ++i)
      if (log[i].kind == LogEntry::Kind::kTxn) Apply(s, TxnOf(log[i]));
    return s;
  }

  // What a snapshot taken now reads: the visible transactions in commit order (two writers of
  // a key are in the same order both ways: the second waits for the first's row lock, released
  // after the first left the proc array).
  State Visible() const {
    State s = initial;
    for (const LogEntry& e : log)
      if (e.kind == LogEntry::Kind::kTxn && TxnOf(e).phase == Txn::Phase::kVisible)
        Apply(s, TxnOf(e));
    return s;
  }

  // Whether txn i can commit now: its row lock is free (no other writer of its key committed
  // and still in the proc array), and a DELETE finds its row (else it wrote nothing).
  bool CanCommit(std::size_t i) const {
    const Txn& t = txns[i];
    for (std::size_t j = 0; j < txns.size(); ++j)
      if (j != i && txns[j].key == t.key && txns[j].phase == Txn::Phase::kInWal) return false;
    return !t.del || head[t.key] != kAbsent;
  }

  void Commit(std::size_t i) {
    txns[i].phase = Txn::Phase::kInWal;
    txns[i].carried = !txns[i].keep || head[txns[i].key] == kAbsent;
    log.push_back({LogEntry::Kind::kTxn, static_cast<int>(i), -1, txns[i].xid, NextLsn()});
    Apply(head, txns[i]);
  }

  void MakeVisible(std::size_t i) {
    txns[i].phase = Txn::Phase::kVisible;
    Complete(txns[i].xid);
  }
};

// Histories (finished states) in which a redone window dropped the window read ahead after
// it: WindowsInARowKeepTheContract checks that its bound reaches them.
std::uint64_t read_ahead_dropped_seen = 0;

// ---- the consumer --------------------------------------------------------------------------

struct Consumer {
  State sink{};
  State expected{};         // the source at the consumer's frontier
  std::size_t applied = 0;  // log entries it has (a resent prefix is dropped by the emitter)
  std::array<bool, kKeys> repaired{};  // a chunk of this key reached it
};

// ---- dblogd, as consumer/repairs.cc drives the window library ------------------------------

// What the reader (consumer/window_reader.cc, its own thread and session) is doing for the
// newest window: nothing, or it wrote the low watermark and reads the chunk next, or it read
// the chunk (handed over) and writes the high watermark next.
enum class Phase : char { kIdle, kLowWritten, kRead };

// The bound Pipeline::StartStream gives TransactionLog::ForgetBelow when a stream starts.
enum class StreamStart {
  kSnapshotXmax,  // pg_snapshot_xmax(pg_current_snapshot()): what dblogd did (a bug)
  kNextXid,       // the next xid to be assigned (Bookkeeping::NextXid): what dblogd does
};

// A window of Repairs::windows_: made, and known to the stream, before its low watermark is
// written (Repairs::StartWindow), so that the stream opens it wherever it is when `lo` comes.
struct Win {
  Win(int no, int chunk) : no(no), chunk(chunk), window("w" + std::to_string(no), kRel) {}
  int no;     // its markers' number
  int chunk;  // which of the request's chunks it reads
  Window window;
  std::string feed;                   // every call made on window
  std::optional<Window::Chunk> read;  // handed over by the reader before it writes `hi`
};

struct Dblogd {
  TransactionLog txlog{1 << 20};
  std::string txlog_feed;   // every call made on txlog: its state, for telling states apart
  std::size_t decoded = 0;  // log entries this stream processed
  std::uint64_t current_commit_lsn = 0;
  // The front is the window the stream closes next; the one behind it, if any, is read ahead
  // (windows in a row: one ahead at most, its `lo` written after the front's `hi`).
  std::vector<Win> wins;
  Phase reader = Phase::kIdle;  // on the back window
  int next_chunk = 0;           // the request's progress: its first chunk not emitted yet
  std::optional<std::size_t> last_high;  // the high watermark of the last chunk emitted
  int last_chunk = -1;                   // that chunk
  std::optional<std::size_t> lost_high;  // kRestartLost: the first chunk emitted while
  int lost_chunk = -1;                   // catching up (never reached the consumer)
  int windows = 0;
  std::uint64_t pruned_below = 0;  // the highest horizon this key log was pruned by
};

enum class ChunkKind : char { kRange, kKeys };

struct Options {
  ChunkKind kind = ChunkKind::kRange;
  bool widen = true;  // false: the plain DBLog window (--unsafe-plain-windows)
  bool toast = false;  // updates may leave t unchanged; the sink's t starts damaged
  bool fills = true;   // false: the consumer never gets the window's fills (a planted bug)
  StreamStart stream_start = StreamStart::kSnapshotXmax;
  // 1: one chunk [k0, k1]. 2: the request in two chunks, [k0] then [k1], the second read ahead
  // while the first one's high watermark is still to be decoded (windows in a row).
  int chunks = 1;
  // false: a redone window leaves the window read ahead behind it in place (a planted bug:
  // dblogd drops it, Repairs::CloseWindow)
  bool drop_ahead_on_redo = true;
  // The key log pruned by the horizon (Repairs::PruneKeyLog) after every move and every
  // decoded transaction: at every moment its timer could fire.
  bool prune = true;
  // false: pruned while a chunk is being read too (a planted bug: dblogd waits for the read)
  bool prune_waits_for_reads = true;
  // false: the horizon not bounded by the snapshots of the windows in flight (a planted bug)
  bool prune_bounded_by_windows = true;
};

std::vector<int> ChunkKeys(const Options& o, int chunk) {
  if (o.chunks == 1) return {0, 1};
  return {chunk};
}

enum class Crash : char {
  kReconnect,        // source connection lost: the windows are abandoned, the key log stays
  kReconnectReplay,  // the same, the slot confirmed at the history's start: all decoded again
  kRestart,          // dblogd restarts: a new key log, ForgetBelow at the stream's start
  kRestartRequeue,   // a restart before the last chunk's acknowledgement: it is read again
  kRestartLost,      // a restart before the chunk emitted while catching up reached the sink
};

struct Move {
  enum class Kind : char {
    kRun,           // a transaction begins, commits and becomes visible
    kRunInvisible,  // begins and commits, not visible yet
    kBegin,         // begins (its xid assigned)
    kCommitVisible,
    kCommit,  // in the WAL, not visible yet
    kVisible,
    kLow,
    kRead,
    kHigh,
    kDecode,  // the stream decodes past the front window's `hi` (see ReadAheadPossible)
    kCrash,
  };
  Kind kind;
  int key = 0;  // the new transaction's
  bool del = false;
  int txn = -1;  // kCommit, kCommitVisible, kVisible
  Crash crash = Crash::kReconnect;
  std::size_t decode_to = 0;  // kCrash: how far dblogd had decoded when it went
  bool keep = false;          // the new transaction leaves t unchanged
};

struct World {
  Options options;
  Source source;
  Dblogd dblogd;
  Consumer consumer;
  int crashes = 0;
  int began = -1;  // the last move began this txn: committing it next is spelled kRun...
  int committed =
      -1;  // the last move committed this txn invisibly: kVisible next is kCommitVisible
  std::string failure;  // the first violation, empty if none
  std::ostringstream* narrate = nullptr;
};

#define SAY(w, text)                                         \
  do {                                                       \
    if ((w).narrate) *(w).narrate << "    " << text << "\n"; \
  } while (0)

void Fail(World& w, const std::string& what) {
  if (w.failure.empty()) w.failure = what;
}

std::string Value(int v) { return v == kAbsent ? "absent" : std::to_string(v); }

void CheckFrontier(World& w, const State& source, const char* where) {
  for (int k = 0; k < kKeys; ++k) {
    if (k < kChunkKeys && !w.consumer.repaired[k]) continue;  // damaged until a chunk repairs it
    if (w.consumer.sink[k] != source[k])
      Fail(w, std::string(where) + ": the consumer has " + StateText(w.consumer.sink) +
                  ", the source " + StateText(source));
  }
}

// The chunk's rows, absent-key deletes and ChunkEnd, applied at the high watermark log[h].
void ApplyChunk(World& w, const Window::Outcome& out, std::size_t h, int chunk) {
  if (w.consumer.applied != h) Fail(w, "model error: a chunk off the consumer's frontier");
  const State& at = w.consumer.expected;
  State& sink = w.consumer.sink;
  std::set<int> survivors;
  for (const std::string& row : out.rows) {
    const int k = std::stoi(row.substr(0, row.find('=')));
    const int v = std::stoi(row.substr(row.find('=') + 1));
    if (at[k] != v)
      Fail(w, "copied row k" + std::to_string(k) + "=" + std::to_string(v) +
                  " emitted at hi, "
                  "where the log has k" +
                  std::to_string(k) + " " + Value(at[k]) +
                  ": a stale copy overwrote a newer change");
    sink[k] = v;
    survivors.insert(k);
  }
  // fills: the chunk's t of a kept key whose events in the window (and the invisible
  // transactions') all left t unchanged: it must be the source's at hi
  for (const Window::Fill& fill : w.options.fills ? out.fills : std::vector<Window::Fill>{}) {
    const int k = std::stoi(fill.row.substr(0, fill.row.find('=')));
    const int v = std::stoi(fill.row.substr(fill.row.find('=') + 1));
    if (fill.columns != std::vector<int>{1})
      Fail(w, "a fill of k" + std::to_string(k) + " of other columns than t");
    if (at[k] == kAbsent || ToastOf(at[k]) != ToastOf(v))
      Fail(w, "fill of k" + std::to_string(k) + " with t " + std::to_string(ToastOf(v)) +
                  " at hi, where the log has k" + std::to_string(k) + " " + Value(at[k]) +
                  ": a stale value overwrote a newer one");
    if (sink[k] != kAbsent) sink[k] = sink[k] / 1000 * 1000 + ToastOf(v);
  }
  for (const std::string& key : out.deletes) {
    const int k = std::stoi(key.substr(1));
    if (at[k] != kAbsent)
      Fail(w, "absent-key delete of k" + std::to_string(k) +
                  " emitted at hi, where the log "
                  "has k" +
                  std::to_string(k) + " " + Value(at[k]));
    sink[k] = kAbsent;
  }
  const std::vector<int> keys = ChunkKeys(w.options, chunk);
  if (w.options.kind == ChunkKind::kRange) {
    // ChunkEnd: the consumer deletes every row in the bounds neither sent nor kept.
    const std::set<std::string> kept(out.kept.begin(), out.kept.end());
    for (int k : keys) {
      if (sink[k] == kAbsent || survivors.count(k) || kept.count(KeyBytes(k))) continue;
      if (at[k] != kAbsent)
        Fail(w, "ChunkEnd deleted k" + std::to_string(k) + ", where the log has k" +
                    std::to_string(k) + " " + Value(at[k]));
      sink[k] = kAbsent;
    }
  }
  for (int k : keys) w.consumer.repaired[k] = true;
  CheckFrontier(w, at, "right after the chunk");
}

void FeedBegin(Dblogd& d, const LogEntry& e) {
  d.txlog.Begin(e.xid, e.lsn);
  d.txlog_feed += "B" + std::to_string(e.xid) + "," + std::to_string(e.lsn);
}

// Repairs::PruneKeyLog: not while the reader has a window between its `lo` and its `hi`
// (reading_); the horizon is the xmin of a snapshot taken now, bounded by the snapshot of
// every window in flight (all read then).
void PruneKeyLog(World& w) {
  Dblogd& d = w.dblogd;
  if (!w.options.prune) return;
  std::uint64_t horizon = w.source.TakeSnapshot().xmin;
  if (w.options.prune_waits_for_reads && d.reader != Phase::kIdle) return;
  // dblogd's thread knows a chunk's snapshot once the reader is done with it (OnChunkRead,
  // after `hi`): the back window's, while the reader still works on it, it does not
  if (w.options.prune_bounded_by_windows)
    for (std::size_t i = 0; i < d.wins.size(); ++i)
      if (d.wins[i].read && (i + 1 < d.wins.size() || d.reader == Phase::kIdle))
        horizon = std::min(horizon, d.wins[i].read->snapshot.xmin);
  const std::uint64_t pruned = d.txlog.pruned();
  d.txlog.PruneBelow(horizon);
  if (d.txlog.pruned() == pruned && horizon <= d.pruned_below) return;  // changed nothing
  d.pruned_below = std::max(d.pruned_below, horizon);
  d.txlog_feed += "P" + std::to_string(horizon);
  SAY(w, "  the key log pruned below " << horizon);
}

// Repairs::CloseWindow at the high watermark log[h] of the front window.
void CloseWindow(World& w, std::size_t h, bool lose) {
  Dblogd& d = w.dblogd;
  Win& front = d.wins.front();
  if (!front.read) {  // the reader hands the chunk over before it writes `hi`
    Fail(w, "model error: a high watermark before its chunk");
    return;
  }
  // The pruning's argument: no window closes with a snapshot below a horizon its key log was
  // pruned by (the window would fail closed for nothing, or, without ForgetBelow, miss keys).
  if (front.read->snapshot.xmin < d.pruned_below)
    Fail(w, "window " + std::to_string(front.no) + "'s snapshot " +
                SnapshotText(front.read->snapshot) + " is below the key log's pruning horizon " +
                std::to_string(d.pruned_below));
  const Window::Outcome out =
      front.window.Close(*front.read, d.txlog, d.current_commit_lsn, w.options.widen);
  const int no = front.no, chunk = front.chunk;
  if (out.redo) {
    SAY(w, "  window " << no << " fails closed: redo (" << out.reason << ")"
                       << (d.wins.size() < 2                 ? ""
                           : w.options.drop_ahead_on_redo ? ", the window read ahead dropped"
                                                          : ", the window read ahead kept"));
    if (w.options.drop_ahead_on_redo) {
      // the one read ahead goes too (its markers are ignored); a read still under way is
      // dropped when it ends (Repairs::OnChunkRead): the reader is free again
      if (d.wins.size() > 1) {
        d.reader = Phase::kIdle;
        if (!w.narrate) ++read_ahead_dropped_seen;
      }
      d.wins.clear();
    } else {
      d.wins.erase(d.wins.begin());
    }
    return;
  }
  if (w.narrate) {
    auto list = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
      return "[" + s + "]";
    };
    SAY(w, "  window " << no << " closes: rows " << list(out.rows) << ", deletes "
                       << list(out.deletes) << ", kept " << list(out.kept)
                       << (lose ? " (never reaches the consumer)" : ""));
  }
  d.wins.erase(d.wins.begin());
  d.next_chunk = chunk + 1;
  d.last_high = h;
  d.last_chunk = chunk;
  if (lose && !d.lost_high) {
    d.lost_high = h;
    d.lost_chunk = chunk;
  }
  if (!lose) ApplyChunk(w, out, h, chunk);
}

// What Repairs does with one decoded transaction (OnBegin; RecordKeys or OnWatermark;
// OnCommitted), and what the consumer gets of it.
void DecodeEntry(World& w, std::size_t i, bool lose) {
  Dblogd& d = w.dblogd;
  const LogEntry& e = w.source.log[i];
  FeedBegin(d, e);
  d.current_commit_lsn = e.lsn;
  const bool fresh = i >= w.consumer.applied;
  // the front window's markers only: the next one's come after the front's `hi`
  Win* front = d.wins.empty() ? nullptr : &d.wins.front();
  switch (e.kind) {
    case LogEntry::Kind::kTxn: {
      const Txn& t = w.source.TxnOf(e);
      // Repairs::RecordKeys: an event that did not carry t names it among the unchanged
      const std::vector<int> unchanged = t.carried ? std::vector<int>{} : std::vector<int>{1};
      d.txlog.Touch(kRel, KeyBytes(t.key), unchanged);
      d.txlog_feed += (t.carried ? "T" : "U") + std::to_string(t.key);
      if (front && front->window.opened()) {
        front->window.Touch(kRel, KeyBytes(t.key), unchanged);
        front->feed += (t.carried ? "T" : "U") + std::to_string(t.key);
      }
      if (fresh) {
        // the sink keeps its own t for an event that did not carry it (a row it lacks stays
        // absent: nothing is invented)
        int& sunk = w.consumer.sink[t.key];
        if (t.carried || sunk != kAbsent) sunk = t.Written(sunk);
        Source::Apply(w.consumer.expected, t);
      }
      break;
    }
    case LogEntry::Kind::kLow:
      if (front && e.window == front->no) {
        if (front->window.opened()) Fail(w, "model error: a window opened twice");
        front->window.Open();
        front->feed += "O";
      }
      break;
    case LogEntry::Kind::kHigh:
      if (front && e.window == front->no && front->window.opened()) CloseWindow(w, i, lose);
      break;
  }
  d.txlog.Commit();
  d.txlog_feed += "C";
  PruneKeyLog(w);
  if (fresh) {
    w.consumer.applied = i + 1;
    CheckFrontier(w, w.consumer.expected, "in the log");
  }
}

void DecodeTo(World& w, std::size_t n, bool lose = false) {
  for (std::size_t& i = w.dblogd.decoded; i < n; ++i) DecodeEntry(w, i, lose);
}

// Whether the reader may start a window now: the front one when there is none, else the next
// chunk's, read ahead, once the back window was read and its `hi` written; one ahead at most.
bool CanStartWindow(const World& w, const Bounds& b) {
  const Dblogd& d = w.dblogd;
  if (d.reader != Phase::kIdle || d.windows >= b.max_windows || d.wins.size() >= 2) return false;
  const int chunk = d.wins.empty() ? d.next_chunk : d.wins.back().chunk + 1;
  return chunk < w.options.chunks;
}

// Where the front window's `hi` is in the log when the stream has yet to decode it.
std::optional<std::size_t> UndecodedFrontHigh(const World& w) {
  const Dblogd& d = w.dblogd;
  if (d.wins.empty()) return std::nullopt;
  for (std::size_t i = d.decoded; i < w.source.log.size(); ++i)
    if (w.source.log[i].kind == LogEntry::Kind::kHigh &&
        w.source.log[i].window == d.wins.front().no)
      return i;
  return std::nullopt;
}

// When a window could be read ahead before the stream reaches the front window's `hi`, the
// order of the two is the history's choice (kDecode, or kLow first); else it changes no window.
bool ReadAheadPossible(const World& w, const Bounds& b) {
  return w.dblogd.wins.size() == 1 && CanStartWindow(w, b) && UndecodedFrontHigh(w).has_value();
}

void WriteLow(World& w) {
  Dblogd& d = w.dblogd;
  const int chunk = d.wins.empty() ? d.next_chunk : d.wins.back().chunk + 1;
  d.wins.emplace_back(++d.windows, chunk);
  w.source.WriteMarker(LogEntry::Kind::kLow, d.windows);
  d.reader = Phase::kLowWritten;
  SAY(w, "lo:" << d.windows << " (xid " << w.source.log.back().xid << ", lsn "
               << w.source.log.back().lsn << ")"
               << (d.wins.size() > 1 ? ", read ahead" : "")
               << (w.options.chunks > 1 ? ", chunk " + std::to_string(chunk) : ""));
}

// The chunk statement under REPEATABLE READ, with its pg_current_snapshot(), handed over.
void ReadChunk(World& w) {
  Dblogd& d = w.dblogd;
  Win& back = d.wins.back();
  const Snapshot s = w.source.TakeSnapshot();
  const State seen = w.source.Visible();
  for (const Txn& t : w.source.txns)  // the model's own consistency
    if (t.phase != Txn::Phase::kAborted && (t.phase == Txn::Phase::kVisible) != s.Sees(t.xid))
      Fail(w, "model error: snapshot " + SnapshotText(s) + " and xid " + std::to_string(t.xid));
  Window::Chunk chunk{s, {}, {}};
  std::string text;
  for (int k : ChunkKeys(w.options, back.chunk)) {
    if (seen[k] != kAbsent) chunk.rows.push_back({KeyBytes(k), RowBytes(k, seen[k])});
    if (w.options.kind == ChunkKind::kKeys) chunk.asked_keys.push_back(KeyBytes(k));
    text += ", k" + std::to_string(k) + " " + Value(seen[k]);
  }
  back.read = std::move(chunk);
  d.reader = Phase::kRead;
  SAY(w, "window " << back.no << "'s chunk read under snapshot " << SnapshotText(s) << text);
}

void WriteHigh(World& w) {
  Dblogd& d = w.dblogd;
  w.source.WriteMarker(LogEntry::Kind::kHigh, d.wins.back().no);
  d.reader = Phase::kIdle;
  SAY(w, "hi:" << d.wins.back().no << " (xid " << w.source.log.back().xid << ", lsn "
               << w.source.log.back().lsn << ")");
}

const char* CrashName(Crash c) {
  switch (c) {
    case Crash::kReconnect:
      return "source reconnect";
    case Crash::kReconnectReplay:
      return "source reconnect, the slot replaying the whole log";
    case Crash::kRestart:
      return "dblogd restart";
    case Crash::kRestartRequeue:
      return "dblogd restart before the chunk was acknowledged";
    case Crash::kRestartLost:
      return "dblogd restart, the chunk emitted before it lost";
  }
  return "";
}

// Repairs::OnSourceReconnect, or a new dblogd's Pipeline::StartStream, after dblogd decoded
// m.decode_to entries; the slot replays from its confirmed position into the key log (the
// emitter drops what the consumer has; markers of the abandoned windows are not ours any more;
// a read still under way is dropped when it ends, or dies with dblogd).
void DoCrash(World& w, const Move& m) {
  Dblogd& d = w.dblogd;
  Source& s = w.source;
  SAY(w, CrashName(m.crash) << ", dblogd having decoded " << m.decode_to << " of " << s.log.size()
                            << " log entries");
  DecodeTo(w, m.decode_to, m.crash == Crash::kRestartLost);
  d.wins.clear();
  d.reader = Phase::kIdle;
  std::size_t replay_from = m.decode_to;
  if (m.crash == Crash::kReconnectReplay) replay_from = 0;
  if (m.crash == Crash::kRestart || m.crash == Crash::kRestartRequeue ||
      m.crash == Crash::kRestartLost) {
    d.txlog = TransactionLog(1 << 20);
    d.pruned_below = 0;
    const std::uint64_t bound =
        w.options.stream_start == StreamStart::kSnapshotXmax ? s.TakeSnapshot().xmax : s.next_xid;
    d.txlog.ForgetBelow(bound);
    d.txlog_feed = "F" + std::to_string(bound);
    SAY(w, "  a new key log: ForgetBelow(" << bound << ")");
    if (m.crash == Crash::kRestartRequeue) {  // the last chunk's progress was not recorded
      replay_from = *d.last_high;
      d.next_chunk = d.last_chunk;
    } else if (m.crash == Crash::kRestartLost) {  // nor that of the chunk the sink never got
      replay_from = *d.lost_high;
      d.next_chunk = d.lost_chunk;
    }
  }
  d.lost_high.reset();
  d.lost_chunk = -1;
  for (std::size_t i = replay_from; i < m.decode_to; ++i) DecodeEntry(w, i, false);
  d.decoded = m.decode_to;
}

std::string TxnText(const Txn& t) {
  return "T" + std::to_string(t.xid) +
         (t.del ? " deletes k" + std::to_string(t.key)
                : " writes k" + std::to_string(t.key) + "=" + std::to_string(t.version()) +
                      (t.keep ? " leaving t unchanged" : ""));
}

// With no crash left to come, how far dblogd has decoded changes nothing (decoding depends on
// the log alone, which only grows, and every window is known before its `lo` is written):
// decode what it could have, so that histories that differ only in when dblogd decoded are one
// state; except the front window's `hi` while a window could still be read ahead before it.
void DecodeEagerly(World& w, const Bounds& b) {
  if (w.crashes < b.max_crashes) return;
  for (;;) {
    if (ReadAheadPossible(w, b)) return DecodeTo(w, *UndecodedFrontHigh(w));
    const std::size_t before = w.dblogd.decoded;
    const std::size_t high = UndecodedFrontHigh(w).value_or(w.source.log.size());
    DecodeTo(w, high == w.source.log.size() ? high : high + 1);
    if (w.dblogd.decoded == before || w.dblogd.decoded == w.source.log.size()) return;
  }
}

// Applies m to w; false when m cannot happen there.
bool Play(World& w, const Move& m, const Bounds& b) {
  Source& s = w.source;
  Dblogd& d = w.dblogd;
  const int began = w.began, committed = w.committed;
  w.began = w.committed = -1;
  switch (m.kind) {
    case Move::Kind::kRun:
    case Move::Kind::kRunInvisible:
    case Move::Kind::kBegin: {
      Txn t;
      t.xid = s.next_xid++;
      t.key = m.key;
      t.del = m.del;
      t.keep = m.keep;
      s.txns.push_back(t);
      const std::size_t i = s.txns.size() - 1;
      if (m.kind == Move::Kind::kBegin) {
        SAY(w, TxnText(t) << ": begins");
        w.began = static_cast<int>(i);
        break;
      }
      if (!s.CanCommit(i)) return false;
      s.Commit(i);
      if (m.kind == Move::Kind::kRun) s.MakeVisible(i);
      if (m.kind == Move::Kind::kRunInvisible) w.committed = static_cast<int>(i);
      SAY(w, TxnText(t) << ": commits (lsn " << s.log.back().lsn << ")"
                        << (m.kind == Move::Kind::kRun ? ", visible" : ", not yet visible"));
      break;
    }
    case Move::Kind::kCommit:
    case Move::Kind::kCommitVisible: {
      const auto i = static_cast<std::size_t>(m.txn);
      if (began == m.txn || !s.CanCommit(i)) return false;  // kRun... say it in one move
      s.Commit(i);
      if (m.kind == Move::Kind::kCommitVisible) s.MakeVisible(i);
      if (m.kind == Move::Kind::kCommit) w.committed = m.txn;
      SAY(w, TxnText(s.txns[i]) << ": commits (lsn " << s.log.back().lsn << ")"
                                << (m.kind == Move::Kind::kCommitVisible ? ", visible"
                                                                         : ", not yet visible"));
      break;
    }
    case Move::Kind::kVisible:
      if (committed == m.txn) return false;  // kCommitVisible / kRun say it in one move
      s.MakeVisible(static_cast<std::size_t>(m.txn));
      SAY(w, "T" << s.txns[static_cast<std::size_t>(m.txn)].xid << ": visible");
      break;
    case Move::Kind::kLow:
      if (!CanStartWindow(w, b)) return false;
      WriteLow(w);
      break;
    case Move::Kind::kRead:
      ReadChunk(w);
      break;
    case Move::Kind::kHigh:
      WriteHigh(w);
      break;
    case Move::Kind::kDecode: {
      SAY(w, "the stream decodes hi:" << d.wins.front().no);
      const std::size_t high = *UndecodedFrontHigh(w);
      DecodeTo(w, w.crashes < b.max_crashes ? s.log.size() : high + 1);
      break;
    }
    case Move::Kind::kCrash:
      if (m.crash == Crash::kRestartRequeue || m.crash == Crash::kRestartLost) {
        // only once a chunk was emitted (for Lost: while catching up, so that it can be lost)
        World probe = w;
        probe.narrate = nullptr;
        DecodeTo(probe, m.decode_to, m.crash == Crash::kRestartLost);
        if (!probe.dblogd.last_high) return false;
        if (m.crash == Crash::kRestartLost && !probe.dblogd.lost_high) return false;
      }
      ++w.crashes;
      DoCrash(w, m);
      break;
  }
  DecodeEagerly(w, b);
  PruneKeyLog(w);
  return true;
}

// Every move that may follow. Keys 0 and 1 are interchangeable while no transaction has
// written either and they start the same, in one chunk: only key 0 is offered then.
std::vector<Move> Moves(const World& w, const Bounds& b) {
  std::vector<Move> out;
  const Source& s = w.source;
  const Dblogd& d = w.dblogd;
  if (static_cast<int>(s.txns.size()) < b.max_txns) {
    bool used[kKeys] = {};
    for (const Txn& t : s.txns) used[t.key] = true;
    for (int k = 0; k < kKeys; ++k) {
      if (k == 1 && w.options.chunks == 1 && !used[0] && !used[1] &&
          s.initial[0] == s.initial[1])
        continue;
      for (int what = 0; what < (w.options.toast ? 3 : 2); ++what)  // write, delete, keep t
        for (Move::Kind kind : {Move::Kind::kRun, Move::Kind::kRunInvisible, Move::Kind::kBegin}) {
          Move m{kind, k, what == 1};
          m.keep = what == 2;
          out.push_back(m);
        }
    }
  }
  for (std::size_t i = 0; i < s.txns.size(); ++i) {
    const int t = static_cast<int>(i);
    if (s.txns[i].phase == Txn::Phase::kRunning) {
      out.push_back({Move::Kind::kCommitVisible, 0, false, t});
      out.push_back({Move::Kind::kCommit, 0, false, t});
    } else if (s.txns[i].phase == Txn::Phase::kInWal) {
      out.push_back({Move::Kind::kVisible, 0, false, t});
    }
  }
  if (CanStartWindow(w, b)) out.push_back({Move::Kind::kLow});
  if (d.reader == Phase::kLowWritten) out.push_back({Move::Kind::kRead});
  if (d.reader == Phase::kRead) out.push_back({Move::Kind::kHigh});
  if (ReadAheadPossible(w, b)) out.push_back({Move::Kind::kDecode});
  if (w.crashes < b.max_crashes) {
    // dblogd had decoded anything from where it is to the log's end: the stream decodes on
    // while the reader reads
    for (std::size_t p = d.decoded; p <= s.log.size(); ++p)
      for (Crash c : {Crash::kReconnect, Crash::kReconnectReplay, Crash::kRestart,
                      Crash::kRestartRequeue, Crash::kRestartLost}) {
        const bool after_a_chunk = c == Crash::kRestartRequeue || c == Crash::kRestartLost;
        if (after_a_chunk && !d.last_high && d.wins.empty()) continue;
        Move m{Move::Kind::kCrash};
        m.crash = c;
        m.decode_to = p;
        out.push_back(m);
      }
  }
  return out;
}

// The same ending for every history: the window being read completes, every transaction ends
// (running ones abort, committed ones become visible), the log is decoded, and windows run on
// the quiet source for the chunks still to be delivered. The consumer must then equal the
// source.
void Finish(World& w) {
  Dblogd& d = w.dblogd;
  Source& s = w.source;
  SAY(w, "-- the history ends; its finish:");
  if (d.reader == Phase::kLowWritten) ReadChunk(w);
  if (d.reader == Phase::kRead) WriteHigh(w);
  for (std::size_t i = 0; i < s.txns.size(); ++i) {
    if (s.txns[i].phase == Txn::Phase::kRunning) {
      s.txns[i].phase = Txn::Phase::kAborted;
      s.Complete(s.txns[i].xid);
    } else if (s.txns[i].phase == Txn::Phase::kInWal) {
      s.MakeVisible(i);
    }
  }
  DecodeTo(w, s.log.size());
  if (!d.wins.empty()) Fail(w, "model error: a window whose markers were all decoded is open");
  while (w.failure.empty() && d.next_chunk < w.options.chunks) {
    const int before = d.next_chunk;
    d.wins.clear();
    WriteLow(w);
    ReadChunk(w);
    WriteHigh(w);
    DecodeTo(w, s.log.size());
    if (d.next_chunk == before)
      Fail(w, "a window on the quiet source failed closed: the repair never ends");
  }
  for (int k = 0; k < kChunkKeys; ++k)
    if (!w.consumer.repaired[k]) Fail(w, "no chunk of k" + std::to_string(k) + " reached the consumer");
  CheckFrontier(w, s.head, "at the end");
}

// The state's identity: everything Moves, Play and Finish read.
std::string Identity(const World& w) {
  std::string id;
  id.reserve(256);
  auto num = [&](std::uint64_t v) {  // a varint
    for (; v >= 0x80; v >>= 7) id += static_cast<char>(v | 0x80);
    id += static_cast<char>(v);
  };
  const Source& s = w.source;
  const Dblogd& d = w.dblogd;
  num(static_cast<std::uint64_t>(w.options.kind));
  for (int v : s.initial) num(static_cast<std::uint32_t>(v));
  for (const Txn& t : s.txns) {
    num(t.xid);
    num(static_cast<std::uint64_t>(t.key * 8 + t.del * 4 + t.keep * 2 + t.carried));
    num(static_cast<std::uint64_t>(t.phase));
  }
  id += '|';
  for (const LogEntry& e : s.log) {
    num(static_cast<std::uint64_t>(e.kind));
    num(static_cast<std::uint64_t>(e.txn + 1));
    num(static_cast<std::uint64_t>(e.window + 1));
  }
  id += '|';
  num(s.next_xid);
  num(s.latest_completed);
  id += d.txlog_feed;
  id += '|';
  num(d.decoded);
  num(d.current_commit_lsn);
  num(static_cast<std::uint64_t>(d.reader));
  for (const Win& win : d.wins) {
    num(static_cast<std::uint64_t>(win.no));
    num(static_cast<std::uint64_t>(win.chunk));
    id += win.feed;
    id += '|';
    num(win.read.has_value());
    if (win.read) {
      id += SnapshotText(win.read->snapshot);
      for (const auto& [k, r] : win.read->rows) id += k + r + ";";
      num(win.read->asked_keys.size());
    }
  }
  id += '|';
  num(static_cast<std::uint64_t>(d.next_chunk));
  num(d.last_high ? *d.last_high + 1 : 0);
  num(static_cast<std::uint64_t>(d.last_chunk + 1));
  num(d.lost_high ? *d.lost_high + 1 : 0);
  num(static_cast<std::uint64_t>(d.lost_chunk + 1));
  num(static_cast<std::uint64_t>(d.windows));
  for (int v : w.consumer.sink) num(static_cast<std::uint32_t>(v));
  for (int v : w.consumer.expected) num(static_cast<std::uint32_t>(v));
  num(w.consumer.applied);
  for (bool r : w.consumer.repaired) num(r);
  num(static_cast<std::uint64_t>(w.crashes));
  num(static_cast<std::uint64_t>(w.began + 1));
  num(static_cast<std::uint64_t>(w.committed + 1));
  id += w.failure;
  return id;
}
struct Key {
  std::uint64_t a, b;
  bool operator==(const Key& o) const { return a == o.a && b == o.b; }
};
struct KeyHash {
  std::size_t operator()(const Key& k) const { return static_cast<std::size_t>(k.a ^ (k.b << 1)); }
};

// Two independent 64-bit FNV-1a hashes of the identity and the remaining budget: 128 bits.
Key KeyOf(const std::string& id, int remaining) {
  std::uint64_t a = 14695981039346656037ull, b = 0x9ae16a3b2f90404full;
  for (unsigned char c : id) {
    a = (a ^ c) * 1099511628211ull;
    b = (b ^ c) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
  }
  return {a ^ static_cast<std::uint64_t>(remaining), b + static_cast<std::uint64_t>(remaining)};
}

constexpr int kNever = INT_MAX;

struct Subtree {
  std::uint64_t histories = 0;  // histories that extend this one (itself included) in budget
  std::uint64_t violating = 0;
  int shortest = kNever;  // events from here to the nearest violating history
};

struct Search {
  Bounds bounds;
  std::unordered_map<Key, Subtree, KeyHash> memo;
  std::uint64_t finishes = 0;  // histories finished and checked: one per distinct state, and
                               // one per leaf (a leaf is cheaper to check again than to keep)

  Subtree Explore(const World& w, int remaining) {
    Key key{};
    if (remaining > 0) {
      key = KeyOf(Identity(w), remaining);
      if (auto it = memo.find(key); it != memo.end()) return it->second;
    }
    ++finishes;
    Subtree t;
    t.histories = 1;
    World end = w;
    Finish(end);
    if (!end.failure.empty()) {
      t.violating = 1;
      t.shortest = 0;
    }
    if (remaining > 0)
      for (const Move& m : Moves(w, bounds)) {
        World next = w;
        if (!Play(next, m, bounds)) continue;
        const Subtree c = Explore(next, remaining - 1);
        t.histories += c.histories;
        t.violating += c.violating;
        if (c.shortest != kNever) t.shortest = std::min(t.shortest, c.shortest + 1);
      }
    if (remaining > 0) memo.emplace(key, t);  // a leaf is cheaper to check than to keep
    return t;
  }

  // The moves of a shortest violating history from w (Explore(w, remaining) found one).
  std::vector<Move> Shortest(World w, int remaining) {
    std::vector<Move> path;
    for (;;) {
      World end = w;
      Finish(end);
      if (!end.failure.empty()) return path;
      const int want = Explore(w, remaining).shortest - 1;
      bool stepped = false;
      for (const Move& m : Moves(w, bounds)) {
        World next = w;
        if (!Play(next, m, bounds) || Explore(next, remaining - 1).shortest != want) continue;
        path.push_back(m);
        w = std::move(next);
        --remaining;
        stepped = true;
        break;
      }
      if (!stepped) return path;  // cannot happen: Explore said there was one
    }
  }
};

World Root(const Options& options, int present) {
  World w;
  w.options = options;
  // present: how many of the chunk's keys the source has at first (k0 first); every chunk key
  // is damaged in the sink (a wrong row, or one the source does not have); the key outside the
  // chunk is right there.
  w.source.initial = {kAbsent, kAbsent, 0};
  for (int k = 0; k < present; ++k) w.source.initial[k] = 0;
  w.source.head = w.source.initial;
  w.consumer.expected = w.source.initial;
  w.consumer.sink = {kGarbage, kGarbage, 0};
  if (options.toast) w.consumer.sink = {kGarbageToast, kGarbageToast, 0};
  return w;
}

struct Result {
  std::uint64_t histories = 0;
  std::uint64_t finishes = 0;
  std::uint64_t violating = 0;
  double seconds = 0;
  std::string shortest;  // narrated
  std::size_t shortest_events = 0;
};

std::string Narrate(const World& root, const std::vector<Move>& moves, const Bounds& b) {
  std::ostringstream out;
  World w = root;
  w.narrate = &out;
  const bool two = w.options.chunks > 1;
  out << "    "
      << (w.options.kind == ChunkKind::kRange ? (two ? "range chunks [k0], [k1]" : "range chunk [k0, k1]")
                                              : (two ? "keys [k0], [k1]" : "keys [k0, k1]"))
      << "; source " << StateText(w.source.initial) << ", damaged sink "
      << StateText(w.consumer.sink) << "\n";
  for (const Move& m : moves) Play(w, m, b);
  Finish(w);
  out << "    VIOLATION: " << w.failure << "\n";
  return out.str();
}

Result Enumerate(const Bounds& bounds, const Options& base) {
  const auto started = std::chrono::steady_clock::now();
  Result r;
  for (ChunkKind kind : {ChunkKind::kRange, ChunkKind::kKeys})
    for (int present = 0; present <= kChunkKeys; ++present) {
      Options options = base;
      options.kind = kind;
      const World root = Root(options, present);
      Search search;
      search.bounds = bounds;
      const Subtree t = search.Explore(root, bounds.max_events);
      r.histories += t.histories;
      r.violating += t.violating;
      r.finishes += search.finishes;
      if (t.shortest != kNever &&
          (r.shortest.empty() || std::size_t(t.shortest) < r.shortest_events)) {
        const std::vector<Move> moves = search.Shortest(root, bounds.max_events);
        r.shortest_events = moves.size();
        r.shortest = Narrate(root, moves, bounds);
      }
    }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return r;
}

void Print(const char* what, const Bounds& b, const Result& r) {
  std::printf(
      "%s: %llu histories of up to %d events (%d transactions, %d crash, %d windows), "
      "%llu finished and checked, %.1f s; %llu violate the contract\n",
      what, static_cast<unsigned long long>(r.histories), b.max_events, b.max_txns, b.max_crashes,
      b.max_windows, static_cast<unsigned long long>(r.finishes), r.seconds,
      static_cast<unsigned long long>(r.violating));
  if (!r.shortest.empty())
    std::printf("  a shortest one (%zu events):\n%s", r.shortest_events, r.shortest.c_str());
  std::fflush(stdout);
}

TEST(WindowExhaustive, EveryHistoryUpToTheBoundKeepsTheContract) {
  const Bounds b = BoundsFromEnv();
  Options options;
  options.stream_start = StreamStart::kNextXid;
  const Result r = Enumerate(b, options);
  Print("widened windows", b, r);
  EXPECT_EQ(r.violating, 0u);
}

// The planted bug: without the widening (--unsafe-plain-windows) the checker must find the
// visibility race, and print a shortest history that shows it.
TEST(WindowExhaustive, PlainWindowsAreCaught) {
  Bounds b = BoundsFromEnv();
  b.max_events = std::min(b.max_events, 4);
  Options options;
  options.widen = false;
  options.stream_start = StreamStart::kNextXid;
  const Result r = Enumerate(b, options);
  Print("plain windows (no widening)", b, r);
  EXPECT_GT(r.violating, 0u) << "the checker must catch the visibility race, or it proves nothing";
}

// Issue 28, 1b: rows whose t is damaged in the sink, updated leaving t unchanged in every way a
// window can meet them (in the window, before it but invisible to the chunk, crashes, redos).
// A fill must never carry a stale t, and the consumer must end with the source's t.
TEST(WindowExhaustive, FillsRepairUnchangedToastValuesInEveryHistory) {
  Bounds b = BoundsFromEnv();
  b.max_events = EnvInt("DBLOG_WINDOW_TOAST_BOUND", std::min(b.max_events, 5));
  Options options;
  options.toast = true;
  options.stream_start = StreamStart::kNextXid;
  const Result r = Enumerate(b, options);
  Print("widened windows with fills, updates leaving t unchanged", b, r);
  EXPECT_EQ(r.violating, 0u);
}

// The planted bug: a consumer that never gets the fills keeps damaged values.
TEST(WindowExhaustive, WithoutFillsADamagedToastValueIsCaught) {
  Bounds b = BoundsFromEnv();
  b.max_events = std::min(b.max_events, 4);
  Options options;
  options.toast = true;
  options.fills = false;
  options.stream_start = StreamStart::kNextXid;
  const Result r = Enumerate(b, options);
  Print("widened windows without fills (planted bug)", b, r);
  EXPECT_GT(r.violating, 0u) << "the checker must catch a damaged value kept, or it proves nothing";
}

// The bug this checker found: ForgetBelow(pg_snapshot_xmax) at a stream's start (what dblogd
// did) misses a transaction committed in the WAL, streamed and acknowledged before a restart,
// and still invisible, that is newer than every completed xid. Kept as a second planted bug:
// the checker must find it again.
TEST(WindowExhaustive, ForgettingBelowTheSnapshotXmaxAtARestartIsCaught) {
  const Bounds b = BoundsFromEnv();
  Options options;
  options.stream_start = StreamStart::kSnapshotXmax;
  const Result r = Enumerate(b, options);
  Print("widened windows, ForgetBelow(pg_snapshot_xmax) at a restart", b, r);
  EXPECT_GT(r.violating, 0u) << "the checker must catch the restart bound, or it proves nothing";
}

// The pruning's planted bugs, each of its two conditions left out: a horizon asked while a
// chunk is being read passes the snapshot the read took before it; one not bounded by the
// windows in flight passes the snapshot of a window read before it.
void ExpectPruningBugCaught(Options options, const char* what) {
  Bounds b = BoundsFromEnv();
  b.max_events = std::min(b.max_events, 4);
  options.stream_start = StreamStart::kNextXid;
  const Result r = Enumerate(b, options);
  Print(what, b, r);
  EXPECT_GT(r.violating, 0u) << "the checker must catch a horizon past a window's snapshot, or "
                                "it proves nothing";
}

TEST(WindowExhaustive, PruningTheKeyLogWhileAChunkIsReadIsCaught) {
  Options options;
  options.prune_waits_for_reads = false;
  ExpectPruningBugCaught(options,
                         "widened windows, the key log pruned while a chunk is read (planted bug)");
}

TEST(WindowExhaustive, PruningTheKeyLogPastAWindowInFlightIsCaught) {
  Options options;
  options.prune_bounded_by_windows = false;
  ExpectPruningBugCaught(
      options, "widened windows, the key log pruned past a window in flight (planted bug)");
}

// The bounds of the windows-in-a-row tests: a redo that meets a window read ahead takes seven
// moves (a transaction committed invisibly, a restart that forgets it, lo, the chunk missing it,
// hi, the next lo), so two transactions up to 7 moves (about 10 s) by default.
Bounds RowBounds() {
  Bounds b = BoundsFromEnv();
  b.max_events = EnvInt("DBLOG_WINDOW_ROW_BOUND", 7);
  b.max_txns = EnvInt("DBLOG_WINDOW_ROW_TXNS", 2);
  b.max_windows = std::max(b.max_windows, 3);
  return b;
}

// Windows in a row: the request in two chunks ([k0], then [k1]); the second window is read
// ahead (its `lo` written once the first one's `hi` is) while the stream has yet to reach the
// first one's `hi`, or after it did; a redone first window drops the one read ahead; crashes
// at every decoding position abandon both.
TEST(WindowExhaustive, WindowsInARowKeepTheContract) {
  Bounds b = RowBounds();
  Options options;
  options.chunks = 2;
  options.stream_start = StreamStart::kNextXid;
  read_ahead_dropped_seen = 0;
  const Result r = Enumerate(b, options);
  Print("widened windows in a row (two chunks, one read ahead)", b, r);
  EXPECT_EQ(r.violating, 0u);
  EXPECT_GT(read_ahead_dropped_seen, 0u) << "no history dropped a window read ahead: the bound "
                                            "is too small to reach what this test is for";
}

// The planted bug: a redone window that leaves the window read ahead after it in place lets
// that one close, and the request's progress skips the redone chunk.
TEST(WindowExhaustive, KeepingTheWindowReadAheadAfterARedoIsCaught) {
  Bounds b = RowBounds();
  Options options;
  options.chunks = 2;
  options.stream_start = StreamStart::kNextXid;
  options.drop_ahead_on_redo = false;
  const Result r = Enumerate(b, options);
  Print("windows in a row, the one read ahead kept after a redo (planted bug)", b, r);
  EXPECT_GT(r.violating, 0u) << "the checker must catch a chunk skipped, or it proves nothing";
}

// The restart bound's planted bug, in a row.
TEST(WindowExhaustive, ForgettingBelowTheSnapshotXmaxInARowIsCaught) {
  Bounds b = RowBounds();
  b.max_events = std::min(b.max_events, 5);
  Options options;
  options.chunks = 2;
  options.stream_start = StreamStart::kSnapshotXmax;
  const Result r = Enumerate(b, options);
  Print("windows in a row, ForgetBelow(pg_snapshot_xmax) at a restart", b, r);
  EXPECT_GT(r.violating, 0u) << "the checker must catch the restart bound, or it proves nothing";
}

}  // namespace
}  // namespace dblog::window
