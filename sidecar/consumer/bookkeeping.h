// sidecar/consumer/bookkeeping.h: one consumer's SQL connection to the source and every
// statement dblogd runs there about that consumer: the extension's version, the role's
// privileges (preflight), the consumer's row in dblog.consumers (bootstrap state, scope), the
// repair queue and progress (dblog.request_queue, dblog.request_progress), and the few
// catalog reads the pipeline needs. The statements are schema-qualified and take every value as
// a parameter.
// Owns: that connection (opened on demand, reopened after a failure) and the SQL text.
// Blocking: called on the consumer's own thread.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/scope.h"
#include "config/config.h"
#include "consumer/ddl_trigger.h"
#include "consumer/repair_request.h"
#include "log/log.h"
#include "pg/connection.h"

namespace dblog::consumer {

// The version of the dblog extension (dblog.control) this dblogd speaks to; checked at start.
inline constexpr const char* kExtensionVersion = "0.6";

// pgoutput mode: the tables a repair may read, an SQL condition on pg_class c and its
// pg_namespace n: the table's owner and its schema's owner are dblogd's role or a superuser.
// A repair's chunk is a planned SELECT, and planning loads the table's index expressions and
// predicates and its statistics' expressions and folds them: their owner's code, run as
// dblogd's role; and a schema's owner can swap a view in under the table's name between
// dblogd's check and its statement. The extension's mode guards both in C
// (dblog._bind_relation); without C, this mode trusts no other owner with them. An owner
// pg_database_owner (schema public's, from 15 on) stands for the database's owner.
#define DBLOG_TRUSTED_ROLE(oid_expr)                                                          \
  "EXISTS (SELECT 1 FROM pg_catalog.pg_roles o"                                               \
  "         WHERE o.oid OPERATOR(pg_catalog.=) CASE WHEN " oid_expr                            \
  "               OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid"             \
  "               THEN (SELECT d.datdba FROM pg_catalog.pg_database d"                        \
  "                      WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())" \
  "               ELSE " oid_expr " END"                                                      \
  "           AND (o.rolname OPERATOR(pg_catalog.=) CURRENT_USER OR o.rolsuper))"
inline constexpr const char* kTrustedOwners =
    "(" DBLOG_TRUSTED_ROLE("c.relowner") " AND " DBLOG_TRUSTED_ROLE("n.nspowner") ")";
#undef DBLOG_TRUSTED_ROLE
// Why a table another role owns cannot be repaired in pgoutput mode, and what to do.
std::string UntrustedOwnerMessage(const std::string& tables);

class Bookkeeping {
 public:
  Bookkeeping(const config::Config& config, const config::ConsumerConfig& consumer);

  // The connection, opened (again) when there is none or it broke.
  pg::Connection& Sql();
  // Drop the connection (after a statement failed): the next statement reconnects.
  void Reset() { sql_.reset(); }
  // Rolls back the transaction a statement left open (a request refused half-way), if any.
  void EndTransaction();
  // No connection, or it broke (the source went away).
  bool Lost() const { return !sql_ || !sql_->ok(); }

  // Runs `statement`. On failure: one log line `event` at `level` with `fields` and the
  // error, the connection reset; returns false. For what may fail without ending the
  // consumer (it is retried, or redone safely after a crash).
  bool BestEffort(log::Level level, std::string_view event,
                  std::initializer_list<log::Field> fields, const std::function<void()>& statement);

