// sidecar/consumer/pipeline.cc: one consumer's slot, bootstrap, stream and acks (see pipeline.h).
#include "consumer/pipeline.h"

#include "bootstrap/scope.h"
#include "consumer/ddl_trigger.h"
#include "consumer/scope_changes.h"
#include "consumer/watermark.h"
#include "log/log.h"
#include "pg/slot.h"
#include "wire/frame.h"

#include <algorithm>
#include <thread>

namespace dblog::consumer {
namespace asio = boost::asio;
using dblog::v1::Error;

namespace {

constexpr std::size_t kMaxUnacknowledged = 1u << 20;  // commits in flight before pausing

// PostgreSQL invalidated the slot (max_slot_wal_keep_size): what the consumer had not
// acknowledged is gone from the WAL, and no retry can read it. What happened, what to do.
std::string SlotLostMessage(const std::string& slot) {
  return "slot " + slot + " was invalidated by PostgreSQL (wal_status = lost): this consumer "
         "fell more than max_slot_wal_keep_size behind, and the changes it had not acknowledged "
         "are gone from the WAL. To recover, drop the slot (SELECT pg_drop_replication_slot('" +
         slot + "')); the next connection bootstraps again with BootstrapBegin.restarted = true "
         "(or, with --on-slot-lost=reconcile, repairs every table in scope from a new slot) "
         "(docs/operations.md, \"Slots and WAL retention\")";
}

std::int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Pipeline::Pipeline(asio::io_context& io, const config::Config& config,
                   config::ConsumerConfig consumer, std::shared_ptr<metrics::ConsumerStats> stats,
                   std::shared_ptr<server::Session> session, dblog::v1::Hello hello,
                   std::function<void(const std::string&)> on_finished,
                   std::shared_ptr<UnsettledScopeChanges> unsettled)
    : io_(io),
      config_(config),
      consumer_(std::move(consumer)),
      slot_(SlotName(consumer_.name)),
      stats_(std::move(stats)),
      session_(std::move(session)),
      hello_(std::move(hello)),
      on_finished_(std::move(on_finished)),
      bookkeeping_(config_, consumer_),
      unsettled_(std::move(unsettled)),
      backoff_(config.reconnect_min),
      heartbeat_timer_(io),
      status_timer_(io),
      reconnect_timer_(io),
      slot_wait_timer_(io),
      shutdown_timer_(io),
      parse_block_(new char[kParseBlockBytes]),
      parse_arena_(ParseArenaOptions(parse_block_.get(), kParseBlockBytes)),
      repairs_(std::make_unique<Repairs>(io, config_, consumer_, *stats_, bookkeeping_, *this)) {
  if (config_.source_plugin == config::SourcePlugin::kPgoutput)
    pgoutput_ = std::make_unique<PgoutputSource>(consumer_, slot_);
}

google::protobuf::ArenaOptions Pipeline::ParseArenaOptions(char* block, std::size_t size) {
  google::protobuf::ArenaOptions options;
  options.initial_block = block;  // kept across Reset: a batch of the default size fits
  options.initial_block_size = size;
  options.max_block_size = size;
  return options;
}

Pipeline::~Pipeline() {
  if (bootstrap_) bootstrap_->Stop();
}

std::vector<std::pair<std::string, std::string>> Pipeline::PluginOptions() const {
  if (pgoutput_) {
    // pgoutput cannot filter messages by prefix and sends each whole (up to about 1 GB, from
    // any role): ask for none unless the consumer wants some (security review F2).
    auto options = pgoutput_->PluginOptions();
    if (hello_.message_prefixes().empty())
      for (auto& [k, v] : options)
        if (k == "messages") v = "false";
    return options;
  }
  // Messages: this consumer's watermarks, the DDL that moved tables (consumer/scope_changes.h)
  // and what it asked for, nothing else, so that a large message anyone may write never
  // reaches dblogd unless a consumer wants it.
  std::string prefixes = std::string(kWatermarkPrefix) + "," + kScopeChangePrefix;
  for (const auto& p : hello_.message_prefixes()) prefixes += "," + p;
  std::vector<std::pair<std::string, std::string>> options{
      {"proto_version", "1"},
      {"format", "binary"},
      {"include_tables", config::PluginIncludeOption(consumer_.scope)},
      {"batch_bytes", std::to_string(config_.batch_bytes)},
      {"control", "on"},
      {"message_prefixes", prefixes},
      {"message_max_bytes", std::to_string(config_.max_message_bytes)}};
  // Long values in pieces (change.proto, SplitValue) only for a client that puts them together:
  // an older one would not know a ValuePiece.
  if (hello_.split_values() && config_.value_piece_bytes > 0)
    options.emplace_back("value_piece_bytes", std::to_string(config_.value_piece_bytes));
  return options;
}

std::set<std::string> UnconfiguredWithSlots(const config::Config& config) {
  std::string configured = "{";  // names are [a-z0-9_]: nothing to quote in the array literal
  for (const auto& [n, c] : config.consumers)
    configured += (configured.size() > 1 ? "," : "") + Pipeline::SlotName(n);
  configured += "}";
  pg::Connection sql = pg::Connection::Open(config.source, false,
                                            {{"application_name", "dblogd admission"}});
  pg::Result r = sql.ExecParams(
      "SELECT slot_name FROM pg_replication_slots"
      " WHERE plugin = $2 AND database = current_database()"
      "   AND slot_name LIKE 'dblog\\_%' AND slot_name <> ALL ($1::text[])",
      {configured, std::string(config::SourcePluginName(config.source_plugin))});
  std::set<std::string> names;
  const std::string prefix = Pipeline::SlotName("");
  for (int i = 0; i < r.ntuples(); ++i) names.insert(std::string(r.value(i, 0)).substr(prefix.size()));
  return names;
}

server::ConsumerFactory MakeConsumerFactory(const config::Config& config) {
  server::ConsumerFactory f;
  auto unsettled = std::make_shared<UnsettledScopeChanges>();  // every consumer's, for the run
  f.make = [&config, unsettled](asio::io_context& io, const config::ConsumerConfig& consumer,
                                std::shared_ptr<metrics::ConsumerStats> stats,
                                std::shared_ptr<server::Session> session,
                                const dblog::v1::Hello& hello,
                                std::function<void(const std::string&)> on_finished) {
    return std::make_shared<Pipeline>(io, config, consumer, std::move(stats), std::move(session),
                                      hello, std::move(on_finished), unsettled);
  };
  f.unconfigured_with_slots = [](const config::Config& now) { return UnconfiguredWithSlots(now); };
  return f;
}

void Pipeline::Start() {
  session_->Attach(this);
  stats_->connected = 1;
  stats_->connected_since_us = NowMicros();
  stats_->disconnected_since_us = 0;
  stats_->SetSession(session_->peer(), hello_.client_name());
  // The last session's unacknowledged commits are sent again and counted when they are.
  stats_->oldest_unacked_commit_us = 0;
  Guarded([this] { Prepare(); });
}

template <typename F>
void Pipeline::Guarded(F&& step) {
  try {
    step();
  } catch (const bootstrap::ScopeError& e) {
    Fail(Error::SCOPE_ERROR, e.what());
  } catch (const PublicationError& e) {
    Fail(Error::SCOPE_ERROR, e.what());
  } catch (const ResumeAheadError& e) {
    Fail(Error::PROTOCOL_VIOLATION, e.what());
  } catch (const std::exception& e) {
    Fail(Error::SOURCE_ERROR, e.what());
  }
}

void Pipeline::Prepare() {
  std::optional<PublicationPlan> publication;
  if (pgoutput_) {
    // pgoutput mode: the publication (read here, brought to the scope below, before the slot,
    // which decodes it from its creation on) and the consumer's row where the extension would
    // keep it; no extension.
    publication = pgoutput_->PlanPublication(bookkeeping_.Sql());
    if (!publication->refused.empty()) throw PublicationError(publication->refused);
    bookkeeping_.EnsureConsumersTable();
    // the repair API, then the plan again: it holds dblog.watermarks once that exists
    const std::string no_repairs = bookkeeping_.EnsureRepairApi();
    publication = pgoutput_->PlanPublication(bookkeeping_.Sql());
    if (!publication->refused.empty()) throw PublicationError(publication->refused);
    const std::string why = no_repairs.empty() ? publication->no_watermarks : no_repairs;
    if (!why.empty())
      log::Warn("repairs_unavailable", {{"consumer", consumer_.name}, {"reason", why}});
    if (why.empty())  // the DDL trigger is a help, never a reason not to stream
      bookkeeping_.BestEffort(log::Level::kWarn, "ddl_trigger_check_failed",
                              {{"consumer", consumer_.name}},
                              [&] { bookkeeping_.EnsureDdlTrigger(); });
    repairs_unavailable_ = why;
    // a publication of another role's without dblog.watermarks: available once its owner
    // puts it in (CheckWatermarksPublished)
    watermarks_unpublished_ = no_repairs.empty() && publication->watermarks_unheld;
    repairs_->SetUnavailable(why.empty() ? "" : "repairs cannot run in pgoutput mode: " + why);
  } else {
    bookkeeping_.CheckExtension();
    bookkeeping_.Preflight();
  }
  pg::Connection& sql = bookkeeping_.Sql();
  pg::SlotInfo slot = pg::GetSlot(sql, slot_);
  // This consumer's previous connection may have ended a moment ago: its walsender exits
  // asynchronously. Give it a little time before calling the slot taken.
  for (int i = 0; i < 20 && slot.exists && slot.active; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    slot = pg::GetSlot(sql, slot_);
  }
  if (slot.exists && slot.active)
    throw std::runtime_error("slot " + slot_ + " is in use by another process (pid " +
                             std::to_string(slot.active_pid.value_or(0)) + ")");
  const std::string plugin = config::SourcePluginName(config_.source_plugin);
  if (slot.exists && slot.plugin != plugin)
    throw std::runtime_error("slot " + slot_ + " was made with plugin " + slot.plugin + ", not " +
                             plugin +
                             " (--source-plugin): it belongs to dblogd in the other "
                             "mode; give this consumer another name, or drop the slot");
  const std::optional<std::string> state = bookkeeping_.BootstrapState();
  const bool finished = state && (*state == "done" || *state == "skipped");
  if (publication) {
    // A table that joined the scope of a consumer streaming from its slot needs a copy: a
    // repair, queued with the publication's change (refused where repairs cannot run), unless
    // the consumer runs without bootstrap.
    const bool resumes = slot.exists && (finished || !config_.bootstrap);
    if (resumes && !publication->added.empty() && config_.bootstrap) {
      if (!repairs_unavailable_.empty())
        throw PublicationError(
            pgoutput_->TablesJoinedMessage(publication->added, repairs_unavailable_));
      AddJoinedTables(sql, *publication);
      publication->statements.clear();  // applied
    }
    if (resumes && !publication->added.empty() && !config_.bootstrap) {
      for (const auto& table : publication->added)
        log::Warn("publication_table_added",
                  {{"consumer", consumer_.name}, {"table", table},
                   {"message", "the table joined the consumer's scope after its slot was made; "
                               "with --bootstrap=false its earlier rows and changes are not in "
                               "the stream (docs/pgoutput.md)"}});
    }
    pgoutput_->ApplyPublication(sql, *publication);
  }

  if (config_.bootstrap && finished && !slot.exists && hello_.has_resume_after() &&
      config_.on_slot_lost == config::Config::SlotLost::kReconcile)
    return Reconcile();
  if (config_.bootstrap && !(slot.exists && finished)) {
    // A slot whose bootstrap never finished is not a resume point: redo it from a new slot.
    if (slot.exists) {
      log::Warn("bootstrap_restart", {{"consumer", consumer_.name}, {"slot", slot_},
                                      {"reason", "earlier bootstrap did not finish"}});
      pg::DropSlot(sql, slot_, true);
    }
    const bool restarted = state.has_value();
    CreateSlotThen(true, [this, restarted](const pg::CreatedSlot& created) {
      stream_origin_ = restarted ? "bootstrapped again from a new slot"
                                 : "bootstrapped from a new slot";
      StartBootstrap(created, restarted);
    });
    return;
  }
  if (slot.exists) {
    if (slot.wal_status == "lost") throw std::runtime_error(SlotLostMessage(slot_));
    confirmed_ = slot.confirmed_flush_lsn;
    stream_origin_ = "resumed from its slot";
    return BeginStreaming(true);
  }
  CreateSlotThen(false, [this](const pg::CreatedSlot& created) {
    stream_origin_ = "a new slot without a bootstrap (--bootstrap=false): changes since the "
                     "consumer's position are not in its stream";
    bookkeeping_.RecordSkippedBootstrap(slot_, created.consistent_point);
    confirmed_ = created.consistent_point;
    log::Info("slot_created", {{"consumer", consumer_.name},
                               {"slot", slot_},
                               {"consistent_point", common::FormatLsn(created.consistent_point)}});
    BeginStreaming(false);
  });
}

// --on-slot-lost=reconcile: the consumer's bootstrap finished, it resumes, and its slot is gone
// (a failover to a standby that never had it, or dropped by hand). Instead of a new bootstrap,
// which would empty the consumer: a new slot, the WAL brought past the consumer's position (a
// promoted standby may lack the last commits the consumer applied, and no position at or before
// it may be sent), and a whole-table repair of every table in scope, queued before streaming
// begins. Each repair window reads the source after the slot's consistent point and after every
// change the stream does not send one by one (those between the consumer's position and the
// new slot's), so every key converges to the source's value, absent keys as deletes (O3).
// Welcome.reconcile tells the consumer. Repairs that were queued before keep their progress
// (dblog.request_queue is the source's own table, on the new primary too); a bootstrap that had
// not finished is redone instead (no resume point to reconcile from).
// Crash-safe by its order: the WAL is padded and the repairs are committed before the slot is
// made, so a failure (or a SIGKILL) before the slot exists leaves the next connection to
// reconcile again (queueing the repairs once more, which is harmless), and one after finds the
// repairs queued; never a new slot streaming without them. The tables that entered the scope
// while the slot was made are queued after it exists: a SIGKILL between the two (the time of one
// catalog query) is the one way to miss them (docs/correctness.md, limit 15).
void Pipeline::Reconcile() {
  if (!repairs_unavailable_.empty())
    throw std::runtime_error("the consumer's slot is gone and --on-slot-lost=reconcile needs "
                             "repairs, which cannot run: " + repairs_unavailable_ +
                             " (or drop the consumer's row of dblog.consumers to bootstrap "
                             "again)");
  const std::uint64_t resume = hello_.resume_after().commit_lsn();
  log::Warn("slot_missing_reconcile",
            {{"consumer", consumer_.name}, {"slot", slot_},
             {"resume_after", common::FormatLsn(resume)},
             {"message", "the consumer's slot is gone although its bootstrap finished (a "
                         "failover, or dropped by hand): a new slot and a whole-table repair of "
                         "every table in scope (--on-slot-lost=reconcile)"}});
  bookkeeping_.PadWalPast(resume);
  // throws bootstrap::ScopeError for a table in scope without a key, before anything is queued
  const auto enumerate = [this] {
    std::vector<bootstrap::Table> tables = bootstrap::EnumerateScope(
        bookkeeping_.Sql(), consumer_.scope,
        pgoutput_ ? bootstrap::Reader::kCatalog : bootstrap::Reader::kExtension);
    if (pgoutput_) {
      std::vector<std::uint32_t> oids;
      for (const auto& t : tables) oids.push_back(t.oid);
      const std::vector<std::string> untrusted = bookkeeping_.UntrustedOwners(oids);
      if (!untrusted.empty())
        throw std::runtime_error("the consumer's slot is gone and --on-slot-lost=reconcile "
                                 "cannot repair every table in scope: " +
                                 UntrustedOwnerMessage(untrusted.front()));
    }
    return tables;
  };
  const std::vector<bootstrap::Table> tables = enumerate();
  const std::vector<std::uint64_t> ids = bookkeeping_.QueueReconcile(tables);
  CreateSlotThen(false, [this, ids, tables, enumerate](const pg::CreatedSlot& created) {
    // The new slot's point first of all, with the timeline: a session after this one, which
    // the consumer may reach without having read this one's Welcome (dblogd killed before it
    // streamed, the consumer gone before it applied anything), still tells it
    // (StartStreaming); the timeline recorded now keeps a later stream start from writing
    // over it. The repairs' count is the first enumeration's (the log line has the late ones).
    stream_origin_ = "reconciled: a new slot at " + common::FormatLsn(created.consistent_point) +
                     " and " + std::to_string(ids.size()) + " whole-table repair(s)";
    try {
      if (repl_) NoteTimeline(*repl_);
    } catch (const std::exception&) {
      // the stream's start reads the timeline again (and fails there if the source is gone)
    }
    bookkeeping_.BestEffort(log::Level::kWarn, "reconcile_not_recorded",
                            {{"consumer", consumer_.name}},
                            [&] { bookkeeping_.RecordReconcile(stream_origin_); });
    // A table that entered the scope after the enumeration above and before the slot's
    // consistent point (created, renamed or moved in while the slot waited for open
    // transactions, as a failover's busy new primary makes it) is in neither: its changes
    // before that point are not in the stream, and nothing queued its repair. Enumerated again
    // now that the point is behind, and queued before anything streams; should that fail, the
    // new slot goes, so that the next connection reconciles from the start.
    std::vector<std::uint64_t> all = ids;
    std::vector<bootstrap::Table> late;
    try {
      for (auto& t : enumerate())
        if (std::none_of(tables.begin(), tables.end(),
                         [&](const bootstrap::Table& e) { return e.oid == t.oid; }))
          late.push_back(std::move(t));
      if (!late.empty()) {
        const std::vector<std::uint64_t> more = bookkeeping_.QueueReconcile(late);
        all.insert(all.end(), more.begin(), more.end());
        for (const auto& t : late)
          log::Warn("reconcile_table_entered",
                    {{"consumer", consumer_.name}, {"table", t.schema + "." + t.name},
                     {"message", "the table entered the scope while the new slot was made: "
                                 "repaired too"}});
      }
    } catch (...) {
      bookkeeping_.BestEffort(log::Level::kWarn, "reconcile_slot_drop_failed",
                              {{"consumer", consumer_.name}},
                              [&] { pg::DropSlot(bookkeeping_.Sql(), slot_, true); });
      throw;
    }
    const std::size_t count = tables.size() + late.size();
    reconcile_ = dblog::v1::Reconcile();
    reconcile_->set_consistent_point(created.consistent_point);
    for (std::uint64_t id : all) reconcile_->add_request_ids(id);
    stats_->reconciles_total++;
    log::Warn("slot_reconciled",
              {{"consumer", consumer_.name}, {"slot", slot_},
               {"consistent_point", common::FormatLsn(created.consistent_point)},
               {"tables", static_cast<std::uint64_t>(count)},
               {"message", "changes between the consumer's position and the new slot's "
                           "consistent point are not streamed one by one; the queued repairs "
                           "bring every key to the source's value"}});
    confirmed_ = created.consistent_point;
    BeginStreaming(false);
  });
}

void Pipeline::CreateSlotThen(bool export_snapshot,
                              std::function<void(const pg::CreatedSlot&)> next) {
  pg::Connection repl = pg::Connection::Open(config_.source, true,
                                             {{"application_name", "dblogd " + consumer_.name}});
  stats_->slot_creation_started_us = NowMicros();
  slot_creation_ = std::make_unique<SlotCreation>(
      io_, std::move(repl), slot_, config::SourcePluginName(config_.source_plugin), export_snapshot,
      [this, next = std::move(next)](SlotCreation::Outcome outcome) {
        const auto waited = slot_creation_->elapsed();
        slot_creation_.reset();
        slot_wait_timer_.cancel();
        stats_->slot_creation_started_us = 0;
        if (waited >= std::chrono::seconds(1) && state_ != State::kDone)
          log::Info("slot_creation_done",
                    {{"consumer", consumer_.name}, {"slot", slot_},
                     {"waited_ms", std::chrono::duration_cast<std::chrono::milliseconds>(waited)
                                       .count()},
                     {"created", outcome.slot ? "true" : "false"}});
        if (state_ == State::kDone) return;
        repl_ = std::move(outcome.repl);
        Guarded([&] {
          if (outcome.error) std::rethrow_exception(outcome.error);
          next(*outcome.slot);
        });
      });
  slot_wait_timer_.expires_after(std::chrono::seconds(1));
  slot_wait_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (auto self = weak.lock(); self && !ec) self->SlotWaitTick();
  });
}

