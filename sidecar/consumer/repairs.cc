// sidecar/consumer/repairs.cc: see repairs.h.
#include "consumer/repairs.h"

#include <algorithm>
#include <limits>
#include <random>
#include <stdexcept>

#include "bootstrap/scope.h"
#include "common/json.h"
#include "common/lsn.h"
#include "common/quote.h"
#include "bootstrap/copier.h"
#include "consumer/chunk_query.h"
#include "consumer/watermark.h"
#include "emit/key.h"
#include "log/log.h"
#include "pg/slot.h"

namespace dblog::consumer {
namespace asio = boost::asio;

namespace {

std::string RandomId() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng()));
  return buf;
}

// A request that cannot run as asked (not a failure of the source).
class RequestError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The window cannot be read now but may be later (the table renamed between the name's read and
// its lock, a lock held by another session past lock_timeout): deferred, not failed.
class RetryLater : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// "attnum=hex,...": the key columns' collations as the bounds query lists them.
std::map<std::uint32_t, std::string> ParseCollations(std::string_view list) {
  std::map<std::uint32_t, std::string> collations;
  while (!list.empty()) {
    const auto comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    const auto eq = item.find('=');
    collations[static_cast<std::uint32_t>(std::stoul(std::string(item.substr(0, eq))))] =
        SplitHexList(item.substr(eq + 1)).front();
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return collations;
}

}  // namespace

Repairs::Repairs(asio::io_context& io, const config::Config& config,
                 const config::ConsumerConfig& consumer, metrics::ConsumerStats& stats,
                 Bookkeeping& bookkeeping, Host& host)
    : io_(io),
      config_(config),
      consumer_(consumer),
      stats_(stats),
      bookkeeping_(bookkeeping),
      host_(host),
      txlog_(config.window_key_memory_bytes),
      window_timer_(io),
      repair_progress_timer_(io),
      record_timer_(io),
      catalog_(config.source_plugin == config::SourcePlugin::kPgoutput),
      poll_timer_(io),
      prune_timer_(io) {}

Repairs::~Repairs() = default;

template <typename F>
void Repairs::Later(asio::steady_timer& timer, std::chrono::steady_clock::time_point at, F step) {
  timer.expires_at(at);
  timer.async_wait([weak = std::weak_ptr<char>(alive_),
                    step = std::move(step)](boost::system::error_code ec) {
    if (weak.lock()) step(ec);
  });
}

// ---- the log ---------------------------------------------------------------------------------

void Repairs::OnBegin(const dblog::v1::Begin& begin) {
  txlog_.Begin(begin.xid(), begin.commit_lsn());
  current_commit_lsn_ = begin.commit_lsn();
}

bool Repairs::OnRelation(const dblog::v1::Relation& r) {
  if (r.schema() == "dblog" && r.name() == "request_queue") {
    control_oid_ = r.oid();
    control_relation_ = r;
    return false;
  }
  relations_[r.oid()] = r;
  if (!windows_.empty() && windows_.front().window.opened() &&
      r.oid() == windows_.front().window.relation()) {
    std::vector<std::string>& described = windows_.front().described;
    std::string bytes = r.SerializeAsString();
    if (described.empty() || described.back() != bytes) described.push_back(std::move(bytes));
  }
  return true;
}

// RecordKeys' two ways of reading a change. MessageChange: a parsed message (pgoutput mode).
struct Repairs::MessageChange {
  const dblog::v1::Change& c;
  std::uint32_t relation_oid() const { return c.relation_oid(); }
  bool has_new_row() const { return c.has_new_row(); }
  std::string old_key() const { return c.has_old_key() ? c.old_key().SerializeAsString() : ""; }
  std::size_t new_row_size() const { return static_cast<std::size_t>(c.new_row().values_size()); }
  bool unchanged(std::size_t i) const {
    return c.new_row().values(static_cast<int>(i)).unchanged();
  }
  std::string key(const dblog::v1::Relation& r) const { return emit::KeyBytes(r, c.new_row()); }
  const dblog::v1::Row& new_row() const { return c.new_row(); }
};

// ViewChange: read in place (the extension's stream); the same answers, from the plugin's bytes
// (a canonical row's bytes are its serialization: wire/change_view.h).
struct Repairs::ViewChange {
  const wire::ChangeView& c;
  std::uint32_t relation_oid() const { return c.relation_oid; }
  bool has_new_row() const { return c.has_new_row; }
  std::string old_key() const {
    return c.has_old_key ? std::string(c.old_key.bytes()) : std::string();
  }
  std::size_t new_row_size() const { return c.new_row.size(); }
  bool unchanged(std::size_t i) const {
    return c.new_row[i].kind == dblog::v1::Value::kUnchanged;
  }
  std::string key(const dblog::v1::Relation& r) const { return emit::KeyBytes(r, c.new_row); }
  dblog::v1::Row new_row() const {  // only for a window's carried row
    dblog::v1::Row row;
    row.ParseFromArray(c.new_row.bytes().data(), static_cast<int>(c.new_row.bytes().size()));
    return row;
  }
};

bool Repairs::OnChange(const dblog::v1::Change& change) {
  if (control_oid_ && change.relation_oid() == *control_oid_) {
    OnControlChange(change);
    return false;
  }
  RecordKeys(MessageChange{change});
  return true;
}

bool Repairs::OnChange(const wire::ChangeView& change) {
  if (control_oid_ && change.relation_oid == *control_oid_) {
    dblog::v1::Change parsed;  // a request: parsed (what is read in place always parses)
    if (!change.ParseInto(&parsed))
      throw std::logic_error("a request read in place does not parse");
    OnControlChange(parsed);
    return false;
  }
  RecordKeys(ViewChange{change});
  return true;
}

void Repairs::OnTruncate(const dblog::v1::Truncate& truncate) {
  for (std::uint32_t oid : truncate.relation_oids()) {
    txlog_.Touch(oid, std::string());
    if (!windows_.empty() && windows_.front().window.opened() &&
        windows_.front().window.relation() == oid)
      windows_.front().truncated = true;
  }
}

void Repairs::OnWatermark(const dblog::v1::Message& m) {
  MarkerContext context{consumer_.name, std::nullopt, &abandoned_windows_};
  // the front window's markers only: the next one's come after the front's high watermark
  if (!windows_.empty()) context.open_window = windows_.front().window.id();
  const MarkerKind kind = Classify(m.prefix(), m.transactional(), m.content(), context);
  if (kind != MarkerKind::kOurs) return IgnoreMarker(m, MarkerKindName(kind));
  const Watermark marker = *Watermark::Parse(m.content());
  if (marker.kind == Watermark::Kind::kLow)
    windows_.front().window.Open();
  else if (windows_.front().window.opened())
    CloseWindow();
  else  // its low watermark never came (pgoutput mode: out of the publication meanwhile)
    AbandonWindows("the window's high watermark came without its low one");
}

void Repairs::OnCommitted() {
  txlog_.Commit();
  ReportKeyLog();
  if (!prune_armed_ && txlog_.transactions() > 0) {
    prune_armed_ = true;
    Later(prune_timer_, std::chrono::steady_clock::now() + std::chrono::seconds(1),
          [this](boost::system::error_code ec) {
            prune_armed_ = false;
            if (!ec) PruneKeyLog();
          });
  }
  if (MarkersLost())
    AbandonWindows("the stream went past the window's high watermark without bringing it");
  if (closing_progress_) {
    closing_progress_->position = host_.emitter().last_position();
    pending_progress_.push_back(std::move(*closing_progress_));
    closing_progress_.reset();
  }
}

template <typename Access>
void Repairs::RecordKeys(const Access& c) {
  OpenWindow* open = !windows_.empty() && windows_.front().window.opened() ? &windows_.front()
                                                                           : nullptr;
  // `unchanged`: the columns the event did not carry (a window may fill them, window.h)
  const bool window_table = open && c.relation_oid() == open->window.relation();
  auto touch = [&](const std::string& key, std::vector<int> unchanged) {
    if (key.empty()) return;
    if (open) open->window.Touch(c.relation_oid(), key, unchanged);
    txlog_.Touch(c.relation_oid(), key, std::move(unchanged));
  };
  // the old key: a DELETE, or an UPDATE's key before it (the row left it: nothing was kept)
  const std::string old_key = c.old_key();
  auto it = c.has_new_row() ? relations_.find(c.relation_oid()) : relations_.end();
  bool unchanged_key = it == relations_.end();
  if (it != relations_.end())
    for (std::uint32_t k : it->second.key_columns())
      unchanged_key |= k < c.new_row_size() && c.unchanged(k);
  if (unchanged_key) {
    if (window_table) open->carried.Left(old_key);
    return touch(old_key, {});
  }
  std::vector<int> unchanged;
  for (std::size_t i = 0; i < c.new_row_size(); ++i)
    if (c.unchanged(i)) unchanged.push_back(static_cast<int>(i));
  const std::string key = c.key(it->second);
  if (old_key != key) {
    if (window_table) open->carried.Left(old_key);
    touch(old_key, {});
  }
  if (window_table) open->carried.Carried(key, c.new_row());
  touch(key, std::move(unchanged));
}

// A request decoded from the log. Its row is taken from the decoded change, not read back:
// the inserting transaction's commit can be decoded before it is visible to our snapshots (the
// same visibility-order caveat the windows handle).
void Repairs::OnControlChange(const dblog::v1::Change& change) {
  auto column = [&](const std::string& name) -> const dblog::v1::Value* {
    for (int i = 0; i < control_relation_.columns_size(); ++i)
      if (control_relation_.columns(i).name() == name && i < change.new_row().values_size())
        return &change.new_row().values(i);
    return nullptr;
  };
  auto text = [&](const std::string& name) -> std::string {
    const dblog::v1::Value* v = column(name);
    if (!v) return {};
    return v->has_literal() ? v->literal() : v->text_value();
  };
  const dblog::v1::Value* id = column("id");
  if (!id || !change.has_new_row()) return;
  const std::uint64_t request = static_cast<std::uint64_t>(id->int_value());
  const dblog::v1::Value* cancelled = column("cancelled");
  const bool is_cancelled = cancelled && cancelled->bool_value();
  if (change.kind() != dblog::v1::Change::INSERT) {
    if (is_cancelled)
      for (auto& q : requests_)
        if (q.id == request) q.cancelled = true;
    return;
  }
  if (known_requests_.count(request)) return;
  const std::string for_consumer = text("consumer");
  if ((!for_consumer.empty() && for_consumer != consumer_.name) || is_cancelled) return;
  RepairRequest q;
  q.id = request;
  const dblog::v1::Value* oid = column("table_oid");
  q.table_oid = oid ? static_cast<std::uint32_t>(oid->int_value()) : 0;
  q.kind = text("kind");
  q.from_key = text("from_key");
  q.to_key = text("to_key");
  q.keys = text("keys");
  bool ours = false;
  if (!bookkeeping_.BestEffort(log::Level::kError, "repair_load_failed",
                               {{"consumer", consumer_.name}, {"request", request}},
                               [&] { ours = bookkeeping_.DescribeRequestTable(q); })) {
    // The source went away (or just this connection): the request is in the queue, and the
    // log that carried it may be acknowledged before it comes again. Read from the queue soon.
    reload_ = true;
    return;
  }
  if (!ours) {
    log::Info("repair_not_for_this_consumer", {{"consumer", consumer_.name}, {"request", request}});
    return;
  }
  Queue(std::move(q), false);
}

void Repairs::Queue(RepairRequest q, bool resumed) {
  known_requests_.insert(q.id);
  log::Info("repair_queued", {{"consumer", consumer_.name}, {"request", q.id},
                              {"table", q.table}, {"kind", q.kind},
                              {"resumed", resumed ? "true" : "false"}});
  requests_.push_back(std::move(q));
  Publish();
}

void Repairs::Publish() {
  std::vector<metrics::ConsumerStats::Repair> shown;
  for (const RepairRequest& r : requests_) {
    metrics::ConsumerStats::Repair& v = shown.emplace_back();
    v.id = r.id;
    v.table = r.table;
    v.kind = r.kind;
    v.done = r.kind == "keys" ? r.keys_done : r.rows;
    v.estimated = r.rows_estimated;
    v.chunks = r.chunks;
    v.running = &r == &requests_.front();
  }
  stats_.SetRepairs(std::move(shown));
}

void Repairs::IgnoreMarker(const dblog::v1::Message& m, const char* kind) {
  stats_.foreign_markers++;
  foreign_marker_log_.Warn("foreign_watermark_ignored",
                           {{"consumer", consumer_.name},
                            {"kind", kind},
                            {"prefix", m.prefix().substr(0, 80)},
                            {"lsn", common::FormatLsn(m.lsn())}});
}

// ---- the pipeline's lifecycle ------------------------------------------------------------

void Repairs::ForgetTransactionsBelow(std::uint64_t xmax) { txlog_.ForgetBelow(xmax); }

void Repairs::PruneKeyLog() {
  if (reading_ || !host_.Streaming() || txlog_.transactions() == 0) return;
  for (const OpenWindow& w : windows_)
    if (!w.read) return;  // (not while reading_: checked for the argument's sake)
  std::uint64_t horizon = 0;
  try {
    horizon = bookkeeping_.OldestRunningXid();
  } catch (const std::exception& e) {
    // pruned a second after a later commit; meanwhile the budget bounds the log
    prune_failed_log_.Warn("key_log_prune_failed",
                           {{"consumer", consumer_.name}, {"error", e.what()}});
    bookkeeping_.Reset();
    return;
  }
  PruneKeyLogBelow(horizon);
}

void Repairs::PruneKeyLogBelow(std::uint64_t horizon) {
  for (const OpenWindow& w : windows_) {
    if (!w.read) return;
    horizon = std::min(horizon, w.read->chunk.snapshot.xmin);
  }
  if (horizon == std::numeric_limits<std::uint64_t>::max()) return;  // no window, no question
  txlog_.PruneBelow(horizon);
  stats_.key_log_horizon = horizon;
  ReportKeyLog();
}

void Repairs::ReportKeyLog() {
  stats_.key_log_bytes = txlog_.bytes();
  stats_.key_log_pruned += txlog_.pruned() - reported_pruned_;
  stats_.key_log_forgotten += txlog_.forgotten() - reported_forgotten_;
  reported_pruned_ = txlog_.pruned();
  reported_forgotten_ = txlog_.forgotten();
}

void Repairs::LoadQueued() {
  for (RepairRequest& q : bookkeeping_.LoadRequests(known_requests_)) {
    const bool resumed = q.chunks > 0;
    Queue(std::move(q), resumed);
  }
  // requests to run: the reader connects now, while the stream starts, not at the first window
  if (!requests_.empty() && !reader_) {
    Reader().Run([](WindowReader& reader) {
      try {
        reader.Sql();
      } catch (const std::exception&) {
        // the first window's read meets it again, and defers or fails as it does
      }
    });
  }
}

void Repairs::OnAcknowledged(const emit::Position& position) {
  while (!pending_progress_.empty() && !(position < pending_progress_.front().position)) {
    Record([this, p = std::move(pending_progress_.front())] {
      return bookkeeping_.RecordProgress(p);
    });
    pending_progress_.pop_front();
  }
}

void Repairs::Record(std::function<bool()> write) {
  unrecorded_.push_back(std::move(write));
  if (unrecorded_.size() == 1) RecordAgain();
}

void Repairs::RecordAgain() {
  while (!unrecorded_.empty()) {
    if (!unrecorded_.front()()) break;
    unrecorded_.pop_front();
  }
  if (unrecorded_.empty() || record_timer_running_) return;
  record_timer_running_ = true;
  Later(record_timer_, std::chrono::steady_clock::now() + std::chrono::seconds(1),
        [this](boost::system::error_code ec) {
          record_timer_running_ = false;
          if (!ec) RecordAgain();
        });
}

void Repairs::OnSourceReconnect() {
  // A window that was open is abandoned (its markers may be replayed or lost): the chunk is
  // read again under a new one.
  DropWindows();
  if (reader_) reader_->Reconnect();  // its connection may be broken, or on the old primary
  closing_progress_.reset();
  control_oid_.reset();
}

void Repairs::AbandonWindows(const std::string& why) {
  if (windows_.empty()) return;
  log::Warn("repair_windows_abandoned",
            {{"consumer", consumer_.name}, {"windows", windows_.size()}, {"reason", why}});
  DropWindows();
  Schedule();
}

bool Repairs::MarkersLost() {
  if (windows_.empty()) return false;
  std::lock_guard<std::mutex> lock(windows_.front().handoff->mutex);
  const std::optional<std::uint64_t>& at = windows_.front().handoff->high_written_at;
  return at && current_commit_lsn_ >= *at;
}

void Repairs::DropWindows() {
  for (const OpenWindow& w : windows_) Abandon(w.window.id());
  windows_.clear();  // a chunk still with the reader is dropped when it comes (OnChunkRead)
  ahead_failed_ = false;
}

void Repairs::Stop() {
  foreign_marker_log_.Flush(log::Level::kWarn, "foreign_watermark_ignored",
                            {{"consumer", consumer_.name}});
  window_timer_.cancel();
  repair_progress_timer_.cancel();
  record_timer_.cancel();
  poll_timer_.cancel();
  prune_timer_.cancel();
  stats_.key_log_bytes = 0;  // the log ends with the pipeline
  stats_.SetRepairs({});  // not in flight while the consumer is away (resumed when it is back)
}

void Repairs::PollQueue() {
  if (polling_) return;
  polling_ = true;
  Later(poll_timer_, std::chrono::steady_clock::now() + std::chrono::seconds(1),
        [this](boost::system::error_code ec) {
          polling_ = false;
          if (ec) return;
          if (host_.Streaming()) {
            // the DDL trigger's notes first, on their own: a failure there holds back no
            // request a role made
            bookkeeping_.BestEffort(log::Level::kWarn, "ddl_notes_poll_failed",
                                    {{"consumer", consumer_.name}},
                                    [&] { bookkeeping_.TakeDdlRepairs(); });
            bookkeeping_.BestEffort(log::Level::kWarn, "repair_poll_failed",
                                    {{"consumer", consumer_.name}}, [&] {
                                      LoadQueued();
                                      std::vector<std::uint64_t> ids;
                                      for (const auto& q : requests_) ids.push_back(q.id);
                                      for (std::uint64_t id : bookkeeping_.CancelledAmong(ids))
                                        for (auto& q : requests_)
                                          if (q.id == id) q.cancelled = true;
                                    });
            Schedule();
          }
          PollQueue();
        });
}

// ---- windows ---------------------------------------------------------------------------------

void Repairs::Schedule() {
  if (reload_ && host_.Streaming() && std::chrono::steady_clock::now() >= next_reload_at_) {
    // a request the log carried that could not be read then (OnControlChange)
    next_reload_at_ = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    reload_ = !bookkeeping_.BestEffort(log::Level::kWarn, "repair_reload_failed",
                                       {{"consumer", consumer_.name}}, [&] { LoadQueued(); });
    if (reload_)
      Later(window_timer_, next_reload_at_, [this](boost::system::error_code ec) {
        if (!ec) Schedule();
      });
  }
  if (!requests_.empty() && !repair_progress_running_ && host_.Streaming()) {
    repair_progress_running_ = true;
    asio::post(io_, [weak = std::weak_ptr<char>(alive_), this] {
      if (weak.lock()) RepairProgressTick();
    });
  }
  if (window_scheduled_ || reading_ || requests_.empty() || !host_.Streaming()) return;
  window_scheduled_ = true;
  asio::post(io_, [weak = std::weak_ptr<char>(alive_), this] {
    if (!weak.lock()) return;
    window_scheduled_ = false;
    StartWindow();
  });
}

void Repairs::FailFrontRequest(const std::string& error) {
  log::Error("repair_failed", {{"consumer", consumer_.name}, {"request", requests_.front().id},
                               {"error", error}});
  Record([this, id = requests_.front().id, error] {
    return bookkeeping_.FinishRequest(id, "failed", error);
  });
  requests_.pop_front();
  Publish();
  Schedule();
}

void Repairs::StartWindow() {
  if (reading_ || held_ || requests_.empty() || !host_.Streaming()) return;
  RepairRequest& r = requests_.front();
  if (!windows_.empty()) {
    // Read ahead: the chunk after the back window's, once that one was read, within the same
    // request, unpaced (the pace is set as each window closes), one window ahead at most.
    const OpenWindow& back = windows_.back();
    if (windows_.size() >= 2 || config_.repair_rows_per_second > 0 || ahead_failed_ ||
        r.cancelled || back.request_id != r.id || !back.read || back.read->last)
      return;
  }
  if (std::chrono::steady_clock::now() < next_window_at_) {
    // backing off after a redo, or pacing (--repair-rows-per-second)
    Later(window_timer_, next_window_at_, [this](boost::system::error_code ec) {
      if (!ec) Schedule();
    });
    return;
  }
  if (windows_.empty()) {
    if (r.cancelled) {
      Record([this, id = r.id] { return bookkeeping_.FinishRequest(id, "cancelled", ""); });
      requests_.pop_front();
      Publish();
      Schedule();
      return;
    }
    if (!unavailable_.empty()) return FailFrontRequest(unavailable_);
    if (r.key_types.size() != r.key_columns.size() ||
        std::find(r.key_types.begin(), r.key_types.end(), kNoType) != r.key_types.end()) {
      // _identity_key's NULL: a type with a domain inside (dblog.repair*() refuses those; a
      // request can still name one when the table changed since)
      return FailFrontRequest(
          "a key column's type contains a domain, whose checks dblogd never runs");
    }
  }
  if (chunk_rows_request_ != r.id) {  // a request starts at --chunk-size
    chunk_rows_request_ = r.id;
    chunk_rows_ = config_.chunk_size;
  }
  // The reader's own copy of the request, where the chunk starts: after the back window's
  // chunk when reading ahead (the request itself moves on as windows close).
  RepairRequest ahead = r;
  if (!windows_.empty()) {
    const ChunkRead& before = *windows_.back().read;
    if (r.kind == "keys") ahead.keys_done = before.keys_covered;
    else if (!before.last_key.empty()) ahead.resume_key = before.last_key;
  }
  OpenWindow& w = windows_.emplace_back(window::Window(RandomId(), r.table_oid),
                                        config_.window_key_memory_bytes);
  w.request_id = r.id;
  w.chunk_size = chunk_rows_;
  w.started = std::chrono::steady_clock::now();
  if (windows_.size() > 1) stats_.windows_read_ahead++;
  reading_ = true;
  // On the reader's thread: the low watermark, the chunk, the chunk handed over, the high
  // watermark. Registered above before its low watermark can come out of the log.
  Reader().Run([this, weak = std::weak_ptr<char>(alive_), id = w.window.id(),
                request = std::move(ahead), size = w.chunk_size,
                handoff = w.handoff](WindowReader& reader) mutable {
    ReadEnd end = ReadEnd::kRead;
    std::string error;
    try {
      pg::Connection& sql = reader.Sql();
      ChunkRead c;
      c.chunk_size = size;
      ReadChunk(sql, request, c, id);
      c.table = request.table;
      c.key_columns = request.key_columns;
      c.key_types = request.key_types;
      {
        std::lock_guard<std::mutex> lock(handoff->mutex);
        handoff->read = std::move(c);
      }
      WriteWatermark(sql, false, id);
      try {  // (without it, a window whose markers were lost waits for its `hi` to show)
        const std::uint64_t written = common::ParseLsn(
            sql.Exec("SELECT pg_catalog.pg_current_wal_insert_lsn()::pg_catalog.text")
                .value(0, 0));
        std::lock_guard<std::mutex> lock(handoff->mutex);
        handoff->high_written_at = written;
      } catch (const std::exception&) {
      }
    } catch (const RequestError& e) {
      // the request itself cannot run (its low watermark, if written, is ignored)
      end = ReadEnd::kRequestError;
      error = e.what();
    } catch (const RetryLater& e) {
      end = ReadEnd::kRetryLater;
      error = e.what();
    } catch (const pg::Error& e) {
      // lock_timeout (another session holds the table), a deadlock that took the window's
      // transaction as its victim (the workload's DDL and row locks around the window's lock
      // wait), a serialization failure: the window is read again later, the request goes on
      end = e.sqlstate() == "55P03" || e.sqlstate() == "40P01" || e.sqlstate() == "40001"
                ? ReadEnd::kRetryLater
                : reader.Lost() ? ReadEnd::kLost : ReadEnd::kFailed;
      error = e.what();
    } catch (const std::exception& e) {
      end = reader.Lost() ? ReadEnd::kLost : ReadEnd::kFailed;
      error = e.what();
    }
    asio::post(io_, [weak, this, id, end, error] {
      if (weak.lock()) OnChunkRead(id, end, error);
    });
  });
}

void Repairs::OnChunkRead(const std::string& id, ReadEnd end, const std::string& error) {
  reading_ = false;
  auto it = std::find_if(windows_.begin(), windows_.end(),
                         [&](const OpenWindow& w) { return w.window.id() == id; });
  if (it == windows_.end()) return Schedule();  // closed already, or given up meanwhile
  if (end == ReadEnd::kRead) {
    TakeRead(*it);
    // no read in flight, every window in flight read: a window dispatched later takes its
    // snapshot after theirs (a repair's windows follow each other too closely for the timer's
    // moment between two reads)
    PruneKeyLogBelow(std::numeric_limits<std::uint64_t>::max());
    return Schedule();
  }
  // Nothing of the chunk was emitted. Its high watermark may still come (written, then the
  // connection failed): ignored. Nothing was read after it (one window ahead at most).
  const bool front = it == windows_.begin();
  const std::uint64_t request = it->request_id;
  Abandon(id);
  windows_.erase(it);
  if (!front) {
    ahead_failed_ = true;
    return Schedule();
  }
  if (requests_.empty() || requests_.front().id != request) return Schedule();
  if (end == ReadEnd::kRetryLater || end == ReadEnd::kLost)
    return DeferWindow(requests_.front(), error);
  return FailFrontRequest(error);
}

bool Repairs::TakeRead(OpenWindow& w) {
  if (w.read) return true;
  {
    std::lock_guard<std::mutex> lock(w.handoff->mutex);
    if (!w.handoff->read) return false;
    w.read = std::move(w.handoff->read);
    w.handoff->read.reset();
  }
  const ChunkRead& c = *w.read;
  if (!requests_.empty() && requests_.front().id == w.request_id) {
    RepairRequest& r = requests_.front();
    // the table's name and key as the read found them (a rename since the request followed)
    r.table = c.table;
    r.key_columns = c.key_columns;
    r.key_types = c.key_types;
    if (!r.started_logged) {
      r.started_logged = true;
      if (r.chunks == 0 && r.rows == 0)
        log::Info("repair_started", {{"consumer", consumer_.name}, {"request", r.id},
                                     {"table", r.table}, {"kind", r.kind}});
    }
  }
  // the next chunk's size, from this one's bytes (--chunk-memory-mb)
  chunk_rows_ = NextChunkRows(w.chunk_size, static_cast<std::int64_t>(c.rows_read), c.bytes,
                              config_.chunk_memory_bytes,
                              std::max(config_.chunk_size, config_.max_chunk_size));
  return true;
}

WindowReader& Repairs::Reader() {
  if (!reader_)
    reader_ = std::make_unique<WindowReader>(config_.source,
                                             "dblogd " + consumer_.name + " repairs");
  return *reader_;
}

void Repairs::Abandon(const std::string& id) {
  if (!abandoned_windows_.insert(id).second) return;
  abandoned_order_.push_back(id);
  if (abandoned_order_.size() > kAbandonedKept) {
    abandoned_windows_.erase(abandoned_order_.front());
    abandoned_order_.pop_front();
  }
}

void Repairs::DeferWindow(const RepairRequest& r, const std::string& error) {
  // the source went away: the stream reconnects; try the window again later
  log::Warn("repair_window_deferred", {{"consumer", consumer_.name}, {"request", r.id},
                                       {"error", error},
                                       {"retry_in_ms", config_.reconnect_max.count()}});
  // No window before then, however often the stream asks (a server that is shutting down
  // refuses new connections while its walsender still sends)
  next_window_at_ = std::chrono::steady_clock::now() + config_.reconnect_max;
  Later(window_timer_, next_window_at_, [this](boost::system::error_code ec) {
    if (!ec) Schedule();
  });
}

// Under the transaction's lock on the table, taken by its oid: binds every later statement of
// the transaction to the table (dblog._bind_relation, plugin/guard.c: a statement that names
// a view, another table or a type swapped in under a name resolved earlier fails before any of
// it runs), and reads the table's name and its key's columns and types again, so that the
// chunk's statements name them as they are now (a rename since the request is followed).
void Repairs::BindTable(pg::Connection& sql, RepairRequest& r) {
  const std::string oid = std::to_string(r.table_oid);
  if (catalog_)
    LockByName(sql, r);
  else
    r.table = bootstrap::BindRelation(sql, r.table_oid);
  pg::Result key = sql.ExecPrepared(
      "SELECT " + HexList("k.key_columns") + ", " + HexList("k.key_types") +
          " FROM dblog._identity_key($1::pg_catalog.oid::pg_catalog.regclass) AS k"
          " WHERE k.key_columns IS NOT NULL",
      {oid});
  if (key.ntuples() == 0)
    throw RequestError("the table has no primary key or replica identity index any more");
  std::vector<std::string> columns = SplitHexList(key.value(0, 0));
  std::vector<std::string> types = SplitHexList(key.value(0, 1));
  if (columns.size() != r.key_columns.size())
    throw RequestError("the table's identity key changed since the request was made (" +
                       JoinNames(r.key_columns) + ", now " + JoinNames(columns) + ")");
  if (std::find(types.begin(), types.end(), kNoType) != types.end())
    throw RequestError("a key column's type contains a domain, whose checks dblogd never runs");
  r.key_columns = std::move(columns);
  r.key_types = std::move(types);
}

ChunkRequest Repairs::ChunkRequestOf(const RepairRequest& r, const ChunkRead& c) const {
  ChunkRequest chunk{r.table, r.kind == "keys", r.key_columns, r.key_types, c.chunk_size};
  chunk.has_resume = !r.resume_key.empty();
  chunk.has_from = !r.from_key.empty();
  chunk.has_to = !r.to_key.empty();
  return chunk;
}

// In the chunk's transaction, under the table's lock: the plugin's description of the table
// (for the emitter, and as the chunk's rows are encoded: the lock keeps it until COMMIT), the
// chunk's bounds, encoded, and the key columns' collations.
void Repairs::ReadBounds(pg::Connection& sql, RepairRequest& r, ChunkRead& w) {
  pg::Result rel = sql.ExecPrepared(BuildChunkQueries(ChunkRequestOf(r, w)).bounds,
                                  {r.resume_key, r.from_key, r.to_key, std::to_string(r.table_oid)});
  w.relation.ParseFromString(bootstrap::UnhexBytea(rel.value(0, 0)));
  w.lower_bytes.clear();
  w.upper_bytes.clear();
  if (!rel.is_null(0, 1)) w.lower_bytes = bootstrap::UnhexBytea(rel.value(0, 1));
  else if (!rel.is_null(0, 2)) w.lower_bytes = bootstrap::UnhexBytea(rel.value(0, 2));
  if (!rel.is_null(0, 3)) w.upper_bytes = bootstrap::UnhexBytea(rel.value(0, 3));
  // A bound names every key column (the request's key objects must): one whose value is
  // NULL names a column the key did not have when the request was made.
  for (const std::string* bound : {&w.lower_bytes, &w.upper_bytes}) {
    dblog::v1::Row row;
    row.ParseFromString(*bound);
    for (const auto& v : row.values())
      if (v.kind_case() == dblog::v1::Value::kNullValue ||
          v.kind_case() == dblog::v1::Value::KIND_NOT_SET)
        throw RequestError("the request's key does not name every column of the table's "
                           "identity key (" + JoinNames(r.key_columns) +
                           "): the key changed since the request was made");
  }
  SetKeyCollations(w, rel, 4);
}

void Repairs::SetKeyCollations(ChunkRead& w, const pg::Result& rel, int column) const {
  const std::map<std::uint32_t, std::string> collations =
      rel.is_null(0, column) ? std::map<std::uint32_t, std::string>()
                             : ParseCollations(rel.value(0, column));
  w.key_collations.clear();
  for (std::uint32_t k : w.relation.key_columns()) {
    const std::uint32_t attnum = k < static_cast<std::uint32_t>(w.relation.columns_size())
                                     ? w.relation.columns(static_cast<int>(k)).attnum()
                                     : 0;
    const auto it = collations.find(attnum);
    w.key_collations.push_back(it == collations.end() ? std::string() : it->second);
  }
}

void Repairs::ReadChunk(pg::Connection& sql, RepairRequest& r, ChunkRead& w,
                        const std::string& id) {
  if (catalog_) return ReadChunkFromCatalog(sql, r, w, id);
  const bool keys = r.kind == "keys";
  const std::vector<std::optional<std::string>> params =
      keys ? std::vector<std::optional<std::string>>{
                 r.keys, std::to_string(r.keys_done),
                 std::to_string(r.keys_done + static_cast<std::size_t>(w.chunk_size))}
           : std::vector<std::optional<std::string>>{r.resume_key, r.from_key, r.to_key};
  const pg::Result rows = ReadAfterLowWatermark(sql, r, w, id, params);
  w.rows_read = static_cast<std::uint64_t>(rows.ntuples());
  if (keys) TakeAskedKeys(r, w, rows);
  else TakeRangeRows(r, w, rows);
}

pg::Result Repairs::ReadAfterLowWatermark(pg::Connection& sql, RepairRequest& r, ChunkRead& w,
                                          const std::string& id,
                                          const std::vector<std::optional<std::string>>& params) {
  // 1. low watermark  2. the chunk, with its snapshot (3. the high watermark: the caller's,
  // once it handed the chunk over)
  WriteWatermark(sql, true, id);
  sql.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  w.chunk.snapshot =
      window::Snapshot::Parse(sql.Exec("SELECT pg_current_snapshot()::text").value(0, 0));
  BindTable(sql, r);
  // The snapshot came before BindTable's wait for the lock. A rewrite committed in between
  // (ALTER TABLE ... TYPE ... USING, ADD COLUMN with a volatile default) gave the table new
  // storage whose rows the snapshot cannot see (PostgreSQL's MVCC exception for rewrites): the
  // chunk would read none of them, and the log carries no change for them, so the consumer
  // would delete the chunk's range. The table's storage as the snapshot knows it (pg_class read
  // in the snapshot) against its storage now (the syscache, after the lock): another one redoes
  // the window (VACUUM FULL and CLUSTER too, which keep the rows: they cannot be told apart).
  if (!bootstrap::StorageUnchangedSinceSnapshot(sql, r.table_oid)) w.rewritten = true;
  ReadBounds(sql, r, w);
  pg::Result rows = sql.ExecPrepared(BuildChunkQueries(ChunkRequestOf(r, w)).rows, params,
                                   pg::ResultFormat::kBinary);
  sql.Exec("COMMIT");
  return rows;
}

void Repairs::WriteWatermark(pg::Connection& sql, bool low, const std::string& window_id) const {
  const std::string content =
      Watermark{low ? Watermark::Kind::kLow : Watermark::Kind::kHigh, window_id}.Content();
  if (catalog_) {
    // its own transaction, as a transactional message is (consumer/pgoutput_source.h)
    sql.ExecParams("INSERT INTO dblog.watermarks AS w (consumer, content) VALUES ($1, $2)"
                   " ON CONFLICT (consumer) DO UPDATE SET content = EXCLUDED.content",
                   {consumer_.name, content});
    return;
  }
  sql.ExecPrepared("SELECT pg_logical_emit_message(true, $1, $2)",
                 {Watermark::Prefix(consumer_.name), content});
}

// Binary results: bytea values arrive as their bytes, text as its characters.
void Repairs::TakeAskedKeys(const RepairRequest& r, ChunkRead& w, const pg::Result& rows) {
  for (int i = 0; i < rows.ntuples(); ++i) {
    std::string key_bytes(rows.value(i, 0));
    w.chunk.asked_keys.push_back(key_bytes);
    if (!rows.is_null(i, 1)) {
      w.chunk.rows.emplace_back(key_bytes, std::string(rows.value(i, 1)));
      w.bytes += key_bytes.size() + w.chunk.rows.back().second.size();
    }
    w.total_keys = std::stoul(std::string(rows.value(i, 2)));
  }
  w.keys_covered = r.keys_done + static_cast<std::size_t>(rows.ntuples());
  w.last = rows.ntuples() < w.chunk_size || w.keys_covered >= w.total_keys;
}

void Repairs::TakeRangeRows(const RepairRequest& r, ChunkRead& w, const pg::Result& rows) {
  w.chunk.rows.reserve(static_cast<std::size_t>(rows.ntuples()));
  for (int i = 0; i < rows.ntuples(); ++i) {
    w.chunk.rows.emplace_back(std::string(rows.value(i, 0)), std::string(rows.value(i, 1)));
    w.bytes += w.chunk.rows.back().first.size() + w.chunk.rows.back().second.size();
  }
  if (!w.chunk.rows.empty()) w.last_key_bytes = w.chunk.rows.back().first;
  w.last = rows.ntuples() < w.chunk_size;
  if (rows.ntuples() > 0) {
    // ["v1", "v2", ...]: as jsonb_build_array(k1::text, ...) would write it
    const int last = rows.ntuples() - 1;
    std::string json = "[";
    for (std::size_t i = 0; i < r.key_columns.size(); ++i) {
      if (i > 0) json += ", ";
      common::AppendJsonString(json, rows.value(last, static_cast<int>(2 + i)));
    }
    w.last_key = json + "]";
  }
}

void Repairs::CloseWindow() {
  OpenWindow& w = windows_.front();
  ahead_failed_ = false;  // the next chunk is read (again) once this one is decided
  window::Window::Outcome out;
  const bool read = TakeRead(w);
  const bool same_request = !requests_.empty() && requests_.front().id == w.request_id;
  bool relation_changed = false;
  if (read) {
    // DDL between the chunk's read and the high watermark (or, pgoutput mode, between the
    // bounds and the rows): the chunk's rows do not fit what the stream says
    relation_changed = w.read->relation_changed;
    const std::string as_read = w.read->relation.SerializeAsString();
    for (const std::string& d : w.described) relation_changed |= d != as_read;
  }
  if (!read) {
    // cannot happen: the reader hands the chunk over before it writes the high watermark
    out.redo = true;
    out.reason = "the high watermark came before the chunk was handed over";
  } else if (w.truncated) {
    out.redo = true;
    out.reason = "the table was truncated while the window was open";
  } else if (relation_changed) {
    out.redo = true;
    out.reason = "the table's definition changed while the window was open";
  } else if (w.read->rewritten) {
    out.redo = true;
    out.reason = "the table was rewritten between the chunk's snapshot and its lock";
  } else {
    // the chunk's rows move into the outcome: nothing reads w.read->chunk after this
    out = w.window.Close(std::move(w.read->chunk), txlog_, current_commit_lsn_,
                         !config_.plain_windows);
  }
  if (out.redo || !same_request) {
    // Fail closed: nothing of this chunk is emitted; it is read again under a new window, and
    // so is the one read ahead after it (its markers, if they come, are ignored).
    stats_.window_redos++;
    log::Warn("repair_window_redo", {{"consumer", consumer_.name}, {"request", w.request_id},
                                     {"reason", out.reason},
                                     {"read_ahead_dropped", windows_.size() - 1},
                                     {"retry_in_ms", redo_backoff_.count()}});
    next_window_at_ = std::chrono::steady_clock::now() + redo_backoff_;
    redo_backoff_ = std::min(redo_backoff_ * 2, std::chrono::milliseconds(10000));
    // a smaller chunk next time (down to --chunk-size): a shorter read leaves fewer
    // transactions for the key log to keep
    chunk_rows_ = std::max(std::min<std::int64_t>(w.chunk_size, config_.chunk_size),
                           w.chunk_size / 2);
    windows_.pop_front();
    for (const OpenWindow& later : windows_) Abandon(later.window.id());
    windows_.clear();
    return;
  }
  RepairRequest& r = requests_.front();
  const ChunkRead& c = *w.read;
  redo_backoff_ = std::chrono::milliseconds(100);
  if (config_.repair_rows_per_second > 0) {
    // Paced: the next window waits until this one's rows fit the configured rate.
    const auto started = w.started.time_since_epoch();
    const std::int64_t next = window::PacedNextWindowNs(
        std::chrono::duration_cast<std::chrono::nanoseconds>(started).count(), c.rows_read,
        config_.repair_rows_per_second);
    next_window_at_ = std::max(
        next_window_at_, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next)));
  }
  EmitChunk(r, w, c, out);

  r.chunks++;
  r.rows += out.rows.size();
  r.deletes += out.deletes.size();
  if (r.kind == "keys") {
    r.keys_done = c.keys_covered;
    r.rows_estimated = c.total_keys;
  } else if (!c.last_key.empty()) {
    r.resume_key = c.last_key;
  }
  closing_progress_ = PendingProgress{{}, r, c.last};
  if (c.last) {
    SendRepairProgress({&r}, true);
    log::Info("repair_emitted", {{"consumer", consumer_.name}, {"request", r.id},
                                 {"chunks", r.chunks}, {"rows", r.rows}, {"deletes", r.deletes},
                                 {"fills", r.fills}});
    requests_.pop_front();
  }
  Publish();
  windows_.pop_front();
}

