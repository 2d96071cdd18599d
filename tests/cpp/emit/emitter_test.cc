// tests/cpp/emit/emitter_test.cc: one test per rule of the emitter (sidecar/emit/emitter.h).
#include "emit/emitter.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "emit/ack_tracker.h"
#include "emit_test_util.h"

namespace dblog::emit::test {
namespace {

using Strings = std::vector<std::string>;

constexpr std::uint32_t kItems = 16384;  // items(c0 bigint PRIMARY KEY, c1 text)
constexpr std::uint32_t kPairs = 16385;  // pairs(c0 bigint, c1 text, c2 bigint), key (c2, c0)

const Relation& Items() {
  static const Relation rel = MakeRelation(kItems, "items", 2, {0}, {1});
  return rel;
}
const Relation& Pairs() {
  static const Relation rel = MakeRelation(kPairs, "pairs", 3, {2, 0}, {1});
  return rel;
}

Row Item(std::int64_t id, const std::string& name) { return MakeRow({Int(id), Text(name)}); }
Row ItemKey(std::int64_t id) { return MakeRow({Int(id)}); }

std::vector<Emitted> Drain(Emitter& e) { return ReadStream(e.TakeOutput()); }

// One transaction at `lsn` inserting `id` into items, as the plugin writes it (the Relation is
// only in the first transaction of a session, as the plugin does).
void FeedInsert(Emitter& e, std::uint64_t lsn, std::int64_t id, bool with_relation) {
  e.OnEvent(BeginEv(lsn));
  if (with_relation) e.OnEvent(RelationEv(Items()));
  e.OnEvent(InsertEv(kItems, lsn, 1, Item(id, "x")));
  e.OnEvent(CommitEv(lsn, 2));
}

TEST(Emitter, StampsPositionsAndRenumbersSeq) {
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  // Seqs the plugin could never have written: the emitter does not use them.
  e.OnEvent(InsertEv(kItems, 1000, 7, Item(1, "a")));
  e.OnEvent(InsertEv(kItems, 1000, 7, Item(2, "b")));
  e.OnEvent(DeleteEv(kItems, 1000, 99, ItemKey(1)));
  e.OnEvent(CommitEv(1000, 0));
  const auto out = Drain(e);
  EXPECT_EQ(Describe(out),
            (Strings{"B 1000:0", "R 16384", "I 1000:1", "I 1000:2", "D 1000:3", "C 1000:4"}));
  // Everything else passes through untouched.
  const Change& insert = out[2].event.change();
  EXPECT_EQ(insert.relation_oid(), kItems);
  EXPECT_EQ(insert.lsn(), 1000u - 0x100 + 7);
  EXPECT_EQ(insert.xid(), XidOf(1000));
  EXPECT_EQ(insert.commit_time(), TimeOf(1000));
  EXPECT_EQ(insert.new_row().SerializeAsString(), Item(1, "a").SerializeAsString());
  EXPECT_EQ(out[0].event.begin().end_lsn(), EndOf(1000));
  EXPECT_EQ(out[5].event.commit().end_lsn(), EndOf(1000));
  EXPECT_EQ(e.last_position(), (Position{1000, 4}));
  EXPECT_FALSE(e.in_transaction());
}

TEST(Emitter, OutputIsAnEventBatchAndCounted) {
  Emitter e;
  FeedInsert(e, 1000, 1, true);
  EXPECT_EQ(e.events_emitted(), 4u);
  EXPECT_EQ(e.bytes_emitted(), e.output().size());
  const std::string bytes = e.TakeOutput();
  EXPECT_TRUE(e.output().empty());
  EXPECT_TRUE(e.TakeOutput().empty());
  // EventBatch.events is Batch.events: a plugin reader can read the stream's log events.
  dblog::v1::Batch as_batch;
  ASSERT_TRUE(as_batch.ParseFromString(bytes));
  ASSERT_EQ(as_batch.events_size(), 4);
  EXPECT_EQ(as_batch.events(2).change().seq(), 1u);
  // The same bytes the protobuf library would write for those StreamEvents.
  dblog::v1::EventBatch batch;
  ASSERT_TRUE(batch.ParseFromString(bytes));
  EXPECT_EQ(batch.SerializeAsString(), bytes);
  FeedInsert(e, 2000, 2, false);
  EXPECT_EQ(e.events_emitted(), 7u);
  EXPECT_EQ(e.bytes_emitted(), bytes.size() + e.output().size());
}

TEST(Emitter, OutputCanBeDrainedMidTransaction) {
  // Nothing is held per transaction: draining after every event gives the same bytes.
  std::vector<Event> events = {BeginEv(1000), RelationEv(Items())};
  for (int i = 1; i <= 50; ++i) events.push_back(InsertEv(kItems, 1000, i, Item(i, "r")));
  events.push_back(CommitEv(1000, 51));
  Emitter whole, piecewise;
  std::string pieces;
  for (const Event& ev : events) {
    whole.OnEvent(ev);
    piecewise.OnEvent(ev);
    pieces += piecewise.TakeOutput();
    if (ev.has_change()) {
      EXPECT_FALSE(pieces.empty());
    }
  }
  EXPECT_EQ(pieces, whole.TakeOutput());
}

TEST(Emitter, OnBatchFeedsEveryEventInOrder) {
  dblog::v1::Batch batch;
  *batch.add_events() = BeginEv(1000);
  *batch.add_events() = RelationEv(Items());
  *batch.add_events() = InsertEv(kItems, 1000, 1, Item(1, "a"));
  *batch.add_events() = CommitEv(1000, 2);
  Emitter e;
  e.OnBatch(batch);
  EXPECT_EQ(Describe(Drain(e)), (Strings{"B 1000:0", "R 16384", "I 1000:1", "C 1000:2"}));
}

TEST(Emitter, NonKeyUpdatePassesAsUpdate) {
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  e.OnEvent(UpdateEv(kItems, 1000, 1, ItemKey(5), Item(5, "new")));
  e.OnEvent(CommitEv(1000, 2));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out), (Strings{"B 1000:0", "R 16384", "U 1000:1", "C 1000:2"}));
  EXPECT_EQ(out[2].event.change().old_key().SerializeAsString(), ItemKey(5).SerializeAsString());
}

TEST(Emitter, KeyChangeBecomesDeleteThenInsert) {
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  e.OnEvent(UpdateEv(kItems, 1000, 1, ItemKey(1), Item(2, "moved")));
  e.OnEvent(InsertEv(kItems, 1000, 2, Item(3, "after")));
  e.OnEvent(CommitEv(1000, 3));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out),
            (Strings{"B 1000:0", "R 16384", "D 1000:1", "I 1000:2", "I 1000:3", "C 1000:4"}));
  const Change& del = out[2].event.change();
  EXPECT_EQ(del.old_key().SerializeAsString(), ItemKey(1).SerializeAsString());
  EXPECT_FALSE(del.has_new_row());
  EXPECT_EQ(del.lsn(), 1000u - 0x100 + 1);
  EXPECT_EQ(del.xid(), XidOf(1000));
  const Change& ins = out[3].event.change();
  EXPECT_EQ(ins.new_row().SerializeAsString(), Item(2, "moved").SerializeAsString());
  EXPECT_FALSE(ins.has_old_key());
  EXPECT_EQ(ins.lsn(), del.lsn());
}