// Once a second while the slot creation waits: the client hears it (so that it does not give
// up waiting for Welcome), and dblogd's log names what it waits for (then every 30 s).
void Pipeline::SlotWaitTick() {
  if (!slot_creation_ || state_ == State::kDone) return;
  const auto now = std::chrono::steady_clock::now();
  const auto waited = slot_creation_->elapsed();
  const bool log_now = slot_wait_logged_ == std::chrono::steady_clock::time_point{} ||
                       now - slot_wait_logged_ >= std::chrono::seconds(30);
  if (log_now) {
    // what the slot creation waits for: the transactions blocking its walsender, for people
    slot_waiting_for_ = bookkeeping_.Blockers(slot_creation_->backend_pid());
    slot_wait_logged_ = now;
    log::Warn("slot_creation_waiting",
              {{"consumer", consumer_.name}, {"slot", slot_},
               {"waited_s", std::chrono::duration_cast<std::chrono::seconds>(waited).count()},
               {"waiting_for", slot_waiting_for_},
               {"message", "CREATE_REPLICATION_SLOT waits until every transaction that held an "
                           "xid when it began has ended; other consumers are not affected"}});
  }
  dblog::v1::ServerMessage m;
  dblog::v1::Progress* p = m.mutable_progress();
  p->set_phase("creating_slot");
  p->set_waiting_ms(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()));
  p->set_waiting_for(slot_waiting_for_);
  session_->Send(m);
  slot_wait_timer_.expires_after(std::chrono::seconds(1));
  slot_wait_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (auto self = weak.lock(); self && !ec) self->SlotWaitTick();
  });
}