// ChunkBegin, the surviving rows, the asked keys found absent, ChunkEnd (with the kept keys).
void Repairs::EmitChunk(RepairRequest& r, OpenWindow& w, const ChunkRead& c,
                        const window::Window::Outcome& out) {
  const bool range = r.kind != "keys";
  dblog::v1::ChunkBegin begin;
  begin.set_request_id(r.id);
  begin.set_relation_oid(r.table_oid);
  begin.set_is_range(range);
  begin.set_chunk(r.chunks + 1);
  if (range) {
    for (const auto& collation : c.key_collations) begin.add_key_collations(collation);
    if (!c.lower_bytes.empty()) {
      begin.mutable_from_key()->ParseFromString(c.lower_bytes);
      begin.set_from_inclusive(r.resume_key.empty());
    }
    if (!c.last) {
      begin.mutable_to_key()->ParseFromString(c.last_key_bytes);
      begin.set_to_inclusive(true);
    } else if (!c.upper_bytes.empty()) {
      begin.mutable_to_key()->ParseFromString(c.upper_bytes);
    }
  }
  emit::Emitter& emitter = host_.emitter();
  emitter.BeginChunk(c.relation, begin);
  std::size_t since_flush = 0;
  for (const std::string& row : out.rows) {
    emitter.EmitChunkRow(row);
    since_flush += row.size();
    if (since_flush >= (1u << 20)) {  // frames stay small whatever the rows and chunk size
      host_.Flush();
      since_flush = 0;
    }
  }
  for (const std::string& key : out.deletes) {
    dblog::v1::Row k;
    k.ParseFromString(key);
    emitter.EmitChunkDelete(k);
  }
  // Kept keys whose events left columns unchanged (window.h, a fill): the chunk's values of
  // those, merged with what the window's events carried (window_rows.h). A whole row is a
  // READ row like the others; a partial one an UPDATE whose other columns say "keep yours".
  const std::vector<std::uint32_t> key_columns(c.relation.key_columns().begin(),
                                               c.relation.key_columns().end());
  for (const window::Window::Fill& fill : out.fills) {
    dblog::v1::Row chunk_row;
    chunk_row.ParseFromString(fill.row);
    bool complete = false;
    const dblog::v1::Row row = w.carried.Merge(emit::KeyBytes(c.relation, chunk_row), chunk_row,
                                               fill.columns, key_columns, &complete);
    if (complete) {
      emitter.EmitChunkRow(row.SerializeAsString());
      r.rows++;  // a READ row like the others (ChunkEnd.rows counts it too)
    } else {
      emitter.EmitChunkFill(row);
      stats_.window_partial_fills++;
    }
    stats_.window_fills++;
    r.fills++;
    since_flush += row.ByteSizeLong();  // fills carry the large values: frames stay small too
    if (since_flush >= (1u << 20)) {
      host_.Flush();
      since_flush = 0;
    }
  }
  std::vector<dblog::v1::Row> kept;
  if (range)
    for (const std::string& key : out.kept) kept.emplace_back().ParseFromString(key);
  emitter.EndChunk(kept, c.last);
}

