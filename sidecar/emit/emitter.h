// sidecar/emit/emitter.h: the one ordered emitter. Every consumer event dblogd sends is produced
// here, so the stream's invariants live in one place:
//
//  - Positions. Every positioned event gets (commit_lsn, seq) from the emitter, strictly
//    increasing over the whole stream. A log transaction's Begin is (commit_lsn, 0); its Change,
//    Truncate, Message and Commit events are renumbered 1, 2, 3... (the plugin's seq is not
//    trusted: a primary-key update becomes two events, and repair chunks add rows). Renumbering
//    is a pure function of the plugin's events, so a transaction decoded again after a reconnect
//    gets the same positions (chunk rows excepted: see BeginChunk).
//  - Primary-key updates. An UPDATE whose old key differs from the key in its new row is sent as
//    DELETE(old_key) + INSERT(new_row), so an applier keyed by primary key never has to move a
//    row. Exception: when the new row has unchanged TOAST values (REPLICA IDENTITY DEFAULT or
//    INDEX; PostgreSQL logs no value for them), it stays one UPDATE with old_key != key(new_row):
//    the values to keep belong to the old row, which an INSERT could not refer to. An applier
//    handles it as "take the row at old_key, keep its unchanged columns, store it at the new key".
//  - Relations. A Relation is sent before the first event that needs it, and again only when its
//    definition changed; never dropped by resume.
//  - Resume. Events at or before `resume_after` are dropped (the consumer has them). Headers
//    (Begin, BootstrapBegin) are sent lazily, just before the first event of their unit that is
//    sent, so a fully acknowledged transaction produces nothing and a partly acknowledged one
//    still starts with its Begin.
//  - Split values. A log Change's long values may come in pieces (change.proto, SplitValue):
//    the ValuePiece events right after it, exactly as many bytes as its split values' lengths
//    add up to, nothing in between. They go out right after the Change, unpositioned, or are
//    dropped with it (resume); anything else before the last piece, or a piece no Change owes,
//    breaks the plugin's contract. A split value is never a key column's.
//  - Non-transactional messages are decoded between transactions, so they sit at (lsn, 0),
//    written into their commit_lsn and seq like every other positioned event.
//  - Ordering guard. A position at or before the last one sent (and not dropped by resume) is a
//    bug or a corrupt input: std::logic_error, never a silently disordered stream. After any
//    std::logic_error the emitter's state is unspecified: the owner ends the session.
//
// Output: StreamEvents in EventBatch wire form (each one is EventBatch field 1), appended to an
// internal buffer the owner drains with TakeOutput() and frames as ServerMessage.events. Memory
// is O(relations), plus the output the owner has not drained: nothing is held per transaction,
// so a transaction of any size streams through.
//
// Owns: positions, event rendering, dedup. Does not touch sockets, libpq or the slot; does not
// decide which rows a chunk holds (window/ does).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dblog/v1/change.pb.h"
#include "dblog/v1/consumer.pb.h"
#include "wire/change_view.h"
#include "emit/position.h"

namespace dblog::emit {

class AckTracker;

class Emitter {
 public:
  // resume_after: the consumer's Hello.resume_after (zero when unset: nothing is dropped).
  // acks, when given, is told of every emitted acknowledgeable point (Commit, BootstrapEnd,
  // non-transactional Message); it must outlive the emitter.
  explicit Emitter(Position resume_after = {}, AckTracker* acks = nullptr);
  // The emitter after `previous` on the same consumer connection, for the slot's stream decoded
  // again (a source reconnect): it resumes after previous.last_position(), and where the
  // consumer already has part of a transaction, continues it as the consumer expects: that
  // transaction's Begin is not sent again, and a Change whose pieces were cut short gets the
  // rest of them (by their bytes) when it is decoded again.
  Emitter(const Emitter& previous, AckTracker* acks);

  // ---- Log path: the plugin's events, in log order. -------------------------------------
  // Throws std::logic_error on input that breaks the plugin's contract (a Change outside a
  // transaction, before its Relation, with a commit_lsn not its transaction's, ...).
  // Consume takes what it needs out of `event` and may leave it changed: the pipeline parses
  // into an arena and hands events over by reference, so nothing is copied out of it.
  // change_bytes, when given, are the plugin's own bytes of the event's Change (the payload of
  // Event.change in the plugin's message): a Change that goes out as it came but for its seq is
  // then written from them instead of being serialized again (commit_lsn is the same: it is the
  // transaction's). They must be what `event` was parsed from.
  void Consume(dblog::v1::Event& event, std::string_view change_bytes = {});
  // A Change read in place (change_view.h), as Consume would take the event holding it: the
  // same checks and output, from the plugin's bytes (a key-changing UPDATE, or one that cannot
  // be written from them, is parsed and goes the way of Consume).
  void ConsumeChange(const wire::ChangeView& change);
  // A ValuePiece's data read in place, as Consume would take the event holding it.
  void ConsumePiece(std::string_view data);
  void OnEvent(dblog::v1::Event event) { Consume(event); }
  void OnBatch(dblog::v1::Batch batch);

