// tests/cpp/emit/emitter_property_test.cc: the correctness contract, checked on random
// histories. A generator plays the source database and the output plugin: it keeps the true
// table contents (the oracle) and writes the plugin events a history would produce, with the
// copy path's calls (bootstrap of the initial contents, repair chunks) mixed in. The events go
// through the Emitter; replaying what came out from empty, as a consumer would, must give the
// oracle's contents key by key. The same holds when the consumer had a prefix of the stream and
// reconnects with a resume position, and the resent suffix must be byte-identical to the
// original one.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "emit/ack_tracker.h"
#include "emit/emitter.h"
#include "emit_test_util.h"

namespace dblog::emit::test {
namespace {

using Values = std::vector<std::string>;         // serialized Value per column
using Contents = std::map<std::string, Values>;  // key bytes -> row
using Database = std::map<std::uint32_t, Contents>;

std::string Ser(const Value& v) { return v.SerializeAsString(); }

// Key bytes from Values in key order (length-prefixed, so concatenation is unambiguous).
std::string KeyBytes(const std::vector<std::string>& key_values) {
  std::string out;
  for (const auto& v : key_values) {
    out += std::to_string(v.size()) + ":";
    out += v;
  }
  return out;
}
std::string KeyOfRow(const Relation& rel, const Values& row) {
  std::vector<std::string> key;
  for (auto k : rel.key_columns()) key.push_back(row.at(k));
  return KeyBytes(key);
}
Values ToValues(const Row& row) {
  Values out;
  for (const auto& v : row.values()) out.push_back(Ser(v));
  return out;
}
Row ToRow(const Values& values) {
  Row row;
  for (const auto& v : values) row.add_values()->ParseFromString(v);
  return row;
}
bool IsUnchanged(const std::string& v) {
  Value value;
  value.ParseFromString(v);
  return value.kind_case() == Value::kUnchanged;
}

// One input to the emitter: a plugin event or a copy-path call.
struct Action {
  enum Kind {
    kEvent,
    kBeginBootstrap,
    kCopiedRow,
    kEndBootstrap,
    kBeginChunk,
    kChunkRow,
    kChunkDelete,
    kEndChunk
  };
  Kind kind = kEvent;
  Event event;
  Relation rel;
  std::string row_bytes;
  Row key;
  std::uint64_t number = 0;  // consistent point, or request id
};

// How Changes are handed over. kRaw: with their serialized bytes too, as the pipeline does with
// the plugin's when it parses them (the emitter then splices them rather than serialize the
// parsed Change). kView: read in place (ChangeView), as the pipeline reads the plugin's.
enum class Handover { kParsed, kRaw, kView };

void Feed(Emitter& e, const std::vector<Action>& actions, Handover how = Handover::kParsed) {
  for (const Action& a : actions) {
    switch (a.kind) {
      case Action::kEvent:
        if (how == Handover::kRaw && a.event.has_change()) {
          const std::string bytes = a.event.change().SerializeAsString();
          Event copy = a.event;
          e.Consume(copy, bytes);
        } else if (how == Handover::kView && a.event.has_change()) {
          const std::string bytes = a.event.change().SerializeAsString();
          wire::ChangeView view;
          ASSERT_TRUE(view.Parse(bytes)) << a.event.change().DebugString();
          e.ConsumeChange(view);
        } else {
          e.OnEvent(a.event);
        }
        break;
      case Action::kBeginBootstrap:
        e.BeginBootstrap(a.number, false, {});
        break;
      case Action::kCopiedRow:
        e.EmitCopiedRow(a.rel, a.row_bytes);
        break;
      case Action::kEndBootstrap:
        e.EndBootstrap({});
        break;
      case Action::kBeginChunk: {
        dblog::v1::ChunkBegin chunk;
        chunk.set_request_id(a.number);
        e.BeginChunk(a.rel, chunk);
        break;
      }
      case Action::kChunkRow:
        e.EmitChunkRow(a.row_bytes);
        break;
      case Action::kChunkDelete:
        e.EmitChunkDelete(a.key);
        break;
      case Action::kEndChunk:
        e.EndChunk();
        break;
    }
  }
}

// ---- The source and its plugin -------------------------------------------------------------

struct Table {
  Relation rel;
  std::vector<bool> is_text;
  std::vector<int> key_domain;  // per key column (in key order): values 0..n-1
  bool full = false;            // REPLICA IDENTITY FULL: old rows logged, no unchanged values
};

class Source {
 public:
  explicit Source(std::mt19937_64& rng) : rng_(rng) {
    // items(c0 int PRIMARY KEY, c1 text, c2 int)
    AddTable(MakeRelation(30001, "items", 3, {0}, {1}), {false, true, false}, {40}, false);
    // pairs(c0 text, c1 int, c2 int, c3 text), PRIMARY KEY (c2, c1): not in column order
    AddTable(MakeRelation(30002, "pairs", 4, {2, 1}, {0, 3}), {true, false, false, true}, {5, 6},
             false);
    // wide(c0 int, c1 int PRIMARY KEY, c2 text) with REPLICA IDENTITY FULL
    Relation wide = MakeRelation(30003, "wide", 3, {1}, {2});
    wide.set_replica_identity("f");
    AddTable(wide, {false, false, true}, {25}, true);
  }

