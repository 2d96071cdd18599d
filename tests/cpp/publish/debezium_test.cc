// tests/cpp/publish/debezium_test.cc: golden tests of `--format debezium-json`
// (client/publish/debezium.h through Layout): the envelope of every op, and the type matrix,
// against the PostgreSQL connector's documented change event (Debezium documentation,
// "PostgreSQL connector", "Data change events": before/after/source/op/ts_ms, source with
// version, connector, name, ts_ms, snapshot, db, sequence, schema, table, txId, lsn, xmin; the
// key as its own JSON; a delete followed by a tombstone; op "t" for a truncate; "r" for reads),
// schemaless (Kafka Connect's JsonConverter with schemas.enable=false).
#include <gtest/gtest.h>

#include "client/publish/debezium.h"
#include "client/publish/layout.h"
#include "layout_events.h"

namespace dblog::publish {
namespace {

using dblog::v1::Change;
using dblog::v1::StreamEvent;

StreamEvent Customers() {
  return RelationEvent(16400, "public", "customers", {"id", "first_name", "email"});
}

dblog::v1::Row Row3(std::int64_t id, const std::string& name, const std::string& email) {
  dblog::v1::Row row;
  row.add_values()->set_int_value(id);
  row.add_values()->set_text_value(name);
  row.add_values()->set_text_value(email);
  return row;
}

StreamEvent ChangeEvent(Change::Kind kind, std::uint32_t seq) {
  StreamEvent e;
  auto* c = e.mutable_change();
  c->set_kind(kind);
  c->set_relation_oid(16400);
  c->set_commit_lsn(24023119);
  c->set_seq(seq);
  c->set_lsn(24023128);
  c->set_xid(555);
  c->set_commit_time(1559033904863000);
  return e;
}

std::string Source(const std::string& snapshot, const std::string& ts = "1559033904863",
                   const std::string& tx = "555") {
  return R"("source":{"version":"dblog-0.1","connector":"postgresql","name":"dblog.c1","ts_ms":)" +
         ts + R"(,"snapshot":")" + snapshot +
         R"(","db":"","sequence":"[\"24023119\",\"24023128\"]","schema":"public","table":"customers","txId":)" +
         tx + R"(,"lsn":24023128,"xmin":null})";
}

class DebeziumGolden : public ::testing::Test {
 protected:
  void SetUp() override { layout_.Map(Customers()); }
  std::vector<LogMessage> Map(const StreamEvent& e) { return layout_.Map(e); }
  Layout layout_{"dblog.c1", Format::kDebeziumJson};
};

TEST_F(DebeziumGolden, CreateIsOpC) {
  StreamEvent e = ChangeEvent(Change::INSERT, 1);
  *e.mutable_change()->mutable_new_row() = Row3(1, "Anne", "annek@noanswer.org");
  const auto m = Map(e);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].subject, "dblog.c1.table.public.customers");
  EXPECT_EQ(m[0].key, R"({"id":1})");
  EXPECT_EQ(m[0].payload,
            R"({"before":null,"after":{"id":1,"first_name":"Anne","email":"annek@noanswer.org"},)" +
                Source("false") + R"(,"op":"c","ts_ms":1559033904863,"transaction":null})");
}

TEST_F(DebeziumGolden, UpdateIsOpUWithBeforeOnlyUnderReplicaIdentityFull) {
  StreamEvent e = ChangeEvent(Change::UPDATE, 1);
  *e.mutable_change()->mutable_new_row() = Row3(1, "Anne Marie", "annek@noanswer.org");
  e.mutable_change()->mutable_old_key()->add_values()->set_int_value(1);
  auto m = Map(e);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].payload,
            R"({"before":null,"after":{"id":1,"first_name":"Anne Marie","email":"annek@noanswer.org"},)" +
                Source("false") + R"(,"op":"u","ts_ms":1559033904863,"transaction":null})");
  *e.mutable_change()->mutable_old_row() = Row3(1, "Anne", "annek@noanswer.org");
  m = Map(e);
  EXPECT_EQ(m[0].payload,
            R"({"before":{"id":1,"first_name":"Anne","email":"annek@noanswer.org"},"after":{"id":1,"first_name":"Anne Marie","email":"annek@noanswer.org"},)" +
                Source("false") + R"(,"op":"u","ts_ms":1559033904863,"transaction":null})");
}

TEST_F(DebeziumGolden, DeleteIsOpDThenATombstone) {
  StreamEvent e = ChangeEvent(Change::DELETE, 2);
  e.mutable_change()->mutable_old_key()->add_values()->set_int_value(1);
  const auto m = Map(e);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].payload,
            R"({"before":{"id":1,"first_name":null,"email":null},"after":null,)" + Source("false") +
                R"(,"op":"d","ts_ms":1559033904863,"transaction":null})");
  EXPECT_EQ(m[0].key, R"({"id":1})");
  EXPECT_EQ(m[1].payload, "");  // the tombstone: same key, no value
  EXPECT_EQ(m[1].key, R"({"id":1})");
  EXPECT_EQ(m[1].event, "tombstone");
  EXPECT_EQ(m[0].msg_id, "0/16E904F:2#1");
  EXPECT_EQ(m[1].msg_id, "0/16E904F:2#2");
  EXPECT_EQ(m[1].part, 2u);
  EXPECT_EQ(m[1].parts, 2u);
}

