// sidecar/server/session.h: one consumer TCP connection, plaintext or TLS: the TLS handshake,
// frame reading, the handshake deadline (TLS and Hello together), the outgoing queue and
// closing with an Error frame.
// Everything runs on the connection's thread, but unauthenticated(), which the acceptor reads.
// Owns: the socket, its TLS stream and its bytes. Does not decide who may connect (Server) nor
// what is sent (the consumer pipeline, through the one emitter).
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "dblog/v1/consumer.pb.h"
#include "wire/frame.h"

namespace dblog::server {

// What a session reports once it is attached to a consumer.
class SessionListener {
 public:
  virtual ~SessionListener() = default;
  virtual void OnAck(const dblog::v1::Ack& ack) = 0;
  virtual void OnDrained() = 0;  // the outgoing queue fell below the low-water mark
  virtual void OnClosed() = 0;   // the connection is gone (either side); called once
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  using HelloHandler = std::function<void(std::shared_ptr<Session>, const dblog::v1::Hello&)>;
  using BadFrameHandler = std::function<void()>;
  enum class TlsFailure { kHandshake, kTimeout, kPlaintext };
  using TlsFailureHandler =
      std::function<void(const Session&, TlsFailure, const std::string& reason)>;

  // With `tls` (the listener's context) the connection must start with a TLS handshake,
  // finished within `hello_timeout` together with the Hello; a client that speaks plaintext
  // gets a plaintext Error frame saying TLS is required. Without it, plaintext.
  Session(boost::asio::ip::tcp::socket socket, std::chrono::milliseconds hello_timeout,
          std::size_t low_water_bytes, HelloHandler on_hello, BadFrameHandler on_bad_frame,
          std::shared_ptr<boost::asio::ssl::context> tls = nullptr,
          TlsFailureHandler on_tls_failure = nullptr);

  void Start();
  void Attach(SessionListener* listener) {
    listener_ = listener;
    attached_ = true;
  }
  void Detach() { listener_ = nullptr; }

  // Queues a complete frame (varint length + ServerMessage).
  void SendFrame(std::string frame);
  // Queues a frame given in two pieces, written back to back without being joined: `head`
  // (the length and the message's leading bytes) and `body` (the rest).
  void SendFrame(std::string head, std::string body);
  void Send(const dblog::v1::ServerMessage& message);
  // Sends an Error frame, then closes once it is written (and the client closed, or 2 s).
  // With `keep_acks`, Acks that arrive meanwhile (sent before the client read the Error) still
  // reach the listener; other bytes are discarded either way.
  void Fail(dblog::v1::Error::Code code, const std::string& message, bool keep_acks = false);
  void Close();

  std::size_t queued_bytes() const { return queued_bytes_; }
  bool closed() const { return closed_; }
  // Open and never handed to a consumer: waiting for its Hello, or refused and lingering.
  bool unauthenticated() const { return !closed_ && !attached_; }
  std::string peer() const { return peer_; }
  // The CN of the client certificate TLS verified; "" without one.
  const std::string& peer_common_name() const { return peer_cn_; }

 private:
  void PeekFirstByte();
  void TlsHandshake();
  void TlsFailed(TlsFailure kind, const std::string& reason);
  void Read();
  void OnBytes(std::size_t n);
  void HandleFrame(std::string_view payload);
  void Write();
  void Linger();
  void ProtocolError(dblog::v1::Error::Code code, const std::string& message);

  boost::asio::ip::tcp::socket socket_;
  // Wraps socket_ when the listener is TLS (tls_ctx_ set); reads and writes go through it then.
  std::shared_ptr<boost::asio::ssl::context> tls_ctx_;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket&>> tls_;
  TlsFailureHandler on_tls_failure_;
  bool tls_established_ = false;
  unsigned char first_byte_ = 0;
  std::string peer_cn_;
  boost::asio::steady_timer hello_timer_;
  std::chrono::milliseconds hello_timeout_;
  std::size_t low_water_bytes_;
  HelloHandler on_hello_;
  BadFrameHandler on_bad_frame_;
  SessionListener* listener_ = nullptr;
  wire::FrameDecoder decoder_{wire::kMaxClientFrame};
  std::array<char, 16384> read_buffer_;
  struct Frame {
    std::string head;
    std::string body;
    std::size_t size() const { return head.size() + body.size(); }
  };
  std::deque<Frame> queue_;
  std::size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool hello_seen_ = false;
  // read by the acceptor's thread (unauthenticated()), written on the connection's
  std::atomic<bool> attached_{false};  // a consumer's pipeline took it (Attach), ever
  bool closing_ = false;  // Fail(): close after the queue is written
  bool keep_acks_ = false;  // Fail(..., keep_acks): acks still count while closing
  std::atomic<bool> closed_{false};
  std::string peer_;
};

}  // namespace dblog::server
