// tests/cpp/publish/debezium_test.cc: golden tests of `--format debezium-json`
// (client/publish/debezium.h through Layout): the envelope of every op, and the type matrix,
// against what Debezium 3.x's PostgreSQL connector emits with its default settings, schemaless
// (Kafka Connect's JsonConverter with schemas.enable=false). Each expectation names the file of
// Debezium's source (github.com/debezium/debezium) it comes from; paths are under
// debezium-connector-postgres/src/{main,test}/java/io/debezium/connector/postgresql/ (PG/) or
// debezium-connector-common/src/main/java/io/debezium/ (common/).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <limits>

#include "client/publish/debezium.h"
#include "client/publish/layout.h"
#include "client/publish/nats/subjects.h"
#include "debezium_matrix.h"
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

// The processing time the tests' layouts see: Debezium's top-level ts_ms, ts_us, ts_ns
// (common/data/Envelope.java: create/update/delete/read put the clock's instant there).
constexpr std::int64_t kNowNanos = 1700000000123456789;
const std::string kNow = R"("ts_ms":1700000000123,"ts_us":1700000000123456,"ts_ns":1700000000123456789)";

// `source` in the order of Debezium's schema (common/schema/SchemaFactory.java
// sourceInfoSchemaBuilder, PG/PostgresSourceInfoStructMaker.java): ts_ms/ts_us/ts_ns the commit
// time; sequence as PG/SourceInfo.java sequence(): [lastCommitLsn, lsn] as strings or nulls.
std::string Source(const std::string& snapshot, const std::string& ts_us = "1559033904863000",
                   const std::string& tx = "555", const std::string& sequence = R"([null,\"24023128\"])",
                   const std::string& lsn = "24023128", const std::string& db = "") {
  const std::string ts_ms = ts_us.substr(0, ts_us.size() - 3);
  return R"("source":{"version":"dblog-0.1","connector":"postgresql","name":"dblog.c1","ts_ms":)" +
         ts_ms + R"(,"snapshot":")" + snapshot + R"(","db":")" + db + R"(","sequence":")" +
         sequence + R"(","ts_us":)" + ts_us + R"(,"ts_ns":)" + ts_us + "000" +
         R"(,"schema":"public","table":"customers","txId":)" + tx + R"(,"lsn":)" + lsn +
         R"(,"xmin":null})";
}

// The envelope's tail (common/schema/SchemaFactory.java datatypeEnvelopeSchema: transaction,
// op, ts_ms, ts_us, ts_ns after before, after, source).
std::string Tail(const std::string& op) {
  return R"(,"transaction":null,"op":")" + op + R"(",)" + kNow + "}";
}

class DebeziumGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    DebeziumOptions options;
    options.now_nanos = [] { return kNowNanos; };
    layout_.set_debezium_options(options);
    layout_.Map(Customers());
  }
  std::vector<LogMessage> Map(const StreamEvent& e) { return layout_.Map(e); }
  Layout layout_{"dblog.c1", Format::kDebeziumJson};
};

TEST_F(DebeziumGolden, CreateIsOpC) {
  StreamEvent e = ChangeEvent(Change::INSERT, 1);
  *e.mutable_change()->mutable_new_row() = Row3(1, "Anne", "annek@noanswer.org");
  const auto m = Map(e);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(NatsSubjects("dblog.c1").Of(m[0]), "dblog.c1.table.public.customers");
  EXPECT_EQ(m[0].key, R"({"id":1})");
  EXPECT_EQ(m[0].payload,
            R"({"before":null,"after":{"id":1,"first_name":"Anne","email":"annek@noanswer.org"},)" +
                Source("false") + Tail("c"));
}

TEST_F(DebeziumGolden, UpdateIsOpUWithBeforeOnlyUnderReplicaIdentityFull) {
  StreamEvent e = ChangeEvent(Change::UPDATE, 1);
  *e.mutable_change()->mutable_new_row() = Row3(1, "Anne Marie", "annek@noanswer.org");
  e.mutable_change()->mutable_old_key()->add_values()->set_int_value(1);
  auto m = Map(e);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].payload,
            R"({"before":null,"after":{"id":1,"first_name":"Anne Marie","email":"annek@noanswer.org"},)" +
                Source("false") + Tail("u"));
  *e.mutable_change()->mutable_old_row() = Row3(1, "Anne", "annek@noanswer.org");
  m = Map(e);
  EXPECT_EQ(m[0].payload,
            R"({"before":{"id":1,"first_name":"Anne","email":"annek@noanswer.org"},"after":{"id":1,"first_name":"Anne Marie","email":"annek@noanswer.org"},)" +
                Source("false") + Tail("u"));
}