TEST_F(DebeziumGolden, BootstrapAndRepairRowsAreReads) {
  StreamEvent bb;
  bb.mutable_bootstrap_begin()->set_consistent_point(24023120);
  EXPECT_TRUE(Map(bb).empty());  // control events are not written in this format
  StreamEvent e = ChangeEvent(Change::READ, 1);
  e.mutable_change()->clear_xid();
  e.mutable_change()->clear_commit_time();
  *e.mutable_change()->mutable_new_row() = Row3(1, "Anne", "annek@noanswer.org");
  auto m = Map(e);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].payload,
            R"({"before":null,"after":{"id":1,"first_name":"Anne","email":"annek@noanswer.org"},)" +
                Source("true", "0", "null") + R"(,"op":"r","ts_ms":0,"transaction":null})");
  StreamEvent be;
  be.mutable_bootstrap_end()->set_commit_lsn(24023119);
  be.mutable_bootstrap_end()->set_seq(2);
  EXPECT_TRUE(Map(be).empty());

  StreamEvent begin;
  begin.mutable_begin()->set_xid(556);
  begin.mutable_begin()->set_commit_time(1559033904863000);
  Map(begin);
  StreamEvent cb;
  cb.mutable_chunk_begin()->set_relation_oid(16400);
  EXPECT_TRUE(Map(cb).empty());
  e = ChangeEvent(Change::READ, 3);
  e.mutable_change()->clear_xid();
  *e.mutable_change()->mutable_new_row() = Row3(1, "Anne", "annek@noanswer.org");
  m = Map(e);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].payload,
            R"({"before":null,"after":{"id":1,"first_name":"Anne","email":"annek@noanswer.org"},)" +
                Source("incremental", "1559033904863", "556") +
                R"(,"op":"r","ts_ms":1559033904863,"transaction":null})");
}

TEST_F(DebeziumGolden, TruncateIsOpTPerTable) {
  StreamEvent begin;
  begin.mutable_begin()->set_xid(557);
  begin.mutable_begin()->set_commit_time(1559033904863000);
  Map(begin);
  StreamEvent t;
  t.mutable_truncate()->add_relation_oids(16400);
  t.mutable_truncate()->set_commit_lsn(24023119);
  t.mutable_truncate()->set_seq(1);
  t.mutable_truncate()->set_lsn(24023128);
  const auto m = Map(t);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].payload, R"({"before":null,"after":null,)" + Source("false", "1559033904863", "557") +
                              R"(,"op":"t","ts_ms":1559033904863,"transaction":null})");
}

std::string Render(const dblog::v1::Value& v) {
  std::string out;
  common::JsonWriter json(&out);
  WriteDebeziumValue(json, v);
  return out;
}

// The type matrix: each value kind as the PostgreSQL connector's JSON carries it with its
// defaults (decimal.handling.mode=string aside: see docs/publish.md).
TEST(DebeziumTypes, EachKindAsTheConnectorWritesIt) {
  dblog::v1::Value v;
  v.set_null_value(true);
  EXPECT_EQ(Render(v), "null");
  v.set_unchanged(true);
  EXPECT_EQ(Render(v), R"("__debezium_unavailable_value")");  // unavailable.value.placeholder
  v.set_bool_value(true);
  EXPECT_EQ(Render(v), "true");
  v.set_int_value(-9223372036854775807LL - 1);  // int8 min: INT64
  EXPECT_EQ(Render(v), "-9223372036854775808");
  v.set_float4_value(1.5f);
  EXPECT_EQ(Render(v), "1.5");
  v.set_float8_value(0.1);
  EXPECT_EQ(Render(v), "0.1");
  v.set_float8_value(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(Render(v), R"("NaN")");
  v.set_text_value("naïve \"q\"\n");
  EXPECT_EQ(Render(v), R"("naïve \"q\"\n")");
  v.set_bytes_value(std::string("\x00\x01\xff", 3));  // bytea: binary.handling.mode=bytes
  EXPECT_EQ(Render(v), R"("AAH/")");
  v.set_uuid_value(std::string("\x12\x34\x56\x78\x9a\xbc\xde\xf0\x12\x34\x56\x78\x9a\xbc\xde\xf0", 16));
  EXPECT_EQ(Render(v), R"("12345678-9abc-def0-1234-56789abcdef0")");  // io.debezium.data.Uuid
  v.set_date_value(19723);  // 2024-01-01: io.debezium.time.Date, days since the epoch
  EXPECT_EQ(Render(v), "19723");
  v.set_timestamp_value(1704067200000000);  // io.debezium.time.MicroTimestamp
  EXPECT_EQ(Render(v), "1704067200000000");
  v.set_timestamptz_value(1704164645500000);  // io.debezium.time.ZonedTimestamp
  EXPECT_EQ(Render(v), R"("2024-01-02T03:04:05.5Z")");
  v.set_timestamptz_value(1704164645000000);
  EXPECT_EQ(Render(v), R"("2024-01-02T03:04:05Z")");
  v.set_literal("12345.678900");  // numeric, decimal.handling.mode=string
  EXPECT_EQ(Render(v), R"("12345.678900")");
  v.set_literal(R"({"a": [1, 2]})");  // json, jsonb: io.debezium.data.Json
  EXPECT_EQ(Render(v), R"("{\"a\": [1, 2]}")");
}

TEST(DebeziumKeys, CompositeKeysInKeyOrder) {
  dblog::v1::Relation r;
  for (const char* c : {"v", "b", "a"}) r.add_columns()->set_name(c);
  r.add_key_columns(2);
  r.add_key_columns(1);
  dblog::v1::Row key;
  key.add_values()->set_text_value("k1");
  key.add_values()->set_int_value(7);
  EXPECT_EQ(DebeziumKey(r, key), R"({"a":"k1","b":7})");
}

}  // namespace
}  // namespace dblog::publish
