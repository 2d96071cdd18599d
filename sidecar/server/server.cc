// sidecar/server/server.cc: accepting consumers (see server.h).
#include "server/server.h"

#include <algorithm>

#include "log/log.h"
#include "server/handshake.h"

namespace dblog::server {
namespace asio = boost::asio;
using asio::ip::tcp;
using dblog::v1::Error;

namespace {

tcp::endpoint Resolve(asio::io_context& io, const config::Endpoint& e) {
  tcp::resolver resolver(io);
  return *resolver.resolve(e.host, std::to_string(e.port)).begin();
}

}  // namespace

Server::Server(asio::io_context& io, const config::Config& config, metrics::Registry& metrics,
               std::shared_ptr<asio::ssl::context> tls)
    : io_(io), config_(config), metrics_(metrics), acceptor_(io, Resolve(io, config.listen)),
      tls_(std::move(tls)),
      accept_retry_(io, "consumers", metrics.accept_errors_consumers) {}

void Server::Start() {
  const bool token_required =  // by every consumer (main.cc warns about those without)
      config::OpenConsumers(config_).empty() && (!config_.default_scope || !config_.token.empty());
  log::Info("listening", {{"address", acceptor_.local_endpoint().address().to_string()},
                          {"port", acceptor_.local_endpoint().port()},
                          {"token_required", token_required ? "true" : "false"},
                          {"tls", !tls_                           ? "off"
                                  : config_.tls_client_ca.empty() ? "on"
                                                                  : "client_certificates"}});
  Accept();
}

void Server::Shutdown() {
  shutting_down_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  accept_retry_.Cancel();
  auto pipelines = pipelines_;
  for (auto& [name, p] : pipelines) p->Shutdown();
}

void Server::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || shutting_down_ || !acceptor_.is_open())
      return;  // closed
    if (ec) {  // out of file descriptors, or the like: the listener must not stop for good
      accept_retry_.Failed(ec, [this] { Accept(); });
      return;
    }
    accept_retry_.Succeeded();
    metrics_.connections_total++;
    if (PendingHandshakes() >= config_.max_pending_handshakes) {
      metrics_.handshakes_over_limit++;
      over_limit_log_.Warn("consumer_connection_over_limit",
                           {{"limit", config_.max_pending_handshakes}});
      boost::system::error_code ignored;
      socket.close(ignored);  // at once: no Error frame, nothing read
      Accept();
      return;
    }
    auto session = std::make_shared<Session>(
        std::move(socket), std::chrono::seconds(10), config_.max_buffer_bytes / 2,
        [this](std::shared_ptr<Session> s, const dblog::v1::Hello& hello) {
          OnHello(std::move(s), hello);
        },
        [this] { metrics_.bad_frames++; }, tls_,
        [this](const Session& s, Session::TlsFailure kind, const std::string& reason) {
          OnTlsFailure(s, kind, reason);
        });
    pending_.push_back(session);
    session->Start();
    Accept();
  });
}

std::size_t Server::PendingHandshakes() {
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [](const std::weak_ptr<Session>& w) {
                                  auto s = w.lock();
                                  return !s || !s->unauthenticated();
                                }),
                 pending_.end());
  return pending_.size();
}

void Server::Refuse(Session& session, Error::Code code, const std::string& message) {
  metrics_.connections_refused++;
  log::Warn("consumer_refused", {{"peer", session.peer()}, {"code", Error::Code_Name(code)},
                                 {"message", message}});
  session.Fail(code, message);
}

void Server::OnTlsFailure(const Session& session, Session::TlsFailure kind,
                          const std::string& reason) {
  const char* what = "handshake";
  switch (kind) {
    case Session::TlsFailure::kHandshake:
      metrics_.tls_failed_handshake++;
      break;
    case Session::TlsFailure::kTimeout:
      metrics_.tls_failed_timeout++;
      what = "timeout";
      break;
    case Session::TlsFailure::kPlaintext:
      metrics_.tls_failed_plaintext++;
      what = "plaintext";
      break;
  }
  tls_failure_log_.Warn("consumer_tls_failed",
                        {{"peer", session.peer()}, {"reason", what}, {"error", reason}});
}

void Server::OnHello(std::shared_ptr<Session> session, const dblog::v1::Hello& hello) {
  config::ConsumerConfig consumer;
  bool configured = false;
  HelloContext context;
  context.shutting_down = shutting_down_;
  context.peer_common_name = session->peer_common_name();
  context.connected = [this](const std::string& name) { return pipelines_.count(name) != 0; };
  if (auto refusal = CheckHello(hello, config_, context, &consumer, &configured))
    return Refuse(*session, refusal->code, refusal->message);
  if (!configured) {
    // Each new unnamed consumer costs a slot (max_replication_slots, WAL kept): a bounded number.
    consumer::UnconfiguredSlots slots;
    try {
      slots = consumer::CountUnconfiguredSlots(config_, hello.consumer());
    } catch (const std::exception& e) {
      return Refuse(*session, Error::SOURCE_ERROR, e.what());
    }
    if (!slots.has_own && slots.count >= config_.max_unconfigured_consumers) {
      metrics_.unconfigured_refused++;
      return Refuse(*session, Error::TOO_MANY_CONSUMERS,
                    "consumer '" + hello.consumer() + "' is not configured and " +
                        std::to_string(slots.count) +
                        " slots of consumers not named by --consumer exist already "
                        "(--max-unconfigured-consumers=" +
                        std::to_string(config_.max_unconfigured_consumers) +
                        "); configure it, or drop unused ones (docs/operations.md)");
    }
  }

  log::Info("consumer_connected", {{"consumer", hello.consumer()}, {"peer", session->peer()},
                                   {"client", hello.client_name()}});
  auto pipeline = std::make_shared<consumer::Pipeline>(
      io_, config_, consumer, metrics_.ForConsumer(consumer.name), session, hello,
      [this, configured](const std::string& name) {
        pipelines_.erase(name);
        if (!configured) metrics_.Forget(name);  // unnamed consumers' series live while connected
      });
  pipelines_[consumer.name] = pipeline;
  pipeline->Start();
}

}  // namespace dblog::server
