// sidecar/consumer/window_reader.cc: see window_reader.h.
#include "consumer/window_reader.h"

namespace dblog::consumer {

WindowReader::WindowReader(std::string conninfo, std::string application_name)
    : conninfo_(std::move(conninfo)),
      application_name_(std::move(application_name)),
      thread_([this] { Loop(); }) {}

WindowReader::~WindowReader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    job_.reset();
    if (canceller_) canceller_->Cancel();  // a statement of a job running ends now
  }
  wake_.notify_all();
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
  if (!Lost()) return *sql_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    canceller_.reset();
    if (stop_) throw std::runtime_error("dblogd is stopping the consumer's repairs");
  }
  sql_.reset();
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
    }
    job(*this);
    Settle();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  canceller_.reset();
}

void WindowReader::Settle() {
  if (!sql_) return;
  bool drop = !sql_->ok();
  if (!drop && sql_->in_transaction()) {
    try {
      sql_->Exec("ROLLBACK");
    } catch (const std::exception&) {
      drop = true;
    }
  }
  if (!drop) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    canceller_.reset();
  }
  sql_.reset();
}

}  // namespace dblog::consumer
