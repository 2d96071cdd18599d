// sidecar/consumer/repair_request.h: one repair request as a consumer's pipeline runs it (read
// from dblog.request_queue, or decoded from the log), with its progress.
// Owns: the request's in-memory shape. No behaviour.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "emit/position.h"

namespace dblog::consumer {

struct RepairRequest {
  std::uint64_t id = 0;
  std::uint32_t table_oid = 0;
  std::string table;                   // qualified, as regclass prints it
  std::string kind;                    // table, range, keys
  std::string from_key, to_key, keys;  // JSON text ("" = NULL)
  std::vector<std::string> key_columns;  // quoted identifiers, key order
  std::vector<std::string> key_types;
  // progress (in memory: what was emitted; durable: what was acknowledged)
  std::string resume_key;               // JSON array of key values (text) to continue after
  std::size_t keys_done = 0;            // key-list requests: keys covered so far
  std::uint32_t chunks = 0;
  std::uint64_t rows = 0, deletes = 0;
  std::uint64_t fills = 0;  // kept keys' rows completed from the chunk (window.h, a fill)
  bool cancelled = false;
  bool started_logged = false;  // repair_started was logged (at its first chunk's read)
  // for Progress{phase: "repair"}: filled once, when first reported
  bool described = false;
  std::string schema, name;
  std::uint64_t rows_estimated = 0;  // table: pg_class.reltuples; keys: how many; range: 0
};

// A chunk's progress, recorded (dblog.request_progress) once the consumer acknowledged the
// position of the transaction that carried it.
struct PendingProgress {
  emit::Position position;
  RepairRequest snapshot;  // the request's progress as of this chunk
  bool last = false;
};

}  // namespace dblog::consumer
