// sidecar/consumer/repairs.cc: the consumer pipeline's repairs: requests decoded from the log
// (dblog.request_queue, control=on), one watermark window at a time, reconciliation at the high
// watermark through window/, survivors emitted inside the high watermark's transaction through
// the one emitter, progress recorded once the consumer acknowledged it.
#include <algorithm>
#include <random>

#include "bootstrap/scope.h"
#include "client/json.h"
#include "consumer/pipeline.h"
#include "consumer/chunk_query.h"
#include "log/log.h"
#include "pg/slot.h"
#include "wire/frame.h"

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

}  // namespace

std::string Pipeline::KeyBytes(std::uint32_t relation_oid, const dblog::v1::Row& row) const {
  auto it = relations_.find(relation_oid);
  if (it == relations_.end()) return {};
  // The bytes of Row{values: the key columns' values}, written without building that Row: this
  // runs for every change the log carries.
  std::string key;
  for (std::uint32_t k : it->second.key_columns()) {
    if (static_cast<int>(k) >= row.values_size()) return {};
    const dblog::v1::Value& v = row.values(static_cast<int>(k));
    const std::size_t size = v.ByteSizeLong();
    wire::AppendVarint(key, 1 << 3 | 2);  // Row.values, length-delimited
    wire::AppendVarint(key, size);
    const std::size_t at = key.size();
    key.resize(at + size);
    v.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(&key[at]));
  }
  return key;
}

void Pipeline::RecordKeys(const dblog::v1::Change& c) {
  const bool window_open = window_ && window_->window.opened();
  auto touch = [&](const std::string& key) {
    if (key.empty()) return;
    txlog_.Touch(c.relation_oid(), key);
    if (window_open) window_->window.Touch(c.relation_oid(), key);
  };
  if (c.has_old_key()) touch(c.old_key().SerializeAsString());
  if (c.has_new_row()) {
    bool unchanged_key = false;
    auto it = relations_.find(c.relation_oid());
    if (it != relations_.end())
      for (std::uint32_t k : it->second.key_columns())
        unchanged_key |= static_cast<int>(k) < c.new_row().values_size() &&
                         c.new_row().values(static_cast<int>(k)).unchanged();
    if (!unchanged_key) touch(KeyBytes(c.relation_oid(), c.new_row()));
  }
}

void Pipeline::ProcessEvent(dblog::v1::Event& event, std::string_view change_bytes) {
  using E = dblog::v1::Event;
  switch (event.event_case()) {
    case E::kBegin:
      txlog_.Begin(event.begin().xid(), event.begin().commit_lsn());
      current_commit_lsn_ = event.begin().commit_lsn();
      break;
    case E::kRelation: {
      const auto& r = event.relation();
      if (r.schema() == "dblog" && r.name() == "request_queue") {
        control_oid_ = r.oid();
        control_relation_ = r;
        return;  // bookkeeping, not user data
      }
      relations_[r.oid()] = r;
      break;
    }
    case E::kChange:
      if (control_oid_ && event.change().relation_oid() == *control_oid_) {
        OnControlChange(event.change());
        return;
      }
      RecordKeys(event.change());
      break;
    case E::kTruncate:
      for (std::uint32_t oid : event.truncate().relation_oids()) {
        txlog_.Touch(oid, std::string());
        if (window_ && window_->window.opened() && window_->window.relation() == oid)
          window_->truncated = true;
      }
      break;
    case E::kMessage: {
      const auto& m = event.message();
      if (m.prefix().rfind(kWatermarkPrefix, 0) != 0) {
        if (!MessageWanted(m.prefix())) return;
        break;
      }
      // Anyone may write such a message (pg_logical_emit_message is open to every role), and
      // every consumer's pipeline sees the others' (the WAL is shared): only the window this
      // pipeline opened counts. The others are counted and (rate-limited) logged.
      const std::string& content = m.content();
      const bool own_prefix = m.prefix() == WatermarkPrefix();
      const bool ours = window_ && own_prefix && m.transactional() && content.size() > 3 &&
                        content.compare(3, std::string::npos, window_->window.id()) == 0;
      if (!ours) {
        if (!own_prefix)
          IgnoreMarker(m, m.prefix().rfind(std::string(kWatermarkPrefix) + "/", 0) == 0
                              ? "other_consumer"
                              : "no_consumer");
        else if (content.size() > 3 && abandoned_windows_.count(content.substr(3)))
          IgnoreMarker(m, "abandoned_window");
        else
          IgnoreMarker(m, "unknown_window");
        return;
      }
      if (content.rfind("lo:", 0) == 0) {
        window_->window.Open();
      } else if (content.rfind("hi:", 0) == 0 && window_->window.opened()) {
        CloseWindow();
      }
      return;  // markers are dblogd's own: never forwarded
    }
    case E::kCommit:
      txlog_.Commit();
      emitter_->Consume(event);
      if (closing_progress_) {
        closing_progress_->position = emitter_->last_position();
        pending_progress_.push_back(std::move(*closing_progress_));
        closing_progress_.reset();
      }
      return;
    default:
      break;
  }
  emitter_->Consume(event, change_bytes);
}