TEST_F(DebeziumGolden, DeleteIsOpDThenATombstone) {
  StreamEvent e = ChangeEvent(Change::DELETE, 2);
  e.mutable_change()->mutable_old_key()->add_values()->set_int_value(1);
  const auto m = Map(e);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].payload,
            R"({"before":{"id":1,"first_name":null,"email":null},"after":null,)" + Source("false") +
                Tail("d"));
  EXPECT_EQ(m[0].key, R"({"id":1})");
  EXPECT_EQ(m[1].payload, "");  // the tombstone: same key, no value
  EXPECT_EQ(m[1].key, R"({"id":1})");
  EXPECT_EQ(m[1].kind, EventKind::kTombstone);
  EXPECT_EQ(m[0].msg_id, "0/16E904F:2#1");
  EXPECT_EQ(m[1].msg_id, "0/16E904F:2#2");
  EXPECT_EQ(m[1].part, 2u);
  EXPECT_EQ(m[1].parts, 2u);
}

// Bootstrap rows are a snapshot's reads: op "r", snapshot "true", source.ts_ms the time the row
// was read (common/relational/RelationalSnapshotChangeEventSource.java: offset.event(tableId,
// clock.currentTime())), source.lsn the WAL position of the snapshot (PG/
// PostgresSnapshotChangeEventSource.java: xlogStart; here the slot's consistent point) and no
// lastCommitLsn before the first commit (PG/PostgresOffsetContext.java initialContext). Repair
// rows are an incremental snapshot's: snapshot "incremental", no txId, lsn nor xmin
// (PG/PostgresSourceInfoStructMaker.java), read at the clock's time too
// (common/pipeline/source/snapshot/incremental/AbstractIncrementalSnapshotChangeEventSource.java).
TEST_F(DebeziumGolden, BootstrapAndRepairRowsAreReads) {
  StreamEvent bb;
  bb.mutable_bootstrap_begin()->set_consistent_point(24023120);
  EXPECT_TRUE(Map(bb).empty());  // control events are not written in this format
  StreamEvent e = ChangeEvent(Change::READ, 1);
  e.mutable_change()->clear_xid();
  e.mutable_change()->clear_commit_time();
  e.mutable_change()->clear_lsn();
  *e.mutable_change()->mutable_new_row() = Row3(1, "Anne", "annek@noanswer.org");
  auto m = Map(e);
  ASSERT_EQ(m.size(), 1u);
  std::string source =
      Source("true", "1700000000123456", "null", R"([null,\"24023120\"])", "24023120");
  source.replace(source.find(R"("ts_ns":1700000000123456000)"), 27, R"("ts_ns":1700000000123456789)");
  EXPECT_EQ(m[0].payload,
            R"({"before":null,"after":{"id":1,"first_name":"Anne","email":"annek@noanswer.org"},)" +
                source + Tail("r"));
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
  source = Source("incremental", "1700000000123456", "null");
  source.replace(source.find(R"("ts_ns":1700000000123456000)"), 27, R"("ts_ns":1700000000123456789)");
  source.replace(source.find(R"("lsn":24023128)"), 14, R"("lsn":null)");
  EXPECT_EQ(m[0].payload,
            R"({"before":null,"after":{"id":1,"first_name":"Anne","email":"annek@noanswer.org"},)" +
                source + Tail("r"));
  // a partial fill of the chunk (an UPDATE whose unknown columns say "keep yours"): Debezium
  // has no partial row, and the placeholder would be a string in a typed field: left out
  e = ChangeEvent(Change::UPDATE, 4);
  *e.mutable_change()->mutable_new_row() = Row3(2, "Bob", "b@noanswer.org");
  e.mutable_change()->mutable_new_row()->mutable_values(1)->set_unchanged(true);
  EXPECT_TRUE(Map(e).empty());
}