  const Database& db() const { return db_; }
  std::vector<Action>& actions() { return actions_; }

  // The initial contents, copied by a bootstrap at `cp`.
  void Bootstrap(std::uint64_t cp) {
    std::vector<std::pair<std::size_t, Values>> copied;
    for (std::size_t t = 0; t < tables_.size(); ++t) {
      const int n = static_cast<int>(rng_() % 20);
      for (int i = 0; i < n; ++i) {
        auto row = NewRow(t);
        if (!row) break;
        db_[tables_[t].rel.oid()][KeyOfRow(tables_[t].rel, *row)] = *row;
        copied.emplace_back(t, *row);
      }
    }
    std::shuffle(copied.begin(), copied.end(), rng_);  // workers interleave tables
    Action begin;
    begin.kind = Action::kBeginBootstrap;
    begin.number = cp;
    actions_.push_back(begin);
    for (auto& [t, row] : copied) {
      Action a;
      a.kind = Action::kCopiedRow;
      a.rel = tables_[t].rel;
      a.row_bytes = ToRow(row).SerializeAsString();
      actions_.push_back(a);
    }
    Action end;
    end.kind = Action::kEndBootstrap;
    actions_.push_back(end);
    lsn_ = cp;
  }

  // One transaction (maybe preceded by a non-transactional message), as the plugin writes it.
  void Transaction(bool allow_chunks) {
    if (rng_() % 10 == 0) {
      lsn_ += 1 + rng_() % 30;
      Emit(MessageEv(false, lsn_));
    }
    const std::uint64_t commit_lsn = lsn_ + 100 + rng_() % 1000;
    lsn_ = commit_lsn;
    commit_ = commit_lsn;
    seq_ = 0;
    Emit(BeginEv(commit_lsn));
    const int n = rng_() % 8 == 0 ? static_cast<int>(rng_() % 40) : static_cast<int>(rng_() % 6);
    for (int i = 0; i < n; ++i) Operation(allow_chunks);
    Emit(CommitEv(commit_lsn, ++seq_));
    lsn_ = EndOf(commit_lsn);
  }

 private:
  void AddTable(Relation rel, std::vector<bool> is_text, std::vector<int> key_domain, bool full) {
    tables_.push_back({std::move(rel), std::move(is_text), std::move(key_domain), full});
  }

  void Emit(Event e) {
    Action a;
    a.event = std::move(e);
    actions_.push_back(std::move(a));
  }

  // The plugin sends a Relation before its first use in a session and after a change.
  void EnsureRelation(std::size_t t) {
    if (sent_.count(t) == 0) {
      Emit(RelationEv(tables_[t].rel));
      sent_.insert(t);
    }
  }

  Value RandomValue(std::size_t t, std::size_t column) {
    if (rng_() % 10 == 0) return Null();
    if (tables_[t].is_text[column]) {
      std::string s(rng_() % 6, 'a');
      for (char& c : s) c = static_cast<char>('a' + rng_() % 3);
      return Text(s);
    }
    return Int(static_cast<std::int64_t>(rng_() % 7) - 3);
  }

  std::vector<std::string> RandomKey(std::size_t t) {
    std::vector<std::string> key;
    for (int domain : tables_[t].key_domain) key.push_back(Ser(Int(rng_() % domain)));
    return key;
  }

