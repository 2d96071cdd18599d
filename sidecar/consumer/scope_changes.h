// sidecar/consumer/scope_changes.h: tables entering a consumer's scope by DDL. The extension's
// event trigger (plugin/ddl_trigger.c) writes, in the DDL's transaction, one transactional
// message with prefix kScopeChangePrefix per ordinary table that ALTER TABLE ... RENAME TO,
// ALTER TABLE ... SET SCHEMA or ALTER SCHEMA ... RENAME TO moved, or ALTER TABLE ... SET LOGGED
// made a captured (permanent) table; the plugin forwards one only
// when that transaction did change the table (or its schema). This unit reads the message and
// decides whether the table entered this consumer's scope: then it is copied through repair
// windows, like a table added to the scope by configuration (Bookkeeping::QueueTableEnteringScope).
// A table leaving the scope needs nothing: the plugin stops streaming it at the DDL.
// Owns: the message's format (docs/operations.md, "Tables entering or leaving a scope by DDL")
// and the rule (no I/O), and
// ScopeChanges, the glue that queues each transaction's copies through Bookkeeping at its
// commit, once per table however many messages name it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "config/config.h"
#include "dblog/v1/consumer.pb.h"
#include "log/rate_limit.h"

namespace dblog::consumer {

inline constexpr const char* kScopeChangePrefix = "dblog.ddl";

// No message of the trigger is longer: four names of at most 63 bytes, each byte at worst six
// once escaped (\u001f), with their quotes, and 128 bytes for the rest (plugin/ddl_message.h,
// DBLOG_DDL_MESSAGE_MAX_BYTES). A longer one is not parsed: an older plugin may pass any.
inline constexpr std::size_t kMaxScopeChangeBytes = 128 + 4 * (2 + 6 * 63);

struct ScopeChange {
  std::uint32_t oid = 0;
  std::string kind;  // rename, set_schema, rename_schema, set_logged
  std::string old_schema, old_name;
  std::string new_schema, new_name;
};

// The message's content: one flat JSON object with "oid" (a number) and the five strings;
// nullopt when it is not that or longer than kMaxScopeChangeBytes (other members are ignored,
// for later versions).
std::optional<ScopeChange> ParseScopeChange(std::string_view content);

// The table was not in `scope` under its old name (or was unlogged: set_logged) and is under its
// new one. dblog's own schema
// and the system schemas are never in a scope (as bootstrap::EnumerateScope).
// `old_name_unsettled`: the DDL was written before a change of the consumer's scope that the
// stream has not read past yet (UnsettledScopeChanges): what the consumer has of the table under
// its old name depends on which scopes were in force while it was read, so the table counts as
// not captured before, whatever its old name (a copy too many is harmless, one too few is not).
bool EntersScope(const config::Scope& scope, const ScopeChange& change,
                 bool old_name_unsettled = false);

// Changes of a consumer's scope (SIGHUP, or a restart with another scope) that its stream has
// not read past: per consumer, the WAL's end when the last one was found (at a connection). It
// outlives the connections, so that a reconnection before the stream gets there (a sink
// retrying, a second SIGHUP) keeps it; thread-safe (each consumer's pipeline has its thread).
// Not kept across a restart of dblogd (docs/repairs.md, "Tables added to a consumer's scope").
class UnsettledScopeChanges {
 public:
  // A change found now, when the WAL ends at `wal_end`: kept as the later of the two.
  void Found(const std::string& consumer, std::uint64_t wal_end);
  // The boundary in force (0: none): messages written before it are read as EntersScope's
  // old_name_unsettled.
  std::uint64_t Boundary(const std::string& consumer) const;
  // The stream read a commit at or past `boundary`: forgotten unless a later change came since.
  void Settled(const std::string& consumer, std::uint64_t boundary);

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t> boundaries_;
};

class Bookkeeping;

// The stream cannot go on past this message: its table entered the scope without a key
// (SCOPE_ERROR, as at connect), or the copy could not be queued (SOURCE_ERROR). The consumer's
// session ends before the message's transaction can be acknowledged, so the next connection
// reads the message again.
class ScopeChangeError : public std::runtime_error {
 public:
  ScopeChangeError(dblog::v1::Error::Code code, const std::string& what)
      : std::runtime_error(what), code_(code) {}
  dblog::v1::Error::Code code() const { return code_; }

 private:
  dblog::v1::Error::Code code_;
};

// The kScopeChangePrefix messages of the transaction being read, for one consumer. Any role may
// repeat the trigger's message (the plugin passes a copy of a real one) or, through an older
// plugin, forge any number: a table is remembered once per transaction, and its copy queued
// (dblog.request_queue, for this consumer; none when one is queued and not started yet) and
// logged at the commit, so that many messages cost one statement per table, not per message.
// The request reaches the pipeline through the log like any other.
class ScopeChanges {
 public:
  // Tables logged one line each per transaction; past them, one scope_tables_entered line.
  static constexpr std::size_t kLoggedTables = 10;

  // `unsettled`: the changes of the scope the stream has not read past (nullptr: none, tests).
  explicit ScopeChanges(const config::ConsumerConfig& consumer,
                        UnsettledScopeChanges* unsettled = nullptr)
      : consumer_(consumer), unsettled_(unsettled) {}

  // The stream starts: the boundary of the unsettled changes of the scope is read once.
  void OnStreamStart();
  // A transaction begins (also again after a reconnect): what an earlier one left is dropped.
  void OnBegin();
  // A message of the transaction: its table is remembered when it entered the scope.
  void OnMessage(const dblog::v1::Message& message);
  // The transaction's commit, before it is forwarded: queues the remembered tables' copies and
  // logs them. Throws ScopeChangeError; then the session ends before the commit is
  // acknowledged, so the next connection reads the messages again.
  void OnCommit(Bookkeeping& bookkeeping, std::uint64_t commit_lsn);

  // The tables remembered so far (for tests).
  const std::vector<ScopeChange>& entering() const { return entering_; }

 private:
  struct Tally {
    std::size_t queued = 0, already_queued = 0, gone = 0, out_of_scope_now = 0;
  };
  void Queue(const ScopeChange& change, std::uint64_t xid, Bookkeeping& bookkeeping, Tally& tally,
             std::size_t index);

  const config::ConsumerConfig& consumer_;
  std::uint64_t xid_ = 0;
  std::vector<ScopeChange> entering_;
  std::unordered_set<std::uint32_t> oids_;
  log::RateLimited unreadable_log_{std::chrono::seconds(10)};
  UnsettledScopeChanges* unsettled_;
  std::uint64_t boundary_ = 0;  // OnStreamStart: messages before it are read as unsettled
};

}  // namespace dblog::consumer