// source.sequence[0] is the last commit's position before this transaction: the COMMIT
// message's, where the walsender puts the end of the commit record (PG/
// PostgresStreamingChangeEventSource.java commitMessage -> PG/PostgresOffsetContext.java
// updateCommitPosition -> PG/SourceInfo.java updateLastCommit); null before the first commit
// seen. Was this transaction's own commit LSN (larger than `lsn`).
TEST_F(DebeziumGolden, SequenceIsThePreviousCommitsEndAndTheChangesLsn) {
  StreamEvent e = ChangeEvent(Change::INSERT, 1);
  *e.mutable_change()->mutable_new_row() = Row3(1, "Anne", "annek@noanswer.org");
  EXPECT_NE(Map(e)[0].payload.find(R"("sequence":"[null,\"24023128\"]")"), std::string::npos);
  StreamEvent commit;
  commit.mutable_commit()->set_commit_lsn(24023119);
  commit.mutable_commit()->set_end_lsn(24023160);
  commit.mutable_commit()->set_seq(2);
  EXPECT_TRUE(Map(commit).empty());
  e.mutable_change()->set_commit_lsn(24023300);
  e.mutable_change()->set_lsn(24023200);
  EXPECT_NE(Map(e)[0].payload.find(R"("sequence":"[\"24023160\",\"24023200\"]")"),
            std::string::npos)
      << Map(e)[0].payload;
}

// Truncates: skipped.operations defaults to "t" (common/config/CommonConnectorConfig.java
// SKIPPED_OPERATIONS .withDefault("t"); common/pipeline/EventDispatcher.java skips them), so
// nothing is written; with skipped.operations=none, op "t" once per table.
TEST_F(DebeziumGolden, TruncateIsSkippedByDefaultElseOpTPerTable) {
  StreamEvent begin;
  begin.mutable_begin()->set_xid(557);
  begin.mutable_begin()->set_commit_time(1559033904863000);
  Map(begin);
  StreamEvent t;
  t.mutable_truncate()->add_relation_oids(16400);
  t.mutable_truncate()->set_commit_lsn(24023119);
  t.mutable_truncate()->set_seq(1);
  t.mutable_truncate()->set_lsn(24023128);
  EXPECT_TRUE(Map(t).empty());
  DebeziumOptions options;
  options.now_nanos = [] { return kNowNanos; };
  SetDebeziumOption(options, "skipped.operations", "none");
  layout_.set_debezium_options(options);
  const auto m = Map(t);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].payload, R"({"before":null,"after":null,)" +
                              Source("false", "1559033904863000", "557") + Tail("t"));
}

// The other settings under Debezium's names: skipped.operations=c,u (creates and updates not
// written; a key change's create neither), tombstones.on.delete=false (a delete without its
// tombstone: common/config/CommonConnectorConfig.java TOMBSTONES_ON_DELETE), database.dbname
// (source.db: PG/SourceInfo.java database()).
TEST_F(DebeziumGolden, DebeziumOptionsUnderDebeziumsNames) {
  DebeziumOptions options;
  options.now_nanos = [] { return kNowNanos; };
  SetDebeziumOption(options, "skipped.operations", "c, u");
  SetDebeziumOption(options, "tombstones.on.delete", "false");
  SetDebeziumOption(options, "database.dbname", "inventory");
  EXPECT_THROW(SetDebeziumOption(options, "skipped.operations", "x"), std::invalid_argument);
  EXPECT_THROW(SetDebeziumOption(options, "tombstones.on.delete", "yes"), std::invalid_argument);
  EXPECT_THROW(SetDebeziumOption(options, "decimal.handling.mode", "string"), std::invalid_argument);
  layout_.set_debezium_options(options);
  StreamEvent e = ChangeEvent(Change::INSERT, 1);
  *e.mutable_change()->mutable_new_row() = Row3(1, "Anne", "annek@noanswer.org");
  EXPECT_TRUE(Map(e).empty());
  e.mutable_change()->set_kind(Change::UPDATE);
  e.mutable_change()->mutable_old_key()->add_values()->set_int_value(1);
  EXPECT_TRUE(Map(e).empty());
  e.mutable_change()->mutable_old_key()->mutable_values(0)->set_int_value(7);  // a key change
  auto m = Map(e);
  ASSERT_EQ(m.size(), 1u);  // the old key's delete alone
  EXPECT_EQ(m[0].key, R"({"id":7})");
  EXPECT_NE(m[0].payload.find(R"("op":"d")"), std::string::npos);
  e = ChangeEvent(Change::DELETE, 2);
  e.mutable_change()->mutable_old_key()->add_values()->set_int_value(1);
  m = Map(e);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].payload,
            R"({"before":{"id":1,"first_name":null,"email":null},"after":null,)" +
                Source("false", "1559033904863000", "555", R"([null,\"24023128\"])", "24023128",
                       "inventory") +
                Tail("d"));
}

// A key change: the old key's `d` and its tombstone, then the new key's `c`, all three at the
// update's position as parts 1/3, 2/3, 3/3 (PG/PostgresChangeRecordEmitter.java
// emitUpdateRecord: a primary key change is emitted as a delete, a tombstone and a create).
TEST_F(DebeziumGolden, KeyChangeIsDeleteTombstoneCreateAsThreePartsOfOnePosition) {
  StreamEvent e = ChangeEvent(Change::UPDATE, 1);
  *e.mutable_change()->mutable_new_row() = Row3(2, "Anne", "annek@noanswer.org");
  e.mutable_change()->mutable_old_key()->add_values()->set_int_value(1);
  const auto m = Map(e);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].payload, R"({"before":{"id":1,"first_name":null,"email":null},"after":null,)" +
                              Source("false") + Tail("d"));
  EXPECT_EQ(m[1].payload, "");
  EXPECT_EQ(m[1].key, R"({"id":1})");
  EXPECT_EQ(m[2].payload,
            R"({"before":null,"after":{"id":2,"first_name":"Anne","email":"annek@noanswer.org"},)" +
                Source("false") + Tail("c"));
  EXPECT_EQ(m[2].key, R"({"id":2})");
  for (std::uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(m[i].part, i + 1);
    EXPECT_EQ(m[i].parts, 3u);
    EXPECT_EQ(m[i].position->seq(), 1u);
    EXPECT_EQ(m[i].msg_id, "0/16E904F:1#" + std::to_string(i + 1));
  }
}

// A column of the given type (its oid, pg_type.dat) and typmod (-1: none).
dblog::v1::Column Col(std::uint32_t oid, std::int32_t typmod = -1) {
  dblog::v1::Column c;
  c.set_name("c");
  c.set_type_oid(oid);
  c.set_typmod(typmod);
  return c;
}

