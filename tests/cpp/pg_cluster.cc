// tests/cpp/pg_cluster.cc: see pg_cluster.h.
#include "pg_cluster.h"

#include <sys/wait.h>

#include <cstdio>

namespace dblog::test {
namespace {

const std::string kClusterScript = std::string(DBLOG_SOURCE_DIR) + "/tests/pg-cluster.sh";

}  // namespace

std::pair<std::string, int> Run(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return {"", -1};
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

Cluster::Cluster(int major) {
  auto [out, status] = Run(kClusterScript + " start " + std::to_string(major));
  status_ = status;
  if (status != 0) return;
  auto nl = out.find('\n');
  dir_ = out.substr(0, nl);
  conninfo_ = out.substr(nl + 1);
  while (!conninfo_.empty() && conninfo_.back() == '\n') conninfo_.pop_back();
}

Cluster::Cluster(std::string dir, std::string conninfo)
    : status_(0), dir_(std::move(dir)), conninfo_(std::move(conninfo)) {}

bool Cluster::Restart() { return Run(kClusterScript + " restart " + dir_).second == 0; }

std::pair<std::string, int> Cluster::Command(const std::string& command) const {
  return Run(kClusterScript + " " + command + " " + dir_);
}

std::unique_ptr<Cluster> Cluster::MakeStandby(const std::string& slot, std::string* error) const {
  auto [made, status] = Run(kClusterScript + " standby " + dir_ + " " + slot);
  if (status != 0) {
    *error = made;
    return nullptr;
  }
  const auto nl = made.find('\n');
  return std::make_unique<Cluster>(made.substr(0, nl),
                                   made.substr(nl + 1, made.find('\n', nl + 1) - nl - 1));
}

std::string FailoverConninfo(const Cluster& primary, const Cluster& standby) {
  auto value = [](const std::string& conninfo, const std::string& key) {
    const auto at = conninfo.find(key + "=") + key.size() + 1;
    return conninfo.substr(at, conninfo.find(' ', at) - at);
  };
  const std::string& a = primary.conninfo();
  const std::string& b = standby.conninfo();
  return "host=" + value(a, "host") + "," + value(b, "host") + " port=" + value(a, "port") + "," +
         value(b, "port") + " user=postgres dbname=postgres target_session_attrs=read-write";
}

Cluster::~Cluster() {
  if (!dir_.empty()) Run(kClusterScript + " stop " + dir_);
}

}  // namespace dblog::test
