// client/client.cc: the consumer protocol over one TCP connection (see client.h).
//
// Every blocking call starts one asynchronous operation on a private io_context and runs that
// context until the operation completes, a deadline passes, or an Interrupter stops it. On a
// timeout or an interrupt the operation is cancelled and its handler drained before the call
// returns, so no handler ever outlives the stack frame it writes to.
#include "client/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <vector>

#include "client/position.h"
#include "client/stream_reader.h"

namespace dblog::client {

namespace asio = boost::asio;
using asio::ip::tcp;
using dblog::v1::ClientMessage;
using dblog::v1::Position;
using dblog::v1::ServerMessage;
using dblog::v1::StreamEvent;

namespace {

// A failed read or write: an error of TLS itself (an alert from the server, such as a client
// certificate it requires or refuses, or a corrupt record) is a TlsError; the rest (reset,
// broken pipe, ...) a TransportError.
[[noreturn]] void ThrowTransport(const std::string& what, const boost::system::error_code& ec) {
  if (ec.category() == asio::error::get_ssl_category()) throw TlsError(what + ": " + ec.message());
  throw TransportError(what + ": " + ec.message());
}

std::string CodeName(dblog::v1::Error::Code code) {
  const std::string& name = dblog::v1::Error::Code_Name(code);
  return name.empty() ? "CODE_" + std::to_string(static_cast<int>(code)) : name;
}

// A TLS 1.2+ client context that verifies the server against options.tls_ca_file (else the
// system's trusted CAs) and presents options.tls_cert_file when given.
void ConfigureTlsClient(asio::ssl::context& ctx, const ConnectOptions& options) {
  namespace ssl = asio::ssl;
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                  ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                  ssl::context::no_compression);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  if (options.tls_ca_file.empty()) {
    ctx.set_default_verify_paths(ec);
    if (ec) throw TlsError("TLS: cannot load the system's trusted CAs: " + ec.message());
  } else {
    ctx.load_verify_file(options.tls_ca_file, ec);
    if (ec) {
      throw TlsError("TLS: cannot load CA file " + options.tls_ca_file + ": " + ec.message());
    }
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    throw TlsError("TLS: a client certificate needs its key, and a key its certificate");
  }
  if (!options.tls_cert_file.empty()) {
    ctx.use_certificate_chain_file(options.tls_cert_file, ec);
    if (ec) {
      throw TlsError("TLS: cannot load certificate " + options.tls_cert_file + ": " + ec.message());
    }
    ctx.use_private_key_file(options.tls_key_file, ssl::context::pem, ec);
    if (ec) {
      throw TlsError("TLS: cannot load key " + options.tls_key_file + ": " + ec.message());
    }
  }
  ctx.set_verify_mode(ssl::verify_peer);
}

// OpenSSL's own check of `name` against the certificate's subjectAltName (DNS name or IP
// address, as host_name_verification does), so that a mismatch has its own verify error.
void VerifyServerAs(SSL* ssl_handle, const std::string& name) {
  boost::system::error_code not_an_address;
  asio::ip::make_address(name, not_an_address);
  const int named =
      not_an_address
          ? SSL_set1_host(ssl_handle, name.c_str()) &
                static_cast<int>(SSL_set_tlsext_host_name(ssl_handle, name.c_str()))  // + SNI
          : X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_handle), name.c_str());
  if (named != 1) throw TlsError("TLS: cannot verify the server as '" + name + "'");
}

}  // namespace

ServerError::ServerError(dblog::v1::Error::Code code, std::string message)
    : ClientError("dblogd refused: " + CodeName(code) + ": " + message),
      code_(code),
      server_message_(std::move(message)) {}

void Interrupter::Interrupt() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (interrupted_) return;
  interrupted_ = true;
  if (waker_) waker_();
  woken_.notify_all();
}

bool Interrupter::WaitFor(std::chrono::milliseconds duration) {
  std::unique_lock<std::mutex> lock(mutex_);
  return woken_.wait_for(lock, duration, [this] { return interrupted_; });
}

bool Interrupter::interrupted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return interrupted_;
}

void Interrupter::SetWaker(std::function<void()> waker) {
  std::lock_guard<std::mutex> lock(mutex_);
  waker_ = std::move(waker);
}

