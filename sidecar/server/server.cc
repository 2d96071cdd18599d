// sidecar/server/server.cc: accepting consumers (see server.h).
#include "server/server.h"

#include <algorithm>
#include <set>

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
               ConsumerFactory consumers, std::shared_ptr<asio::ssl::context> tls)
    : io_(io), config_(config), current_(std::make_shared<const config::Config>(config)),
      metrics_(metrics), consumers_(std::move(consumers)),
      acceptor_(io, Resolve(io, config.listen)),
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

Server::~Server() {
  // Each thread stops, whatever it was doing; then its pipeline (if any) is destroyed here, and
  // last the io_context with the handlers it did not run.
  for (auto& [id, t] : threads_) t->Stop();
  for (auto& [id, t] : threads_) t->Join();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pipelines_.clear();
  }
  threads_.clear();
}

std::size_t Server::live_consumers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pipelines_.size();
}

void Server::Shutdown() {
  shutting_down_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  accept_retry_.Cancel();
  std::vector<Live> live;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [name, l] : pipelines_)
      if (l.pipeline) live.push_back(l);
  }
  name_freed_.notify_all();  // Hellos waiting for a name: refused now
  for (auto& l : live)
    asio::post(*l.io, [p = l.pipeline] { p->Shutdown("dblogd is shutting down"); });
}

void Server::Reconfigure(const config::Reload& reload) {
  auto named = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::vector<std::pair<std::string, Live>> ending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    current_ = std::make_shared<const config::Config>(reload.next);
    ++generation_;
    for (auto& [name, l] : pipelines_) {
      // an unnamed consumer that is now configured streams under its own scope from now on
      const bool ends = l.configured ? named(reload.end_consumers, name)
                                     : reload.end_unconfigured || named(reload.added, name);
      if (l.pipeline && ends) ending.emplace_back(name, l);
    }
  }
  for (auto& [name, l] : ending) {
    log::Info("consumer_reconfigured", {{"consumer", name}});
    asio::post(*l.io, [p = l.pipeline] {
      p->Shutdown("the consumer's settings changed (dblogd reloaded them on SIGHUP): reconnect "
                  "to stream under the new ones");
    });
  }
}

void Server::Accept() {
  if (!next_) {
    try {  // an io_context needs file descriptors (epoll, eventfd, timerfd)
      next_ = std::make_unique<ConnectionThread>();
    } catch (const boost::system::system_error& e) {
      accept_retry_.Failed(e.code(), [this] { Accept(); });
      return;
    }
  }
  acceptor_.async_accept(next_->io(), [this](boost::system::error_code ec, tcp::socket socket) {
    OnAccepted(ec, std::move(socket));
  });
}

void Server::OnAccepted(boost::system::error_code ec, tcp::socket socket) {
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
    socket.close(ignored);  // at once: no Error frame, nothing read (next_ is used again)
    Accept();
    return;
  }
  const std::uint64_t id = ++next_id_;
  ConnectionThread* thread = next_.get();
  threads_[id] = std::move(next_);
  asio::io_context& conn_io = thread->io();
  // The connection's thread ends with its session: the session outlives its pipeline (which
  // holds it), so once it is gone nothing of the connection is left to run.
  std::shared_ptr<Session> session(
      new Session(
          std::move(socket), std::chrono::seconds(10), config_.max_buffer_bytes / 2,
          [this, &conn_io](std::shared_ptr<Session> s, const dblog::v1::Hello& hello) {
            OnHello(std::move(s), conn_io, hello);
          },
          [this] { metrics_.bad_frames++; }, tls_,
          [this](const Session& s, Session::TlsFailure kind, const std::string& reason) {
            OnTlsFailure(s, kind, reason);
          }),
      [thread](Session* s) {
        delete s;
        thread->Release();
      });
  pending_.push_back(session);
  // Started before its thread runs: nothing of the session runs concurrently with this.
  session->Start();
  session.reset();
  try {
    thread->Start([this, id] { asio::post(io_, [this, id] { Reap(id); }); },
                  [this, &conn_io](const std::string& error) { ConnectionFailed(conn_io, error); });
  } catch (const std::system_error& e) {  // no thread to be had: drop the connection
    log::Warn("consumer_connection_dropped", {{"reason", "cannot start its thread"},
                                              {"error", e.what()}});
    threads_.erase(id);  // destroys the session with the handlers it queued
  }
  Accept();
}

void Server::ConnectionFailed(asio::io_context& io, const std::string& error) {
  // Forget the connection's consumer (its name is free again); its pipeline is destroyed here,
  // on its own thread, which closes its source connections; what is left of the connection
  // goes with the io_context when the thread is reaped.
  std::vector<std::shared_ptr<Consumer>> gone;
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = pipelines_.begin(); it != pipelines_.end();) {
      if (it->second.io != &io) {
        ++it;
        continue;
      }
      if (it->second.pipeline) gone.push_back(it->second.pipeline);
      names.push_back(it->first);
      if (!it->second.configured) metrics_.Forget(it->first);
      it = pipelines_.erase(it);
    }
  }
  name_freed_.notify_all();
  std::string consumers;
  for (const auto& n : names) consumers += (consumers.empty() ? "" : ",") + n;
  log::Error("consumer_connection_failed",
             {{"consumer", consumers}, {"error", error},
              {"message", "an unexpected error ended this connection; other consumers go on. "
                          "Please report it with this line"}});
  gone.clear();
}