Value Split(std::uint64_t length, dblog::v1::SplitValue::Kind kind = dblog::v1::SplitValue::TEXT) {
  Value v;
  v.mutable_split()->set_kind(kind);
  v.mutable_split()->set_length(length);
  return v;
}

Event PieceEv(const std::string& data) {
  Event e;
  e.mutable_value_piece()->set_data(data);
  return e;
}

// A Change's split values: its pieces go out right after it, unpositioned, or are dropped with
// it when resume drops it; a key change's pieces follow its INSERT.
TEST(Emitter, PiecesFollowTheirChangeOrGoWithIt) {
  Emitter e(Position{1000, 1});
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  e.OnEvent(InsertEv(kItems, 1000, 1, MakeRow({Int(1), Split(5)})));  // dropped by resume
  e.OnEvent(PieceEv("abc"));
  e.OnEvent(PieceEv("de"));
  e.OnEvent(InsertEv(kItems, 1000, 2, MakeRow({Int(2), Split(2)})));
  e.OnEvent(PieceEv("xy"));
  e.OnEvent(UpdateEv(kItems, 1000, 3, ItemKey(2), MakeRow({Int(3), Split(3)})));  // key change
  e.OnEvent(PieceEv("pqr"));
  e.OnEvent(CommitEv(1000, 4));
  EXPECT_EQ(Describe(Drain(e)), (Strings{"B 1000:0", "R 16384", "I 1000:2", "P xy", "D 1000:3",
                                         "I 1000:4", "P pqr", "C 1000:5"}));
}

// A source reconnect decodes the slot again into the same consumer connection (Emitter(previous,
// acks)): a transaction the consumer has part of goes on without its Begin again, and a Change
// whose pieces were cut short gets the rest of its bytes, however the pieces are cut this time.
// Meanwhile the heartbeat's position is never that Change's.
TEST(Emitter, ASourceReconnectContinuesTheTransactionAndThePieces) {
  Emitter first;
  first.OnEvent(BeginEv(1000));
  first.OnEvent(RelationEv(Items()));
  first.OnEvent(InsertEv(kItems, 1000, 1, Item(1, "a")));
  first.OnEvent(InsertEv(kItems, 1000, 2, MakeRow({Int(2), Split(5)})));
  first.OnEvent(PieceEv("abc"));
  EXPECT_EQ(Describe(Drain(first)),
            (Strings{"B 1000:0", "R 16384", "I 1000:1", "I 1000:2", "P abc"}));
  EXPECT_EQ(first.last_position(), (Position{1000, 2}));
  EXPECT_EQ(first.complete_position(), (Position{1000, 1}));  // the Change is not whole yet

  // the source still down at the first retry: an emitter that decoded nothing, then another
  Emitter retry(first, nullptr);
  EXPECT_EQ(retry.complete_position(), (Position{1000, 1}));  // not the cut Change
  EXPECT_EQ(retry.last_position(), (Position{1000, 2}));
  Emitter again(retry, nullptr);
  EXPECT_EQ(again.complete_position(), (Position{1000, 1}));
  again.OnEvent(BeginEv(1000));
  again.OnEvent(RelationEv(Items()));
  again.OnEvent(InsertEv(kItems, 1000, 1, Item(1, "a")));
  again.OnEvent(InsertEv(kItems, 1000, 2, MakeRow({Int(2), Split(5)})));
  again.OnEvent(PieceEv("ab"));
  EXPECT_EQ(again.complete_position(), (Position{1000, 1}));
  again.OnEvent(PieceEv("cde"));
  EXPECT_EQ(again.complete_position(), (Position{1000, 2}));
  again.OnEvent(InsertEv(kItems, 1000, 3, Item(3, "c")));
  again.OnEvent(CommitEv(1000, 4));
  EXPECT_EQ(Describe(Drain(again)), (Strings{"P de", "R 16384", "I 1000:3", "C 1000:4"}));

  // without pieces: the transaction goes on, its Begin not sent twice
  Emitter third(again, nullptr);
  third.OnEvent(BeginEv(2000));
  third.OnEvent(RelationEv(Items()));
  third.OnEvent(InsertEv(kItems, 2000, 1, Item(4, "d")));
  EXPECT_EQ(Describe(Drain(third)), (Strings{"B 2000:0", "R 16384", "I 2000:1"}));
  Emitter fourth(third, nullptr);
  // the slot decodes from its confirmed position: the transaction before comes again first
  fourth.OnEvent(BeginEv(1000));
  fourth.OnEvent(RelationEv(Items()));
  fourth.OnEvent(InsertEv(kItems, 1000, 1, Item(1, "a")));
  fourth.OnEvent(CommitEv(1000, 2));
  fourth.OnEvent(BeginEv(2000));
  fourth.OnEvent(RelationEv(Items()));
  fourth.OnEvent(InsertEv(kItems, 2000, 1, Item(4, "d")));
  fourth.OnEvent(InsertEv(kItems, 2000, 2, Item(5, "e")));
  fourth.OnEvent(CommitEv(2000, 3));
  EXPECT_EQ(Describe(Drain(fourth)), (Strings{"R 16384", "I 2000:2", "C 2000:3"}));
}

// Pieces that break the plugin's contract stop the stream (std::logic_error): never a Change
// whose value is missing or runs into the next.
TEST(Emitter, BrokenPiecesThrow) {
  const auto started = [] {
    auto e = std::make_unique<Emitter>();
    e->OnEvent(BeginEv(1000));
    e->OnEvent(RelationEv(Items()));
    return e;
  };
  {
    auto e = started();
    EXPECT_THROW(e->OnEvent(PieceEv("x")), std::logic_error);  // no Change waits
  }
  {
    auto e = started();
    e->OnEvent(InsertEv(kItems, 1000, 1, MakeRow({Int(1), Split(4)})));
    e->OnEvent(PieceEv("abc"));
    EXPECT_THROW(e->OnEvent(CommitEv(1000, 2)), std::logic_error);  // a byte still due
  }
  {
    auto e = started();
    e->OnEvent(InsertEv(kItems, 1000, 1, MakeRow({Int(1), Split(2)})));
    EXPECT_THROW(e->OnEvent(PieceEv("abc")), std::logic_error);  // longer than due
  }
  {
    auto e = started();
    EXPECT_THROW(e->OnEvent(InsertEv(kItems, 1000, 1, MakeRow({Split(8), Text("k")}))),
                 std::logic_error);  // a key column
  }
  {
    auto e = started();
    EXPECT_THROW(e->OnEvent(InsertEv(kItems, 1000, 1,
                                     MakeRow({Int(1), Split(8, dblog::v1::SplitValue::KIND_UNSPECIFIED)}))),
                 std::logic_error);
  }
  {
    auto e = started();
    EXPECT_THROW(e->OnEvent(InsertEv(kItems, 1000, 1, MakeRow({Int(1), Split(0)}))),
                 std::logic_error);
  }
}

