// client/publish/kafka/kafka.h: Apache Kafka as a Broker (librdkafka's C API, `#include
// <librdkafka/rdkafka.h>`). Topics and partitions as layout.h (KafkaLayout) places them; the
// producer runs with acks=all, enable.idempotence=true, enable.gapless.guarantee=true and no
// message timeout, so that what a partition holds is always a prefix, in order, of what was sent to
// it. Flush waits for every delivery report.
//
// Kafka has no deduplication id and no expected-offset check, so this broker keeps exactly once
// itself: Open reads the last record that carries a position in every partition of the log's
// topics, leaves StoredTail::position empty (dblogd then resends from the consumer's
// acknowledged position, which is never past what every partition holds), and Publish drops
// each record whose (Dblog-Position, Dblog-Part) its partition already holds. Offsets are
// predicted (the high watermark at Open plus what was sent since) and checked against every
// delivery report: a record stored anywhere else (another writer, a gap) fails the attempt.
// Owns: the producer, the reader of the tails, topic creation. Does not decide what is
// published or acknowledged (publisher.h).
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client/publish/broker.h"
#include "client/publish/kafka/layout.h"

struct rd_kafka_s;
struct rd_kafka_conf_s;
struct rd_kafka_headers_s;
struct rd_kafka_message_s;
struct rd_kafka_topic_s;

namespace dblog::publish {

struct KafkaOptions {
  std::string bootstrap_servers;  // host:port[,host:port...]
  std::string prefix;             // topic prefix (KafkaLayout)
  int partitions = 1;             // of a table topic this creates
  int replication_factor = -1;    // of a topic this creates; -1: the broker's default
  std::chrono::milliseconds ack_timeout{10000};  // Flush, metadata, reading the tails
  // Further librdkafka settings (security.protocol, sasl.*, ...), in order.
  std::vector<std::pair<std::string, std::string>> config;
};

// "kafka://h1:9092,h2:9092" or "kafka://h1:9092,kafka://h2:9092" -> "h1:9092,h2:9092"; throws
// std::invalid_argument for anything else.
std::string ParseKafkaUrl(const std::string& url);

class Kafka : public Broker {
 public:
  explicit Kafka(KafkaOptions options);
  ~Kafka() override;
  Kafka(const Kafka&) = delete;
  Kafka& operator=(const Kafka&) = delete;

  StoredTail Open() override;
  void Publish(const LogMessage& message, std::uint64_t seq, std::uint64_t relation_seq) override;
  void Flush() override;
  // Records not confirmed yet; a failed delivery counts as one until Flush reports it, so that
  // the Publisher never acknowledges past it.
  std::size_t pending() const override { return pending_ + (first_error_.empty() ? 0 : 1); }
  bool keyed() const override { return true; }
  std::string TopicOf(const LogMessage& message) const override { return layout_.TopicOf(message); }

  // Records dropped because their partition already held them (this attempt).
  std::uint64_t dropped() const { return dropped_; }

  // The delivery report callback (librdkafka calls it from rd_kafka_poll/flush, this thread).
  void OnDelivery(const rd_kafka_message_s* message);

 private:
  using Partition = std::pair<std::string, std::int32_t>;  // topic, partition
  struct Tail {
    std::optional<dblog::v1::Position> position;  // the last stored record with a position
    std::uint32_t part = 1;
    std::int64_t next_offset = 0;       // predicted offset of the next record written here
    std::int64_t relation_offset = -1;  // the table's Relation written here by this attempt
  };

  void Close();
  void Fail(const std::string& error, bool retryable = true);
  void ThrowIfFailed();

  // Open's steps: the two librdkafka handles (the settings of both, then each one's own), and
  // the line saying what the log holds.
  void ConfigureConnection(rd_kafka_conf_s* conf) const;
  void CreateProducer();
  void CreateReader();
  std::string ResumeNote() const;

  // The topic's partition count, creating it (and reading its tails) on first use.
  std::int32_t EnsureTopic(const std::string& topic);
  // An existing topic taken into use: its tails read, its partition count kept.
  std::int32_t AdoptTopic(const std::string& topic, std::int32_t partitions, bool control);
  void CreateTopic(const std::string& topic, int partitions);
  // The partition count of a topic just created, once the cluster's metadata shows it.
  std::int32_t AwaitTopic(const std::string& topic);
  // Partition counts of existing topics (those of this layout; only `topic` when given).
  std::map<std::string, std::int32_t> Topics(const std::string& topic);
  void ReadTails(const std::string& topic, std::int32_t partitions);
  // The last record with a position among offsets [start, high) of partition p into `tail`;
  // false when none there carries one.
  bool ReadLastPosition(rd_kafka_topic_s* rkt, const std::string& topic, std::int32_t p,
                        std::int64_t start, std::int64_t high, Tail& tail);

  // Publish's steps for one record: whether it is not to be written (its partition holds it
  // already, or the UPDATE before it, a key change's, covers it; notes the last change written
  // and counts what is dropped), its headers, and producing it at `offset`.
  bool Held(const LogMessage& message, const Partition& where, const Tail& tail);
  rd_kafka_headers_s* Headers(const LogMessage& message, const Partition& where, Tail& tail,
                              bool control);
  // A control record's Dblog-Ends: where each table partition written since the last control
  // record (for the first: every partition) ends.
  std::string ControlEnds(const Partition& where);
  void Produce(const KafkaRecord& record, const LogMessage& message, rd_kafka_headers_s* headers,
               std::int64_t offset);

  KafkaOptions options_;
  KafkaLayout layout_;
  rd_kafka_s* producer_ = nullptr;
  rd_kafka_s* reader_ = nullptr;  // a consumer handle, for the tails
  std::map<std::string, std::int32_t> topics_;
  std::map<Partition, Tail> tails_;
  std::set<Partition> written_since_control_;
  std::optional<std::pair<dblog::v1::Position, Partition>> last_change_;
  bool first_control_ = true;
  std::size_t pending_ = 0;
  std::uint64_t dropped_ = 0;
  std::string first_error_;
  bool error_retryable_ = true;
};

}  // namespace dblog::publish
