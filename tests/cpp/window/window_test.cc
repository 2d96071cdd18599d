// tests/cpp/window/window_test.cc: the watermark window's reconciliation, as pure logic: unit
// tests of each rule, and a randomized model of PostgreSQL histories in which some transactions
// commit in the WAL before the low watermark yet stay invisible to the chunk's snapshot (the
// visibility-order caveat). Replaying the stream into a damaged sink must give the source state
// with widening; the plain DBLog window must be caught failing on the same histories.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>

#include "window/window.h"

namespace dblog::window {
namespace {

constexpr std::uint32_t kRel = 42;

TEST(Snapshot, ParsesAndDecidesVisibility) {
  const Snapshot s = Snapshot::Parse("100:110:105,102");
  EXPECT_EQ(s.xmin, 100u);
  EXPECT_EQ(s.xmax, 110u);
  EXPECT_TRUE(s.Sees(99));
  EXPECT_TRUE(s.Sees(101));
  EXPECT_FALSE(s.Sees(102));
  EXPECT_FALSE(s.Sees(105));
  EXPECT_FALSE(s.Sees(110));
  EXPECT_FALSE(s.Sees(200));
  EXPECT_TRUE(Snapshot::Parse("5:5:").Sees(4));
  EXPECT_THROW(Snapshot::Parse("5"), std::invalid_argument);
  EXPECT_THROW(Snapshot::Parse("a:5:"), std::invalid_argument);
  EXPECT_THROW(Snapshot::Parse("9:5:"), std::invalid_argument);
}

Window::Chunk ChunkOf(const std::string& snapshot,
                      std::vector<std::pair<std::string, std::string>> rows,
                      std::vector<std::string> asked = {}) {
  return {Snapshot::Parse(snapshot), std::move(rows), std::move(asked)};
}

TEST(Window, InWindowEventsDropTheirKeys) {
  TransactionLog log(1 << 20);
  Window w("w", kRel);
  w.Touch(kRel, "a");  // before the low watermark: not in the window
  w.Open();
  w.Touch(kRel, "b");
  w.Touch(kRel + 1, "c");  // another table
  const auto out = w.Close(ChunkOf("10:10:", {{"a", "A"}, {"b", "B"}, {"c", "C"}}), log, 100);
  EXPECT_FALSE(out.redo);
  EXPECT_EQ(out.rows, (std::vector<std::string>{"A", "C"}));
  EXPECT_EQ(out.kept, (std::vector<std::string>{"b"}));
}

TEST(Window, AbsentAskedKeysBecomeDeletesUnlessTheLogTouchedThem) {
  TransactionLog log(1 << 20);
  Window w("w", kRel);
  w.Open();
  w.Touch(kRel, "y");
  const auto out = w.Close(ChunkOf("10:10:", {{"x", "X"}}, {"x", "y", "z"}), log, 100);
  EXPECT_EQ(out.rows, (std::vector<std::string>{"X"}));
  EXPECT_EQ(out.deletes, (std::vector<std::string>{"z"}));
}

// The caveat: T committed (WAL) before the low watermark, invisible to the chunk's snapshot.
TEST(Window, WideningDropsKeysOfTransactionsTheSnapshotDidNotSee) {
  TransactionLog log(1 << 20);
  log.Begin(/*xid=*/7, /*commit_lsn=*/50);
  log.Touch(kRel, "k");
  log.Commit();
  log.Begin(8, 60);  // visible to the snapshot: irrelevant
  log.Touch(kRel, "v");
  log.Commit();
  Window w("w", kRel);
  w.Open();
  const Window::Chunk chunk = ChunkOf("7:9:7", {{"k", "stale"}, {"v", "V"}});
  const auto widened = w.Close(chunk, log, 100);
  EXPECT_EQ(widened.rows, (std::vector<std::string>{"V"}));
  EXPECT_EQ(widened.kept, (std::vector<std::string>{"k"}));
  const auto plain = w.Close(chunk, log, 100, /*widen=*/false);
  EXPECT_EQ(plain.rows, (std::vector<std::string>{"stale", "V"}));
  // a transaction committed after the high watermark does not belong to this window
  const auto early = w.Close(chunk, log, 40);
  EXPECT_EQ(early.rows, (std::vector<std::string>{"stale", "V"}));
}

TEST(Window, FailsClosedWhenAnInvisibleTransactionWasForgotten) {
  TransactionLog log(300);
  for (std::uint64_t xid = 1; xid <= 10; ++xid) {
    log.Begin(xid, xid * 10);
    log.Touch(kRel, "key" + std::to_string(xid));
    log.Commit();
  }
  ASSERT_LT(log.transactions(), 10u);  // some were forgotten
  Window w("w", kRel);
  w.Open();
  // the snapshot might not see xid 1 (forgotten): cannot know its keys
  EXPECT_TRUE(w.Close(ChunkOf("1:11:1", {{"key1", "R"}}), log, 1000).redo);
  // a snapshot that sees everything forgotten is fine
  EXPECT_FALSE(w.Close(ChunkOf("11:11:", {{"key1", "R"}}), log, 1000).redo);
}

// Issue 28, 1b: a kept key whose events in the window left a TOASTed column unchanged ("keep
// yours") would keep a damaged value in the sink. The chunk's value of a column that no event
// in the window and no transaction the snapshot misses carried is the source's at the high
// watermark: it comes back as a fill of just those columns.
TEST(Window, ColumnsNoEventCarriedAreFilledFromTheChunk) {
  TransactionLog log(1 << 20);
  Window w("w", kRel);
  w.Open();
  // xid 20, after the snapshot: updates a (column 2 unchanged), b twice (2 unchanged, then
  // every column carried), c (columns 1 and 2 unchanged), and deletes d
  log.Begin(20, 150);
  for (const auto& [key, unchanged] : std::vector<std::pair<std::string, std::vector<int>>>{
           {"a", {2}}, {"b", {2}}, {"b", {}}, {"c", {1, 2}}, {"d", {}}}) {
    log.Touch(kRel, key, unchanged);
    w.Touch(kRel, key, unchanged);
  }
  log.Commit();
  const auto out = w.Close(
      ChunkOf("20:20:", {{"a", "A"}, {"b", "B"}, {"c", "C"}, {"d", "D"}, {"e", "E"}}), log, 200);
  ASSERT_FALSE(out.redo);
  EXPECT_EQ(out.rows, (std::vector<std::string>{"E"}));
  ASSERT_EQ(out.fills.size(), 2u);
  EXPECT_EQ(out.fills[0].row, "A");
  EXPECT_EQ(out.fills[0].columns, (std::vector<int>{2}));
  EXPECT_EQ(out.fills[1].row, "C");
  EXPECT_EQ(out.fills[1].columns, (std::vector<int>{1, 2}));
  EXPECT_EQ(out.kept, (std::vector<std::string>{"a", "b", "c", "d"}));
  // the plain DBLog window (no snapshot comparison) cannot tell: no fills
  EXPECT_TRUE(w.Close(ChunkOf("20:20:", {{"a", "A"}}), log, 200, /*widen=*/false).fills.empty());
}

// A widened transaction (committed before the low watermark, invisible to the snapshot) that
// carried the column makes the chunk's value of it stale: not filled, whatever the window saw.
TEST(Window, AColumnAnInvisibleTransactionCarriedIsNotFilled) {
  TransactionLog log(1 << 20);
  log.Begin(7, 50);  // before the window, invisible to the snapshot: carried every column
  log.Touch(kRel, "a", {});
  log.Touch(kRel, "b", {1});
  log.Commit();
  Window w("w", kRel);
  w.Open();
  log.Begin(9, 150);  // in the window: column 1 unchanged for both
  for (const char* key : {"a", "b"}) {
    log.Touch(kRel, key, {1});
    w.Touch(kRel, key, {1});
  }
  log.Commit();
  const auto out = w.Close(ChunkOf("7:10:7,9", {{"a", "A"}, {"b", "B"}}), log, 200);
  ASSERT_FALSE(out.redo);
  EXPECT_TRUE(out.rows.empty());
  ASSERT_EQ(out.fills.size(), 1u);
  EXPECT_EQ(out.fills[0].row, "B");
  EXPECT_EQ(out.fills[0].columns, (std::vector<int>{1}));
}

TEST(TransactionLog, ATransactionLargerThanTheBudgetIsForgotten) {
  TransactionLog log(1000);
  log.Begin(5, 10);
  for (int i = 0; i < 100; ++i) log.Touch(kRel, "k" + std::to_string(i));
  log.Commit();
  EXPECT_LE(log.bytes(), 1000u);
  EXPECT_EQ(log.forgotten(), 1u);
  std::set<std::string> keys;
  EXPECT_FALSE(log.InvisibleKeys(Snapshot::Parse("5:6:5"), kRel, 100, &keys));
  EXPECT_TRUE(log.InvisibleKeys(Snapshot::Parse("6:6:"), kRel, 100, &keys));
}

// dblogd's log starts empty when its stream starts: transactions below the xmax it read then
// were (or are being) streamed before it, with keys it never saw. A window whose snapshot
// might not see one of them cannot be widened and must be redone, not closed.
TEST(TransactionLog, TransactionsFromBeforeTheStreamCountAsForgotten) {
  TransactionLog log(1 << 20);
  log.ForgetBelow(100);  // pg_snapshot_xmax at stream start
  std::set<std::string> keys;
  // the chunk's snapshot does not see xid 99 (say, still committing when dblogd started)
  EXPECT_FALSE(log.InvisibleKeys(Snapshot::Parse("99:120:99"), kRel, 1000, &keys));
  // one that sees everything below 100 is answerable
  EXPECT_TRUE(log.InvisibleKeys(Snapshot::Parse("100:120:"), kRel, 1000, &keys));
  Window w("w", kRel);
  w.Open();
  EXPECT_TRUE(w.Close(ChunkOf("99:120:99", {{"key1", "R"}}), log, 1000).redo);
  EXPECT_FALSE(w.Close(ChunkOf("100:120:", {{"key1", "R"}}), log, 1000).redo);
}

// dblogd prunes the log by a horizon: the xmin of a snapshot taken after every open window's,
// bounded by theirs. Transactions below it are dropped wherever they committed (commit order is
// not xid order), the others stay whole, and a window's snapshot at or above it widens as before.
TEST(TransactionLog, PruningDropsWhatEverySnapshotSeesWhereverItCommitted) {
  TransactionLog log(1 << 20);
  const std::pair<std::uint64_t, const char*> txns[] = {
      {12, "a"}, {9, "b"}, {15, "c"}, {10, "d"}, {11, "e"}};
  std::uint64_t lsn = 100;
  for (const auto& [xid, key] : txns) {
    log.Begin(xid, lsn += 10);
    log.Touch(kRel, key);
    log.Commit();
  }
  const std::size_t before = log.bytes();
  // 9 and 10 ended; 11 (the horizon itself: the oldest running, committed in the WAL and still
  // invisible), 12 and 15 may still be running for the next snapshot
  log.PruneBelow(11);
  EXPECT_EQ(log.transactions(), 3u);
  EXPECT_EQ(log.pruned(), 2u);
  EXPECT_LT(log.bytes(), before);
  std::set<std::string> keys;
  ASSERT_TRUE(log.InvisibleKeys(Snapshot::Parse("11:20:11,12,15"), kRel, 1000, &keys));
  EXPECT_EQ(keys, (std::set<std::string>{"a", "c", "e"}));
  log.PruneBelow(16);
  EXPECT_EQ(log.transactions(), 0u);
  EXPECT_EQ(log.bytes(), 0u);
  EXPECT_EQ(log.pruned(), 5u);
  EXPECT_EQ(log.forgotten(), 0u);
  EXPECT_TRUE(log.InvisibleKeys(Snapshot::Parse("16:20:"), kRel, 1000, &keys));
}

// Were a window's snapshot below the horizon (dblogd bounds the horizon by every open window's
// snapshot, so it never is), the pruned transactions count as forgotten: the window fails closed
// and is read again; it never closes without a key it needed.
TEST(TransactionLog, ASnapshotBelowThePruningHorizonFailsClosed) {
  TransactionLog log(1 << 20);
  log.Begin(9, 10);
  log.Touch(kRel, "b");
  log.Commit();
  log.PruneBelow(11);
  std::set<std::string> keys;
  EXPECT_FALSE(log.InvisibleKeys(Snapshot::Parse("9:20:9"), kRel, 1000, &keys));
  EXPECT_TRUE(log.InvisibleKeys(Snapshot::Parse("11:20:"), kRel, 1000, &keys));
  EXPECT_TRUE(keys.empty());
}

// ---- the randomized model --------------------------------------------------------------------
//
// Keys 0..K-1 of one table. A history of transactions in commit (WAL) order, each setting or
// deleting a few keys. The consumer's sink starts from the source state before the history,
// damaged at random (rows missing, extra, wrong). The window: low watermark after transaction
// `lo`, chunk read after `read` (>= lo), high watermark after `hi` (>= read). The chunk's
// snapshot sees every transaction committed before the read except some "stuck" ones (committed
// in the WAL, still in the proc array), which may sit before the low watermark.
// The stream: every transaction's events in commit order, the chunk's survivors at hi; for a
// range chunk the sink then deletes keys of the range it has that are neither survivors nor kept.
// Replaying into the damaged sink must give the final source state.

using State = std::map<int, int>;  // key -> value; absent = no row

struct Txn {
  std::uint64_t xid;
  std::vector<std::pair<int, std::optional<int>>> writes;
};

std::string KeyBytes(int k) { return "k" + std::to_string(k); }
std::string RowBytes(int k, int v) { return std::to_string(k) + "=" + std::to_string(v); }

struct Trial {
  bool diverged = false;
  bool redo = false;
  std::size_t pruned = 0;  // transactions the pruning dropped
};

// How the model prunes the log while it streams (TransactionLog::PruneBelow), at random steps:
// not at all; by the horizon dblogd uses (the oldest transaction running then, bounded by the
// open window's snapshot once the chunk was read); or by the oldest running alone, unbounded.
enum class Prune { kNone, kHorizon, kUnbounded };

Trial RunTrial(std::mt19937_64& rng, bool widen, Prune prune = Prune::kNone) {
  const int keys = 8;
  const int n = 12;
  State source;
  for (int k = 0; k < keys; ++k)
    if (rng() % 3) source[k] = static_cast<int>(rng() % 100);
  State sink = source;  // then damaged
  for (int k = 0; k < keys; ++k) {
    switch (rng() % 4) {
      case 0: sink.erase(k); break;
      case 1: sink[k] = 1000 + static_cast<int>(rng() % 100); break;
      default: break;
    }
  }
  std::vector<Txn> txns;
  for (int i = 0; i < n; ++i) {
    Txn t{static_cast<std::uint64_t>(100 + i), {}};
    const int writes = 1 + static_cast<int>(rng() % 2);
    for (int w = 0; w < writes; ++w) {
      const int k = static_cast<int>(rng() % keys);
      if (rng() % 4 == 0)
        t.writes.push_back({k, std::nullopt});
      else
        t.writes.push_back({k, static_cast<int>(rng() % 100)});
    }
    txns.push_back(t);
  }
  // xids are assigned at start, commits happen in another order: shuffle the xids a little
  for (int i = 0; i + 1 < n; ++i)
    if (rng() % 3 == 0) std::swap(txns[i].xid, txns[i + 1].xid);
  const int lo = static_cast<int>(rng() % n);           // low after txns[0..lo)
  const int read = lo + static_cast<int>(rng() % (n - lo + 1));
  const int hi = read + static_cast<int>(rng() % (n - read + 1));
  std::set<std::uint64_t> stuck;  // committed before the read but invisible to it
  for (int i = std::max(0, lo - 3); i < read; ++i)
    if (rng() % 3 == 0) stuck.insert(txns[i].xid);

  // the chunk's snapshot and what it reads
  Snapshot snap;
  snap.xmax = 1000;
  std::uint64_t min_invisible = 1000;
  for (int i = read; i < n; ++i) min_invisible = std::min(min_invisible, txns[i].xid);
  for (std::uint64_t x : stuck) min_invisible = std::min(min_invisible, x);
  snap.xmin = min_invisible;
  for (int i = 0; i < n; ++i) {
    const bool invisible = i >= read || stuck.count(txns[i].xid);
    if (invisible && txns[i].xid >= snap.xmin) snap.xip.push_back(txns[i].xid);
  }
  std::sort(snap.xip.begin(), snap.xip.end());
  State seen = source;
  for (int i = 0; i < read; ++i) {
    if (stuck.count(txns[i].xid)) continue;
    for (const auto& [k, v] : txns[i].writes) {
      if (v) seen[k] = *v; else seen.erase(k);
    }
  }
  const bool range = rng() % 2;
  Window::Chunk chunk{snap, {}, {}};
  for (const auto& [k, v] : seen) chunk.rows.push_back({KeyBytes(k), RowBytes(k, v)});
  if (!range)
    for (int k = 0; k < keys; ++k) chunk.asked_keys.push_back(KeyBytes(k));

  // the stream, replayed into the sink
  TransactionLog log(1 << 20);
  Window w("w", kRel);
  auto close = [&](std::uint64_t high_lsn) {
    const auto out = w.Close(chunk, log, high_lsn, widen);
    if (out.redo) return false;
    std::set<int> survivors;
    for (const auto& row : out.rows) {
      const int k = std::stoi(row.substr(0, row.find('=')));
      sink[k] = std::stoi(row.substr(row.find('=') + 1));
      survivors.insert(k);
    }
    for (const auto& key : out.deletes) sink.erase(std::stoi(key.substr(1)));
    if (range) {
      std::set<std::string> kept(out.kept.begin(), out.kept.end());
      for (int k = 0; k < keys; ++k)
        if (!survivors.count(k) && !kept.count(KeyBytes(k))) sink.erase(k);
    }
    return true;
  };
  Trial trial;
  // The oldest transaction running after txns[0..i) committed in the WAL: the later ones
  // (taken as begun), and, until the chunk is read, the stuck ones (still in the proc array).
  auto oldest_running = [&](int i) {
    std::uint64_t xmin = snap.xmax;
    for (int k = i; k < n; ++k) xmin = std::min(xmin, txns[k].xid);
    if (i <= read)
      for (std::uint64_t x : stuck) xmin = std::min(xmin, x);
    return xmin;
  };
  for (int i = 0; i <= n; ++i) {
    if (prune != Prune::kNone && rng() % 2) {
      std::uint64_t horizon = oldest_running(i);
      // the chunk was read (at `read`) and its window is still open: bounded by its snapshot
      if (prune == Prune::kHorizon && i > read && i <= hi) horizon = std::min(horizon, snap.xmin);
      const std::size_t had = log.transactions();
      log.PruneBelow(horizon);
      trial.pruned += had - log.transactions();
    }
    if (i == lo) w.Open();
    if (i == hi && !close(static_cast<std::uint64_t>(i * 10 + 5))) {
      trial.redo = true;
      return trial;
    }
    if (i == n) break;
    const std::uint64_t commit_lsn = static_cast<std::uint64_t>(i * 10 + 10);
    log.Begin(txns[i].xid, commit_lsn);
    for (const auto& [k, v] : txns[i].writes) {
      log.Touch(kRel, KeyBytes(k));
      w.Touch(kRel, KeyBytes(k));
      if (v) sink[k] = *v; else sink.erase(k);
      if (v) source[k] = *v; else source.erase(k);
    }
    log.Commit();
  }
  trial.diverged = sink != source;
  return trial;
}

TEST(RepairPacing, NextWindowWaitsForTheRowsToFitTheRate) {
  EXPECT_EQ(PacedNextWindowNs(5, 2000, 0), 5);                      // no cap: at once
  EXPECT_EQ(PacedNextWindowNs(0, 2000, 1000), 2'000'000'000);       // 2000 rows at 1000/s: 2 s
  EXPECT_EQ(PacedNextWindowNs(7, 0, 1000), 7);                      // an empty window: at once
  EXPECT_EQ(PacedNextWindowNs(1'000'000'000, 1, 4), 1'250'000'000);  // 1 row at 4/s: 250 ms
}

TEST(WindowModel, WidenedWindowsAlwaysConverge) {
  std::mt19937_64 rng(20261130);
  for (int i = 0; i < 20000; ++i) {
    const Trial t = RunTrial(rng, /*widen=*/true);
    ASSERT_FALSE(t.redo) << "trial " << i;  // the log here never forgets
    ASSERT_FALSE(t.diverged) << "trial " << i;
  }
}

// The log pruned by dblogd's horizon: the same histories converge, and no window fails closed
// because of the pruning.
TEST(WindowModel, WindowsConvergeWithTheLogPrunedByTheHorizon) {
  std::mt19937_64 rng(20261207);
  std::size_t pruned = 0;
  for (int i = 0; i < 20000; ++i) {
    const Trial t = RunTrial(rng, /*widen=*/true, Prune::kHorizon);
    ASSERT_FALSE(t.redo) << "trial " << i;
    ASSERT_FALSE(t.diverged) << "trial " << i;
    pruned += t.pruned;
  }
  EXPECT_GT(pruned, 20000u) << "the pruning must drop transactions, or it proves nothing";
}

// A horizon not bounded by the open window's snapshot passes it: the pruned transactions the
// snapshot misses would be lost to the widening. They count as forgotten, so such a window fails
// closed (read again) and never emits a stale row.
TEST(WindowModel, PruningPastAnOpenWindowsSnapshotFailsClosedNotStale) {
  std::mt19937_64 rng(20261207);
  int redone = 0;
  for (int i = 0; i < 20000; ++i) {
    const Trial t = RunTrial(rng, /*widen=*/true, Prune::kUnbounded);
    ASSERT_FALSE(t.diverged) << "trial " << i;
    redone += t.redo;
  }
  EXPECT_GT(redone, 0) << "the unbounded horizon must pass some window's snapshot here";
}

TEST(WindowModel, PlainWindowsDivergeOnTheVisibilityCaveat) {
  std::mt19937_64 rng(20261130);
  int diverged = 0;
  for (int i = 0; i < 20000; ++i) diverged += RunTrial(rng, /*widen=*/false).diverged;
  EXPECT_GT(diverged, 0) << "the model must reproduce the caveat, or it proves nothing";
}

}  // namespace
}  // namespace dblog::window
