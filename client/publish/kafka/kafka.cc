// client/publish/kafka/kafka.cc: see kafka.h.
#include "client/publish/kafka/kafka.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <thread>

#include "client/position.h"

namespace dblog::publish {

namespace {

using Clock = std::chrono::steady_clock;

int Millis(std::chrono::milliseconds d) { return static_cast<int>(d.count()); }

void OnDeliveryReport(rd_kafka_t*, const rd_kafka_message_t* message, void* opaque) {
  static_cast<Kafka*>(opaque)->OnDelivery(message);
}

std::string Header(rd_kafka_headers_t* headers, const char* name) {
  const void* value = nullptr;
  std::size_t size = 0;
  if (!headers ||
      rd_kafka_header_get_last(headers, name, &value, &size) != RD_KAFKA_RESP_ERR_NO_ERROR ||
      !value)
    return {};
  return std::string(static_cast<const char*>(value), size);
}

// Errors retrying cannot fix: credentials, authorization, a record the broker will never take.
bool Permanent(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR_SASL_AUTHENTICATION_FAILED:
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
    case RD_KAFKA_RESP_ERR_INVALID_REPLICATION_FACTOR:
    case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
    case RD_KAFKA_RESP_ERR_POLICY_VIOLATION:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
      return true;
    default:
      return false;
  }
}

struct TopicHandle {
  rd_kafka_topic_t* rkt;
  ~TopicHandle() {
    if (rkt) rd_kafka_topic_destroy(rkt);
  }
};

void Configure(rd_kafka_conf_t* conf, const std::string& key, const std::string& value) {
  char errstr[512];
  if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), errstr, sizeof errstr) !=
      RD_KAFKA_CONF_OK) {
    rd_kafka_conf_destroy(conf);
    throw BrokerError("Kafka: setting " + key + "=" + value + ": " + errstr, false);
  }
}

void RequireOnePartition(const std::string& topic, std::int32_t partitions) {
  if (partitions != 1)
    throw BrokerError("Kafka: topic " + topic + " has " + std::to_string(partitions) +
                          " partitions: the control topic must have one (its order is the log's)",
                      false);
}

// The next record of partition p (its consumption started), past end-of-partition events;
// nullptr, with `error` set, when none comes by the deadline or the read fails.
rd_kafka_message_t* NextRecord(rd_kafka_topic_t* rkt, std::int32_t p, Clock::time_point deadline,
                               std::string& error) {
  for (;;) {
    rd_kafka_message_t* m = rd_kafka_consume(rkt, p, 200);
    if (!m) {
      if (Clock::now() > deadline) {
        error = "timed out";
        return nullptr;
      }
      continue;
    }
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      rd_kafka_message_destroy(m);
      if (Clock::now() > deadline) {
        error = "ended before its high watermark";
        return nullptr;
      }
      continue;
    }
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      error = rd_kafka_message_errstr(m);
      rd_kafka_message_destroy(m);
      return nullptr;
    }
    return m;
  }
}

// A stored record's Dblog-Position and Dblog-Part values (position not empty) into `found` and
// `found_part`; the error, or "".
std::string ParseStoredPosition(const std::string& position, const std::string& part,
                                std::optional<dblog::v1::Position>& found,
                                std::uint32_t& found_part) {
  found = ParsePositionText(position);
  if (!found) return "malformed " + std::string(kPositionHeader) + " '" + position + "'";
  found_part = 1;
  if (!part.empty()) {
    const auto pp = ParsePartText(part);
    if (!pp) return "malformed " + std::string(kPartHeader) + " '" + part + "'";
    found_part = pp->first;
  }
  return "";
}

