// tests/cpp/publish/fake_schema_registry.h: fake_schema_registry.py (a test-only stand-in for
// Confluent's Schema Registry) as a child process of a test, and what it received; used by the
// debezium-avro end-to-end tests of kafka_test.cc and jetstream_test.cc.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace dblog::test {

// The fake schema registry (fake_schema_registry.py, a test-only stand-in: no Confluent
// registry can be installed here) as a child process; its state file says what it received.
class FakeSchemaRegistry {
 public:
  FakeSchemaRegistry() : state_(::testing::TempDir() + "/registry_state.json") {
    std::remove(state_.c_str());
    int out[2];
    if (pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      const std::string script = std::string(DBLOG_SOURCE_DIR) +
                                 "/tests/cpp/publish/fake_schema_registry.py";
      execl("/usr/bin/python3", "python3", script.c_str(), state_.c_str(), nullptr);
      _exit(127);
    }
    close(out[1]);
    from_ = fdopen(out[0], "r");
    char buf[256];
    const std::string first = std::fgets(buf, sizeof buf, from_) ? buf : "";
    if (first.rfind("url ", 0) != 0) throw std::runtime_error("fake registry: " + first);
    url_ = first.substr(4, first.find_last_not_of("\r\n") - 3);
  }
  ~FakeSchemaRegistry() {
    if (from_) std::fclose(from_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& url() const { return url_; }
  std::string State() const {
    std::ifstream f(state_);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  std::string state_, url_;
  pid_t pid_ = -1;
  FILE* from_ = nullptr;
};

// Runs avro_check.py --decode over `records` ({"subject","frame"} JSON objects, comma-separated)
// with the schemas the registry holds (`state`): one decoded JSON value per line, or the
// check's complaint as the only line with a non-zero status.
inline std::pair<int, std::vector<std::string>> DecodeAvro(const std::string& state,
                                                           const std::string& records) {
  const std::string path = ::testing::TempDir() + "/avro_e2e.json";
  std::ofstream(path) << state.substr(0, state.rfind('}')) << ",\"records\":[" << records << "]}";
  FILE* p = popen(("/usr/bin/python3 " + std::string(DBLOG_SOURCE_DIR) +
                   "/tests/cpp/publish/avro_check.py --decode " + path + " 2>&1").c_str(), "r");
  std::vector<std::string> lines;
  char buf[8192];
  while (p && std::fgets(buf, sizeof buf, p)) {
    std::string line = buf;
    while (!line.empty() && line.back() == '\n') line.pop_back();
    lines.push_back(line);
  }
  const int status = p ? pclose(p) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, lines};
}

}  // namespace dblog::test
