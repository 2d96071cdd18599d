// sidecar/consumer/pgoutput_source.h: one consumer's source in pgoutput mode (dblogd
// --source-plugin pgoutput, docs/pgoutput.md): its publication, the START_REPLICATION options
// of PostgreSQL's built-in plugin, and each XLogData payload turned into the events the
// extension's plugin would have written (pgoutput/decoder.h, pgoutput/translate.h), so that the
// pipeline after it is the extension mode's, unchanged.
//
// The publication is named as the slot, dblog_<consumer>, and publishes inserts, updates,
// deletes and truncates of exactly the tables in the consumer's scope (FOR TABLE: a publication
// FOR ALL TABLES or FOR TABLES IN SCHEMA needs a superuser, which managed services do not
// give). Before the slot is made, and at every connect, it is created, or brought to the scope
// (ALTER PUBLICATION ... ADD / DROP TABLE) when dblogd's role owns it; one it does not own that
// differs from the scope is refused with the statements that would fix it. A row filter, a
// column list, publish_via_partition_root or an operation not published is refused: any of them
// would leave changes out of the stream silently. A table joining the scope of a consumer that
// has bootstrapped is added with a whole-table repair (Pipeline::AddJoinedTables), or refused
// (TablesJoinedMessage) where repairs cannot run, never added silently.
// Owns: the publication's SQL, the replication options, the decoder and translator of the
// current stream. Blocking (the catalog reads): called on the consumer's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "dblog/v1/change.pb.h"
#include "pg/connection.h"
#include "pgoutput/decoder.h"
#include "pgoutput/translate.h"

namespace dblog::consumer {

// The source cannot serve this consumer in pgoutput mode as it is set up (a publication that
// does not match the scope, one dblogd may not create): what is wrong and the statement that
// fixes it. The consumer's session ends with SCOPE_ERROR.
class PublicationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the publication is now and what would make it hold exactly the scope; nothing changed.
struct PublicationPlan {
  std::size_t tables = 0;  // in the scope
  bool exists = false;
  bool owned = false;  // by dblogd's role
  // Why it cannot serve as it is, with the statement that fixes it; "" when it can (after
  // `statements`).
  std::string refused;
  std::vector<std::string> statements;  // CREATE, or ALTER ... ADD / DROP TABLE
  std::vector<std::string> added;       // tables the statements add to an existing one
  std::vector<std::uint32_t> added_oids;  // the same tables' oids
  // dblog.watermarks (repair windows' markers) is in the publication once the statements ran;
  // when not, why (repairs cannot run for this consumer; streaming goes on).
  std::string no_watermarks;
  bool watermarks_unheld = false;  // it exists, the publication lacks it, dblogd cannot add it
};

class PgoutputSource {
 public:
  PgoutputSource(const config::ConsumerConfig& consumer, std::string publication);

  // The publication as it is and the statements that make it hold exactly the scope's tables
  // (see above), nothing changed (also dblogd --check). Throws bootstrap::ScopeError (a table in
  // scope without a key, or with generated columns) or pg::Error.
  PublicationPlan PlanPublication(pg::Connection& sql) const;
  // Runs the plan's statements; throws PublicationError when it was refused or a statement
  // fails (with the statement for an administrator).
  void ApplyPublication(pg::Connection& sql, const PublicationPlan& plan);
  // Tables in the scope now that the publication does not hold (created, renamed or moved into
  // it since): their changes are not in the stream. One catalog query.
  std::vector<std::string> TablesMissingFromPublication(pg::Connection& sql) const;
  // What is wrong with the publication now ("" when nothing): dropped, FOR ALL TABLES or
  // IN SCHEMA, an operation no longer published, via the partition root, a row filter or a
  // column list. Its owner (or a superuser) may alter it at any time, and pgoutput then leaves
  // changes out of the slot's stream for good. One catalog query, for every heartbeat.
  std::string PublicationDrift(pg::Connection& sql) const;
  // dblog.watermarks (dblogd's role's) taken out of the publication: the windows' markers
  // written since are not in the stream. `owned`: dblogd's role owns the publication and can run
  // `statement`, which puts it back. One catalog query, for every heartbeat.
  struct WatermarksCheck {
    bool missing = false;
    bool owned = false;
    std::string statement;
  };
  WatermarksCheck CheckWatermarks(pg::Connection& sql) const;
  // Why a consumer whose bootstrap finished cannot go on with `tables` added when its repairs
  // cannot run (`why`), and what to do.
  std::string TablesJoinedMessage(const std::vector<std::string>& tables,
                                  const std::string& why) const;

  // START_REPLICATION's options: protocol 1, this publication, messages, text values.
  std::vector<std::pair<std::string, std::string>> PluginOptions() const;
  // The libpq keywords a replication connection of this mode needs: the output settings the
  // converter reads values under (pgoutput::kOutputSettings).
  static std::vector<std::pair<std::string, std::string>> ConnectionOverrides();

  // A new stream begins (first start, or after a reconnect): a new decoder and translator.
  // next_full_xid: the server's next 64-bit xid now (Bookkeeping::NextXid). `sql`: the
  // connection the translator reads the catalog through when a Relation message arrives.
  void StartStream(std::function<pg::Connection&()> sql, std::uint64_t next_full_xid);

  // One XLogData payload and its dataStart: appends the events it makes (0 or more) to *out.
  // Events of tables outside the scope are dropped (a publication changed by hand). Throws
  // pgoutput::DecodeError or pgoutput::TranslateError: the stream cannot go on.
  void Translate(std::uint64_t wal_start, std::string_view payload,
                 std::vector<dblog::v1::Event>* out);

 private:
  const config::ConsumerConfig& consumer_;
  const std::string publication_;
  std::unique_ptr<pgoutput::Decoder> decoder_;
  std::unique_ptr<pgoutput::Translator> translator_;
  // dblog.watermarks: its rows become the repair windows' markers (Message events with this
  // consumer's watermark prefix); other consumers' rows and its Relation are dropped.
  bool TakeWatermark(const pgoutput::LogicalMessage& message, std::uint64_t wal_start,
                     std::vector<dblog::v1::Event>* out);

  std::set<std::uint32_t> out_of_scope_;  // relations announced that the scope does not hold
  std::optional<std::uint32_t> watermarks_oid_;  // as its Relation message announced it
  std::vector<dblog::v1::Event> scratch_;
};

}  // namespace dblog::consumer
