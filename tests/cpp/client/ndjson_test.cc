// tests/cpp/client/ndjson_test.cc: the NDJSON rendering of every Value kind and every op (the
// exact lines are the documented format), the relation cache, rendering without a Relation,
// PositionOf and LSN text.
#include "client/ndjson.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "client/client.h"
#include "client/position.h"
#include "client/relation_cache.h"
#include "test_events.h"

namespace dblog::client {
namespace {

using dblog::v1::Change;
using dblog::v1::StreamEvent;
using dblog::v1::Value;
using namespace dblog::client::testing;

constexpr std::uint64_t kLsn = 0x16B3748;
constexpr std::int64_t kTime = 1796013963044138;  // 2026-11-30T04:46:03.044138Z
constexpr std::uint32_t kItems = 16384;

// ---- values ---------------------------------------------------------------------------

TEST(ValueJson, EveryKind) {
  Value v;
  EXPECT_EQ(ValueToJson(v), "null");  // no member set: no data either
  v.set_null_value(true);
  EXPECT_EQ(ValueToJson(v), "null");
  v.set_unchanged(true);
  EXPECT_EQ(ValueToJson(v), R"({"unchanged_toast":true})");
  v.set_bool_value(true);
  EXPECT_EQ(ValueToJson(v), "true");
  v.set_bool_value(false);
  EXPECT_EQ(ValueToJson(v), "false");
  v.set_int_value(-42);
  EXPECT_EQ(ValueToJson(v), "-42");
  v.set_int_value(std::numeric_limits<std::int64_t>::max());  // a number, even above 2^53
  EXPECT_EQ(ValueToJson(v), "9223372036854775807");
  v.set_float4_value(1.25f);
  EXPECT_EQ(ValueToJson(v), "1.25");
  v.set_float4_value(std::numeric_limits<float>::infinity());
  EXPECT_EQ(ValueToJson(v), R"("Infinity")");
  v.set_float8_value(0.1);
  EXPECT_EQ(ValueToJson(v), "0.1");
  v.set_float8_value(std::nan(""));
  EXPECT_EQ(ValueToJson(v), R"("NaN")");
  v.set_float8_value(-std::numeric_limits<double>::infinity());
  EXPECT_EQ(ValueToJson(v), R"("-Infinity")");
  v.set_text_value("line\n\"q\" caf\xc3\xa9");
  EXPECT_EQ(ValueToJson(v), "\"line\\n\\\"q\\\" caf\xc3\xa9\"");
  v.set_bytes_value(std::string("\xde\xad\x00\xef", 4));
  EXPECT_EQ(ValueToJson(v), R"("\\xdead00ef")");
  v.set_bytes_value("");
  EXPECT_EQ(ValueToJson(v), R"("\\x")");
  v.set_uuid_value(
      std::string("\x12\x3e\x45\x67\xe8\x9b\x12\xd3\xa4\x56\x42\x66\x14\x17\x40\x00", 16));
  EXPECT_EQ(ValueToJson(v), R"("123e4567-e89b-12d3-a456-426614174000")");
  v.set_uuid_value("\x01\x02");  // not 16 bytes: the bytes, not a made-up uuid
  EXPECT_EQ(ValueToJson(v), R"("\\x0102")");
  v.set_date_value(-1);
  EXPECT_EQ(ValueToJson(v), R"("1969-12-31")");
  v.set_date_value(20787);
  EXPECT_EQ(ValueToJson(v), R"("2026-11-30")");
  v.set_timestamp_value(kTime);
  EXPECT_EQ(ValueToJson(v), R"("2026-11-30T04:46:03.044138")");
  v.set_timestamptz_value(kTime);
  EXPECT_EQ(ValueToJson(v), R"("2026-11-30T04:46:03.044138Z")");
  v.set_timestamptz_value(-1);
  EXPECT_EQ(ValueToJson(v), R"("1969-12-31T23:59:59.999999Z")");
  v.set_literal("123456789012345678901234567890.5");  // numeric: lossless as a string
  EXPECT_EQ(ValueToJson(v), R"("123456789012345678901234567890.5")");
  v.set_literal("infinity");
  EXPECT_EQ(ValueToJson(v), R"("infinity")");
}

// ---- events -----------------------------------------------------------------------------

class RenderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    relations_.Observe(RelationEvent(kItems, "public", "items",
                                     {{"id", "integer"}, {"name", "text"}, {"body", "text"}}, {0}));
  }