// Streaming from a slot that exists (made just now, or by an earlier connection).
void Pipeline::BeginStreaming(bool slot_existed) {
  // A resume point the source has not reached was not made from this source's stream (another
  // cluster, a restored backup of the target, a typo): waiting for it would look like a
  // healthy, silent stream forever.
  if (hello_.has_resume_after()) {
    const std::uint64_t wal = bookkeeping_.CurrentWalInsertLsn();
    if (hello_.resume_after().commit_lsn() > wal)
      throw ResumeAheadError(
          "Hello.resume_after " + common::FormatLsn(hello_.resume_after().commit_lsn()) +
          " is ahead of the source's WAL (" + common::FormatLsn(wal) +
          "): it does not come from this source's stream; resume from a position this source "
          "sent, or start a new consumer");
  }
  if (!pgoutput_) {  // (pgoutput mode: PreparePgoutput enumerated the scope)
    // refuses keyless tables before streaming
    const std::vector<bootstrap::Table> tables =
        bootstrap::EnumerateScope(bookkeeping_.Sql(), consumer_.scope);
    // A table that joined the consumer's scope since its bootstrap is copied through repair
    // windows (the slot stays): a whole-table request per new table, queued like any other.
    // A rename into the scope that the stream has not read yet may come from a name the old
    // scope did not hold, so that the consumer lacks the table's rows: until the stream reads
    // past the WAL's end now, such messages copy their table whatever the old name
    // (ScopeChanges, UnsettledScopeChanges).
    if (slot_existed && bookkeeping_.QueueTablesAddedToScope(tables))
      unsettled_->Found(consumer_.name, bookkeeping_.CurrentWalInsertLsn());
    scope_changes_.OnStreamStart();
  }

  const emit::Position resume = emit::Position::FromProto(hello_.resume_after());
  if (slot_existed && !reconcile_ && resume.commit_lsn != 0) {
    // The consumer is still before the last reconcile's new slot: it has not read past that
    // session's Welcome, which may never have reached it. Said again, so that it knows the
    // changes between its position and the slot's are not coming one by one (a sink that
    // follows a column's lossy type change emptied only then, dblog apply's limit 14).
    std::optional<std::uint64_t> point;
    bookkeeping_.BestEffort(log::Level::kWarn, "reconcile_not_read",
                            {{"consumer", consumer_.name}},
                            [&] { point = bookkeeping_.ReconcilePoint(); });
    if (point && resume.commit_lsn < *point) {
      reconcile_ = dblog::v1::Reconcile();
      reconcile_->set_consistent_point(*point);
      log::Warn("reconcile_announced_again",
                {{"consumer", consumer_.name}, {"consistent_point", common::FormatLsn(*point)},
                 {"resume_after", common::FormatLsn(resume.commit_lsn)},
                 {"message", "the consumer has not read past the last reconcile's new slot: "
                             "its Welcome says the reconcile again"}});
    }
  }
  acks_ = std::make_unique<emit::AckTracker>(confirmed_, resume);
  emitter_ = std::make_unique<emit::Emitter>(resume, acks_.get());
  SendWelcome(!slot_existed, &resume);
  stats_->confirmed_lsn = confirmed_;
  log::Info("consumer_streaming", {{"consumer", consumer_.name}, {"slot", slot_},
                                   {"from", common::FormatLsn(confirmed_)},
                                   {"resume_after", common::FormatLsn(resume.commit_lsn) + "#" +
                                                        std::to_string(resume.seq)}});
  repairs_->LoadQueued();
  if (pgoutput_) repairs_->PollQueue();  // no request reaches dblogd through this mode's log
  StartStream();
  Heartbeat();
  repairs_->Schedule();  // queued requests start now, not at the log's next message
}