// Requests are read back from the queue by id (the decoded row only tells us which).
void Pipeline::LoadRequests() { LoadRequestsWhere("", {}); }

void Pipeline::LoadRequestsWhere(const std::string& condition,
                                 std::vector<std::optional<std::string>> params) {
  // $1 consumer, $2 scope
  std::vector<std::optional<std::string>> all = {consumer_.name,
                                                 config::FormatScope(consumer_.scope)};
  for (auto& p : params) all.push_back(std::move(p));
  pg::Result r = Sql().ExecParams(
      "SELECT q.id, q.table_oid, coalesce(q.from_key::text, ''), coalesce(q.to_key::text, ''),"
      "       coalesce(q.keys::text, ''), q.kind, " + HexList("k.key_columns") + ", " +
          HexList("k.key_types") + ", coalesce(p.chunks_done, 0),"
      "       coalesce(p.rows_emitted, 0), coalesce(p.deletes_emitted, 0),"
      "       coalesce(p.resume_key::text, ''), coalesce(p.keys_done, 0),"
      "       format('%I.%I', n.nspname, c.relname)"
      "  FROM dblog.request_queue q"
      "  JOIN pg_class c ON c.oid = q.table_oid JOIN pg_namespace n ON n.oid = c.relnamespace"
      "  LEFT JOIN dblog.request_progress p ON p.request_id = q.id AND p.consumer = $1,"
      // the key's columns and the types to compare them as, from the catalogs now (never
      // from the queue: a row there is no reason to cast to a type)
      "  LATERAL dblog._identity_key(q.table_oid::regclass) AS k"
      " WHERE NOT q.cancelled AND (q.consumer IS NULL OR q.consumer = $1)"
      "   AND k.key_columns IS NOT NULL"
      "   AND coalesce(p.state, 'running') = 'running' AND dblog._scope_holds($2, q.table_oid)"
      "   AND q.requested_at >= (SELECT created_at FROM dblog.consumers WHERE name = $1) " +
          condition + " ORDER BY q.id",
      all);
  for (int i = 0; i < r.ntuples(); ++i) {
    Request q;
    q.id = std::stoull(std::string(r.value(i, 0)));
    if (known_requests_.count(q.id)) continue;
    q.table_oid = static_cast<std::uint32_t>(std::stoul(std::string(r.value(i, 1))));
    q.from_key = std::string(r.value(i, 2));
    q.to_key = std::string(r.value(i, 3));
    q.keys = std::string(r.value(i, 4));
    q.kind = std::string(r.value(i, 5));
    q.key_columns = SplitHexList(r.value(i, 6));
    q.key_types = SplitHexList(r.value(i, 7));
    q.chunks = static_cast<std::uint32_t>(std::stoul(std::string(r.value(i, 8))));
    q.rows = std::stoull(std::string(r.value(i, 9)));
    q.deletes = std::stoull(std::string(r.value(i, 10)));
    q.resume_key = std::string(r.value(i, 11));
    q.keys_done = std::stoul(std::string(r.value(i, 12)));
    q.table = std::string(r.value(i, 13));
    known_requests_.insert(q.id);
    log::Info("repair_queued", {{"consumer", consumer_.name}, {"request", q.id},
                                {"table", q.table}, {"kind", q.kind},
                                {"resumed", q.chunks > 0 ? "true" : "false"}});
    requests_.push_back(std::move(q));
  }
}