  std::string Render(const StreamEvent& event, RenderOptions options = {}) {
    std::string line;
    EXPECT_TRUE(RenderEvent(event, relations_, options, &line));
    EXPECT_FALSE(line.empty());
    if (!line.empty()) {
      EXPECT_EQ(line.back(), '\n');
      EXPECT_EQ(line.find('\n'), line.size() - 1) << "one line per event";
      line.pop_back();
    }
    return line;
  }

  RelationCache relations_;
};

TEST_F(RenderTest, Begin) {
  EXPECT_EQ(Render(BeginEvent(kLsn, 771, kTime, kLsn + 0x30)),
            R"({"position":{"commit_lsn":"0/16B3748","seq":0},"op":"begin","xid":771,)"
            R"("commit_time":"2026-11-30T04:46:03.044138Z","end_lsn":"0/16B3778"})");
  StreamEvent with_origin = BeginEvent(0x1'0000'0000, 5, kTime, 0x1'0000'0030);
  with_origin.mutable_begin()->set_origin_id(3);
  EXPECT_EQ(Render(with_origin),
            R"({"position":{"commit_lsn":"1/0","seq":0},"op":"begin","xid":5,)"
            R"("commit_time":"2026-11-30T04:46:03.044138Z","end_lsn":"1/30","origin_id":3})");
}

TEST_F(RenderTest, Commit) {
  EXPECT_EQ(Render(CommitEvent(kLsn, 4, 771, kTime, kLsn + 0x30)),
            R"({"position":{"commit_lsn":"0/16B3748","seq":4},"op":"commit","xid":771,)"
            R"("commit_time":"2026-11-30T04:46:03.044138Z","end_lsn":"0/16B3778"})");
}

TEST_F(RenderTest, Insert) {
  StreamEvent event = ChangeEvent(Change::INSERT, kItems, kLsn, 3, 771, kTime);
  *event.mutable_change()->mutable_new_row() =
      MakeRow({Int(1), Text("one"), Unchanged()});
  EXPECT_EQ(Render(event),
            R"({"position":{"commit_lsn":"0/16B3748","seq":3},"op":"insert",)"
            R"("table":"public.items","xid":771,"commit_time":"2026-11-30T04:46:03.044138Z",)"
            R"("key":{"id":1},"row":{"id":1,"name":"one","body":{"unchanged_toast":true}}})");
}

TEST_F(RenderTest, UpdateShowsOldKeyAndOldRow) {
  StreamEvent event = ChangeEvent(Change::UPDATE, kItems, kLsn, 1, 771, kTime);
  *event.mutable_change()->mutable_new_row() =
      MakeRow({Int(2), Text("two"), Null()});
  *event.mutable_change()->mutable_old_key() = MakeRow({Int(1)});
  EXPECT_EQ(Render(event),
            R"({"position":{"commit_lsn":"0/16B3748","seq":1},"op":"update",)"
            R"("table":"public.items","xid":771,"commit_time":"2026-11-30T04:46:03.044138Z",)"
            R"("key":{"id":2},"old_key":{"id":1},"row":{"id":2,"name":"two","body":null}})");
  *event.mutable_change()->mutable_old_row() =
      MakeRow({Int(1), Text("one"), Null()});
  EXPECT_EQ(Render(event),
            R"({"position":{"commit_lsn":"0/16B3748","seq":1},"op":"update",)"
            R"("table":"public.items","xid":771,"commit_time":"2026-11-30T04:46:03.044138Z",)"
            R"("key":{"id":2},"old_key":{"id":1},"row":{"id":2,"name":"two","body":null},)"
            R"("old_row":{"id":1,"name":"one","body":null}})");
}

TEST_F(RenderTest, Delete) {
  StreamEvent event = ChangeEvent(Change::DELETE, kItems, kLsn, 2, 771, kTime);
  *event.mutable_change()->mutable_old_key() = MakeRow({Int(1)});
  EXPECT_EQ(Render(event),
            R"({"position":{"commit_lsn":"0/16B3748","seq":2},"op":"delete",)"
            R"("table":"public.items","xid":771,"commit_time":"2026-11-30T04:46:03.044138Z",)"
            R"("key":{"id":1}})");
}

TEST_F(RenderTest, ReadHasNoTransaction) {
  StreamEvent event = ChangeEvent(Change::READ, kItems, kLsn, 7, 0, 0);
  *event.mutable_change()->mutable_new_row() =
      MakeRow({Int(7), Text("seven"), Text("b")});
  EXPECT_EQ(Render(event),
            R"({"position":{"commit_lsn":"0/16B3748","seq":7},"op":"read",)"
            R"("table":"public.items","key":{"id":7},"row":{"id":7,"name":"seven","body":"b"}})");
}

