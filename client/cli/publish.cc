// client/cli/publish.cc: `dblog publish` (see publish.h).
#include "client/cli/publish.h"

#include <boost/program_options.hpp>
#include <cctype>
#include <sstream>

#include "client/position.h"
#include "client/publish/schema_registry.h"
#include "client/retry.h"
#include "common/logfmt.h"

namespace dblog::cli {

namespace po = boost::program_options;

namespace {

po::options_description PublishFlags() {
  po::options_description flags("Options");
  // clang-format off
  flags.add_options()
      ("consumer", po::value<std::string>()->value_name("NAME"),
       "consumer name, [a-z][a-z0-9_]{0,47} (required)")
      ("to", po::value<std::string>()->value_name("URL"),
       "the broker: nats://HOST:PORT[,nats://HOST:PORT...] (nodes of one NATS cluster) or "
       "kafka://HOST:PORT[,HOST:PORT...] (bootstrap servers of one Kafka cluster) "
       "(required; default $DBLOG_PUBLISH_TO)")
      ("stream", po::value<std::string>()->value_name("NAME"),
       "NATS: the JetStream stream (default DBLOG_<CONSUMER>, upper case); created when missing")
      ("subject-prefix", po::value<std::string>()->value_name("PREFIX"),
       "NATS: subjects are PREFIX.control and PREFIX.table.<schema>.<table> "
       "(default dblog.<consumer>)")
      ("replicas", po::value<std::string>()->value_name("N"),
       "NATS: replicas of a stream this creates, 1 to 5 (default 1)")
      ("topic-prefix", po::value<std::string>()->value_name("PREFIX"),
       "Kafka: topics are PREFIX.control and PREFIX.<schema>.<table> (default dblog.<consumer>)")
      ("partitions", po::value<std::string>()->value_name("N"),
       "Kafka: partitions of a table topic this creates, 1 to 10000 (default 1); records of a "
       "row go to its key's partition")
      ("replication-factor", po::value<std::string>()->value_name("N"),
       "Kafka: replication factor of a topic this creates (default: the broker's "
       "default.replication.factor)")
      ("kafka-option", po::value<std::vector<std::string>>()->value_name("KEY=VALUE"),
       "Kafka: a librdkafka setting for the connection (security.protocol, sasl.*, ssl.*, "
       "client.id, ...); repeatable. The producer's delivery settings are dblog's own")
      ("format", po::value<std::string>()->value_name("FORMAT"),
       "dblog (default): each message one dblog.v1.StreamEvent; debezium-json: changes and "
       "truncates only, as Debezium's PostgreSQL change events (schemaless JSON, the key as "
       "the Kafka record's key or in NATS header Dblog-Key, a delete followed by a tombstone); "
       "debezium-avro: the same events with their schemas as Confluent's AvroConverter writes "
       "them (Avro in the Confluent wire format; needs --schema-registry)")
      ("schema-registry", po::value<std::string>()->value_name("URL"),
       "--format debezium-avro: the Confluent Schema Registry, http://HOST:PORT[/PATH]; schemas "
       "are registered under <topic>-key and <topic>-value (NATS: the subject for the topic)")
      ("debezium-option", po::value<std::vector<std::string>>()->value_name("KEY=VALUE"),
       "--format debezium-json or debezium-avro: a Debezium connector setting, under Debezium's name: "
       "skipped.operations (c, u, d, t or none; default t: truncates are not written), "
       "tombstones.on.delete (default true), database.dbname (source.db; default empty); "
       "repeatable")
      ("batch-events", po::value<std::string>()->value_name("N"),
       "--format dblog into NATS: up to N consecutive events of one subject in one message "
       "(default 1024; 1 to 65536; Kafka records are one event each)")
      ("ack-timeout", po::value<std::string>()->value_name("SECONDS"),
       "how long to wait for the broker's confirmations before starting over (default 10)")
      ("host", po::value<std::string>()->value_name("HOST"),
       "dblogd host (default: $DBLOG_HOST, else 127.0.0.1)")
      ("port", po::value<std::string>()->value_name("PORT"),
       "dblogd port (default: $DBLOG_PORT, else 7654)")
      ("token", po::value<std::string>()->value_name("TOKEN"),
       "the consumer's token, when dblogd requires one (default: $DBLOG_TOKEN)")
      ("token-file", po::value<std::string>()->value_name("FILE"),
       "read the token from FILE (default: $DBLOG_TOKEN_FILE)");
  AddTlsFlags(flags);
  AddRetryFlags(flags);
  flags.add_options()
      ("help,h", "show this help and exit");
  // clang-format on
  return flags;
}

void KafkaFlags(const po::variables_map& vm, const std::string& consumer,
                PublishCommandOptions& options) {
  publish::KafkaOptions& k = options.kafka_options;
  k.prefix = "dblog." + consumer;
  if (vm.count("topic-prefix")) k.prefix = vm["topic-prefix"].as<std::string>();
  // the topics are PREFIX.control and PREFIX.<token>.<token>: at most 249 bytes of
  // [A-Za-z0-9._-] each
  bool ok = !k.prefix.empty() && k.prefix.size() <= 200 && k.prefix.front() != '.' &&
            k.prefix.back() != '.';
  for (const char c : k.prefix)
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
  if (!ok)
    throw UsageError("invalid --topic-prefix '" + k.prefix +
                     "': up to 200 letters, digits, '.', '_' and '-', not starting or ending "
                     "with '.'");
  if (vm.count("partitions"))
    k.partitions =
        static_cast<int>(ParseNumber(vm["partitions"].as<std::string>(), 1, 10000, "--partitions"));
  if (vm.count("replication-factor"))
    k.replication_factor = static_cast<int>(
        ParseNumber(vm["replication-factor"].as<std::string>(), 1, 32, "--replication-factor"));
  if (vm.count("ack-timeout"))
    k.ack_timeout = ParseSeconds(vm["ack-timeout"].as<std::string>(), 0.1, 3600, "--ack-timeout");
  if (vm.count("kafka-option")) {
    for (const std::string& kv : vm["kafka-option"].as<std::vector<std::string>>()) {
      const std::size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        throw UsageError("invalid --kafka-option '" + kv + "': KEY=VALUE");
      const std::string key = kv.substr(0, eq);
      for (const char* own : {"acks", "request.required.acks", "enable.idempotence",
                              "enable.gapless.guarantee", "message.timeout.ms",
                              "delivery.timeout.ms", "bootstrap.servers", "metadata.broker.list",
                              "transactional.id", "max.in.flight",
                              "max.in.flight.requests.per.connection", "group.id",
                              "enable.auto.commit", "enable.partition.eof"})
        if (key == own)
          throw UsageError("--kafka-option " + key + ": dblog publish sets it itself "
                           "(docs/publish.md, \"Kafka\")");
      k.config.emplace_back(key, kv.substr(eq + 1));
    }
  }
}

// --to (default $DBLOG_PUBLISH_TO): the broker and its servers; the other broker's flags are
// refused.
void BrokerFlags(const po::variables_map& vm, const Environment& env,
                 PublishCommandOptions& options) {
  std::string to;
  if (vm.count("to")) {
    to = vm["to"].as<std::string>();
  } else if (const auto t = env("DBLOG_PUBLISH_TO")) {
    to = *t;
  } else {
    throw UsageError("--to is required (nats://HOST:PORT or kafka://HOST:PORT)");
  }
  options.kafka = to.rfind("kafka://", 0) == 0;
  try {
    if (options.kafka)
      options.kafka_options.bootstrap_servers = publish::ParseKafkaUrl(to);
    else
      options.jetstream.servers = publish::ParseNatsUrl(to);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("invalid --to: ") + e.what());
  }
  for (const char* flag : {"stream", "subject-prefix", "replicas", "batch-events"})
    if (options.kafka && vm.count(flag))
      throw UsageError(std::string("--") + flag + " is for nats:// (Kafka: --topic-prefix, "
                       "--partitions, --replication-factor)");
  for (const char* flag : {"topic-prefix", "partitions", "replication-factor", "kafka-option"})
    if (!options.kafka && vm.count(flag))
      throw UsageError(std::string("--") + flag + " is for kafka://");
}

// The NATS settings: the stream, the subject prefix (options.prefix), replicas, the ack
// timeout and batches. (Set with kafka:// too, from the defaults: BrokerFlags refused the
// NATS-only flags.)
void NatsFlags(const po::variables_map& vm, const std::string& consumer,
               PublishCommandOptions& options) {
  std::string stream = "DBLOG_" + consumer;
  for (char& c : stream) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (vm.count("stream")) stream = vm["stream"].as<std::string>();
  if (stream.empty() || stream.find_first_of(" \t\r\n.*>/\\") != std::string::npos)
    throw UsageError("invalid --stream '" + stream +
                     "': a JetStream name has no spaces, '.', '*', '>', '/' or '\\'");
  options.jetstream.stream = stream;

  options.prefix = "dblog." + consumer;
  if (vm.count("subject-prefix")) options.prefix = vm["subject-prefix"].as<std::string>();
  {
    // tokens of [A-Za-z0-9_-], separated by single dots
    bool ok = !options.prefix.empty() && options.prefix.front() != '.' &&
              options.prefix.back() != '.' && options.prefix.find("..") == std::string::npos;
    for (const char c : options.prefix)
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
    if (!ok)
      throw UsageError("invalid --subject-prefix '" + options.prefix +
                       "': tokens of letters, digits, '_' and '-' separated by '.'");
  }
  options.jetstream.prefix = options.prefix;
  if (vm.count("replicas"))
    options.jetstream.replicas =
        static_cast<int>(ParseNumber(vm["replicas"].as<std::string>(), 1, 5, "--replicas"));
  if (vm.count("ack-timeout"))
    options.jetstream.ack_timeout =
        ParseSeconds(vm["ack-timeout"].as<std::string>(), 0.1, 3600, "--ack-timeout");
  if (vm.count("batch-events")) {
    if (options.format != publish::Format::kDblog)
      throw UsageError("--batch-events is for --format dblog (debezium-json is one event per "
                       "message)");
    options.batch_events =
        static_cast<std::size_t>(ParseNumber(vm["batch-events"].as<std::string>(), 1, 65536,
                                             "--batch-events"));
  }
  options.jetstream.max_pending = options.max_in_flight * 2;
}

// What one attempt's stats say, for the last line.
std::string Summary(const publish::Publisher& publisher) {
  const auto& s = publisher.stats();
  return std::to_string(s.events) + " events in " + std::to_string(s.messages) +
         " messages written" +
         (s.acked ? ", acknowledged through " + client::FormatPosition(*s.acked) : "");
}

publish::PublisherOptions PublisherOptionsOf(const PublishCommandOptions& options) {
  publish::PublisherOptions popts;
  popts.connect = options.connect;
  popts.prefix = options.prefix;
  popts.format = options.format;
  popts.debezium = options.debezium;
  if (options.format == publish::Format::kDebeziumAvro)
    popts.registry = std::make_shared<publish::HttpSchemaRegistry>(options.schema_registry);
  popts.max_in_flight = options.max_in_flight;
  // NATS only: a Kafka record is one event, placed by its row's key
  if (options.format == publish::Format::kDblog && !options.kafka)
    popts.batch = publish::BatchLimits{options.batch_events, 256 * 1024};
  return popts;
}

// How an attempt ended: `exit` when the command is to exit with it (already said on the log),
// else why it stopped and whether another attempt can help.
struct AttemptEnd {
  std::optional<int> exit;
  std::string reason;
  bool retryable = false;
};

// One attempt: a new broker connection, and the publisher run on it until it ends.
AttemptEnd Attempt(publish::Publisher& publisher, const PublishCommandOptions& options,
                   const publish::Publisher::Log& log) {
  AttemptEnd end;
  std::unique_ptr<publish::Broker> broker;
  if (options.kafka)
    broker = std::make_unique<publish::Kafka>(options.kafka_options);
  else
    broker = std::make_unique<publish::JetStream>(options.jetstream);
  try {
    if (publisher.Run(*broker)) {
      log("stopped by signal: " + Summary(publisher));
      end.exit = 0;
      return end;
    }
    end.reason = "dblogd closed the connection";
    end.retryable = true;
    if (options.retry.once) {
      log("dblogd closed the stream: " + Summary(publisher));
      end.exit = 0;
      return end;
    }
  } catch (const client::Interrupted&) {
    log("stopped by signal: " + Summary(publisher));
    end.exit = 0;
    return end;
  } catch (const publish::BrokerError& e) {
    end.reason = e.what();
    end.retryable = e.retryable();
  } catch (const client::ClientError& e) {
    end.reason = e.what();
    end.retryable = client::IsRetryable(e);
  } catch (const std::exception& e) {
    end.reason = e.what();
    end.retryable = false;
  }
  return end;
}

}  // namespace

