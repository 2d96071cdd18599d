// sidecar/emit/emitter.cc: the one ordered emitter (see emitter.h).
#include "emit/emitter.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "common/varint.h"
#include "emit/ack_tracker.h"

namespace dblog::emit {
namespace {

using dblog::v1::Change;
using dblog::v1::Event;
using dblog::v1::StreamEvent;

constexpr int kLengthDelimited = 2;
constexpr int kEventBatchEvents = 1;  // EventBatch.events (== Batch.events)
constexpr int kChangeNewRow = 8;      // Change.new_row

std::size_t VarintSize(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Reads a varint at b[i], moving i past it; false when b ends inside it or it is too long.
bool ReadVarint(std::string_view b, std::size_t& i, std::uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && i < b.size(); shift += 7) {
    const auto byte = static_cast<unsigned char>(b[i++]);
    *v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

std::uint64_t LenTag(int field) {
  return (static_cast<std::uint64_t>(field) << 3) | kLengthDelimited;
}

[[noreturn]] void Fail(const std::string& what) {
  throw std::logic_error("dblog emitter: " + what);
}

}  // namespace

Emitter::Emitter(Position resume_after, AckTracker* acks)
    : resume_after_(resume_after), acks_(acks) {}

Emitter::Emitter(const Emitter& previous, AckTracker* acks)
    : resume_after_(previous.last_position()), acks_(acks) {
  last_ = previous.last_;
  sent_any_ = previous.sent_any_;
  // What `previous` was still to continue (the source lost again before the replay reached it),
  // unless it got further.
  continued_unit_ = previous.continued_unit_;
  cut_change_ = previous.cut_change_;
  cut_bytes_ = previous.cut_bytes_;
  cut_before_ = previous.cut_before_;
  if (previous.unit_.kind == UnitKind::kTransaction && previous.unit_.header_sent)
    continued_unit_ = previous.unit_.commit_lsn;
  if (previous.pieces_.send && previous.pieces_.due > 0) {
    // the consumer has the bytes processed so far, and those still to be skipped
    cut_change_ = previous.last_;
    cut_bytes_ = previous.pieces_.total - previous.pieces_.due + previous.pieces_.skip;
    cut_before_ = previous.complete_position();
  }
}

Position Emitter::complete_position() const {
  if (cut_bytes_ > 0) return cut_before_;  // the cut Change is not whole yet, nor decoded again
  return pieces_.send && pieces_.due > 0 ? pieces_.before : last_position();
}

std::string Emitter::TakeOutput() {
  std::string out;
  out.swap(output_);
  // The next output is likely as large: grow once, not by doubling (capped: memory is O(1)).
  output_.reserve(std::min<std::size_t>(out.size(), 1u << 20));
  return out;
}

// ---- Log path ------------------------------------------------------------------------------

void Emitter::OnBatch(dblog::v1::Batch batch) {
  for (Event& event : *batch.mutable_events()) Consume(event);
}

void Emitter::Consume(Event& event, std::string_view change_bytes) {
  // A chunk is emitted in one go at its high watermark; the log waits until it is closed.
  RequireNoChunk("a plugin event");
  if (event.has_value_piece()) return ConsumePiece(event.value_piece().data());
  RequireNoPiecesDue("a plugin event");
  switch (event.event_case()) {
    case Event::kBegin:
      return OnBegin(event.begin());
    case Event::kRelation:
      // Held until an event that is sent needs it (a skipped transaction must not lose it).
      return RememberRelation(event.relation());
    case Event::kChange:
      return OnChange(*event.mutable_change(), change_bytes);
    case Event::kTruncate:
      return OnTruncate(*event.mutable_truncate());
    case Event::kMessage:
      return OnMessage(*event.mutable_message());
    case Event::kCommit:
      return OnCommit(*event.mutable_commit());
    case Event::kValuePiece:
    case Event::EVENT_NOT_SET:
      break;
  }
  Fail("plugin event with no known member");
}

void Emitter::OnBegin(const dblog::v1::Begin& begin) {
  if (begin.commit_lsn() == 0) Fail("Begin without a commit LSN");
  if (unit_.kind != UnitKind::kNone)
    Fail("Begin of " + common::FormatLsn(begin.commit_lsn()) + " while a transaction or the bootstrap of " +
         common::FormatLsn(unit_.commit_lsn) + " is open");
  // Copied rows sit just below the consistent point: a transaction committed before it is in
  // the snapshot already; one whose commit record starts exactly at it is not, and is decoded.
  if (bootstrapped_ && begin.commit_lsn() < consistent_point_)
    Fail("transaction committed at " + common::FormatLsn(begin.commit_lsn()) +
         ", not after the bootstrap's consistent point " + common::FormatLsn(consistent_point_));
  unit_ = Unit{};
  unit_.kind = UnitKind::kTransaction;
  unit_.commit_lsn = begin.commit_lsn();
  unit_.end_lsn = begin.end_lsn();
  unit_.header_field = StreamEvent::kBegin;
  unit_.header = begin.SerializeAsString();
  // decoded again after a source reconnect: the consumer has this Begin already (the
  // transactions before it, decoded again too, are dropped whole by resume)
  if (continued_unit_ != 0 && begin.commit_lsn() >= continued_unit_) {
    unit_.header_sent = unit_.continued = begin.commit_lsn() == continued_unit_;
    continued_unit_ = 0;
  }
}

void Emitter::OnChange(Change& change, std::string_view raw) {
  RequireTransaction("a Change", change.commit_lsn());
  const dblog::v1::Relation& rel = KnownRelation(change.relation_oid(), "a Change");
  switch (change.kind()) {
    case Change::INSERT:
      RequireKeyColumns(rel, change.new_row().values_size(), "INSERT");
      break;
    case Change::DELETE:
      RequireKeyWidth(rel, change.old_key().values_size(), "DELETE");
      break;
    case Change::UPDATE:
      // Decided for dropped (resumed) events too: the split shifts the seqs after it.
      // A new row with unchanged TOAST values stays one UPDATE: only the old row has those
      // values, and an INSERT cannot say "keep the value of the row you just deleted".
      if (KeyChanged(rel, change) && !HasUnchanged(change.new_row())) {
        Change del;
        del.set_kind(Change::DELETE);
        del.set_relation_oid(change.relation_oid());
        del.set_lsn(change.lsn());
        del.set_xid(change.xid());
        del.set_commit_time(change.commit_time());
        del.mutable_old_key()->Swap(change.mutable_old_key());
        if (change.has_old_row()) del.mutable_old_row()->Swap(change.mutable_old_row());
        SendChange(del);
        change.clear_old_key();
        change.clear_old_row();
        change.set_kind(Change::INSERT);
        raw = {};  // no longer what the plugin sent
      }
      break;
    default:
      Fail("plugin Change of kind " + std::to_string(change.kind()) + " for relation " +
           std::to_string(change.relation_oid()));
  }
  SendChange(change, raw);
}

void Emitter::ConsumeChange(const wire::ChangeView& change) {
  RequireNoChunk("a plugin event");
  RequireNoPiecesDue("a plugin event");  // a view holds no split value (change_view.h)
  RequireTransaction("a Change", change.commit_lsn);
  const dblog::v1::Relation& rel = KnownRelation(change.relation_oid, "a Change");
  switch (change.kind) {
    case Change::INSERT:
      RequireKeyColumns(rel, static_cast<int>(change.new_row.size()), "INSERT");
      break;
    case Change::DELETE:
      RequireKeyWidth(rel, static_cast<int>(change.old_key.size()), "DELETE");
      break;
    case Change::UPDATE:
      if (KeyChanged(rel, change) && !change.new_row.HasUnchanged()) {
        Change parsed = Parsed(change);  // split the way of Consume
        return OnChange(parsed, {});
      }
      break;
    default:
      Fail("plugin Change of kind " + std::to_string(change.kind) + " for relation " +
           std::to_string(change.relation_oid));
  }
  const Position pos = NextPosition();
  if (!Admit(pos)) return;
  SendRelation(change.relation_oid);
  if (change.commit_lsn == pos.commit_lsn && AppendSplicedChange(change.raw, pos.seq)) return;
  Change parsed = Parsed(change);
  parsed.set_commit_lsn(pos.commit_lsn);
  parsed.set_seq(pos.seq);
  Append(StreamEvent::kChange, parsed);
}

Change Emitter::Parsed(const wire::ChangeView& change) {
  Change parsed;
  if (!change.ParseInto(&parsed)) Fail("a Change read in place does not parse");
  return parsed;
}

void Emitter::SendChange(Change& change, std::string_view raw) {
  const Position pos = NextPosition();
  const Position before = last_position();
  const bool admitted = Admit(pos);
  ExpectPieces(change, pos, admitted, before);
  if (!admitted) return;
  SendRelation(change.relation_oid());
  const bool same_commit_lsn = change.commit_lsn() == pos.commit_lsn;
  change.set_commit_lsn(pos.commit_lsn);
  change.set_seq(pos.seq);
  if (!raw.empty() && same_commit_lsn && AppendSplicedChange(raw, pos.seq)) return;
  Append(StreamEvent::kChange, change);
}

bool Emitter::AppendSplicedChange(std::string_view raw, std::uint32_t seq) {
  // Walk the fields: strictly increasing numbers (canonical), seq (4) a varint if present.
  std::size_t seq_begin = std::string_view::npos, seq_end = 0, at = 0;
  std::uint64_t last_field = 0;
  auto varint = [&raw, &at](std::uint64_t* v) { return ReadVarint(raw, at, v); };
  while (at < raw.size()) {
    const std::size_t field_begin = at;
    std::uint64_t tag = 0, value = 0;
    if (!varint(&tag)) return false;
    const std::uint64_t field = tag >> 3;
    if (field <= last_field) return false;
    last_field = field;
    switch (tag & 7) {
      case 0:
        if (!varint(&value)) return false;
        break;
      case 2:
        if (!varint(&value) || value > raw.size() - at) return false;
        at += value;
        break;
      default:
        return false;  // Change has no fixed-width fields
    }
    if (field == 4) {
      seq_begin = field_begin;
      seq_end = at;
    } else if (field < 4) {
      seq_end = at;  // seq, when absent, goes after the fields before it
    }
  }
  if (seq_begin == std::string_view::npos) seq_begin = seq_end;
  std::string seq_field;
  if (seq != 0) {  // proto3 leaves zero out
    seq_field.push_back(static_cast<char>(4 << 3));
    common::AppendVarint(seq_field, seq);
  }
  const std::size_t size = seq_begin + seq_field.size() + (raw.size() - seq_end);
  const std::size_t before = output_.size();
  AppendEnvelope(StreamEvent::kChange, size);
  output_.append(raw.data(), seq_begin);
  output_.append(seq_field);
  output_.append(raw.data() + seq_end, raw.size() - seq_end);
  bytes_emitted_ += output_.size() - before;
  ++changes_spliced_;
  return true;
}

void Emitter::OnTruncate(dblog::v1::Truncate& truncate) {
  RequireTransaction("a Truncate", truncate.commit_lsn());
  for (std::uint32_t oid : truncate.relation_oids()) KnownRelation(oid, "a Truncate");
  const Position pos = NextPosition();
  if (!Admit(pos)) return;
  for (std::uint32_t oid : truncate.relation_oids()) SendRelation(oid);
  truncate.set_commit_lsn(pos.commit_lsn);
  truncate.set_seq(pos.seq);
  Append(StreamEvent::kTruncate, truncate);
}

void Emitter::OnMessage(dblog::v1::Message& message) {
  if (message.transactional()) {
    RequireTransaction("a transactional Message", message.commit_lsn());
    const Position pos = NextPosition();
    if (!Admit(pos)) return;
    message.set_commit_lsn(pos.commit_lsn);
    message.set_seq(pos.seq);
    Append(StreamEvent::kMessage, message);
    return;
  }
  // Non-transactional: decoded as it is read, between transactions; everything committed
  // before its LSN is already out and everything after commits later. Its position is
  // (lsn, 0), written into commit_lsn so that every positioned event reads the same way.
  if (unit_.kind != UnitKind::kNone)
    Fail("non-transactional Message at " + common::FormatLsn(message.lsn()) + " inside the unit of " +
         common::FormatLsn(unit_.commit_lsn));
  const Position pos{message.lsn(), 0};
  if (pos <= resume_after_) return;
  Advance(pos, "non-transactional Message");
  message.set_commit_lsn(pos.commit_lsn);
  message.set_seq(0);
  Append(StreamEvent::kMessage, message);
  // Confirming up to (not past) its own LSN: after a restart it is decoded again and the
  // consumer's resume position drops it.
  if (acks_ != nullptr) acks_->OnCommitEmitted(pos, message.lsn());
}

void Emitter::OnCommit(dblog::v1::Commit& commit) {
  RequireTransaction("a Commit", commit.commit_lsn());
  RequireNoChunk("a Commit");
  Position pos = NextPosition();
  const std::uint64_t end_lsn = commit.end_lsn() != 0 ? commit.end_lsn() : unit_.end_lsn;
  bool send = Admit(pos);
  if (!send && unit_.continued) {
    // The consumer has this transaction's Begin and events up to resume_after_, not its
    // Commit: a repair chunk's events, which the replay does not have (a chunk is never sent
    // again), took seqs past the Commit's. It goes out after the last position sent.
    pos = Position{unit_.commit_lsn, last_.seq + 1};
    Advance(pos, "Commit");
    send = true;
  }
  if (send) {
    commit.set_seq(pos.seq);
    Append(StreamEvent::kCommit, commit);
  }
  unit_ = Unit{};
  if (send && acks_ != nullptr) acks_->OnCommitEmitted(pos, end_lsn);
}

// ---- Bootstrap -----------------------------------------------------------------------------

void Emitter::BeginBootstrap(std::uint64_t consistent_point, bool restarted,
                             std::vector<dblog::v1::TableProgress> estimates) {
  RequireNoPiecesDue("BeginBootstrap");
  if (unit_.kind != UnitKind::kNone || bootstrapped_)
    Fail("BeginBootstrap while a transaction or bootstrap is open, or after a bootstrap");
  if (consistent_point == 0) Fail("BeginBootstrap without a consistent point");
  dblog::v1::BootstrapBegin header;
  header.set_consistent_point(consistent_point);
  header.set_restarted(restarted);
  for (auto& t : estimates) *header.add_tables() = std::move(t);
  unit_ = Unit{};
  unit_.kind = UnitKind::kBootstrap;
  // One below the consistent point, so that a commit record starting exactly at it still
  // sorts after every copied row.
  unit_.commit_lsn = consistent_point - 1;
  unit_.end_lsn = consistent_point;
  unit_.header_field = StreamEvent::kBootstrapBegin;
  unit_.header = header.SerializeAsString();
}

void Emitter::EmitCopiedRow(const dblog::v1::Relation& rel, std::string_view row_bytes) {
  if (unit_.kind != UnitKind::kBootstrap) Fail("EmitCopiedRow outside a bootstrap");
  RememberRelation(rel);
  EmitCopiedRowOf(rel.oid(), row_bytes);
}

void Emitter::EmitCopiedRows(const dblog::v1::Relation& rel,
                             const std::vector<std::string_view>& rows) {
  if (unit_.kind != UnitKind::kBootstrap) Fail("EmitCopiedRows outside a bootstrap");
  RememberRelation(rel);
  for (std::string_view row : rows) EmitCopiedRowOf(rel.oid(), row);
}

void Emitter::EmitCopiedRowOf(std::uint32_t relation_oid, std::string_view row_bytes) {
  const Position pos = NextPosition();
  if (!Admit(pos)) return;
  SendRelation(relation_oid);
  SendReadRow(relation_oid, pos, row_bytes);
}

void Emitter::EndBootstrap(std::vector<dblog::v1::TableProgress> counts) {
  if (unit_.kind != UnitKind::kBootstrap) Fail("EndBootstrap outside a bootstrap");
  const Position pos = NextPosition();
  const bool send = Admit(pos);
  if (send) {
    dblog::v1::BootstrapEnd end;
    end.set_consistent_point(unit_.end_lsn);
    end.set_commit_lsn(pos.commit_lsn);
    end.set_seq(pos.seq);
    for (auto& t : counts) *end.add_tables() = std::move(t);
    Append(StreamEvent::kBootstrapEnd, end);
  }
  bootstrapped_ = true;
  consistent_point_ = unit_.end_lsn;
  const std::uint64_t confirm_to = unit_.end_lsn;
  unit_ = Unit{};
  // Acknowledging the end confirms the slot to the consistent point, where it started: what
  // matters is that nothing later is confirmed before the copy is acknowledged.
  if (send && acks_ != nullptr) acks_->OnCommitEmitted(pos, confirm_to);
}

// ---- Repair chunks -------------------------------------------------------------------------

void Emitter::BeginChunk(const dblog::v1::Relation& rel, dblog::v1::ChunkBegin chunk) {
  RequireTransaction("BeginChunk", unit_.commit_lsn);
  RequireNoChunk("BeginChunk");
  RequireNoPiecesDue("BeginChunk");
  if (chunk.relation_oid() != 0 && chunk.relation_oid() != rel.oid())
    Fail("BeginChunk for relation " + std::to_string(chunk.relation_oid()) +
         " with the Relation of " + std::to_string(rel.oid()));
  RememberRelation(rel);
  // A range's bounds are whole keys, never a prefix: consumers compare them value by value.
  if (chunk.has_from_key())
    RequireKeyWidth(rel, chunk.from_key().values_size(), "ChunkBegin.from_key");
  if (chunk.has_to_key())
    RequireKeyWidth(rel, chunk.to_key().values_size(), "ChunkBegin.to_key");
  if (chunk.key_collations_size() != 0 && chunk.key_collations_size() != rel.key_columns_size())
    Fail("ChunkBegin with " + std::to_string(chunk.key_collations_size()) +
         " key collations for a key of " + std::to_string(rel.key_columns_size()) + " columns");
  chunk_ = Chunk{true, chunk.request_id(), rel.oid(), 0, 0};
  const Position pos = NextPosition();
  if (!Admit(pos)) return;
  SendRelation(rel.oid());
  chunk.set_relation_oid(rel.oid());
  chunk.set_commit_lsn(pos.commit_lsn);
  chunk.set_seq(pos.seq);
  Append(StreamEvent::kChunkBegin, chunk);
}

void Emitter::EmitChunkRow(std::string_view row_bytes) {
  if (!chunk_.open) Fail("EmitChunkRow outside a chunk");
  ++chunk_.rows;
  const Position pos = NextPosition();
  if (!Admit(pos)) return;
  SendRelation(chunk_.relation_oid);
  SendReadRow(chunk_.relation_oid, pos, row_bytes);
}

void Emitter::EmitChunkDelete(const dblog::v1::Row& key) {
  if (!chunk_.open) Fail("EmitChunkDelete outside a chunk");
  RequireKeyWidth(KnownRelation(chunk_.relation_oid, "EmitChunkDelete"), key.values_size(),
                  "EmitChunkDelete");
  ++chunk_.deletes;
  Change del;
  del.set_kind(Change::DELETE);
  *del.mutable_old_key() = key;
  SendChunkChange(del);
}

void Emitter::EmitChunkFill(const dblog::v1::Row& row) {
  if (!chunk_.open) Fail("EmitChunkFill outside a chunk");
  const dblog::v1::Relation& rel = KnownRelation(chunk_.relation_oid, "EmitChunkFill");
  if (row.values_size() != rel.columns_size())
    Fail("EmitChunkFill: a row of " + std::to_string(row.values_size()) + " values for " +
         std::to_string(rel.columns_size()) + " columns");
  for (const auto& v : row.values())
    if (v.has_split()) Fail("EmitChunkFill: a split value (a chunk's row has no pieces)");
  Change fill;
  fill.set_kind(Change::UPDATE);
  *fill.mutable_new_row() = row;
  SendChunkChange(fill);
}

void Emitter::SendChunkChange(Change& change) {
  const Position pos = NextPosition();
  if (!Admit(pos)) return;
  SendRelation(chunk_.relation_oid);
  change.set_relation_oid(chunk_.relation_oid);
  change.set_commit_lsn(pos.commit_lsn);
  change.set_seq(pos.seq);
  Append(StreamEvent::kChange, change);
}

void Emitter::EndChunk(const std::vector<dblog::v1::Row>& kept_keys, bool last) {
  if (!chunk_.open) Fail("EndChunk outside a chunk");
  const Chunk chunk = chunk_;
  chunk_ = Chunk{};
  const Position pos = NextPosition();
  if (!Admit(pos)) return;
  dblog::v1::ChunkEnd end;
  end.set_request_id(chunk.request_id);
  end.set_relation_oid(chunk.relation_oid);
  end.set_commit_lsn(pos.commit_lsn);
  end.set_seq(pos.seq);
  end.set_rows(chunk.rows);
  end.set_deletes(chunk.deletes);
  for (const auto& key : kept_keys) *end.add_kept_keys() = key;
  end.set_last(last);
  Append(StreamEvent::kChunkEnd, end);
}

// ---- Checks --------------------------------------------------------------------------------

void Emitter::RequireTransaction(const char* what, std::uint64_t commit_lsn) const {
  if (unit_.kind != UnitKind::kTransaction)
    Fail(std::string(what) + " outside a transaction (at " + common::FormatLsn(commit_lsn) + ")");
  if (commit_lsn != unit_.commit_lsn)
    Fail(std::string(what) + " of the transaction at " + common::FormatLsn(commit_lsn) +
         " inside the transaction at " + common::FormatLsn(unit_.commit_lsn));
}

void Emitter::RequireNoChunk(const char* what) const {
  if (chunk_.open)
    Fail(std::string(what) + " while the chunk of request " + std::to_string(chunk_.request_id) +
         " is open");
}

void Emitter::ExpectPieces(const Change& change, Position pos, bool sent, Position before) {
  constexpr std::uint64_t kMaxValueBytes = 1u << 30;  // PostgreSQL's largest value
  std::uint64_t due = 0;
  const auto& values = change.new_row().values();
  for (int i = 0; i < values.size(); ++i) {
    if (!values[i].has_split()) continue;
    const dblog::v1::SplitValue& split = values[i].split();
    if (split.kind() != dblog::v1::SplitValue::TEXT &&
        split.kind() != dblog::v1::SplitValue::BYTES &&
        split.kind() != dblog::v1::SplitValue::LITERAL)
      Fail("a split value of kind " + std::to_string(split.kind()));
    if (split.length() == 0 || split.length() > kMaxValueBytes)
      Fail("a split value of " + std::to_string(split.length()) + " bytes");
    const auto& keys = KnownRelation(change.relation_oid(), "a Change").key_columns();
    if (std::find(keys.begin(), keys.end(), static_cast<std::uint32_t>(i)) != keys.end())
      Fail("a split value in key column " + std::to_string(i));
    due += split.length();
  }
  for (const dblog::v1::Row* row : {&change.old_key(), &change.old_row()})
    for (const auto& v : row->values())
      if (v.has_split()) Fail("a split value outside a Change's new row");
  pieces_ = Pieces{due, due, sent, 0, before};
  if (cut_bytes_ > 0 && pos == cut_change_ && !sent && due > cut_bytes_) {
    // the consumer has this Change and its first cut_bytes_ bytes (Emitter(previous, acks))
    pieces_.send = true;
    pieces_.skip = cut_bytes_;
    pieces_.before = cut_before_;
  }
  if (!(pos < cut_change_)) cut_bytes_ = 0;  // the cut Change is past
}

void Emitter::ConsumePiece(std::string_view data) {
  RequireNoChunk("a plugin event");
  const std::size_t size = data.size();
  if (pieces_.due == 0) Fail("a ValuePiece that no Change's split value waits for");
  if (size == 0 || size > pieces_.due)
    Fail("a ValuePiece of " + std::to_string(size) + " bytes where " +
         std::to_string(pieces_.due) + " are due");
  pieces_.due -= size;
  if (!pieces_.send) return;
  if (pieces_.skip >= size) {
    pieces_.skip -= size;
    return;
  }
  data.remove_prefix(static_cast<std::size_t>(pieces_.skip));
  pieces_.skip = 0;
  // ValuePiece{data}, written around the bytes: copied once, into the output
  const std::size_t before = output_.size();
  const std::uint64_t data_tag = LenTag(dblog::v1::ValuePiece::kDataFieldNumber);
  AppendEnvelope(StreamEvent::kValuePiece,
                 VarintSize(data_tag) + VarintSize(data.size()) + data.size());
  common::AppendVarint(output_, data_tag);
  common::AppendVarint(output_, data.size());
  output_.append(data.data(), data.size());
  bytes_emitted_ += output_.size() - before;
}

void Emitter::RequireNoPiecesDue(const char* what) const {
  if (pieces_.due != 0)
    Fail(std::string(what) + " while " + std::to_string(pieces_.due) +
         " bytes of the last Change's split values are due");
}

void Emitter::RememberRelation(const dblog::v1::Relation& rel) {
  // Rows are identified by key: a Relation without a usable one cannot be streamed correctly.
  if (rel.key_columns_size() == 0)
    Fail("Relation " + std::to_string(rel.oid()) + " (" + rel.schema() + "." + rel.name() +
         ") has no key columns");
  for (std::uint32_t column : rel.key_columns()) {
    if (column >= static_cast<std::uint32_t>(rel.columns_size()))
      Fail("Relation " + std::to_string(rel.oid()) + " names key column " + std::to_string(column) +
           " of " + std::to_string(rel.columns_size()));
  }
  RelationState& state = relations_[rel.oid()];
  std::string bytes = rel.SerializeAsString();
  if (bytes == state.latest_bytes) return;
  state.latest = rel;
  state.latest_bytes = std::move(bytes);
  state.latest_sent = state.latest_bytes == state.sent_bytes;
}

const dblog::v1::Relation& Emitter::KnownRelation(std::uint32_t oid, const char* what) const {
  auto it = relations_.find(oid);
  if (it == relations_.end())
    Fail(std::string(what) + " for relation " + std::to_string(oid) + " before its Relation");
  return it->second.latest;
}

void Emitter::RequireKeyWidth(const dblog::v1::Relation& rel, int key_values,
                              const char* what) const {
  if (key_values != rel.key_columns_size())
    Fail(std::string(what) + " of relation " + std::to_string(rel.oid()) + " with a key of " +
         std::to_string(key_values) + " values for a key of " +
         std::to_string(rel.key_columns_size()) + " columns");
}

void Emitter::RequireKeyColumns(const dblog::v1::Relation& rel, int row_values,
                                const char* what) const {
  for (std::uint32_t column : rel.key_columns()) {
    if (column >= static_cast<std::uint32_t>(row_values))
      Fail(std::string(what) + " of relation " + std::to_string(rel.oid()) +
           " whose row has no key column " + std::to_string(column));
  }
}

bool Emitter::HasUnchanged(const dblog::v1::Row& row) {
  for (const dblog::v1::Value& v : row.values()) {
    if (v.kind_case() == dblog::v1::Value::kUnchanged) return true;
  }
  return false;
}

// Compares the update's old key with the key read from its new row. Values are compared by
// their encoding: both come from the same encoder, and where the encodings differ for values
// PostgreSQL deems equal (say -0.0 and 0.0) a DELETE + INSERT is still a correct rendering.
bool Emitter::KeyChanged(const dblog::v1::Relation& rel, const Change& change) const {
  RequireKeyWidth(rel, change.old_key().values_size(), "UPDATE");
  RequireKeyColumns(rel, change.new_row().values_size(), "UPDATE");
  const auto& old_key = change.old_key().values();
  const auto& new_row = change.new_row().values();
  for (int i = 0; i < rel.key_columns_size(); ++i) {
    // (An unchanged TOAST value in a key column, impossible in practice, reads as a change here
    // and leaves the update whole through the unchanged-value rule in OnChange: still UPDATE.)
    const dblog::v1::Value& now = new_row[static_cast<int>(rel.key_columns(i))];
    if (now.kind_case() != old_key[i].kind_case() ||
        now.SerializeAsString() != old_key[i].SerializeAsString())
      return true;
  }
  return false;
}

bool Emitter::KeyChanged(const dblog::v1::Relation& rel, const wire::ChangeView& change) const {
  RequireKeyWidth(rel, static_cast<int>(change.old_key.size()), "UPDATE");
  RequireKeyColumns(rel, static_cast<int>(change.new_row.size()), "UPDATE");
  for (int i = 0; i < rel.key_columns_size(); ++i) {
    // the same comparison as above: canonical bytes are what SerializeAsString gives
    const wire::ValueView& now = change.new_row[rel.key_columns(i)];
    const wire::ValueView& was = change.old_key[static_cast<std::size_t>(i)];
    if (now.kind != was.kind || now.bytes != was.bytes) return true;
  }
  return false;
}

// ---- Emission ------------------------------------------------------------------------------

bool Emitter::Admit(Position pos) {
  if (pos <= resume_after_) return false;
  if (!unit_.header_sent) {
    // The header's own position, (commit_lsn, 0), may be at or before resume_after: a partly
    // acknowledged unit still starts with it.
    Advance({unit_.commit_lsn, 0},
            unit_.header_field == StreamEvent::kBegin ? "Begin" : "BootstrapBegin");
    AppendBytes(unit_.header_field, unit_.header);
    unit_.header_sent = true;
    std::string().swap(unit_.header);
  }
  Advance(pos, "event");
  return true;
}

void Emitter::Advance(Position pos, const char* what) {
  if (sent_any_ && pos <= last_)
    Fail(std::string(what) + " at " + pos.ToString() + " is not after the last position sent, " +
         last_.ToString());
  last_ = pos;
  sent_any_ = true;
}

void Emitter::SendRelation(std::uint32_t oid) {
  RelationState& state = relations_.at(oid);
  if (state.latest_sent) return;  // per row: a flag, not a comparison of the two definitions
  AppendBytes(StreamEvent::kRelation, state.latest_bytes);
  state.sent_bytes = state.latest_bytes;
  state.latest_sent = true;
}

// A READ Change laid out as a log Change is (fields in number order), with the row's bytes
// written through untouched rather than parsed and serialized again.
void Emitter::SendReadRow(std::uint32_t relation_oid, Position pos, std::string_view row_bytes) {
  // Change fields 1-4 (kind, relation_oid, commit_lsn, seq: varints, zero ones left out as
  // proto3 does), then new_row (8); nothing after it. Written by hand: this runs per copied row.
  char head[4 * 11];
  std::size_t head_size = 0;
  auto put = [&head, &head_size](int field, std::uint64_t v) {
    if (v == 0) return;
    head[head_size++] = static_cast<char>(field << 3);
    while (v >= 0x80) {
      head[head_size++] = static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    head[head_size++] = static_cast<char>(v);
  };
  put(1, Change::READ);
  put(2, relation_oid);
  put(3, pos.commit_lsn);
  put(4, pos.seq);
  const std::size_t size = head_size + VarintSize(LenTag(kChangeNewRow)) +
                           VarintSize(row_bytes.size()) + row_bytes.size();
  const std::size_t before = output_.size();
  AppendEnvelope(StreamEvent::kChange, size);
  output_.append(head, head_size);
  common::AppendVarint(output_, LenTag(kChangeNewRow));
  common::AppendVarint(output_, row_bytes.size());
  output_.append(row_bytes.data(), row_bytes.size());
  bytes_emitted_ += output_.size() - before;
}

void Emitter::Append(int field, const google::protobuf::MessageLite& member) {
  const std::size_t before = output_.size();
  const std::size_t size = member.ByteSizeLong();
  AppendEnvelope(field, size);
  const std::size_t at = output_.size();
  output_.resize(at + size);
  member.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(&output_[at]));
  bytes_emitted_ += output_.size() - before;
}

void Emitter::AppendBytes(int field, std::string_view member) {
  const std::size_t before = output_.size();
  AppendEnvelope(field, member.size());
  output_.append(member.data(), member.size());
  bytes_emitted_ += output_.size() - before;
}

void Emitter::AppendEnvelope(int field, std::size_t member_size) {
  const std::size_t event_size = VarintSize(LenTag(field)) + VarintSize(member_size) + member_size;
  common::AppendVarint(output_, LenTag(kEventBatchEvents));
  common::AppendVarint(output_, event_size);
  common::AppendVarint(output_, LenTag(field));
  common::AppendVarint(output_, member_size);
  ++events_emitted_;
}

// (see emitter.h) Batch{repeated Event events = 1}, Event{oneof ...; Change change = 3; ...}.
std::vector<std::string_view> ChangeBytes(std::string_view batch, int events) {
  std::vector<std::string_view> out;
  out.reserve(static_cast<std::size_t>(events));
  std::size_t at = 0;
  // One length-delimited field at i: its number and payload.
  auto field = [](std::string_view b, std::size_t& i, std::uint64_t* number,
                  std::string_view* payload) {
    std::uint64_t tag = 0, len = 0;
    if (!ReadVarint(b, i, &tag) || (tag & 7) != 2 || !ReadVarint(b, i, &len) ||
        len > b.size() - i)
      return false;
    *number = tag >> 3;
    *payload = b.substr(i, len);
    i += len;
    return true;
  };
  while (at < batch.size()) {
    std::uint64_t number = 0;
    std::string_view event;
    if (!field(batch, at, &number, &event) || number != 1) return {};
    std::size_t j = 0;
    std::uint64_t member = 0;
    std::string_view payload;
    if (!field(event, j, &member, &payload) || j != event.size()) return {};
    out.push_back(member == 3 ? payload : std::string_view());
  }
  if (out.size() != static_cast<std::size_t>(events)) return {};
  return out;
}

}  // namespace dblog::emit
