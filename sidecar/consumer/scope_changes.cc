// sidecar/consumer/scope_changes.cc: see scope_changes.h.
#include "consumer/scope_changes.h"

#include <algorithm>
#include <cstdlib>

#include "common/json.h"
#include "common/lsn.h"
#include "consumer/bookkeeping.h"
#include "log/log.h"

namespace dblog::consumer {
namespace {

// A cursor over the JSON text the trigger writes (PostgreSQL's escape_json): objects of
// strings and unsigned integers. Anything else is refused.
class Reader {
 public:
  explicit Reader(std::string_view text) : s_(text) {}

  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool Eat(char c) {
    Space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    Space();
    return i_ == s_.size();
  }
  bool PeekString() {
    Space();
    return i_ < s_.size() && s_[i_] == '"';
  }
  bool Number(std::uint64_t& out) {
    Space();
    const std::size_t start = i_;
    out = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      if (out > (UINT64_MAX - 9) / 10) return false;
      out = out * 10 + static_cast<std::uint64_t>(s_[i_++] - '0');
    }
    return i_ > start;
  }
  bool String(std::string& out) {
    if (!Eat('"')) return false;
    out.clear();
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = 0;
          if (!Hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair
            std::uint32_t low = 0;
            if (i_ + 1 >= s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') return false;
            i_ += 2;
            if (!Hex4(low) || low < 0xDC00 || low > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return false;
          }
          if (cp == 0) return false;  // no name holds NUL
          common::AppendUtf8(out, cp);
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }

 private:
  bool Hex4(std::uint32_t& out) {
    if (i_ + 4 > s_.size()) return false;
    out = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      out <<= 4;
      if (h >= '0' && h <= '9') out |= static_cast<std::uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') out |= static_cast<std::uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') out |= static_cast<std::uint32_t>(h - 'A' + 10);
      else return false;
    }
    return true;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

bool SystemSchema(const std::string& schema) {
  return schema == "pg_catalog" || schema == "information_schema" || schema == "dblog" ||
         schema.rfind("pg_toast", 0) == 0 || schema.rfind("pg_temp", 0) == 0;
}

}  // namespace

std::optional<ScopeChange> ParseScopeChange(std::string_view content) {
  if (content.size() > kMaxScopeChangeBytes) return std::nullopt;
  Reader r(content);
  ScopeChange c;
  bool has_oid = false;
  int strings = 0;
  if (!r.Eat('{')) return std::nullopt;
  if (!r.Eat('}')) {
    do {
      std::string key;
      if (!r.String(key) || !r.Eat(':')) return std::nullopt;
      if (!r.PeekString()) {
        std::uint64_t n = 0;
        if (!r.Number(n)) return std::nullopt;
        if (key == "oid") {
          if (has_oid || n == 0 || n > UINT32_MAX) return std::nullopt;
          c.oid = static_cast<std::uint32_t>(n);
          has_oid = true;
        }
        continue;
      }
      std::string value;
      if (!r.String(value)) return std::nullopt;
      std::string* field = key == "kind"         ? &c.kind
                           : key == "old_schema" ? &c.old_schema
                           : key == "old_name"   ? &c.old_name
                           : key == "new_schema" ? &c.new_schema
                           : key == "new_name"   ? &c.new_name
                                                 : nullptr;
      if (field == nullptr) continue;
      if (!field->empty() || value.empty()) return std::nullopt;
      *field = std::move(value);
      ++strings;
    } while (r.Eat(','));
    if (!r.Eat('}')) return std::nullopt;
  }
  if (!r.AtEnd() || !has_oid || strings != 5) return std::nullopt;
  return c;
}

bool EntersScope(const config::Scope& scope, const ScopeChange& change,
                 bool old_name_unsettled) {
  // an unlogged table was never captured, whatever its name
  const bool before = change.kind != "set_logged" && !old_name_unsettled &&
                      !SystemSchema(change.old_schema) &&
                      scope.Holds(change.old_schema, change.old_name);
  const bool after = !SystemSchema(change.new_schema) &&
                     scope.Holds(change.new_schema, change.new_name);
  return after && !before;
}

void UnsettledScopeChanges::Found(const std::string& consumer, std::uint64_t wal_end) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::uint64_t& b = boundaries_[consumer];
  b = std::max(b, wal_end);
}

std::uint64_t UnsettledScopeChanges::Boundary(const std::string& consumer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = boundaries_.find(consumer);
  return it == boundaries_.end() ? 0 : it->second;
}

void UnsettledScopeChanges::Settled(const std::string& consumer, std::uint64_t boundary) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = boundaries_.find(consumer);
  if (it != boundaries_.end() && it->second <= boundary) boundaries_.erase(it);
}

