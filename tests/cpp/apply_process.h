// tests/cpp/apply_process.h: `dblog apply` as a child process, for the tests that run the real
// binary (tests/cpp/apply/, tests/cpp/oracle/). Its stdout and stderr go to a log file (a temp
// file unless one is given), which log() reads. The process is killed (SIGKILL) when the
// object goes; the temp log is removed unless the test failed.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dblog::test {

class ApplyProcess {
 public:
  // `args` follow `dblog apply`. `log_path` empty: a temp file of its own.
  explicit ApplyProcess(std::vector<std::string> args, std::string log_path = {});
  ~ApplyProcess();
  ApplyProcess(const ApplyProcess&) = delete;
  ApplyProcess& operator=(const ApplyProcess&) = delete;

  void Start();
  void Signal(int signo);
  void Kill();  // SIGKILL and wait
  // The wait status once it has exited (waits up to `timeout`), else nullopt.
  std::optional<int> Wait(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  bool Exited();
  // Starts it again if it exited (an error retrying cannot fix: the caller's test shows what
  // follows); true when it did.
  bool Supervise();
  int starts() const { return starts_; }
  std::string log() const;
  const std::string& log_path() const { return log_path_; }
  long PeakRssKb() const;
  bool WaitForLog(const std::string& text, std::chrono::milliseconds timeout);

 private:
  std::vector<std::string> args_;
  std::string log_path_;
  bool own_log_ = false;
  pid_t pid_ = -1;
  int starts_ = 0;
};

}  // namespace dblog::test