void Server::Reap(std::uint64_t id) {
  auto it = threads_.find(id);
  if (it == threads_.end()) return;
  it->second->Join();
  threads_.erase(it);
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

void Server::OnHello(std::shared_ptr<Session> session, asio::io_context& io,
                     const dblog::v1::Hello& hello) {
  Admission admission;
  if (!TakeName(*session, io, hello, admission)) return;
  if (!admission.configured && !AdmitUnconfigured(*session, hello, admission)) return;
  StartPipeline(std::move(session), io, hello, admission);
}

bool Server::TakeName(Session& session, asio::io_context& io, const dblog::v1::Hello& hello,
                      Admission& admission) {
  HelloContext context;
  context.shutting_down = shutting_down_;
  context.peer_common_name = session.peer_common_name();
  // The checks and taking the name are one step: two connections of one name cannot both
  // pass. A client that reconnects at once after losing its connection may be here before
  // the old connection's thread has seen it close: wait a little for the name to be free.
  std::unique_lock<std::mutex> lock(mutex_);
  name_freed_.wait_for(lock, kReconnectGrace, [&] {
    return shutting_down_ || pipelines_.count(hello.consumer()) == 0;
  });
  context.connected = [this](const std::string& name) { return pipelines_.count(name) != 0; };
  admission.config = current_;
  admission.generation = generation_;
  if (auto refusal = CheckHello(hello, *admission.config, context, &admission.consumer,
                                &admission.configured)) {
    Refuse(session, refusal->code, refusal->message);
    return false;
  }
  pipelines_[admission.consumer.name] = Live{nullptr, &io, admission.configured};
  return true;
}

void Server::ReleaseName(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  pipelines_.erase(name);
  name_freed_.notify_all();
}

bool Server::AdmitUnconfigured(Session& session, const dblog::v1::Hello& hello,
                               const Admission& admission) {
  const config::ConsumerConfig& consumer = admission.consumer;
  // Each new unnamed consumer costs a slot (max_replication_slots, WAL kept): a bounded number,
  // counting the slots that exist and the unnamed consumers being admitted or creating theirs.
  std::lock_guard<std::mutex> one_at_a_time(unconfigured_admission_);
  std::set<std::string> names;
  try {
    names = consumers_.unconfigured_with_slots(*admission.config);
  } catch (const std::exception& e) {
    ReleaseName(consumer.name);
    Refuse(session, Error::SOURCE_ERROR, e.what());
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, l] : pipelines_)
      if (!l.configured && name != consumer.name) names.insert(name);
  }
  const bool has_own = names.count(consumer.name) != 0;
  const long count = static_cast<long>(names.size()) - (has_own ? 1 : 0);
  if (!has_own && count >= admission.config->max_unconfigured_consumers) {
    ReleaseName(consumer.name);
    metrics_.unconfigured_refused++;
    Refuse(session, Error::TOO_MANY_CONSUMERS,
           "consumer '" + hello.consumer() + "' is not configured and " + std::to_string(count) +
               " slots of consumers not named by --consumer exist already "
               "(--max-unconfigured-consumers=" +
               std::to_string(admission.config->max_unconfigured_consumers) +
               "); configure it, or drop unused ones (docs/operations.md)");
    return false;
  }
  return true;
}

void Server::StartPipeline(std::shared_ptr<Session> session, asio::io_context& io,
                           const dblog::v1::Hello& hello, const Admission& admission) {
  const config::ConsumerConfig& consumer = admission.consumer;
  const bool configured = admission.configured;
  log::Info("consumer_connected", {{"consumer", hello.consumer()}, {"peer", session->peer()},
                                   {"client", hello.client_name()},
                                   {"split_values", hello.split_values() ? "true" : "false"}});
  std::shared_ptr<Consumer> pipeline = consumers_.make(
      io, consumer, metrics_.ForConsumer(consumer.name), session, hello,
      [this, configured](const std::string& name) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          pipelines_.erase(name);
          name_freed_.notify_all();
        }
        if (!configured) metrics_.Forget(name);  // unnamed consumers' series live while connected
      });
  bool reloaded = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pipelines_[consumer.name].pipeline = pipeline;
    reloaded = generation_ != admission.generation;
  }
  // Shutdown() sets the flag before it reads the registry: either it saw this pipeline, or the
  // flag is seen here. The same for a reload: admitted under settings that were replaced since.
  if (shutting_down_) return pipeline->Shutdown("dblogd is shutting down");
  if (reloaded)
    return pipeline->Shutdown("dblogd reloaded its settings (SIGHUP) while this consumer was "
                              "admitted: reconnect");
  pipeline->Start();
}

}  // namespace dblog::server
