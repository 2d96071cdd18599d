// client/cli/main.cc: the `dblog` command: subcommand dispatch, exit codes, and turning
// SIGINT/SIGTERM into a clean stop.
// Owns: process-level concerns (argv, signals, exit status). Each subcommand's work lives in
// its own file (tail.cc, apply.cc, publish.cc, status.cc).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/cli/apply.h"
#include "client/cli/publish.h"
#include "client/cli/status.h"
#include "client/cli/tail.h"
#include "client/client.h"

namespace {

constexpr char kVersion[] = "dblog 0.1.0";

// Turns the first SIGINT/SIGTERM into Interrupter::Interrupt (the command stops cleanly) and a
// second one into an immediate exit. The signals are blocked in every thread (set up before any
// thread starts, so asio's resolver thread inherits the mask) and taken with sigtimedwait by
// one watcher thread, so no code runs in signal-handler context.
class SignalWatcher {
 public:
  explicit SignalWatcher(std::shared_ptr<dblog::client::Interrupter> interrupter)
      : interrupter_(std::move(interrupter)) {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, nullptr);
    thread_ = std::thread([this] { Watch(); });
  }

  ~SignalWatcher() {
    stop_ = true;
    thread_.join();
  }

  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  void Watch() {
    const timespec poll_interval{0, 100 * 1000 * 1000};
    while (!stop_) {
      const int signal = sigtimedwait(&signals_, nullptr, &poll_interval);
      if (signal < 0) continue;  // timeout or EINTR: look at stop_ again
      if (interrupter_->interrupted()) _exit(128 + signal);  // asked twice: stop now
      interrupter_->Interrupt();
    }
  }

  std::shared_ptr<dblog::client::Interrupter> interrupter_;
  sigset_t signals_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

int RunTailCommand(const std::vector<std::string>& args) {
  std::optional<dblog::cli::TailOptions> options;
  try {
    options = dblog::cli::ParseTailArgs(args, dblog::cli::ProcessEnvironment(), std::cout);
  } catch (const dblog::cli::UsageError& e) {
    std::fprintf(stderr, "dblog tail: %s\nTry 'dblog tail --help'.\n", e.what());
    return 2;
  }
  if (!options) return 0;  // --help
  auto interrupter = std::make_shared<dblog::client::Interrupter>();
  SignalWatcher watcher(interrupter);
  return dblog::cli::RunTail(*options, interrupter, stdout, stderr);
}

int RunApplyCommand(const std::vector<std::string>& args) {
  std::optional<dblog::cli::ApplyCommandOptions> options;
  try {
    options = dblog::cli::ParseApplyArgs(args, dblog::cli::ProcessEnvironment(), std::cout);
  } catch (const dblog::cli::UsageError& e) {
    std::fprintf(stderr, "dblog apply: %s\nTry 'dblog apply --help'.\n", e.what());
    return 2;
  }
  if (!options) return 0;  // --help
  auto interrupter = std::make_shared<dblog::client::Interrupter>();
  SignalWatcher watcher(interrupter);
  return dblog::cli::RunApply(*options, interrupter, stderr);
}

int RunPublishCommand(const std::vector<std::string>& args) {
  std::optional<dblog::cli::PublishCommandOptions> options;
  try {
    options = dblog::cli::ParsePublishArgs(args, dblog::cli::ProcessEnvironment(), std::cout);
  } catch (const dblog::cli::UsageError& e) {
    std::fprintf(stderr, "dblog publish: %s\nTry 'dblog publish --help'.\n", e.what());
    return 2;
  }
  if (!options) return 0;  // --help
  auto interrupter = std::make_shared<dblog::client::Interrupter>();
  SignalWatcher watcher(interrupter);
  return dblog::cli::RunPublish(*options, interrupter, stderr);
}

int RunStatusCommand(const std::vector<std::string>& args) {
  std::optional<dblog::cli::StatusOptions> options;
  try {
    options = dblog::cli::ParseStatusArgs(args, dblog::cli::ProcessEnvironment(), std::cout);
  } catch (const dblog::cli::UsageError& e) {
    std::fprintf(stderr, "dblog status: %s\nTry 'dblog status --help'.\n", e.what());
    return 2;
  }
  if (!options) return 0;  // --help
  return dblog::cli::RunStatus(*options, stdout, stderr);
}

// Subcommands, in the order `dblog --help` lists them.
const Command kCommands[] = {
    {"tail", "print a consumer's change stream as NDJSON on stdout", RunTailCommand},
    {"apply", "apply a consumer's change stream to a PostgreSQL database", RunApplyCommand},
    {"publish", "write a consumer's change stream into NATS JetStream or Kafka", RunPublishCommand},
    {"status", "show every consumer's health from dblogd's metrics listener", RunStatusCommand},
};

void PrintUsage(std::FILE* to) {
  std::fprintf(to,
               "Usage: dblog COMMAND [options]\n"
               "\n"
               "Commands:\n");
  for (const Command& command : kCommands) {
    std::fprintf(to, "  %-8s %s\n", command.name, command.summary);
  }
  std::fprintf(to,
               "\n"
               "'dblog COMMAND --help' describes a command's options.\n"
               "'dblog --version' prints the version.\n");
}

}  // namespace

int main(int argc, char** argv) {
  // A closed stdout must be an error we report (and never acknowledge past), not a silent death.
  signal(SIGPIPE, SIG_IGN);
  std::setvbuf(stdout, nullptr, _IOFBF, 1 << 20);  // flushed explicitly: before every ack

  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    PrintUsage(stderr);
    return 2;
  }
  const std::string name = args.front();
  args.erase(args.begin());
  if (name == "--help" || name == "-h" || name == "help") {
    PrintUsage(stdout);
    return 0;
  }
  if (name == "--version") {
    std::printf("%s\n", kVersion);
    return 0;
  }
  for (const Command& command : kCommands) {
    if (name == command.name) return command.run(args);
  }
  std::fprintf(stderr, "dblog: unknown command '%s'\n\n", name.c_str());
  PrintUsage(stderr);
  return 2;
}
