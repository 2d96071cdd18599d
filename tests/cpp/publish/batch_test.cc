// tests/cpp/publish/batch_test.cc: several events per log message (client/publish/batch.h)
// without a broker: where batches are cut (a transaction larger than a batch, a transaction
// spanning tables, Relations and fanned-out events standing alone, the byte limit), the
// headers' values of a batch (its last position, its first..last id) and the framing.
#include "client/publish/batch.h"

#include <gtest/gtest.h>

#include "client/position.h"
#include "client/publish/layout.h"
#include "client/publish/nats/subjects.h"
#include "layout_events.h"

namespace dblog::publish {
namespace {

using dblog::v1::StreamEvent;

// A table of schema "s".
StreamEvent RelationEvent(std::uint32_t oid, const std::string& name) {
  return publish::RelationEvent(oid, "s", name);
}

StreamEvent Begin(std::uint64_t lsn) {
  StreamEvent e;
  e.mutable_begin()->set_commit_lsn(lsn);
  return e;
}

StreamEvent Commit(std::uint64_t lsn, std::uint32_t seq) {
  StreamEvent e;
  e.mutable_commit()->set_commit_lsn(lsn);
  e.mutable_commit()->set_seq(seq);
  return e;
}

StreamEvent Change(std::uint32_t oid, std::uint64_t lsn, std::uint32_t seq,
                   std::size_t value_bytes = 0) {
  StreamEvent e;
  auto* c = e.mutable_change();
  c->set_relation_oid(oid);
  c->set_commit_lsn(lsn);
  c->set_seq(seq);
  if (value_bytes)
    c->mutable_new_row()->add_values()->set_bytes_value(std::string(value_bytes, 'x'));
  return e;
}

// Maps events through a Layout and a Batcher as the publisher does, closing at the end.
std::vector<LogMessage> MapAll(Layout& layout, Batcher& batcher,
                               const std::vector<StreamEvent>& events) {
  std::vector<LogMessage> out;
  for (const StreamEvent& e : events)
    for (LogMessage& m : layout.Map(e)) batcher.Add(std::move(m), out);
  batcher.Close(out);
  return out;
}

std::vector<StreamEvent> Unpack(const LogMessage& m) {
  std::vector<std::string_view> bytes;
  EXPECT_TRUE(SplitDelimited(m.payload, bytes)) << m.msg_id;
  std::vector<StreamEvent> events;
  for (const auto b : bytes) {
    StreamEvent e;
    EXPECT_TRUE(e.ParseFromArray(b.data(), static_cast<int>(b.size())));
    events.push_back(e);
  }
  return events;
}

std::string Pos(const StreamEvent& e) { return PositionText(*client::PositionOf(e)); }

TEST(PublishBatch, ATransactionLargerThanABatchIsCutAtMaxEvents) {
  Layout layout("p");
  Batcher batcher(BatchLimits{4, 1 << 20});
  std::vector<StreamEvent> events = {RelationEvent(1, "a"), Begin(0x100)};
  for (std::uint32_t i = 1; i <= 10; ++i) events.push_back(Change(1, 0x100, i));
  events.push_back(Commit(0x100, 11));
  const auto out = MapAll(layout, batcher, events);
  // Relation | Begin | changes 1-4 | 5-8 | 9-10 | Commit
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out[0].kind, EventKind::kRelation);
  EXPECT_EQ(NatsSubjects("p").Of(out[1]), "p.control");
  const std::vector<std::size_t> sizes = {1, 1, 4, 4, 2, 1};
  std::vector<StreamEvent> all;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const auto unpacked = Unpack(out[i]);
    EXPECT_EQ(unpacked.size(), sizes[i]) << i;
    all.insert(all.end(), unpacked.begin(), unpacked.end());
    if (i == 0) continue;
    // the message's position (Dblog-Position: where a restart resumes) is its last event's
    EXPECT_EQ(PositionText(*out[i].position), Pos(unpacked.back())) << i;
  }
  ASSERT_EQ(all.size(), events.size());  // every event, once, in order
  for (std::size_t i = 0; i < all.size(); ++i)
    EXPECT_EQ(all[i].SerializeAsString(), events[i].SerializeAsString()) << i;
  EXPECT_EQ(NatsSubjects("p").Of(out[2]), "p.table.s.a");
  EXPECT_EQ(out[2].table, "s.a");
  EXPECT_EQ(out[2].relation_oid, 1u);
  EXPECT_EQ(out[2].kind, EventKind::kChange);
  EXPECT_EQ(out[2].msg_id, "0/100:1..0/100:4");  // first..last
  EXPECT_EQ(out[3].msg_id, "0/100:5..0/100:8");
  EXPECT_EQ(out[1].msg_id, "0/100:0");  // one event: its own id, as without batches
  EXPECT_EQ(out[5].kind, EventKind::kCommit);
  EXPECT_TRUE(out[0].msg_id.empty());  // a Relation has none
}