void Pipeline::SendWelcome(bool slot_created, const emit::Position* resume) {
  dblog::v1::ServerMessage welcome;
  auto* w = welcome.mutable_welcome();
  w->set_protocol_version(dblog::v1::PROTOCOL_VERSION_1);
  w->set_slot(slot_);
  w->set_slot_created(slot_created);
  if (resume) *w->mutable_resume_from() = resume->ToProto();
  w->set_confirmed_flush_lsn(confirmed_);
  for (const auto& p : consumer_.scope.patterns()) w->add_scope(p);
  w->set_server_name("dblogd/0.1.0");
  w->set_source_plugin(config::SourcePluginName(config_.source_plugin));
  if (reconcile_) *w->mutable_reconcile() = *reconcile_;
  session_->Send(welcome);
}

void Pipeline::StartBootstrap(const pg::CreatedSlot& created, bool restarted) {
  state_ = State::kBootstrapping;
  // From here until every worker imported the snapshot, repl_ must stay idle.
  confirmed_ = created.consistent_point;
  bootstrap_ = std::make_unique<BootstrapRun>(io_, config_, consumer_, slot_, *stats_,
                                              bookkeeping_, *this);
  bootstrap_->Start(created, restarted);
  // Every worker holds the snapshot now; repl_ may be used again (for START_REPLICATION).

  acks_ = std::make_unique<emit::AckTracker>(confirmed_);
  emitter_ = std::make_unique<emit::Emitter>(emit::Position{}, acks_.get());
  SendWelcome(true, nullptr);
  bootstrap_->Begin();
  Heartbeat();
  bootstrap_->Drain();
}

void Pipeline::Copied() {
  // Requests committed before this slot's consistent point are not in its stream: a bootstrap
  // redone from a new slot would never see one made during the earlier attempt. Take them
  // from the queue (those the stream does carry are known by id and not loaded twice).
  bookkeeping_.BestEffort(log::Level::kError, "repair_load_failed",
                          {{"consumer", consumer_.name}}, [&] { repairs_->LoadQueued(); });
  // Called from the copy's drain: nothing above catches. A stream that cannot start (the
  // source went away, or the slot was dropped meanwhile) is retried like a lost source,
  // never an exception out of the connection's thread (which would end dblogd).
  try {
    StartStream();
  } catch (const std::exception& e) {
    state_ = State::kStreaming;  // so that SourceLost schedules the attempts
    SourceLost(e.what());
    return;
  }
  if (pgoutput_) repairs_->PollQueue();
  repairs_->Schedule();
}

void Pipeline::StartStream() {
  if (!stream_started_once_) {
    // Transactions committed before the stream's start are not in the key log: a window whose
    // snapshot might not see one of them cannot be widened, and fails closed (window/).
    repairs_->ForgetTransactionsBelow(bookkeeping_.NextXid());
    stream_started_once_ = true;
  }
  if (!repl_) {
    std::vector<std::pair<std::string, std::string>> overrides = {
        {"application_name", "dblogd " + consumer_.name}};
    if (pgoutput_)
      for (auto& o : PgoutputSource::ConnectionOverrides()) overrides.push_back(std::move(o));
    repl_ = pg::Connection::Open(config_.source, true, overrides);
  }
  NoteTimeline(*repl_);
  if (pgoutput_)
    pgoutput_->StartStream([this]() -> pg::Connection& { return bookkeeping_.Sql(); },
                           bookkeeping_.NextXid());
  pg::ReplicationStream::Options options;
  options.status_interval = config_.status_interval;
  stream_ = std::make_unique<pg::ReplicationStream>(io_, std::move(*repl_), *this, options);
  repl_.reset();
  stream_->SetFlushedLsn(confirmed_);
  stream_->Start(slot_, 0, PluginOptions());
  state_ = State::kStreaming;
}

