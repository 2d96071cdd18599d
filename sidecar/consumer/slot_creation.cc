// sidecar/consumer/slot_creation.cc: CREATE_REPLICATION_SLOT off the consumer's thread (see
// slot_creation.h).
#include "consumer/slot_creation.h"

#include "log/log.h"

namespace dblog::consumer {

SlotCreation::SlotCreation(boost::asio::io_context& io, pg::Connection repl, std::string slot,
                           std::string plugin, bool export_snapshot, Done done)
    : backend_pid_(repl.backend_pid()),
      started_(std::chrono::steady_clock::now()),
      canceller_(std::make_unique<pg::Canceller>(repl)),
      shared_(std::make_shared<Shared>()),
      slot_(slot) {
  thread_ = std::thread([&io, shared = shared_, repl = std::move(repl), slot = std::move(slot),
                         plugin = std::move(plugin), export_snapshot, done = std::move(done),
                         work = boost::asio::make_work_guard(io)]() mutable {
    Outcome outcome;
    try {
      outcome.slot = pg::CreateSlot(repl, slot, plugin, export_snapshot);
    } catch (...) {
      outcome.error = std::current_exception();
    }
    outcome.repl = std::move(repl);
    {
      std::lock_guard<std::mutex> lock(shared->mutex);
      shared->outcome = std::move(outcome);
    }
    boost::asio::post(io, [shared, done = std::move(done)] {
      std::optional<Outcome> taken;
      {
        std::lock_guard<std::mutex> lock(shared->mutex);
        if (!shared->alive || !shared->outcome) return;
        taken = std::move(shared->outcome);
        shared->outcome.reset();
      }
      done(std::move(*taken));
    });
  });
}

SlotCreation::~SlotCreation() {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->alive = false;
  }
  if (thread_.joinable()) {
    canceller_->Cancel();  // harmless when the command has ended already
    thread_.join();
  }
  std::optional<Outcome> left;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    left = std::move(shared_->outcome);
    shared_->outcome.reset();
  }
  if (!left || !left->slot) return;
  try {
    left->repl.Exec("DROP_REPLICATION_SLOT " + left->repl.QuoteIdentifier(slot_));
    log::Info("slot_dropped_unused", {{"slot", slot_},
                                      {"message", "made as the consumer went away: dropped, the "
                                                  "next connection makes it again"}});
  } catch (const std::exception& e) {
    log::Warn("slot_drop_failed", {{"slot", slot_}, {"error", e.what()}});
  }
}

}  // namespace dblog::consumer
