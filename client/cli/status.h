// client/cli/status.h: `dblog status`: every consumer's health at a glance, read from dblogd's
// GET /status.json on its metrics listener (sidecar/metrics/status.h), as a table or as the
// JSON received, with an exit status a health check can use.
// Owns: the status command's flags, fetching the document (HTTP/1.0 with a deadline), reading
// it, the table, and what counts as unhealthy. Signal handling lives in main.cc.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "client/cli/tail.h"  // UsageError, Environment

namespace dblog::cli {

// dblogd's --metrics-listen default.
constexpr char kDefaultMetricsAddress[] = "127.0.0.1:9187";

struct StatusOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 9187;
  bool json = false;                                 // print the document as received
  std::optional<std::uint64_t> max_lag_bytes;         // unhealthy above it
  std::optional<double> max_lag_seconds;              // unhealthy above it
  double max_disconnected_seconds = 0;                // disconnected longer: unhealthy
  std::chrono::milliseconds timeout{5000};            // the whole HTTP exchange
};

// The help text of `dblog status --help`.
std::string StatusHelp();

// Parses the arguments after "status". nullopt when --help was asked for (written to
// `help_out`); UsageError for anything wrong.
std::optional<StatusOptions> ParseStatusArgs(const std::vector<std::string>& args,
                                             const Environment& env, std::ostream& help_out);

// A repair request queued or running (the document's "repairs").
struct RepairStatus {
  std::uint64_t id = 0;
  std::string table;
  std::string kind;
  std::uint64_t done = 0;       // rows emitted (keys covered for a key list)
  std::uint64_t estimated = 0;  // 0: unknown
  bool running = false;
};

// One consumer's row of the document (the fields `dblog status` shows). Fields an older dblogd
// does not write keep their defaults.
struct ConsumerStatus {
  std::string name;
  bool connected = false;
  std::string connected_since;  // "" when null
  double disconnected_seconds = 0;  // 0 while connected
  std::string last_ack;         // "" when null
  std::string sink;             // the client's address; "" when null
  std::string slot_state;       // pg_replication_slots.wal_status as dblogd last read it; ""
  std::vector<RepairStatus> repairs;
  std::string phase;
  std::uint64_t bootstrap_rows_copied = 0;
  std::uint64_t bootstrap_rows_estimated = 0;
  std::uint64_t lag_bytes = 0;
  double lag_seconds = 0;
  std::uint64_t retained_bytes = 0;
  std::string acked_lsn;
  std::string confirmed_lsn;
  std::uint64_t reconciles = 0;
  std::uint64_t window_redos = 0;
};

// Reads the JSON document; std::runtime_error when it is not one dblogd writes.
std::vector<ConsumerStatus> ParseStatusDocument(const std::string& json);

// The table `dblog status` prints: a header line, then one line per consumer, columns aligned.
// Names are printed with control characters replaced by '?'.
std::string RenderStatusTable(const std::vector<ConsumerStatus>& consumers);

// Why a consumer is unhealthy under `options` (disconnected longer than
// --max-disconnected-seconds, lag above a maximum); empty when it is healthy.
std::vector<std::string> Unhealthy(const ConsumerStatus& consumer, const StatusOptions& options);

// GET /status.json from host:port within `timeout`: the response body of a 200 answer;
// std::runtime_error (saying why) when dblogd cannot be reached or answers otherwise.
std::string FetchStatus(const std::string& host, std::uint16_t port,
                        std::chrono::milliseconds timeout);

// Runs `dblog status`: 0 when every consumer is healthy, 1 when one is not (each reason on
// `err`), 2 when dblogd cannot be reached or its answer cannot be read.
int RunStatus(const StatusOptions& options, std::FILE* out, std::FILE* err);

}  // namespace dblog::cli
