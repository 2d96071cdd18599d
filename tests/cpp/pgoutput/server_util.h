// tests/cpp/pgoutput/server_util.h: what the pgoutput server tests share: a throwaway cluster
// of one major (tests/pg-cluster.sh), and reading a pgoutput slot over the replication
// protocol (pg::ReplicationStream, as dblogd reads its slots) into decoded messages.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pgoutput/decoder.h"

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

// What one slot read: every payload (kept, since Datum views point into them) and its
// decoded message, up to and including the non-transactional message "test.end".
struct Read {
  std::deque<std::string> payloads;
  std::vector<pgoutput::LogicalMessage> messages;
  std::vector<std::uint64_t> wal_starts;  // each message's XLogData dataStart
  std::string error;
};

using SlotOptions = std::vector<std::pair<std::string, std::string>>;

// Reads `slot` (through `conninfo`, a replication connection is made of it) with these
// START_REPLICATION options until the message "test.end", an error, or 120 s.
Read ReadSlot(const std::string& conninfo, const std::string& slot, const SlotOptions& options,
              pgoutput::Decoder::Options decoder_options);

// START_REPLICATION's error for these options, "" when the server accepts them.
std::string StartError(const std::string& conninfo, const std::string& slot,
                       const SlotOptions& options);

}  // namespace dblog::test
