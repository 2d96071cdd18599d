// sidecar/server/server.h: the consumer listener. Accepts TCP connections (TLS with
// --tls-cert), checks each Hello (protocol version, consumer name, client certificate CN with
// --tls-client-ca, token, scope configured, one live connection per name) and
// hands accepted sessions to a consumer pipeline. At most --max-pending-handshakes connections
// may wait for (or have failed) their handshake, TLS included, at a time; more are closed at
// once. Each connection lives on its own thread (connection_thread.h) from accept on: the
// acceptor runs on the main io_context, a session and its pipeline on the connection's.
// Owns: the acceptor, the connection threads and the registry of live pipelines (shared by
// those threads: under mutex_). Does not stream (consumer/).
#pragma once

#include <boost/asio.hpp>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "config/config.h"
#include "log/rate_limit.h"
#include "metrics/metrics.h"
#include "net/accept_retry.h"
#include "server/connection_thread.h"
#include "server/consumer.h"
#include "server/session.h"

namespace dblog::server {

class Server {
 public:
  // `tls`: the listener's context (server/tls.h) when --tls-cert is set, else null.
  // `consumers` makes the pipelines of admitted consumers (consumer/, wired by main.cc).
  // `config` must outlive the server: the settings a reload cannot change are read from it.
  Server(boost::asio::io_context& io, const config::Config& config, metrics::Registry& metrics,
         ConsumerFactory consumers, std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  // Stops every connection thread (what they have not run is dropped) and joins them.
  ~Server();
  void Start();
  // Stops accepting and shuts every pipeline down gracefully (on its own thread).
  void Shutdown();
  // SIGHUP: Hellos are checked against `reload.next` from now on; the connections it names
  // (and any admitted while it was applied) end with Error.SHUTTING_DOWN, so that their clients
  // reconnect under the new settings.
  void Reconfigure(const config::Reload& reload);
  boost::asio::ip::tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }
  std::size_t live_consumers() const;

 private:
  void Accept();
  void OnAccepted(boost::system::error_code ec, boost::asio::ip::tcp::socket socket);
  // Connections accepted that are not (yet) a consumer's, after forgetting closed ones.
  std::size_t PendingHandshakes();
  // On the connection's thread.
  void OnHello(std::shared_ptr<Session> session, boost::asio::io_context& io,
               const dblog::v1::Hello& hello);
  void Refuse(Session& session, dblog::v1::Error::Code code, const std::string& message);
  void OnTlsFailure(const Session& session, Session::TlsFailure kind, const std::string& reason);
  // An exception escaped a handler of the connection running on `io` (on its thread).
  void ConnectionFailed(boost::asio::io_context& io, const std::string& error);
  // The connection thread `id` ended: join it (on the main thread).
  void Reap(std::uint64_t id);

  boost::asio::io_context& io_;  // the acceptor's; each connection has its own
  const config::Config& config_;  // as started: listen, TLS, limits (a reload keeps them)
  // The settings Hellos are checked against, replaced by Reconfigure (under mutex_), and how
  // many times it was.
  std::shared_ptr<const config::Config> current_;
  std::uint64_t generation_ = 0;
  metrics::Registry& metrics_;
  ConsumerFactory consumers_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  net::AcceptRetry accept_retry_;
  log::RateLimited over_limit_log_{std::chrono::seconds(10)};
  log::RateLimited tls_failure_log_{std::chrono::seconds(10)};
  std::atomic<bool> shutting_down_{false};
  // main thread only
  std::vector<std::weak_ptr<Session>> pending_;  // sessions without a consumer yet
  std::unique_ptr<ConnectionThread> next_;       // the next accepted socket's thread
  std::map<std::uint64_t, std::unique_ptr<ConnectionThread>> threads_;
  std::uint64_t next_id_ = 0;
  // shared by the connection threads
  struct Live {
    std::shared_ptr<Consumer> pipeline;  // null while admission runs (name taken)
    boost::asio::io_context* io = nullptr;
    bool configured = true;
  };
  // How long a Hello waits for an earlier connection of its name to end (it may have been lost
  // a moment ago) before it is refused with ALREADY_CONNECTED.
  static constexpr std::chrono::seconds kReconnectGrace{2};
  mutable std::mutex mutex_;
  std::condition_variable name_freed_;  // a name left pipelines_
  std::map<std::string, Live> pipelines_;
  std::mutex unconfigured_admission_;  // one --max-unconfigured-consumers decision at a time
};

}  // namespace dblog::server