  // ---- Bootstrap (point splice). ---------------------------------------------------------
  // BootstrapBegin at (consistent_point - 1, 0), copied rows at (consistent_point - 1, 1..n),
  // BootstrapEnd after them: one below the consistent point, so that a transaction whose commit
  // record starts exactly at it (not in the snapshot, so decoded) still sorts after the copy. A
  // log transaction committed before consistent_point is a logic error.
  void BeginBootstrap(std::uint64_t consistent_point, bool restarted,
                      std::vector<dblog::v1::TableProgress> estimates);
  // row_bytes: a serialized dblog.v1.Row from the shared encoder (dblog.encode_row). It is
  // embedded verbatim as Change.new_row: the consumer gets the encoder's exact bytes.
  void EmitCopiedRow(const dblog::v1::Relation& rel, std::string_view row_bytes);
  // The same for a run of rows of one relation (its Relation is checked once for all).
  void EmitCopiedRows(const dblog::v1::Relation& rel, const std::vector<std::string_view>& rows);
  void EndBootstrap(std::vector<dblog::v1::TableProgress> counts);

  // ---- Repair chunks, injected into the high watermark's own transaction. ----------------
  // Only between that transaction's Begin and its Commit, after the events fed so far; the
  // chunk's events take that transaction's next seqs. No log event may arrive while a chunk is
  // open. `chunk`'s position fields are assigned here, relation_oid is rel.oid().
  // The seqs after a chunk depend on the chunk, so they are only stable across reconnects if
  // the chunk is. It never is: a reconnect abandons the window, so the high watermark's
  // transaction is decoded again without a chunk (Begin + Commit at seq 1), and a consumer
  // resuming inside the chunk gets nothing of that transaction; the request redoes the chunk
  // under a new window (docs/protocol.md, "Resuming inside a transaction").
  void BeginChunk(const dblog::v1::Relation& rel, dblog::v1::ChunkBegin chunk);
  // A surviving row (READ), row_bytes embedded verbatim as in EmitCopiedRow.
  void EmitChunkRow(std::string_view row_bytes);
  // A key the chunk asked for and found absent (DELETE with old_key = key, in key order).
  void EmitChunkDelete(const dblog::v1::Row& key);
  // A fill (window.h, Window::Fill): an UPDATE of a kept key whose new_row carries the key
  // columns and the filled columns, every other column marked unchanged ("keep yours").
  void EmitChunkFill(const dblog::v1::Row& row);
  // ChunkEnd with the counts of rows and deletes given since BeginChunk.
  // kept_keys: for range chunks, the keys the log carried while the window was open (the
  // applier keeps them); last: the request's last chunk.
  void EndChunk(const std::vector<dblog::v1::Row>& kept_keys = {}, bool last = false);

  // ---- Output. ------------------------------------------------------------------------
  // The serialized StreamEvents since the last call, as EventBatch bytes (possibly empty).
  std::string TakeOutput();
  const std::string& output() const { return output_; }

  std::uint64_t events_emitted() const { return events_emitted_; }
  std::uint64_t bytes_emitted() const { return bytes_emitted_; }
  // Log Changes written from the plugin's bytes (Consume's change_bytes) rather than serialized.
  std::uint64_t changes_spliced() const { return changes_spliced_; }
  // Where the consumer's stream stands: the last position sent, or resume_after while nothing
  // after it was sent. Acking it is always allowed (Heartbeat.position); acking beyond it is a
  // protocol violation; a replacement Emitter resumes after it.
  Position last_position() const { return resume_after_ < last_ ? last_ : resume_after_; }
  // last_position(), or while a Change's pieces are still coming, the position before that
  // Change: what a consumer has whole (Heartbeat.position).
  Position complete_position() const;
  Position resume_after() const { return resume_after_; }
  // A log transaction or the bootstrap is open: the slot must not be confirmed past it.
  bool in_transaction() const { return unit_.kind != UnitKind::kNone; }
  bool in_chunk() const { return chunk_.open; }

 private:
  enum class UnitKind { kNone, kTransaction, kBootstrap };

  // What is open: a log transaction or the bootstrap. Its header (Begin or BootstrapBegin) is
  // held serialized until the first of its events that is not dropped by resume.
  struct Unit {
    UnitKind kind = UnitKind::kNone;
    std::uint64_t commit_lsn = 0;
    std::uint32_t next_seq = 1;
    std::uint64_t end_lsn = 0;
    int header_field = 0;
    std::string header;
    bool header_sent = false;
    bool continued = false;  // the consumer got its header from the emitter before (a reconnect)
  };

  struct Chunk {
    bool open = false;
    std::uint64_t request_id = 0;
    std::uint32_t relation_oid = 0;
    std::uint64_t rows = 0;
    std::uint64_t deletes = 0;
  };

