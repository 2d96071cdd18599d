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
// CopyIfEntering, the glue that queues the copy through Bookkeeping.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "config/config.h"
#include "dblog/v1/consumer.pb.h"

namespace dblog::consumer {

inline constexpr const char* kScopeChangePrefix = "dblog.ddl";

struct ScopeChange {
  std::uint32_t oid = 0;
  std::string kind;  // rename, set_schema, rename_schema, set_logged
  std::string old_schema, old_name;
  std::string new_schema, new_name;
};

// The message's content: one flat JSON object with "oid" (a number) and the five strings;
// nullopt when it is not that (other members are ignored, for later versions).
std::optional<ScopeChange> ParseScopeChange(std::string_view content);

// The table was not in `scope` under its old name (or was unlogged: set_logged) and is under its
// new one. dblog's own schema
// and the system schemas are never in a scope (as bootstrap::EnumerateScope).
bool EntersScope(const config::Scope& scope, const ScopeChange& change);

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

// A kScopeChangePrefix message from the log: when its table entered `consumer`'s scope, queue
// a whole-table copy (dblog.request_queue, for this consumer; none when one is queued and not
// started yet). The request reaches the pipeline through the log like any other. Logs what it
// did; throws ScopeChangeError.
void CopyIfEntering(const dblog::v1::Message& message, const config::ConsumerConfig& consumer,
                    Bookkeeping& bookkeeping);

}  // namespace dblog::consumer
