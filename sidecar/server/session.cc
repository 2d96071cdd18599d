// sidecar/server/session.cc: one consumer connection (see session.h).
#include "server/session.h"

#include "log/log.h"
#include "server/handshake.h"
#include "server/tls.h"

namespace dblog::server {
namespace asio = boost::asio;
using dblog::v1::Error;

Session::Session(asio::ip::tcp::socket socket, std::chrono::milliseconds hello_timeout,
                 std::size_t low_water_bytes, HelloHandler on_hello, BadFrameHandler on_bad_frame,
                 std::shared_ptr<asio::ssl::context> tls, TlsFailureHandler on_tls_failure)
    : socket_(std::move(socket)),
      tls_ctx_(std::move(tls)),
      on_tls_failure_(std::move(on_tls_failure)),
      hello_timer_(socket_.get_executor()),
      hello_timeout_(hello_timeout),
      low_water_bytes_(low_water_bytes),
      on_hello_(std::move(on_hello)),
      on_bad_frame_(std::move(on_bad_frame)) {
  boost::system::error_code ec;
  const auto ep = socket_.remote_endpoint(ec);
  peer_ = ec ? "unknown" : ep.address().to_string() + ":" + std::to_string(ep.port());
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  if (tls_ctx_) tls_.emplace(socket_, *tls_ctx_);
}

void Session::Start() {
  hello_timer_.expires_after(hello_timeout_);
  hello_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec || self->hello_seen_ || self->closed_) return;
    if (self->tls_ && !self->tls_established_) {  // no channel for an Error frame yet
      self->TlsFailed(TlsFailure::kTimeout, "no TLS handshake within the handshake timeout");
      return;
    }
    self->ProtocolError(Error::PROTOCOL_VIOLATION, "no Hello within the handshake timeout");
  });
  if (tls_) {
    PeekFirstByte();
  } else {
    Read();
  }
}

// A TLS connection starts with a handshake record (content type 22); a dblog Hello frame starts
// with its length. Anything else is told, in plaintext, that TLS is required.
void Session::PeekFirstByte() {
  socket_.async_receive(
      asio::buffer(&first_byte_, 1), asio::socket_base::message_peek,
      [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
        if (self->closed_) return;
        if (ec || n == 0) {  // closed before a byte (a port probe): nothing to report
          self->Close();
          return;
        }
        if (self->first_byte_ != 0x16) {
          self->tls_.reset();  // the Error frame and the draining below go plaintext
          self->TlsFailed(TlsFailure::kPlaintext, "plaintext connection to a TLS listener");
          self->Fail(Error::PROTOCOL_VIOLATION,
                     "this dblogd requires TLS: connect with TLS (dblog tail --tls, "
                     "ConnectOptions::tls)");
          self->Read();
          return;
        }
        self->TlsHandshake();
      });
}

void Session::TlsHandshake() {
  tls_->async_handshake(asio::ssl::stream_base::server,
                        [self = shared_from_this()](boost::system::error_code ec) {
                          if (self->closed_) return;
                          if (ec) {
                            self->TlsFailed(TlsFailure::kHandshake, HandshakeError(ec));
                            return;
                          }
                          self->tls_established_ = true;
                          self->peer_cn_ = PeerCommonName(self->tls_->native_handle());
                          self->Read();
                        });
}

// Reports the failure; closes unless an Error frame is on its way (plaintext).
void Session::TlsFailed(TlsFailure kind, const std::string& reason) {
  if (on_tls_failure_) on_tls_failure_(*this, kind, reason);
  if (kind != TlsFailure::kPlaintext) Close();
}

void Session::Read() {
  auto on_read = [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
    if (ec) {
      self->Close();
      return;
    }
    self->OnBytes(n);
  };
  if (tls_) {
    tls_->async_read_some(asio::buffer(read_buffer_), std::move(on_read));
  } else {
    socket_.async_read_some(asio::buffer(read_buffer_), std::move(on_read));
  }
}

void Session::OnBytes(std::size_t n) {
  // Draining after an Error frame: discard until the client closes (but its acks, when the
  // Error was sent with keep_acks).
  bool draining = closing_ && !keep_acks_;
  if (draining) {
    Read();
    return;
  }
  decoder_.Feed(read_buffer_.data(), n);
  std::string_view payload;
  std::string error;
  for (;;) {
    if (closed_) return;
    draining = closing_ && !keep_acks_;
    if (draining) {
      Read();
      return;
    }
    switch (decoder_.Next(&payload, &error)) {
      case wire::FrameDecoder::Status::kNeedMore:
        Read();
        return;
      case wire::FrameDecoder::Status::kError:
        if (closing_) {  // no second Error frame: stop taking acks, drain
          keep_acks_ = false;
          break;
        }
        ProtocolError(Error::BAD_FRAME, error);
        return;
      case wire::FrameDecoder::Status::kFrame:
        HandleFrame(payload);
        break;
    }
  }
}