// The source's timeline (IDENTIFY_SYSTEM) at each stream start: another one than the last seen
// for this consumer means a standby was promoted since (a failover), which the log, /metrics
// and the consumer's row (dblog.consumer_status: failed_over_at, failover) say whatever became
// of the slot. The row is the source's own, so a promoted standby holds the timeline of the
// primary it replaced: a failover is seen also by a dblogd that restarted meanwhile.
void Pipeline::NoteTimeline(pg::Connection& repl) {
  pg::Result id = repl.Exec("IDENTIFY_SYSTEM");
  if (id.ntuples() != 1 || id.is_null(0, 1)) return;
  const std::uint64_t timeline = id.u64_value(0, 1);
  std::uint64_t before = stats_->source_timeline.exchange(timeline);
  bookkeeping_.BestEffort(log::Level::kWarn, "timeline_not_recorded",
                          {{"consumer", consumer_.name}}, [&] {
                            const auto stored = bookkeeping_.RecordTimeline(timeline,
                                                                            stream_origin_);
                            if (stored && before == 0) before = *stored;
                          });
  if (before == 0 || before == timeline) return;
  stats_->timeline_changes++;
  log::Warn("source_promoted",
            {{"consumer", consumer_.name}, {"timeline_before", before}, {"timeline", timeline},
             {"stream", stream_origin_},
             {"message", "the source is on another timeline than when this consumer last "
                         "streamed: a standby was promoted (a failover)"}});
}

// Runs `process` (ProcessEvent over one message's events); what it throws ends the session.
template <typename F>
bool Pipeline::Dispatched(F&& process) {
  try {
    process();
    return true;
  } catch (const ScopeChangeError& e) {
    Fail(e.code(), e.what());
  } catch (const std::exception& e) {
    log::Error("emitter_refused", {{"consumer", consumer_.name}, {"error", e.what()}});
    Fail(Error::SOURCE_ERROR, std::string("internal ordering error: ") + e.what());
  }
  return false;
}

void Pipeline::OnData(std::uint64_t wal_start, std::uint64_t wal_end, std::string_view payload) {
  if (state_ != State::kStreaming) return;
  backoff_ = config_.reconnect_min;
  if (pgoutput_) return OnPgoutputData(wal_start, wal_end, payload);
  // Everything parsed goes when this returns (the emitter and the key log copy what they keep),
  // and what a large message needed is not kept for the next (at most kKeptViews views).
  struct Release {
    Pipeline& p;
    ~Release() {
      p.parse_arena_.Reset();
      if (p.batch_changes_.size() > kKeptViews) p.batch_changes_.resize(kKeptViews);
      if (p.batch_events_.capacity() > 16 * kKeptViews) {
        p.batch_events_ = {};
        p.batch_parsed_ = {};
        p.batch_pieces_ = {};
      }
    }
  } release{*this};
  // The plugin's message read in place (its Changes' values stay in its bytes); one not in the
  // plugin's canonical form is parsed whole, as protobuf reads it.
  const bool in_place = ReadBatchInPlace(payload);
  dblog::v1::Batch* batch = nullptr;
  std::vector<std::string_view> change_bytes;
  if (!in_place) {
    stats_->plugin_messages_parsed_whole++;
    batch = google::protobuf::Arena::CreateMessage<dblog::v1::Batch>(&parse_arena_);
    if (!batch->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      Fail(Error::SOURCE_ERROR, "the plugin sent a message that is not a dblog.v1.Batch");
      return;
    }
    for (const auto& ev : batch->events()) CountCommits(ev);
    // The plugin's own bytes of each Change, so that the emitter can forward them (a Change
    // goes out as it came, but for its seq) rather than serialize the parsed copy again.
    change_bytes = emit::ChangeBytes(payload, batch->events_size());
  }
  SourceAdvanced(wal_end);
  if (!Dispatched([&] {
        if (in_place) {
          std::size_t change = 0;
          for (std::size_t i = 0; i < batch_events_.size(); ++i) {
            if (!batch_pieces_[i].empty())
              emitter_->ConsumePiece(batch_pieces_[i]);  // only the emitter looks at pieces
            else if (batch_parsed_[i] != nullptr)
              ProcessEvent(*batch_parsed_[i], std::string_view());
            else
              ProcessChange(batch_changes_[change++]);
          }
          return;
        }
        for (int i = 0; i < batch->events_size(); ++i)
          ProcessEvent(*batch->mutable_events(i),
                       change_bytes.empty() ? std::string_view() : change_bytes[i]);
      }))
    return;
  Flush();
  repairs_->Schedule();
}

bool Pipeline::ReadBatchInPlace(std::string_view payload) {
  if (!wire::SplitBatch(payload, &batch_events_)) return false;
  batch_parsed_.assign(batch_events_.size(), nullptr);
  batch_pieces_.assign(batch_events_.size(), std::string_view());
  std::size_t changes = 0;
  for (std::size_t i = 0; i < batch_events_.size(); ++i) {
    const wire::BatchEvent& e = batch_events_[i];
    if (e.member == dblog::v1::Event::kChange) {
      if (batch_changes_.size() <= changes) batch_changes_.emplace_back();  // kept: their capacity
      if (!batch_changes_[changes++].Parse(e.payload)) return false;
      continue;
    }
    // a long value's piece (a plugin message of its own): its bytes go out as they came
    if (e.member == dblog::v1::Event::kValuePiece &&
        wire::OneField(e.payload, dblog::v1::ValuePiece::kDataFieldNumber, &batch_pieces_[i]) &&
        !batch_pieces_[i].empty())
      continue;
    batch_pieces_[i] = {};
    auto* event = google::protobuf::Arena::CreateMessage<dblog::v1::Event>(&parse_arena_);
    if (!event->ParseFromArray(e.event.data(), static_cast<int>(e.event.size()))) return false;
    batch_parsed_[i] = event;
  }
  for (const dblog::v1::Event* event : batch_parsed_)
    if (event != nullptr) CountCommits(*event);
  return true;
}

void Pipeline::CountCommits(const dblog::v1::Event& ev) {
  if (!ev.has_commit()) return;
  stats_->transactions_sent++;
  unacked_commits_.emplace_back(ev.commit().commit_lsn(), ev.commit().commit_time() == 0
                                                              ? NowMicros()
                                                              : ev.commit().commit_time());
  stats_->oldest_unacked_commit_us = unacked_commits_.front().second;
}

void Pipeline::SourceAdvanced(std::uint64_t wal_end) {
  if (wal_end > stats_->source_wal_lsn) stats_->source_wal_lsn = wal_end;
  // The walsender sets a data message's WAL end (when at all) to the end of the transaction
  // it completes: this message's events come before any heartbeat that says so.
  source_lsn_ = std::max(source_lsn_, wal_end);
}