// A request decoded from the log. Its row is taken from the decoded change, not read back:
// the inserting transaction's commit can be decoded before it is visible to our snapshots (the
// same visibility-order caveat the windows handle).
void Pipeline::OnControlChange(const dblog::v1::Change& change) {
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
  if (change.kind() != dblog::v1::Change::INSERT) {
    const dblog::v1::Value* cancelled = column("cancelled");
    if (cancelled && cancelled->bool_value())
      for (auto& q : requests_)
        if (q.id == request) q.cancelled = true;
    return;
  }
  if (known_requests_.count(request)) return;
  const std::string for_consumer = text("consumer");
  const dblog::v1::Value* cancelled = column("cancelled");
  if ((!for_consumer.empty() && for_consumer != consumer_.name) ||
      (cancelled && cancelled->bool_value()))
    return;
  Request q;
  q.id = request;
  const dblog::v1::Value* oid = column("table_oid");
  q.table_oid = oid ? static_cast<std::uint32_t>(oid->int_value()) : 0;
  q.kind = text("kind");
  q.from_key = text("from_key");
  q.to_key = text("to_key");
  q.keys = text("keys");
  try {
    if (!DescribeRequestTable(q)) {
      log::Info("repair_not_for_this_consumer",
                {{"consumer", consumer_.name}, {"request", request}});
      return;
    }
  } catch (const std::exception& e) {
    log::Error("repair_load_failed", {{"consumer", consumer_.name}, {"request", request},
                                      {"error", e.what()}});
    sql_.reset();
    return;
  }
  known_requests_.insert(q.id);
  log::Info("repair_queued", {{"consumer", consumer_.name}, {"request", q.id},
                              {"table", q.table}, {"kind", q.kind}, {"resumed", "false"}});
  requests_.push_back(std::move(q));
}

void Pipeline::RepairProgressTick() {
  if (requests_.empty() || state_ != State::kStreaming) {
    repair_progress_running_ = false;
    return;
  }
  std::vector<Request*> queued;
  for (auto& r : requests_) queued.push_back(&r);
  SendRepairProgress(queued, false);
  repair_progress_timer_.expires_after(std::chrono::seconds(1));
  repair_progress_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self) return;
    if (ec) {
      self->repair_progress_running_ = false;
      return;
    }
    self->RepairProgressTick();
  });
}

void Pipeline::SendRepairProgress(const std::vector<Request*>& requests, bool done) {
  dblog::v1::ServerMessage m;
  auto* p = m.mutable_progress();
  p->set_phase("repair");
  for (Request* r : requests) {
    if (!r->described) {
      try {
        pg::Result t = Sql().ExecParams(
            "SELECT n.nspname, c.relname, greatest(c.reltuples, 0)::bigint"
            "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1",
            {std::to_string(r->table_oid)});
        if (t.ntuples() == 1) {
          r->schema = std::string(t.value(0, 0));
          r->name = std::string(t.value(0, 1));
          if (r->kind == "table") r->rows_estimated = std::stoull(std::string(t.value(0, 2)));
        }
        r->described = true;
      } catch (const std::exception& e) {  // progress is best effort: report what we have
        log::Warn("repair_progress_failed", {{"consumer", consumer_.name}, {"error", e.what()}});
        sql_.reset();
      }
    }
    auto* tp = p->add_tables();
    tp->set_schema(r->schema);
    tp->set_name(r->name.empty() ? r->table : r->name);
    tp->set_relation_oid(r->table_oid);
    // a key list's progress is in keys (asked so far, of all), a range's and a table's in rows
    tp->set_rows_copied(r->kind == "keys" ? r->keys_done : r->rows);
    tp->set_rows_estimated(r->rows_estimated);
    tp->set_done(done);
  }
  session_->Send(m);
}

