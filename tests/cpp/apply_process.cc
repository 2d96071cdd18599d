// tests/cpp/apply_process.cc: `dblog apply` as a child process (see the header).
#include "apply_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

namespace dblog::test {

using namespace std::chrono_literals;

ApplyProcess::ApplyProcess(std::vector<std::string> args, std::string log_path)
    : args_(std::move(args)), log_path_(std::move(log_path)) {
  if (log_path_.empty()) {
    char tmpl[] = "/tmp/dblog-apply-test-XXXXXX";
    const int fd = mkstemp(tmpl);
    close(fd);
    log_path_ = tmpl;
    own_log_ = true;
  }
}

ApplyProcess::~ApplyProcess() {
  Kill();
  if (own_log_ && !::testing::Test::HasFailure()) unlink(log_path_.c_str());
}

void ApplyProcess::Start() {
  std::vector<std::string> argv = {DBLOG_PATH, "apply"};
  argv.insert(argv.end(), args_.begin(), args_.end());
  pid_ = fork();
  if (pid_ == 0) {
    const int fd = open(log_path_.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0600);
    dup2(fd, 2);
    dup2(fd, 1);
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  ++starts_;
}

void ApplyProcess::Signal(int signo) {
  if (pid_ > 0) kill(pid_, signo);
}

void ApplyProcess::Kill() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

std::optional<int> ApplyProcess::Wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (pid_ > 0) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return status;
    }
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(20ms);
  }
  return std::nullopt;
}

bool ApplyProcess::Exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return true;
  }
  return false;
}

bool ApplyProcess::Supervise() {
  if (pid_ <= 0 || !Exited()) return false;
  std::this_thread::sleep_for(200ms);
  Start();
  return true;
}

std::string ApplyProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

long ApplyProcess::PeakRssKb() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

bool ApplyProcess::WaitForLog(const std::string& text, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

}  // namespace dblog::test
