// tests/cpp/pgoutput/server_util.h: what the pgoutput server tests share: reading a pgoutput
// slot over the replication protocol (pg::ReplicationStream, as dblogd reads its slots) into
// decoded messages; their throwaway clusters are pg_cluster.h's.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pg_cluster.h"  // Cluster, Run, FailoverConninfo (moved there)
#include "pgoutput/decoder.h"

namespace dblog::test {

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