TEST(PublishBatch, ABatchNeverSpansTablesOrSubjects) {
  Layout layout("p");
  Batcher batcher(BatchLimits{100, 1 << 20});
  const std::vector<StreamEvent> events = {
      RelationEvent(1, "a"), RelationEvent(2, "b"), Begin(0x100),
      Change(1, 0x100, 1),   Change(1, 0x100, 2),   Change(2, 0x100, 3),
      Change(2, 0x100, 4),   Change(1, 0x100, 5),   RelationEvent(2, "b"),  // (a new definition)
      Change(2, 0x100, 6),   Commit(0x100, 7),      Begin(0x200),
      Change(2, 0x200, 1),   Commit(0x200, 2)};
  const auto out = MapAll(layout, batcher, events);
  std::vector<std::pair<std::string, std::size_t>> got;
  for (const auto& m : out) got.emplace_back(NatsSubjects("p").Of(m), Unpack(m).size());
  const std::vector<std::pair<std::string, std::size_t>> want = {
      {"p.table.s.a", 1}, {"p.table.s.b", 1},  // the Relations
      {"p.control", 1},                        // Begin
      {"p.table.s.a", 2}, {"p.table.s.b", 2}, {"p.table.s.a", 1},
      {"p.table.s.b", 1},  // the Relation again: alone, closing nothing of its own table early
      {"p.table.s.b", 1}, {"p.control", 2},  // Commit and the next Begin: consecutive on one
                                             // subject
      {"p.table.s.b", 1}, {"p.control", 1}};
  EXPECT_EQ(got, want);
  for (const auto& m : out) {
    if (NatsSubjects("p").Of(m) == "p.control") {
      EXPECT_EQ(m.relation_oid, 0u);
      continue;
    }
    for (const auto& e : Unpack(m)) {  // every event of a table message is of that table
      if (e.has_change()) {
        EXPECT_EQ(e.change().relation_oid(), m.relation_oid) << m.msg_id;
      }
    }
  }
  EXPECT_EQ(out[8].msg_id, "0/100:7..0/200:0");
  EXPECT_EQ(out[8].kind, EventKind::kBegin);  // the kind of its last event
}

TEST(PublishBatch, FannedOutEventsStandAloneWithTheirParts) {
  Layout layout("p");
  Batcher batcher(BatchLimits{100, 1 << 20});
  StreamEvent truncate;
  truncate.mutable_truncate()->add_relation_oids(1);
  truncate.mutable_truncate()->add_relation_oids(2);
  truncate.mutable_truncate()->set_commit_lsn(0x100);
  truncate.mutable_truncate()->set_seq(3);
  const std::vector<StreamEvent> events = {RelationEvent(1, "a"), RelationEvent(2, "b"),
                                           Begin(0x100),          Change(1, 0x100, 1),
                                           Change(1, 0x100, 2),   truncate,
                                           Commit(0x100, 4)};
  const auto out = MapAll(layout, batcher, events);
  ASSERT_EQ(out.size(), 8u);  // 2 Relations, Begin, 2 changes, 3 parts, Commit
  EXPECT_EQ(Unpack(out[3]).size(), 2u);
  for (std::uint32_t i = 0; i < 3; ++i) {
    const LogMessage& m = out[4 + i];
    EXPECT_EQ(m.part, i + 1);
    EXPECT_EQ(m.parts, 3u);
    EXPECT_EQ(m.msg_id, "0/100:3#" + std::to_string(i + 1));
    EXPECT_EQ(Unpack(m).size(), 1u);
  }
  EXPECT_EQ(NatsSubjects("p").Of(out[5]),
            "p.table.s.a");  // the part of table a after a's batch, not in it
}