TEST(Emitter, CompositeKeyComparedInKeyOrder) {
  // pairs(c0, c1, c2) keyed by (c2, c0): old_key holds (c2, c0).
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Pairs()));
  // Same key, other column changed.
  e.OnEvent(UpdateEv(kPairs, 1000, 1, MakeRow({Int(20), Int(1)}),
                     MakeRow({Int(1), Text("v2"), Int(20)})));
  // Only the second key component changes: still a key change.
  e.OnEvent(UpdateEv(kPairs, 1000, 2, MakeRow({Int(20), Int(1)}),
                     MakeRow({Int(2), Text("v2"), Int(20)})));
  // Only the first.
  e.OnEvent(UpdateEv(kPairs, 1000, 3, MakeRow({Int(20), Int(2)}),
                     MakeRow({Int(2), Text("v2"), Int(21)})));
  // Values swapped between key components: (c2, c0) = (21, 2) -> (2, 21).
  e.OnEvent(UpdateEv(kPairs, 1000, 4, MakeRow({Int(21), Int(2)}),
                     MakeRow({Int(21), Text("v2"), Int(2)})));
  e.OnEvent(CommitEv(1000, 5));
  EXPECT_EQ(Describe(Drain(e)),
            (Strings{"B 1000:0", "R 16385", "U 1000:1", "D 1000:2", "I 1000:3", "D 1000:4",
                     "I 1000:5", "D 1000:6", "I 1000:7", "C 1000:8"}));
}

TEST(Emitter, KeyValueOfAnotherTypeIsAKeyChange) {
  // Encodings are compared, not just payload bytes: NULL vs 0 and text "1" vs int 1 differ.
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  e.OnEvent(UpdateEv(kItems, 1000, 1, MakeRow({Text("1")}), Item(1, "a")));
  e.OnEvent(CommitEv(1000, 2));
  EXPECT_EQ(Describe(Drain(e)),
            (Strings{"B 1000:0", "R 16384", "D 1000:1", "I 1000:2", "C 1000:3"}));
}

TEST(Emitter, UnchangedKeyValueCountsAsEqual) {
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  e.OnEvent(UpdateEv(kItems, 1000, 1, ItemKey(5), MakeRow({Unchanged(), Text("t")})));
  e.OnEvent(CommitEv(1000, 2));
  EXPECT_EQ(Describe(Drain(e)), (Strings{"B 1000:0", "R 16384", "U 1000:1", "C 1000:2"}));
}

TEST(Emitter, KeyChangeWithUnchangedToastStaysOneUpdate) {
  // UPDATE items SET c0 = 2 WHERE c0 = 1 with c1 TOASTed and untouched: PostgreSQL logs no value
  // for c1, only the old row has it, so the update cannot become DELETE + INSERT.
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  e.OnEvent(UpdateEv(kItems, 1000, 1, ItemKey(1), MakeRow({Int(2), Unchanged()})));
  e.OnEvent(InsertEv(kItems, 1000, 2, Item(3, "x")));
  e.OnEvent(CommitEv(1000, 3));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out), (Strings{"B 1000:0", "R 16384", "U 1000:1", "I 1000:2", "C 1000:3"}));
  EXPECT_EQ(out[2].event.change().old_key().SerializeAsString(), ItemKey(1).SerializeAsString());
  EXPECT_EQ(out[2].event.change().new_row().values(0).int_value(), 2);
}

TEST(Emitter, KeyChangeWithReplicaIdentityFullKeepsOldRowOnTheDelete) {
  Relation full = Items();
  full.set_replica_identity("f");
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(full));
  const Row old_row = Item(1, "old");
  e.OnEvent(UpdateEv(kItems, 1000, 1, ItemKey(1), Item(2, "new"), &old_row));
  e.OnEvent(CommitEv(1000, 2));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out), (Strings{"B 1000:0", "R 16384", "D 1000:1", "I 1000:2", "C 1000:3"}));
  EXPECT_EQ(out[2].event.change().old_row().SerializeAsString(), old_row.SerializeAsString());
  EXPECT_FALSE(out[3].event.change().has_old_row());
}

TEST(Emitter, MalformedUpdatesAreRefused) {
  auto feed = [](const Row& old_key, const Row& new_row) {
    Emitter e;
    e.OnEvent(BeginEv(1000));
    e.OnEvent(RelationEv(Pairs()));
    e.OnEvent(UpdateEv(kPairs, 1000, 1, old_key, new_row));
  };
  EXPECT_NO_THROW(feed(MakeRow({Int(2), Int(1)}), MakeRow({Int(1), Text("a"), Int(2)})));
  // An old key of the wrong width.
  EXPECT_THROW(feed(MakeRow({Int(2)}), MakeRow({Int(1), Text("a"), Int(2)})), std::logic_error);
  EXPECT_THROW(feed(Row(), MakeRow({Int(1), Text("a"), Int(2)})), std::logic_error);
  // A new row without the key column c2.
  EXPECT_THROW(feed(MakeRow({Int(2), Int(1)}), MakeRow({Int(1), Text("a")})), std::logic_error);
}

TEST(Emitter, MalformedInsertsAndDeletesAreRefused) {
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Pairs()));
  EXPECT_THROW(e.OnEvent(InsertEv(kPairs, 1000, 1, MakeRow({Int(1), Text("a")}))),
               std::logic_error);
  EXPECT_THROW(e.OnEvent(DeleteEv(kPairs, 1000, 1, MakeRow({Int(1)}))), std::logic_error);
  EXPECT_NO_THROW(e.OnEvent(DeleteEv(kPairs, 1000, 1, MakeRow({Int(1), Int(2)}))));
}

TEST(Emitter, RelationSentOnceThenOnlyWhenChanged) {
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  e.OnEvent(RelationEv(Pairs()));  // never used: never sent
  e.OnEvent(InsertEv(kItems, 1000, 1, Item(1, "a")));
  e.OnEvent(RelationEv(Items()));  // the plugin re-sends after an invalidation: same bytes
  e.OnEvent(InsertEv(kItems, 1000, 2, Item(2, "b")));
  e.OnEvent(CommitEv(1000, 3));
  EXPECT_EQ(Describe(Drain(e)),
            (Strings{"B 1000:0", "R 16384", "I 1000:1", "I 1000:2", "C 1000:3"}));

  // ALTER TABLE items ALTER c1 TYPE varchar(20): a new definition, sent before its next use.
  Relation altered = Items();
  altered.mutable_columns(1)->set_type_name("character varying(20)");
  e.OnEvent(BeginEv(2000));
  e.OnEvent(RelationEv(altered));
  e.OnEvent(InsertEv(kItems, 2000, 1, Item(3, "c")));
  e.OnEvent(CommitEv(2000, 2));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out), (Strings{"B 2000:0", "R 16384", "I 2000:1", "C 2000:2"}));
  EXPECT_EQ(out[1].event.relation().columns(1).type_name(), "character varying(20)");
}

