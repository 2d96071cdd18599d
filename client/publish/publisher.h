// client/publish/publisher.h: `dblog publish`'s one attempt: read where the log ends, connect
// to dblogd resuming after it, and write the stream into the log, acknowledging to dblogd only
// what the broker confirmed. Broker-independent (broker.h); the retry loop around it is
// client/cli/publish.cc.
//
// Exactly once, without a store of its own: the log itself says where to resume. Open() reads
// the last stored message that carries a position (and its Dblog-Part); the Hello asks for
// everything after it, and anything dblogd sends at or before it (the Begin of a transaction
// the resume point falls inside, the parts of a fanned-out event already stored) is dropped
// here. Every message is written at the next sequence of the log and the broker refuses it
// otherwise (broker.h), so a message lost in flight can never leave a gap behind a later one:
// after any failure the attempt ends and the next one reads the tail again.
// Owns: the order of writes, which positions are acknowledged, the Relation sequence per table.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "client/client.h"
#include "client/publish/avro.h"
#include "client/publish/batch.h"
#include "client/publish/broker.h"
#include "client/publish/layout.h"

namespace dblog::publish {

struct PublisherOptions {
  client::ConnectOptions connect;
  std::string prefix;  // subject prefix (Layout)
  Format format = Format::kDblog;
  DebeziumOptions debezium;  // Format::kDebeziumJson: the connector settings (debezium.h)
  // Format::kDebeziumAvro: the schema registry the Avro schemas are registered in (avro.h,
  // schema_registry.h); required with that format.
  std::shared_ptr<SchemaRegistry> registry;
  // Confirmations are awaited at each heartbeat, at the end, and whenever this many messages
  // are in flight.
  std::size_t max_in_flight = 2048;
  // and whenever this many payload bytes are in flight
  std::size_t max_in_flight_bytes = 32u << 20;
  // Several events per message (batch.h; NATS with Format::kDblog): every payload is then a
  // sequence of length-delimited events. nullopt: one message per part of an event, its
  // payload as Layout::Map made it.
  std::optional<BatchLimits> batch;
};

struct PublishStats {
  std::uint64_t messages = 0;  // written (and confirmed) by this attempt
  std::uint64_t events = 0;    // the parts of events in them
  std::uint64_t skipped = 0;   // events the log already held
  std::optional<dblog::v1::Position> acked;  // last acknowledged to dblogd
};

class Publisher {
 public:
  using Log = std::function<void(const std::string&)>;
  Publisher(PublisherOptions options, std::shared_ptr<client::Interrupter> interrupter, Log log);

  // One attempt. Returns when dblogd closed the stream (false) or on interruption (true, after
  // confirming and acknowledging what was written). Throws client::ClientError, BrokerError,
  // std::runtime_error (a stream the layout cannot map).
  bool Run(Broker& broker);
  // Whether the last attempt connected to dblogd and wrote something new.
  bool progressed() const { return progressed_; }
  const PublishStats& stats() const { return stats_; }

 private:
  class Attempt;
  PublisherOptions options_;
  std::shared_ptr<client::Interrupter> interrupter_;
  Log log_;
  PublishStats stats_;
  bool progressed_ = false;
  // Format::kDebeziumAvro: the encoder, its schema ids kept across attempts
  std::unique_ptr<ConfluentAvroEncoder> avro_;
};

}  // namespace dblog::publish