class Client::Impl {
 public:
  Impl(const ConnectOptions& options, std::shared_ptr<Interrupter> interrupter)
      : options_(options),
        interrupter_(std::move(interrupter)),
        reader_(Peer()),
        read_buffer_(256 * 1024) {
    // io_context::stop is thread-safe; the waker is unregistered before io_ is destroyed.
    if (interrupter_) interrupter_->SetWaker([this] { io_.stop(); });
  }

  ~Impl() {
    if (interrupter_) interrupter_->SetWaker({});
  }

  void Handshake();
  bool NextRef(ItemRef& item) {
    return Read([&] { return reader_.NextItem(item); });
  }
  bool NextView(ItemView& item) {
    return Read([&] { return reader_.NextView(item); });
  }
  // The next item as `next` takes it from the reader, reading the socket while it needs more.
  template <typename Take>
  bool Read(Take next);
  bool HasBufferedItems();
  bool WaitForItems(std::chrono::milliseconds max);
  void Ack(const Position& position);
  const dblog::v1::Welcome& welcome() const { return reader_.welcome(); }
  std::uint64_t received_through() const { return reader_.received_through(); }
  std::uint64_t split_values_received() const { return reader_.split_values_received(); }

 private:
  using Clock = std::chrono::steady_clock;
  using Deadline = std::optional<Clock::time_point>;

  enum class State { kOpen, kClosed, kFailed };

  std::string Peer() const {
    return "dblogd at " + options_.host + ":" + std::to_string(options_.port);
  }
  Deadline IoDeadline() const {
    if (options_.io_timeout.count() <= 0) return std::nullopt;
    return Clock::now() + options_.io_timeout;
  }
  bool IsInterrupted() const { return interrupter_ && interrupter_->interrupted(); }

  void Run(const bool& done, Deadline deadline, bool interruptible, const std::string& what,
           const std::function<void()>& cancel);
  void Abort(const bool& done, const std::function<void()>& cancel);
  // The steps of Handshake(), in its order.
  tcp::resolver::results_type Resolve(Clock::time_point deadline);
  void ConnectSocket(const tcp::resolver::results_type& endpoints, Clock::time_point deadline);
  void StartTls(Clock::time_point deadline);
  void SendHello(Clock::time_point deadline);
  ServerMessage AwaitWelcome(Clock::time_point deadline);  // the answer to Hello
  // Throws the error of a failed TLS handshake: TransportError (retryable) when the server
  // closed the connection, TlsError otherwise; `name` is the one the certificate must have.
  [[noreturn]] void TlsHandshakeFailed(const boost::system::error_code& result,
                                       const std::string& name);
  void CancelSocket() {
    boost::system::error_code ignored;
    socket_.cancel(ignored);
  }

  void Write(const std::string& bytes, Deadline deadline, bool interruptible,
             const std::string& what);
  // The socket's read: started once (StartRead), finished by ReadSome, possibly after a
  // WaitForItems that timed out left it pending.
  struct PendingRead {
    bool pending = false;
    bool done = false;
    boost::system::error_code result;
    std::size_t received = 0;
  };
  void StartRead();
  std::size_t ReadSome(Deadline deadline, const std::string& what);
  bool ReadMessage(ServerMessage& message, Deadline deadline, const std::string& what);

  ConnectOptions options_;
  std::shared_ptr<Interrupter> interrupter_;
  asio::io_context io_;
  tcp::socket socket_{io_};
  // With options_.tls: the TLS session over socket_, through which every read and write goes.
  std::optional<asio::ssl::context> tls_ctx_;
  std::optional<asio::ssl::stream<tcp::socket&>> tls_;
  StreamReader reader_;  // frames, items and their checks
  std::vector<char> read_buffer_;
  PendingRead read_;
  std::optional<Position> last_ack_;
  State state_ = State::kOpen;
};

void Client::Impl::Run(const bool& done, Deadline deadline, bool interruptible,
                       const std::string& what, const std::function<void()>& cancel) {
  for (;;) {
    io_.restart();
    // Interrupt() sets the flag before it stops io_: seeing it unset here means any stop comes
    // after the restart above and will end the run below.
    if (interruptible && IsInterrupted()) {
      Abort(done, cancel);
      throw Interrupted();
    }
    // One handler at a time until ours ran: a read WaitForItems left pending is work too,
    // and must not keep a write waiting for it.
    if (deadline) {
      while (!done && io_.run_one_until(*deadline) > 0) {
      }
    } else {
      while (!done && io_.run_one() > 0) {
      }
    }
    if (done) return;
    if (interruptible && IsInterrupted()) {
      Abort(done, cancel);
      throw Interrupted();
    }
    if (deadline && Clock::now() >= *deadline) {
      Abort(done, cancel);
      throw TransportError(what + ": timed out");
    }
    // Stopped by an interrupt this operation does not yield to (a final Ack): carry on.
  }
}

