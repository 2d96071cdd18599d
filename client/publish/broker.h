// client/publish/broker.h: what `dblog publish` needs from a distributed log, so that the
// ordering, acknowledgement and resume logic (publisher.h) is written once for every broker.
// Owns: the interface and its error type. Implementations, one folder each: nats/jetstream.h
// (NATS JetStream), kafka/kafka.h (Apache Kafka); each names the layout's destinations its own
// way (subjects, topics).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "client/publish/layout.h"
#include "dblog/v1/consumer.pb.h"

namespace dblog::publish {

// A broker failed. retryable: another attempt (a new connection, the tail read again) can get
// past it (the broker down, a node lost, a publish not confirmed in time); not: the broker
// refused the configuration (a stream that exists with other subjects, bad credentials).
class BrokerError : public std::runtime_error {
 public:
  BrokerError(const std::string& message, bool retryable)
      : std::runtime_error(message), retryable_(retryable) {}
  bool retryable() const { return retryable_; }

 private:
  bool retryable_;
};

// The end of what the log durably holds: where the next publish continues.
struct StoredTail {
  std::uint64_t last_seq = 0;  // the log's last sequence number (0: empty)
  // The last stored message that carries a position, with its part (Dblog-Part); nullopt when
  // there is none.
  std::optional<dblog::v1::Position> position;
  std::uint32_t part = 1;
  std::uint32_t parts = 1;
  // A broker that drops what its log holds itself (keyed(): Kafka, per partition) leaves
  // `position` empty, so dblogd resends from the consumer's acknowledged position, and says so
  // here for the log line.
  std::string resume_note;
};

class Broker {
 public:
  virtual ~Broker() = default;
  // Connects (creating the stream when it does not exist) and reads the log's tail.
  virtual StoredTail Open() = 0;
  // Queues `message` to be stored at sequence `seq` (the previous one's + 1): the broker must
  // refuse it unless the log's last sequence is seq - 1, so that nothing is ever stored after a
  // gap. `relation_seq`: the sequence of the table's Relation (0 for control messages).
  // Returns without waiting for the broker; throws BrokerError.
  virtual void Publish(const LogMessage& message, std::uint64_t seq,
                       std::uint64_t relation_seq) = 0;
  // Waits until the broker confirmed every message queued so far as durably stored; throws
  // BrokerError when any was refused or not confirmed in time (then the log holds a prefix of
  // them: Open again to learn which).
  virtual void Flush() = 0;
  // Messages queued and not confirmed yet.
  virtual std::size_t pending() const = 0;
  // Whether messages are placed by the row's key (Layout::set_row_keys).
  virtual bool keyed() const { return false; }
  // The topic `message` goes to, as a schema registry's TopicNameStrategy names subjects after
  // it ("<topic>-key", "<topic>-value"): Kafka's topic; on NATS the message's subject.
  virtual std::string TopicOf(const LogMessage& message) const = 0;
};

}  // namespace dblog::publish
