// sidecar/pg/slot.h: logical replication slots (look up, create with an exported snapshot,
// drop) and the LSN text format.
//
// Owns: the SQL and replication commands that manage slots, and turning the server's refusal
// of a plugin missing from output_plugin_libraries into an error that says how to fix it.
// Does not own: streaming from a slot (replication_stream.h), deciding which slot a consumer
// uses or when its confirmed position may advance (that is the consumer bookkeeping's job).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/lsn.h"
#include "pg/connection.h"

namespace dblog::pg {


// Slot names are what the server accepts: 1 to 63 characters of [a-z0-9_]. Throws
// std::invalid_argument otherwise, before anything is sent.
void ValidateSlotName(std::string_view name);

struct SlotInfo {
  std::string name;
  std::string plugin;  // "" for a physical slot
  bool exists = false;
  std::uint64_t confirmed_flush_lsn = 0;  // 0 when NULL (physical slot)
  std::uint64_t restart_lsn = 0;          // 0 when NULL (not reserved, or invalidated)
  bool active = false;
  std::optional<int> active_pid;
  std::string slot_type;   // "logical" or "physical"
  std::string database;    // "" for a physical slot
  std::string wal_status;  // reserved, extended, unreserved, lost; "" when NULL
};

// Reads pg_replication_slots over a plain SQL connection. A missing slot gives exists=false.
SlotInfo GetSlot(Connection& sql_conn, const std::string& name);

struct CreatedSlot {
  std::string name;
  std::uint64_t consistent_point = 0;
  std::string snapshot_name;  // "" unless export_snapshot
};

// CREATE_REPLICATION_SLOT "name" LOGICAL "plugin" (SNAPSHOT 'export' | 'nothing') on a
// replication connection (PostgreSQL 15 syntax); on 17 and later with FAILOVER, so that a
// standby can synchronize the slot. With export_snapshot, the snapshot can be
// imported by other sessions (SET TRANSACTION SNAPSHOT) only until `repl_conn` runs its next
// command, so leave it idle until every importer is in.
//
// When the server refuses the plugin because it is not in output_plugin_libraries
// (PostgreSQL 15.19 and later; superusers included), the Error (SQLSTATE 42501) says how to
// allow it.
CreatedSlot CreateSlot(Connection& repl_conn, const std::string& name, const std::string& plugin,
                       bool export_snapshot);

// pg_drop_replication_slot over a plain SQL connection. Fails (SQLSTATE 55006) while a
// walsender uses the slot. With missing_ok, a slot that does not exist is not an error;
// returns whether a slot was dropped.
bool DropSlot(Connection& sql_conn, const std::string& name, bool missing_ok = false);

// When `error` is the server refusing `plugin` because output_plugin_libraries does not list
// it, returns an Error that explains the fix (same SQLSTATE, SQL and server message); otherwise
// returns `error` unchanged. `conn` is asked for the current output_plugin_libraries (SHOW
// works on replication connections too) so the suggested setting keeps what is there already;
// pass an empty plugin to take the library name from the server's message.
Error ExplainPluginRefusal(Connection& conn, const Error& error, std::string plugin);

}  // namespace dblog::pg
