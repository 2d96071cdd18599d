// sidecar/consumer/window_reader.h: the thread and the source connection a consumer's repair
// chunks are read on, so that the consumer's own thread goes on streaming the log (and emitting
// the window before) while the next chunk is read: the server encodes chunk k+1 while dblogd
// sends chunk k and the consumer parses it (docs/repairs.md, "Windows in a row").
// One job at a time. The connection is opened by the first job that asks for it (a consumer
// that never repairs never opens it), again after it broke, and left idle after every job (a
// transaction a failed job left open is rolled back).
// Owns: the thread, the connection, cancelling the statement running when it is dropped.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "pg/connection.h"

namespace dblog::consumer {

class WindowReader {
 public:
  WindowReader(std::string conninfo, std::string application_name);
  // Cancels the statement running, if any (again every 100 ms: a cancel that came between two
  // statements cancels nothing), and waits for the job to end.
  ~WindowReader();
  WindowReader(const WindowReader&) = delete;
  WindowReader& operator=(const WindowReader&) = delete;

  // Runs job(*this) on the thread. The caller hands over the next job only once the last one
  // said it ended (a job still waiting is replaced).
  void Run(std::function<void(WindowReader&)> job);
  // The source was reconnected (a restart, a failover): the next job opens a new connection
  // rather than meet the old one broken (or, through a multi-host string, on the old server).
  void Reconnect() { reconnect_ = true; }

  // ---- from a job only ----
  // The connection, opened (again) when there is none or it broke; throws when it cannot be.
  // One idle for more than a second is checked first (a round trip): the server may have
  // ended its session meanwhile (a restart, pg_terminate_backend, idle_session_timeout).
  pg::Connection& Sql();
  // No connection, or it broke (the source went away).
  bool Lost() const { return !sql_ || !sql_->ok(); }

 private:
  void Loop();
  // After a job: a broken connection dropped, an open transaction rolled back.
  void Settle();
  // The connection closed (its canceller first: it is not valid after the close).
  void Drop();

  const std::string conninfo_;
  const std::string application_name_;
  std::optional<pg::Connection> sql_;  // the thread's
  std::chrono::steady_clock::time_point idle_since_{};  // the thread's: when the last job ended
  std::mutex mutex_;
  std::condition_variable wake_;
  std::optional<std::function<void(WindowReader&)>> job_;  // under mutex_
  bool stop_ = false;                                       // under mutex_
  bool running_ = false;                                    // under mutex_: a job runs
  std::atomic<bool> reconnect_{false};
  std::unique_ptr<pg::Canceller> canceller_;                // under mutex_: sql_'s
  std::thread thread_;                                      // last: started once the rest is
};

}  // namespace dblog::consumer