  struct RelationState {
    dblog::v1::Relation latest;  // the latest definition seen: key_columns come from here
    std::string latest_bytes;
    std::string sent_bytes;  // what the consumer was last sent; empty: nothing yet
    bool latest_sent = false;  // latest_bytes == sent_bytes, kept when either changes
  };

  void OnBegin(const dblog::v1::Begin& begin);
  void OnChange(dblog::v1::Change& change, std::string_view raw);
  // Positions and sends one log Change (from `raw`, its plugin bytes, when given).
  void SendChange(dblog::v1::Change& change, std::string_view raw = {});
  // ConsumeChange's Change as a message, for what needs one (throws when it does not parse).
  static dblog::v1::Change Parsed(const wire::ChangeView& change);
  // Appends `raw` (a canonical Change: fields in number order) with its seq replaced by `seq`.
  // False, appending nothing, when `raw` is not laid out that way.
  bool AppendSplicedChange(std::string_view raw, std::uint32_t seq);
  void OnTruncate(dblog::v1::Truncate& truncate);
  void OnMessage(dblog::v1::Message& message);
  void OnCommit(dblog::v1::Commit& commit);
  void EmitCopiedRowOf(std::uint32_t relation_oid, std::string_view row_bytes);

  void RequireTransaction(const char* what, std::uint64_t commit_lsn) const;
  void RequireNoChunk(const char* what) const;
  // A Change's split values: what its pieces owe (checked), and whether they go out with it.
  void ExpectPieces(const dblog::v1::Change& change, Position pos, bool sent, Position before);
  void RequireNoPiecesDue(const char* what) const;
  void RememberRelation(const dblog::v1::Relation& rel);
  const dblog::v1::Relation& KnownRelation(std::uint32_t oid, const char* what) const;
  bool KeyChanged(const dblog::v1::Relation& rel, const dblog::v1::Change& change) const;
  bool KeyChanged(const dblog::v1::Relation& rel, const wire::ChangeView& change) const;
  static bool HasUnchanged(const dblog::v1::Row& row);
  void RequireKeyWidth(const dblog::v1::Relation& rel, int key_values,
                       const char* what) const;
  void RequireKeyColumns(const dblog::v1::Relation& rel, int row_values,
                         const char* what) const;

  // The next position in the open unit.
  Position NextPosition() { return {unit_.commit_lsn, unit_.next_seq++}; }
  // false: `pos` is at or before resume_after, drop the event. true: it goes out; the unit's
  // header is sent first if it was not yet.
  bool Admit(Position pos);
  // The ordering guard: every position sent is larger than the last one.
  void Advance(Position pos, const char* what);
  void SendRelation(std::uint32_t oid);
  void SendReadRow(std::uint32_t relation_oid, Position pos, std::string_view row_bytes);
  // A chunk's DELETE or fill: the chunk's table and the next position set, then sent.
  void SendChunkChange(dblog::v1::Change& change);

  // Appends one StreamEvent whose member `field` is `member` (or its serialized bytes).
  void Append(int field, const google::protobuf::MessageLite& member);
  void AppendBytes(int field, std::string_view member);
  // The EventBatch and StreamEvent framing in front of a member of `member_size` bytes.
  void AppendEnvelope(int field, std::size_t member_size);

  const Position resume_after_;
  AckTracker* const acks_;
  Position last_;
  bool sent_any_ = false;
  Unit unit_;
  Chunk chunk_;
  struct Pieces {
    std::uint64_t due = 0;    // bytes of the last Change's split values still to come
    std::uint64_t total = 0;  // all of them
    bool send = false;        // that Change went out (else its pieces are dropped with it)
    std::uint64_t skip = 0;   // of the bytes to send, the first ones the consumer already has
    Position before;          // complete_position() while they come
  } pieces_;
  // Emitter(previous, acks): the transaction whose Begin the consumer has (0: none), and the
  // Change whose first pieces it has, with how many bytes.
  std::uint64_t continued_unit_ = 0;
  Position cut_change_;
  std::uint64_t cut_bytes_ = 0;
  Position cut_before_;  // complete_position() until the cut Change is whole
  bool bootstrapped_ = false;
  std::uint64_t consistent_point_ = 0;
  std::unordered_map<std::uint32_t, RelationState> relations_;
  std::string output_;
  std::uint64_t events_emitted_ = 0;
  std::uint64_t bytes_emitted_ = 0;
  std::uint64_t changes_spliced_ = 0;
};

// The plugin's bytes of each Change in a serialized Batch of `events` events (Consume's
// change_bytes), by event index; empty views for other events. Empty altogether when the bytes
// do not split into that many events as expected (the emitter then serializes every Change).
std::vector<std::string_view> ChangeBytes(std::string_view batch, int events);

}  // namespace dblog::emit