// ---- progress --------------------------------------------------------------------------------

void Repairs::RepairProgressTick() {
  if (requests_.empty() || !host_.Streaming()) {
    repair_progress_running_ = false;
    return;
  }
  std::vector<RepairRequest*> queued;
  for (auto& r : requests_) queued.push_back(&r);
  SendRepairProgress(queued, false);
  Publish();  // with the estimates SendRepairProgress read
  Later(repair_progress_timer_, std::chrono::steady_clock::now() + std::chrono::seconds(1),
        [this](boost::system::error_code ec) {
          if (ec)
            repair_progress_running_ = false;
          else
            RepairProgressTick();
        });
}

void Repairs::SendRepairProgress(const std::vector<RepairRequest*>& requests, bool done) {
  dblog::v1::ServerMessage m;
  auto* p = m.mutable_progress();
  p->set_phase("repair");
  for (RepairRequest* r : requests) {
    bookkeeping_.DescribeForProgress(*r);
    auto* tp = p->add_tables();
    tp->set_schema(r->schema);
    tp->set_name(r->name.empty() ? r->table : r->name);
    tp->set_relation_oid(r->table_oid);
    // a key list's progress is in keys (asked so far, of all), a range's and a table's in rows
    tp->set_rows_copied(r->kind == "keys" ? r->keys_done : r->rows);
    tp->set_rows_estimated(r->rows_estimated);
    tp->set_done(done);
  }
  host_.Send(m);
}