void ScopeChanges::OnStreamStart() {
  boundary_ = unsettled_ ? unsettled_->Boundary(consumer_.name) : 0;
  OnBegin();
}

void ScopeChanges::OnBegin() {
  xid_ = 0;
  entering_.clear();
  oids_.clear();
}

void ScopeChanges::OnMessage(const dblog::v1::Message& message) {
  if (message.xid() != xid_) {
    OnBegin();
    xid_ = message.xid();
  }
  const std::optional<ScopeChange> change = ParseScopeChange(message.content());
  if (!change) {
    // the plugin forwards only messages of a transaction that made that change: a later
    // format, a bug, or an older plugin passing a forgery; nothing to act on
    unreadable_log_.Warn("scope_change_unreadable",
                         {{"consumer", consumer_.name},
                          {"lsn", common::FormatLsn(message.lsn())},
                          {"bytes", message.content().size()}});
    return;
  }
  if (!EntersScope(consumer_.scope, *change, message.lsn() < boundary_) ||
      !oids_.insert(change->oid).second)
    return;
  entering_.push_back(*change);
}

void ScopeChanges::OnCommit(Bookkeeping& bookkeeping, std::uint64_t commit_lsn) {
  Tally tally;
  // the first request waits until the transaction is visible; then so is it for the others
  std::uint64_t xid = xid_;
  for (std::size_t i = 0; i < entering_.size(); ++i, xid = 0)
    Queue(entering_[i], xid, bookkeeping, tally, i);
  if (entering_.size() > kLoggedTables)
    log::Info("scope_tables_entered",
              {{"consumer", consumer_.name},
               {"tables", entering_.size()},
               {"not_logged", entering_.size() - kLoggedTables},
               {"queued", tally.queued},
               {"already_queued", tally.already_queued},
               {"gone", tally.gone},
               {"out_of_scope_now", tally.out_of_scope_now}});
  OnBegin();
  // every message written before the scope changed was read and its copies are queued
  if (boundary_ != 0 && commit_lsn >= boundary_) {
    if (unsettled_) unsettled_->Settled(consumer_.name, boundary_);
    log::Info("scope_change_settled", {{"consumer", consumer_.name},
                                       {"boundary", common::FormatLsn(boundary_)}});
    boundary_ = 0;
  }
}

void ScopeChanges::Queue(const ScopeChange& change, std::uint64_t xid, Bookkeeping& bookkeeping,
                         Tally& tally, std::size_t index) {
  const std::string old_name = change.old_schema + "." + change.old_name;
  const std::string new_name = change.new_schema + "." + change.new_name;
  Bookkeeping::Entering outcome;
  try {
    outcome = bookkeeping.QueueTableEnteringScope(change.oid, xid);
  } catch (const std::exception& e) {
    bookkeeping.Reset();
    throw ScopeChangeError(dblog::v1::Error::SOURCE_ERROR,
                           "the table " + new_name + " entered the consumer's scope (" +
                               change.kind + " from " + old_name +
                               ") but its copy could not be queued: " + e.what());
  }
  const char* what = "queued";
  switch (outcome) {
    case Bookkeeping::Entering::kQueued:
      ++tally.queued;
      break;
    case Bookkeeping::Entering::kAlreadyQueued:
      what = "already_queued";
      ++tally.already_queued;
      break;
    case Bookkeeping::Entering::kGone:
      what = "gone";
      ++tally.gone;
      break;
    case Bookkeeping::Entering::kOutOfScopeNow:
      what = "out_of_scope_now";
      ++tally.out_of_scope_now;
      break;
    case Bookkeeping::Entering::kKeyless:
      throw ScopeChangeError(
          dblog::v1::Error::SCOPE_ERROR,
          "the table " + new_name + " entered the consumer's scope (" + change.kind + " from " +
              old_name + ") and has no primary key or replica identity index: add one (it is "
              "then copied) or leave it out of the consumer's scope");
  }
  if (index >= kLoggedTables) return;
  log::Info("scope_table_entered", {{"consumer", consumer_.name},
                                    {"table", new_name},
                                    {"from", old_name},
                                    {"kind", change.kind},
                                    {"oid", change.oid},
                                    {"copy", what}});
}

}  // namespace dblog::consumer