TEST(PublishBatch, TheByteLimitClosesABatchBeforeALargeEvent) {
  Layout layout("p");
  Batcher batcher(BatchLimits{100, 1000});
  const std::vector<StreamEvent> events = {
      RelationEvent(1, "a"),     Change(1, 0x100, 1, 400),
      Change(1, 0x100, 2, 400),  Change(1, 0x100, 3, 400),  // would pass 1000 bytes: a new batch
      Change(1, 0x100, 4, 5000),                            // larger than the limit alone: alone
      Change(1, 0x100, 5, 10)};
  const auto out = MapAll(layout, batcher, events);
  std::vector<std::size_t> sizes;
  for (const auto& m : out) sizes.push_back(Unpack(m).size());
  EXPECT_EQ(sizes, (std::vector<std::size_t>{1, 2, 1, 1, 1}));
  for (std::size_t i = 1; i < out.size(); ++i) {
    if (Unpack(out[i]).size() > 1) {
      EXPECT_LE(out[i].payload.size(), 1000u);
    }
  }
}

TEST(PublishBatch, BatchesWithTheSameFirstEventHaveDifferentIds) {
  // A restart may cut batches elsewhere: a resend holding more events than a stored message
  // that starts at the same event must not be taken for its duplicate (batch.h)
  const auto ids = [](std::size_t max_events) {
    Layout layout("p");
    Batcher batcher(BatchLimits{max_events, 1 << 20});
    std::vector<StreamEvent> events = {RelationEvent(1, "a")};
    for (std::uint32_t i = 1; i <= 6; ++i) events.push_back(Change(1, 0x100, i));
    std::vector<std::string> out;
    for (const auto& m : MapAll(layout, batcher, events)) out.push_back(m.msg_id);
    return out;
  };
  const auto three = ids(3), six = ids(6);
  ASSERT_EQ(three.size(), 3u);
  ASSERT_EQ(six.size(), 2u);
  EXPECT_EQ(three[1], "0/100:1..0/100:3");
  EXPECT_EQ(six[1], "0/100:1..0/100:6");
}