// ---- pgoutput mode: the chunk without the extension -------------------------------------------
// The extension's mode binds the transaction to the table's oid in C (dblog._bind_relation) and
// encodes rows and bounds with its encoder. Without it: the table is locked by its name and the
// name checked to still be the oid (to_regclass reads the catalog as it is now); every statement
// of the chunk reads t.tableoid (a view has none: one swapped in under the name fails when the
// statement is parsed, before any of it runs) and keeps only rows whose tableoid is the table's;
// after the rows, the transaction may hold locks on no other user relation (a schema renamed
// under the table, RequireOnlyVerifiedLocks). Key values are literals of their types, values
// come back as output text under pgoutput::kOutputSettings through the one converter, as the log
// and the copy path of this mode read them (consumer/chunk_query.h).

void Repairs::LockByName(pg::Connection& sql, const RepairRequest& r) {
  // LOCK takes no snapshot: in the chunk's REPEATABLE READ transaction, the snapshot (and the
  // catalog it reads) comes after the lock, so the definition read is the one the rows have. A
  // lock held by someone else for long defers the window (lock_timeout) rather than stall the
  // consumer's stream.
  sql.Exec("SET LOCAL lock_timeout = '5s'");
  try {
    sql.Exec("LOCK TABLE ONLY " + r.table + " IN ACCESS SHARE MODE");
  } catch (const pg::Error& e) {
    // renamed (or dropped) while the lock waited: PostgreSQL looks the name up again once it
    // has the lock, and finds nothing. Read again: the next window takes the name then.
    // (3F000: its schema renamed or dropped)
    if (e.sqlstate() != "42P01" && e.sqlstate() != "3F000") throw;
    throw RetryLater("relation " + r.table + " was renamed or dropped while the window waited "
                     "for its lock");
  }
  pg::Result bound = sql.ExecParams(
      "SELECT pg_catalog.to_regclass($1)::pg_catalog.oid OPERATOR(pg_catalog.=) c.oid"
      "   AND c.relkind OPERATOR(pg_catalog.=) 'r',"
      "       " + std::string(kTrustedOwners) +
      "  FROM pg_catalog.pg_class c"
      "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
      " WHERE c.oid OPERATOR(pg_catalog.=) $2::pg_catalog.oid",
      {r.table, std::to_string(r.table_oid)});
  if (bound.ntuples() == 0 || bound.is_null(0, 0) || !bound.bool_value(0, 0))
    throw RetryLater("relation " + r.table + " is not the table of request " +
                             std::to_string(r.id) + " any more (renamed or replaced meanwhile)");
  if (!bound.bool_value(0, 1)) throw RequestError(UntrustedOwnerMessage(r.table));
}

