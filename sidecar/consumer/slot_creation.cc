// sidecar/consumer/slot_creation.cc: CREATE_REPLICATION_SLOT off the consumer's thread (see
// slot_creation.h).
#include "consumer/slot_creation.h"

namespace dblog::consumer {

SlotCreation::SlotCreation(boost::asio::io_context& io, pg::Connection repl, std::string slot,
                           std::string plugin, bool export_snapshot, Done done)
    : backend_pid_(repl.backend_pid()),
      started_(std::chrono::steady_clock::now()),
      canceller_(std::make_unique<pg::Canceller>(repl)),
      alive_(std::make_shared<bool>(true)) {
  thread_ = std::thread([&io, alive = alive_, repl = std::move(repl), slot = std::move(slot),
                         plugin = std::move(plugin), export_snapshot, done = std::move(done),
                         work = boost::asio::make_work_guard(io)]() mutable {
    auto outcome = std::make_shared<Outcome>();
    try {
      outcome->slot = pg::CreateSlot(repl, slot, plugin, export_snapshot);
    } catch (...) {
      outcome->error = std::current_exception();
    }
    outcome->repl = std::move(repl);
    boost::asio::post(io, [alive, outcome, done = std::move(done)] {
      if (*alive) done(std::move(*outcome));
    });
  });
}

SlotCreation::~SlotCreation() {
  *alive_ = false;
  if (thread_.joinable()) {
    canceller_->Cancel();  // harmless when the command has ended already
    thread_.join();
  }
}

}  // namespace dblog::consumer