TEST(PublishBatch, EventsSerializedStraightIntoABatchGiveTheSameMessages) {
  // the publisher's path for single events (Layout::SingleTarget, Batcher::AddEvent) against
  // Layout::Map and Batcher::Add, mixed as the publisher mixes them
  StreamEvent truncate;
  truncate.mutable_truncate()->add_relation_oids(1);
  truncate.mutable_truncate()->set_commit_lsn(0x100);
  truncate.mutable_truncate()->set_seq(6);
  StreamEvent message;
  message.mutable_message()->set_transactional(true);
  message.mutable_message()->set_commit_lsn(0x100);
  message.mutable_message()->set_seq(7);
  StreamEvent chunk_begin, chunk_end;
  chunk_begin.mutable_chunk_begin()->set_relation_oid(2);
  chunk_begin.mutable_chunk_begin()->set_commit_lsn(0x100);
  chunk_begin.mutable_chunk_begin()->set_seq(8);
  chunk_end.mutable_chunk_end()->set_relation_oid(2);
  chunk_end.mutable_chunk_end()->set_commit_lsn(0x100);
  chunk_end.mutable_chunk_end()->set_seq(10);
  const std::vector<StreamEvent> events = {RelationEvent(1, "a"),
                                           RelationEvent(2, "b.c"),
                                           Begin(0x100),
                                           Change(1, 0x100, 1),
                                           Change(1, 0x100, 2, 700),
                                           Change(2, 0x100, 3),
                                           Change(1, 0x100, 4),
                                           Change(1, 0x100, 5),
                                           truncate,
                                           message,
                                           chunk_begin,
                                           Change(2, 0x100, 9),
                                           chunk_end,
                                           Commit(0x100, 11),
                                           Begin(0x200),
                                           RelationEvent(1, "renamed"),
                                           Change(1, 0x200, 1),
                                           Commit(0x200, 2)};
  for (const std::size_t max_events : {1, 2, 3, 100}) {
    SCOPED_TRACE("max_events " + std::to_string(max_events));
    Layout mapped_layout("p"), direct_layout("p");
    Batcher mapped(BatchLimits{max_events, 1000}), direct(BatchLimits{max_events, 1000});
    std::vector<LogMessage> want, got;
    std::size_t direct_events = 0;
    for (const StreamEvent& e : events) {
      for (LogMessage& m : mapped_layout.Map(e)) mapped.Add(std::move(m), want);
      const auto position = client::PositionOf(e);
      const auto target = direct_layout.SingleTarget(e);
      if (position && target) {
        direct.AddEvent(e, *target, *position, got);
        ++direct_events;
      } else {
        for (LogMessage& m : direct_layout.Map(e)) direct.Add(std::move(m), got);
      }
    }
    mapped.Close(want);
    direct.Close(got);
    EXPECT_EQ(direct_events, 14u);  // all but the three Relations and the Truncate
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("message " + std::to_string(i));
      EXPECT_EQ(NatsSubjects("p").Of(got[i]), NatsSubjects("p").Of(want[i]));
      EXPECT_EQ(got[i].payload, want[i].payload);
      EXPECT_EQ(got[i].msg_id, want[i].msg_id);
      EXPECT_EQ(got[i].kind, want[i].kind);
      EXPECT_EQ(got[i].table, want[i].table);
      EXPECT_EQ(got[i].relation_oid, want[i].relation_oid);
      EXPECT_EQ(got[i].part, want[i].part);
      EXPECT_EQ(got[i].parts, want[i].parts);
      EXPECT_EQ((got[i].kind == EventKind::kRelation), (want[i].kind == EventKind::kRelation));
      ASSERT_EQ(got[i].position.has_value(), want[i].position.has_value());
      if (got[i].position) {
        EXPECT_EQ(PositionText(*got[i].position), PositionText(*want[i].position));
      }
    }
  }
  Layout layout("p");
  EXPECT_FALSE(layout.SingleTarget(Change(9, 0x100, 1)));  // an unknown table: Map says so
  Layout debezium("p", Format::kDebeziumJson);
  EXPECT_FALSE(debezium.SingleTarget(Begin(0x100)));
}

TEST(PublishBatch, DelimitedFramingRoundTripsAndRefusesTruncation) {
  std::string payload;
  const std::string small(5, 'a'), large(300, 'b'), empty;
  AppendDelimited(small, payload);
  AppendDelimited(large, payload);  // a two-byte length
  AppendDelimited(empty, payload);
  EXPECT_EQ(payload.size(), 1 + 5 + 2 + 300 + 1);
  std::vector<std::string_view> parts;
  ASSERT_TRUE(SplitDelimited(payload, parts));
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0], small);
  EXPECT_EQ(parts[1], large);
  EXPECT_EQ(parts[2], empty);
  for (std::size_t cut = 1; cut < payload.size(); ++cut) {
    if (cut == 6 || cut == 308) continue;  // between two events: a shorter valid sequence
    EXPECT_FALSE(SplitDelimited(std::string_view(payload).substr(0, cut), parts)) << cut;
  }
  EXPECT_FALSE(SplitDelimited(std::string("\xff\xff\xff\xff\xff\x01", 6), parts));
}

}  // namespace
}  // namespace dblog::publish