// The table's name and identity key, from the catalogs; false when the table is not in this
// consumer's scope (or no longer exists).
bool Pipeline::DescribeRequestTable(Request& q) {
  pg::Result r = Sql().ExecParams(
      "SELECT format('%I.%I', n.nspname, c.relname), dblog._scope_holds($1, c.oid),"
      "       " + HexList("k.key_columns") + ", " + HexList("k.key_types") +
      "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,"
      "       dblog._identity_key(c.oid) AS k"
      " WHERE c.oid = $2::oid AND k.key_columns IS NOT NULL",
      {config::FormatScope(consumer_.scope), std::to_string(q.table_oid)});
  if (r.ntuples() == 0 || r.value(0, 1) != "t") return false;
  q.table = std::string(r.value(0, 0));
  q.key_columns = SplitHexList(r.value(0, 2));
  q.key_types = SplitHexList(r.value(0, 3));
  return true;
}

void Pipeline::ScheduleWindow() {
  if (!requests_.empty() && !repair_progress_running_ && state_ == State::kStreaming) {
    repair_progress_running_ = true;
    asio::post(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->RepairProgressTick();
    });
  }
  if (window_scheduled_ || window_ || requests_.empty() || state_ != State::kStreaming) return;
  window_scheduled_ = true;
  asio::post(io_, [weak = weak_from_this()] {
    auto self = weak.lock();
    if (!self) return;
    self->window_scheduled_ = false;
    self->StartWindow();
  });
}

// Only messages the consumer asked for (Hello.message_prefixes) are forwarded; dblog's own
// prefixes never are. The plugin filters the same way; this is the second line.
bool Pipeline::MessageWanted(const std::string& prefix) const {
  if (prefix.rfind("dblog.", 0) == 0) return false;
  for (const auto& wanted : hello_.message_prefixes())
    if (prefix.rfind(wanted, 0) == 0) return true;
  return false;
}

void Pipeline::IgnoreMarker(const dblog::v1::Message& m, const char* kind) {
  stats_->foreign_markers++;
  foreign_marker_log_.Warn("foreign_watermark_ignored",
                           {{"consumer", consumer_.name},
                            {"kind", kind},
                            {"prefix", m.prefix().substr(0, 80)},
                            {"lsn", pg::FormatLsn(m.lsn())}});
}

std::string Pipeline::WatermarkPrefix() const {
  return std::string(kWatermarkPrefix) + "/" + consumer_.name;
}

void Pipeline::FailFrontRequest(const std::string& error) {
  log::Error("repair_failed", {{"consumer", consumer_.name}, {"request", requests_.front().id},
                               {"error", error}});
  FinishRequest(requests_.front().id, "failed", error);
  requests_.pop_front();
  ScheduleWindow();
}

