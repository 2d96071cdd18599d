// sidecar/window/window.cc: window reconciliation (see window.h).
#include "window/window.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace dblog::window {
namespace {

std::uint64_t ParseXid(std::string_view s) {
  if (s.empty()) throw std::invalid_argument("empty xid in snapshot");
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') throw std::invalid_argument("bad xid in snapshot");
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

constexpr std::size_t kTxnOverhead = 64;
constexpr std::size_t kKeyOverhead = 48;

// `into` keeps the columns it has in common with `columns` (both sorted).
void Intersect(std::vector<int>& into, const std::vector<int>& columns) {
  std::vector<int> both;
  std::set_intersection(into.begin(), into.end(), columns.begin(), columns.end(),
                        std::back_inserter(both));
  into = std::move(both);
}

// A key seen once more with `columns` not carried: the first sighting sets them, later ones
// intersect.
void AddTouch(std::map<std::string, std::vector<int>>& keys, const std::string& key,
              const std::vector<int>& columns) {
  auto [it, inserted] = keys.emplace(key, columns);
  if (!inserted) Intersect(it->second, columns);
}

}  // namespace

Snapshot Snapshot::Parse(std::string_view text) {
  const auto c1 = text.find(':');
  const auto c2 = c1 == std::string_view::npos ? c1 : text.find(':', c1 + 1);
  if (c2 == std::string_view::npos) throw std::invalid_argument("snapshot is not xmin:xmax:xip");
  Snapshot s;
  s.xmin = ParseXid(text.substr(0, c1));
  s.xmax = ParseXid(text.substr(c1 + 1, c2 - c1 - 1));
  std::string_view rest = text.substr(c2 + 1);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    s.xip.push_back(ParseXid(rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  std::sort(s.xip.begin(), s.xip.end());
  if (s.xmin > s.xmax) throw std::invalid_argument("snapshot xmin above xmax");
  return s;
}

bool Snapshot::Sees(std::uint64_t xid) const {
  if (xid < xmin) return true;
  if (xid >= xmax) return false;
  return !std::binary_search(xip.begin(), xip.end(), xid);
}

void TransactionLog::Begin(std::uint64_t xid, std::uint64_t commit_lsn) {
  open_ = Txn{xid, commit_lsn, {}, kTxnOverhead};
  in_txn_ = true;
}

void TransactionLog::Touch(std::uint32_t relation, std::string key, std::vector<int> unchanged) {
  if (!in_txn_) return;
  open_.bytes += key.size() + kKeyOverhead + unchanged.size() * sizeof(int);
  open_.keys.push_back({relation, std::move(key), std::move(unchanged)});
  // A transaction larger than the whole budget is forgotten as it streams.
  if (open_.bytes > max_bytes_) {
    ++forgotten_;
    forgot_any_ = true;
    max_forgotten_xid_ = std::max(max_forgotten_xid_, open_.xid);
    open_.keys.clear();
    open_.keys.shrink_to_fit();
    open_.bytes = kTxnOverhead;
    in_txn_ = false;
  }
}

void TransactionLog::Commit() {
  if (!in_txn_) return;
  in_txn_ = false;
  if (open_.keys.empty()) return;  // touched nothing that could matter
  bytes_ += open_.bytes;
  txns_.push_back(std::move(open_));
  open_ = Txn{};
  Trim();
}

void TransactionLog::ForgetBelow(std::uint64_t xid) {
  if (xid == 0) return;
  forgot_any_ = true;
  max_forgotten_xid_ = std::max(max_forgotten_xid_, xid - 1);
}

void TransactionLog::PruneBelow(std::uint64_t xid) {
  if (xid == 0) return;
  // commit order is not xid order: below-horizon transactions are anywhere in the log
  auto kept = std::stable_partition(txns_.begin(), txns_.end(),
                                    [xid](const Txn& t) { return t.xid >= xid; });
  for (auto it = kept; it != txns_.end(); ++it) bytes_ -= it->bytes;
  pruned_ += static_cast<std::uint64_t>(txns_.end() - kept);
  txns_.erase(kept, txns_.end());
  ForgetBelow(xid);
}

void TransactionLog::Trim() {
  while (bytes_ > max_bytes_ && !txns_.empty()) {
    ++forgotten_;
    forgot_any_ = true;
    max_forgotten_xid_ = std::max(max_forgotten_xid_, txns_.front().xid);
    bytes_ -= txns_.front().bytes;
    txns_.pop_front();
  }
}

bool TransactionLog::InvisibleKeys(const Snapshot& snapshot, std::uint32_t relation,
                                   std::uint64_t up_to_lsn, std::set<std::string>* keys) const {
  std::map<std::string, std::vector<int>> touched;
  if (!InvisibleKeys(snapshot, relation, up_to_lsn, &touched)) return false;
  for (auto& [key, columns] : touched) keys->insert(key);
  return true;
}

bool TransactionLog::InvisibleKeys(const Snapshot& snapshot, std::uint32_t relation,
                                   std::uint64_t up_to_lsn,
                                   std::map<std::string, std::vector<int>>* keys) const {
  // A forgotten transaction the snapshot does not see would be unaccounted for. Forgotten
  // transactions all have xid <= max_forgotten_xid_; if the snapshot sees every xid up to it
  // (they are below its xmin), none of them matters.
  if (forgot_any_ && max_forgotten_xid_ >= snapshot.xmin) return false;
  for (const Txn& t : txns_) {
    if (t.commit_lsn > up_to_lsn) break;
    if (snapshot.Sees(t.xid)) continue;
    for (const KeyTouch& touch : t.keys) {
      if (touch.relation != relation) continue;
      if (touch.key.empty()) return false;  // a TRUNCATE: every key, which no set can list
      AddTouch(*keys, touch.key, touch.unchanged);
    }
  }
  return true;
}

void Window::Touch(std::uint32_t relation, const std::string& key,
                   const std::vector<int>& unchanged) {
  if (opened_ && relation == relation_) AddTouch(touched_, key, unchanged);
}

Window::Outcome Window::Close(Chunk chunk, const TransactionLog& log, std::uint64_t high_lsn,
                              bool widen) const {
  Outcome out;
  // key -> columns none of its events carried, among the events in the window and (widened)
  // those of transactions the snapshot does not see, committed up to the high watermark
  std::map<std::string, std::vector<int>> dropped = touched_;
  if (widen && !log.InvisibleKeys(chunk.snapshot, relation_, high_lsn, &dropped)) {
    out.redo = true;
    out.reason = "a transaction the chunk's snapshot did not see is no longer in memory";
    return out;
  }
  // the rows are moved out of the chunk (this runs per repaired row: no copy, and the set of
  // keys read only for a key-list chunk, the one kind that asks for keys)
  std::set<std::string> present;
  const bool asked = !chunk.asked_keys.empty();
  out.rows.reserve(chunk.rows.size());
  for (auto& [key, row] : chunk.rows) {
    if (asked) present.insert(key);
    auto it = dropped.find(key);
    if (it == dropped.end()) {
      out.rows.push_back(std::move(row));
    } else if (widen && !it->second.empty()) {
      // Every transaction that wrote this key and that the snapshot misses is among those
      // events (in the window, or widened), and none of them carried these columns: none
      // changed them, so the chunk's values of them are the source's at the high watermark,
      // while the sink may hold a damaged value that the events' "keep yours" kept.
      out.fills.push_back({std::move(row), it->second});
    }
  }
  for (const std::string& key : chunk.asked_keys)
    if (!present.count(key) && !dropped.count(key)) out.deletes.push_back(key);
  for (const auto& [key, columns] : dropped) out.kept.push_back(key);
  return out;
}

std::int64_t PacedNextWindowNs(std::int64_t started_ns, std::uint64_t rows,
                               std::uint64_t rows_per_second) {
  if (rows_per_second == 0) return started_ns;
  const long double ns = static_cast<long double>(rows) * 1e9L / rows_per_second;
  return started_ns + static_cast<std::int64_t>(ns);
}

}  // namespace dblog::window
