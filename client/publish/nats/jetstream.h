// client/publish/nats/jetstream.h: NATS JetStream as a Broker (libnats, `#include <nats/nats.h>`).
// One stream per dblog consumer, holding the subjects <prefix>.> (docs/publish.md). Messages
// are published asynchronously; each carries Nats-Msg-Id (deduplication within the stream's
// duplicate window) and Nats-Expected-Last-Sequence (JetStream refuses it unless the stream's
// last sequence is the one before: a message lost in flight makes every later one fail instead
// of leaving a gap). Flush waits for every PubAck.
// Owns: the NATS connection, the JetStream context and the stream's creation. Does not decide
// what is published or acknowledged (publisher.h).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "client/publish/broker.h"
#include "client/publish/nats/subjects.h"

struct __natsConnection;
struct __jsCtx;
struct jsStreamInfo;

namespace dblog::publish {

struct JetStreamOptions {
  std::vector<std::string> servers;  // nats://host:port, one or more nodes of one cluster
  std::string stream;                // the stream's name
  std::string prefix;                // of its subjects (subjects.h): it holds <prefix>.>
  int replicas = 1;                  // for a stream this creates
  // How long Flush waits for the PubAcks (and connecting for the server).
  std::chrono::milliseconds ack_timeout{10000};
  std::size_t max_pending = 4096;  // async publishes in flight before Publish blocks
};

// "nats://h1:4222,nats://h2:4222" or "nats://h1:4222,h2:4222" -> one URL per server; throws
// std::invalid_argument for anything else.
std::vector<std::string> ParseNatsUrl(const std::string& url);

class JetStream : public Broker {
 public:
  explicit JetStream(JetStreamOptions options);
  ~JetStream() override;
  JetStream(const JetStream&) = delete;
  JetStream& operator=(const JetStream&) = delete;

  StoredTail Open() override;
  void Publish(const LogMessage& message, std::uint64_t seq, std::uint64_t relation_seq) override;
  void Flush() override;
  std::size_t pending() const override { return pending_; }
  std::string TopicOf(const LogMessage& message) const override { return subjects_.Of(message); }

  // Called by libnats' thread for a publish the stream refused or that failed.
  void RecordAsyncError(const std::string& error);

 private:
  void Close();
  // Open's steps: the connection and its JetStream context; the stream's info, creating the
  // stream when it is missing (the caller destroys it); the last message that carries a
  // position, from tail.last_seq down to first_seq, into `tail`.
  void Connect();
  jsStreamInfo* StreamInfo();
  jsStreamInfo* SettledStreamInfo();
  void ReadLastPosition(std::uint64_t first_seq, StoredTail& tail);

  JetStreamOptions options_;
  NatsSubjects subjects_;
  __natsConnection* nc_ = nullptr;
  __jsCtx* js_ = nullptr;
  std::size_t pending_ = 0;
  std::mutex error_mutex_;
  std::string first_error_;  // of a failed async publish, from libnats' thread
};

}  // namespace dblog::publish