  // A row with a key not in the table, or nothing when none was found quickly.
  std::optional<Values> NewRow(std::size_t t, const Values* base = nullptr) {
    const Table& table = tables_[t];
    const Contents& contents = db_[table.rel.oid()];
    for (int attempt = 0; attempt < 8; ++attempt) {
      const auto key = RandomKey(t);
      if (contents.count(KeyBytes(key))) continue;
      Values row;
      for (std::size_t c = 0; c < table.is_text.size(); ++c)
        row.push_back(base ? (*base)[c] : Ser(RandomValue(t, c)));
      for (int k = 0; k < table.rel.key_columns_size(); ++k) row[table.rel.key_columns(k)] = key[k];
      return row;
    }
    return std::nullopt;
  }

  // A random existing row of table t, if any.
  const Values* AnyRow(std::size_t t) {
    const Contents& contents = db_[tables_[t].rel.oid()];
    if (contents.empty()) return nullptr;
    auto it = contents.begin();
    std::advance(it, rng_() % contents.size());
    return &it->second;
  }

  Row KeyRow(std::size_t t, const Values& row) {
    Values key;
    for (auto k : tables_[t].rel.key_columns()) key.push_back(row[k]);
    return ToRow(key);
  }

  void Operation(bool allow_chunks) {
    const std::size_t t = rng_() % tables_.size();
    Table& table = tables_[t];
    const std::uint32_t oid = table.rel.oid();
    Contents& contents = db_[oid];
    const int op = static_cast<int>(rng_() % 100);
    if (op < 30) {  // INSERT
      auto row = NewRow(t);
      if (!row) return;
      EnsureRelation(t);
      Emit(InsertEv(oid, commit_, ++seq_, ToRow(*row)));
      contents[KeyOfRow(table.rel, *row)] = *row;
    } else if (op < 70) {  // UPDATE, of the key or not
      const Values* found = AnyRow(t);
      if (!found) return;
      const Values old = *found;
      std::optional<Values> updated = old;
      const bool key_change = op >= 55;
      if (key_change) updated = NewRow(t, &old);
      if (!updated) return;
      Values logged = *updated;  // what the WAL carries
      for (std::size_t c = 0; c < table.is_text.size(); ++c) {
        if (std::find(table.rel.key_columns().begin(), table.rel.key_columns().end(), c) !=
            table.rel.key_columns().end())
          continue;
        if (rng_() % 2) {
          (*updated)[c] = logged[c] = Ser(RandomValue(t, c));
        } else if (table.is_text[c] && !table.full && rng_() % 2) {
          logged[c] = Ser(Unchanged());  // an untouched TOASTed value
        }
      }
      EnsureRelation(t);
      const Row old_row = ToRow(old);
      Emit(UpdateEv(oid, commit_, ++seq_, KeyRow(t, old), ToRow(logged),
                    table.full ? &old_row : nullptr));
      contents.erase(KeyOfRow(table.rel, old));
      contents[KeyOfRow(table.rel, *updated)] = *updated;
    } else if (op < 85) {  // DELETE
      const Values* found = AnyRow(t);
      if (!found) return;
      const Values old = *found;
      EnsureRelation(t);
      Emit(DeleteEv(oid, commit_, ++seq_, KeyRow(t, old)));
      contents.erase(KeyOfRow(table.rel, old));
    } else if (op < 87) {  // TRUNCATE of one or two tables
      std::vector<std::uint32_t> oids = {oid};
      const std::size_t other = rng_() % tables_.size();
      if (other != t) oids.push_back(tables_[other].rel.oid());
      EnsureRelation(t);
      if (other != t) EnsureRelation(other);
      Emit(TruncateEv(oids, commit_, ++seq_));
      for (auto o : oids) db_[o].clear();
    } else if (op < 91) {  // a transactional message
      ++seq_;
      Emit(MessageEv(true, commit_ - 500 + seq_, commit_, seq_));
    } else if (op < 94) {  // ALTER TABLE: a new definition (same key)
      auto* column = table.rel.mutable_columns(rng_() % table.rel.columns_size());
      column->set_type_name(column->type_name() + "'");
      sent_.erase(t);
      if (rng_() % 2) EnsureRelation(t);  // else: sent with the next change
    } else if (allow_chunks) {            // a repair chunk at its high watermark
      ++seq_;
      Emit(MessageEv(true, commit_ - 500 + seq_, commit_, seq_, "dblog.hi"));
      Action begin;
      begin.kind = Action::kBeginChunk;
      begin.rel = table.rel;
      begin.number = ++request_id_;
      actions_.push_back(begin);
      for (const auto& [key, row] : contents) {
        if (rng_() % 2) continue;
        Action a;
        a.kind = Action::kChunkRow;
        a.row_bytes = ToRow(row).SerializeAsString();
        actions_.push_back(a);
      }
      for (int i = 0; i < 3; ++i) {
        const auto key = RandomKey(t);
        if (contents.count(KeyBytes(key))) continue;
        Action a;
        a.kind = Action::kChunkDelete;
        a.key = ToRow(key);
        actions_.push_back(a);
      }
      Action end;
      end.kind = Action::kEndChunk;
      actions_.push_back(end);
    }
  }

