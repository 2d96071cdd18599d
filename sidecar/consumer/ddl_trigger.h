// sidecar/consumer/ddl_trigger.h: pgoutput mode's DDL trigger (consumer/ddl_trigger.sql, plain
// PL/pgSQL an administrator installs, or dblogd when its role is a superuser): its SQL, whether
// a source has it as dblogd trusts it, and the repair requests its notes become.
// Owns: every statement dblogd runs against schema dblog_ddl, and dblog.ddl_taken (the notes
// already turned into requests). Blocking, on the caller's connection.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pg/connection.h"

namespace dblog::consumer {

// consumer/ddl_trigger.sql, as `dblogd --ddl-trigger-sql` prints it.
const char* DdlTriggerSql();

enum class DdlTriggerState {
  kAbsent,     // no schema dblog_ddl
  kUntrusted,  // dblog_ddl is not as ddl_trigger.sql makes it: ignored (see DdlTriggerProblem)
  kInstalled,  // its table, schema, functions and two enabled event triggers have one owner
};
DdlTriggerState ReadDdlTriggerState(pg::Connection& sql);
// For people: what the state means and what to do about it ("" when installed).
std::string DdlTriggerProblem(DdlTriggerState state);

// The rows of kRelationQuery (text cells, nullopt for NULL) as the trigger noted them for table
// `oid` last before `lsn` (dblog_ddl.layouts), or nullopt: no trigger dblogd trusts, no layouts
// table of its owner, no note before `lsn`, or one that says "not known". First waits (up to
// 10 s, else pg::Error-free std::runtime_error) until transaction `xid` (64-bit; 0: none) is
// visible to a new snapshot: the walsender may send a transaction a moment before its commit
// is visible, and a note of its own DDL must be read.
std::optional<std::vector<std::vector<std::optional<std::string>>>> NotedLayout(
    pg::Connection& sql, std::uint32_t oid, std::uint64_t lsn, std::uint64_t xid);

// In a transaction of its own: installs (or replaces) the trigger. Needs a role that may create
// event triggers.
void InstallDdlTrigger(pg::Connection& sql);

// dblog.ddl_taken, made when absent (in schema dblog, dblogd's role's).
void EnsureDdlTakenTable(pg::Connection& sql);

// A request a note of the trigger became.
struct DdlRepair {
  std::uint64_t request = 0;
  std::string table;
  std::string reason;
};
// In the caller's transaction: every note not taken yet is taken (dblog.ddl_taken, by
// transaction and table: once, also with several dblogd processes or consumers), and those of
// tables some consumer's publication holds become one whole-table repair request per table
// (consumer NULL: each consumer whose scope holds the table runs it; asked by dblogd's role,
// the reasons naming the DDL's roles). A table that cannot be queued (gone, keyless, a key
// dblog cannot read) goes to `refused` with its error, and holds
// back nothing else. Reads the notes only when ReadDdlTriggerState says kInstalled, checked in
// the same transaction: the owner of dblog_ddl owns event triggers, so no other role can swap
// what is read. Returns the requests queued.
struct DdlRefusal {
  std::uint32_t table_oid = 0;
  std::string error;
};
std::vector<DdlRepair> TakeDdlRepairs(pg::Connection& sql, std::vector<DdlRefusal>* refused);

}  // namespace dblog::consumer
