// sidecar/pg/replication_stream.h: consuming a logical slot with the streaming replication
// protocol (CopyBoth), as pg_recvlogical does, on a Boost.Asio io_context.
//
// Owns: START_REPLICATION, parsing the CopyData messages the walsender sends (XLogData 'w',
// primary keepalive 'k'), standby status updates ('r': answered at once when the server asks,
// on a timer, and on demand), backpressure (Pause/Resume stop reading the socket) and a clean
// end of the stream (Stop). Does not own: what the payload means (the owner parses Batches),
// which position is safe to acknowledge (the owner says, through SetFlushedLsn), reconnecting.
//
// Threading: every member function and every Handler call runs on the io_context's thread; the
// stream starts no threads. libpq's socket is watched with a posix::stream_descriptor that is
// released, never closed, by the stream (libpq closes it in PQfinish).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "pg/connection.h"

namespace dblog::pg {

// ---- the CopyData messages of the replication protocol (pure functions, no I/O) ----------

// A message the walsender sent that is not what the protocol allows (unknown type, wrong
// length).
class ProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// 'w': one output plugin message. For logical decoding, wal_start and wal_end are both the
// LSN the plugin wrote the message at for the last message of a transaction (its end LSN),
// and 0 for the others.
struct XLogData {
  std::uint64_t wal_start = 0;
  std::uint64_t wal_end = 0;
  std::int64_t send_time = 0;  // microseconds since 2000-01-01 00:00 UTC
  std::string_view payload;    // a view into the parsed message
};

// 'k': the walsender's position and whether it wants a status update now.
struct Keepalive {
  std::uint64_t wal_end = 0;
  std::int64_t send_time = 0;
  bool reply_requested = false;
};

using CopyMessage = std::variant<XLogData, Keepalive>;

inline constexpr std::size_t kXLogDataHeaderSize = 1 + 8 + 8 + 8;
inline constexpr std::size_t kKeepaliveSize = 1 + 8 + 8 + 1;
inline constexpr std::size_t kStandbyStatusSize = 1 + 8 + 8 + 8 + 8 + 1;

// Parses one CopyData payload from the walsender; throws ProtocolError on an empty, truncated
// or over-long message and on unknown message types.
CopyMessage ParseCopyMessage(std::string_view message);

// The standby status update ('r') a client sends: write, flush and apply LSNs, the client's
// clock, and whether the server should answer with a keepalive at once.
std::string BuildStandbyStatusUpdate(std::uint64_t write_lsn, std::uint64_t flush_lsn,
                                     std::uint64_t apply_lsn, std::int64_t now_micros,
                                     bool reply_requested);

// Now, in the protocol's clock: microseconds since 2000-01-01 00:00 UTC.
std::int64_t ReplicationClockNow();

// ---- the stream ------------------------------------------------------------------------

class ReplicationStream {
 public:
  // Called on the io_context's thread. After OnEnd or OnError (exactly one of them, once) no
  // further calls come. A handler must not destroy the stream from inside a call; it may call
  // any other member (Pause, Stop, SetFlushedLsn, SendStatusNow, ...). An exception thrown by
  // OnData or OnKeepalive ends the stream with OnError carrying that exception.
  class Handler {
   public:
    virtual ~Handler() = default;
    // One XLogData message. `payload` is valid only during the call.
    virtual void OnData(std::uint64_t wal_start, std::uint64_t wal_end,
                        std::string_view payload) = 0;
    // One primary keepalive (after the stream has answered it, or scheduled the answer, if the
    // server asked).
    virtual void OnKeepalive(std::uint64_t wal_end) { (void)wal_end; }
    // The stream failed: connection lost, server error (a pg::Error with its SQLSTATE),
    // malformed message (ProtocolError), Stop timing out.
    virtual void OnError(const std::exception& error) = 0;
    // The stream ended cleanly: Stop() completed, or the server ended the copy.
    virtual void OnEnd() = 0;
  };