void Repairs::ReadChunkFromCatalog(pg::Connection& sql, RepairRequest& r, ChunkRead& w,
                                   const std::string& id) {
  ReadBoundsFromCatalog(sql, r, w);
  const pg::Result rows = ReadRowsFromCatalog(sql, r, w, id);
  w.rows_read = static_cast<std::uint64_t>(rows.ntuples());
  TakeCatalogRows(r, w, rows);
}

void Repairs::ReadBoundsFromCatalog(pg::Connection& sql, RepairRequest& r, ChunkRead& w) {
  const std::string oid = std::to_string(r.table_oid);
  // the table's name now (a rename since the request is followed), outside the transaction
  pg::Result name = sql.ExecParams(
      "SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) FROM pg_catalog.pg_class c"
      "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
      " WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid",
      {oid});
  if (name.ntuples() == 0) throw RequestError("the table no longer exists");
  r.table = std::string(name.value(0, 0));
  const bool keys = r.kind == "keys";
  sql.Exec("BEGIN");
  sql.Exec(pgoutput::SetLocalOutputSettings());
  BindTable(sql, r);
  w.relation = bootstrap::DescribeTableFromCatalog(sql, r.table_oid, &w.kinds);
  auto param = [](const std::string& json) -> std::optional<std::string> {
    if (json.empty()) return std::nullopt;
    return json;
  };
  const std::int64_t per_chunk = KeysPerChunk(w.chunk_size, r.key_columns.size());
  pg::Result texts = sql.ExecParams(
      KeyTextsQuery(r.key_columns),
      {param(keys ? "" : r.resume_key), param(keys ? "" : r.from_key),
       param(keys ? "" : r.to_key), param(keys ? r.keys : ""), std::to_string(r.keys_done),
       std::to_string(r.keys_done + static_cast<std::size_t>(per_chunk))});
  CatalogChunk& c = w.catalog;
  c = CatalogChunk{};
  c.table = r.table;
  c.oid = r.table_oid;
  c.key_columns = r.key_columns;
  c.chunk_size = w.chunk_size;
  // each key column's base type, by oid, under the lock (a domain's checks never run: its base
  // type reads the value; an array of a domain would run them, and is refused)
  for (std::uint32_t k : w.relation.key_columns()) {
    pg::Result base = sql.ExecParams(
        "WITH RECURSIVE b(oid, typtype, base, elem) AS ("
        "  SELECT t.oid, t.typtype, t.typbasetype, t.typelem FROM pg_catalog.pg_type t"
        "   WHERE t.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid"
        "  UNION ALL SELECT t.oid, t.typtype, t.typbasetype, t.typelem"
        "    FROM b JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) b.base"
        "   WHERE b.typtype OPERATOR(pg_catalog.=) 'd')"
        " SELECT b.oid, EXISTS (SELECT 1 FROM pg_catalog.pg_type e"
        "                        WHERE e.oid OPERATOR(pg_catalog.=) b.elem"
        "                          AND e.typtype OPERATOR(pg_catalog.=) 'd')"
        "   FROM b WHERE b.typtype OPERATOR(pg_catalog.<>) 'd'",
        {std::to_string(w.relation.columns(static_cast<int>(k)).type_oid())});
    if (base.ntuples() != 1 || base.bool_value(0, 1))
      throw RequestError("a key column's type is an array of a domain, whose checks dblogd "
                         "never runs");
    c.key_types.push_back(static_cast<std::uint32_t>(base.u64_value(0, 0)));
  }
  c.keys = keys;
  for (const auto& col : w.relation.columns()) c.columns.push_back(common::QuoteIdent(col.name()));
  const std::size_t n = r.key_columns.size();
  for (int i = 0; i < texts.ntuples(); ++i) {
    const std::uint64_t tag = texts.u64_value(i, 0);
    if (tag == 3) {
      w.total_keys = std::stoul(std::string(texts.value(i, 1)));
      continue;
    }
    std::vector<std::string> values;
    for (std::size_t k = 0; k < n; ++k) {
      if (texts.is_null(i, static_cast<int>(1 + k)))
        throw RequestError("the request's key does not name every column of the table's "
                           "identity key (" + JoinNames(r.key_columns) +
                           "): the key changed since the request was made");
      values.emplace_back(texts.value(i, static_cast<int>(1 + k)));
    }
    if (tag == 0) c.after = std::move(values);
    else if (tag == 1) c.from = std::move(values);
    else if (tag == 2) c.to = std::move(values);
    else c.asked.push_back(std::move(values));
  }
  // ChunkBegin's bounds: each value as its type prints it, through the converter
  auto encode = [&](const std::vector<std::string>& values) -> std::string {
    if (values.empty()) return {};
    const ParamQuery q = CanonicalKeyQuery(c.key_types, values);
    pg::Result canonical = sql.ExecParams(q.sql, q.params, q.types);
    dblog::v1::Row key;
    for (std::size_t k = 0; k < n; ++k) {
      const auto column = static_cast<std::size_t>(w.relation.key_columns(static_cast<int>(k)));
      pgoutput::FromText(w.kinds.at(column), canonical.value(0, static_cast<int>(k)),
                         key.add_values());
    }
    return key.SerializeAsString();
  };
  if (!keys) {
    w.lower_bytes = encode(c.after.empty() ? c.from : c.after);
    w.upper_bytes = encode(c.to);
  }
  pg::Result collations = sql.ExecParams(KeyCollationsQuery(sql.server_version()), {oid});
  sql.Exec("COMMIT");
  SetKeyCollations(w, collations, 0);
}