  std::mt19937_64& rng_;
  std::vector<Table> tables_;
  Database db_;
  std::vector<Action> actions_;
  std::set<std::size_t> sent_;  // tables whose Relation the plugin sent in this session
  std::uint64_t lsn_ = 1000;
  std::uint64_t commit_ = 0;
  std::uint32_t seq_ = 0;
  std::uint64_t request_id_ = 0;
};

// ---- The consumer ----------------------------------------------------------------------------

// Applies a stream from empty, checking the stream's invariants on the way. One Session per
// connection: Relations are known only from the session's own stream.
class Replica {
 public:
  Database db;
  // What the streams exercised, so the test can insist on it.
  std::map<std::string, int> seen;

  void NewSession(Position resume_after) {
    relations_.clear();
    resume_after_ = resume_after;
    unit_.reset();
    last_.reset();
    // in_chunk_ stays: a session resumed inside a chunk does not resend its ChunkBegin.
  }

  // Applies `e` unless it is beyond `stop_after`; false when it stopped there.
  bool Apply(const Emitted& emitted, std::optional<Position> stop_after = std::nullopt) {
    const StreamEvent& e = emitted.event;
    const auto pos = PositionOf(e);
    if (stop_after && pos && *pos > *stop_after) return false;
    if (e.has_relation()) {
      relations_[e.relation().oid()] = e.relation();
      return true;
    }
    EXPECT_TRUE(pos.has_value()) << e.ShortDebugString();
    if (!pos) return true;
    CheckPosition(e, *pos);
    switch (e.event_case()) {
      case StreamEvent::kChange:
        ApplyChange(emitted);
        break;
      case StreamEvent::kTruncate:
        for (auto oid : e.truncate().relation_oids()) {
          EXPECT_TRUE(relations_.count(oid)) << "Truncate before its Relation";
          db[oid].clear();
          ++seen["truncated table"];
        }
        break;
      case StreamEvent::kChunkBegin:
        EXPECT_TRUE(relations_.count(e.chunk_begin().relation_oid())) << "chunk before Relation";
        in_chunk_ = true;
        break;
      case StreamEvent::kChunkEnd:
        in_chunk_ = false;
        break;
      default:
        break;
    }
    return true;
  }

 private:
  // Positions strictly increase; only headers may be at or before the resume position; every
  // event but a non-transactional message is inside its unit; seqs have no gaps.
  void CheckPosition(const StreamEvent& e, Position pos) {
    const bool header = e.has_begin() || e.has_bootstrap_begin();
    if (last_) {
      EXPECT_GT(pos, *last_) << e.ShortDebugString();
    }
    last_ = pos;
    if (header) {
      EXPECT_FALSE(unit_.has_value()) << "a unit inside a unit";
      unit_ = pos;
      return;
    }
    EXPECT_GT(pos, resume_after_) << "resent " << e.ShortDebugString();
    if (e.has_message() && !e.message().transactional()) {
      EXPECT_FALSE(unit_.has_value());
      EXPECT_EQ(pos.seq, 0u);
      return;
    }
    EXPECT_TRUE(unit_.has_value()) << "outside a unit: " << e.ShortDebugString();
    if (!unit_) return;
    EXPECT_EQ(pos.commit_lsn, unit_->commit_lsn);
    // No gaps, except that a partly acknowledged unit resumes right after the resume point.
    const bool resumed_here = unit_->seq == 0 && resume_after_.commit_lsn == pos.commit_lsn;
    EXPECT_EQ(pos.seq, (resumed_here ? resume_after_.seq : unit_->seq) + 1) << e.ShortDebugString();
    unit_->seq = pos.seq;
    if (e.has_commit() || e.has_bootstrap_end()) unit_.reset();
  }