  struct Options {
    // Standby status updates are sent at least this often while streaming; zero disables the
    // timer (updates then go out only on request and in answer to keepalives).
    std::chrono::milliseconds status_interval{10'000};
    // How long Stop() waits for the server to end the copy before giving up (OnError).
    std::chrono::milliseconds stop_timeout{5'000};
    // Replies to keepalives go out at once, but never closer together than this: a walsender
    // waiting to shut down asks again as soon as it has its answer, which would otherwise be a
    // busy loop on both sides (measured: 160k round trips a second).
    std::chrono::milliseconds min_reply_gap{100};
  };

  // `conn` must be a replication connection (Connection::Open(..., true)); the stream owns it
  // and closes it when the stream ends. `handler` must outlive the stream.
  ReplicationStream(boost::asio::io_context& io, Connection conn, Handler& handler);
  ReplicationStream(boost::asio::io_context& io, Connection conn, Handler& handler,
                    Options options);
  ReplicationStream(const ReplicationStream&) = delete;
  ReplicationStream& operator=(const ReplicationStream&) = delete;
  // Without a prior Stop: a last status update and CopyDone are attempted without waiting, the
  // connection is closed, and no Handler call is made.
  ~ReplicationStream();

  // Sends START_REPLICATION SLOT "slot" LOGICAL <start_lsn> ("name" 'value', ...) with the
  // plugin options exactly as given (for dblog: {"format", "binary"}, ...), waits for the
  // server to enter CopyBoth mode and begins reading. start_lsn 0 starts at the slot's
  // confirmed_flush_lsn (the server never goes back before it anyway). Blocks for the command
  // round trip only; throws pg::Error (explained for output_plugin_libraries refusals) or
  // std::logic_error when called twice.
  void Start(const std::string& slot, std::uint64_t start_lsn,
             const std::vector<std::pair<std::string, std::string>>& plugin_options);

  // The consumer's acknowledged position: everything before it may be discarded by the
  // server. Only this value is reported as "flush" and "apply"; it never moves backwards
  // (smaller values are ignored). Sent with the next status update.
  void SetFlushedLsn(std::uint64_t lsn);
  // Sends a status update now (no reply requested).
  void SendStatusNow();

  // Stop reading the socket: no OnData until Resume. The walsender blocks once the socket
  // buffers fill, and keepalives are not answered meanwhile (the timer still sends updates).
  void Pause();
  void Resume();

  // Sends a final status update with the flushed LSN and CopyDone, waits (asynchronously, at
  // most Options::stop_timeout) for the server to end the copy, discarding any data still in
  // flight, then closes the connection and calls OnEnd. Safe to call again, and before Start
  // (then it just closes the connection, without Handler calls).
  void Stop();

  bool streaming() const { return state_ == State::kStreaming; }
  bool paused() const { return paused_; }
  bool closed() const { return state_ == State::kClosed; }

  // The highest WAL position the server has told us about (XLogData and keepalives).
  std::uint64_t received_lsn() const { return received_lsn_; }
  std::uint64_t last_keepalive_wal_end() const { return last_keepalive_wal_end_; }
  std::uint64_t flushed_lsn() const { return flushed_lsn_; }
  std::uint64_t bytes_received() const { return bytes_received_; }  // CopyData bytes
  std::uint64_t messages_received() const { return messages_received_; }
  std::uint64_t data_messages_received() const { return data_messages_; }
  std::uint64_t keepalives_received() const { return keepalives_; }
  std::uint64_t reply_requests_received() const { return reply_requests_; }
  std::uint64_t status_updates_sent() const { return status_updates_sent_; }

 private:
  enum class State {
    kIdle,       // constructed, not started
    kStreaming,  // CopyBoth, delivering data
    kStopping,   // we sent CopyDone; discarding data until the server ends the copy
    kEnding,     // the copy is over; collecting the command's final results
    kClosed,     // connection closed; the terminal Handler call is made or posted
  };

  void ArmReadWait();
  void OnReadable(const boost::system::error_code& ec);
  void ArmWriteWait();
  void OnWritable(const boost::system::error_code& ec);
  void ArmStatusTimer();
  void ArmStopTimer();
  bool ReplyToKeepalive();
  void ScheduleDrain();

  void Drain();
  void HandleMessage(std::string_view message);
  void CollectResults();

  // Queues a status update and flushes; false when the connection failed (already reported).
  bool SendStatus(bool reply_requested);
  bool PutCopyEnd();
  bool Flush();

  void Fail(std::exception_ptr error);
  void FailWithConnectionError(const std::string& what);
  void Finish(std::exception_ptr error);  // closes, then posts OnEnd (null) or OnError
  void CloseConnection();

  boost::asio::io_context& io_;
  Connection conn_;
  Handler& handler_;
  Options options_;

  std::optional<boost::asio::posix::stream_descriptor> socket_;
  boost::asio::steady_timer status_timer_;
  boost::asio::steady_timer stop_timer_;
  boost::asio::steady_timer reply_timer_;
  // Completion handlers hold a weak_ptr to this and do nothing once the stream is gone.
  std::shared_ptr<char> alive_ = std::make_shared<char>();

  State state_ = State::kIdle;
  std::string start_command_;
  bool paused_ = false;
  bool draining_ = false;
  bool drain_posted_ = false;
  bool read_wait_pending_ = false;
  bool write_wait_pending_ = false;
  bool status_retry_ = false;    // a status update could not be queued yet
  bool copy_end_retry_ = false;  // CopyDone could not be queued yet
  bool copy_done_queued_ = false;
  bool reply_pending_ = false;      // a keepalive reply waits for min_reply_gap
  bool copy_completed_ = false;     // the START_REPLICATION command completed (server side)
  std::optional<Error> end_error_;  // an error result seen while collecting final results
  std::chrono::steady_clock::time_point last_status_sent_{};

  std::uint64_t received_lsn_ = 0;
  std::uint64_t last_keepalive_wal_end_ = 0;
  std::uint64_t flushed_lsn_ = 0;
  std::uint64_t bytes_received_ = 0;
  std::uint64_t messages_received_ = 0;
  std::uint64_t data_messages_ = 0;
  std::uint64_t keepalives_ = 0;
  std::uint64_t reply_requests_ = 0;
  std::uint64_t status_updates_sent_ = 0;
};

}  // namespace dblog::pg
