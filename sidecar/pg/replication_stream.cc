// sidecar/pg/replication_stream.cc: the CopyBoth consumer of a logical slot (see
// replication_stream.h). Protocol reference: PostgreSQL's protocol-replication docs and
// src/bin/pg_basebackup/pg_recvlogical.c.
#include "pg/replication_stream.h"

#include "common/quote.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstdio>
#include <stdexcept>
#include <system_error>

#include "pg/slot.h"

namespace dblog::pg {
namespace {

namespace asio = boost::asio;

// Microseconds from 1970-01-01 to 2000-01-01, PostgreSQL's epoch.
constexpr std::int64_t kPostgresEpochOffsetMicros = 946'684'800LL * 1'000'000;

std::uint64_t ReadUint64(std::string_view bytes, std::size_t at) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

void AppendUint64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::string DescribeType(char type) {
  const auto byte = static_cast<unsigned char>(type);
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02x", byte);
  if (byte >= 0x20 && byte < 0x7f) return std::string("'") + type + "' (" + hex + ")";
  return hex;
}


std::string QuoteString(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

}  // namespace

// ---- messages ----------------------------------------------------------------------------

CopyMessage ParseCopyMessage(std::string_view message) {
  if (message.empty()) throw ProtocolError("empty CopyData message on the replication stream");
  switch (message[0]) {
    case 'w': {
      if (message.size() < kXLogDataHeaderSize)
        throw ProtocolError("truncated XLogData message: " + std::to_string(message.size()) +
                            " bytes, its header alone is " + std::to_string(kXLogDataHeaderSize));
      XLogData data;
      data.wal_start = ReadUint64(message, 1);
      data.wal_end = ReadUint64(message, 9);
      data.send_time = static_cast<std::int64_t>(ReadUint64(message, 17));
      data.payload = message.substr(kXLogDataHeaderSize);
      return data;
    }
    case 'k': {
      if (message.size() != kKeepaliveSize)
        throw ProtocolError(
            "malformed primary keepalive message: " + std::to_string(message.size()) +
            " bytes instead of " + std::to_string(kKeepaliveSize));
      Keepalive keepalive;
      keepalive.wal_end = ReadUint64(message, 1);
      keepalive.send_time = static_cast<std::int64_t>(ReadUint64(message, 9));
      keepalive.reply_requested = message[17] != 0;
      return keepalive;
    }
    default:
      throw ProtocolError("unknown replication message type " + DescribeType(message[0]) + " (" +
                          std::to_string(message.size()) + " bytes)");
  }
}

std::string BuildStandbyStatusUpdate(std::uint64_t write_lsn, std::uint64_t flush_lsn,
                                     std::uint64_t apply_lsn, std::int64_t now_micros,
                                     bool reply_requested) {
  std::string out;
  out.reserve(kStandbyStatusSize);
  out.push_back('r');
  AppendUint64(out, write_lsn);
  AppendUint64(out, flush_lsn);
  AppendUint64(out, apply_lsn);
  AppendUint64(out, static_cast<std::uint64_t>(now_micros));
  out.push_back(reply_requested ? 1 : 0);
  return out;
}

std::int64_t ReplicationClockNow() {
  const auto since_unix = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return since_unix.count() - kPostgresEpochOffsetMicros;
}

// ---- the stream ------------------------------------------------------------------------

ReplicationStream::ReplicationStream(asio::io_context& io, Connection conn, Handler& handler)
    : ReplicationStream(io, std::move(conn), handler, Options{}) {}

ReplicationStream::ReplicationStream(asio::io_context& io, Connection conn, Handler& handler,
                                     Options options)
    : io_(io),
      conn_(std::move(conn)),
      handler_(handler),
      options_(options),
      status_timer_(io),
      stop_timer_(io),
      reply_timer_(io) {}

ReplicationStream::~ReplicationStream() {
  alive_.reset();  // pending completions and posted Handler calls become no-ops
  if (state_ == State::kStreaming && conn_.is_open()) {
    // Best effort, without waiting: the server learns the flushed position and sees CopyDone.
    const std::string update =
        BuildStandbyStatusUpdate(std::max(received_lsn_, flushed_lsn_), flushed_lsn_, flushed_lsn_,
                                 ReplicationClockNow(), false);
    if (!copy_end_retry_ &&
        PQputCopyData(conn_.raw(), update.data(), static_cast<int>(update.size())) == 1 &&
        PQputCopyEnd(conn_.raw(), nullptr) == 1)
      PQflush(conn_.raw());
  }
  CloseConnection();
}

void ReplicationStream::Start(
    const std::string& slot, std::uint64_t start_lsn,
    const std::vector<std::pair<std::string, std::string>>& plugin_options) {
  if (state_ != State::kIdle)
    throw std::logic_error("ReplicationStream::Start: the stream was already started or stopped");
  if (!conn_.is_open() || !conn_.is_replication())
    throw std::invalid_argument("ReplicationStream needs an open replication connection");
  ValidateSlotName(slot);
  conn_.CheckServerVersion();

  std::string command =
      "START_REPLICATION SLOT " + common::QuoteIdent(slot) + " LOGICAL " + common::FormatLsn(start_lsn);
  if (!plugin_options.empty()) {
    command += " (";
    for (std::size_t i = 0; i < plugin_options.size(); ++i) {
      if (i > 0) command += ", ";
      command += common::QuoteIdent(plugin_options[i].first) + " " + QuoteString(plugin_options[i].second);
    }
    command += ")";
  }

  Result result(PQexec(conn_.raw(), command.c_str()));
  if (result.status() != PGRES_COPY_BOTH) {
    if (result.status() == PGRES_FATAL_ERROR || result.status() == PGRES_NONFATAL_ERROR ||
        !result) {
      Error error = Error::FromResult(result.raw(), conn_.raw(), command);
      result = Result();
      throw ExplainPluginRefusal(conn_, error, "");
    }
    const std::string msg = std::string("the server answered START_REPLICATION with ") +
                            PQresStatus(result.status()) + " instead of PGRES_COPY_BOTH";
    throw Error(msg, "08P01", command, msg);
  }
  result = Result();
  // Sending must never block the io_context: status updates are queued and flushed as the
  // socket allows.
  if (PQsetnonblocking(conn_.raw(), 1) != 0)
    throw Error::FromConnection(conn_.raw(), "PQsetnonblocking");

  socket_.emplace(io_, conn_.socket());
  start_command_ = std::move(command);
  state_ = State::kStreaming;
  last_status_sent_ = std::chrono::steady_clock::now();
  ArmStatusTimer();
  // libpq may already hold messages that arrived together with the CopyBothResponse.
  ScheduleDrain();
}

void ReplicationStream::SetFlushedLsn(std::uint64_t lsn) {
  flushed_lsn_ = std::max(flushed_lsn_, lsn);
}

void ReplicationStream::SendStatusNow() {
  if (state_ == State::kStreaming) SendStatus(false);
}

void ReplicationStream::Pause() { paused_ = true; }

void ReplicationStream::Resume() {
  if (!paused_) return;
  paused_ = false;
  // Messages libpq already buffered produce no socket readiness: look at them first.
  if (state_ == State::kStreaming) ScheduleDrain();
}

void ReplicationStream::Stop() {
  switch (state_) {
    case State::kIdle:
      state_ = State::kClosed;
      CloseConnection();
      return;
    case State::kStopping:
    case State::kEnding:
    case State::kClosed:
      return;
    case State::kStreaming:
      break;
  }
  status_timer_.cancel();
  reply_timer_.cancel();
  if (!SendStatus(false)) return;
  state_ = State::kStopping;
  if (status_retry_) {
    copy_end_retry_ = true;  // CopyDone goes out after the update, once that could be queued
  } else if (!PutCopyEnd()) {
    return;
  }
  ArmStopTimer();
  ScheduleDrain();  // read until the server ends the copy, also when paused
}

// ---- waiting -----------------------------------------------------------------------------

void ReplicationStream::ArmReadWait() {
  if (read_wait_pending_ || !socket_) return;
  read_wait_pending_ = true;
  socket_->async_wait(
      asio::posix::stream_descriptor::wait_read,
      [this, alive = std::weak_ptr<char>(alive_)](const boost::system::error_code& ec) {
        if (alive.expired()) return;
        OnReadable(ec);
      });
}

void ReplicationStream::OnReadable(const boost::system::error_code& ec) {
  read_wait_pending_ = false;
  if (ec == asio::error::operation_aborted || state_ == State::kClosed || state_ == State::kIdle)
    return;
  if (ec) {
    Fail(std::make_exception_ptr(std::system_error(ec, "waiting for the replication socket")));
    return;
  }
  // Paused: leave the bytes in the socket so that TCP pushes back on the walsender.
  if (state_ == State::kStreaming && paused_) return;
  if (PQconsumeInput(conn_.raw()) == 0) {
    // A walsender that ends the stream itself (server shutdown) completes the command and
    // exits without waiting for anything more from us: that is an end, not a failure.
    if (state_ == State::kEnding && copy_completed_ && !end_error_) {
      Finish(nullptr);
      return;
    }
    FailWithConnectionError("reading from the replication connection");
    return;
  }
  if (state_ == State::kEnding)
    CollectResults();
  else
    Drain();
}

void ReplicationStream::ArmWriteWait() {
  if (write_wait_pending_ || !socket_) return;
  write_wait_pending_ = true;
  socket_->async_wait(
      asio::posix::stream_descriptor::wait_write,
      [this, alive = std::weak_ptr<char>(alive_)](const boost::system::error_code& ec) {
        if (alive.expired()) return;
        OnWritable(ec);
      });
}

void ReplicationStream::OnWritable(const boost::system::error_code& ec) {
  write_wait_pending_ = false;
  if (ec == asio::error::operation_aborted || state_ == State::kClosed || state_ == State::kIdle)
    return;
  if (ec) {
    Fail(std::make_exception_ptr(std::system_error(ec, "waiting for the replication socket")));
    return;
  }
  if (status_retry_ && !SendStatus(false)) return;
  if (status_retry_) return;  // still no room; SendStatus waits for writability again
  if (copy_end_retry_ && !PutCopyEnd()) return;
  if (!Flush()) return;
  ScheduleDrain();
}

void ReplicationStream::ArmStatusTimer() {
  if (options_.status_interval.count() <= 0 || state_ != State::kStreaming) return;
  // An update that is still waiting for room in the socket does not move last_status_sent_;
  // never spin on a deadline in the past.
  const auto now = std::chrono::steady_clock::now();
  auto next = last_status_sent_ + options_.status_interval;
  if (next <= now) next = now + options_.status_interval;
  status_timer_.expires_at(next);
  status_timer_.async_wait(
      [this, alive = std::weak_ptr<char>(alive_)](const boost::system::error_code& ec) {
        if (alive.expired() || ec == asio::error::operation_aborted || state_ != State::kStreaming)
          return;
        if (!status_retry_ &&
            std::chrono::steady_clock::now() >= last_status_sent_ + options_.status_interval &&
            !SendStatus(false))
          return;
        ArmStatusTimer();
      });
}

void ReplicationStream::ArmStopTimer() {
  stop_timer_.expires_after(options_.stop_timeout);
  stop_timer_.async_wait(
      [this, alive = std::weak_ptr<char>(alive_)](const boost::system::error_code& ec) {
        if (alive.expired() || ec == asio::error::operation_aborted ||
            (state_ != State::kStopping && state_ != State::kEnding))
          return;
        Fail(std::make_exception_ptr(
            std::runtime_error("the server did not end the replication stream within " +
                               std::to_string(options_.stop_timeout.count()) + " ms of Stop()")));
      });
}

bool ReplicationStream::ReplyToKeepalive() {
  const auto due = last_status_sent_ + options_.min_reply_gap;
  if (std::chrono::steady_clock::now() >= due) return SendStatus(false);
  if (reply_pending_) return true;
  reply_pending_ = true;
  reply_timer_.expires_at(due);
  reply_timer_.async_wait(
      [this, alive = std::weak_ptr<char>(alive_)](const boost::system::error_code& ec) {
        if (alive.expired()) return;
        reply_pending_ = false;
        if (ec == asio::error::operation_aborted || state_ != State::kStreaming) return;
        SendStatus(false);
      });
  return true;
}

void ReplicationStream::ScheduleDrain() {
  if (drain_posted_) return;
  drain_posted_ = true;
  asio::post(io_, [this, alive = std::weak_ptr<char>(alive_)] {
    if (alive.expired()) return;
    drain_posted_ = false;
    Drain();
  });
}

// ---- reading -----------------------------------------------------------------------------

void ReplicationStream::Drain() {
  if (state_ == State::kEnding) {
    CollectResults();
    return;
  }
  if (draining_ || (state_ != State::kStreaming && state_ != State::kStopping)) return;
  draining_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{draining_};

  while (state_ == State::kStreaming || state_ == State::kStopping) {
    if (state_ == State::kStreaming && paused_) return;
    char* data = nullptr;
    const int n = PQgetCopyData(conn_.raw(), &data, /*async=*/1);
    CopyBuffer buffer(data, n);
    if (n == 0) {  // no complete message buffered
      ArmReadWait();
      return;
    }
    if (n == -1) {  // the copy is over; its result (and maybe an error) follows
      state_ = State::kEnding;
      CollectResults();
      return;
    }
    if (n < 0) {
      FailWithConnectionError("reading the replication stream");
      return;
    }
    try {
      HandleMessage(buffer.view());
    } catch (...) {
      Fail(std::current_exception());
      return;
    }
  }
}

void ReplicationStream::HandleMessage(std::string_view message) {
  ++messages_received_;
  bytes_received_ += message.size();
  const CopyMessage parsed = ParseCopyMessage(message);
  if (const auto* data = std::get_if<XLogData>(&parsed)) {
    ++data_messages_;
    received_lsn_ = std::max({received_lsn_, data->wal_start, data->wal_end});
    // After Stop, data still in flight is dropped: it was never acknowledged, so the slot
    // sends it again next time.
    if (state_ == State::kStreaming) handler_.OnData(data->wal_start, data->wal_end, data->payload);
    return;
  }
  const auto& keepalive = std::get<Keepalive>(parsed);
  ++keepalives_;
  last_keepalive_wal_end_ = keepalive.wal_end;
  received_lsn_ = std::max(received_lsn_, keepalive.wal_end);
  if (keepalive.reply_requested) {
    ++reply_requests_;
    // At once: the walsender ends the connection when no reply comes within
    // wal_sender_timeout.
    if (state_ == State::kStreaming && !ReplyToKeepalive()) return;
  }
  if (state_ == State::kStreaming) handler_.OnKeepalive(keepalive.wal_end);
}

void ReplicationStream::CollectResults() {
  while (state_ == State::kEnding) {
    if (PQisBusy(conn_.raw())) {
      ArmReadWait();
      return;
    }
    Result result(PQgetResult(conn_.raw()));
    if (!result) {
      Finish(end_error_ ? std::make_exception_ptr(*end_error_) : nullptr);
      return;
    }
    switch (result.status()) {
      case PGRES_COMMAND_OK:
      case PGRES_TUPLES_OK:
        copy_completed_ = true;
        break;
      case PGRES_COPY_IN:
        // The server ended its half of the copy (CopyDone) first; end ours.
        if (!PutCopyEnd()) return;
        if (copy_end_retry_) return;  // resumes when writable
        break;
      case PGRES_COPY_OUT:
        // We sent CopyDone and the server still has data for us: keep discarding it.
        state_ = State::kStopping;
        ScheduleDrain();
        return;
      default:
        if (!end_error_) end_error_ = Error::FromResult(result.raw(), conn_.raw(), start_command_);
        break;
    }
  }
}

// ---- writing -----------------------------------------------------------------------------

bool ReplicationStream::SendStatus(bool reply_requested) {
  // After CopyDone no CopyData may follow.
  if (copy_done_queued_ || (state_ != State::kStreaming && state_ != State::kStopping)) return true;
  const std::uint64_t flush = flushed_lsn_;
  const std::string update = BuildStandbyStatusUpdate(std::max(received_lsn_, flush), flush, flush,
                                                      ReplicationClockNow(), reply_requested);
  const int put = PQputCopyData(conn_.raw(), update.data(), static_cast<int>(update.size()));
  if (put < 0) {
    FailWithConnectionError("sending a standby status update");
    return false;
  }
  if (put == 0) {  // libpq's buffer is full and the socket is not writable yet
    status_retry_ = true;
    ArmWriteWait();
    return true;
  }
  status_retry_ = false;
  ++status_updates_sent_;
  last_status_sent_ = std::chrono::steady_clock::now();
  return Flush();
}

bool ReplicationStream::PutCopyEnd() {
  const int put = PQputCopyEnd(conn_.raw(), nullptr);
  if (put < 0) {
    FailWithConnectionError("ending the replication stream (CopyDone)");
    return false;
  }
  if (put == 0) {
    copy_end_retry_ = true;
    ArmWriteWait();
    return true;
  }
  copy_end_retry_ = false;
  copy_done_queued_ = true;
  return Flush();
}

bool ReplicationStream::Flush() {
  const int r = PQflush(conn_.raw());
  if (r < 0) {
    FailWithConnectionError("sending on the replication connection");
    return false;
  }
  if (r > 0) {
    ArmWriteWait();
    // While it could not send, libpq reads whatever the server sent (to avoid a deadlock of
    // two full buffers); that input raises no readiness on the socket any more.
    ScheduleDrain();
  }
  return true;
}

// ---- ending ------------------------------------------------------------------------------

void ReplicationStream::FailWithConnectionError(const std::string& what) {
  // A server error that came with the end of the copy explains a lost connection better.
  if (end_error_) {
    Fail(std::make_exception_ptr(*end_error_));
    return;
  }
  Fail(std::make_exception_ptr(Error::FromConnection(conn_.raw(), what)));
}

void ReplicationStream::Fail(std::exception_ptr error) { Finish(std::move(error)); }

void ReplicationStream::Finish(std::exception_ptr error) {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  status_timer_.cancel();
  stop_timer_.cancel();
  reply_timer_.cancel();
  CloseConnection();
  // Posted, so that no Handler call is made from inside a member function the owner called.
  asio::post(io_, [this, alive = std::weak_ptr<char>(alive_), error] {
    if (alive.expired()) return;
    if (!error) {
      handler_.OnEnd();
      return;
    }
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      handler_.OnError(e);
    } catch (...) {
      handler_.OnError(
          std::runtime_error("replication stream failed with a non-standard exception"));
    }
  });
}

void ReplicationStream::CloseConnection() {
  if (socket_) {
    // libpq owns the descriptor: take it back from asio (this cancels pending waits) so that
    // only PQfinish closes it.
    socket_->release();
    socket_.reset();
  }
  conn_.Close();
}

}  // namespace dblog::pg