std::string Render(const dblog::v1::Column& column, const dblog::v1::Value& v) {
  std::string out;
  common::JsonWriter json(&out);
  WriteDebeziumValue(json, column, v);
  return out;
}

// The kinds that map as they did: the connector's defaults, binary.handling.mode=bytes.
TEST(DebeziumTypes, PlainKindsAsTheConnectorWritesThem) {
  const dblog::v1::Column any = Col(0);
  dblog::v1::Value v;
  v.set_null_value(true);
  EXPECT_EQ(Render(any, v), "null");
  v.set_unchanged(true);
  EXPECT_EQ(Render(any, v), R"("__debezium_unavailable_value")");  // unavailable.value.placeholder
  // ... in the type of the column's schema, as Debezium's UnchangedToastedPlaceholder: bytea
  // its base64, a text array a one-element array, int4[] / int8[] its bytes as numbers
  EXPECT_EQ(Render(Col(17), v), R"("X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==")");
  EXPECT_EQ(Render(Col(1009), v), R"(["__debezium_unavailable_value"])");  // text[]
  EXPECT_EQ(Render(Col(2951), v), R"(["__debezium_unavailable_value"])");  // uuid[]
  const std::string bytes =
      "[95,95,100,101,98,101,122,105,117,109,95,117,110,97,118,97,105,108,97,98,108,101,95,"
      "118,97,108,117,101]";
  EXPECT_EQ(Render(Col(1007), v), bytes);  // int4[]
  EXPECT_EQ(Render(Col(1016), v), bytes);  // int8[]
  EXPECT_EQ(Render(Col(1000), v), R"("__debezium_unavailable_value")");  // bool[]: none in Debezium
  v.set_bool_value(true);
  EXPECT_EQ(Render(any, v), "true");
  v.set_int_value(-9223372036854775807LL - 1);  // int8 min: INT64
  EXPECT_EQ(Render(any, v), "-9223372036854775808");
  v.set_float4_value(1.5f);
  EXPECT_EQ(Render(any, v), "1.5");
  v.set_float8_value(0.1);
  EXPECT_EQ(Render(any, v), "0.1");
  // Jackson's QUOTE_NON_NUMERIC_NUMBERS (on by default) writes a NaN double as a string
  v.set_float8_value(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(Render(any, v), R"("NaN")");
  v.set_text_value("naïve \"q\"\n");
  EXPECT_EQ(Render(any, v), R"("naïve \"q\"\n")");
  v.set_bytes_value(std::string("\x00\x01\xff", 3));  // bytea: binary.handling.mode=bytes
  EXPECT_EQ(Render(Col(17), v), R"("AAH/")");
  v.set_uuid_value(std::string("\x12\x34\x56\x78\x9a\xbc\xde\xf0\x12\x34\x56\x78\x9a\xbc\xde\xf0", 16));
  EXPECT_EQ(Render(Col(2950), v), R"("12345678-9abc-def0-1234-56789abcdef0")");  // io.debezium.data.Uuid
  v.set_literal(R"({"a": [1, 2]})");  // json, jsonb: io.debezium.data.Json
  EXPECT_EQ(Render(Col(3802), v), R"("{\"a\": [1, 2]}")");
}

// time.precision.mode=adaptive (PG/AbstractRecordsProducerTest.java
// schemaAndValuesForDateTimeTypes, its time_table: ts timestamp, ts_ms timestamp(3), tz
// timestamptz, date, ti time, tip time(3), ttf time '24:00:00', ttz timetz, tptz timetz(3), it
// interval, tz_large, tz_min, ts_pinf, tz_zero). Precision from the typmod as pgjdbc's
// TypeInfoCache.getScale gives it (6 without one: PG/PostgresValueConverter.java
// getTimePrecision).
TEST(DebeziumTypes, DatesAndTimesInDebeziumsUnits) {
  dblog::v1::Value v;
  v.set_date_value(17109);  // '2016-11-04': io.debezium.time.Date, days since the epoch
  EXPECT_EQ(Render(Col(1082), v), "17109");
  // '2016-11-04T13:51:30.123456'::timestamp: MicroTimestamp
  v.set_timestamp_value(1478267490123456);
  EXPECT_EQ(Render(Col(1114), v), "1478267490123456");
  EXPECT_EQ(Render(Col(1114, 6), v), "1478267490123456");
  EXPECT_EQ(Render(Col(1114, 4), v), "1478267490123456");
  // the same into timestamp(3) (PostgreSQL keeps .123): io.debezium.time.Timestamp, millis
  // (expectedTsMs = asEpochMillis(...)); was microseconds, 1000 times too large
  v.set_timestamp_value(1478267490123000);
  EXPECT_EQ(Render(Col(1114, 3), v), "1478267490123");
  EXPECT_EQ(Render(Col(1114, 0), v), "1478267490123");
  v.set_timestamp_value(-1000001);  // before the epoch: floored, as Instant.toEpochMilli
  EXPECT_EQ(Render(Col(1114, 3), v), "-1001");
  // 'infinity'::timestamp: PgStatement.DATE_POSITIVE_INFINITY (ts_pinf, ts_ninf)
  EXPECT_EQ(Render(Col(1114), Literal("infinity")), "9223372036825200000");
  EXPECT_EQ(Render(Col(1114), Literal("-infinity")), "-9223372036832400000");
  // ZonedTimestamp with the column's fractional digits: "2016-11-04T11:51:30.123456Z" (tz),
  // "+21016-11-04T06:51:30.000000Z" (tz_zero: six digits though zero, '+' past year 9999),
  // "-4713-12-31T23:59:59.999999Z" (tz_min, 4714 BC); "infinity" as the text (tz_pinf)
  v.set_timestamptz_value(1478260290123456);
  EXPECT_EQ(Render(Col(1184), v), R"("2016-11-04T11:51:30.123456Z")");
  v.set_timestamptz_value(601060287090000000);
  EXPECT_EQ(Render(Col(1184), v), R"("+21016-11-04T06:51:30.000000Z")");
  v.set_timestamptz_value(-210863520000000001);
  EXPECT_EQ(Render(Col(1184), v), R"("-4713-12-31T23:59:59.999999Z")");
  // '0044-03-15 12:30:00.5+00 BC': astronomical year -43, a sign and four digits as Java's
  // Instant writes it (docs/publish.md's value table)
  v.set_timestamptz_value(-63517778999500000);
  EXPECT_EQ(Render(Col(1184), v), R"("-0043-03-15T12:30:00.500000Z")");
  EXPECT_EQ(Render(Col(1184, 1), v), R"("-0043-03-15T12:30:00.5Z")");
  EXPECT_EQ(Render(Col(1184), Literal("infinity")), R"("infinity")");
  // timestamptz(3): three digits; timestamptz(0): Java's ISO_OFFSET_DATE_TIME, none
  // (common/time/ZonedTimestamp.java getDateTimeFormatter)
  v.set_timestamptz_value(1478260290123000);
  EXPECT_EQ(Render(Col(1184, 3), v), R"("2016-11-04T11:51:30.123Z")");
  v.set_timestamptz_value(1478260290000000);
  EXPECT_EQ(Render(Col(1184, 0), v), R"("2016-11-04T11:51:30Z")");
  // time: MicroTime (ti: LocalTime.parse("13:51:30").toNanoOfDay() / 1_000); time(3): Time,
  // millis (tip); '24:00:00': a whole day (ttf: TimeUnit.DAYS.toNanos(1) / 1_000)
  EXPECT_EQ(Render(Col(1083), Literal("13:51:30")), "49890000000");
  EXPECT_EQ(Render(Col(1083, 3), Literal("13:51:30.123")), "49890123");
  EXPECT_EQ(Render(Col(1083), Literal("24:00:00")), "86400000000");
  // timetz: ZonedTime in UTC (ttz '13:51:30.123789+02:00' -> "11:51:30.123789Z", tptz)
  EXPECT_EQ(Render(Col(1266), Literal("13:51:30.123789+02")), R"("11:51:30.123789Z")");
  EXPECT_EQ(Render(Col(1266, 3), Literal("13:51:30.123+02")), R"("11:51:30.123Z")");
  EXPECT_EQ(Render(Col(1266), Literal("01:00:00-05:30")), R"("06:30:00Z")");
  EXPECT_EQ(Render(Col(1266), Literal("23:00:00-02")), R"("01:00:00Z")");  // past midnight
  // interval 'P1Y2M3DT4H5M6.78S', as PostgreSQL prints it: MicroDuration
  // (expectedInterval = MicroDuration.durationMicros(1, 2, 3, 4, 5, 6.78, DAYS_PER_MONTH_AVG),
  // common/time/MicroDuration.java: ((1 * 12 + 2) * 365.25 / 12 + 3) days ... in doubles)
  EXPECT_EQ(Render(Col(1186), Literal("1 year 2 mons 3 days 04:05:06.78")), "37091106780000");
  EXPECT_EQ(Render(Col(1186), Literal("-1 days -00:00:01.5")), "-86401500000");
  EXPECT_EQ(Render(Col(1186), Literal("00:00:00")), "0");
}

// decimal.handling.mode=precise (PG/AbstractRecordsProducerTest.java
// schemasAndValuesForBigDecimalEncodedNumericTypes): numeric(p,s) a Decimal of scale s, which
// JsonConverter writes as the base64 of BigDecimal.unscaledValue().toByteArray()
// (decimal.format=BASE64, its default); numeric without a typmod a VariableScaleDecimal
// {"scale","value"} of the value with its trailing zeros stripped (dvs: 10.1111 -> scale 4;
// nvs_int 22 -> scale 0). Was the text, "12.500".
TEST(DebeziumTypes, NumericAsDecimalAndVariableScaleDecimal) {
  EXPECT_EQ(Render(Col(1700, NumericTypmod(10, 3)), Literal("12.500")), R"("MNQ=")");  // 12500
  EXPECT_EQ(Render(Col(1700, NumericTypmod(3, 2)), Literal("-1.10")), R"("kg==")");    // -110
  EXPECT_EQ(Render(Col(1700, NumericTypmod(5, 2)), Literal("-1.28")), R"("gA==")");    // -128
  EXPECT_EQ(Render(Col(1700, NumericTypmod(5, 2)), Literal("1.28")), R"("AIA=")");     // 128
  EXPECT_EQ(Render(Col(1700, NumericTypmod(4, 0)), Literal("0")), R"("AA==")");
  EXPECT_EQ(Render(Col(1700), Literal("10.1111")), R"({"scale":4,"value":"AYr3"})");
  EXPECT_EQ(Render(Col(1700), Literal("22.2200")), R"({"scale":2,"value":"CK4="})");  // 2222
  EXPECT_EQ(Render(Col(1700), Literal("22")), R"({"scale":0,"value":"Fg=="})");
  EXPECT_EQ(Render(Col(1700), Literal("100")), R"({"scale":0,"value":"ZA=="})");  // not 1E+2
  EXPECT_EQ(Render(Col(1700), Literal("0.000")), R"({"scale":0,"value":"AA=="})");
  // NaN and the infinities: neither can be a Decimal; Debezium's conversion throws
  // (common/data/SpecialValueDecimal.java fromLogical) and event.converting.failure.handling.mode
  // =warn, its default, leaves the field null (common/relational/TableSchemaBuilder.java)
  EXPECT_EQ(Render(Col(1700), Literal("NaN")), "null");
  EXPECT_EQ(Render(Col(1700, NumericTypmod(10, 3)), Literal("Infinity")), "null");
  EXPECT_EQ(Render(Col(1700), Literal("-Infinity")), "null");
}

// money: a Decimal of scale money.fraction.digits (2) (PG/PostgresValueConverter.java
// moneySchema, convertMoney; PG/connection/PostgresMoney.java parse: '$1234.11' and
// '($1234.11)' of cash_table). Was the locale's text, "$1,234.11".
TEST(DebeziumTypes, MoneyAsDecimalOfScaleTwo) {
  EXPECT_EQ(Render(Col(790), Literal("$1,234.11")), R"("AeIT")");   // 123411
  EXPECT_EQ(Render(Col(790), Literal("-$1,234.11")), R"("/h3t")");  // -123411
  EXPECT_EQ(Render(Col(790), Literal("($1,234.11)")), R"("/h3t")");
  EXPECT_EQ(Render(Col(790), Literal("$0.00")), R"("AA==")");
}

// Arrays as JSON arrays of their elements' values (PG/AbstractRecordsProducerTest.java
// schemasAndValuesForArrayTypes: int_array [1,2,3], text_array, char_array with its padding,
// date_array in days, numeric_array numeric(10,2)[] as Decimals of scale 2, varnumeric_array as
// VariableScaleDecimals, uuid_array, json_array, oid_array; NULL elements null). Was the text
// "{1,2,3}".
TEST(DebeziumTypes, ArraysAsJsonArrays) {
  EXPECT_EQ(Render(Col(1007), Literal("{1,2,3}")), "[1,2,3]");
  EXPECT_EQ(Render(Col(1016), Literal("{1550166368505037572}")), "[1550166368505037572]");
  EXPECT_EQ(Render(Col(1028), Literal("{3,4000000000}")), "[3,4000000000]");
  EXPECT_EQ(Render(Col(1009), Literal(R"({one,"two words","q\"uote",NULL,"NULL"})")),
            R"(["one","two words","q\"uote",null,"NULL"])");
  EXPECT_EQ(Render(Col(1014, 14), Literal(R"({"cone      ","ctwo      "})")),
            R"(["cone      ","ctwo      "])");
  EXPECT_EQ(Render(Col(1182), Literal("{2016-11-04,2016-11-05}")), "[17109,17110]");
  EXPECT_EQ(Render(Col(1231, NumericTypmod(10, 2)), Literal("{1.20,3.40,5.60}")),
            R"(["eA==","AVQ=","AjA="])");
  EXPECT_EQ(Render(Col(1231), Literal("{1.1,2.22,3.333}")),
            R"([{"scale":1,"value":"Cw=="},{"scale":2,"value":"AN4="},{"scale":3,"value":"DQU="}])");
  EXPECT_EQ(Render(Col(2951), Literal("{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}")),
            R"(["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"])");
  EXPECT_EQ(Render(Col(199), Literal(R"({"{\"bar\": \"baz\"}"})")), R"(["{\"bar\": \"baz\"}"])");
  EXPECT_EQ(Render(Col(1000), Literal("{t,f}")), "[true,false]");
  EXPECT_EQ(Render(Col(1001), Literal(R"({"\\x0102"})")), R"(["AQI="])");
  EXPECT_EQ(Render(Col(1007), Literal("{}")), "[]");
  EXPECT_EQ(Render(Col(1007), Literal("{{1,2},{3,4}}")), "[[1,2],[3,4]]");
  EXPECT_EQ(Render(Col(1007), Literal("[0:1]={5,6}")), "[5,6]");
  EXPECT_EQ(Render(Col(1115, 3), Literal(R"({"2016-11-04 13:51:30.123"})")), "[1478267490123]");
  EXPECT_EQ(Render(Col(1185), Literal(R"({"2016-11-04 13:51:30.123456+02"})")),
            R"(["2016-11-04T11:51:30.123456Z"])");
  // interval[] is one of the arrays Debezium does not convert (PostgresValueConverter
  // .schemaBuilder returns null for it): the text stays
  EXPECT_EQ(Render(Col(1187), Literal(R"({"1 day"})")), R"("{\"1 day\"}")");
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

// ---- schemas.enable: Kafka Connect's JSON with schemas ----

// Runs tests/cpp/publish/<script> with python3 over a file of `lines` (and `flags`): its exit
// status and what it printed.
std::pair<int, std::string> RunCheck(const std::string& script, const std::string& lines,
                                     const std::string& flags = "") {
  const std::string path = ::testing::TempDir() + "/" + script + ".txt";
  std::ofstream(path) << lines;
  FILE* p = popen(("python3 " + std::string(DBLOG_SOURCE_DIR) + "/tests/cpp/publish/" + script +
                   " " + path + " " + flags + " 2>&1")
                      .c_str(),
                  "r");
  std::string out;
  char buf[512];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = p ? pclose(p) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// connect_json_check.py over the messages' keys and values.
std::pair<int, std::string> ConnectCheck(const std::vector<LogMessage>& messages) {
  std::string lines;
  for (const auto& m : messages) {
    if (!m.key.empty()) lines += "key " + m.key + "\n";
    lines += "value " + (m.payload.empty() ? std::string("null") : m.payload) + "\n";
  }
  return RunCheck("connect_json_check.py", lines);
}

// With schemas.enable=true every key and value is {"schema","payload"}: the value's schema is
// Debezium's envelope "<prefix>.<schema>.<table>.Envelope" (version 2), with "...Value" before
// and after, io.debezium.connector.postgresql.Source, each column's schema as the connector
// builds it (PG/PostgresValueConverter.java schemaBuilder: int16/int32/int64, Decimal with its
// scale, VariableScaleDecimal, io.debezium.time.*, Uuid, Json, arrays of their element); the
// key's "...Key". Every record of every op over the type matrix is what Kafka Connect's
// JsonConverter reads (connect_json_check.py, its rules), and tombstones stay null.
TEST(DebeziumSchemas, EveryRecordOfTheTypeMatrixIsWhatJsonConverterReads) {
  DebeziumOptions options;
  options.now_nanos = [] { return kNowNanos; };
  SetDebeziumOption(options, "schemas.enable", "true");
  Layout layout{"dblog.c1", Format::kDebeziumJson};
  layout.set_debezium_options(options);
  layout.Map(MatrixRelation());
  std::vector<LogMessage> all;
  std::uint32_t seq = 0;
  for (const auto& e : {MatrixChange(Change::INSERT, 7, ++seq), MatrixChange(Change::UPDATE, 7, ++seq),
                        MatrixChange(Change::UPDATE, 8, ++seq), MatrixChange(Change::DELETE, 8, ++seq),
                        MatrixChange(Change::READ, 9, ++seq)})
    for (auto& m : layout.Map(e)) all.push_back(std::move(m));
  ASSERT_EQ(all.size(), 8u);  // c, u, (d, tombstone, c), d, tombstone, r
  const auto [status, out] = ConnectCheck(all);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "16 records\n");  // 8 keys (tombstones too), 8 values
  const std::string& value = all[0].payload;
  for (const char* part :
       {R"({"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},)",
        R"({"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"},"optional":true,"field":"n"})",
        R"("name":"io.debezium.data.VariableScaleDecimal")",
        R"({"type":"int64","name":"io.debezium.time.Timestamp","version":1,"optional":true,"field":"ts3"})",
        R"({"type":"int64","name":"io.debezium.time.MicroTimestamp","version":1,"optional":true,"field":"ts"})",
        R"({"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"ai"})",
        R"("name":"dblog.c1.public.matrix.Value","field":"before"})",
        R"("name":"io.debezium.connector.postgresql.Source","version":1,"field":"source"})",
        R"("name":"dblog.c1.public.matrix.Envelope","version":2},"payload":{"before":null,"after":{"id":7,)"})
    EXPECT_NE(value.find(part), std::string::npos) << part << "\n" << value;
  EXPECT_EQ(all[0].key, R"({"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"dblog.c1.public.matrix.Key"},"payload":{"id":7}})");
  EXPECT_EQ(all[3].kind, EventKind::kTombstone);
  EXPECT_TRUE(all[3].payload.empty());
}

