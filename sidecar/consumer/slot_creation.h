// sidecar/consumer/slot_creation.h: CREATE_REPLICATION_SLOT on a thread of its own.
// The command waits until every transaction that held an xid when it started has ended (the
// snapshot builder needs a point with none in flight), so it lasts as long as the source's
// longest open transaction: hours, in production; forever, when that transaction waits for
// this very consumer's stream (an applier into the same cluster). The consumer's own thread
// stays free meanwhile: it keeps its timers and its session, tells the client it waits
// (Progress{phase: "creating_slot"}) and says in dblogd's log which transactions it waits for.
// Owns: the thread and the replication connection while the command runs; handing both back
// (Outcome) on the pipeline's io_context; cancelling the command when the consumer goes away.
#pragma once

#include <boost/asio.hpp>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "pg/connection.h"
#include "pg/slot.h"

namespace dblog::consumer {

class SlotCreation {
 public:
  struct Outcome {
    pg::Connection repl;  // the replication connection, idle again (the snapshot, if exported,
                          // lives until its next command)
    std::optional<pg::CreatedSlot> slot;
    std::exception_ptr error;  // set when the creation failed
  };
  using Done = std::function<void(Outcome)>;

  // Starts the creation at once. `done` runs on `io` (never after the destructor began).
  SlotCreation(boost::asio::io_context& io, pg::Connection repl, std::string slot,
               std::string plugin, bool export_snapshot, Done done);
  // Cancels a creation still running (the server rolls it back: no slot is left) and waits
  // for the thread. A slot made whose outcome `done` never received (it was made just as the
  // consumer went away) is dropped: nothing used it, and left behind it would look like a
  // resume point to the next connection, which would miss what its creation was for (a
  // reconcile's announcement, a bootstrap).
  ~SlotCreation();
  SlotCreation(const SlotCreation&) = delete;
  SlotCreation& operator=(const SlotCreation&) = delete;

  int backend_pid() const { return backend_pid_; }  // the walsender running the command
  std::chrono::steady_clock::duration elapsed() const {
    return std::chrono::steady_clock::now() - started_;
  }

 private:
  int backend_pid_;
  std::chrono::steady_clock::time_point started_;
  std::unique_ptr<pg::Canceller> canceller_;
  struct Shared {
    std::mutex mutex;
    bool alive = true;               // the destructor has not begun
    std::optional<Outcome> outcome;  // made, not handed to `done` yet
  };
  std::shared_ptr<Shared> shared_;
  std::string slot_;
  std::thread thread_;
};

}  // namespace dblog::consumer