// pgoutput mode: one message of PostgreSQL's plugin, as the events the extension would have
// written for it (consumer/pgoutput_source.h), through the same ProcessEvent.
void Pipeline::OnPgoutputData(std::uint64_t wal_start, std::uint64_t wal_end,
                              std::string_view payload) {
  pgoutput_events_.clear();
  try {
    pgoutput_->Translate(wal_start, payload, &pgoutput_events_);
  } catch (const std::exception& e) {
    if (dynamic_cast<const pg::Error*>(&e) || dynamic_cast<const LayoutWaitTimeout*>(&e)) {
      // A query the mapping runs failed (the connection lost, a timeout, a lock), or the
      // change's transaction stayed invisible: nothing is known to be wrong with the stream;
      // reconnect and decode the message again, and tell the consumer if it keeps failing.
      mapping_failures_ = wal_start == mapping_failed_at_ ? mapping_failures_ + 1 : 1;
      mapping_failed_at_ = wal_start;
      if (mapping_failures_ < 5) {
        SourceLost(std::string("mapping a pgoutput message: ") + e.what());
        return;
      }
      Fail(Error::SOURCE_ERROR,
           std::string("the pgoutput stream cannot go on: mapping the message at ") +
               common::FormatLsn(wal_start) + " failed " + std::to_string(mapping_failures_) +
               " times in a row: " + e.what() + " (docs/pgoutput.md, Identity across DDL)");
      return;
    }
    // A message this mode cannot map (a table whose catalog no longer describes what pgoutput
    // sent, after DDL): retrying decodes the same message again. Stop with the reason.
    Fail(Error::SOURCE_ERROR,
         std::string("the pgoutput stream cannot go on: ") + e.what() +
             ". To go on, drop the slot (SELECT pg_drop_replication_slot('" + slot_ +
             "')): the next connection bootstraps again, flagged restarted (docs/pgoutput.md)");
    return;
  }
  for (auto& ev : pgoutput_events_) {
    CountCommits(ev);
    // pgoutput sends a message whole; the extension leaves out the content of a long one
    // (--max-message-bytes), and so does this mode, before anything keeps it.
    if (ev.has_message() && config_.max_message_bytes != 0 &&
        ev.message().content().size() > config_.max_message_bytes) {
      ev.mutable_message()->set_omitted_bytes(ev.message().content().size());
      ev.mutable_message()->clear_content();
    }
  }
  SourceAdvanced(wal_end);
  if (!Dispatched([&] {
        for (auto& ev : pgoutput_events_) ProcessEvent(ev, std::string_view());
      }))
    return;
  Flush();
  repairs_->Schedule();  // the next window opens after the last one closed, not at the next poll
}

void Pipeline::ProcessEvent(dblog::v1::Event& event, std::string_view change_bytes) {
  using E = dblog::v1::Event;
  switch (event.event_case()) {
    case E::kBegin:
      scope_changes_.OnBegin();
      repairs_->OnBegin(event.begin());
      break;
    case E::kRelation:
      if (!repairs_->OnRelation(event.relation())) return;  // bookkeeping, not user data
      break;
    case E::kChange:
      if (!repairs_->OnChange(event.change())) return;  // a repair request
      break;
    case E::kTruncate:
      repairs_->OnTruncate(event.truncate());
      break;
    case E::kMessage: {
      const std::string& prefix = event.message().prefix();
      if (prefix.rfind(kWatermarkPrefix, 0) == 0) {
        repairs_->OnWatermark(event.message());
        return;  // markers are dblogd's own: never forwarded
      }
      if (prefix == kScopeChangePrefix) {
        // pgoutput mode has no event trigger of dblog's that writes them: any role could have.
        if (!pgoutput_) scope_changes_.OnMessage(event.message());  // queued at the commit
        return;  // dblog's own: never forwarded
      }
      if (!MessageWanted(prefix)) return;
      break;
    }
    case E::kCommit:
      // throws ScopeChangeError
      scope_changes_.OnCommit(bookkeeping_, event.commit().commit_lsn());
      emitter_->Consume(event);
      repairs_->OnCommitted();
      return;
    default:
      break;
  }
  emitter_->Consume(event, change_bytes);
}

// ProcessEvent's Change, read in place.
void Pipeline::ProcessChange(const wire::ChangeView& change) {
  if (!repairs_->OnChange(change)) return;  // a repair request
  emitter_->ConsumeChange(change);
}

// Only messages the consumer asked for (Hello.message_prefixes) are forwarded; dblog's own
// prefixes never are. The plugin filters the same way; this is the second line.
bool Pipeline::MessageWanted(const std::string& prefix) const {
  if (prefix.rfind("dblog.", 0) == 0) return false;
  for (const auto& wanted : hello_.message_prefixes())
    if (prefix.rfind(wanted, 0) == 0) return true;
  return false;
}

void Pipeline::Send(const dblog::v1::ServerMessage& message) { session_->Send(message); }

void Pipeline::Flush() {
  if (!emitter_) return;
  std::string events = emitter_->TakeOutput();
  if (events.empty()) return;
  // ServerMessage{events = EventBatch} around the emitter's bytes. The frame goes out as a
  // small head and the emitter's buffer itself: the events are not copied.
  std::string head =
      wire::FieldFrameHead(dblog::v1::ServerMessage::kEventsFieldNumber, events.size());
  stats_->bytes_sent += head.size() + events.size();
  stats_->events_sent = emitter_->events_emitted();
  session_->SendFrame(std::move(head), std::move(events));
  sent_since_heartbeat_ = true;
  stats_->queued_bytes = session_->queued_bytes();
  if (stream_ && !paused_ &&
      (session_->queued_bytes() > config_.max_buffer_bytes ||
       (acks_ && acks_->unacknowledged() > kMaxUnacknowledged))) {
    paused_ = true;
    stream_->Pause();
    stats_->paused_total++;
  }
}

void Pipeline::OnDrained() {
  stats_->queued_bytes = session_->queued_bytes();
  if (state_ == State::kBootstrapping && bootstrap_) bootstrap_->Drain();
  if (paused_ && stream_ && acks_->unacknowledged() <= kMaxUnacknowledged) {
    paused_ = false;
    stream_->Resume();
  }
}

void Pipeline::OnKeepalive(std::uint64_t wal_end) {
  if (wal_end > stats_->source_wal_lsn) stats_->source_wal_lsn = wal_end;
  if (state_ != State::kStreaming || !acks_) return;
  // The walsender's keepalive carries how far it has decoded: every transaction committed
  // before it was already sent to us (and by now through the emitter to the session).
  source_lsn_ = std::max(source_lsn_, wal_end);
  ApplyConfirmable(acks_->OnIdle(wal_end, emitter_->in_transaction()));
}

void Pipeline::OnAck(const dblog::v1::Ack& ack) {
  if (!acks_ || !emitter_) return;
  const emit::Position pos = emit::Position::FromProto(ack.position());
  if (emitter_->last_position() < pos) {
    Fail(Error::PROTOCOL_VIOLATION, "Ack of a position that was never sent");
    return;
  }
  std::uint64_t lsn;
  try {
    lsn = acks_->OnAck(pos);
  } catch (const emit::AckError& e) {
    Fail(Error::PROTOCOL_VIOLATION, e.what());
    return;
  }
  stats_->acked_lsn = pos.commit_lsn;
  stats_->last_ack_us = NowMicros();
  while (!unacked_commits_.empty() && unacked_commits_.front().first <= pos.commit_lsn)
    unacked_commits_.pop_front();
  stats_->oldest_unacked_commit_us =
      unacked_commits_.empty() ? 0 : unacked_commits_.front().second;
  if (bootstrap_) bootstrap_->OnAcknowledged(pos);
  repairs_->OnAcknowledged(pos);
  ApplyConfirmable(lsn);
  if (paused_ && stream_ && session_->queued_bytes() <= config_.max_buffer_bytes &&
      acks_->unacknowledged() <= kMaxUnacknowledged) {
    paused_ = false;
    stream_->Resume();
  }
}

