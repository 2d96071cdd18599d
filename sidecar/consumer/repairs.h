// sidecar/consumer/repairs.h: one consumer's repairs. Requests come from the log (the plugin
// decodes dblog.request_queue with control=on) and from the queue itself (at connect, after a
// bootstrap); they run one watermark window at a time: low watermark, the chunk read under its
// own snapshot, high watermark; at the high watermark the chunk is reconciled with what the
// log carried meanwhile (window/), and what survives is emitted through the one emitter inside
// the high watermark's transaction. A chunk's progress is recorded once the consumer
// acknowledged it; Progress{phase: "repair"} reports the queue once a second.
// Owns: the queue in memory, the open window, the transaction key log the windows widen with,
// the relations the log described. Runs on the consumer's thread; talks to the pipeline only
// through Host.
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "config/config.h"
#include "consumer/bookkeeping.h"
#include "consumer/chunk_query.h"
#include "consumer/repair_request.h"
#include "consumer/window_rows.h"
#include "dblog/v1/consumer.pb.h"
#include "emit/emitter.h"
#include "log/rate_limit.h"
#include "metrics/metrics.h"
#include "pgoutput/values.h"
#include "window/window.h"

namespace dblog::consumer {

class Repairs {
 public:
  // What a repair needs of the pipeline it runs in.
  class Host {
   public:
    virtual ~Host() = default;
    // The stream runs (not bootstrapping, reconnecting or done): windows may open.
    virtual bool Streaming() const = 0;
    // The current emitter (replaced when the source reconnects).
    virtual emit::Emitter& emitter() = 0;
    // Hand what the emitter rendered to the session (keeps frames small in a large chunk).
    virtual void Flush() = 0;
    virtual void Send(const dblog::v1::ServerMessage& message) = 0;
  };

  Repairs(boost::asio::io_context& io, const config::Config& config,
          const config::ConsumerConfig& consumer, metrics::ConsumerStats& stats,
          Bookkeeping& bookkeeping, Host& host);
  ~Repairs();
  Repairs(const Repairs&) = delete;
  Repairs& operator=(const Repairs&) = delete;

  // ---- the log, event by event (before the emitter sees it) --------------------------------
  void OnBegin(const dblog::v1::Begin& begin);
  // False for dblog.request_queue's Relation: bookkeeping, not forwarded.
  bool OnRelation(const dblog::v1::Relation& relation);
  // False for a change of dblog.request_queue (a request, taken here): not forwarded.
  bool OnChange(const dblog::v1::Change& change);
  void OnTruncate(const dblog::v1::Truncate& truncate);
  // A message whose prefix starts with kWatermarkPrefix: never forwarded. The open window's
  // own markers open and close it; the others are counted and (rate-limited) logged.
  void OnWatermark(const dblog::v1::Message& message);
  // After the emitter took the Commit: a chunk closed in this transaction waits for its ack.
  void OnCommitted();

  // ---- the pipeline's lifecycle ------------------------------------------------------------
  // Every transaction below `xmax` ended before the stream started: the key log cannot hold
  // them (a window whose snapshot may miss one fails closed instead of widening).
  void ForgetTransactionsBelow(std::uint64_t xmax);
  // Reads the queue for requests not known yet (at connect, and after a bootstrap whose slot
  // does not carry requests made before it).
  void LoadQueued();
  // Opens the next window soon when one can run (after each batch of the log).
  void Schedule();
  // The consumer acknowledged `position`: record the progress of chunks at or before it.
  void OnAcknowledged(const emit::Position& position);
  // The stream is replayed from the slot: an open window is abandoned (its chunk is read again
  // under a new one), the queue's Relation will come again.
  void OnSourceReconnect();
  // The pipeline ends: timers cancelled, held-back log lines written.
  void Stop();
  // pgoutput mode: repairs cannot run for this consumer (`why`: what to do); each request fails
  // with it. "" again when they can.
  void SetUnavailable(std::string why) { unavailable_ = std::move(why); }
  // pgoutput mode (no request reaches dblogd through the log): reads the queue for new and
  // cancelled requests every second while the stream runs.
  void PollQueue();

 private:
  struct OpenWindow {
    OpenWindow(window::Window w, std::size_t carried_bytes)
        : window(std::move(w)), carried(carried_bytes) {}
    window::Window window;
    WindowRows carried;  // what the log carried for the table's keys while the window was open
    window::Window::Chunk chunk;
    std::uint64_t request_id = 0;
    std::int64_t chunk_size = 0;        // the rows (or keys) this chunk asked for
    std::string last_key;               // JSON array of the chunk's last key values, as text
    std::string last_key_bytes;         // the same key, encoded
    std::size_t keys_covered = 0;       // key-list chunks
    bool last = false;                  // the request's last chunk
    bool truncated = false;             // a TRUNCATE of the table inside the window
    bool rewritten = false;             // new storage since the chunk's snapshot (a rewrite)
    // The log described the table differently from the chunk while the window was open (DDL
    // between the chunk's read and the high watermark), or (pgoutput mode) the definition
    // changed between the bounds and the chunk: its rows do not fit what the stream says.
    bool relation_changed = false;
    dblog::v1::Relation relation;       // the table as the chunk's rows were encoded
    std::string lower_bytes, upper_bytes;  // encoded range bounds
    std::vector<std::string> key_collations;  // ChunkBegin.key_collations
    std::size_t total_keys = 0;
    std::chrono::steady_clock::time_point started{};  // for --repair-rows-per-second
    std::uint64_t rows_read = 0;
    // pgoutput mode: each column's converter kind, and the chunk's statement's inputs
    std::vector<pgoutput::ValueKind> kinds;
    CatalogChunk catalog;
  };