void Pipeline::StartWindow() {
  if (window_ || requests_.empty() || state_ != State::kStreaming) return;
  if (std::chrono::steady_clock::now() < next_window_at_) {
    // backing off after a redo, or pacing (--repair-rows-per-second)
    window_timer_.expires_at(next_window_at_);
    window_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) self->ScheduleWindow();
    });
    return;
  }
  Request& r = requests_.front();
  if (r.cancelled) {
    FinishRequest(r.id, "cancelled", "");
    requests_.pop_front();
    ScheduleWindow();
    return;
  }
  const bool no_type = r.key_types.size() != r.key_columns.size() ||
                       std::find(r.key_types.begin(), r.key_types.end(), kNoType) !=
                           r.key_types.end();
  if (no_type) {
    // _identity_key's NULL: a type with a domain inside (dblog.repair*() refuses those; a
    // request can still name one when the table changed since)
    const std::string error =
        "a key column's type contains a domain, whose checks dblogd never runs";
    log::Warn("repair_failed", {{"consumer", consumer_.name}, {"request", r.id}, {"error", error}});
    FinishRequest(r.id, "failed", error);
    requests_.pop_front();
    ScheduleWindow();
    return;
  }
  const std::size_t n = r.key_columns.size();
  ChunkRequest chunk_request{r.table, r.kind == "keys", r.key_columns, r.key_types,
                             config_.chunk_size};
  chunk_request.has_resume = !r.resume_key.empty();
  chunk_request.has_from = !r.from_key.empty();
  chunk_request.has_to = !r.to_key.empty();
  const ChunkQueries queries = BuildChunkQueries(chunk_request);

  OpenWindow w{window::Window(RandomId(), r.table_oid), {}, r.id, {}, {}, 0, false, false, {},
               {}, {}, {}};
  w.started = std::chrono::steady_clock::now();
  try {
    pg::Connection& sql = Sql();
    // the plugin's description of the table (for the emitter) and the chunk's bounds, encoded
    pg::Result rel = sql.ExecParams(queries.bounds,
        {r.resume_key, r.from_key, r.to_key, std::to_string(r.table_oid)});
    w.relation.ParseFromString(bootstrap::UnhexBytea(rel.value(0, 0)));
    if (!rel.is_null(0, 1)) w.lower_bytes = bootstrap::UnhexBytea(rel.value(0, 1));
    else if (!rel.is_null(0, 2)) w.lower_bytes = bootstrap::UnhexBytea(rel.value(0, 2));
    if (!rel.is_null(0, 3)) w.upper_bytes = bootstrap::UnhexBytea(rel.value(0, 3));
    // A bound names every key column (the request's key objects must): one whose value is
    // NULL names a column the key did not have when the request was made.
    for (const std::string* bound : {&w.lower_bytes, &w.upper_bytes}) {
      dblog::v1::Row row;
      row.ParseFromString(*bound);
      for (const auto& v : row.values())
        if (v.kind_case() == dblog::v1::Value::kNullValue || v.kind_case() ==
                                                                  dblog::v1::Value::KIND_NOT_SET)
          throw RequestError("the request's key does not name every column of the table's "
                             "identity key (" + [&r] {
                               std::string names;
                               for (const auto& c : r.key_columns)
                                 names += (names.empty() ? "" : ", ") + c;
                               return names;
                             }() + "): the key changed since the request was made");
    }
    std::map<std::uint32_t, std::string> collations;
    if (!rel.is_null(0, 4)) {
      std::string_view list = rel.value(0, 4);
      while (!list.empty()) {
        const auto comma = list.find(',');
        const std::string_view item = list.substr(0, comma);
        const auto eq = item.find('=');
        collations[static_cast<std::uint32_t>(std::stoul(std::string(item.substr(0, eq))))] =
            SplitHexList(item.substr(eq + 1)).front();
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      }
    }
    for (std::uint32_t k : w.relation.key_columns()) {
      const std::uint32_t attnum = k < static_cast<std::uint32_t>(w.relation.columns_size())
                                       ? w.relation.columns(static_cast<int>(k)).attnum()
                                       : 0;
      const auto it = collations.find(attnum);
      w.key_collations.push_back(it == collations.end() ? std::string() : it->second);
    }

    const std::vector<std::optional<std::string>> params =
        r.kind == "keys"
            ? std::vector<std::optional<std::string>>{r.keys, std::to_string(r.keys_done),
                                                      std::to_string(
                                                          r.keys_done + static_cast<std::size_t>(
                                                                            config_.chunk_size))}
            : std::vector<std::optional<std::string>>{r.resume_key, r.from_key, r.to_key};

    // 1. low watermark  2. the chunk, with its snapshot  3. high watermark
    sql.ExecParams("SELECT pg_logical_emit_message(true, $1, $2)",
                   {WatermarkPrefix(), "lo:" + w.window.id()});
    sql.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    w.chunk.snapshot =
        window::Snapshot::Parse(sql.Exec("SELECT pg_current_snapshot()::text").value(0, 0));
    pg::Result rows = sql.ExecParams(queries.rows, params, pg::ResultFormat::kBinary);
    sql.Exec("COMMIT");
    sql.ExecParams("SELECT pg_logical_emit_message(true, $1, $2)",
                   {WatermarkPrefix(), "hi:" + w.window.id()});

    w.rows_read = static_cast<std::uint64_t>(rows.ntuples());
    // Binary results: bytea values arrive as their bytes, text as its characters.
    for (int i = 0; i < rows.ntuples(); ++i) {
      std::string key_bytes(rows.value(i, 0));
      if (r.kind == "keys") {
        w.chunk.asked_keys.push_back(key_bytes);
        if (!rows.is_null(i, 1)) w.chunk.rows.emplace_back(key_bytes, std::string(rows.value(i, 1)));
        w.total_keys = std::stoul(std::string(rows.value(i, 2)));
      } else {
        w.chunk.rows.emplace_back(key_bytes, std::string(rows.value(i, 1)));
        w.last_key_bytes = std::move(key_bytes);
      }
    }
    if (r.kind != "keys" && rows.ntuples() > 0) {
      // ["v1", "v2", ...]: as jsonb_build_array(k1::text, ...) would write it
      const int last = rows.ntuples() - 1;
      std::string json = "[";
      for (std::size_t i = 0; i < n; ++i) {
        if (i > 0) json += ", ";
        client::AppendJsonString(json, rows.value(last, static_cast<int>(2 + i)));
      }
      w.last_key = json + "]";
    }
    if (r.kind == "keys") {
      w.keys_covered = r.keys_done + static_cast<std::size_t>(rows.ntuples());
      w.last = rows.ntuples() < config_.chunk_size || w.keys_covered >= w.total_keys;
    } else {
      w.last = rows.ntuples() < config_.chunk_size;
    }
  } catch (const RequestError& e) {
    // Nothing was written yet: the request itself cannot run.
    return FailFrontRequest(e.what());
  } catch (const std::exception& e) {
    abandoned_windows_.insert(w.window.id());  // its low watermark may be in the log
    const bool lost = !sql_ || PQstatus(sql_->raw()) != CONNECTION_OK;
    sql_.reset();
    if (lost) {
      // the source went away: the stream reconnects; try the window again later
      log::Warn("repair_window_deferred", {{"consumer", consumer_.name}, {"request", r.id},
                                           {"error", e.what()},
                                           {"retry_in_ms", config_.reconnect_max.count()}});
      // No window before then, however often the stream asks (a server that is shutting down
      // refuses new connections while its walsender still sends)
      next_window_at_ = std::chrono::steady_clock::now() + config_.reconnect_max;
      window_timer_.expires_at(next_window_at_);
      window_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
        if (auto self = weak.lock(); self && !ec) self->ScheduleWindow();
      });
      return;
    }
    return FailFrontRequest(e.what());
  }
  if (r.chunks == 0 && r.rows == 0)
    log::Info("repair_started", {{"consumer", consumer_.name}, {"request", r.id},
                                 {"table", r.table}, {"kind", r.kind}});
  window_ = std::move(w);
}