  void ApplyChange(const Emitted& emitted) {
    const Change& c = emitted.event.change();
    auto rel_it = relations_.find(c.relation_oid());
    EXPECT_NE(rel_it, relations_.end()) << "Change before its Relation";
    if (rel_it == relations_.end()) return;
    const Relation& rel = rel_it->second;
    Contents& contents = db[c.relation_oid()];
    const Values new_row = ToValues(c.new_row());
    const std::string old_key = KeyBytes(ToValues(c.old_key()));
    switch (c.kind()) {
      case Change::READ: {
        ++seen["read"];
        // Copied rows come verbatim from the copy path; none is older than the stream before it.
        EXPECT_TRUE(emitted.raw_new_row.has_value());
        contents[KeyOfRow(rel, new_row)] = new_row;
        break;
      }
      case Change::INSERT: {
        EXPECT_FALSE(in_chunk_);
        for (const auto& v : new_row) EXPECT_FALSE(IsUnchanged(v)) << "INSERT cannot keep a value";
        const bool fresh = contents.emplace(KeyOfRow(rel, new_row), new_row).second;
        EXPECT_TRUE(fresh) << "INSERT of an existing key";
        break;
      }
      case Change::UPDATE: {
        EXPECT_FALSE(in_chunk_);
        auto it = contents.find(old_key);
        EXPECT_NE(it, contents.end()) << "UPDATE of a missing key";
        if (it == contents.end()) return;
        Values row = new_row;
        bool kept = false;
        for (std::size_t i = 0; i < row.size(); ++i) {
          if (IsUnchanged(row[i])) {
            row[i] = it->second.at(i);
            kept = true;
          }
        }
        const std::string key = KeyOfRow(rel, row);
        // A key change is DELETE + INSERT unless the update keeps values of the old row.
        if (key != old_key) {
          EXPECT_TRUE(kept) << "key change sent as UPDATE";
          ++seen["key change kept as UPDATE"];
        }
        contents.erase(it);
        EXPECT_TRUE(contents.emplace(key, row).second) << "UPDATE onto an existing key";
        break;
      }
      case Change::DELETE: {
        // A chunk's absent key may already be absent here; a log DELETE's key may not.
        const bool erased = contents.erase(old_key) == 1;
        ++seen[in_chunk_ ? "chunk delete" : "delete"];
        if (!in_chunk_) {
          EXPECT_TRUE(erased) << "DELETE of a missing key";
        }
        break;
      }
      default:
        ADD_FAILURE() << "unexpected kind " << c.kind();
    }
  }