TEST_F(RenderTest, CompositeKeyInKeyOrder) {
  relations_.Observe(RelationEvent(20000, "app", "pairs",
                                   {{"a", "integer"}, {"b", "text"}, {"v", "text"}}, {1, 0}));
  StreamEvent event = ChangeEvent(Change::INSERT, 20000, kLsn, 1, 9, kTime);
  *event.mutable_change()->mutable_new_row() =
      MakeRow({Int(1), Text("x"), Text("first")});
  EXPECT_EQ(Render(event),
            R"({"position":{"commit_lsn":"0/16B3748","seq":1},"op":"insert",)"
            R"("table":"app.pairs","xid":9,"commit_time":"2026-11-30T04:46:03.044138Z",)"
            R"("key":{"b":"x","a":1},"row":{"a":1,"b":"x","v":"first"}})");
}

TEST_F(RenderTest, ChangeOfAnUnknownRelationKeepsValuesPositionally) {
  StreamEvent event = ChangeEvent(Change::UPDATE, 999, kLsn, 1, 9, kTime);
  *event.mutable_change()->mutable_new_row() = MakeRow({Int(5), Text("x")});
  *event.mutable_change()->mutable_old_key() = MakeRow({Int(4)});
  EXPECT_EQ(Render(event),
            R"({"position":{"commit_lsn":"0/16B3748","seq":1},"op":"update","table":null,)"
            R"("relation_oid":999,"xid":9,"commit_time":"2026-11-30T04:46:03.044138Z",)"
            R"("old_key":[4],"row":[5,"x"]})");
}

TEST_F(RenderTest, RelationRedefinitionIsUsed) {
  relations_.Observe(
      RelationEvent(kItems, "public", "items", {{"id", "integer"}, {"title", "text"}}, {0}));
  StreamEvent event = ChangeEvent(Change::INSERT, kItems, kLsn, 1, 9, kTime);
  *event.mutable_change()->mutable_new_row() = MakeRow({Int(1), Text("t")});
  EXPECT_NE(Render(event).find(R"("row":{"id":1,"title":"t"})"), std::string::npos);
}

TEST_F(RenderTest, Truncate) {
  StreamEvent event;
  auto& truncate = *event.mutable_truncate();
  truncate.add_relation_oids(kItems);
  truncate.add_relation_oids(999);  // never described: printed as its oid
  truncate.set_commit_lsn(kLsn);
  truncate.set_seq(1);
  truncate.set_cascade(true);
  EXPECT_EQ(Render(event),
            R"({"position":{"commit_lsn":"0/16B3748","seq":1},"op":"truncate",)"
            R"("tables":["public.items",999],"cascade":true,"restart_identity":false})");
}

TEST_F(RenderTest, MessageTextAndBinary) {
  StreamEvent event;
  auto& message = *event.mutable_message();
  message.set_transactional(true);
  message.set_prefix("app");
  message.set_content("hello \"world\"");
  message.set_lsn(kLsn - 0x10);
  message.set_commit_lsn(kLsn);
  message.set_seq(2);
  message.set_xid(771);
  EXPECT_EQ(Render(event), R"({"position":{"commit_lsn":"0/16B3748","seq":2},"op":"message",)"
                           R"("transactional":true,"xid":771,"lsn":"0/16B3738","prefix":"app",)"
                           R"("content":"hello \"world\""})");
  message.set_content(std::string("\x00\xff\x10", 3));
  EXPECT_EQ(Render(event), R"({"position":{"commit_lsn":"0/16B3748","seq":2},"op":"message",)"
                           R"("transactional":true,"xid":771,"lsn":"0/16B3738","prefix":"app",)"
                           R"("content_base64":"AP8Q"})");
}

TEST_F(RenderTest, NonTransactionalMessageHasNoPosition) {
  StreamEvent event;
  auto& message = *event.mutable_message();
  message.set_prefix("other");
  message.set_content("now");
  message.set_lsn(kLsn);
  EXPECT_EQ(Render(event),
            R"({"position":null,"op":"message","transactional":false,"lsn":"0/16B3748",)"
            R"("prefix":"other","content":"now"})");
}

