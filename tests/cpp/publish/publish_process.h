// tests/cpp/publish/publish_process.h: the real `dblog publish` as a child process, for the
// broker tests (jetstream_test.cc, kafka_test.cc).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace dblog::test {

class PublishProcess {
 public:
  explicit PublishProcess(std::vector<std::string> args) : args_(std::move(args)) {
    char tmpl[] = "/tmp/dblog-publish-XXXXXX";
    close(mkstemp(tmpl));
    log_ = tmpl;
  }
  ~PublishProcess() {
    Kill();
    if (!keep_log_) unlink(log_.c_str());
  }
  PublishProcess(const PublishProcess&) = delete;
  PublishProcess& operator=(const PublishProcess&) = delete;
  void Start() {
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen(log_.c_str(), "a");
      dup2(fileno(f), 2);
      dup2(fileno(f), 1);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(DBLOG_PATH));
      argv.push_back(const_cast<char*>("publish"));
      for (auto& a : args_) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  // Restarts it if it exited (it keeps running through lost connections, so an exit is an
  // error the test shows in the log).
  void Supervise() {
    int status;
    if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      ++exits_;
      // how it ended, into its log (which the test prints when it fails)
      if (FILE* f = std::fopen(log_.c_str(), "a")) {
        if (WIFSIGNALED(status))
          std::fprintf(f, "[test] dblog publish was killed by signal %d\n", WTERMSIG(status));
        else
          std::fprintf(f, "[test] dblog publish exited with status %d\n", WEXITSTATUS(status));
        std::fclose(f);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      Start();
    }
  }
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  int exits() const { return exits_; }
  std::string Log() {
    keep_log_ = true;
    std::ifstream f(log_);
    return log_ + ":\n" + std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  std::vector<std::string> args_;
  std::string log_;
  bool keep_log_ = false;
  pid_t pid_ = -1;
  int exits_ = 0;
};

}  // namespace dblog::test