  void Queue(RepairRequest request, bool resumed);
  void OnControlChange(const dblog::v1::Change& change);
  void RecordKeys(const dblog::v1::Change& change);
  void StartWindow();
  // The window's markers and, between them, its chunk: relation, bounds, collations and rows
  // (throws).
  void ReadChunk(RepairRequest& r, OpenWindow& w);
  // In the chunk's transaction, after BindTable: relation, bounds, collations.
  void ReadBounds(pg::Connection& sql, RepairRequest& r, OpenWindow& w);
  // In a transaction: the table locked by its oid, the transaction bound to it, its name and
  // key read again (throws RequestError when the key changed or has a domain).
  void BindTable(pg::Connection& sql, RepairRequest& r);
  ChunkRequest ChunkRequestOf(const RepairRequest& r, const OpenWindow& w) const;
  // The chunk's bounds and rows in their own snapshot (w.chunk.snapshot), in one transaction
  // under the table's lock, between the window's two markers.
  pg::Result ReadBetweenWatermarks(RepairRequest& r, OpenWindow& w,
                                   const std::vector<std::optional<std::string>>& params);
  // The rows read into the window: a key list's (asked keys, rows found, keys covered) or a
  // table's or range's (rows, the last key where the next chunk resumes).
  void TakeAskedKeys(const RepairRequest& r, OpenWindow& w, const pg::Result& rows);
  void TakeRangeRows(const RepairRequest& r, OpenWindow& w, const pg::Result& rows);
  // The window's markers: logical messages (the extension's mode), or this consumer's row of
  // dblog.watermarks (pgoutput mode, repairs_pgoutput.cc).
  void WriteWatermark(pg::Connection& sql, bool low, const std::string& window_id);
  void SetKeyCollations(OpenWindow& w, const pg::Result& result, int column);
  // ---- pgoutput mode (repairs_pgoutput.cc): ReadChunk without the extension ----
  void ReadChunkFromCatalog(RepairRequest& r, OpenWindow& w);
  void ReadBoundsFromCatalog(RepairRequest& r, OpenWindow& w);
  pg::Result ReadRowsFromCatalog(RepairRequest& r, OpenWindow& w);
  // The table locked by its name (r.table), which must still be the request's oid.
  void LockByName(pg::Connection& sql, const RepairRequest& r);
  void TakeCatalogRows(const RepairRequest& r, OpenWindow& w, const pg::Result& rows);
  // The source went away while a window was being opened: retried after --reconnect-max.
  void DeferWindow(const RepairRequest& r, const std::string& error);
  // The oldest request cannot run: logged, recorded as failed, dropped; the next one goes on.
  void FailFrontRequest(const std::string& error);
  void CloseWindow();
  void EmitChunk(RepairRequest& r, OpenWindow& w, const window::Window::Outcome& out);
  void RepairProgressTick();
  // The queue as the status page and /status.json show it (ConsumerStats::SetRepairs).
  void Publish();
  void SendRepairProgress(const std::vector<RepairRequest*>& requests, bool done);
  void IgnoreMarker(const dblog::v1::Message& m, const char* kind);
  // Runs `step` from the io loop unless this object is gone.
  template <typename F>
  void Later(boost::asio::steady_timer& timer, std::chrono::steady_clock::time_point at, F step);

  boost::asio::io_context& io_;
  const config::Config& config_;
  const config::ConsumerConfig& consumer_;
  metrics::ConsumerStats& stats_;
  Bookkeeping& bookkeeping_;
  Host& host_;
  // Handlers posted or waiting hold a weak reference: they do nothing once this is destroyed.
  std::shared_ptr<char> alive_ = std::make_shared<char>();

  std::optional<std::uint32_t> control_oid_;
  dblog::v1::Relation control_relation_;
  std::map<std::uint32_t, dblog::v1::Relation> relations_;
  window::TransactionLog txlog_;
  std::deque<RepairRequest> requests_;
  std::set<std::uint64_t> known_requests_;
  std::set<std::string> abandoned_windows_;  // opened, then lost before they could close
  // foreign_watermark_ignored: one line per 10 s at most (one SQL statement can write
  // thousands of markers); every marker is counted in stats_.foreign_markers
  log::RateLimited foreign_marker_log_{std::chrono::seconds(10)};
  std::chrono::steady_clock::time_point next_window_at_{};
  std::chrono::milliseconds redo_backoff_{100};
  // the rows (or keys) the front request's next chunk asks for (NextChunkRows)
  std::int64_t chunk_rows_ = 0;
  std::uint64_t chunk_rows_request_ = 0;
  std::optional<OpenWindow> window_;
  // a request the log carried could not be read (the source went away): the queue is read
  // again at the next Schedule, once a second at most
  bool reload_ = false;
  std::chrono::steady_clock::time_point next_reload_at_{};
  bool window_scheduled_ = false;
  std::uint64_t current_commit_lsn_ = 0;
  std::optional<PendingProgress> closing_progress_;
  bool repair_progress_running_ = false;
  std::deque<PendingProgress> pending_progress_;
  boost::asio::steady_timer window_timer_;
  boost::asio::steady_timer repair_progress_timer_;
  const bool catalog_;       // pgoutput mode: no extension
  std::string unavailable_;  // SetUnavailable
  boost::asio::steady_timer poll_timer_;
  bool polling_ = false;
};

}  // namespace dblog::consumer
