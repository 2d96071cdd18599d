// sidecar/server/connection_thread.h: the thread one consumer connection lives on. Its socket
// is accepted into this thread's own io_context, so the connection's session and, once it is a
// consumer's, that consumer's whole pipeline (replication stream, timers, and the SQL it blocks
// on) run here and nowhere else: nothing one consumer waits for (a slot creation waiting for a
// transaction, a slow chunk query, a lock) can delay another consumer's stream, heartbeats or
// acknowledgements (issue 13, item 1).
// Owns: the io_context and the thread. The thread ends when the connection is over: Release()
// (called when its session is destroyed) lets io_context::run() return once every handler of
// the connection has run.
#pragma once

#include <boost/asio.hpp>
#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace dblog::server {

class ConnectionThread {
 public:
  // Creates the io_context's reactor now (epoll, eventfd and timerfd descriptors), so that
  // running out of descriptors throws here (boost::system::system_error), where the acceptor
  // can retry, and not later inside another thread's handler.
  ConnectionThread() : guard_(io_.get_executor()) {
    boost::asio::ip::tcp::socket socket(io_);
    boost::asio::steady_timer timer(io_);
  }
  ~ConnectionThread() {
    dying_ = true;  // handlers destroyed with io_ may destroy a session: Release does nothing
    Stop();
    Join();
  }
  ConnectionThread(const ConnectionThread&) = delete;
  ConnectionThread& operator=(const ConnectionThread&) = delete;

  boost::asio::io_context& io() { return io_; }

  // Runs the io_context on a new thread; `on_exit` is called on that thread when run()
  // returns (after Release, or Stop). An exception that escapes a handler ends this thread's
  // run() only: `on_error` is called with it (on this thread), then `on_exit`; the other
  // connections go on (on the main io_context it would have stopped the whole process).
  void Start(std::function<void()> on_exit, std::function<void(const std::string&)> on_error) {
    thread_ = std::thread([this, on_exit = std::move(on_exit), on_error = std::move(on_error)] {
      try {
        io_.run();
      } catch (const std::exception& e) {
        if (on_error) on_error(e.what());
      } catch (...) {
        if (on_error) on_error("an exception of unknown type");
      }
      if (on_exit) on_exit();
    });
  }
  // The connection is over: run() returns once its last handler has run. Thread-safe, once.
  void Release() {
    if (dying_) return;
    boost::asio::post(io_, [this] { guard_.reset(); });
  }
  // Shutdown: handlers not yet run are dropped (destroyed with the io_context).
  void Stop() { io_.stop(); }
  void Join() {
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }
  bool started() const { return thread_.joinable(); }

 private:
  // First, so that it outlives io_: destroying io_ may destroy a session, whose Release reads it.
  std::atomic<bool> dying_{false};
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

}  // namespace dblog::server