void Client::Impl::Abort(const bool& done, const std::function<void()>& cancel) {
  cancel();
  while (!done) {  // the cancelled handler still refers to the caller's frame: let it run
    io_.restart();
    io_.run();
  }
}

void Client::Impl::Write(const std::string& bytes, Deadline deadline, bool interruptible,
                         const std::string& what) {
  bool done = false;
  boost::system::error_code result;
  auto on_written = [&](const boost::system::error_code& ec, std::size_t) {
    result = ec;
    done = true;
  };
  if (tls_) {
    asio::async_write(*tls_, asio::buffer(bytes), on_written);
  } else {
    asio::async_write(socket_, asio::buffer(bytes), on_written);
  }
  Run(done, deadline, interruptible, what, [this] { CancelSocket(); });
  if (result) ThrowTransport(what, result);
}

void Client::Impl::StartRead() {
  if (read_.pending) return;
  read_ = PendingRead{};
  read_.pending = true;
  auto on_read = [this](const boost::system::error_code& ec, std::size_t n) {
    read_.result = ec;
    read_.received = n;
    read_.done = true;
  };
  if (tls_) {
    tls_->async_read_some(asio::buffer(read_buffer_), on_read);
  } else {
    socket_.async_read_some(asio::buffer(read_buffer_), on_read);
  }
}

std::size_t Client::Impl::ReadSome(Deadline deadline, const std::string& what) {
  StartRead();  // or the one WaitForItems left pending
  Run(read_.done, deadline, /*interruptible=*/true, what, [this] { CancelSocket(); });
  read_.pending = false;
  const boost::system::error_code result = read_.result;
  // dblogd closes TLS connections without close_notify: a truncated TLS stream is an end like
  // any other, and a frame cut in half is still caught by the decoder.
  if (result == asio::error::eof || result == asio::ssl::error::stream_truncated) return 0;
  if (result) ThrowTransport(what, result);
  reader_.Feed(read_buffer_.data(), read_.received);
  return read_.received;
}

bool Client::Impl::WaitForItems(std::chrono::milliseconds max) {
  if (state_ != State::kOpen || reader_.HasBuffered()) return true;
  StartRead();
  // The read stays pending when nothing came: the next NextRef goes on with it (never
  // cancelled, so a TLS record half received is not lost).
  const Clock::time_point deadline = Clock::now() + max;
  io_.restart();
  while (!read_.done && !IsInterrupted() && io_.run_one_until(deadline) > 0) {
  }
  return read_.done || IsInterrupted();
}

// The next frame, parsed. False when the server closed the connection between frames.
bool Client::Impl::ReadMessage(ServerMessage& message, Deadline deadline, const std::string& what) {
  for (;;) {
    if (reader_.NextMessage(message)) return true;
    // A fresh deadline per read: io_timeout bounds silence, not the length of a batch.
    if (ReadSome(deadline ? deadline : IoDeadline(), what) == 0) {
      if (reader_.buffered() != 0) {
        throw ConnectionClosed(Peer() + " closed the connection in the middle of a frame (" +
                               std::to_string(reader_.buffered()) + " bytes of it received)");
      }
      return false;
    }
  }
}

void Client::Impl::Handshake() {
  const Clock::time_point deadline = Clock::now() + options_.connect_timeout;
  ConnectSocket(Resolve(deadline), deadline);
  if (options_.tls) StartTls(deadline);
  SendHello(deadline);
  reader_.AcceptWelcome(AwaitWelcome(deadline), options_.resume_after);
}