void Pipeline::ApplyConfirmable(std::uint64_t lsn) {
  if (lsn <= confirmed_) return;
  confirmed_ = lsn;
  stats_->confirmed_lsn = lsn;
  if (stream_) {
    stream_->SetFlushedLsn(lsn);
    SendStatusSoon();
  }
}

// Acks may come per transaction: tell PostgreSQL at most every 100 ms.
void Pipeline::SendStatusSoon() {
  if (status_soon_) return;
  status_soon_ = true;
  status_timer_.expires_after(std::chrono::milliseconds(100));
  status_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec) return;
    self->status_soon_ = false;
    if (self->stream_ && self->state_ == State::kStreaming) self->stream_->SendStatusNow();
  });
}

void Pipeline::Heartbeat() {
  heartbeat_timer_.expires_after(config_.heartbeat_interval);
  heartbeat_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec || self->state_ == State::kDone) return;
    if (!self->sent_since_heartbeat_ && self->emitter_) {
      dblog::v1::ServerMessage m;
      auto* hb = m.mutable_heartbeat();
      // The last position sent (not a Change whose pieces are still coming: the one before
      // it), or the resume point while nothing was; absent when neither exists (nothing to
      // acknowledge yet).
      const emit::Position position = self->emitter_->complete_position();
      if (position != emit::Position{}) *hb->mutable_position() = position.ToProto();
      hb->set_server_time(NowMicros());
      // 0 during a bootstrap: the stream has not started, the copy is not complete
      hb->set_source_lsn(self->state_ == State::kBootstrapping ? 0 : self->source_lsn_);
      self->session_->Send(m);
    }
    self->sent_since_heartbeat_ = false;
    if (self->state_ == State::kStreaming) {
      // the slot's health for dblog status and the status page
      self->bookkeeping_.BestEffort(log::Level::kWarn, "slot_state_read_failed",
                                    {{"consumer", self->consumer_.name}}, [&] {
                                      const auto [status, safe] =
                                          self->bookkeeping_.SlotState(self->slot_);
                                      self->stats_->SetSlotState(status, safe);
                                    });
    }
    if (self->pgoutput_ && self->state_ == State::kStreaming) {
      self->CheckPublicationCoversScope();
      if (self->state_ == State::kDone) return;
    }
    self->Heartbeat();
  });
}

// pgoutput mode, each heartbeat: a table created, renamed or moved into the scope is not in the
// publication, so its changes would not be in the stream: added with a whole-table repair, or,
// where repairs cannot run, said at once; never silently skipped.
// And the publication itself: altered by its owner (publish = 'insert', a row filter, ...), it
// makes pgoutput leave changes out of the slot's stream from then on: said, never silent.
void Pipeline::CheckPublicationCoversScope() {
  std::vector<std::string> missing;
  std::string drift;
  try {
    drift = pgoutput_->PublicationDrift(bookkeeping_.Sql());
    if (drift.empty()) missing = pgoutput_->TablesMissingFromPublication(bookkeeping_.Sql());
  } catch (const std::exception&) {
    bookkeeping_.Reset();  // the source is away: the stream's reconnect says so
    return;
  }
  if (!drift.empty()) return Fail(Error::SOURCE_ERROR, drift);
  try {
    CheckWatermarksPublished(bookkeeping_.Sql());
  } catch (const std::exception&) {
    bookkeeping_.Reset();  // the source is away: the stream's reconnect says so
    return;
  }
  if (missing.empty()) return;
  if (config_.bootstrap && !repairs_unavailable_.empty())
    return Fail(Error::SCOPE_ERROR, pgoutput_->TablesJoinedMessage(missing, repairs_unavailable_));
  if (config_.bootstrap) {
    try {
      const PublicationPlan plan = pgoutput_->PlanPublication(bookkeeping_.Sql());
      if (!plan.refused.empty()) return Fail(Error::SCOPE_ERROR, plan.refused);
      AddJoinedTables(bookkeeping_.Sql(), plan);
    } catch (const bootstrap::ScopeError& e) {  // a table without a key, say
      return Fail(Error::SCOPE_ERROR, e.what());
    } catch (const PublicationError& e) {
      return Fail(Error::SCOPE_ERROR, e.what());
    } catch (const std::exception&) {
      bookkeeping_.Reset();  // the source is away: the stream's reconnect says so
    }
    return;
  }
  // without bootstrap: the next connection adds them (and logs publication_table_added)
  Fail(Error::SCOPE_ERROR, "tables joined the scope: " + missing.front() +
                               (missing.size() > 1 ? " and others" : "") +
                               "; reconnect to have them added to publication " + slot_);
}

void Pipeline::CheckWatermarksPublished(pg::Connection& sql) {
  if (!repairs_unavailable_.empty() && !watermarks_unpublished_) return;  // never could run
  const PgoutputSource::WatermarksCheck check = pgoutput_->CheckWatermarks(sql);
  auto available_again = [&](const std::string& why) {
    if (!watermarks_unpublished_) return;
    watermarks_unpublished_ = false;
    last_restore_error_.clear();
    repairs_unavailable_.clear();
    repairs_->Hold(false);
    repairs_->SetUnavailable("");
    log::Info("repairs_available", {{"consumer", consumer_.name}, {"reason", why}});
  };
  if (!check.missing) return available_again("publication " + slot_ + " holds dblog.watermarks");
  const std::string what = "publication " + slot_ + " no longer holds dblog.watermarks";
  // markers written since it was taken out are not in the stream: a window waiting for them
  // would wait for ever; the windows in flight are read again under new markers
  if (!watermarks_unpublished_) repairs_->AbandonWindows(what);
  if (check.owned) {  // at every heartbeat until it is back
    try {
      sql.Exec("BEGIN");
      sql.Exec("SET LOCAL lock_timeout = '5s'");  // never the consumer's thread stalled
      sql.Exec(check.statement);
      sql.Exec("COMMIT");
      log::Warn("publication_watermarks_restored",
                {{"consumer", consumer_.name}, {"statement", check.statement}});
      return available_again("dblogd put dblog.watermarks back");
    } catch (const pg::Error& e) {
      if (!sql.ok()) throw;  // the source went away: the caller resets, the stream reconnects
      if (sql.in_transaction()) sql.Exec("ROLLBACK");
      if (!watermarks_unpublished_ || e.sqlstate() != last_restore_error_)
        log::Warn("publication_watermarks_restore_failed",
                  {{"consumer", consumer_.name}, {"error", e.server_message()}});
      last_restore_error_ = e.sqlstate();
      // a lock held by someone else: requests wait (no window opens: none could close) and
      // the next heartbeat tries again, rather than fail them all
      if (e.sqlstate() == "55P03" || e.sqlstate() == "40P01") {
        if (!watermarks_unpublished_) {
          watermarks_unpublished_ = true;
          repairs_->Hold(true);
        }
        return;
      }
    }
  }
  if (watermarks_unpublished_) return;  // said already
  watermarks_unpublished_ = true;
  repairs_unavailable_ = what + "; have its owner run: " + check.statement;
  log::Warn("repairs_unavailable", {{"consumer", consumer_.name}, {"reason", repairs_unavailable_}});
  repairs_->SetUnavailable("repairs cannot run in pgoutput mode: " + repairs_unavailable_);
}

