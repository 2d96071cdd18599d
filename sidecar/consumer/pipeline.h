// sidecar/consumer/pipeline.h: everything that serves one connected consumer: its slot (created
// on first connection, with a bootstrap copy from the slot's exported snapshot), the replication
// stream, the one emitter, acknowledgements and the slot's confirmed position, backpressure,
// heartbeats, progress and reconnecting to the source.
// Owns: the consumer's PostgreSQL connections and their lifecycle. Events are rendered only by
// the emitter (emit/); bytes only leave through the session (server/).
#pragma once

#include <boost/asio.hpp>
#include <google/protobuf/arena.h>
#include <chrono>
#include <deque>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>

#include "bootstrap/copier.h"
#include "consumer/slot_creation.h"
#include "bootstrap/scope.h"
#include "config/config.h"
#include "emit/ack_tracker.h"
#include "emit/emitter.h"
#include "log/rate_limit.h"
#include "metrics/metrics.h"
#include "pg/connection.h"
#include "pg/replication_stream.h"
#include "server/consumer.h"
#include "server/session.h"
#include "window/window.h"

namespace dblog::consumer {

// The version of the dblog extension (dblog.control) this dblogd speaks to; checked at start.
inline constexpr const char* kExtensionVersion = "0.3";
// Hello.resume_after is ahead of everything the source has written.
class ResumeAheadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Watermark messages: "dblog.watermark/<consumer>", content "lo:<window id>" or "hi:<id>".
inline constexpr const char* kWatermarkPrefix = "dblog.watermark";

class Pipeline : public server::Consumer,
                 public server::SessionListener,
                 public pg::ReplicationStream::Handler,
                 public std::enable_shared_from_this<Pipeline> {
 public:
  Pipeline(boost::asio::io_context& io, const config::Config& config,
           config::ConsumerConfig consumer, std::shared_ptr<metrics::ConsumerStats> stats,
           std::shared_ptr<server::Session> session, dblog::v1::Hello hello,
           std::function<void(const std::string&)> on_finished);
  ~Pipeline() override;

  // Prepares the slot and scope, answers Welcome (or an Error) and starts streaming.
  void Start() override;
  // Graceful stop (SIGTERM): Error.SHUTTING_DOWN to the client, its acks taken until it closes
  // (at most kShutdownAckGrace), then the final status update to PostgreSQL.
  void Shutdown() override;
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

  // Runs `step`, turning what it throws into the Error the client gets.
  template <typename F>
  void Guarded(F&& step);
  void Prepare();
  void Preflight(pg::Connection& sql);
  // Creates the slot off this thread (slot_creation.h), then runs `next` (guarded) with it;
  // meanwhile SlotWaitTick reports the wait.
  void CreateSlotThen(bool export_snapshot, std::function<void(const pg::CreatedSlot&)> next);
  void SlotWaitTick();
  // What the slot creation waits for: the transactions blocking its walsender, for people.
  std::string SlotCreationBlockers();
  void BeginStreaming(bool slot_existed);
  void StartBootstrap(const pg::CreatedSlot& created, bool restarted);
  void CopyTablesAddedToScope(const std::vector<bootstrap::Table>& tables);
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

  // bootstrap
  std::unique_ptr<bootstrap::Copier> copier_;
  std::uint64_t consistent_point_ = 0;
  std::optional<emit::Position> bootstrap_end_;  // done once the consumer acks it
  bool drain_posted_ = false;

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
  boost::asio::steady_timer progress_timer_;
  boost::asio::steady_timer window_timer_;
  boost::asio::steady_timer repair_progress_timer_;
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

  // ---- repairs (repairs.cc) ----------------------------------------------------------------
  struct Request {
    std::uint64_t id = 0;
    std::uint32_t table_oid = 0;
    std::string table;                   // qualified, as regclass prints it
    std::string kind;                    // table, range, keys
    std::string from_key, to_key, keys;  // JSON text ("" = NULL)
    std::vector<std::string> key_columns;  // quoted identifiers, key order
    std::vector<std::string> key_types;
    // progress (in memory: what was emitted; durable: what was acknowledged)
    std::string resume_key;               // JSON array of key values (text) to continue after
    std::size_t keys_done = 0;            // key-list requests: keys covered so far
    std::uint32_t chunks = 0;
    std::uint64_t rows = 0, deletes = 0;
    bool cancelled = false;
    // for Progress{phase: "repair"}: filled once, when first reported
    bool described = false;
    std::string schema, name;
    std::uint64_t rows_estimated = 0;  // table: pg_class.reltuples; keys: how many; range: 0
  };
  struct OpenWindow {
    window::Window window;
    window::Window::Chunk chunk;
    std::uint64_t request_id;
    std::string last_key;               // JSON array of the chunk's last key values, as text
    std::string last_key_bytes;         // the same key, encoded
    std::size_t keys_covered = 0;       // key-list chunks
    bool last = false;                  // the request's last chunk
    bool truncated = false;             // a TRUNCATE of the table inside the window
    dblog::v1::Relation relation;
    std::string lower_bytes, upper_bytes;  // encoded range bounds
    std::vector<std::string> key_collations;  // ChunkBegin.key_collations
    std::size_t total_keys = 0;
    std::chrono::steady_clock::time_point started{};  // for --repair-rows-per-second
    std::uint64_t rows_read = 0;
  };
  struct PendingProgress {
    emit::Position position;  // done once the consumer acknowledged this
    Request snapshot;         // the request's progress as of this chunk
    bool last;
  };
  void LoadRequests();
  void LoadRequestsWhere(const std::string& condition,
                         std::vector<std::optional<std::string>> params);
  void OnControlChange(const dblog::v1::Change& change);
  bool DescribeRequestTable(Request& q);
  bool MessageWanted(const std::string& prefix) const;
  std::string WatermarkPrefix() const;
  void ProcessEvent(dblog::v1::Event& event, std::string_view change_bytes);
  void RecordKeys(const dblog::v1::Change& change);
  void ScheduleWindow();
  void StartWindow();
  // The oldest request cannot run: logged, recorded as failed, dropped; the next one goes on.
  void FailFrontRequest(const std::string& error);
  void CloseWindow();
  void RecordProgress(const PendingProgress& p);
  void FinishRequest(std::uint64_t id, const std::string& state, const std::string& error);
  // Progress{phase: "repair"} every second while requests are queued, and once more for a
  // request when its last chunk was sent (done).
  void RepairProgressTick();
  void SendRepairProgress(const std::vector<Request*>& requests, bool done);
  std::string KeyBytes(std::uint32_t relation_oid, const dblog::v1::Row& row) const;

  std::optional<std::uint32_t> control_oid_;
  dblog::v1::Relation control_relation_;
  std::map<std::uint32_t, dblog::v1::Relation> relations_;
  window::TransactionLog txlog_;
  std::deque<Request> requests_;
  std::set<std::uint64_t> known_requests_;
  std::set<std::string> abandoned_windows_;  // opened, then lost before they could close
  // foreign_watermark_ignored: one line per 10 s at most (one SQL statement can write
  // thousands of markers); every marker is counted in stats_->foreign_markers
  log::RateLimited foreign_marker_log_{std::chrono::seconds(10)};
  void IgnoreMarker(const dblog::v1::Message& m, const char* kind);
  std::chrono::steady_clock::time_point next_window_at_{};
  std::chrono::milliseconds redo_backoff_{100};
  std::optional<OpenWindow> window_;
  bool window_scheduled_ = false;
  std::uint64_t current_commit_lsn_ = 0;
  std::optional<PendingProgress> closing_progress_;
  bool repair_progress_running_ = false;
  std::deque<PendingProgress> pending_progress_;

};

// Consumers that no --consumer names but that have a slot (plugin dblog, named dblog_<name>,
// in the source database; junk left by an earlier run counts too). For
// --max-unconfigured-consumers. Opens a short SQL connection (blocking); throws pg::Error when
// the source cannot be reached.
std::set<std::string> UnconfiguredWithSlots(const config::Config& config);

// What Server needs to make this folder's pipelines (main.cc hands it over).
server::ConsumerFactory MakeConsumerFactory(const config::Config& config);

}  // namespace dblog::consumer