// The check can fail: a payload that does not fit its schema (a number for the int16 as text,
// a NOT NULL column null) is refused, so the test above proves something.
TEST(DebeziumSchemas, TheJsonConverterCheckRefusesAPayloadThatDoesNotFitItsSchema) {
  DebeziumOptions options;
  options.now_nanos = [] { return kNowNanos; };
  options.schemas_enable = true;
  Layout layout{"dblog.c1", Format::kDebeziumJson};
  layout.set_debezium_options(options);
  layout.Map(MatrixRelation());
  std::vector<LogMessage> m = layout.Map(MatrixChange(Change::INSERT, 7, 1));
  ASSERT_EQ(m.size(), 1u);
  std::vector<LogMessage> bad = m;
  const auto at = bad[0].payload.find(R"("i2":-32768)");
  ASSERT_NE(at, std::string::npos);
  bad[0].payload.replace(at, 11, R"("i2":"-32768")");
  auto [status, out] = ConnectCheck(bad);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("is not an integer (int16)"), std::string::npos) << out;
  bad = m;
  bad[0].payload.replace(bad[0].payload.find(R"("t":"naïve)"), 4, R"("t":null,"x":)");
  std::tie(status, out) = ConnectCheck(bad);
  EXPECT_EQ(status, 1) << out;
  EXPECT_THROW(SetDebeziumOption(options, "schemas.enable", "yes"), std::invalid_argument);
}

