// sidecar/consumer/repairs.h: one consumer's repairs. Requests come from the log (the plugin
// decodes dblog.request_queue with control=on) and from the queue itself (at connect, after a
// bootstrap); they run as watermark windows: low watermark, the chunk read under its own
// snapshot, high watermark; at the high watermark the chunk is reconciled with what the log
// carried meanwhile (window/), and what survives is emitted through the one emitter inside the
// high watermark's transaction. Chunks are read on a thread and connection of their own
// (WindowReader), one window ahead: the next chunk is read while the log brings the last one's
// high watermark and its rows go out (windows in a row, each closing at its own marker). A
// chunk's progress is recorded once the consumer acknowledged it; Progress{phase: "repair"}
// reports the queue once a second. The transaction key log the windows widen with is pruned
// once a second to the transactions a later window's snapshot may miss (PruneKeyLog).
// Owns: the queue in memory, the windows in flight, the transaction key log the windows widen
// with, the relations the log described. Runs on the consumer's thread (but for the chunk's
// read, on the reader's); talks to the pipeline only through Host.
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "config/config.h"
#include "consumer/bookkeeping.h"
#include "consumer/chunk_query.h"
#include "consumer/repair_request.h"
#include "consumer/window_reader.h"
#include "consumer/window_rows.h"
#include "dblog/v1/consumer.pb.h"
#include "wire/change_view.h"
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
  // The same for a Change read in place (the extension's stream, wire/change_view.h).
  bool OnChange(const wire::ChangeView& change);
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
  // While held, no window opens and requests wait queued (pgoutput mode: dblog.watermarks is
  // being put back in the publication).
  void Hold(bool held) {
    held_ = held;
    if (!held) Schedule();
  }
  // The windows in flight cannot close (pgoutput mode: their markers may never come): abandoned,
  // their chunks read again under new windows, as after a reconnect.
  void AbandonWindows(const std::string& why);
  // pgoutput mode (no request reaches dblogd through the log): reads the queue for new and
  // cancelled requests every second while the stream runs.
  void PollQueue();

 private:
  // What reading a chunk found. The reader's thread fills it; the consumer's thread takes it
  // when the reader says it is done or at the window's high watermark, whichever comes first.
  struct ChunkRead {
    window::Window::Chunk chunk;
    std::int64_t chunk_size = 0;        // the rows (or keys) this chunk asked for
    std::string last_key;               // JSON array of the chunk's last key values, as text
    std::string last_key_bytes;         // the same key, encoded
    std::size_t keys_covered = 0;       // key-list chunks
    bool last = false;                  // the request's last chunk
    bool rewritten = false;             // new storage since the chunk's snapshot (a rewrite)
    // pgoutput mode: the definition changed between the bounds and the chunk
    bool relation_changed = false;
    dblog::v1::Relation relation;       // the table as the chunk's rows were encoded
    std::string lower_bytes, upper_bytes;  // encoded range bounds
    std::vector<std::string> key_collations;  // ChunkBegin.key_collations
    std::size_t total_keys = 0;
    std::uint64_t rows_read = 0;
    std::size_t bytes = 0;              // the chunk's keys and rows
    // pgoutput mode: each column's converter kind, and the chunk's statement's inputs
    std::vector<pgoutput::ValueKind> kinds;
    CatalogChunk catalog;
    // the request as the read found it: its table's name and key now (a rename followed)
    std::string table;
    std::vector<std::string> key_columns, key_types;
  };
  // From the reader's thread to the consumer's. The reader puts the chunk here before it writes
  // the high watermark, so when the log carries that marker the chunk is here.
  struct Handoff {
    std::mutex mutex;
    std::optional<ChunkRead> read;
    // The WAL insert position right after the high watermark committed: a transaction the
    // stream brings at or past it came after the marker (MarkersLost).
    std::optional<std::uint64_t> high_written_at;
  };
  // A window from its dispatch to the reader until its high watermark came out of the log (or
  // it was given up). The log's side is the consumer thread's alone.
  struct OpenWindow {
    OpenWindow(window::Window w, std::size_t carried_bytes)
        : window(std::move(w)), carried(carried_bytes) {}
    window::Window window;
    WindowRows carried;  // what the log carried for the table's keys while the window was open
    std::uint64_t request_id = 0;
    std::int64_t chunk_size = 0;
    bool truncated = false;             // a TRUNCATE of the table inside the window
    // the table's Relations the log carried while the window was open, serialized: one that
    // differs from the chunk's (DDL between the chunk's read and the high watermark) redoes it
    std::vector<std::string> described;
    std::chrono::steady_clock::time_point started{};  // for --repair-rows-per-second
    std::shared_ptr<Handoff> handoff = std::make_shared<Handoff>();
    std::optional<ChunkRead> read;      // taken from the handoff (TakeRead)
  };
  // How a read ended, for the consumer's thread.
  enum class ReadEnd { kRead, kRequestError, kRetryLater, kLost, kFailed };

  void Queue(RepairRequest request, bool resumed);
  void OnControlChange(const dblog::v1::Change& change);
  // A change's keys into the key log and the open window; `Access` reads the change (a parsed
  // message or a view: MessageChange, ViewChange in repairs.cc).
  struct MessageChange;
  struct ViewChange;
  template <typename Access>
  void RecordKeys(const Access& change);
  // Drops the key log's transactions that every snapshot a window will still close with sees:
  // those below the oldest transaction running now, bounded by the snapshot of every window in
  // flight. Only while no chunk is being read (its snapshot, not known yet, may be older than
  // the one asked for here); a window dispatched later takes its snapshot after the question,
  // so at or above the answer (this thread dispatches them). Once a second while the log holds
  // transactions: without it the log fills to --window-key-memory-mb on any busy stream.
  void PruneKeyLog();
  // Prunes below `horizon` bounded by every window in flight's snapshot (nothing when one was
  // not read yet). At the end of a read, with no other in flight, the bound alone is a horizon.
  void PruneKeyLogBelow(std::uint64_t horizon);
  // The key log's size and what it dropped, into the consumer's metrics.
  void ReportKeyLog();
  // Hands the next chunk to the reader: the front request's next one when no window is in
  // flight, or the one after the window in flight (windows in a row) once that one was read.
  void StartWindow();
  // ---- on the reader's thread: only `sql`, `r`, `c` and what is const here ----
  // The chunk after the low watermark: relation, bounds, collations and rows (throws); the
  // caller hands it over, then writes the high watermark.
  void ReadChunk(pg::Connection& sql, RepairRequest& r, ChunkRead& c, const std::string& id);
  // In the chunk's transaction, after BindTable: relation, bounds, collations.
  void ReadBounds(pg::Connection& sql, RepairRequest& r, ChunkRead& c);
  // In a transaction: the table locked by its oid, the transaction bound to it, its name and
  // key read again (throws RequestError when the key changed or has a domain).
  void BindTable(pg::Connection& sql, RepairRequest& r);
  ChunkRequest ChunkRequestOf(const RepairRequest& r, const ChunkRead& c) const;
  // The low watermark, then the chunk's bounds and rows in their own snapshot
  // (c.chunk.snapshot), in one transaction under the table's lock.
  pg::Result ReadAfterLowWatermark(pg::Connection& sql, RepairRequest& r, ChunkRead& c,
                                   const std::string& id,
                                   const std::vector<std::optional<std::string>>& params);
  // The rows read into the window: a key list's (asked keys, rows found, keys covered) or a
  // table's or range's (rows, the last key where the next chunk resumes).
  void TakeAskedKeys(const RepairRequest& r, ChunkRead& c, const pg::Result& rows);
  void TakeRangeRows(const RepairRequest& r, ChunkRead& c, const pg::Result& rows);
  // The window's markers: logical messages (the extension's mode), or this consumer's row of
  // dblog.watermarks (pgoutput mode).
  void WriteWatermark(pg::Connection& sql, bool low, const std::string& window_id) const;
  void SetKeyCollations(ChunkRead& c, const pg::Result& result, int column) const;
  // ---- pgoutput mode: ReadChunk without the extension ----
  void ReadChunkFromCatalog(pg::Connection& sql, RepairRequest& r, ChunkRead& c,
                            const std::string& id);
  void ReadBoundsFromCatalog(pg::Connection& sql, RepairRequest& r, ChunkRead& c);
  pg::Result ReadRowsFromCatalog(pg::Connection& sql, RepairRequest& r, ChunkRead& c,
                                 const std::string& id);
  // The table locked by its name (r.table), which must still be the request's oid.
  void LockByName(pg::Connection& sql, const RepairRequest& r);
  void TakeCatalogRows(const RepairRequest& r, ChunkRead& c, const pg::Result& rows);
  // ---- back on the consumer's thread ----
  // The reader is done with window `id` (`error` when it failed).
  void OnChunkRead(const std::string& id, ReadEnd end, const std::string& error);
  // Moves the window's chunk out of its handoff once the reader put it there; false before.
  bool TakeRead(OpenWindow& w);
  // The consumer's reader, made at its first use.
  WindowReader& Reader();
  // The window's markers, if they come out of the log, are ignored.
  void Abandon(const std::string& id);
  // Every window in flight abandoned (their markers ignored if they come).
  void DropWindows();
  // Whether the front window's markers cannot come any more: the stream brought a transaction
  // committed after its high watermark was written, and the window is still open or unopened
  // (pgoutput mode: dblog.watermarks was out of the publication when they were written, even
  // for less than a heartbeat).
  bool MarkersLost();
  // A write of the request's bookkeeping (RecordProgress, FinishRequest: false when the source
  // went away). One the source could not take is written again a second later, and every
  // later one waits behind it: a request's states reach the source in their order.
  void Record(std::function<bool()> write);
  void RecordAgain();
  // The source went away while a window was being opened: retried after --reconnect-max.
  void DeferWindow(const RepairRequest& r, const std::string& error);
  // The oldest request cannot run: logged, recorded as failed, dropped; the next one goes on.
  void FailFrontRequest(const std::string& error);
  void CloseWindow();
  void EmitChunk(RepairRequest& r, OpenWindow& w, const ChunkRead& c,
                 const window::Window::Outcome& out);
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
  // windows given up before they could close (their markers may still come), the latest
  // kAbandonedKept of them (abandoned_order_: oldest first)
  std::set<std::string> abandoned_windows_;
  std::deque<std::string> abandoned_order_;
  static constexpr std::size_t kAbandonedKept = 4096;
  // foreign_watermark_ignored: one line per 10 s at most (one SQL statement can write
  // thousands of markers); every marker is counted in stats_.foreign_markers
  log::RateLimited foreign_marker_log_{std::chrono::seconds(10)};
  std::chrono::steady_clock::time_point next_window_at_{};
  std::chrono::milliseconds redo_backoff_{100};
  // the rows (or keys) the front request's next chunk asks for (NextChunkRows)
  std::int64_t chunk_rows_ = 0;
  std::uint64_t chunk_rows_request_ = 0;
  // the windows in flight, in the order of their markers in the log: at most one whose high
  // watermark the log has not carried yet and, read ahead, the next one (not when paced)
  std::deque<OpenWindow> windows_;
  bool reading_ = false;  // a chunk is with the reader (until OnChunkRead)
  // a read ahead failed: the next chunk is read again once the window before it closed, as
  // the front one, where a failure has its consequences
  bool ahead_failed_ = false;
  // a request the log carried could not be read (the source went away): the queue is read
  // again at the next Schedule, once a second at most
  bool reload_ = false;
  std::chrono::steady_clock::time_point next_reload_at_{};
  bool window_scheduled_ = false;
  std::uint64_t current_commit_lsn_ = 0;
  std::optional<PendingProgress> closing_progress_;
  bool repair_progress_running_ = false;
  std::deque<PendingProgress> pending_progress_;
  std::deque<std::function<bool()>> unrecorded_;  // Record: not written yet, oldest first
  bool record_timer_running_ = false;
  boost::asio::steady_timer window_timer_;
  boost::asio::steady_timer repair_progress_timer_;
  boost::asio::steady_timer record_timer_;
  const bool catalog_;       // pgoutput mode: no extension
  std::string unavailable_;  // SetUnavailable
  bool held_ = false;        // Hold
  boost::asio::steady_timer poll_timer_;
  bool polling_ = false;
  boost::asio::steady_timer prune_timer_;  // PruneKeyLog
  bool prune_armed_ = false;
  log::RateLimited prune_failed_log_{std::chrono::seconds(60)};
  std::uint64_t reported_pruned_ = 0, reported_forgotten_ = 0;  // ReportKeyLog
  // last: destroyed first, while everything its job uses is still there
  std::unique_ptr<WindowReader> reader_;
};

}  // namespace dblog::consumer