TEST(Emitter, TruncateSendsTheRelationsItNames) {
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  e.OnEvent(RelationEv(Pairs()));
  e.OnEvent(TruncateEv({kItems, kPairs}, 1000, 5));
  e.OnEvent(CommitEv(1000, 6));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out), (Strings{"B 1000:0", "R 16384", "R 16385", "T 1000:1", "C 1000:2"}));
  EXPECT_EQ(out[3].event.truncate().relation_oids_size(), 2);
}

TEST(Emitter, LatestRelationDecidesTheKey) {
  // The key of items moves from c0 to c1 (ALTER TABLE ... DROP CONSTRAINT, ADD PRIMARY KEY).
  const Relation rekeyed = MakeRelation(kItems, "items", 2, {1}, {1});
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  e.OnEvent(RelationEv(rekeyed));
  // c0 changes, c1 (the key now) does not: a plain update.
  e.OnEvent(UpdateEv(kItems, 1000, 1, MakeRow({Text("a")}), Item(2, "a")));
  e.OnEvent(CommitEv(1000, 2));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out), (Strings{"B 1000:0", "R 16384", "U 1000:1", "C 1000:2"}));
  EXPECT_EQ(out[1].event.relation().key_columns(0), 1u);
}

TEST(Emitter, MessagesArePositioned) {
  Emitter e;
  e.OnEvent(MessageEv(false, 500));  // non-transactional: (lsn, 0)
  e.OnEvent(BeginEv(1000));
  e.OnEvent(MessageEv(true, 900, 1000, 42));
  e.OnEvent(CommitEv(1000, 43));
  e.OnEvent(MessageEv(false, 1100));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out), (Strings{"M 500:0", "B 1000:0", "M 1000:1", "C 1000:2", "M 1100:0"}));
  EXPECT_FALSE(out[0].event.message().transactional());
  EXPECT_EQ(out[0].event.message().lsn(), 500u);
  EXPECT_EQ(out[2].event.message().lsn(), 900u);
  EXPECT_EQ(out[2].event.message().content(), "hello");
}

TEST(Emitter, EmptyTransactionIsBeginAndCommit) {
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(CommitEv(1000, 1));
  EXPECT_EQ(Describe(Drain(e)), (Strings{"B 1000:0", "C 1000:1"}));
}

// ---- Resume --------------------------------------------------------------------------------

// Three transactions at 1000, 2000, 3000; 2000 holds three inserts.
void FeedThree(Emitter& e) {
  FeedInsert(e, 1000, 1, true);
  e.OnEvent(BeginEv(2000));
  for (int i = 1; i <= 3; ++i) e.OnEvent(InsertEv(kItems, 2000, i, Item(10 + i, "t")));
  e.OnEvent(CommitEv(2000, 4));
  FeedInsert(e, 3000, 3, false);
}

TEST(Emitter, ResumeDropsAcknowledgedTransactions) {
  Emitter e(Position{2000, 4});
  FeedThree(e);
  // The Relation came in the skipped first transaction; it is still sent before its first use.
  EXPECT_EQ(Describe(Drain(e)), (Strings{"B 3000:0", "R 16384", "I 3000:1", "C 3000:2"}));
}

TEST(Emitter, ResumeInsideATransactionStartsWithItsBegin) {
  Emitter e(Position{2000, 2});
  FeedThree(e);
  EXPECT_EQ(Describe(Drain(e)), (Strings{"B 2000:0", "R 16384", "I 2000:3", "C 2000:4", "B 3000:0",
                                         "I 3000:1", "C 3000:2"}));
}

TEST(Emitter, LastPositionDoesNotGoBackBehindTheResumePoint) {
  Emitter e(Position{2000, 2});
  FeedInsert(e, 1000, 1, true);
  EXPECT_EQ(e.last_position(), (Position{2000, 2}));
  e.OnEvent(BeginEv(2000));
  for (int i = 1; i <= 3; ++i) e.OnEvent(InsertEv(kItems, 2000, i, Item(10 + i, "t")));
  EXPECT_EQ(e.last_position(), (Position{2000, 3}));  // the Begin resent at 2000:0 aside
}

TEST(Emitter, ResumeAtABeginResendsTheWholeTransaction) {
  Emitter e(Position{2000, 0});
  FeedThree(e);
  EXPECT_EQ(Describe(Drain(e)), (Strings{"B 2000:0", "R 16384", "I 2000:1", "I 2000:2", "I 2000:3",
                                         "C 2000:4", "B 3000:0", "I 3000:1", "C 3000:2"}));
}

TEST(Emitter, ResumeCountsTheKeyChangeSplit) {
  // The first session sent D 1000:1, I 1000:2, I 1000:3, C 1000:4; the consumer has 1000:2.
  Emitter e(Position{1000, 2});
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  e.OnEvent(UpdateEv(kItems, 1000, 1, ItemKey(1), Item(2, "moved")));
  e.OnEvent(InsertEv(kItems, 1000, 2, Item(3, "x")));
  e.OnEvent(CommitEv(1000, 3));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out), (Strings{"B 1000:0", "R 16384", "I 1000:3", "C 1000:4"}));
  EXPECT_EQ(out[2].event.change().new_row().values(0).int_value(), 3);
}

TEST(Emitter, ResumeBeyondEverythingSendsNothing) {
  Emitter e(Position{9000, 0});
  FeedThree(e);
  e.OnEvent(MessageEv(false, 4000));
  EXPECT_TRUE(e.output().empty());
  EXPECT_EQ(e.events_emitted(), 0u);
  // The consumer is still where it resumed: acking that must stay allowed.
  EXPECT_EQ(e.last_position(), (Position{9000, 0}));
}

// ---- Ordering guard ------------------------------------------------------------------------

TEST(Emitter, TransactionBeforeTheLastSentThrows) {
  Emitter e;
  FeedInsert(e, 2000, 1, true);
  e.OnEvent(BeginEv(1500));
  EXPECT_THROW(e.OnEvent(InsertEv(kItems, 1500, 1, Item(2, "x"))), std::logic_error);
}

TEST(Emitter, SameCommitLsnTwiceThrows) {
  Emitter e;
  FeedInsert(e, 2000, 1, true);
  e.OnEvent(BeginEv(2000));
  EXPECT_THROW(e.OnEvent(CommitEv(2000, 1)), std::logic_error);
}

