// sidecar/consumer/ddl_trigger.h: pgoutput mode's DDL trigger (consumer/ddl_trigger.sql, plain
// PL/pgSQL an administrator installs, or dblogd when its role is a superuser): its SQL, whether
// a source has it as dblogd trusts it, and the repair requests its notes become.
// Owns: every statement dblogd runs against schema dblog_ddl, and dblog.ddl_taken (the notes
// already turned into requests). Blocking, on the caller's connection.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
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

// Whether dblog_ddl.layouts exists (a trigger an older dblogd installed keeps none), and whether
// dblogd trusts it (NotedLayout's rules).
bool DdlTriggerHasLayouts(pg::Connection& sql);
bool DdlTriggerKeepsLayouts(pg::Connection& sql);
// For people: an installed trigger without layouts, or with layouts dblogd does not trust.
extern const char* const kDdlTriggerWithoutLayouts;
extern const char* const kDdlLayoutsUntrusted;

// Waits (up to 10 s) until transaction `xid` (64-bit; 0: none) is visible to a new snapshot,
// when an ACCESS EXCLUSIVE lock on table `oid` is held (a DDL on it not visible yet): the
// walsender may send a transaction before its commit is visible (a moment, or while the commit
// waits for a synchronous standby), and what its own DDL wrote (the catalog, a layout note)
// must be read. Throws LayoutWaitTimeout after 10 s (dblogd's walsender a synchronous standby,
// whose commit waits for dblogd?).
class LayoutWaitTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
void WaitUntilVisible(pg::Connection& sql, std::uint64_t xid, std::uint32_t oid);

// What the DDL trigger noted of table `oid` (dblog_ddl.layouts), as rows of kRelationQuery (text
// cells, nullopt for NULL); empty when there is no such note or it says "not known".
using LayoutRows = std::vector<std::vector<std::optional<std::string>>>;
struct NotedLayouts {
  LayoutRows before;  // the note last before `lsn`
  LayoutRows latest;  // the table's last note (the caller checks it against the catalog now)
};
// nullopt: no trigger dblogd trusts, or no layouts table it trusts (dblog_ddl's owner's, no
// row security, no other role granted more than SELECT on it or a column of it, readable by
// dblogd's role). Run it in the caller's REPEATABLE READ transaction with the catalog's read,
// after WaitUntilVisible: one snapshot, in which a DDL's note and its catalog change commit
// together.
std::optional<NotedLayouts> NotedLayout(pg::Connection& sql, std::uint32_t oid,
                                        std::uint64_t lsn);

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
