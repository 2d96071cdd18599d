// tests/cpp/pg_cluster.h: throwaway clusters of one major (tests/pg-cluster.sh) for the tests
// that need a server of their own: another major, a standby, a crash (kill) or a setting the
// shared test cluster must not have. Stopped and removed when the Cluster goes.
#pragma once

#include <memory>
#include <string>
#include <utility>

namespace dblog::test {

// Runs a command, returns its stdout and exit status.
std::pair<std::string, int> Run(const std::string& command);

// One throwaway cluster of one major, stopped and removed at the end.
class Cluster {
 public:
  // status 3: that major is not there (skip); anything else non-zero fails.
  explicit Cluster(int major);
  // A cluster made by another tests/pg-cluster.sh command (standby): stopped and removed too.
  Cluster(std::string dir, std::string conninfo);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  int status() const { return status_; }
  const std::string& conninfo() const { return conninfo_; }
  const std::string& dir() const { return dir_; }
  // Restarts the server (fast shutdown: connections are cut), same port and data. False when
  // pg_ctl failed.
  bool Restart();
  // tests/pg-cluster.sh COMMAND DIR (kill, restart, promote, ...): its output and exit status.
  std::pair<std::string, int> Command(const std::string& command) const;
  // An asynchronous hot standby of this cluster streaming through physical slot `slot`
  // (tests/pg-cluster.sh standby); nullptr with `*error` set when it could not be made.
  std::unique_ptr<Cluster> MakeStandby(const std::string& slot, std::string* error) const;

 private:
  int status_ = -1;
  std::string dir_, conninfo_;
};

// Both clusters' hosts with target_session_attrs=read-write, as a client that follows a
// failover connects (user postgres, database postgres).
std::string FailoverConninfo(const Cluster& primary, const Cluster& standby);

}  // namespace dblog::test