void Session::HandleFrame(std::string_view payload) {
  dblog::v1::ClientMessage message;
  const ClientFrame frame = ParseClientFrame(payload, hello_seen_, listener_ != nullptr, &message);
  if (closing_ && frame.kind != ClientFrame::Kind::kAck) {
    keep_acks_ = false;  // only acks are taken after the Error frame
    return;
  }
  switch (frame.kind) {
    case ClientFrame::Kind::kError:
      ProtocolError(frame.code, frame.error);
      return;
    case ClientFrame::Kind::kHello:
      hello_seen_ = true;
      hello_timer_.cancel();
      on_hello_(shared_from_this(), message.hello());
      return;
    case ClientFrame::Kind::kAck:
      listener_->OnAck(message.ack());
      return;
  }
}

void Session::ProtocolError(Error::Code code, const std::string& message) {
  if (code == Error::BAD_FRAME || code == Error::PROTOCOL_VIOLATION) on_bad_frame_();
  log::Warn("consumer_protocol_error",
            {{"peer", peer_}, {"code", Error::Code_Name(code)}, {"message", message}});
  Fail(code, message);
}

void Session::SendFrame(std::string frame) { SendFrame(std::move(frame), std::string()); }

void Session::SendFrame(std::string head, std::string body) {
  if (closed_ || closing_) return;
  Frame frame{std::move(head), std::move(body)};
  queued_bytes_ += frame.size();
  queue_.push_back(std::move(frame));
  if (!writing_) Write();
}

void Session::Send(const dblog::v1::ServerMessage& message) {
  std::string frame;
  wire::AppendFrame(frame, message);
  SendFrame(std::move(frame));
}

void Session::Fail(Error::Code code, const std::string& message, bool keep_acks) {
  if (closed_ || closing_) return;
  keep_acks_ = keep_acks;
  dblog::v1::ServerMessage m;
  m.mutable_error()->set_code(code);
  m.mutable_error()->set_message(message);
  Send(m);
  closing_ = true;
}

void Session::Write() {
  if (queue_.empty()) {
    writing_ = false;
    if (closing_) Linger();
    return;
  }
  writing_ = true;
  // Gather what is queued into one write, up to a bound.
  std::vector<asio::const_buffer> buffers;
  std::size_t bytes = 0, count = 0;
  for (const auto& f : queue_) {
    buffers.emplace_back(asio::buffer(f.head));
    if (!f.body.empty()) buffers.emplace_back(asio::buffer(f.body));
    bytes += f.size();
    ++count;
    if (buffers.size() >= 64 || bytes >= (1u << 20)) break;
  }
  auto on_written = [self = shared_from_this(), count](boost::system::error_code ec, std::size_t) {
    // Close() (from the read side) may have cleared the queue while this write was in flight:
    // nothing is left to pop then.
    if (ec || self->closed_) {
      self->Close();
      return;
    }
    for (std::size_t i = 0; i < count; ++i) {
      self->queued_bytes_ -= self->queue_.front().size();
      self->queue_.pop_front();
    }
    if (self->queued_bytes_ < self->low_water_bytes_ && self->listener_ != nullptr)
      self->listener_->OnDrained();
    self->Write();
  };
  // Either way the frames' pieces go out as they are, never joined (TLS makes a record of each
  // piece, or of each 16 KiB of a longer one).
  if (tls_) {
    asio::async_write(*tls_, buffers, std::move(on_written));
  } else {
    asio::async_write(socket_, buffers, std::move(on_written));
  }
}

// After an Error frame: close our sending side and read until the client closes (bounded), so
// that unread client bytes do not make the kernel reset the connection before the client has
// read the Error.
void Session::Linger() {
  boost::system::error_code ignored;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  hello_timer_.expires_after(std::chrono::seconds(2));
  hello_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->Close();
  });
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  hello_timer_.cancel();
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  queue_.clear();
  queued_bytes_ = 0;
  if (listener_ != nullptr) {
    SessionListener* l = listener_;
    listener_ = nullptr;
    l->OnClosed();
  }
}

}  // namespace dblog::server