void Pipeline::AddJoinedTables(pg::Connection& sql, const PublicationPlan& plan) {
  // a repair that could not read them would leave their rows missing: refused instead
  const std::vector<std::string> untrusted = bookkeeping_.UntrustedOwners(plan.added_oids);
  if (!untrusted.empty())
    throw PublicationError(pgoutput_->TablesJoinedMessage(
        untrusted, "the repair cannot run: " + UntrustedOwnerMessage(untrusted.front())));
  sql.Exec("BEGIN");
  std::vector<std::uint64_t> ids;
  try {
    ids = bookkeeping_.QueueWholeTables(plan.added_oids, "the table joined the scope");
    pgoutput_->ApplyPublication(sql, plan);
    sql.Exec("COMMIT");
  } catch (...) {
    bookkeeping_.EndTransaction();
    throw;
  }
  for (std::size_t i = 0; i < plan.added.size(); ++i)
    log::Info("scope_table_added",
              {{"consumer", consumer_.name}, {"table", plan.added[i]},
               {"request", i < ids.size() ? std::to_string(ids[i]) : std::string("none")}});
}

void Pipeline::OnError(const std::exception& error) {
  // The plugin refuses a table in scope that has no key (it lost its primary key, say): SQLSTATE
  // 55000 with a detail starting "dblog_keyless_table:" (docs/plugin.md). Every reconnect
  // decodes the same change again and fails the same way: retrying would stall the consumer
  // silently, so tell it why and end its session.
  const auto* pg_error = dynamic_cast<const pg::Error*>(&error);
  if (pg_error != nullptr && pg_error->sqlstate() == "55000" &&
      pg_error->detail().rfind("dblog_keyless_table:", 0) == 0) {
    Fail(Error::SCOPE_ERROR,
         "the stream cannot go on: " + pg_error->server_message() +
             " (it lost its key while in this consumer's scope). Its changes made without a key "
             "cannot be captured by key: leave the table out of the consumer's scope (it is "
             "then skipped in the log), and add it back once it has a key again: a table added "
             "to a scope is copied through a repair (docs/operations.md)");
    return;
  }
  SourceLost(error.what());
}

void Pipeline::OnEnd() { SourceLost("the replication stream ended"); }

void Pipeline::SourceLost(const std::string& why) {
  if (state_ != State::kStreaming) return;
  state_ = State::kReconnecting;
  stats_->source_reconnects++;
  log::Warn("source_disconnected", {{"consumer", consumer_.name}, {"error", why},
                                    {"retry_in_ms", backoff_.count()}});
  // The stream called us from inside itself: destroy it later, from the io loop.
  asio::post(io_, [self = shared_from_this()] { self->stream_.reset(); });
  reconnect_timer_.expires_after(backoff_);
  reconnect_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec) return;
    self->Reconnect();
  });
  backoff_ = std::min(backoff_ * 2, config_.reconnect_max);
}

void Pipeline::Reconnect() {
  if (state_ != State::kReconnecting) return;
  try {
    stream_.reset();
    bookkeeping_.Reset();
    // Replay starts at the slot's confirmed position; what was already sent is dropped by a
    // fresh emitter resuming after the last position sent, continuing a transaction (and a
    // Change's pieces) the consumer has part of. Acks carry on in the same tracker.
    emitter_ = std::make_unique<emit::Emitter>(*emitter_, acks_.get());
    paused_ = false;
    repairs_->OnSourceReconnect();
    // Retrying a lost slot would only fail again, silently for the consumer: end its session.
    const pg::SlotInfo slot = pg::GetSlot(bookkeeping_.Sql(), slot_);
    if (slot.wal_status == "lost") return Fail(Error::SOURCE_ERROR, SlotLostMessage(slot_));
    // So would a slot that is gone: the source failed over to a standby that never had it (or
    // it was dropped by hand). The consumer's next connection decides (Prepare).
    if (!slot.exists)
      return Fail(Error::SOURCE_ERROR,
                  "slot " + slot_ +
                      " does not exist on the source any more (a failover to a standby that "
                      "did not have it, or dropped by hand). The next connection " +
                      (config_.on_slot_lost == config::Config::SlotLost::kReconcile &&
                               !pgoutput_
                           ? "reconciles: a new slot and a whole-table repair of every table "
                             "in scope (--on-slot-lost=reconcile)"
                           : "bootstraps again from a new slot, flagged restarted "
                             "(--on-slot-lost=bootstrap)") +
                      " (docs/operations.md#failover)");
    stream_origin_ = "resumed from its slot";  // a synchronized failover slot, say
    StartStream();
    log::Info("source_reconnected", {{"consumer", consumer_.name}});
  } catch (const std::exception& e) {
    state_ = State::kStreaming;  // so that SourceLost schedules the next attempt
    SourceLost(e.what());
  }
}

void Pipeline::Fail(Error::Code code, const std::string& message) {
  log::Error("consumer_failed", {{"consumer", consumer_.name},
                                 {"code", Error::Code_Name(code)}, {"message", message}});
  session_->Fail(code, message);
  Finish();
}

void Pipeline::Shutdown(const std::string& reason) {
  if (state_ == State::kDone || shutting_down_) return;
  shutting_down_ = true;
  // Acks the client sent before it read the Error are still on their way: they count, until
  // the client closes or kShutdownAckGrace passes; then the final status update carries them.
  session_->Fail(Error::SHUTTING_DOWN, reason, /*keep_acks=*/true);
  shutdown_timer_.expires_after(kShutdownAckGrace);
  shutdown_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (auto self = weak.lock(); self && !ec) self->Finish();
  });
}

void Pipeline::OnClosed() {
  log::Info("consumer_disconnected", {{"consumer", consumer_.name},
                                      {"confirmed", common::FormatLsn(confirmed_)}});
  Finish();
}

void Pipeline::Finish() {
  if (state_ == State::kDone) return;
  const bool streaming = state_ == State::kStreaming;
  state_ = State::kDone;
  // A final standby status update carries the last acknowledged position to PostgreSQL.
  if (stream_ && streaming) stream_->Stop();
  stats_->connected = 0;
  stats_->connected_since_us = 0;
  stats_->disconnected_since_us = NowMicros();
  stats_->bootstrap_running = 0;
  stats_->SetSession("", "");
  repairs_->Stop();
  session_->Detach();
  if (bootstrap_) bootstrap_->Stop();
  slot_creation_.reset();  // cancels a creation still waiting
  stats_->slot_creation_started_us = 0;
  slot_wait_timer_.cancel();
  shutdown_timer_.cancel();
  heartbeat_timer_.cancel();
  status_timer_.cancel();
  reconnect_timer_.cancel();
  // Tear down from the io loop, not from inside a callback of what is torn down.
  asio::post(io_, [self = shared_from_this()] {
    self->stream_.reset();
    self->bootstrap_.reset();
    self->on_finished_(self->consumer_.name);
  });
}

}  // namespace dblog::consumer
