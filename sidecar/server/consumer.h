// sidecar/server/consumer.h: what Server needs of a consumer's pipeline, without depending on
// consumer/ (consumer/ depends on server/ for its Session, never the reverse; main.cc wires the
// two by handing Server a ConsumerFactory).
// Owns: the interface only.
#pragma once

#include <boost/asio.hpp>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "config/config.h"
#include "dblog/v1/consumer.pb.h"
#include "metrics/metrics.h"
#include "server/session.h"

namespace dblog::server {

// An admitted consumer, as Server sees it. Both calls run on the consumer's connection thread.
class Consumer {
 public:
  virtual ~Consumer() = default;
  // Prepares the slot and scope, answers Welcome (or an Error) and starts streaming.
  virtual void Start() = 0;
  // Graceful stop: SIGTERM, or SIGHUP changed what this consumer may stream (`reason` goes to
  // the client with Error.SHUTTING_DOWN, which sinks retry).
  virtual void Shutdown(const std::string& reason) = 0;
};

struct ConsumerFactory {
  // The pipeline of an admitted consumer, on its connection's io_context; `on_finished(name)`
  // is called (on that thread) once it is over.
  std::function<std::shared_ptr<Consumer>(
      boost::asio::io_context& io, const config::ConsumerConfig& consumer,
      std::shared_ptr<metrics::ConsumerStats> stats, std::shared_ptr<Session> session,
      const dblog::v1::Hello& hello, std::function<void(const std::string&)> on_finished)>
      make;
  // Names of consumers that no --consumer names but that have a slot in the source (junk left
  // by an earlier run counts too), for --max-unconfigured-consumers, under the settings in force
  // (SIGHUP may have named more). Blocking SQL; throws when the source cannot be reached.
  std::function<std::set<std::string>(const config::Config&)> unconfigured_with_slots;
};

}  // namespace dblog::server