pg::Result Repairs::ReadRowsFromCatalog(pg::Connection& sql, RepairRequest& r, ChunkRead& w,
                                       const std::string& id) {
  WriteWatermark(sql, true, id);
  sql.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
  sql.Exec(pgoutput::SetLocalOutputSettings());
  // locked before the snapshot, which its check takes: the catalog the snapshot reads is the
  // definition the rows have (the lock keeps it until COMMIT)
  BindTable(sql, r);
  w.chunk.snapshot = window::Snapshot::Parse(
      sql.Exec("SELECT pg_catalog.pg_current_snapshot()::pg_catalog.text").value(0, 0));
  std::vector<pgoutput::ValueKind> kinds;
  dblog::v1::Relation as_read = bootstrap::DescribeTableFromCatalog(sql, r.table_oid, &kinds);
  const bool changed = as_read.SerializeAsString() != w.relation.SerializeAsString();
  if (changed) {  // since the bounds were read: the window is redone
    w.relation = std::move(as_read);
    w.kinds = std::move(kinds);
    w.relation_changed = true;
  }
  pg::Result rows = sql.Exec("SELECT WHERE false");
  if (!changed && !(r.kind == "keys" && w.catalog.asked.empty())) {
    const ParamQuery q = CatalogRowsQuery(w.catalog);
    rows = sql.ExecParams(q.sql, q.params, q.types);
  }
  bootstrap::RequireOnlyVerifiedLocks(sql, {r.table_oid}, r.table);
  sql.Exec("COMMIT");
  return rows;
}

