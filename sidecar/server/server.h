// sidecar/server/server.h: the consumer listener. Accepts TCP connections (TLS with
// --tls-cert), checks each Hello (protocol version, consumer name, client certificate CN with
// --tls-client-ca, token, scope configured, one live connection per name) and
// hands accepted sessions to a consumer pipeline. At most --max-pending-handshakes connections
// may wait for (or have failed) their handshake, TLS included, at a time; more are closed at
// once.
// Owns: the acceptor and the registry of live pipelines. Does not stream (consumer/).
#pragma once

#include <boost/asio.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "consumer/pipeline.h"
#include "log/rate_limit.h"
#include "metrics/metrics.h"
#include "server/accept_retry.h"
#include "server/session.h"

namespace dblog::server {

class Server {
 public:
  // `tls`: the listener's context (server/tls.h) when --tls-cert is set, else null.
  Server(boost::asio::io_context& io, const config::Config& config, metrics::Registry& metrics,
         std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  void Start();
  // Stops accepting and shuts every pipeline down gracefully.
  void Shutdown();
  boost::asio::ip::tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }
  std::size_t live_consumers() const { return pipelines_.size(); }

 private:
  void Accept();
  // Connections accepted that are not (yet) a consumer's, after forgetting closed ones.
  std::size_t PendingHandshakes();
  void OnHello(std::shared_ptr<Session> session, const dblog::v1::Hello& hello);
  void Refuse(Session& session, dblog::v1::Error::Code code, const std::string& message);
  void OnTlsFailure(const Session& session, Session::TlsFailure kind, const std::string& reason);

  boost::asio::io_context& io_;
  const config::Config& config_;
  metrics::Registry& metrics_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::map<std::string, std::shared_ptr<consumer::Pipeline>> pipelines_;
  std::vector<std::weak_ptr<Session>> pending_;  // sessions without a consumer yet
  AcceptRetry accept_retry_;
  log::RateLimited over_limit_log_{std::chrono::seconds(10)};
  log::RateLimited tls_failure_log_{std::chrono::seconds(10)};
  bool shutting_down_ = false;
};

}  // namespace dblog::server
