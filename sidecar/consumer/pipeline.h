// sidecar/consumer/pipeline.h: what serves one connected consumer: its slot (created on first
// connection, then bootstrapped from the slot's exported snapshot), the replication stream
// and the dispatch of its events, the one emitter, acknowledgements and the slot's confirmed
// position, backpressure, heartbeats and reconnecting to the source. The bootstrap runs in
// `BootstrapRun` (bootstrap_run.h), repairs in `Repairs` (repairs.h), the dblog.* statements
// in `Bookkeeping` (bookkeeping.h).
// Owns: the consumer's lifecycle and its replication connection. Events are rendered only by
// the emitter (emit/); bytes only leave through the session (server/).
#pragma once

#include <google/protobuf/arena.h>

#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "bootstrap/scope.h"
#include "config/config.h"
#include "consumer/bookkeeping.h"
#include "consumer/bootstrap_run.h"
#include "consumer/pgoutput_source.h"
#include "consumer/repairs.h"
#include "consumer/scope_changes.h"
#include "consumer/slot_creation.h"
#include "emit/ack_tracker.h"
#include "wire/change_view.h"
#include "emit/emitter.h"
#include "metrics/metrics.h"
#include "pg/connection.h"
#include "pg/replication_stream.h"
#include "server/consumer.h"
#include "server/session.h"

