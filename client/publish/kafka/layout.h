// client/publish/kafka/layout.h: where each message of the broker-neutral layout
// (publish/layout.h) goes in Kafka (docs/publish.md, "Kafka"), as pure logic: topic names, the
// partition of a key (Kafka's own default partitioner, murmur2), which messages are copied into
// every partition of their table's topic, and the text of the Kafka-only headers. No I/O, no
// librdkafka: kafka.h writes what KafkaLayout::Place returns.
// Owns: topic names, partition choice, fan-out. Does not decide what is published
// (publish/layout.h) nor what is dropped as already stored (kafka.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/publish/layout.h"

namespace dblog::publish {

// Kafka-only headers (beside layout.h's Dblog-Position, Dblog-Part, Dblog-Event, Dblog-Table).
// On table records: the offset, in the same partition, of the table's Relation in effect.
inline constexpr char kRelationOffsetHeader[] = "Dblog-Relation-Offset";
// On control records: "topic:partition:offset,...": for every partition written since the
// previous control record (every partition of the log, on the first record of a run of
// `dblog publish`), the offset just past the last record written there before this one.
inline constexpr char kEndsHeader[] = "Dblog-Ends";

// A schema or table name as one topic token: ASCII letters, digits and '_' stay, every other
// byte becomes -XX ('-' itself is -2D), so that names never break Kafka's topic grammar
// ([A-Za-z0-9._-]) nor the '.' between tokens. Injective.
std::string TopicToken(std::string_view name);

// Kafka's default partitioner for a keyed record (the Java client's and librdkafka's
// murmur2): (murmur2(key) & 0x7fffffff) % partitions.
std::uint32_t Murmur2(std::string_view key);
std::int32_t KeyPartition(std::string_view key, std::int32_t partitions);

// One Kafka record of a LogMessage.
struct KafkaRecord {
  std::string topic;
  std::int32_t partition = 0;
  std::optional<std::string> key;  // nullopt: a record without key
  bool tombstone = false;          // a null value (debezium-json's tombstone)
};

class KafkaLayout {
 public:
  // Topics: <prefix>.control and <prefix>.<schema token>.<table token>.
  explicit KafkaLayout(std::string prefix) : prefix_(std::move(prefix)) {}

  const std::string& prefix() const { return prefix_; }
  std::string ControlTopic() const { return prefix_ + ".control"; }
  std::string TableTopic(std::string_view schema, std::string_view name) const;
  // The topic of a message: the control topic or its table's.
  std::string TopicOf(const LogMessage& message) const;
  // Whether `topic` is one this layout writes (the control topic, or prefix + two tokens).
  bool Owns(std::string_view topic) const;

  // The records of `message`, whose topic has `partitions` partitions (the control topic: 1).
  // A Change (and a tombstone) is one record keyed by its row's key (LogMessage::row_key, or
  // the debezium-json key), in that key's partition; every other table message (Relation,
  // ChunkBegin, ChunkEnd, a table's part of Truncate, BootstrapBegin, BootstrapEnd) is one
  // record without key in every partition, so that a reader of one partition has the table's
  // definition, its repair chunks' bounds, its truncates and its bootstrap.
  std::vector<KafkaRecord> Place(const LogMessage& message, std::int32_t partitions) const;

 private:
  std::string prefix_;
};

}  // namespace dblog::publish