tcp::resolver::results_type Client::Impl::Resolve(Clock::time_point deadline) {
  tcp::resolver resolver(io_);
  tcp::resolver::results_type endpoints;
  bool done = false;
  boost::system::error_code result;
  resolver.async_resolve(
      options_.host, std::to_string(options_.port),
      [&](const boost::system::error_code& ec, tcp::resolver::results_type found) {
        result = ec;
        endpoints = std::move(found);
        done = true;
      });
  Run(done, deadline, true, "resolving " + options_.host, [&resolver] { resolver.cancel(); });
  if (result) {
    throw TransportError("cannot resolve " + options_.host + ": " + result.message());
  }
  return endpoints;
}

void Client::Impl::ConnectSocket(const tcp::resolver::results_type& endpoints,
                                 Clock::time_point deadline) {
  bool done = false;
  boost::system::error_code result;
  asio::async_connect(socket_, endpoints,
                      [&](const boost::system::error_code& ec, const tcp::endpoint&) {
                        result = ec;
                        done = true;
                      });
  Run(done, deadline, true, "connecting to " + Peer(), [this] {
    boost::system::error_code ignored;
    socket_.close(ignored);  // async_connect may be between endpoints: close stops it
  });
  if (result) throw TransportError("cannot connect to " + Peer() + ": " + result.message());
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);  // acks are tiny and should not wait
  socket_.set_option(asio::socket_base::keep_alive(true), ignored);
}

void Client::Impl::SendHello(Clock::time_point deadline) {
  ClientMessage hello_message;
  dblog::v1::Hello& hello = *hello_message.mutable_hello();
  hello.set_protocol_version(kProtocolVersion);
  hello.set_consumer(options_.consumer);
  hello.set_token(options_.token);
  if (options_.resume_after) *hello.mutable_resume_after() = *options_.resume_after;
  hello.set_client_name(options_.client_name);
  for (const auto& p : options_.message_prefixes) hello.add_message_prefixes(p);
  hello.set_split_values(options_.split_values);
  std::string frame;
  wire::AppendFrame(frame, hello_message);
  Write(frame, deadline, true, "sending Hello to " + Peer());
}

ServerMessage Client::Impl::AwaitWelcome(Clock::time_point deadline) {
  ServerMessage answer;
  Clock::time_point answer_deadline = deadline;
  for (;;) {
    if (!ReadMessage(answer, answer_deadline, "waiting for Welcome from " + Peer())) {
      throw ConnectionClosed(Peer() + " closed the connection without answering Hello" +
                             (options_.tls
                                  ? std::string(" (with TLS: did it refuse our certificate?)")
                                  : std::string()));
    }
    // While the consumer's slot is being created dblogd says so once a second: it is alive
    // and waiting for the source, so the wait for Welcome starts again (docs/protocol.md).
    if (answer.msg_case() != ServerMessage::kProgress ||
        answer.progress().phase() != "creating_slot")
      return answer;
    if (options_.on_slot_wait) options_.on_slot_wait(answer.progress());
    answer_deadline = Clock::now() + options_.connect_timeout;
  }
}

void Client::Impl::StartTls(Clock::time_point deadline) {
  tls_ctx_.emplace(asio::ssl::context::tls_client);
  ConfigureTlsClient(*tls_ctx_, options_);
  const std::string name =
      options_.tls_server_name.empty() ? options_.host : options_.tls_server_name;
  tls_.emplace(socket_, *tls_ctx_);
  VerifyServerAs(tls_->native_handle(), name);

  bool done = false;
  boost::system::error_code result;
  tls_->async_handshake(asio::ssl::stream_base::client, [&](const boost::system::error_code& e) {
    result = e;
    done = true;
  });
  Run(done, deadline, true, "TLS handshake with " + Peer(), [this] { CancelSocket(); });
  if (result) TlsHandshakeFailed(result, name);
}

void Client::Impl::TlsHandshakeFailed(const boost::system::error_code& result,
                                      const std::string& name) {
  std::string why = result.message();
  const long verify = SSL_get_verify_result(tls_->native_handle());
  // A connection closed or reset during the handshake may be a server that was killed (or
  // one that refused our certificate without an alert): retryable. The rest is not.
  bool cut = false;
  if (verify != X509_V_OK) {
    why = std::string("the server's certificate was not accepted: ") +
          X509_verify_cert_error_string(verify) + " (expected a certificate for '" + name +
          "' from " +
          (options_.tls_ca_file.empty() ? "a CA the system trusts" : options_.tls_ca_file) + ")";
  } else if (result == asio::error::eof || result == asio::ssl::error::stream_truncated ||
             result == asio::error::connection_reset) {
    why = "the server closed the connection (" + result.message() +
          "; is it dblogd with TLS, and does it want a client certificate this one does not "
          "satisfy?)";
    cut = true;
  }
  const std::string message = "TLS handshake with " + Peer() + " failed: " + why;
  if (cut) throw TransportError(message);
  throw TlsError(message);
}

