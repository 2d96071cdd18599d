// tests/cpp/publish/kafka_layout_test.cc: where `dblog publish --to kafka://` puts each message
// (client/publish/kafka/layout.h), without a broker: topic names and their escaping, the
// partition of a key (the same as librdkafka's murmur2 partitioner, which is the Java client's
// default), one record per partition for what is not a row, and the key change split of the
// layout (layout.h, set_row_keys); the flags of `dblog publish` (Kafka's, and NATS's beside them).
#include "client/publish/kafka/layout.h"

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <random>
#include <sstream>

#include "client/cli/publish.h"
#include "client/publish/layout.h"
#include "layout_events.h"

namespace dblog::publish {
namespace {

using dblog::v1::StreamEvent;

// public.items (id, v), keyed by id.
StreamEvent Items() { return RelationEvent(42, "public", "items", {"id", "v"}); }

StreamEvent Update(std::int64_t old_id, std::int64_t new_id) {
  StreamEvent e;
  auto* c = e.mutable_change();
  c->set_kind(dblog::v1::Change::UPDATE);
  c->set_relation_oid(42);
  c->set_commit_lsn(0x200);
  c->set_seq(3);
  c->mutable_new_row()->add_values()->set_int_value(new_id);
  c->mutable_new_row()->add_values()->set_text_value("x");
  c->mutable_old_key()->add_values()->set_int_value(old_id);
  return e;
}

TEST(PublishKafkaLayout, TopicTokensKeepKafkaGrammarAndAreInjective) {
  EXPECT_EQ(TopicToken("t_int"), "t_int");
  EXPECT_EQ(TopicToken("Items2"), "Items2");
  EXPECT_EQ(TopicToken("my.table"), "my-2Etable");
  EXPECT_EQ(TopicToken("a-b"), "a-2Db");
  EXPECT_EQ(TopicToken("a b%"), "a-20b-25");
  EXPECT_EQ(TopicToken("é"), "-C3-A9");
  EXPECT_NE(TopicToken("a.b"), TopicToken("a-2Eb"));
  KafkaLayout layout("dblog.c1");
  EXPECT_EQ(layout.ControlTopic(), "dblog.c1.control");
  EXPECT_EQ(layout.TableTopic("public", "my.table"), "dblog.c1.public.my-2Etable");
  EXPECT_TRUE(layout.Owns("dblog.c1.control"));
  EXPECT_TRUE(layout.Owns("dblog.c1.public.items"));
  EXPECT_FALSE(layout.Owns("dblog.c1.public"));
  EXPECT_FALSE(layout.Owns("dblog.c1.a.b.c"));
  EXPECT_FALSE(layout.Owns("dblog.c10.public.items"));
  EXPECT_FALSE(layout.Owns("other.public.items"));
}

// The partition of a key is Kafka's default one: the same as librdkafka's murmur2 partitioner
// (itself the Java client's), so other producers and Kafka Streams agree on it.
TEST(PublishKafkaLayout, KeyPartitionIsKafkasMurmur2) {
  char errstr[256];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), errstr, sizeof errstr);
  ASSERT_TRUE(rk) << errstr;
  rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, "t", nullptr);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 2000; ++i) {
    std::string key(rng() % 40, '\0');
    for (char& c : key) c = static_cast<char>(rng());
    for (const std::int32_t n : {1, 2, 3, 7, 64}) {
      EXPECT_EQ(KeyPartition(key, n),
                rd_kafka_msg_partitioner_murmur2(rkt, key.data(), key.size(), n, nullptr, nullptr))
          << i << " " << n;
    }
  }
  rd_kafka_topic_destroy(rkt);
  rd_kafka_destroy(rk);
}

