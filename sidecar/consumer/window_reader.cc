// sidecar/consumer/window_reader.cc: see window_reader.h.
#include "consumer/window_reader.h"

namespace dblog::consumer {

WindowReader::WindowReader(std::string conninfo, std::string application_name)
    : conninfo_(std::move(conninfo)),
      application_name_(std::move(application_name)),
      thread_([this] { Loop(); }) {}

WindowReader::~WindowReader() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    stop_ = true;
    job_.reset();
    wake_.notify_all();
    // a job running ends when its statement is cancelled (or at its next Sql()); a cancel that
    // reached the server between two statements cancelled nothing: cancelled again
    while (running_) {
      if (canceller_) canceller_->Cancel();
      wake_.wait_for(lock, std::chrono::milliseconds(100), [this] { return !running_; });
    }
  }
  thread_.join();
}

void WindowReader::Run(std::function<void(WindowReader&)> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = std::move(job);
  }
  wake_.notify_all();
}

pg::Connection& WindowReader::Sql() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stop_) throw std::runtime_error("dblogd is stopping the consumer's repairs");
  }
  if (reconnect_.exchange(false)) Drop();
  if (!Lost() && std::chrono::steady_clock::now() - idle_since_ > std::chrono::seconds(1)) {
    try {
      sql_->Exec("SELECT 1");
    } catch (const std::exception&) {
      Drop();
    }
  }
  if (!Lost()) return *sql_;
  Drop();
  pg::Connection opened =
      pg::Connection::Open(conninfo_, false, {{"application_name", application_name_}});
  auto canceller = std::make_unique<pg::Canceller>(opened);
  sql_ = std::move(opened);
  std::lock_guard<std::mutex> lock(mutex_);
  canceller_ = std::move(canceller);
  if (stop_) throw std::runtime_error("dblogd is stopping the consumer's repairs");
  return *sql_;
}

void WindowReader::Loop() {
  for (;;) {
    std::function<void(WindowReader&)> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stop_ || job_; });
      if (stop_) break;
      job = std::move(*job_);
      job_.reset();
      running_ = true;
    }
    job(*this);
    Settle();
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
    wake_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  canceller_.reset();
}

void WindowReader::Settle() {
  idle_since_ = std::chrono::steady_clock::now();
  if (!sql_) return;
  bool drop = !sql_->ok();
  if (!drop && sql_->in_transaction()) {
    try {
      sql_->Exec("ROLLBACK");
    } catch (const std::exception&) {
      drop = true;
    }
  }
  if (drop) Drop();
}

void WindowReader::Drop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    canceller_.reset();
  }
  sql_.reset();
}

}  // namespace dblog::consumer
