// sidecar/consumer/bootstrap_run.cc: see bootstrap_run.h.
#include "consumer/bootstrap_run.h"

#include "bootstrap/scope.h"
#include "log/log.h"

namespace dblog::consumer {
namespace asio = boost::asio;
using dblog::v1::Error;

namespace {

constexpr std::int64_t kRowsPerTask = 250000;
constexpr std::size_t kCopyQueueBytes = 8u << 20;

}  // namespace

BootstrapRun::BootstrapRun(asio::io_context& io, const config::Config& config,
                           const config::ConsumerConfig& consumer, std::string slot,
                           metrics::ConsumerStats& stats, Bookkeeping& bookkeeping, Host& host)
    : io_(io),
      config_(config),
      consumer_(consumer),
      slot_(std::move(slot)),
      stats_(stats),
      bookkeeping_(bookkeeping),
      host_(host),
      progress_timer_(io) {}

bootstrap::Reader BootstrapRun::Reader() const {
  return config_.source_plugin == config::SourcePlugin::kPgoutput ? bootstrap::Reader::kCatalog
                                                                  : bootstrap::Reader::kExtension;
}

BootstrapRun::~BootstrapRun() {
  if (copier_) copier_->Cancel();
}

void BootstrapRun::Start(const pg::CreatedSlot& created, bool restarted) {
  consistent_point_ = created.consistent_point;
  restarted_ = restarted;
  bootstrap::Plan plan;
  try {
    plan = bootstrap::PlanInSnapshot(bookkeeping_.Sql(), created.snapshot_name, consumer_.scope,
                                     kRowsPerTask, Reader());
  } catch (...) {
    // Nothing was emitted: leave no slot behind that would look like a resume point.
    host_.CloseIdleReplication();
    bookkeeping_.Reset();
    bookkeeping_.BestEffort(log::Level::kWarn, "slot_drop_failed", {{"slot", slot_}},
                            [&] { pg::DropSlot(bookkeeping_.Sql(), slot_, true); });
    throw;
  }
  bookkeeping_.RecordBootstrapStarted(slot_, consistent_point_);

  std::uint64_t estimated_total = 0;
  for (const auto& t : plan.tables) {
    dblog::v1::TableProgress& p = estimates_.emplace_back();
    p.set_schema(t.schema);
    p.set_name(t.name);
    p.set_relation_oid(t.oid);
    p.set_rows_estimated(static_cast<std::uint64_t>(t.estimated_rows));
    estimated_total += static_cast<std::uint64_t>(t.estimated_rows);
  }
  log::Info("bootstrap_started",
            {{"consumer", consumer_.name}, {"slot", slot_},
             {"consistent_point", common::FormatLsn(consistent_point_)},
             {"tables", plan.tables.size()}, {"tasks", plan.tasks.size()},
             {"workers", config_.copy_workers}, {"rows_estimated", estimated_total},
             {"restarted", restarted ? "true" : "false"}});
  stats_.bootstraps_total++;
  stats_.bootstrap_running = 1;
  stats_.bootstrap_rows = 0;
  stats_.bootstrap_rows_estimated = estimated_total;

  std::weak_ptr<char> weak = alive_;
  copier_ = std::make_unique<bootstrap::Copier>(
      config_.source, created.snapshot_name, std::move(plan.tables), std::move(plan.tasks),
      config_.copy_workers, kCopyQueueBytes, [weak, this] {
        asio::post(io_, [weak, this] {
          if (weak.lock()) Drain();
        });
      },
      Reader());
  copier_->Start();
  if (!copier_->WaitImported())
    throw std::runtime_error("bootstrap: copy workers could not import the snapshot: " +
                             copier_->error().value_or("cancelled"));
}

void BootstrapRun::Begin() {
  host_.emitter().BeginBootstrap(consistent_point_, restarted_, estimates_);
  host_.Flush();
  SendProgress();
}

void BootstrapRun::Drain() {
  if (stopped_ || !copier_) return;
  if (auto error = copier_->error()) {
    host_.Fail(Error::SOURCE_ERROR, "bootstrap failed: " + *error);
    return;
  }
  while (host_.queued_bytes() < config_.max_buffer_bytes) {
    std::optional<bootstrap::Copier::Batch> batch = copier_->Pop();
    if (!batch) break;
    const auto& table = copier_->tables()[batch->table];
    host_.emitter().EmitCopiedRows(table.relation, batch->Rows());
    stats_.bootstrap_rows += batch->size();
    host_.Flush();
  }
  if (copier_->done() && !copier_->error()) Finish();
}

void BootstrapRun::Finish() {
  std::vector<dblog::v1::TableProgress> counts;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < copier_->tables().size(); ++i) {
    const auto& t = copier_->tables()[i];
    dblog::v1::TableProgress p;
    p.set_schema(t.schema);
    p.set_name(t.name);
    p.set_relation_oid(t.oid);
    p.set_rows_copied(copier_->rows_copied(i));
    p.set_rows_estimated(static_cast<std::uint64_t>(t.estimated_rows));
    p.set_done(true);
    total += copier_->rows_copied(i);
    counts.push_back(p);
  }
  const std::uint64_t bytes = copier_->bytes_copied();
  copier_.reset();
  progress_timer_.cancel();  // the BootstrapEnd event carries the final counts
  host_.emitter().EndBootstrap(counts);
  end_ = host_.emitter().last_position();
  host_.Flush();
  stats_.bootstrap_running = 0;
  log::Info("bootstrap_copied", {{"consumer", consumer_.name}, {"rows", total},
                                 {"bytes", bytes},
                                 {"consistent_point", common::FormatLsn(consistent_point_)}});
  host_.Copied();
}

void BootstrapRun::OnAcknowledged(const emit::Position& position) {
  if (end_ && !(position < *end_)) MarkDone();
}

void BootstrapRun::MarkDone() {
  const std::uint64_t rows = stats_.bootstrap_rows;
  // Not recorded: retried at the next ack; until then a crash redoes the bootstrap (safe).
  if (!bookkeeping_.MarkBootstrapDone(rows)) return;
  end_.reset();
  log::Info("bootstrap_done", {{"consumer", consumer_.name}, {"rows", rows}});
}

void BootstrapRun::SendProgress() {
  if (!copier_) return;
  dblog::v1::ServerMessage m;
  auto* p = m.mutable_progress();
  p->set_phase("bootstrap");
  std::uint64_t copied = 0, estimated = 0;
  for (std::size_t i = 0; i < copier_->tables().size(); ++i) {
    const auto& t = copier_->tables()[i];
    auto* tp = p->add_tables();
    tp->set_schema(t.schema);
    tp->set_name(t.name);
    tp->set_relation_oid(t.oid);
    tp->set_rows_copied(copier_->rows_copied(i));
    tp->set_rows_estimated(static_cast<std::uint64_t>(t.estimated_rows));
    copied += copier_->rows_copied(i);
    estimated += static_cast<std::uint64_t>(t.estimated_rows);
  }
  host_.Send(m);
  log::Info("bootstrap_progress", {{"consumer", consumer_.name}, {"rows_copied", copied},
                                   {"rows_estimated", estimated}});
  progress_timer_.expires_after(std::chrono::seconds(1));
  progress_timer_.async_wait([weak = std::weak_ptr<char>(alive_), this](
                                 boost::system::error_code ec) {
    if (!weak.lock() || ec) return;
    SendProgress();
  });
}

void BootstrapRun::Stop() {
  stopped_ = true;
  if (copier_) copier_->Cancel();
  progress_timer_.cancel();
}

}  // namespace dblog::consumer