TEST(PublishKafkaLayout, RowsByKeyEverythingElseInEveryPartition) {
  Layout layout("p");
  layout.set_row_keys(true);
  KafkaLayout kafka("p");
  const auto rel = layout.Map(Items());
  ASSERT_EQ(rel.size(), 1u);
  auto records = kafka.Place(rel[0], 3);
  ASSERT_EQ(records.size(), 3u);  // the Relation in every partition
  for (std::int32_t p = 0; p < 3; ++p) {
    EXPECT_EQ(records[static_cast<std::size_t>(p)].topic, "p.public.items");
    EXPECT_EQ(records[static_cast<std::size_t>(p)].partition, p);
    EXPECT_FALSE(records[static_cast<std::size_t>(p)].key);
  }

  StreamEvent insert;
  auto* c = insert.mutable_change();
  c->set_kind(dblog::v1::Change::INSERT);
  c->set_relation_oid(42);
  c->set_commit_lsn(0x100);
  c->set_seq(1);
  c->mutable_new_row()->add_values()->set_int_value(7);
  c->mutable_new_row()->add_values()->set_text_value("x");
  const auto ins = layout.Map(insert);
  ASSERT_EQ(ins.size(), 1u);
  dblog::v1::Row key;
  key.add_values()->set_int_value(7);
  EXPECT_EQ(ins[0].row_key, key.SerializeAsString());
  records = kafka.Place(ins[0], 3);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].key, key.SerializeAsString());
  EXPECT_EQ(records[0].partition, KeyPartition(key.SerializeAsString(), 3));

  StreamEvent chunk;
  chunk.mutable_chunk_begin()->set_relation_oid(42);
  chunk.mutable_chunk_begin()->set_commit_lsn(0x300);
  chunk.mutable_chunk_begin()->set_seq(1);
  EXPECT_EQ(kafka.Place(layout.Map(chunk)[0], 3).size(), 3u);  // chunk bounds: every partition

  StreamEvent begin;
  begin.mutable_begin()->set_commit_lsn(0x100);
  const auto b = kafka.Place(layout.Map(begin)[0], 1);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].topic, "p.control");
}

// An UPDATE that changes the key: the UPDATE keyed by the new key, then the old key's DELETE
// keyed by the old key, at the same position (parts 1 and 2).
TEST(PublishKafkaLayout, KeyChangeIsTheUpdateAndTheOldKeysDelete) {
  Layout layout("p");
  layout.set_row_keys(true);
  layout.Map(Items());
  const auto same = layout.Map(Update(5, 5));
  EXPECT_EQ(same.size(), 1u);
  const auto moved = layout.Map(Update(5, 6));
  ASSERT_EQ(moved.size(), 2u);
  dblog::v1::Row k5, k6;
  k5.add_values()->set_int_value(5);
  k6.add_values()->set_int_value(6);
  EXPECT_EQ(moved[0].row_key, k6.SerializeAsString());
  EXPECT_EQ(moved[1].row_key, k5.SerializeAsString());
  EXPECT_EQ(moved[1].part, 2u);
  StreamEvent second;
  ASSERT_TRUE(second.ParseFromString(moved[1].payload));
  EXPECT_EQ(second.change().kind(), dblog::v1::Change::DELETE);
  EXPECT_EQ(second.change().seq(), 3u);
  EXPECT_EQ(second.change().old_key().SerializeAsString(), k5.SerializeAsString());
  // without set_row_keys (NATS) the layout is unchanged: one message, no row key
  Layout plain("p");
  plain.Map(Items());
  const auto one = plain.Map(Update(5, 6));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0].row_key.empty());
}

// debezium-json: a key change as Debezium writes it (delete and tombstone of the old key,
// create of the new one).
TEST(PublishKafkaLayout, DebeziumKeyChangeIsDeleteTombstoneCreate) {
  Layout layout("p", Format::kDebeziumJson);
  layout.Map(Items());
  const auto m = layout.Map(Update(5, 6));
  ASSERT_EQ(m.size(), 3u);
  EXPECT_NE(m[0].payload.find(R"("op":"d")"), std::string::npos) << m[0].payload;
  EXPECT_EQ(m[0].key, R"({"id":5})");
  EXPECT_EQ(m[1].payload, "");
  EXPECT_EQ(m[1].kind, EventKind::kTombstone);
  EXPECT_EQ(m[1].key, R"({"id":5})");
  EXPECT_NE(m[2].payload.find(R"("op":"c")"), std::string::npos) << m[2].payload;
  EXPECT_NE(m[2].payload.find(R"("before":null)"), std::string::npos) << m[2].payload;
  EXPECT_EQ(m[2].key, R"({"id":6})");
  KafkaLayout kafka("p");
  EXPECT_EQ(kafka.Place(m[1], 4)[0].tombstone, true);
  EXPECT_EQ(kafka.Place(m[0], 4)[0].partition, kafka.Place(m[1], 4)[0].partition);
}

}  // namespace
}  // namespace dblog::publish

