// sidecar/consumer/pipeline.h: everything that serves one connected consumer: its slot (created
// on first connection, with a bootstrap copy from the slot's exported snapshot), the replication
// stream, the one emitter, acknowledgements and the slot's confirmed position, backpressure,
// heartbeats, progress and reconnecting to the source.
// Owns: the consumer's PostgreSQL connections and their lifecycle. Events are rendered only by
// the emitter (emit/); bytes only leave through the session (server/).
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "bootstrap/copier.h"
#include "config/config.h"
#include "emit/ack_tracker.h"
#include "emit/emitter.h"
#include "metrics/metrics.h"
#include "pg/connection.h"
#include "pg/replication_stream.h"
#include "server/session.h"

namespace dblog::consumer {

class Pipeline : public server::SessionListener,
                 public pg::ReplicationStream::Handler,
                 public std::enable_shared_from_this<Pipeline> {
 public:
  Pipeline(boost::asio::io_context& io, const config::Config& config,
           config::ConsumerConfig consumer, std::shared_ptr<metrics::ConsumerStats> stats,
           std::shared_ptr<server::Session> session, dblog::v1::Hello hello,
           std::function<void(const std::string&)> on_finished);
  ~Pipeline() override;

  // Prepares the slot and scope, answers Welcome (or an Error) and starts streaming.
  void Start();
  // Graceful stop (SIGTERM): final status update to PostgreSQL, Error.SHUTTING_DOWN to the client.
  void Shutdown();

  static std::string SlotName(const std::string& consumer) { return "dblog_" + consumer; }

 private:
  // server::SessionListener
  void OnAck(const dblog::v1::Ack& ack) override;
  void OnDrained() override;
  void OnClosed() override;
  // pg::ReplicationStream::Handler
  void OnData(std::uint64_t wal_start, std::uint64_t wal_end, std::string_view payload) override;
  void OnKeepalive(std::uint64_t wal_end) override;
  void OnError(const std::exception& error) override;
  void OnEnd() override;

  void Prepare();
  void StartBootstrap(bool restarted);
  void DrainCopy();
  void FinishBootstrap();
  void StartStream();
  void SourceLost(const std::string& why);
  void Reconnect();
  void Flush();
  void ApplyConfirmable(std::uint64_t lsn);
  void SendStatusSoon();
  void Heartbeat();
  void SendProgress();
  void MarkBootstrapDone();
  void Fail(dblog::v1::Error::Code code, const std::string& message);
  void Finish();
  pg::Connection& Sql();
  std::vector<std::pair<std::string, std::string>> PluginOptions() const;

  enum class State { kPreparing, kBootstrapping, kStreaming, kReconnecting, kDone };

  boost::asio::io_context& io_;
  const config::Config& config_;
  const config::ConsumerConfig consumer_;
  const std::string slot_;
  std::shared_ptr<metrics::ConsumerStats> stats_;
  std::shared_ptr<server::Session> session_;
  const dblog::v1::Hello hello_;
  std::function<void(const std::string&)> on_finished_;

  State state_ = State::kPreparing;
  std::optional<pg::Connection> sql_;
  std::optional<pg::Connection> repl_;  // idle replication connection before streaming
  std::unique_ptr<pg::ReplicationStream> stream_;
  std::unique_ptr<emit::AckTracker> acks_;
  std::unique_ptr<emit::Emitter> emitter_;
  dblog::v1::Batch batch_;  // reused for parsing

  // bootstrap
  std::unique_ptr<bootstrap::Copier> copier_;
  std::uint64_t consistent_point_ = 0;
  std::optional<emit::Position> bootstrap_end_;  // done once the consumer acks it
  bool drain_posted_ = false;

  std::uint64_t confirmed_ = 0;
  bool paused_ = false;
  bool status_soon_ = false;
  bool sent_since_heartbeat_ = false;
  std::chrono::milliseconds backoff_;
  std::deque<std::pair<std::uint64_t, std::int64_t>> unacked_commits_;  // (commit_lsn, time)
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer status_timer_;
  boost::asio::steady_timer reconnect_timer_;
  boost::asio::steady_timer progress_timer_;
};

}  // namespace dblog::consumer