// ---- Flink's debezium-json format ----

// flink_json_check.py (Flink's rules for a Debezium JSON message) over the messages' values
// (an empty one is a tombstone).
std::pair<int, std::string> FlinkCheck(const std::vector<LogMessage>& messages,
                                       const std::string& flags = "") {
  std::string lines;
  for (const auto& m : messages) lines += (m.payload.empty() ? "null" : m.payload) + "\n";
  return RunCheck("flink_json_check.py", lines, flags);
}

// Every op over the type matrix, as Flink's debezium-json reads it (docs/publish.md's table of
// consumers): with the table under REPLICA IDENTITY FULL (the old row in each update and
// delete, as Flink requires of Debezium too), every message passes, schemaless and with
// schemas (schema-include), and Flink CDC's pipeline format finds the table's names once
// database.dbname is set; tombstones are skipped. Under the default replica identity Flink
// refuses the first update in its own words, as it refuses Debezium's.
TEST(DebeziumFlink, EveryOpOfTheTypeMatrixIsWhatFlinksDebeziumJsonReads) {
  const auto full = [](Change::Kind kind, std::int64_t id, std::uint32_t seq, std::int64_t old) {
    StreamEvent e = MatrixChange(kind, id, seq);
    Change* c = e.mutable_change();
    dblog::v1::Row row;
    for (const auto& col : TypeMatrix()) *row.add_values() = col.value;
    row.mutable_values(0)->set_int_value(old);
    if (kind != Change::INSERT) *c->mutable_old_row() = row;
    if (kind == Change::UPDATE) c->mutable_old_key()->add_values()->set_int_value(old);
    return e;
  };
  for (const bool schemas : {false, true}) {
    DebeziumOptions options;
    options.now_nanos = [] { return kNowNanos; };
    SetDebeziumOption(options, "schemas.enable", schemas ? "true" : "false");
    SetDebeziumOption(options, "database.dbname", "app");
    Layout layout{"dblog.c1", Format::kDebeziumJson};
    layout.set_debezium_options(options);
    layout.Map(MatrixRelation());
    std::vector<LogMessage> all;
    std::uint32_t seq = 0;
    for (const auto& e : {full(Change::INSERT, 7, ++seq, 7), full(Change::UPDATE, 7, ++seq, 7),
                          full(Change::UPDATE, 8, ++seq, 7), full(Change::DELETE, 8, ++seq, 8),
                          MatrixChange(Change::READ, 9, ++seq)})
      for (auto& m : layout.Map(e)) all.push_back(std::move(m));
    ASSERT_EQ(all.size(), 8u);  // c, u, (d, tombstone, c), d, tombstone, r
    auto [status, out] = FlinkCheck(all, schemas ? "--schema-include --flink-cdc" : "--flink-cdc");
    EXPECT_EQ(status, 0) << out;
    // 8 messages: c 1 row, u 2 (before and after), d 1, c 1, d 1, r 1; tombstones none
    EXPECT_EQ(out, "8 messages, 7 rows\n") << (schemas ? "with schemas" : "schemaless");
  }
  DebeziumOptions options;
  options.now_nanos = [] { return kNowNanos; };
  Layout layout{"dblog.c1", Format::kDebeziumJson};
  layout.set_debezium_options(options);
  layout.Map(MatrixRelation());
  std::vector<LogMessage> all = layout.Map(MatrixChange(Change::INSERT, 7, 1));
  for (auto& m : layout.Map(MatrixChange(Change::UPDATE, 7, 2))) all.push_back(std::move(m));
  const auto [status, out] = FlinkCheck(all);
  EXPECT_EQ(status, 1) << out;
  EXPECT_NE(out.find("message 2: The \"before\" field of UPDATE message is null"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace dblog::publish