namespace dblog::cli {
namespace {

std::optional<std::string> NoEnv(const std::string&) { return std::nullopt; }

PublishCommandOptions Parse(std::vector<std::string> args) {
  std::ostringstream help;
  auto o = ParsePublishArgs(args, NoEnv, help);
  if (!o) throw std::runtime_error("help");
  return *o;
}

// Each command line is refused with a UsageError.
void ExpectRefused(const std::vector<std::vector<std::string>>& command_lines) {
  for (const std::vector<std::string>& bad : command_lines)
    EXPECT_THROW(Parse(bad), UsageError) << bad.back();
}

TEST(PublishKafkaFlags, KafkaUrlAndItsOwnFlags) {
  EXPECT_EQ(publish::ParseKafkaUrl("kafka://h1:9092"), "h1:9092");
  EXPECT_EQ(publish::ParseKafkaUrl("kafka://h1:9092,h2:9093"), "h1:9092,h2:9093");
  EXPECT_EQ(publish::ParseKafkaUrl("kafka://h1:9092,kafka://h2:9093"), "h1:9092,h2:9093");
  for (const char* bad : {"kafka://", "kafka://h1", "kafka://h1:", "kafka://h1:x", "nats://h:1",
                          "kafka://h1:1,nats://h2:2", "kafka://u@h1:1", "kafka://h1:1/x"})
    EXPECT_THROW(publish::ParseKafkaUrl(bad), std::invalid_argument) << bad;

  const auto o = Parse({"--consumer=c1", "--to=kafka://h1:9092", "--partitions=6",
                        "--replication-factor=3", "--kafka-option=security.protocol=SSL"});
  EXPECT_TRUE(o.kafka);
  EXPECT_EQ(o.kafka_options.bootstrap_servers, "h1:9092");
  EXPECT_EQ(o.kafka_options.prefix, "dblog.c1");
  EXPECT_EQ(o.prefix, "dblog.c1");
  EXPECT_EQ(o.kafka_options.partitions, 6);
  EXPECT_EQ(o.kafka_options.replication_factor, 3);
  ASSERT_EQ(o.kafka_options.config.size(), 1u);
  EXPECT_EQ(o.kafka_options.config[0],
            std::make_pair(std::string("security.protocol"), std::string("SSL")));
  EXPECT_EQ(Parse({"--consumer=c1", "--to=kafka://h:1", "--topic-prefix=cdc.app"}).prefix,
            "cdc.app");
  EXPECT_FALSE(Parse({"--consumer=c1", "--to=nats://h:1"}).kafka);

  ExpectRefused({{"--consumer=c1", "--to=kafka://h:1", "--stream=S"},  // NATS only
                 {"--consumer=c1", "--to=kafka://h:1", "--replicas=3"},
                 {"--consumer=c1", "--to=nats://h:1", "--partitions=3"},          // Kafka only
                 {"--consumer=c1", "--to=kafka://h:1", "--kafka-option=acks=1"},  // dblog's own
                 {"--consumer=c1", "--to=kafka://h:1", "--kafka-option=enable.idempotence=false"},
                 {"--consumer=c1", "--to=kafka://h:1", "--kafka-option=noequals"},
                 {"--consumer=c1", "--to=kafka://h:1", "--topic-prefix=a/b"},
                 {"--consumer=c1", "--to=kafka://h:1", "--partitions=0"}});
}

TEST(PublishNatsFlags, StreamSubjectsAndBatchesWithTheirDefaults) {
  const auto o = Parse({"--consumer=c1", "--to=nats://h1:4222,h2:4223"});
  EXPECT_FALSE(o.kafka);
  EXPECT_EQ(o.jetstream.servers, (std::vector<std::string>{"nats://h1:4222", "nats://h2:4223"}));
  EXPECT_EQ(o.jetstream.stream, "DBLOG_C1");
  EXPECT_EQ(o.prefix, "dblog.c1");
  EXPECT_EQ(o.jetstream.prefix, "dblog.c1");
  EXPECT_EQ(o.jetstream.replicas, 1);
  EXPECT_EQ(o.batch_events, 1024u);
  EXPECT_EQ(o.jetstream.max_pending, o.max_in_flight * 2);
  EXPECT_EQ(o.format, publish::Format::kDblog);

  const auto set =
      Parse({"--consumer=c1", "--to=nats://h:1", "--stream=S1", "--subject-prefix=cdc.app-1",
             "--replicas=3", "--batch-events=50", "--ack-timeout=2.5"});
  EXPECT_EQ(set.jetstream.stream, "S1");
  EXPECT_EQ(set.prefix, "cdc.app-1");
  EXPECT_EQ(set.jetstream.prefix, "cdc.app-1");
  EXPECT_EQ(set.jetstream.replicas, 3);
  EXPECT_EQ(set.batch_events, 50u);
  EXPECT_EQ(set.jetstream.ack_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(Parse({"--consumer=c1", "--to=nats://h:1", "--format=debezium-json"}).format,
            publish::Format::kDebeziumJson);

  ExpectRefused(
      {{"--consumer=c1"},  // no --to, no $DBLOG_PUBLISH_TO
       {"--consumer=c1", "--to=http://h:1"},
       {"--consumer=c1", "--to=nats://h:1", "--stream=a.b"},
       {"--consumer=c1", "--to=nats://h:1", "--stream="},
       {"--consumer=c1", "--to=nats://h:1", "--subject-prefix=a..b"},
       {"--consumer=c1", "--to=nats://h:1", "--subject-prefix=.a"},
       {"--consumer=c1", "--to=nats://h:1", "--subject-prefix=a.*"},
       {"--consumer=c1", "--to=nats://h:1", "--replicas=6"},
       {"--consumer=c1", "--to=nats://h:1", "--format=avro"},
       {"--consumer=c1", "--to=nats://h:1", "--format=debezium-json", "--batch-events=10"},
       {"--consumer=c1", "--to=nats://h:1", "--batch-events=0"}});
}

// --debezium-option KEY=VALUE under Debezium's names (debezium.h, DebeziumOptions), with
// Debezium's defaults when absent; refused without --format debezium-json, for an unknown key
// or a bad value.
TEST(PublishDebeziumFlags, DebeziumOptionsWithDebeziumsDefaults) {
  const auto d = Parse({"--consumer=c1", "--to=nats://h:1", "--format=debezium-json"});
  EXPECT_TRUE(d.debezium.skip_truncate);
  EXPECT_FALSE(d.debezium.skip_create || d.debezium.skip_update || d.debezium.skip_delete);
  EXPECT_TRUE(d.debezium.tombstones_on_delete);
  EXPECT_EQ(d.debezium.database, "");
  const auto o = Parse({"--consumer=c1", "--to=kafka://h:1", "--format=debezium-json",
                        "--debezium-option=skipped.operations=none",
                        "--debezium-option=tombstones.on.delete=false",
                        "--debezium-option=database.dbname=inventory"});
  EXPECT_FALSE(o.debezium.skip_truncate);
  EXPECT_FALSE(o.debezium.tombstones_on_delete);
  EXPECT_EQ(o.debezium.database, "inventory");
  ExpectRefused({{"--consumer=c1", "--to=nats://h:1", "--debezium-option=skipped.operations=none"},
                 {"--consumer=c1", "--to=nats://h:1", "--format=debezium-json",
                  "--debezium-option=skipped.operations=x"},
                 {"--consumer=c1", "--to=nats://h:1", "--format=debezium-json",
                  "--debezium-option=snapshot.mode=never"},
                 {"--consumer=c1", "--to=nats://h:1", "--format=debezium-json",
                  "--debezium-option=noequals"}});
}

// --format debezium-avro takes the Debezium options too and needs --schema-registry
// http://HOST:PORT[/PATH], which no other format takes.
TEST(PublishDebeziumFlags, AvroNeedsASchemaRegistry) {
  const auto o = Parse({"--consumer=c1", "--to=kafka://h:1", "--format=debezium-avro",
                        "--schema-registry=http://registry:8081",
                        "--debezium-option=skipped.operations=none"});
  EXPECT_EQ(o.format, publish::Format::kDebeziumAvro);
  EXPECT_EQ(o.schema_registry, "http://registry:8081");
  EXPECT_FALSE(o.debezium.skip_truncate);
  EXPECT_EQ(Parse({"--consumer=c1", "--to=nats://h:1", "--format=debezium-avro",
                   "--schema-registry=http://r:8081/prefix"}).schema_registry,
            "http://r:8081/prefix");
  ExpectRefused({{"--consumer=c1", "--to=kafka://h:1", "--format=debezium-avro"},
                 {"--consumer=c1", "--to=kafka://h:1", "--format=debezium-json",
                  "--schema-registry=http://r:8081"},
                 {"--consumer=c1", "--to=kafka://h:1", "--schema-registry=http://r:8081"},
                 {"--consumer=c1", "--to=kafka://h:1", "--format=debezium-avro",
                  "--schema-registry=https://r:8081"},
                 {"--consumer=c1", "--to=kafka://h:1", "--format=debezium-avro",
                  "--schema-registry=http://r:port"},
                 {"--consumer=c1", "--to=nats://h:1", "--format=debezium-avro",
                  "--schema-registry=http://r:8081", "--batch-events=10"}});
}

}  // namespace
}  // namespace dblog::cli