void Pipeline::CloseWindow() {
  OpenWindow& w = *window_;
  Request& r = requests_.front();
  window::Window::Outcome out;
  if (w.truncated) {
    out.redo = true;
    out.reason = "the table was truncated while the window was open";
  } else {
    out = w.window.Close(w.chunk, txlog_, current_commit_lsn_, !config_.plain_windows);
  }
  if (out.redo || r.id != w.request_id) {
    // Fail closed: nothing of this chunk is emitted; it is read again under a new window.
    stats_->window_redos++;
    log::Warn("repair_window_redo", {{"consumer", consumer_.name}, {"request", w.request_id},
                                     {"reason", out.reason},
                                     {"retry_in_ms", redo_backoff_.count()}});
    next_window_at_ = std::chrono::steady_clock::now() + redo_backoff_;
    redo_backoff_ = std::min(redo_backoff_ * 2, std::chrono::milliseconds(10000));
    window_.reset();
    return;
  }
  dblog::v1::ChunkBegin begin;
  begin.set_request_id(r.id);
  begin.set_relation_oid(r.table_oid);
  begin.set_is_range(r.kind != "keys");
  begin.set_chunk(r.chunks + 1);
  if (r.kind != "keys") {
    for (const auto& c : w.key_collations) begin.add_key_collations(c);
    if (!w.lower_bytes.empty()) {
      begin.mutable_from_key()->ParseFromString(w.lower_bytes);
      begin.set_from_inclusive(r.resume_key.empty());
    }
    if (!w.last) {
      begin.mutable_to_key()->ParseFromString(w.last_key_bytes);
      begin.set_to_inclusive(true);
    } else if (!w.upper_bytes.empty()) {
      begin.mutable_to_key()->ParseFromString(w.upper_bytes);
    }
  }
  redo_backoff_ = std::chrono::milliseconds(100);
  if (config_.repair_rows_per_second > 0) {
    // Paced: the next window waits until this one's rows fit the configured rate.
    const auto started = w.started.time_since_epoch();
    const std::int64_t next = window::PacedNextWindowNs(
        std::chrono::duration_cast<std::chrono::nanoseconds>(started).count(), w.rows_read,
        config_.repair_rows_per_second);
    next_window_at_ = std::max(
        next_window_at_, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next)));
  }
  emitter_->BeginChunk(w.relation, begin);
  std::size_t since_flush = 0;
  for (const std::string& row : out.rows) {
    emitter_->EmitChunkRow(row);
    since_flush += row.size();
    if (since_flush >= (1u << 20)) {  // frames stay small whatever the rows and chunk size
      Flush();
      since_flush = 0;
    }
  }
  for (const std::string& key : out.deletes) {
    dblog::v1::Row k;
    k.ParseFromString(key);
    emitter_->EmitChunkDelete(k);
  }
  std::vector<dblog::v1::Row> kept;
  if (r.kind != "keys")
    for (const std::string& key : out.kept) kept.emplace_back().ParseFromString(key);
  emitter_->EndChunk(kept, w.last);

  r.chunks++;
  r.rows += out.rows.size();
  r.deletes += out.deletes.size();
  if (r.kind == "keys") {
    r.keys_done = w.keys_covered;
    r.rows_estimated = w.total_keys;
  } else if (!w.last_key.empty()) {
    r.resume_key = w.last_key;
  }
  closing_progress_ = PendingProgress{{}, r, w.last};
  if (w.last) {
    SendRepairProgress({&r}, true);
    log::Info("repair_emitted", {{"consumer", consumer_.name}, {"request", r.id},
                                 {"chunks", r.chunks}, {"rows", r.rows}, {"deletes", r.deletes}});
    requests_.pop_front();
  }
  window_.reset();
}