namespace dblog::consumer {

// Hello.resume_after is ahead of everything the source has written.
class ResumeAheadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Pipeline : public server::Consumer,
                 public server::SessionListener,
                 public pg::ReplicationStream::Handler,
                 public Repairs::Host,
                 public BootstrapRun::Host,
                 public std::enable_shared_from_this<Pipeline> {
 public:
  Pipeline(boost::asio::io_context& io, const config::Config& config,
           config::ConsumerConfig consumer, std::shared_ptr<metrics::ConsumerStats> stats,
           std::shared_ptr<server::Session> session, dblog::v1::Hello hello,
           std::function<void(const std::string&)> on_finished,
           std::shared_ptr<UnsettledScopeChanges> unsettled);
  ~Pipeline() override;

  // Prepares the slot and scope, answers Welcome (or an Error) and starts streaming.
  void Start() override;
  // Graceful stop (SIGTERM, or SIGHUP changed this consumer's settings): Error.SHUTTING_DOWN
  // with `reason` to the client, its acks taken until it closes (at most kShutdownAckGrace),
  // then the final status update to PostgreSQL.
  void Shutdown(const std::string& reason) override;
  static constexpr std::chrono::milliseconds kShutdownAckGrace{500};

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

  // Repairs::Host and BootstrapRun::Host
  bool Streaming() const override { return state_ == State::kStreaming; }
  emit::Emitter& emitter() override { return *emitter_; }
  void Flush() override;
  void Send(const dblog::v1::ServerMessage& message) override;
  void CloseIdleReplication() override { repl_.reset(); }
  std::size_t queued_bytes() const override { return session_->queued_bytes(); }
  void Copied() override;

  // Runs `step`, turning what it throws into the Error the client gets.
  template <typename F>
  void Guarded(F&& step);
  void Prepare();
  // Creates the slot off this thread (slot_creation.h), then runs `next` (guarded) with it;
  // meanwhile SlotWaitTick reports the wait.
  void CreateSlotThen(bool export_snapshot, std::function<void(const pg::CreatedSlot&)> next);
  void SlotWaitTick();
  void BeginStreaming(bool slot_existed);
  void StartBootstrap(const pg::CreatedSlot& created, bool restarted);
  // --on-slot-lost=reconcile: a new slot and a whole-table repair of every table in scope.
  void Reconcile();
  // IDENTIFY_SYSTEM on the replication connection: the timeline into /metrics, a change logged.
  void NoteTimeline(pg::Connection& repl);
  // Welcome: the slot, where the stream resumes (none after a bootstrap), the scope.
  void SendWelcome(bool slot_created, const emit::Position* resume);
  void ProcessEvent(dblog::v1::Event& event, std::string_view change_bytes);
  // Runs `process`, turning what it throws into the end of the session; false then.
  template <typename F>
  bool Dispatched(F&& process);
  // pgoutput mode, each heartbeat: a table in the scope that its publication lacks is added
  // (AddJoinedTables), or ends the session where repairs cannot run; a publication altered by
  // another role ends it.
  void CheckPublicationCoversScope();
  // pgoutput mode, each heartbeat: dblog.watermarks still in the publication, or put back
  // (abandoning the windows in flight, whose markers may be lost), or repairs unavailable.
  void CheckWatermarksPublished(pg::Connection& sql);
  // pgoutput mode: tables that joined the scope of a consumer streaming from its slot go into
  // the publication with a whole-table repair each, in one transaction (both or neither, and
  // every window of the repair reads after the table's changes entered the stream).
  void AddJoinedTables(pg::Connection& sql, const PublicationPlan& plan);
  // pgoutput mode: one XLogData payload.
  void OnPgoutputData(std::uint64_t wal_start, std::uint64_t wal_end, std::string_view payload);
  // The plugin's message read in place into batch_events_, batch_parsed_ and batch_changes_
  // (commits counted); false when it is not in the plugin's canonical form (then parsed whole).
  bool ReadBatchInPlace(std::string_view payload);
  void ProcessChange(const wire::ChangeView& change);
  // After a data message: the commits it carried counted, the source position advanced.
  void CountCommits(const dblog::v1::Event& event);
  void SourceAdvanced(std::uint64_t wal_end);
  bool MessageWanted(const std::string& prefix) const;
  void StartStream();
  void SourceLost(const std::string& why);
  void Reconnect();
  void ApplyConfirmable(std::uint64_t lsn);
  void SendStatusSoon();
  void Heartbeat();
  void Fail(dblog::v1::Error::Code code, const std::string& message) override;
  void Finish();
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
  Bookkeeping bookkeeping_;
  // the changes of the scope the stream has not read past (MakeConsumerFactory's, every
  // consumer's), and the dblog.ddl messages of the transaction read
  std::shared_ptr<UnsettledScopeChanges> unsettled_;
  ScopeChanges scope_changes_{consumer_, unsettled_.get()};
  std::optional<pg::Connection> repl_;  // idle replication connection before streaming
  std::optional<dblog::v1::Reconcile> reconcile_;  // this session reconciled: Welcome says so
  // how this session's stream began, for a failover's record (dblog.consumers.failover)
  std::string stream_origin_ = "resumed from its slot";
  std::unique_ptr<pg::ReplicationStream> stream_;
  std::unique_ptr<emit::AckTracker> acks_;
  std::unique_ptr<emit::Emitter> emitter_;

  std::unique_ptr<BootstrapRun> bootstrap_;  // from the slot's creation on, when it bootstraps

  std::uint64_t confirmed_ = 0;
  // How far this connection's stream has read the source's WAL (Heartbeat.source_lsn): every
  // transaction committed before it was handed to the emitter and sent. Per connection, not
  // the consumer's metric (which outlives it): a new connection starts again at 0.
  std::uint64_t source_lsn_ = 0;
  bool paused_ = false;
  bool stream_started_once_ = false;
  bool status_soon_ = false;
  bool sent_since_heartbeat_ = false;
  std::chrono::milliseconds backoff_;
  std::deque<std::pair<std::uint64_t, std::int64_t>> unacked_commits_;  // (commit_lsn, time)
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer status_timer_;
  boost::asio::steady_timer reconnect_timer_;
  std::unique_ptr<SlotCreation> slot_creation_;
  boost::asio::steady_timer slot_wait_timer_;
  std::chrono::steady_clock::time_point slot_wait_logged_{};
  std::string slot_waiting_for_;
  bool shutting_down_ = false;
  boost::asio::steady_timer shutdown_timer_;
  // The plugin's batches are parsed into this arena, reset after each: no allocation per
  // value (but the buffers of strings too long to be stored inline).
  // Nothing may keep a pointer into a batch past OnData.
  static google::protobuf::ArenaOptions ParseArenaOptions(char* block, std::size_t size);
  static constexpr std::size_t kParseBlockBytes = 1u << 20;
  std::unique_ptr<char[]> parse_block_;
  google::protobuf::Arena parse_arena_;
  std::unique_ptr<Repairs> repairs_;
  std::string repairs_unavailable_;  // pgoutput mode: why repairs cannot run ("" when they can)
  // pgoutput mode: repairs_unavailable_ because dblog.watermarks was taken out of a publication
  // dblogd's role does not own (available again once its owner puts it back)
  bool watermarks_unpublished_ = false;
  std::string last_restore_error_;  // the SQLSTATE of the last failed re-add (logged once each)
  // pgoutput mode (--source-plugin pgoutput) only: the publication and the stream's decoding.
  std::unique_ptr<PgoutputSource> pgoutput_;
  std::vector<dblog::v1::Event> pgoutput_events_;
  // The plugin's message read in place (ReadBatchInPlace): its events, each either parsed (into
  // parse_arena_) or, a Change, a view into the message (batch_changes_, in order; reused, so
  // their row views keep their capacity).
  std::vector<wire::BatchEvent> batch_events_;
  std::vector<dblog::v1::Event*> batch_parsed_;
  // A ValuePiece's bytes, a view into the message (non-empty: pieces are never empty)
  std::vector<std::string_view> batch_pieces_;
  std::vector<wire::ChangeView> batch_changes_;
  static constexpr std::size_t kKeptViews = 1024;
  // pgoutput mode: the message whose mapping failed on a database error, and how many times in
  // a row (reconnects replay it; after a few the consumer is told)
  std::uint64_t mapping_failed_at_ = 0;
  int mapping_failures_ = 0;
};

// Consumers that no --consumer names but that have a slot (plugin dblog, named dblog_<name>,
// in the source database; junk left by an earlier run counts too). For
// --max-unconfigured-consumers. Opens a short SQL connection (blocking); throws pg::Error when
// the source cannot be reached.
std::set<std::string> UnconfiguredWithSlots(const config::Config& config);

// What Server needs to make this folder's pipelines (main.cc hands it over).
server::ConsumerFactory MakeConsumerFactory(const config::Config& config);

}  // namespace dblog::consumer