TEST_F(RenderTest, Bootstrap) {
  StreamEvent begin;
  begin.mutable_bootstrap_begin()->set_consistent_point(kLsn);
  auto* table = begin.mutable_bootstrap_begin()->add_tables();
  table->set_schema("public");
  table->set_name("items");
  table->set_relation_oid(kItems);
  table->set_rows_estimated(1000);
  EXPECT_EQ(Render(begin),
            R"({"position":null,"op":"bootstrap_begin","consistent_point":"0/16B3748",)"
            R"("restarted":false,"tables":[{"table":"public.items","relation_oid":16384,)"
            R"("rows_estimated":1000}]})");

  StreamEvent end;  // positioned like the copied rows: one below the consistent point
  end.mutable_bootstrap_end()->set_consistent_point(kLsn);
  end.mutable_bootstrap_end()->set_commit_lsn(kLsn - 1);
  end.mutable_bootstrap_end()->set_seq(1001);
  table = end.mutable_bootstrap_end()->add_tables();
  table->set_schema("public");
  table->set_name("items");
  table->set_relation_oid(kItems);
  table->set_rows_copied(998);
  table->set_done(true);
  EXPECT_EQ(Render(end),
            R"({"position":{"commit_lsn":"0/16B3747","seq":1001},"op":"bootstrap_end",)"
            R"("consistent_point":"0/16B3748","tables":[{"table":"public.items",)"
            R"("relation_oid":16384,"rows_copied":998}]})");
}

TEST_F(RenderTest, Chunks) {
  StreamEvent range;
  auto& chunk = *range.mutable_chunk_begin();
  chunk.set_request_id(7);
  chunk.set_relation_oid(kItems);
  chunk.set_commit_lsn(kLsn);
  chunk.set_seq(1);
  chunk.set_is_range(true);
  chunk.set_chunk(2);
  *chunk.mutable_from_key() = MakeRow({Int(1)});
  chunk.add_key_collations("");
  EXPECT_EQ(Render(range),
            R"({"position":{"commit_lsn":"0/16B3748","seq":1},"op":"chunk_begin",)"
            R"("request_id":7,"table":"public.items","chunk":2,"is_range":true,)"
            R"("from_key":{"id":1},"from_inclusive":false,"to_key":null,"to_inclusive":false,)"
            R"("key_collations":[""]})");

  StreamEvent list;
  list.mutable_chunk_begin()->set_request_id(8);
  list.mutable_chunk_begin()->set_relation_oid(kItems);
  list.mutable_chunk_begin()->set_commit_lsn(kLsn);
  list.mutable_chunk_begin()->set_seq(1);
  EXPECT_EQ(Render(list), R"({"position":{"commit_lsn":"0/16B3748","seq":1},"op":"chunk_begin",)"
                          R"("request_id":8,"table":"public.items","chunk":0,"is_range":false})");

  StreamEvent end;
  auto& chunk_end = *end.mutable_chunk_end();
  chunk_end.set_request_id(7);
  chunk_end.set_relation_oid(kItems);
  chunk_end.set_commit_lsn(kLsn);
  chunk_end.set_seq(12);
  chunk_end.set_rows(10);
  chunk_end.set_deletes(1);
  *chunk_end.add_kept_keys() = MakeRow({Int(4)});
  chunk_end.set_last(true);
  EXPECT_EQ(Render(end), R"({"position":{"commit_lsn":"0/16B3748","seq":12},"op":"chunk_end",)"
                         R"("request_id":7,"table":"public.items","rows":10,"deletes":1,)"
                         R"("kept_keys":[{"id":4}],"last":true})");
}

TEST_F(RenderTest, RelationsOnlyOnRequest) {
  const StreamEvent relation =
      RelationEvent(kItems, "public", "items", {{"id", "integer"}, {"name", "text"}}, {0});
  std::string line;
  EXPECT_FALSE(RenderEvent(relation, relations_, RenderOptions{}, &line));
  EXPECT_EQ(line, "");
  RenderOptions options;
  options.relations = true;
  EXPECT_EQ(
      Render(relation, options),
      R"({"position":null,"op":"relation","table":"public.items","relation_oid":16384,)"
      R"("replica_identity":"d","key":["id"],"columns":[)"
      R"({"name":"id","type":"integer","type_oid":23,"typmod":-1,"not_null":true,"attnum":1},)"
      R"({"name":"name","type":"text","type_oid":25,"typmod":-1,"not_null":false,"attnum":2}]})");
}

TEST_F(RenderTest, EmptyEventIsNotPrinted) {
  std::string line;
  EXPECT_FALSE(RenderEvent(StreamEvent(), relations_, RenderOptions{}, &line));
  EXPECT_EQ(line, "");
}