void Pipeline::RecordProgress(const PendingProgress& p) {
  try {
    Sql().ExecParams(
        "INSERT INTO dblog.request_progress AS p (request_id, consumer, state, chunks_done,"
        " rows_emitted, deletes_emitted, resume_key, keys_done, finished_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, nullif($7, '')::jsonb, $8,"
        "         CASE WHEN $3 = 'done' THEN now() END)"
        " ON CONFLICT (request_id, consumer) DO UPDATE SET state = EXCLUDED.state,"
        " chunks_done = EXCLUDED.chunks_done, rows_emitted = EXCLUDED.rows_emitted,"
        " deletes_emitted = EXCLUDED.deletes_emitted, resume_key = EXCLUDED.resume_key,"
        " keys_done = EXCLUDED.keys_done, finished_at = EXCLUDED.finished_at",
        {std::to_string(p.snapshot.id), consumer_.name, p.last ? "done" : "running",
         std::to_string(p.snapshot.chunks), std::to_string(p.snapshot.rows),
         std::to_string(p.snapshot.deletes), p.snapshot.resume_key,
         std::to_string(p.snapshot.keys_done)});
    if (p.last)
      log::Info("repair_done", {{"consumer", consumer_.name}, {"request", p.snapshot.id},
                                {"rows", p.snapshot.rows}, {"deletes", p.snapshot.deletes}});
  } catch (const std::exception& e) {
    // Not recorded: after a crash the chunk is redone, which is safe.
    log::Warn("repair_progress_not_recorded",
              {{"consumer", consumer_.name}, {"request", p.snapshot.id}, {"error", e.what()}});
    sql_.reset();
  }
}

void Pipeline::FinishRequest(std::uint64_t id, const std::string& state, const std::string& error) {
  try {
    Sql().ExecParams(
        "INSERT INTO dblog.request_progress (request_id, consumer, state, error, finished_at)"
        " VALUES ($1, $2, $3, nullif($4, ''), now())"
        " ON CONFLICT (request_id, consumer) DO UPDATE SET state = EXCLUDED.state,"
        " error = EXCLUDED.error, finished_at = now()",
        {std::to_string(id), consumer_.name, state, error});
  } catch (const std::exception& e) {
    log::Warn("repair_state_not_recorded", {{"consumer", consumer_.name}, {"request", id},
                                            {"error", e.what()}});
    sql_.reset();
  }
}

}  // namespace dblog::consumer