TEST(Emitter, NonTransactionalMessageBeforeTheLastSentThrows) {
  Emitter e;
  FeedInsert(e, 2000, 1, true);
  EXPECT_THROW(e.OnEvent(MessageEv(false, 2000)), std::logic_error);
  Emitter f;
  FeedInsert(f, 2000, 1, true);
  EXPECT_THROW(f.OnEvent(MessageEv(false, 1999)), std::logic_error);
  Emitter g;
  FeedInsert(g, 2000, 1, true);
  EXPECT_NO_THROW(g.OnEvent(MessageEv(false, 2001)));
}

TEST(Emitter, PositionEqualToTheLastSentThrows) {
  // A non-transactional message at L is (L, 0): a transaction committed at L would repeat it.
  Emitter e;
  e.OnEvent(MessageEv(false, 2000));
  e.OnEvent(BeginEv(2000));
  EXPECT_THROW(e.OnEvent(CommitEv(2000, 1)), std::logic_error);
}

TEST(Emitter, GuardMessageNamesThePositions) {
  Emitter e;
  FeedInsert(e, 0x200000000, 1, true);
  e.OnEvent(BeginEv(0x100000000));
  try {
    e.OnEvent(InsertEv(kItems, 0x100000000, 1, Item(2, "x")));
    FAIL() << "no exception";
  } catch (const std::logic_error& err) {
    EXPECT_NE(std::string(err.what()).find("1/0:0"), std::string::npos) << err.what();
    EXPECT_NE(std::string(err.what()).find("2/0:2"), std::string::npos) << err.what();
  }
}

TEST(Emitter, EventsDroppedByResumeAreNotGuarded) {
  // Dropped events never reach the consumer, so their order cannot hurt it.
  Emitter e(Position{5000, 0});
  FeedInsert(e, 2000, 1, true);
  EXPECT_NO_THROW(FeedInsert(e, 1000, 2, false));
  EXPECT_TRUE(e.output().empty());
}

TEST(Emitter, BrokenPluginContractThrows) {
  {
    Emitter e;  // a Change outside a transaction
    e.OnEvent(RelationEv(Items()));
    EXPECT_THROW(e.OnEvent(InsertEv(kItems, 1000, 1, Item(1, "a"))), std::logic_error);
  }
  {
    Emitter e;  // a Change before its Relation
    e.OnEvent(BeginEv(1000));
    EXPECT_THROW(e.OnEvent(InsertEv(kItems, 1000, 1, Item(1, "a"))), std::logic_error);
  }
  {
    Emitter e;  // a Truncate before one of its Relations
    e.OnEvent(BeginEv(1000));
    e.OnEvent(RelationEv(Items()));
    EXPECT_THROW(e.OnEvent(TruncateEv({kItems, kPairs}, 1000, 1)), std::logic_error);
  }
  {
    Emitter e;  // a Begin inside a transaction
    e.OnEvent(BeginEv(1000));
    EXPECT_THROW(e.OnEvent(BeginEv(2000)), std::logic_error);
  }
  {
    Emitter e;  // a Change of another transaction
    e.OnEvent(BeginEv(1000));
    e.OnEvent(RelationEv(Items()));
    EXPECT_THROW(e.OnEvent(InsertEv(kItems, 1001, 1, Item(1, "a"))), std::logic_error);
  }
  {
    Emitter e;  // a Commit of another transaction
    e.OnEvent(BeginEv(1000));
    EXPECT_THROW(e.OnEvent(CommitEv(999, 1)), std::logic_error);
  }
  {
    Emitter e;  // a Commit without a Begin
    EXPECT_THROW(e.OnEvent(CommitEv(1000, 1)), std::logic_error);
  }
  {
    Emitter e;  // a READ (or unknown kind) from the plugin
    e.OnEvent(BeginEv(1000));
    e.OnEvent(RelationEv(Items()));
    const Row row = Item(1, "a");
    EXPECT_THROW(e.OnEvent(ChangeEv(Change::READ, kItems, 1000, 1, &row, nullptr)),
                 std::logic_error);
    EXPECT_THROW(e.OnEvent(ChangeEv(Change::KIND_UNSPECIFIED, kItems, 1000, 1, &row, nullptr)),
                 std::logic_error);
  }
  {
    Emitter e;  // a non-transactional message inside a transaction
    e.OnEvent(BeginEv(1000));
    EXPECT_THROW(e.OnEvent(MessageEv(false, 900)), std::logic_error);
  }
  {
    Emitter e;  // an empty event
    EXPECT_THROW(e.OnEvent(Event()), std::logic_error);
  }
  {
    Emitter e;  // a Relation without a key, or with a key column it does not have
    EXPECT_THROW(e.OnEvent(RelationEv(MakeRelation(kItems, "items", 2, {}))), std::logic_error);
    EXPECT_THROW(e.OnEvent(RelationEv(MakeRelation(kItems, "items", 2, {2}))), std::logic_error);
    e.BeginBootstrap(5000, false, {});
    EXPECT_THROW(e.EmitCopiedRow(MakeRelation(kItems, "items", 2, {}), "x"), std::logic_error);
  }
}

// ---- Bootstrap -----------------------------------------------------------------------------

dblog::v1::TableProgress Progress(const Relation& rel, std::uint64_t rows) {
  dblog::v1::TableProgress p;
  p.set_schema(rel.schema());
  p.set_name(rel.name());
  p.set_relation_oid(rel.oid());
  p.set_rows_copied(rows);
  p.set_done(true);
  return p;
}

TEST(Emitter, BootstrapRowsSitAtTheConsistentPoint) {
  Emitter e;
  dblog::v1::TableProgress estimate;
  estimate.set_relation_oid(kItems);
  estimate.set_rows_estimated(2);
  e.BeginBootstrap(5000, true, {estimate});
  EXPECT_TRUE(e.in_transaction());
  e.EmitCopiedRow(Items(), Item(1, "a").SerializeAsString());
  e.EmitCopiedRow(Pairs(), MakeRow({Int(1), Text("p"), Int(2)}).SerializeAsString());
  e.EmitCopiedRow(Items(), Item(2, "b").SerializeAsString());
  e.EndBootstrap({Progress(Items(), 2), Progress(Pairs(), 1)});
  EXPECT_FALSE(e.in_transaction());
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out), (Strings{"BB 4999:0", "R 16384", "READ 4999:1", "R 16385", "READ 4999:2",
                                    "READ 4999:3", "BE 4999:4"}));
  EXPECT_TRUE(out[0].event.bootstrap_begin().restarted());
  EXPECT_EQ(out[0].event.bootstrap_begin().tables(0).rows_estimated(), 2u);
  const Change& read = out[2].event.change();
  EXPECT_EQ(read.relation_oid(), kItems);
  EXPECT_FALSE(read.has_old_key());
  EXPECT_EQ(read.new_row().values(1).text_value(), "a");
  EXPECT_EQ(out[6].event.bootstrap_end().tables_size(), 2);
  EXPECT_EQ(out[6].event.bootstrap_end().tables(0).rows_copied(), 2u);

  // The log continues strictly after the consistent point, with the Relations already sent.
  FeedInsert(e, 5001, 3, true);
  EXPECT_EQ(Describe(Drain(e)), (Strings{"B 5001:0", "I 5001:1", "C 5001:2"}));
}