// The error of a CreateTopics answer (nullptr: none came), or ""; `retryable` says whether
// another attempt can help.
std::string CreateTopicsError(rd_kafka_event_t* ev, bool& retryable) {
  std::string error;
  if (!ev) {
    error = "no answer to CreateTopics";
  } else if (rd_kafka_event_error(ev) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    error = rd_kafka_event_error_string(ev);
    retryable = !Permanent(rd_kafka_event_error(ev));
  } else {
    std::size_t count = 0;
    const rd_kafka_topic_result_t** results =
        rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &count);
    for (std::size_t i = 0; i < count; ++i) {
      const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        error = rd_kafka_err2str(err);
        if (const char* s = rd_kafka_topic_result_error_string(results[i]))
          error += std::string(": ") + s;
        retryable = !Permanent(err);
      }
    }
  }
  return error;
}

}  // namespace

std::string ParseKafkaUrl(const std::string& url) {
  std::string servers;
  std::size_t start = 0;
  bool first = true;
  for (;;) {
    const std::size_t comma = url.find(',', start);
    std::string one =
        url.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (one.rfind("kafka://", 0) == 0) {
      one = one.substr(8);
    } else if (first || one.find("://") != std::string::npos) {
      throw std::invalid_argument("'" + one + "' is not kafka://HOST:PORT");
    }
    const std::size_t colon = one.rfind(':');
    if (one.empty() || one.find_first_of("/@?#") != std::string::npos || colon == 0 ||
        colon == std::string::npos || colon + 1 == one.size() ||
        one.find_first_not_of("0123456789", colon + 1) != std::string::npos)
      throw std::invalid_argument("'" + one + "' is not kafka://HOST:PORT");
    servers += (servers.empty() ? "" : ",") + one;
    first = false;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return servers;
}

Kafka::Kafka(KafkaOptions options) : options_(std::move(options)), layout_(options_.prefix) {}

Kafka::~Kafka() { Close(); }

void Kafka::Close() {
  if (producer_) {
    // what is not confirmed is abandoned: the next attempt reads the tails again
    rd_kafka_purge(producer_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_poll(producer_, 0);
    rd_kafka_destroy(producer_);
    producer_ = nullptr;
  }
  if (reader_) {
    rd_kafka_destroy_flags(reader_, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    reader_ = nullptr;
  }
  topics_.clear();
  tails_.clear();
  written_since_control_.clear();
  last_change_.reset();
  first_control_ = true;
  pending_ = 0;
  dropped_ = 0;
  first_error_.clear();
  error_retryable_ = true;
}

void Kafka::Fail(const std::string& error, bool retryable) {
  if (first_error_.empty()) {
    first_error_ = error;
    error_retryable_ = retryable;
  }
}

void Kafka::ThrowIfFailed() {
  if (producer_) {
    char text[512];
    const rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(producer_, text, sizeof text);
    if (fatal != RD_KAFKA_RESP_ERR_NO_ERROR)
      Fail(std::string("fatal producer error: ") + rd_kafka_err2name(fatal) + ": " + text);
  }
  if (!first_error_.empty()) throw BrokerError("Kafka: " + first_error_, error_retryable_);
}

void Kafka::OnDelivery(const rd_kafka_message_t* message) {
  if (pending_ > 0) --pending_;
  const char* topic = message->rkt ? rd_kafka_topic_name(message->rkt) : "?";
  if (message->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    Fail(std::string("a record to ") + topic + " [" + std::to_string(message->partition) +
             "] failed: " + rd_kafka_err2str(message->err),
         !Permanent(message->err));
    return;
  }
  // Predicted at Publish; -1 when librdkafka does not know it (a duplicate the broker
  // dropped: already stored, at its place).
  const auto expected = reinterpret_cast<std::intptr_t>(message->_private);
  if (message->offset >= 0 && message->offset != static_cast<std::int64_t>(expected)) {
    Fail(std::string("a record to ") + topic + " [" + std::to_string(message->partition) +
         "] was stored at offset " + std::to_string(message->offset) + ", not " +
         std::to_string(expected) + " (does anything else write to the topic?)");
  }
}

std::map<std::string, std::int32_t> Kafka::Topics(const std::string& topic) {
  std::map<std::string, std::int32_t> out;
  const rd_kafka_metadata_t* md = nullptr;
  TopicHandle handle{topic.empty() ? nullptr : rd_kafka_topic_new(reader_, topic.c_str(), nullptr)};
  const rd_kafka_resp_err_t err = rd_kafka_metadata(reader_, topic.empty() ? 1 : 0, handle.rkt, &md,
                                                    Millis(options_.ack_timeout));
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
    throw BrokerError(std::string("Kafka: cannot read the cluster's metadata from ") +
                          options_.bootstrap_servers + ": " + rd_kafka_err2str(err),
                      true);
  std::unique_ptr<const rd_kafka_metadata_t, void (*)(const rd_kafka_metadata_t*)> hold(
      md, rd_kafka_metadata_destroy);
  for (int i = 0; i < md->topic_cnt; ++i) {
    const rd_kafka_metadata_topic_t& t = md->topics[i];
    if (t.err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) continue;
    if (!layout_.Owns(t.topic)) continue;
    if (t.err != RD_KAFKA_RESP_ERR_NO_ERROR || t.partition_cnt <= 0)
      throw BrokerError(std::string("Kafka: topic ") + t.topic + ": " + rd_kafka_err2str(t.err),
                        true);
    for (int p = 0; p < t.partition_cnt; ++p)
      if (t.partitions[p].leader < 0)
        throw BrokerError(std::string("Kafka: topic ") + t.topic + " partition " +
                              std::to_string(p) + " has no leader",
                          true);
    out[t.topic] = t.partition_cnt;
  }
  return out;
}

void Kafka::ReadTails(const std::string& topic, std::int32_t partitions) {
  TopicHandle handle{rd_kafka_topic_new(reader_, topic.c_str(), nullptr)};
  for (std::int32_t p = 0; p < partitions; ++p) {
    std::int64_t low = 0, high = 0;
    const rd_kafka_resp_err_t err = rd_kafka_query_watermark_offsets(
        reader_, topic.c_str(), p, &low, &high, Millis(options_.ack_timeout));
    if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw BrokerError("Kafka: the offsets of " + topic + " [" + std::to_string(p) +
                            "]: " + rd_kafka_err2str(err),
                        true);
    Tail& tail = tails_[{topic, p}];
    tail.next_offset = high;
    // Walk back from the end in growing windows to the last record with a position (records
    // without one: Relations, BootstrapBegin).
    std::int64_t window = 1;
    for (std::int64_t start = std::max(low, high - window); high > low;) {
      if (ReadLastPosition(handle.rkt, topic, p, start, high, tail)) break;
      if (start == low) break;  // nothing in the partition carries a position
      window *= 8;
      high = start;  // the records from `start` on are read: look before them
      start = std::max(low, start - window);
    }
  }
}

bool Kafka::ReadLastPosition(rd_kafka_topic_s* rkt, const std::string& topic, std::int32_t p,
                             std::int64_t start, std::int64_t high, Tail& tail) {
  if (rd_kafka_consume_start(rkt, p, start) != 0)
    throw BrokerError("Kafka: cannot read " + topic + " [" + std::to_string(p) +
                          "]: " + rd_kafka_err2str(rd_kafka_last_error()),
                      true);
  std::optional<dblog::v1::Position> found;
  std::uint32_t found_part = 1;
  std::int64_t next = start;
  const auto deadline = Clock::now() + options_.ack_timeout;
  std::string error;
  while (next < high) {
    rd_kafka_message_t* m = NextRecord(rkt, p, deadline, error);
    if (!m) break;
    next = m->offset + 1;
    rd_kafka_headers_t* headers = nullptr;
    rd_kafka_message_headers(m, &headers);
    const std::string position = Header(headers, kPositionHeader);
    const std::string part = Header(headers, kPartHeader);
    rd_kafka_message_destroy(m);
    if (position.empty()) continue;
    error = ParseStoredPosition(position, part, found, found_part);
    if (!error.empty()) break;
  }
  rd_kafka_consume_stop(rkt, p);
  if (!error.empty())
    throw BrokerError(
        "Kafka: reading the end of " + topic + " [" + std::to_string(p) + "]: " + error,
        error.rfind("malformed", 0) != 0);
  if (!found) return false;
  tail.position = found;
  tail.part = found_part;
  return true;
}

void Kafka::ConfigureConnection(rd_kafka_conf_s* conf) const {
  Configure(conf, "bootstrap.servers", options_.bootstrap_servers);
  // errors only (a broker unreachable, ...): librdkafka's warnings at every attempt (the
  // experimental gapless setting, an old broker's API) say nothing a user can act on;
  // --kafka-option log_level=7 shows everything
  Configure(conf, "log_level", "3");
  Configure(conf, "socket.timeout.ms", std::to_string(std::max(10, Millis(options_.ack_timeout))));
  for (const auto& [key, value] : options_.config) Configure(conf, key, value);
}

void Kafka::CreateProducer() {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  ConfigureConnection(conf);
  Configure(conf, "acks", "all");
  Configure(conf, "enable.idempotence", "true");
  // a failed batch stops the producer instead of leaving a gap behind later ones
  Configure(conf, "enable.gapless.guarantee", "true");
  // no local timeout (timed-out records are the one case idempotence leaves gaps in): Flush's
  // own timeout ends the attempt, and the next one reads the tails
  Configure(conf, "message.timeout.ms", "0");
  // one produce request in flight per broker: a batch that fails is retried before any later
  // one can reach the broker, so the log stays in order even on a broker that does not check
  // the idempotent producer's sequence numbers (librdkafka's mock cluster, seen reordering
  // records around an injected retriable error with 5 in flight)
  Configure(conf, "max.in.flight.requests.per.connection", "1");
  Configure(conf, "linger.ms", "5");
  rd_kafka_conf_set_dr_msg_cb(conf, OnDeliveryReport);
  rd_kafka_conf_set_opaque(conf, this);
  char errstr[512];
  producer_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof errstr);
  if (!producer_) {
    rd_kafka_conf_destroy(conf);
    throw BrokerError(std::string("Kafka: cannot create a producer: ") + errstr, false);
  }
}

void Kafka::CreateReader() {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  ConfigureConnection(conf);
  Configure(conf, "group.id", "dblog-publish-tail");
  Configure(conf, "enable.auto.commit", "false");
  Configure(conf, "enable.auto.offset.store", "false");
  Configure(conf, "enable.partition.eof", "true");
  Configure(conf, "allow.auto.create.topics", "false");
  char errstr[512];
  reader_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
  if (!reader_) {
    rd_kafka_conf_destroy(conf);
    throw BrokerError(std::string("Kafka: cannot create a consumer: ") + errstr, false);
  }
}

std::string Kafka::ResumeNote() const {
  std::optional<dblog::v1::Position> last;
  std::size_t held = 0;
  for (const auto& [partition, t] : tails_) {
    if (t.next_offset > 0) ++held;
    if (t.position && (!last || client::ComparePositions(*t.position, *last) > 0))
      last = t.position;
  }
  return "the log holds " + std::to_string(topics_.size()) + " topics (" + std::to_string(held) +
         " partitions not empty" + (last ? ", the last position " + PositionText(*last) : "") +
         "): resuming from the consumer's acknowledged position, dropping what each "
         "partition already holds";
}

StoredTail Kafka::Open() {
  Close();
  CreateProducer();
  CreateReader();
  topics_ = Topics("");
  const auto control = topics_.find(layout_.ControlTopic());
  if (control != topics_.end()) RequireOnePartition(control->first, control->second);
  for (const auto& [topic, partitions] : topics_) ReadTails(topic, partitions);
  StoredTail tail;
  tail.resume_note = ResumeNote();
  return tail;
}

std::int32_t Kafka::EnsureTopic(const std::string& topic) {
  const auto known = topics_.find(topic);
  if (known != topics_.end()) return known->second;
  const bool control = topic == layout_.ControlTopic();
  // a topic created beforehand (by an administrator, or since Open) is used as it is
  if (const auto existing = Topics(topic); existing.count(topic))
    return AdoptTopic(topic, existing.at(topic), control);
  CreateTopic(topic, control ? 1 : options_.partitions);
  return AdoptTopic(topic, AwaitTopic(topic), control);
}

std::int32_t Kafka::AdoptTopic(const std::string& topic, std::int32_t partitions, bool control) {
  if (control) RequireOnePartition(topic, partitions);
  // created by someone else since Open, perhaps: read what it holds
  ReadTails(topic, partitions);
  topics_[topic] = partitions;
  return partitions;
}

void Kafka::CreateTopic(const std::string& topic, int partitions) {
  char errstr[512];
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(
      topic.c_str(), partitions, options_.replication_factor, errstr, sizeof errstr);
  if (!nt) throw BrokerError("Kafka: topic " + topic + ": " + errstr, false);
  rd_kafka_queue_t* queue = rd_kafka_queue_new(producer_);
  rd_kafka_AdminOptions_t* admin =
      rd_kafka_AdminOptions_new(producer_, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_request_timeout(admin, Millis(options_.ack_timeout), errstr,
                                            sizeof errstr);
  rd_kafka_CreateTopics(producer_, &nt, 1, admin, queue);
  rd_kafka_event_t* ev = rd_kafka_queue_poll(queue, Millis(options_.ack_timeout) + 1000);
  bool retryable = true;
  const std::string error = CreateTopicsError(ev, retryable);
  if (ev) rd_kafka_event_destroy(ev);
  rd_kafka_AdminOptions_destroy(admin);
  rd_kafka_queue_destroy(queue);
  rd_kafka_NewTopic_destroy(nt);
  if (!error.empty())
    throw BrokerError("Kafka: cannot create topic " + topic + ": " + error +
                          " (a cluster that does not let this client create topics: create " +
                          topic + " beforehand)",
                      retryable);
}

std::int32_t Kafka::AwaitTopic(const std::string& topic) {
  // A new topic's leaders can take a moment to be known.
  const auto deadline = Clock::now() + options_.ack_timeout;
  std::map<std::string, std::int32_t> found;
  std::string error;
  for (;;) {
    try {
      found = Topics(topic);
      if (found.count(topic)) break;
      error = "not in the cluster's metadata";
    } catch (const BrokerError& e) {
      error = e.what();
    }
    if (Clock::now() > deadline)
      throw BrokerError("Kafka: topic " + topic + " created, but: " + error, true);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return found.at(topic);
}

void Kafka::Publish(const LogMessage& message, std::uint64_t, std::uint64_t) {
  ThrowIfFailed();
  const std::string topic = layout_.TopicOf(message);
  const std::int32_t partitions = EnsureTopic(topic);
  const bool control = topic == layout_.ControlTopic();
  for (const KafkaRecord& record : layout_.Place(message, partitions)) {
    const Partition where{record.topic, record.partition};
    Tail& tail = tails_[where];
    if (Held(message, where, tail)) continue;
    rd_kafka_headers_t* headers = Headers(message, where, tail, control);
    Produce(record, message, headers, tail.next_offset);
    ++tail.next_offset;
    ++pending_;
  }
  rd_kafka_poll(producer_, 0);
}

bool Kafka::Held(const LogMessage& message, const Partition& where, const Tail& tail) {
  const bool change = message.kind == EventKind::kChange;
  if (change && message.part > 1 && message.position && last_change_ &&
      last_change_->first.commit_lsn() == message.position->commit_lsn() &&
      last_change_->first.seq() == message.position->seq() && last_change_->second == where) {
    // a key change's DELETE of the old key (layout.h, set_row_keys) that lands in the
    // partition of the UPDATE just written, which removes the old key itself: one record
    // per position and partition
    return true;
  }
  if (change && message.position) last_change_.emplace(*message.position, where);
  if (message.position && tail.position) {
    const int c = client::ComparePositions(*message.position, *tail.position);
    if (c < 0 || (c == 0 && message.part <= tail.part)) {
      ++dropped_;
      return true;  // this partition holds it already
    }
  }
  return false;
}

rd_kafka_headers_s* Kafka::Headers(const LogMessage& message, const Partition& where, Tail& tail,
                                   bool control) {
  rd_kafka_headers_t* headers = rd_kafka_headers_new(8);
  const auto add = [&](const char* name, const std::string& value) {
    rd_kafka_header_add(headers, name, -1, value.data(), static_cast<ssize_t>(value.size()));
  };
  add(kEventHeader, EventKindName(message.kind));
  if (message.position) add(kPositionHeader, PositionText(*message.position));
  if (message.parts > 1) add(kPartHeader, PartText(message));
  if (!message.table.empty()) add(kTableHeader, TableHeaderText(message.table));
  if (message.kind == EventKind::kRelation) {
    tail.relation_offset = tail.next_offset;
  } else if (!control && tail.relation_offset >= 0) {
    add(kRelationOffsetHeader, std::to_string(tail.relation_offset));
  }
  if (control) {
    const std::string ends = ControlEnds(where);
    if (!ends.empty()) add(kEndsHeader, ends);
    first_control_ = false;
    written_since_control_.clear();
  } else {
    written_since_control_.insert(where);
  }
  return headers;
}

std::string Kafka::ControlEnds(const Partition& where) {
  std::string ends;
  const auto end_of = [&](const Partition& p, const Tail& t) {
    if (p == where || t.next_offset <= 0) return;
    ends += (ends.empty() ? "" : ",") + p.first + ":" + std::to_string(p.second) + ":" +
            std::to_string(t.next_offset);
  };
  if (first_control_) {
    for (const auto& [p, t] : tails_) end_of(p, t);
  } else {
    for (const auto& p : written_since_control_) end_of(p, tails_[p]);
  }
  return ends;
}

void Kafka::Produce(const KafkaRecord& record, const LogMessage& message,
                    rd_kafka_headers_s* headers, std::int64_t offset) {
  const auto opaque = reinterpret_cast<void*>(static_cast<std::intptr_t>(offset));
  for (;;) {
    rd_kafka_resp_err_t err;
    if (record.key) {
      err = rd_kafka_producev(
          producer_, RD_KAFKA_V_TOPIC(record.topic.c_str()), RD_KAFKA_V_PARTITION(record.partition),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_KEY(record.key->data(), record.key->size()),
          RD_KAFKA_V_VALUE(record.tombstone ? nullptr : const_cast<char*>(message.payload.data()),
                           record.tombstone ? 0 : message.payload.size()),
          RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
    } else {
      err = rd_kafka_producev(
          producer_, RD_KAFKA_V_TOPIC(record.topic.c_str()), RD_KAFKA_V_PARTITION(record.partition),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_VALUE(const_cast<char*>(message.payload.data()), message.payload.size()),
          RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);
    }
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) break;
    if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
      rd_kafka_poll(producer_, 100);  // delivery reports make room
      ThrowIfFailed();
      continue;
    }
    rd_kafka_headers_destroy(headers);
    throw BrokerError("Kafka: producing to " + record.topic + ": " + rd_kafka_err2str(err),
                      !Permanent(err));
  }
}

void Kafka::Flush() {
  ThrowIfFailed();
  const rd_kafka_resp_err_t err = rd_kafka_flush(producer_, Millis(options_.ack_timeout));
  ThrowIfFailed();
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR || pending_ > 0)
    throw BrokerError("Kafka: " + std::to_string(pending_) +
                          " records not confirmed within the ack timeout (" +
                          std::string(rd_kafka_err2str(err)) + ")",
                      true);
}

}  // namespace dblog::publish
