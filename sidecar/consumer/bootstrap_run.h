// sidecar/consumer/bootstrap_run.h: one consumer's bootstrap (the point splice), from a slot
// just created with an exported snapshot: the scope planned inside that snapshot
// (bootstrap::PlanInSnapshot), the copy workers (bootstrap::Copier) started and waited for
// until each imported the snapshot, then BootstrapBegin, the copied rows at the consistent
// point as fast as the session drains, BootstrapEnd, and Progress{phase: "bootstrap"} once a
// second meanwhile. The bootstrap is recorded as done (dblog.consumers) only once the consumer
// acknowledges BootstrapEnd.
// Owns: the copier, the progress timer, the position of BootstrapEnd. Runs on the consumer's
// thread; talks to the pipeline only through Host.
#pragma once

#include <boost/asio.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bootstrap/copier.h"
#include "config/config.h"
#include "consumer/bookkeeping.h"
#include "dblog/v1/consumer.pb.h"
#include "emit/emitter.h"
#include "metrics/metrics.h"
#include "pg/slot.h"

namespace dblog::consumer {

class BootstrapRun {
 public:
  // What a bootstrap needs of the pipeline it runs in.
  class Host {
   public:
    virtual ~Host() = default;
    // The plan failed: the idle replication connection that created the slot must close
    // before the slot can be dropped.
    virtual void CloseIdleReplication() = 0;
    // The emitter the copied rows go through (made once every worker imported the snapshot).
    virtual emit::Emitter& emitter() = 0;
    // Hand what the emitter rendered to the session.
    virtual void Flush() = 0;
    virtual void Send(const dblog::v1::ServerMessage& message) = 0;
    // Bytes queued on the session: rows are drained only below --max-buffer-mb.
    virtual std::size_t queued_bytes() const = 0;
    // The copy failed: the consumer's session ends with this Error.
    virtual void Fail(dblog::v1::Error::Code code, const std::string& message) = 0;
    // BootstrapEnd went out: the stream may start at the consistent point.
    virtual void Copied() = 0;
  };

  BootstrapRun(boost::asio::io_context& io, const config::Config& config,
               const config::ConsumerConfig& consumer, std::string slot,
               metrics::ConsumerStats& stats, Bookkeeping& bookkeeping, Host& host);
  ~BootstrapRun();
  BootstrapRun(const BootstrapRun&) = delete;
  BootstrapRun& operator=(const BootstrapRun&) = delete;

  // Plans the scope inside `created`'s snapshot (on failure: the slot dropped, then the error
  // rethrown), records the bootstrap as started and starts the copy workers. Returns once
  // every worker imported the snapshot: the replication connection may be used again. Throws
  // when one could not.
  void Start(const pg::CreatedSlot& created, bool restarted);
  // BootstrapBegin (with the estimates) and the first Progress; after Start, once the host's
  // emitter exists.
  void Begin();
  // Emits the copied rows queued so far while the session has room; at the end of the copy,
  // BootstrapEnd and Host::Copied. Called again as the session drains.
  void Drain();
  // The consumer acknowledged `position`: at or after BootstrapEnd, the bootstrap is done.
  void OnAcknowledged(const emit::Position& position);
  // The pipeline ends: the copy cancelled, the progress timer stopped.
  void Stop();

 private:
  void Finish();
  void SendProgress();
  void MarkDone();
  // How tables are read: through the extension, or (pgoutput mode) without it.
  bootstrap::Reader Reader() const;

  boost::asio::io_context& io_;
  const config::Config& config_;
  const config::ConsumerConfig& consumer_;
  const std::string slot_;
  metrics::ConsumerStats& stats_;
  Bookkeeping& bookkeeping_;
  Host& host_;
  // Handlers posted or waiting hold a weak reference: they do nothing once this is destroyed.
  std::shared_ptr<char> alive_ = std::make_shared<char>();

  std::unique_ptr<bootstrap::Copier> copier_;
  std::uint64_t consistent_point_ = 0;
  bool restarted_ = false;
  bool stopped_ = false;
  std::vector<dblog::v1::TableProgress> estimates_;  // BootstrapBegin's
  std::optional<emit::Position> end_;  // BootstrapEnd's: done once the consumer acks it
  boost::asio::steady_timer progress_timer_;
};

}  // namespace dblog::consumer