// EmitCopiedRows (the copy path's batches) is EmitCopiedRow row by row, to the byte; and a READ
// Change, whose head the emitter writes by hand, is what the protobuf library would write.
TEST(Emitter, CopiedRowBatchesMatchRowByRowAndTheLibrarysEncoding) {
  const std::vector<std::string> rows = {Item(1, "a").SerializeAsString(),
                                         Item(2, "").SerializeAsString(),
                                         Item(300000, std::string(200, 'z')).SerializeAsString()};
  Emitter one, batched;
  one.BeginBootstrap(0x16B3748, false, {});
  batched.BeginBootstrap(0x16B3748, false, {});
  for (const auto& r : rows) one.EmitCopiedRow(Items(), r);
  batched.EmitCopiedRows(Items(), std::vector<std::string_view>(rows.begin(), rows.end()));
  EXPECT_EQ(one.TakeOutput(), batched.TakeOutput());

  Emitter e;
  e.BeginBootstrap(0x16B3748, false, {});
  e.EmitCopiedRow(Items(), rows[2]);
  const auto out = Drain(e);
  ASSERT_EQ(out.size(), 3u);  // BootstrapBegin, Relation, READ
  Change expected;
  expected.set_kind(Change::READ);
  expected.set_relation_oid(kItems);
  expected.set_commit_lsn(0x16B3747);
  expected.set_seq(1);
  expected.mutable_new_row()->ParseFromString(rows[2]);
  EXPECT_EQ(out[2].event.change().SerializeAsString(), expected.SerializeAsString());
  dblog::v1::StreamEvent as_sent;
  *as_sent.mutable_change() = expected;
  EXPECT_EQ(out[2].raw, as_sent.SerializeAsString()) << "the bytes as sent";
}

// The plugin's Change bytes are spliced (seq replaced) only when laid out canonically; anything
// else is serialized from the parsed Change, so the output is the same either way.
TEST(Emitter, ChangeBytesNotInFieldOrderAreSerializedInstead) {
  std::uint64_t spliced = 0;
  auto feed = [&spliced](std::string_view raw) {
    Emitter e;
    e.OnEvent(BeginEv(1000));
    e.OnEvent(RelationEv(Items()));
    Event ins = InsertEv(kItems, 1000, 7, Item(1, "a"));
    e.Consume(ins, raw);
    e.OnEvent(CommitEv(1000, 8));
    spliced = e.changes_spliced();
    return e.TakeOutput();
  };
  const Change change = InsertEv(kItems, 1000, 7, Item(1, "a")).change();
  const std::string canonical = change.SerializeAsString();
  const std::string expected = feed({});
  EXPECT_EQ(feed(canonical), expected);
  EXPECT_EQ(spliced, 1u);
  // seq (field 4, here 7) moved to the end: not canonical
  Change without_seq = change;
  without_seq.clear_seq();
  std::string reordered = without_seq.SerializeAsString();
  reordered.push_back(4 << 3);
  reordered.push_back(7);
  EXPECT_EQ(feed(reordered), expected);
  EXPECT_EQ(spliced, 0u);
  // truncated bytes
  EXPECT_EQ(feed(std::string_view(canonical).substr(0, canonical.size() - 3)), expected);
  EXPECT_EQ(spliced, 0u);
}

TEST(ChangeBytes, SlicesEachChangeOutOfABatch) {
  dblog::v1::Batch batch;
  *batch.add_events() = BeginEv(1000);
  *batch.add_events() = RelationEv(Items());
  *batch.add_events() = InsertEv(kItems, 1000, 1, Item(1, "a"));
  *batch.add_events() = DeleteEv(kItems, 1000, 2, ItemKey(1));
  *batch.add_events() = CommitEv(1000, 3);
  const std::string bytes = batch.SerializeAsString();
  const auto slices = ChangeBytes(bytes, batch.events_size());
  ASSERT_EQ(slices.size(), 5u);
  EXPECT_TRUE(slices[0].empty());
  EXPECT_TRUE(slices[1].empty());
  EXPECT_EQ(slices[2], batch.events(2).change().SerializeAsString());
  EXPECT_EQ(slices[3], batch.events(3).change().SerializeAsString());
  EXPECT_TRUE(slices[4].empty());
  EXPECT_TRUE(ChangeBytes(bytes, 4).empty()) << "a count that does not match";
  EXPECT_TRUE(ChangeBytes(bytes.substr(0, bytes.size() - 1), 5).empty()) << "cut short";
  EXPECT_TRUE(ChangeBytes("", 0).empty());
}

TEST(Emitter, EmptyBootstrap) {
  Emitter e;
  e.BeginBootstrap(5000, false, {});
  e.EndBootstrap({});
  EXPECT_EQ(Describe(Drain(e)), (Strings{"BB 4999:0", "BE 4999:1"}));
}

TEST(Emitter, LogTransactionBeforeTheConsistentPointThrows) {
  for (std::uint64_t commit_lsn : {4999u, 4000u}) {
    Emitter e;
    e.BeginBootstrap(5000, false, {});
    e.EmitCopiedRow(Items(), Item(1, "a").SerializeAsString());
    e.EndBootstrap({});
    EXPECT_THROW(e.OnEvent(BeginEv(commit_lsn)), std::logic_error) << commit_lsn;
  }
  // Even when resume would drop it: it means the slot and the copy disagree.
  Emitter e(Position{9000, 0});
  e.BeginBootstrap(5000, false, {});
  e.EndBootstrap({});
  EXPECT_THROW(e.OnEvent(BeginEv(4000)), std::logic_error);
}

// A commit record can start exactly at the consistent point (the end of the record that made
// the slot consistent): that transaction is not in the snapshot and must follow the copy.
TEST(Emitter, TransactionCommittedExactlyAtTheConsistentPointFollowsTheCopy) {
  Emitter e;
  e.BeginBootstrap(5000, false, {});
  e.EmitCopiedRow(Items(), Item(1, "a").SerializeAsString());
  e.EndBootstrap({});
  FeedInsert(e, 5000, 2, true);
  EXPECT_EQ(Describe(Drain(e)), (Strings{"BB 4999:0", "R 16384", "READ 4999:1", "BE 4999:2",
                                         "B 5000:0", "I 5000:1", "C 5000:2"}));
}