  std::map<std::uint32_t, Relation> relations_;
  Position resume_after_;
  std::optional<Position> unit_;  // the open unit's (commit_lsn, last seq seen)
  std::optional<Position> last_;
  bool in_chunk_ = false;
};

// The events of `stream` that carry a position after `after`, headers excepted: what a resumed
// session must resend, byte for byte.
std::vector<std::string> ResentPart(const std::vector<Emitted>& stream, Position after) {
  std::vector<std::string> out;
  for (const auto& e : stream) {
    const auto pos = PositionOf(e.event);
    if (!pos || e.event.has_begin() || e.event.has_bootstrap_begin() || *pos <= after) continue;
    out.push_back(e.raw);
  }
  return out;
}

std::string Dump(const Database& db) {
  std::string out;
  for (const auto& [oid, contents] : db) {
    for (const auto& [key, row] : contents)
      out += std::to_string(oid) + " " + ToRow(row).ShortDebugString() + "\n";
  }
  return out;
}

// Tables that ended up empty and tables never touched compare equal.
Database WithoutEmpty(Database db) {
  for (auto it = db.begin(); it != db.end();)
    it = it->second.empty() ? db.erase(it) : std::next(it);
  return db;
}

TEST(EmitterProperty, ReplayFromEmptyGivesTheSourceState) {
  std::mt19937_64 rng(0xdb109);
  int resumed_mid_unit = 0, bootstraps = 0, events = 0;
  std::uint64_t spliced_total = 0, viewed_total = 0;
  std::map<std::string, int> seen;
  for (int iter = 0; iter < 1500; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    Source source(rng);
    const bool bootstrap = rng() % 2;
    if (bootstrap) {
      source.Bootstrap(5000 + rng() % 1000);
      ++bootstraps;
    }
    const int ntx = static_cast<int>(rng() % 25);
    for (int i = 0; i < ntx; ++i) source.Transaction(/*allow_chunks=*/true);

    // The first session: everything, from empty.
    AckTracker acks(0);
    Emitter first(Position{}, &acks);
    Feed(first, source.actions());
    const std::string first_bytes = first.TakeOutput();
    const std::vector<Emitted> stream = ReadStream(first_bytes);
    {  // forwarding the plugin's bytes gives the same stream, byte for byte
      Emitter spliced;
      Feed(spliced, source.actions(), Handover::kRaw);
      ASSERT_EQ(spliced.TakeOutput(), first_bytes);
      spliced_total += spliced.changes_spliced();
    }
    {  // and so does reading them in place
      Emitter viewed;
      Feed(viewed, source.actions(), Handover::kView);
      ASSERT_EQ(viewed.TakeOutput(), first_bytes);
      viewed_total += viewed.changes_spliced();
    }
    events += static_cast<int>(stream.size());
    Replica replica;
    replica.NewSession({});
    for (const auto& e : stream) replica.Apply(e);
    for (const auto& [what, n] : replica.seen) seen[what] += n;
    ASSERT_EQ(WithoutEmpty(replica.db), WithoutEmpty(source.db()))
        << "replica:\n"
        << Dump(replica.db) << "source:\n"
        << Dump(source.db());
    ASSERT_FALSE(first.in_transaction());
    // Acknowledging the last position lets the slot confirm everything.
    if (first.last_position() != Position{}) acks.OnAck(first.last_position());
    EXPECT_EQ(acks.unacknowledged(), 0u);

    // A consumer that applied a prefix reconnects with its position.
    std::vector<Position> positions;
    for (const auto& e : stream) {
      if (auto p = PositionOf(e.event)) positions.push_back(*p);
    }
    Position resume{};
    const int pick = static_cast<int>(rng() % 10);
    if (!positions.empty() && pick < 6) {
      resume = positions[rng() % positions.size()];
    } else if (!positions.empty() && pick < 8) {  // a position nothing was sent at
      const Position near = positions[rng() % positions.size()];
      resume = {near.commit_lsn + (rng() % 3 == 0), static_cast<std::uint32_t>(rng() % 5)};
    } else if (!positions.empty() && pick < 9) {
      resume = {positions.back().commit_lsn + 1, 0};
    }
    Replica resumed;
    resumed.NewSession({});
    std::size_t applied = 0;
    while (applied < stream.size() && resumed.Apply(stream[applied], resume)) ++applied;

    Emitter second(resume);
    Feed(second, source.actions());
    const std::vector<Emitted> rest = ReadStream(second.TakeOutput());
    resumed.NewSession(resume);
    for (const auto& e : rest) resumed.Apply(e);
    ASSERT_EQ(WithoutEmpty(resumed.db), WithoutEmpty(source.db()))
        << "resumed after " << resume.ToString() << "\nreplica:\n"
        << Dump(resumed.db) << "source:\n"
        << Dump(source.db());
    ASSERT_EQ(ResentPart(rest, resume), ResentPart(stream, resume)) << resume.ToString();
    if (!rest.empty() && rest.front().event.has_begin() &&
        rest.front().event.begin().commit_lsn() == resume.commit_lsn && resume.seq > 0)
      ++resumed_mid_unit;
  }
  // The generator must reach the cases the test is about.
  EXPECT_GT(bootstraps, 500);
  EXPECT_GT(resumed_mid_unit, 300);
  EXPECT_GT(events, 100000);
  EXPECT_GT(spliced_total, 10000u) << "the splice path was taken";
  EXPECT_EQ(viewed_total, spliced_total) << "changes read in place are spliced alike";
  for (const char* what :
       {"truncated table", "key change kept as UPDATE", "chunk delete", "delete", "read"})
    EXPECT_GT(seen[what], 500) << what;
}

}  // namespace
}  // namespace dblog::emit::test