  // ---- at connect ------------------------------------------------------------------------
  // Throws, with the fix, when the extension is missing or not kExtensionVersion.
  void CheckExtension();
  // What dblogd's role needs (REPLICATION, the bookkeeping tables, SELECT on the tables in
  // scope, no row-level security hiding rows): each thing missing, with its fix (dblogd
  // --check prints them all). `superuser`: the role is one (it should not be).
  std::vector<std::string> RoleProblems(bool* superuser);
  // RoleProblems, checked before anything is created or emitted: throws the first; warns
  // (source_role_is_superuser) when the role is a superuser.
  void Preflight();
  // pgoutput mode (no extension): dblog.consumers made as the extension makes it, in a schema
  // dblog that dblogd's role creates, when they do not exist (one table, nothing else: the
  // bootstrap's state). Throws, with the statements for an administrator, when the role may not
  // create them, or when they exist but belong neither to this role nor to the extension (a
  // table another role controls would decide whether consumers bootstrap).
  void EnsureConsumersTable();
  // pgoutput mode, after EnsureConsumersTable: the repair API of consumer/repair_api.sql (the
  // queue, the progress, dblog.watermarks, dblog.repair() and the others, plain SQL), made in
  // one transaction when dblog.request_queue does not exist. Returns "" when repairs can run,
  // or why not (the extension's schema, where dblogd's role cannot add dblog.watermarks). Throws
  // when a table of it exists but is not a table of this role's (or the extension's).
  std::string EnsureRepairApi();
  // pgoutput mode, once repairs can run: dblog.ddl_taken made when absent, and the DDL trigger
  // (consumer/ddl_trigger.h) installed when it is absent and dblogd's role is a superuser.
  // Logs ddl_trigger_installed, or ddl_trigger_missing (warn) with what to do.
  DdlTriggerState EnsureDdlTrigger();
  // The source's timeline at a stream start, into the consumer's row (dblog.consumers.timeline,
  // extension 0.6); when the row held another one, a standby was promoted since: failed_over_at
  // and failover ("timeline 1 to 2: <action>") say so. Returns the timeline the row held
  // (nullopt: none, no row, or a table without the column).
  std::optional<std::uint64_t> RecordTimeline(std::uint64_t timeline, const std::string& action);
  // A reconcile's new slot, as soon as it exists: dblog.consumers.failover says `action` (which
  // names the slot's consistent point: "reconciled: a new slot at X ..."), so that a later
  // session still knows it (ReconcilePoint). Nothing when the table has no such column.
  void RecordReconcile(const std::string& action);
  // X of the last reconcile the row records, if any.
  std::optional<std::uint64_t> ReconcilePoint();
  // dblog.consumers.bootstrap_state (nullopt: no row).
  std::optional<std::string> BootstrapState();
  // pg_replication_slots' wal_status and safe_wal_size of `slot` (-1: NULL); "missing" when
  // there is no such slot.
  std::pair<std::string, std::int64_t> SlotState(const std::string& slot);
  // The slot was created without a bootstrap (--no-bootstrap).
  void RecordSkippedBootstrap(const std::string& slot, std::uint64_t consistent_point);
  void RecordBootstrapStarted(const std::string& slot, std::uint64_t consistent_point);
  // False (logged) when it could not be recorded: retried at the next ack.
  bool MarkBootstrapDone(std::uint64_t rows);
  // Tables that joined the scope since the consumer's row was written get a whole-table
  // repair request each (none for a table with one queued and not started yet), and the row
  // takes the new scope (one transaction). True when the scope had changed.
  bool QueueTablesAddedToScope(const std::vector<bootstrap::Table>& tables);
  // A table entered the scope by DDL (consumer/scope_changes.h): a whole-table repair request
  // for this consumer, unless one is queued and not started yet (a message read again after a
  // crash queues at most one more), or the table is gone, out of the scope by now, or keyless.
  // `xid`: the DDL's transaction, 64-bit (0: none to wait for). Its commit is decoded before every
  // snapshot sees it (WAL order is not visibility order): the catalogs are read once it is
  // visible (waits up to a few seconds, then throws).
  enum class Entering { kQueued, kAlreadyQueued, kGone, kOutOfScopeNow, kKeyless };
  Entering QueueTableEnteringScope(std::uint32_t oid, std::uint64_t xid = 0);
  // --on-slot-lost=reconcile: a whole-table repair request of each of `tables` for this
  // consumer (reason "reconcile"), in one transaction; their ids.
  std::vector<std::uint64_t> QueueReconcile(const std::vector<bootstrap::Table>& tables);
  // A whole-table repair request of each table for this consumer, with `reason`, in the
  // caller's transaction (none is begun or committed here); their ids.
  std::vector<std::uint64_t> QueueWholeTables(const std::vector<std::uint32_t>& oids,
                                              const std::string& reason);
  // Writes WAL (non-transactional messages with prefix "dblogd.pad", dropped by every
  // consumer that did not ask for that prefix) until the insert position is past `lsn`: after
  // a failover, a consumer's resume position can lie past the promoted server's WAL (commits
  // the standby never received), and a stream must never send a position at or before it.
  // Throws when that is more than 1 GiB away (not this source's stream).
  void PadWalPast(std::uint64_t lsn);
  // The transactions that block backend `pid` (a slot creation), for people.
  std::string Blockers(int pid);
  std::uint64_t CurrentWalInsertLsn();
  // The next xid (one taken and rolled back): every transaction below it began before.
  std::uint64_t NextXid();
  // The oldest transaction running now (pg_snapshot_xmin of a snapshot taken now): every
  // transaction below it ended, so every snapshot taken from now on sees it (or it aborted).
  std::uint64_t OldestRunningXid();

  // ---- repairs ---------------------------------------------------------------------------
  // Queued requests for this consumer that are running or not started, in id order, except
  // those in `known`. The key's columns and types come from the catalogs now.
  std::vector<RepairRequest> LoadRequests(const std::set<std::uint64_t>& known);
  // pgoutput mode, polled: the DDL trigger's new notes as repair requests (TakeDdlRepairs, in
  // a transaction of its own), each logged (ddl_repair_queued).
  void TakeDdlRepairs();
  // pgoutput mode: the tables of `oids` a repair may not read (kTrustedOwners), by name.
  std::vector<std::string> UntrustedOwners(const std::vector<std::uint32_t>& oids);
  // Which of `ids` are cancelled now (pgoutput mode reads cancellations from the queue).
  std::set<std::uint64_t> CancelledAmong(const std::vector<std::uint64_t>& ids);
  // Fills the request's table name and identity key from the catalogs; false when the table is
  // not in this consumer's scope (or no longer exists).
  bool DescribeRequestTable(RepairRequest& q);
  // Fills schema, name and (for a table) rows_estimated, once: best effort.
  void DescribeForProgress(RepairRequest& q);
  // The chunk's progress (state done when it was the last): best effort, a chunk not recorded
  // is redone after a crash, which is safe. False when the source went away meanwhile (the
  // caller records it again later); any other failure is logged and the progress dropped (the
  // request runs again at the next connect).
  bool RecordProgress(const PendingProgress& p);
  // The request ended (failed, cancelled), with the error: best effort, false as RecordProgress.
  bool FinishRequest(std::uint64_t id, const std::string& state, const std::string& error);

 private:
  const config::Config& config_;
  const config::ConsumerConfig& consumer_;
  const std::string scope_;  // config::FormatScope of the consumer's scope
  std::optional<pg::Connection> sql_;
  std::optional<bool> has_timeline_column_;  // dblog.consumers has 0.6's columns
  bool HasTimelineColumn();
  // Runs `statement` (a write of request `request`'s bookkeeping); on failure logs `event`,
  // resets the connection and returns false when the source went away (written again later),
  // true otherwise (dropped).
  bool UnlessLost(std::string_view event, std::uint64_t request,
                  const std::function<void()>& statement);
  bool ddl_taken_ready_ = false;  // EnsureDdlTrigger made dblog.ddl_taken
};

}  // namespace dblog::consumer