TEST(Emitter, BootstrapMisuseThrows) {
  {
    Emitter e;  // log events while the copy is open
    e.BeginBootstrap(5000, false, {});
    EXPECT_THROW(e.OnEvent(BeginEv(6000)), std::logic_error);
    EXPECT_THROW(e.OnEvent(MessageEv(false, 6000)), std::logic_error);
  }
  {
    Emitter e;  // a bootstrap inside a transaction
    e.OnEvent(BeginEv(1000));
    EXPECT_THROW(e.BeginBootstrap(5000, false, {}), std::logic_error);
  }
  {
    Emitter e;  // two bootstraps
    e.BeginBootstrap(5000, false, {});
    e.EndBootstrap({});
    EXPECT_THROW(e.BeginBootstrap(6000, false, {}), std::logic_error);
  }
  {
    Emitter e;  // copied rows outside a bootstrap
    EXPECT_THROW(e.EmitCopiedRow(Items(), Item(1, "a").SerializeAsString()), std::logic_error);
    EXPECT_THROW(e.EndBootstrap({}), std::logic_error);
  }
  {
    Emitter e;  // a bootstrap after log events it would not sort before
    FeedInsert(e, 6000, 1, true);
    e.BeginBootstrap(5000, false, {});
    EXPECT_THROW(e.EmitCopiedRow(Items(), Item(1, "a").SerializeAsString()), std::logic_error);
  }
}

// A row as the extension's encoder might write it, in a form the C++ library would not
// reproduce: an overlong varint length and an unknown field. Only verbatim copying keeps it.
std::string NonCanonicalRow() {
  std::string value = Text("abc").SerializeAsString();  // 3a 03 'a' 'b' 'c'
  std::string row;
  row += '\x0a';  // Row.values, length-delimited
  row += static_cast<char>(0x80 | value.size());
  row += '\x00';  // the same length as a two-byte varint
  row += value;
  row += "\x78\x01";  // field 15 varint 1: unknown to this reader
  return row;
}

TEST(Emitter, CopiedRowBytesAreEmbeddedVerbatim) {
  const std::string raw = NonCanonicalRow();
  Row parsed;
  ASSERT_TRUE(parsed.ParseFromString(raw));
  ASSERT_NE(parsed.SerializeAsString(), raw);  // the library would change these bytes

  Emitter e;
  e.BeginBootstrap(5000, false, {});
  e.EmitCopiedRow(Items(), raw);
  e.EndBootstrap({});
  const auto out = Drain(e);
  ASSERT_EQ(out.size(), 4u);
  ASSERT_TRUE(out[2].raw_new_row.has_value());
  EXPECT_EQ(*out[2].raw_new_row, raw);
  EXPECT_EQ(out[2].event.change().new_row().values(0).text_value(), "abc");
}

TEST(Emitter, CopiedAndLoggedRowsHaveTheSameLayout) {
  // For a canonical row (what the shared encoder writes) the READ Change is byte for byte what
  // the protobuf library writes for the same Change, i.e. the layout of a logged Change.
  const Row row = MakeRow({Int(-7), Text("héllo"), Null()});
  Emitter e;
  e.BeginBootstrap(5000, false, {});
  e.EmitCopiedRow(MakeRelation(kPairs, "pairs", 3, {2, 0}, {1}), row.SerializeAsString());
  e.EndBootstrap({});
  e.OnEvent(BeginEv(6000));
  e.OnEvent(InsertEv(kPairs, 6000, 1, row));
  e.OnEvent(CommitEv(6000, 2));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out), (Strings{"BB 4999:0", "R 16385", "READ 4999:1", "BE 4999:2", "B 6000:0",
                                    "I 6000:1", "C 6000:2"}));
  EXPECT_EQ(out[2].raw, out[2].event.SerializeAsString());
  EXPECT_EQ(*out[2].raw_new_row, row.SerializeAsString());
  EXPECT_EQ(*out[2].raw_new_row, *out[5].raw_new_row);
  // Same fields in the same order: the READ is the INSERT minus what a copy cannot know.
  Change as_read = out[5].event.change();
  as_read.set_kind(Change::READ);
  as_read.set_commit_lsn(4999);
  as_read.clear_lsn();
  as_read.clear_xid();
  as_read.clear_commit_time();
  EXPECT_EQ(as_read.SerializeAsString(), out[2].event.change().SerializeAsString());
}

// ---- Repair chunks -------------------------------------------------------------------------

dblog::v1::ChunkBegin RangeChunk(std::uint64_t request_id) {
  dblog::v1::ChunkBegin c;
  c.set_request_id(request_id);
  c.set_is_range(true);
  *c.mutable_from_key() = ItemKey(1);
  *c.mutable_to_key() = ItemKey(10);
  return c;
}

TEST(Emitter, ChunkTakesTheWatermarkTransactionsNextSeqs) {
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(MessageEv(true, 990, 1000, 1, "dblog.hi"));  // the high watermark
  e.BeginChunk(Items(), RangeChunk(77));
  EXPECT_TRUE(e.in_chunk());
  e.EmitChunkRow(Item(1, "a").SerializeAsString());
  e.EmitChunkDelete(ItemKey(2));
  e.EmitChunkRow(Item(3, "c").SerializeAsString());
  e.EndChunk();
  EXPECT_FALSE(e.in_chunk());
  e.OnEvent(CommitEv(1000, 2));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out), (Strings{"B 1000:0", "M 1000:1", "R 16384", "CB 1000:2", "READ 1000:3",
                                    "D 1000:4", "READ 1000:5", "CE 1000:6", "C 1000:7"}));
  const auto& begin = out[3].event.chunk_begin();
  EXPECT_EQ(begin.request_id(), 77u);
  EXPECT_EQ(begin.relation_oid(), kItems);
  EXPECT_TRUE(begin.is_range());
  EXPECT_EQ(begin.to_key().values(0).int_value(), 10);
  EXPECT_EQ(out[5].event.change().old_key().SerializeAsString(), ItemKey(2).SerializeAsString());
  EXPECT_EQ(*out[4].raw_new_row, Item(1, "a").SerializeAsString());
  const auto& end = out[7].event.chunk_end();
  EXPECT_EQ(end.request_id(), 77u);
  EXPECT_EQ(end.relation_oid(), kItems);
  EXPECT_EQ(end.rows(), 2u);
  EXPECT_EQ(end.deletes(), 1u);
}

TEST(Emitter, ChunkAfterLogChangesAndBeforeMore) {
  Emitter e;
  e.OnEvent(BeginEv(1000));
  e.OnEvent(RelationEv(Items()));
  e.OnEvent(InsertEv(kItems, 1000, 1, Item(5, "log")));
  e.BeginChunk(Items(), RangeChunk(1));
  e.EndChunk();
  e.OnEvent(InsertEv(kItems, 1000, 2, Item(6, "log")));
  e.OnEvent(CommitEv(1000, 3));
  EXPECT_EQ(Describe(Drain(e)), (Strings{"B 1000:0", "R 16384", "I 1000:1", "CB 1000:2",
                                         "CE 1000:3", "I 1000:4", "C 1000:5"}));
}