template <typename Take>
bool Client::Impl::Read(Take next) {
  if (state_ == State::kClosed) return false;
  if (state_ == State::kFailed) {
    throw ProtocolError("the connection to " + Peer() + " failed earlier; reconnect");
  }
  try {
    for (;;) {
      if (next()) return true;
      // A fresh deadline per read: io_timeout bounds silence, not the length of a batch.
      if (ReadSome(IoDeadline(), "reading from " + Peer()) == 0) {
        if (reader_.buffered() != 0) {
          throw ConnectionClosed(Peer() + " closed the connection in the middle of a frame (" +
                                 std::to_string(reader_.buffered()) + " bytes of it received)");
        }
        state_ = State::kClosed;
        return false;
      }
    }
  } catch (...) {
    state_ = State::kFailed;
    throw;
  }
}

bool Client::Impl::HasBufferedItems() {
  if (state_ != State::kOpen) return false;
  return reader_.HasBufferedItems();
}

void Client::Impl::Ack(const Position& position) {
  if (last_ack_ && ComparePositions(position, *last_ack_) < 0) {
    throw std::invalid_argument("ack at " + FormatPosition(position) +
                                " would go back behind the last ack at " +
                                FormatPosition(*last_ack_));
  }
  ClientMessage message;
  *message.mutable_ack()->mutable_position() = position;
  std::string frame;
  wire::AppendFrame(frame, message);
  // Not interruptible (the final Ack after an interrupt must still go out), so always bounded.
  const Deadline deadline = options_.io_timeout.count() > 0
                                ? Clock::now() + options_.io_timeout
                                : Clock::now() + options_.connect_timeout;
  Write(frame, deadline, /*interruptible=*/false, "sending Ack to " + Peer());
  last_ack_ = position;
}

Client Client::Connect(const ConnectOptions& options, std::shared_ptr<Interrupter> interrupter) {
  auto impl = std::make_unique<Impl>(options, std::move(interrupter));
  impl->Handshake();
  return Client(std::move(impl));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() = default;

const dblog::v1::Welcome& Client::welcome() const { return impl_->welcome(); }
bool Client::NextRef(ItemRef& item) { return impl_->NextRef(item); }
bool Client::NextView(ItemView& item) { return impl_->NextView(item); }

bool Client::Next(Item& item) {
  ItemRef ref;
  if (!impl_->NextRef(ref)) return false;
  std::visit([&item](const auto* message) { item = *message; }, ref);
  return true;
}
bool Client::HasBufferedItems() const { return impl_->HasBufferedItems(); }
bool Client::WaitForItems(std::chrono::milliseconds max) { return impl_->WaitForItems(max); }
std::uint64_t Client::received_through() const { return impl_->received_through(); }
std::uint64_t Client::split_values_received() const { return impl_->split_values_received(); }
void Client::Ack(const Position& position) { impl_->Ack(position); }

std::optional<Position> Client::PositionOf(const StreamEvent& event) {
  return client::PositionOf(event);
}

std::string ReconcileNote(const dblog::v1::Welcome& welcome) {
  if (!welcome.has_reconcile()) return "";
  if (welcome.reconcile().request_ids_size() == 0)  // said again (protocol.md, Welcome)
    return "dblogd says again that it reconciled: the slot was gone (a failover of the source, "
           "or dropped by hand) and its new one starts at " +
           FormatLsn(welcome.reconcile().consistent_point()) + ", after " +
           FormatPosition(welcome.resume_from()) +
           "; changes in between arrive as their rows (docs/operations.md#failover)";
  return "the slot was gone (a failover of the source, or dropped by hand): dblogd made a new "
         "one at " + FormatLsn(welcome.reconcile().consistent_point()) + " and queued " +
         std::to_string(welcome.reconcile().request_ids_size()) +
         " whole-table repair(s) instead of a new bootstrap; changes since " +
         FormatPosition(welcome.resume_from()) +
         " arrive as their rows (docs/operations.md#failover)";
}

}  // namespace dblog::client
