// client/client.h: the consumer side of dblogd's TCP protocol (proto/dblog/v1/consumer.proto),
// plaintext or TLS: connect and say Hello, read the stream item by item, acknowledge positions.
// Synchronous API over Boost.Asio: every call blocks the calling thread until done, bounded by
// the timeouts in ConnectOptions, and can be cut short from another thread with an Interrupter.
// Owns: one TCP connection (and its TLS session), its framing (wire::FrameDecoder) and
// protocol-level checks (message order, positions strictly increasing). Does not render, store or
// apply anything.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>
#include <variant>

#include "dblog/v1/consumer.pb.h"
#include "wire/change_view.h"

namespace dblog::client {

struct ConnectOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 7654;
  std::string consumer;
  std::string token;
  std::optional<dblog::v1::Position> resume_after;
  std::string client_name = "dblog-client/0.1";
  // Hello.message_prefixes: messages whose prefix starts with one of these are streamed; none
  // when empty.
  std::vector<std::string> message_prefixes;
  // Hello.split_values: dblogd may send a log Change's long values in pieces (change.proto,
  // SplitValue), so that neither it nor any frame holds the row whole. The client puts them
  // together: every Change it hands out has its values whole, whichever way they came. Off only
  // to see what a client without it gets (tests).
  bool split_values = true;
  // TLS (dblogd --tls-cert): the server's certificate must chain to tls_ca_file (or, when
  // empty, to the system's trust store) and name `tls_server_name` (default: host) as a DNS
  // name or IP address in its subjectAltName. Off: plaintext, which a TLS dblogd refuses.
  bool tls = false;
  std::string tls_ca_file;
  // A client certificate chain and its key (PEM), for a dblogd with --tls-client-ca: the
  // certificate's CN must be `consumer`.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_server_name;
  // Bounds the whole handshake: resolve, TCP connect, TLS, Hello, and the server's first answer.
  // While dblogd reports that the consumer's slot is being created (Progress{phase:
  // "creating_slot"}, once a second, only before Welcome), the wait for Welcome is unbounded:
  // each report allows connect_timeout more.
  std::chrono::milliseconds connect_timeout{10000};
  // Called with each of those reports (it names the transactions the creation waits for).
  std::function<void(const dblog::v1::Progress&)> on_slot_wait;
  // Bounds each blocking read or write after the handshake: Next throws TransportError when no
  // bytes arrived for this long. Zero waits forever. A server that sends heartbeats makes a
  // few heartbeat intervals a safe value.
  std::chrono::milliseconds io_timeout{0};
};

// Every failure the client reports is a ClientError.
class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The server sent an Error frame (refusing the Hello, or ending the stream).
// what() is "dblogd refused: <CODE_NAME>: <message>".
class ServerError : public ClientError {
 public:
  ServerError(dblog::v1::Error::Code code, std::string message);
  dblog::v1::Error::Code code() const { return code_; }
  const std::string& server_message() const { return server_message_; }

 private:
  dblog::v1::Error::Code code_;
  std::string server_message_;
};

// The server broke the protocol: a malformed, oversized or truncated frame, a message out of
// place, an unsupported protocol version, positions that do not increase.
class ProtocolError : public ClientError {
 public:
  using ClientError::ClientError;
};

// The server closed the connection in the middle of a frame, or without answering Hello. A
// ProtocolError by the letter (the stream is cut), but also exactly what a server that was
// killed looks like, so retry.h counts it as a lost connection, not a broken server.
class ConnectionClosed : public ProtocolError {
 public:
  using ProtocolError::ProtocolError;
};

// The network failed: resolve, connect, read or write errors, timeouts, a TLS handshake that
// failed (the server's certificate not trusted or not for this host, a client certificate
// refused) or TLS files that cannot be loaded.
class TransportError : public ClientError {
 public:
  using ClientError::ClientError;
};

// The TransportErrors of TLS that another attempt would meet again: TLS files that cannot be
// loaded, the server's certificate not accepted (not from the CA, not for this name, expired),
// a handshake the server or OpenSSL refused with an alert. A handshake cut by a closed
// connection is a plain TransportError (a server that was killed looks the same).
class TlsError : public TransportError {
 public:
  using TransportError::TransportError;
};

// A blocking call was cut short by Interrupter::Interrupt. The connection stays usable for
// writes (a final Ack), not for reads: the frame being read may have been cut in half.
class Interrupted : public ClientError {
 public:
  Interrupted() : ClientError("interrupted") {}
};

// Lets another thread (a signal watcher, say) stop a Client's blocking Connect or Next. Shared
// between that thread and at most one Client at a time.
class Interrupter {
 public:
  // Thread-safe and idempotent. The blocked call (or the next one) throws Interrupted.
  void Interrupt();
  bool interrupted() const;
  // Sleeps for `duration` unless interrupted first (or already). True when interrupted: the
  // wait between two connection attempts (retry.h) ends at once on SIGINT/SIGTERM.
  bool WaitFor(std::chrono::milliseconds duration);

