// tests/cpp/publish/layout_test.cc: the log layout of `dblog publish` (client/publish/layout.h)
// without a broker: subjects, escaping, fan-out of multi-table events, deduplication ids and
// the position and table headers' text.
#include <gtest/gtest.h>

#include "client/position.h"
#include "client/publish/layout.h"
#include "client/publish/nats/subjects.h"
#include "layout_events.h"

namespace dblog::publish {
namespace {

using dblog::v1::StreamEvent;

TEST(PublishLayout, SubjectTokensEscapeEverythingButSafeCharacters) {
  EXPECT_EQ(SubjectToken("items"), "items");
  EXPECT_EQ(SubjectToken("Order_Items-2"), "Order_Items-2");
  EXPECT_EQ(SubjectToken("a.b"), "a%2Eb");
  EXPECT_EQ(SubjectToken("a b*>"), "a%20b%2A%3E");
  EXPECT_EQ(SubjectToken("100%"), "100%25");
  EXPECT_EQ(SubjectToken("é"), "%C3%A9");
  // injective: "a.b" and "a%2Eb" must not meet
  EXPECT_NE(SubjectToken("a.b"), SubjectToken("a%2Eb"));
  const NatsSubjects subjects("dblog.c1");
  EXPECT_EQ(subjects.Table("public", "my.table"), "dblog.c1.table.public.my%2Etable");
  EXPECT_EQ(subjects.Control(), "dblog.c1.control");
  EXPECT_EQ(subjects.All(), "dblog.c1.>");
}

TEST(PublishLayout, PositionTextRoundTripsAndRefusesGarbage) {
  for (const auto& p : {client::MakePosition(0, 0), client::MakePosition(0x16B3748, 3),
                        client::MakePosition(0xA00000000ull | 0xF0, 10),
                        client::MakePosition(0xFFFFFFFFFFFFFFFFull, 0xFFFFFFFFu)}) {
    EXPECT_EQ(PositionText(p), client::FormatPosition(p));
    const auto back = ParsePositionText(PositionText(p));
    ASSERT_TRUE(back) << PositionText(p);
    EXPECT_EQ(back->commit_lsn(), p.commit_lsn());
    EXPECT_EQ(back->seq(), p.seq());
  }
  for (const char* bad : {"", "0/1", "0/1:", "/1:2", "0/1:2x", "0/1:-2", "G/1:2", "0/1:99999999999",
                          "123456789/1:2", " 0/1:2"})
    EXPECT_FALSE(ParsePositionText(bad)) << bad;
  EXPECT_EQ(ParsePartText("2/3"), std::make_pair(2u, 3u));
  EXPECT_FALSE(ParsePartText("0/3"));
  EXPECT_FALSE(ParsePartText("4/3"));
  EXPECT_FALSE(ParsePartText("1/3x"));
}

TEST(PublishLayout, TableHeaderEscapesLineBreaksAndPercent) {
  EXPECT_EQ(TableHeaderText("public.items"), "public.items");
  EXPECT_EQ(TableHeaderText("s.a\r\nb"), "s.a%0D%0Ab");
  EXPECT_EQ(TableHeaderText("s.100%"), "s.100%25");
  EXPECT_EQ(TableHeaderText("s.%0A"), "s.%250A");  // not a line break once read back
  EXPECT_EQ(TableHeaderText(""), "");
}

TEST(PublishLayout, EventsGoToControlOrTheirTable) {
  Layout layout("p");
  auto rel = layout.Map(RelationEvent(42, "public", "items"));
  ASSERT_EQ(rel.size(), 1u);
  EXPECT_EQ(NatsSubjects("p").Of(rel[0]), "p.table.public.items");
  EXPECT_EQ(rel[0].kind, EventKind::kRelation);
  EXPECT_TRUE(rel[0].msg_id.empty());
  EXPECT_FALSE(rel[0].position);

  StreamEvent begin;
  begin.mutable_begin()->set_commit_lsn(0x100);
  auto b = layout.Map(begin);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(NatsSubjects("p").Of(b[0]), "p.control");
  EXPECT_EQ(b[0].msg_id, "0/100:0");
  EXPECT_EQ(b[0].kind, EventKind::kBegin);

  StreamEvent change;
  change.mutable_change()->set_relation_oid(42);
  change.mutable_change()->set_commit_lsn(0x100);
  change.mutable_change()->set_seq(1);
  auto c = layout.Map(change);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(NatsSubjects("p").Of(c[0]), "p.table.public.items");
  EXPECT_EQ(c[0].relation_oid, 42u);
  EXPECT_EQ(c[0].table, "public.items");
  EXPECT_EQ(c[0].msg_id, "0/100:1");
  StreamEvent parsed;
  ASSERT_TRUE(parsed.ParseFromString(c[0].payload));
  EXPECT_EQ(parsed.change().seq(), 1u);

  StreamEvent unknown;
  unknown.mutable_change()->set_relation_oid(43);
  EXPECT_THROW(layout.Map(unknown), std::runtime_error);
  StreamEvent nontx;
  nontx.mutable_message()->set_prefix("x");
  EXPECT_THROW(layout.Map(nontx), std::runtime_error);
}

TEST(PublishLayout, MultiTableEventsFanOutOnePartPerTable) {
  Layout layout("p");
  layout.Map(RelationEvent(1, "s", "a"));
  layout.Map(RelationEvent(2, "s", "b"));
  StreamEvent truncate;
  truncate.mutable_truncate()->add_relation_oids(1);
  truncate.mutable_truncate()->add_relation_oids(2);
  truncate.mutable_truncate()->set_commit_lsn(0x200);
  truncate.mutable_truncate()->set_seq(4);
  auto t = layout.Map(truncate);
  ASSERT_EQ(t.size(), 3u);  // the whole event on control (for readers of everything), then per table
  EXPECT_EQ(NatsSubjects("p").Of(t[0]), "p.control");
  StreamEvent whole_truncate;
  ASSERT_TRUE(whole_truncate.ParseFromString(t[0].payload));
  EXPECT_EQ(whole_truncate.truncate().relation_oids_size(), 2);
  for (std::uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(t[i].part, i + 1);
    EXPECT_EQ(t[i].parts, 3u);
    EXPECT_EQ(t[i].msg_id, "0/200:4#" + std::to_string(i + 1));
    if (i == 0) continue;
    StreamEvent one;
    ASSERT_TRUE(one.ParseFromString(t[i].payload));
    ASSERT_EQ(one.truncate().relation_oids_size(), 1);  // each table's part names it alone
    EXPECT_EQ(one.truncate().relation_oids(0), i);
  }
  EXPECT_EQ(NatsSubjects("p").Of(t[1]), "p.table.s.a");
  EXPECT_EQ(NatsSubjects("p").Of(t[2]), "p.table.s.b");

  StreamEvent bb;
  bb.mutable_bootstrap_begin()->set_consistent_point(0x300);
  for (const char* name : {"a", "b"}) {
    auto* tp = bb.mutable_bootstrap_begin()->add_tables();
    tp->set_schema("s");
    tp->set_name(name);
  }
  auto m = layout.Map(bb);
  ASSERT_EQ(m.size(), 3u);  // the whole event on control, then one per table
  EXPECT_EQ(NatsSubjects("p").Of(m[0]), "p.control");
  EXPECT_EQ(NatsSubjects("p").Of(m[1]), "p.table.s.a");
  EXPECT_EQ(NatsSubjects("p").Of(m[2]), "p.table.s.b");
  EXPECT_EQ(m[0].msg_id, "bootstrap_begin:0/300#1");
  EXPECT_EQ(m[2].msg_id, "bootstrap_begin:0/300#3");
  StreamEvent whole, part;
  ASSERT_TRUE(whole.ParseFromString(m[0].payload));
  ASSERT_TRUE(part.ParseFromString(m[2].payload));
  EXPECT_EQ(whole.bootstrap_begin().tables_size(), 2);
  ASSERT_EQ(part.bootstrap_begin().tables_size(), 1);
  EXPECT_EQ(part.bootstrap_begin().tables(0).name(), "b");
}

}  // namespace
}  // namespace dblog::publish