void Repairs::TakeCatalogRows(const RepairRequest& r, ChunkRead& w, const pg::Result& rows) {
  const std::size_t n = r.key_columns.size();
  const int columns = w.relation.columns_size();
  std::vector<std::optional<std::string>> cells(static_cast<std::size_t>(columns));
  dblog::v1::Row row;
  auto read_row = [&](int i, int first) {
    for (int col = 0; col < columns; ++col)
      cells[static_cast<std::size_t>(col)] =
          rows.is_null(i, first + col) ? std::nullopt
                                       : std::optional<std::string>(rows.value(i, first + col));
    row.Clear();
    try {
      pgoutput::RowFromText(w.kinds, cells, &row);
    } catch (const pgoutput::ValueError& e) {
      throw std::runtime_error("a row of " + r.table + ": " + e.what());
    }
  };
  if (r.kind == "keys") {
    for (int i = 0; i < rows.ntuples(); ++i) {
      // the asked key as its types print it (the row's key is the asked one, as the
      // extension's mode keys it)
      dblog::v1::Row key;
      for (std::size_t k = 0; k < n; ++k) {
        const auto column = static_cast<std::size_t>(w.relation.key_columns(static_cast<int>(k)));
        pgoutput::FromText(w.kinds.at(column), rows.value(i, static_cast<int>(k)),
                           key.add_values());
      }
      std::string key_bytes = key.SerializeAsString();
      w.chunk.asked_keys.push_back(key_bytes);
      if (rows.bool_value(i, static_cast<int>(n))) {
        read_row(i, static_cast<int>(n + 1));
        w.chunk.rows.emplace_back(std::move(key_bytes), row.SerializeAsString());
        w.bytes += w.chunk.rows.back().first.size() + w.chunk.rows.back().second.size();
      }
    }
    w.keys_covered = r.keys_done + static_cast<std::size_t>(rows.ntuples());
    w.last = rows.ntuples() < KeysPerChunk(w.chunk_size, n) || w.keys_covered >= w.total_keys;
    return;
  }
  w.chunk.rows.reserve(static_cast<std::size_t>(rows.ntuples()));
  for (int i = 0; i < rows.ntuples(); ++i) {
    read_row(i, 0);
    w.chunk.rows.emplace_back(emit::KeyBytes(w.relation, row), row.SerializeAsString());
    w.bytes += w.chunk.rows.back().first.size() + w.chunk.rows.back().second.size();
  }
  if (!w.chunk.rows.empty()) w.last_key_bytes = w.chunk.rows.back().first;
  w.last = rows.ntuples() < w.chunk_size;
  if (rows.ntuples() > 0) {
    // the last row's key values as their output text, where the next chunk resumes
    std::string json = "[";
    for (std::size_t k = 0; k < n; ++k) {
      const auto column = static_cast<std::size_t>(w.relation.key_columns(static_cast<int>(k)));
      if (k > 0) json += ", ";
      common::AppendJsonString(json, cells[column].value_or(""));
    }
    w.last_key = json + "]";
  }
}

}  // namespace dblog::consumer