// ---- positions, relation cache ---------------------------------------------------------------

TEST(Position, OfEveryEventKind) {
  const auto pos = [](const StreamEvent& e) { return Client::PositionOf(e); };
  const auto is = [](const std::optional<dblog::v1::Position>& p, std::uint64_t lsn,
                     std::uint32_t seq) { return p && p->commit_lsn() == lsn && p->seq() == seq; };
  EXPECT_TRUE(is(pos(BeginEvent(100, 1, kTime, 130)), 100, 0));
  EXPECT_TRUE(is(pos(ChangeEvent(Change::INSERT, kItems, 100, 3, 1, kTime)), 100, 3));
  EXPECT_TRUE(is(pos(CommitEvent(100, 4, 1, kTime, 130)), 100, 4));
  StreamEvent e;
  e.mutable_truncate()->set_commit_lsn(100);
  e.mutable_truncate()->set_seq(2);
  EXPECT_TRUE(is(pos(e), 100, 2));
  e.mutable_message()->set_transactional(true);
  e.mutable_message()->set_commit_lsn(100);
  e.mutable_message()->set_seq(5);
  EXPECT_TRUE(is(pos(e), 100, 5));
  e.mutable_message()->set_transactional(false);
  e.mutable_message()->set_commit_lsn(0);
  e.mutable_message()->set_seq(0);
  EXPECT_FALSE(pos(e));
  e.mutable_bootstrap_end()->set_consistent_point(200);
  e.mutable_bootstrap_end()->set_commit_lsn(199);
  e.mutable_bootstrap_end()->set_seq(9);
  EXPECT_TRUE(is(pos(e), 199, 9));
  e.mutable_chunk_begin()->set_commit_lsn(300);
  e.mutable_chunk_begin()->set_seq(1);
  EXPECT_TRUE(is(pos(e), 300, 1));
  e.mutable_chunk_end()->set_commit_lsn(300);
  e.mutable_chunk_end()->set_seq(8);
  EXPECT_TRUE(is(pos(e), 300, 8));
  EXPECT_FALSE(pos(RelationEvent(kItems, "public", "items", {{"id", "integer"}}, {0})));
  e.mutable_bootstrap_begin()->set_consistent_point(200);
  EXPECT_FALSE(pos(e));
  EXPECT_FALSE(pos(StreamEvent()));
}

TEST(Position, OrderAndText) {
  EXPECT_LT(ComparePositions(MakePosition(1, 9), MakePosition(2, 0)), 0);
  EXPECT_LT(ComparePositions(MakePosition(2, 0), MakePosition(2, 1)), 0);
  EXPECT_EQ(ComparePositions(MakePosition(2, 1), MakePosition(2, 1)), 0);
  EXPECT_GT(ComparePositions(MakePosition(3, 0), MakePosition(2, 7)), 0);
  EXPECT_EQ(FormatLsn(0), "0/0");
  EXPECT_EQ(FormatLsn(0x16B3748), "0/16B3748");
  EXPECT_EQ(FormatLsn(0xABCDEF0123456789), "ABCDEF01/23456789");
  EXPECT_EQ(FormatPosition(MakePosition(0x16B3748, 3)), "0/16B3748:3");
}

TEST(RelationCache, TracksLatestDefinitionPerOid) {
  RelationCache cache;
  EXPECT_EQ(cache.Find(kItems), nullptr);
  EXPECT_FALSE(cache.TableName(kItems));
  cache.Observe(BeginEvent(1, 1, 1, 2));  // not a relation: ignored
  EXPECT_EQ(cache.size(), 0u);
  cache.Observe(RelationEvent(kItems, "public", "items", {{"id", "integer"}}, {0}));
  cache.Observe(RelationEvent(kItems, "public", "things", {{"id", "integer"}}, {0}));
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.TableName(kItems).value_or(""), "public.things");

  const auto relation = RelationEvent(1, "s", "t", {{"a", "integer"}, {"b", "text"}}, {1});
  const auto key = KeyOfRow(relation.relation(), MakeRow({Int(1), Text("k")}));
  ASSERT_TRUE(key);
  ASSERT_EQ(key->values_size(), 1);
  EXPECT_EQ(key->values(0).text_value(), "k");
  EXPECT_FALSE(KeyOfRow(relation.relation(), MakeRow({Int(1)})));  // key column missing
}

}  // namespace
}  // namespace dblog::client