std::string PublishHelp() {
  std::ostringstream help;
  help << "Usage: dblog publish --consumer NAME --to nats://HOST:PORT [options]\n"
          "       dblog publish --consumer NAME --to kafka://HOST:PORT [options]\n"
          "\n"
          "Writes a consumer's change stream from dblogd into NATS JetStream or Apache Kafka, so\n"
          "that any number of readers read it from there instead of each holding a replication\n"
          "slot.\n"
          "\n"
          "NATS layout (docs/publish.md): one stream per consumer; Begin, Commit and the bootstrap's\n"
          "begin and end on PREFIX.control; each table's Relation, changes, truncates and\n"
          "repair chunks on PREFIX.table.<schema>.<table> (names %-escaped), so that a reader\n"
          "of one subject can apply that table alone. With --format dblog every message\n"
          "holds one or more dblog.v1.StreamEvents, each preceded by its length as a varint\n"
          "(protobuf's writeDelimitedTo): consecutive events of one subject share a message\n"
          "(--batch-events). Headers: Dblog-Position (of its last event), Dblog-Event,\n"
          "Nats-Msg-Id (and Dblog-Part, Dblog-Table, Dblog-Relation-Seq: the stream sequence\n"
          "of the table's Relation). --format debezium-json: one event per message;\n"
          "--format debezium-avro: the same in Avro (Confluent's wire format, the schemas\n"
          "registered in --schema-registry under <topic>-key and <topic>-value).\n"
          "\n"
          "Exactly once: a position is acknowledged to dblogd only after JetStream confirmed\n"
          "(PubAck) everything up to it. On start, and after any failure, it reads the last\n"
          "position stored in the stream itself and resumes after it; every message must land at\n"
          "the next stream sequence (Nats-Expected-Last-Sequence), so a message lost in flight\n"
          "never leaves a gap. Killed at any moment (it, dblogd, a NATS node), the stream ends up\n"
          "with every event once.\n"
          "\n"
          "It keeps running: when dblogd or NATS is down, restarts, or a connection is lost, it\n"
          "says why on stderr and starts over (waits of 0.5 s doubling to 30 s, with jitter).\n"
          "Errors retrying cannot fix exit at once (a refused token, an unknown consumer, a\n"
          "stream that exists with other subjects).\n"
          "\n"
          "Kafka layout (docs/publish.md, \"Kafka\"): topic PREFIX.control (one partition) holds\n"
          "Begin, Commit, messages and the whole Truncate and bootstrap events; a topic per table\n"
          "PREFIX.<schema>.<table> (--partitions) holds its changes, keyed by the row's primary\n"
          "key (a serialized dblog.v1.Row; debezium-json: the key's JSON), and, in every one of\n"
          "its partitions, its Relation, repair chunk bounds, truncates and bootstrap events.\n"
          "Headers: Dblog-Position, Dblog-Part, Dblog-Event, Dblog-Table, Dblog-Relation-Offset\n"
          "(the offset of the table's Relation in the same partition), Dblog-Ends (on control\n"
          "records: how far the table partitions were written before it). The producer runs with\n"
          "acks=all and enable.idempotence=true; a position is acknowledged to dblogd only after\n"
          "delivery reports confirmed everything up to it. Kafka has no deduplication id: on\n"
          "start and after any failure it reads the last position stored in every partition,\n"
          "resumes from the consumer's acknowledged position and drops what each partition\n"
          "already holds, so a partition holds each position once (docs/publish.md: the one\n"
          "window, a request in flight at a crash, and what a reader does about it). Tested\n"
          "against librdkafka's mock cluster only, not a real Kafka cluster.\n"
          "\n"
       << PublishFlags()
       << "\n"
          "Environment: DBLOG_HOST, DBLOG_PORT, DBLOG_TOKEN (or DBLOG_TOKEN_FILE), DBLOG_TLS*,\n"
          "DBLOG_PUBLISH_TO give defaults.\n"
          "Exit status: 0 on SIGINT/SIGTERM (after the broker confirmed what was sent), 1 on an\n"
          "error retrying cannot fix (with --once: on any error), 2 on a bad command line.\n";
  return help.str();
}

