// client/cli/publish.h: `dblog publish`: follow a consumer's stream and write it into a
// distributed log (NATS JetStream or Kafka; client/publish/), acknowledging to dblogd only what the
// broker confirmed as stored.
// Owns: the publish command's flags (parsed apart from running, so they can be tested) and its
// retry loop. Signal handling lives in main.cc.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "client/cli/tail.h"
#include "client/client.h"
#include "client/publish/kafka/kafka.h"
#include "client/publish/nats/jetstream.h"
#include "client/publish/publisher.h"

namespace dblog::cli {

struct PublishCommandOptions {
  client::ConnectOptions connect;
  bool kafka = false;                // --to kafka://...: `kafka_options`, else `jetstream`
  publish::JetStreamOptions jetstream;
  publish::KafkaOptions kafka_options;
  std::string prefix;
  publish::Format format = publish::Format::kDblog;
  publish::DebeziumOptions debezium;  // --debezium-option
  std::string schema_registry;        // --schema-registry (--format debezium-avro)
  std::size_t max_in_flight = 2048;
  // --batch-events: events per message with --format dblog (1: still framed, one per message)
  std::size_t batch_events = 1024;
  RetryOptions retry;
};

std::string PublishHelp();

// Parses the arguments after "publish". nullopt: --help was asked for (written to help_out).
// Throws UsageError for anything wrong.
std::optional<PublishCommandOptions> ParsePublishArgs(const std::vector<std::string>& args,
                                                      const Environment& env,
                                                      std::ostream& help_out);

// Runs until `interrupter` fires (0, after the broker confirmed what was sent and that was
// acknowledged) or an error retrying cannot fix (1, one line on `err`). A lost connection to
// dblogd or to the broker is retried: each attempt reads where the log ends and resumes after it.
int RunPublish(const PublishCommandOptions& options,
               std::shared_ptr<client::Interrupter> interrupter, std::FILE* err);

}  // namespace dblog::cli