 private:
  friend class Client;
  void SetWaker(std::function<void()> waker);  // empty function: unregister

  mutable std::mutex mutex_;
  std::condition_variable woken_;
  bool interrupted_ = false;
  std::function<void()> waker_;
};

// One item of the stream, as Next hands it out: a single event (EventBatch frames are unpacked
// event by event), a Heartbeat, or a Progress report.
using Item = std::variant<dblog::v1::StreamEvent, dblog::v1::Heartbeat, dblog::v1::Progress>;
// The same item without a copy: a pointer into the client's own buffer (frames are parsed into
// an arena, so a batch of events costs a few allocations, not a few per value).
using ItemRef = std::variant<const dblog::v1::StreamEvent*, const dblog::v1::Heartbeat*,
                             const dblog::v1::Progress*>;

// An event as NextView hands it out: exactly one of the two is set. `change`: a Change read in
// place (wire/change_view.h), its values views into the received frame; `event`: any other
// event, parsed, and a Change that is not in the canonical form dblogd forwards (a consumer of
// NextView handles event->change() too; with dblogd it does not happen).
struct EventView {
  const dblog::v1::StreamEvent* event = nullptr;
  const wire::ChangeView* change = nullptr;
};
using ItemView =
    std::variant<EventView, const dblog::v1::Heartbeat*, const dblog::v1::Progress*>;

class Client {
 public:
  static constexpr std::uint32_t kProtocolVersion = dblog::v1::PROTOCOL_VERSION_1;

  // TCP connect, send Hello, read the server's first frame: Welcome -> a connected Client;
  // Error -> ServerError; anything else -> ProtocolError. Network failures and
  // connect_timeout -> TransportError.
  static Client Connect(const ConnectOptions& options,
                        std::shared_ptr<Interrupter> interrupter = nullptr);

  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  const dblog::v1::Welcome& welcome() const;

  // Blocks for the next item. Returns false when the server closed the connection cleanly
  // (between frames, without an Error). Throws ServerError for an Error frame, ProtocolError
  // for a malformed frame or stream, TransportError, Interrupted. After a throw or a false
  // return the client reads no more (further calls repeat the outcome as ProtocolError/false).
  bool Next(Item& item);
  // Next without copying: *item points into the client and stays valid until the next call of
  // Next or NextRef on this client (copy what must live longer). The fast path for consumers
  // that look at each event once (counting, rendering, applying).
  bool NextRef(ItemRef& item);
  // NextRef without parsing Changes: each Change is read in place (EventView), no value is
  // copied or allocated; the same checks, the same lifetime (until the next Next, NextRef or
  // NextView). The fast path for consumers that read every value once (a bootstrap's rows, an
  // applier writing them out). The calls may be mixed.
  bool NextView(ItemView& item);

  // True when Next can return an item without reading the socket (the rest of an EventBatch,
  // or a complete frame already received). A writer can flush its output when this is false.
  bool HasBufferedItems() const;
  // Waits at most `max` for the server to send something. True when NextRef can go on without
  // waiting for the server (an item buffered, bytes arrived, the connection ended or failed,
  // or an interrupt: NextRef then reports it); false when nothing came. Nothing is lost or
  // cancelled by a false return: a consumer can do its idle work, then call NextRef.
  bool WaitForItems(std::chrono::milliseconds max);

  // Sends Ack{position}: everything at or before it is durably processed. Acks must not go
  // backwards: an older position than the last one acked throws std::invalid_argument and
  // sends nothing.
  void Ack(const dblog::v1::Position& position);

  // How far this consumer is caught up with the source: every transaction the source committed
  // (in the consumer's scope) before this LSN has been handed out by Next, on this connection
  // or, through Hello.resume_after, before it (docs/protocol.md, "Caught up"). It rises with
  // each event of a later transaction (its commit_lsn), each Commit (its end_lsn), BootstrapEnd
  // (the consistent point), a non-transactional Message (its LSN) and Heartbeat.source_lsn;
  // never during a bootstrap. 0 until then.
  std::uint64_t received_through() const;
  // received_through() >= lsn: the consumer has everything the source committed before `lsn`.
  // To wait for what the source has committed now: read lsn = pg_current_wal_lsn() on the
  // source, then call Next until CaughtUp(lsn) (on a quiet source, the next Heartbeat does it).
  bool CaughtUp(std::uint64_t lsn) const { return received_through() >= lsn; }
  // Values that came in pieces and were put together (ConnectOptions::split_values).
  std::uint64_t split_values_received() const;

  // The event's (commit_lsn, seq); nullopt for events without one (see position.h).
  static std::optional<dblog::v1::Position> PositionOf(const dblog::v1::StreamEvent& event);

 private:
  class Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// A sentence for people when Welcome.reconcile is set, "" otherwise: the consumer's slot was
// gone (a failover, or dropped by hand) and dblogd queued whole-table repairs instead of a new
// bootstrap; changes since the consumer's position arrive as the repairs' rows.
std::string ReconcileNote(const dblog::v1::Welcome& welcome);

}  // namespace dblog::client