std::optional<PublishCommandOptions> ParsePublishArgs(const std::vector<std::string>& args,
                                                      const Environment& env,
                                                      std::ostream& help_out) {
  const po::options_description flags = PublishFlags();
  const po::variables_map vm = ParseFlags(args, flags);
  if (vm.count("help")) {
    help_out << PublishHelp();
    return std::nullopt;
  }
  PublishCommandOptions options;
  options.connect.client_name = "dblog-publish/0.1";
  ReadConsumerFlag(vm, options.connect);
  const std::string& consumer = options.connect.consumer;
  BrokerFlags(vm, env, options);
  if (vm.count("format")) {
    const std::string format = vm["format"].as<std::string>();
    if (format == "debezium-json")
      options.format = publish::Format::kDebeziumJson;
    else if (format == "debezium-avro")
      options.format = publish::Format::kDebeziumAvro;
    else if (format != "dblog")
      throw UsageError("unknown --format '" + format + "' (dblog, debezium-json, debezium-avro)");
  }
  if (vm.count("schema-registry")) {
    if (options.format != publish::Format::kDebeziumAvro)
      throw UsageError("--schema-registry is for --format debezium-avro");
    options.schema_registry = vm["schema-registry"].as<std::string>();
    std::string host, port, path;
    try {
      publish::ParseRegistryUrl(options.schema_registry, host, port, path);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("invalid --schema-registry ") + e.what());
    }
  } else if (options.format == publish::Format::kDebeziumAvro) {
    throw UsageError("--format debezium-avro needs --schema-registry http://HOST:PORT");
  }
  if (vm.count("debezium-option")) {
    if (options.format == publish::Format::kDblog)
      throw UsageError("--debezium-option is for --format debezium-json or debezium-avro");
    for (const std::string& kv : vm["debezium-option"].as<std::vector<std::string>>()) {
      const std::size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        throw UsageError("invalid --debezium-option '" + kv + "': KEY=VALUE");
      try {
        publish::SetDebeziumOption(options.debezium, kv.substr(0, eq), kv.substr(eq + 1));
      } catch (const std::invalid_argument& e) {
        throw UsageError("--debezium-option: " + std::string(e.what()));
      }
    }
  }
  NatsFlags(vm, consumer, options);
  if (options.kafka) {
    KafkaFlags(vm, consumer, options);
    options.prefix = options.kafka_options.prefix;
  }
  ReadServerFlags(vm, env, options.connect);
  ReadRetryFlags(vm, options.retry, options.connect);
  return options;
}

int RunPublish(const PublishCommandOptions& options,
               std::shared_ptr<client::Interrupter> interrupter, std::FILE* err) {
  const publish::Publisher::Log log = [err](const std::string& line) {
    // One line whatever it holds (names of the source, a server's or broker's message).
    std::fprintf(err, "dblog publish: %s\n", common::LogText(line).c_str());
    std::fflush(err);
  };
  publish::Publisher publisher(PublisherOptionsOf(options), interrupter, log);
  client::Backoff backoff(options.retry.backoff);
  for (;;) {
    const auto started = std::chrono::steady_clock::now();
    const AttemptEnd end = Attempt(publisher, options, log);
    if (end.exit) return *end.exit;
    if (!end.retryable || options.retry.once) {
      log("error: " + end.reason);
      return 1;
    }
    if (client::ConnectionWorked(options.retry.backoff, publisher.progressed(),
                                 std::chrono::steady_clock::now() - started))
      backoff.Reset();
    if (!WaitToRetry(backoff, *interrupter, log, end.reason)) {
      log("stopped by signal: " + Summary(publisher));
      return 0;
    }
  }
}

}  // namespace dblog::cli