TEST(Emitter, ChunkMisuseThrows) {
  {
    Emitter e;  // outside a transaction
    EXPECT_THROW(e.BeginChunk(Items(), RangeChunk(1)), std::logic_error);
    EXPECT_THROW(e.EmitChunkRow(Item(1, "a").SerializeAsString()), std::logic_error);
    EXPECT_THROW(e.EmitChunkDelete(ItemKey(1)), std::logic_error);
    EXPECT_THROW(e.EndChunk(), std::logic_error);
  }
  {
    Emitter e;  // inside the bootstrap
    e.BeginBootstrap(5000, false, {});
    EXPECT_THROW(e.BeginChunk(Items(), RangeChunk(1)), std::logic_error);
  }
  {
    Emitter e;  // log events and a Commit while the chunk is open
    e.OnEvent(BeginEv(1000));
    e.BeginChunk(Items(), RangeChunk(1));
    EXPECT_THROW(e.OnEvent(InsertEv(kItems, 1000, 1, Item(1, "a"))), std::logic_error);
    EXPECT_THROW(e.OnEvent(CommitEv(1000, 1)), std::logic_error);
    EXPECT_THROW(e.BeginChunk(Items(), RangeChunk(2)), std::logic_error);
    // A delete with a key of the wrong width.
    EXPECT_THROW(e.EmitChunkDelete(MakeRow({Int(1), Int(2)})), std::logic_error);
  }
  {
    Emitter e;  // a ChunkBegin naming another relation than the one given
    e.OnEvent(BeginEv(1000));
    auto chunk = RangeChunk(1);
    chunk.set_relation_oid(kPairs);
    EXPECT_THROW(e.BeginChunk(Items(), chunk), std::logic_error);
  }
}

TEST(Emitter, ChunkRespectsResume) {
  // The consumer had the transaction up to the chunk's first row.
  Emitter e(Position{1000, 3});
  e.OnEvent(BeginEv(1000));
  e.OnEvent(MessageEv(true, 990, 1000, 1, "dblog.hi"));
  e.BeginChunk(Items(), RangeChunk(77));
  e.EmitChunkRow(Item(1, "a").SerializeAsString());
  e.EmitChunkRow(Item(2, "b").SerializeAsString());
  e.EndChunk();
  e.OnEvent(CommitEv(1000, 2));
  const auto out = Drain(e);
  ASSERT_EQ(Describe(out),
            (Strings{"B 1000:0", "R 16384", "READ 1000:4", "CE 1000:5", "C 1000:6"}));
  EXPECT_EQ(out[3].event.chunk_end().rows(), 2u);  // counts describe the chunk, not the resend
}

// ---- Acknowledgeable points ----------------------------------------------------------------

TEST(Emitter, TellsTheAckTrackerWhatCanBeConfirmed) {
  AckTracker acks(4000);
  Emitter e(Position{}, &acks);
  e.BeginBootstrap(5000, false, {});
  e.EmitCopiedRow(Items(), Item(1, "a").SerializeAsString());
  EXPECT_EQ(acks.unacknowledged(), 0u);
  e.EndBootstrap({});
  EXPECT_EQ(acks.unacknowledged(), 1u);
  FeedInsert(e, 6000, 2, false);
  e.OnEvent(MessageEv(false, 6500));
  e.OnEvent(BeginEv(7000));
  e.OnEvent(InsertEv(kItems, 7000, 1, Item(3, "c")));
  EXPECT_EQ(acks.unacknowledged(), 3u);
  EXPECT_EQ(acks.OnIdle(9999, e.in_transaction()), 4000u);
  EXPECT_EQ(acks.OnAck({4999, 1}), 4000u);  // inside the copy: nothing yet
  EXPECT_EQ(acks.OnAck({4999, 2}), 5000u);  // the copy: the consistent point
  EXPECT_EQ(acks.OnAck({6000, 1}), 5000u);
  EXPECT_EQ(acks.OnAck({6000, 2}), EndOf(6000));
  EXPECT_EQ(acks.OnAck({6500, 0}), 6500u);  // a non-transactional message: up to its LSN
  EXPECT_EQ(acks.OnAck({7000, 1}), 6500u);
  EXPECT_EQ(acks.OnIdle(9999, e.in_transaction()), 6500u);  // 7000 is open
  e.OnEvent(CommitEv(7000, 2));
  EXPECT_EQ(acks.OnAck({7000, 2}), EndOf(7000));
  EXPECT_EQ(acks.OnIdle(9999, e.in_transaction()), 9999u);
}

TEST(Emitter, DroppedCommitsAreNotTracked) {
  AckTracker acks(0, Position{2000, 4});
  Emitter e(Position{2000, 4}, &acks);
  FeedThree(e);
  EXPECT_EQ(acks.unacknowledged(), 1u);  // only 3000 went out
  EXPECT_EQ(acks.OnAck({3000, 2}), EndOf(3000));
}

// The source lost after a repair chunk went out in the high watermark's transaction, before its
// Commit: the replay has no chunk, so the Commit's own seq is at or before what the consumer
// has; it goes out after it, once, and is acknowledgeable.
TEST(Emitter, ASourceReconnectAfterAChunkStillEndsItsTransaction) {
  AckTracker acks(0);
  Emitter first(Position{}, &acks);
  first.OnEvent(BeginEv(1000));
  first.OnEvent(MessageEv(true, 990, 1000, 1, "dblog.hi"));
  first.BeginChunk(Items(), RangeChunk(77));
  first.EmitChunkRow(Item(1, "a").SerializeAsString());
  first.EndChunk();
  EXPECT_EQ(Describe(Drain(first)),
            (Strings{"B 1000:0", "M 1000:1", "R 16384", "CB 1000:2", "READ 1000:3", "CE 1000:4"}));
  Emitter again(first, &acks);
  again.OnEvent(BeginEv(1000));
  again.OnEvent(MessageEv(true, 990, 1000, 1, "dblog.hi"));  // the window is gone: no chunk
  again.OnEvent(CommitEv(1000, 2));
  EXPECT_EQ(Describe(Drain(again)), (Strings{"C 1000:5"}));
  EXPECT_EQ(acks.unacknowledged(), 1u);
  again.OnEvent(BeginEv(2000));
  again.OnEvent(RelationEv(Items()));
  again.OnEvent(InsertEv(kItems, 2000, 1, Item(2, "b")));
  again.OnEvent(CommitEv(2000, 2));
  EXPECT_EQ(Describe(Drain(again)), (Strings{"B 2000:0", "R 16384", "I 2000:1", "C 2000:2"}));
}

}  // namespace
}  // namespace dblog::emit::test
