// client/apply/pg.cc: the target connection and its pipeline (see pg.h).
//
// Pipeline mode runs over a blocking connection. That is safe as long as the client never lets
// the server's answers pile up: the server blocks writing results we do not read, and we could
// block writing statements it does not read. Every Send keeps the number of unanswered
// statements at or below kMaxInFlight (a few kB of answers), far below any socket buffer.
#include "client/apply/pg.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace dblog::apply {
namespace {

constexpr std::size_t kMaxInFlight = 512;
constexpr std::size_t kDrainInFlightTo = 256;

// libpq's messages end with a newline and some span lines ("server closed the connection
// unexpectedly\n\tThis probably means ..."): one line, for a log line per event.
std::string OneLine(std::string s) {
  std::string out;
  bool space = false;
  for (const char c : s) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = true;
      continue;
    }
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

std::string Field(const PGresult* result, int code) {
  const char* v = result ? PQresultErrorField(result, code) : nullptr;
  return v ? std::string(v) : std::string();
}

// Keeps the param pointers alive for one libpq call.
struct ParamArrays {
  explicit ParamArrays(const Params& params) {
    values.reserve(params.size());
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  }
  std::vector<const char*> values;
};

}  // namespace

std::string PgResult::get(int row, int col) const {
  if (!result_ || row >= rows() || col >= PQnfields(result_.get())) return {};
  return std::string(PQgetvalue(result_.get(), row, col),
                     static_cast<std::size_t>(PQgetlength(result_.get(), row, col)));
}

std::optional<std::string> PgResult::get_optional(int row, int col) const {
  if (!result_ || row >= rows() || is_null(row, col)) return std::nullopt;
  return get(row, col);
}

std::uint64_t PgResult::affected() const {
  if (!result_) return 0;
  const char* n = PQcmdTuples(result_.get());
  return n && *n ? std::strtoull(n, nullptr, 10) : 0;
}

std::string ConnectFailureSqlstate(std::string_view message, bool needs_password) {
  const auto has = [message](std::string_view text) {
    return message.find(text) != std::string_view::npos;
  };
  if (needs_password || has("password authentication failed") || has("no password supplied") ||
      has("password is required"))
    return "28P01";
  if (has("no pg_hba.conf entry") || (has("role \"") && has("\" does not exist"))) return "28000";
  if (has("database \"") && has("\" does not exist")) return "3D000";
  return "08001";
}

std::optional<std::string> ConninfoError(const std::string& conninfo) {
  // Open() passes it as an expanded dbname: libpq reads it as a connection string only when it
  // has a '=' or a URI prefix; anything else is a database name, which needs no check.
  if (conninfo.find('=') == std::string::npos && conninfo.rfind("postgresql://", 0) != 0 &&
      conninfo.rfind("postgres://", 0) != 0)
    return std::nullopt;
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options != nullptr) {
    PQconninfoFree(options);
    return std::nullopt;
  }
  std::string message = error != nullptr ? OneLine(error) : "out of memory";
  PQfreemem(error);
  return message;
}

PgConnection PgConnection::Open(const std::string& conninfo, const std::string& application_name) {
  // application_name only as a fallback: a conninfo that names one wins.
  const char* keys[] = {"dbname", "fallback_application_name", nullptr};
  const char* values[] = {conninfo.c_str(), application_name.c_str(), nullptr};
  PgConnection c;
  c.conn_.reset(PQconnectdbParams(keys, values, /*expand_dbname=*/1));
  if (!c.conn_) throw TargetError("cannot connect to the target: out of memory", "");
  if (PQstatus(c.conn_.get()) != CONNECTION_OK) {
    const std::string message = OneLine(PQerrorMessage(c.conn_.get()));
    throw TargetError("cannot connect to the target: " + message,
                      ConnectFailureSqlstate(message, PQconnectionNeedsPassword(c.conn_.get())));
  }
  PQsetNoticeProcessor(
      c.conn_.get(), [](void*, const char*) {}, nullptr);
  return c;
}

void PgConnection::Fail(const PGresult* result, const std::string& what) {
  std::string primary = Field(result, PG_DIAG_MESSAGE_PRIMARY);
  if (primary.empty()) primary = OneLine(result ? PQresultErrorMessage(result) : "");
  if (primary.empty() && conn_) primary = OneLine(PQerrorMessage(conn_.get()));
  if (primary.empty()) primary = "unknown failure";
  std::string message = (what.empty() ? std::string("target") : what) + ": " + primary;
  const std::string detail = Field(result, PG_DIAG_MESSAGE_DETAIL);
  const std::string hint = Field(result, PG_DIAG_MESSAGE_HINT);
  if (!detail.empty()) message += " (detail: " + detail + ")";
  if (!hint.empty()) message += " (hint: " + hint + ")";
  std::string sqlstate = Field(result, PG_DIAG_SQLSTATE);
  if (sqlstate.empty() && conn_ && PQstatus(conn_.get()) == CONNECTION_BAD) sqlstate = "08006";
  if (!sqlstate.empty()) message += " [SQLSTATE " + sqlstate + "]";
  throw TargetError(message, sqlstate);
}

PgResult PgConnection::Exec(const std::string& sql, const std::string& what) {
  if (pipeline_) return QueryNow(sql, {}, what);
  PgResult r(PQexec(conn_.get(), sql.c_str()));
  if (r.status() != PGRES_COMMAND_OK && r.status() != PGRES_TUPLES_OK)
    Fail(r.raw(), what.empty() ? sql : what);
  return r;
}

PgResult PgConnection::Query(const std::string& sql, const Params& params,
                             const std::string& what) {
  if (pipeline_) return QueryNow(sql, params, what);
  ParamArrays p(params);
  PgResult r(PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(params.size()), nullptr,
                          p.values.data(), nullptr, nullptr, 0));
  if (r.status() != PGRES_COMMAND_OK && r.status() != PGRES_TUPLES_OK)
    Fail(r.raw(), what.empty() ? sql : what);
  return r;
}

void PgConnection::StartPipeline() {
  if (pipeline_) return;
  if (PQenterPipelineMode(conn_.get()) != 1) Fail(nullptr, "entering pipeline mode");
  pipeline_ = true;
}

void PgConnection::SendQueueFull() {
  NotCopying("sending a statement");
  if (statements_in_flight_ < kMaxInFlight) return;
  DrainTo(kDrainInFlightTo);
}

void PgConnection::SendPrepare(const std::string& name, const std::string& sql, int nparams,
                               const std::string& what) {
  SendQueueFull();
  if (PQsendPrepare(conn_.get(), name.c_str(), sql.c_str(), nparams, nullptr) != 1)
    Fail(nullptr, what);
  queue_.push_back({Kind::kStatement, what, nullptr, nullptr});
  ++statements_in_flight_;
  flush_requested_ = false;
}

void PgConnection::SendPrepared(const std::string& name, const Params& params,
                                const std::string& what, Check check) {
  SendQueueFull();
  ParamArrays p(params);
  if (PQsendQueryPrepared(conn_.get(), name.c_str(), static_cast<int>(params.size()),
                          p.values.data(), nullptr, nullptr, 0) != 1)
    Fail(nullptr, what);
  queue_.push_back({Kind::kStatement, what, std::move(check), nullptr});
  ++statements_in_flight_;
  flush_requested_ = false;
}

void PgConnection::SendQuery(const std::string& sql, const Params& params, const std::string& what,
                             Check check) {
  SendQueueFull();
  ParamArrays p(params);
  if (PQsendQueryParams(conn_.get(), sql.c_str(), static_cast<int>(params.size()), nullptr,
                        p.values.data(), nullptr, nullptr, 0) != 1)
    Fail(nullptr, what);
  queue_.push_back({Kind::kStatement, what, std::move(check), nullptr});
  ++statements_in_flight_;
  flush_requested_ = false;
}

void PgConnection::SendSync(std::function<void()> on_synced) {
  RequireTransactionBlock();  // a sync inside an implicit transaction would commit it
  SyncNow(std::move(on_synced));
}

void PgConnection::SyncNow(std::function<void()> on_synced) {
  NotCopying("sending a sync");
  if (PQpipelineSync(conn_.get()) != 1) Fail(nullptr, "sending a pipeline sync");
  queue_.push_back({Kind::kSync, "sync", nullptr, std::move(on_synced)});
  flush_requested_ = true;  // a sync makes the server flush
}

void PgConnection::BeginTransaction() {
  if (transaction_ == Transaction::kNone) transaction_ = Transaction::kImplicit;
}

void PgConnection::RequireTransactionBlock() {
  if (transaction_ != Transaction::kImplicit) return;
  transaction_ = Transaction::kBlock;
  SendQuery("BEGIN", {}, "starting a target transaction");
}

void PgConnection::CommitTransaction(std::function<void()> on_committed) {
  if (transaction_ == Transaction::kBlock) SendQuery("COMMIT", {}, "committing");
  transaction_ = Transaction::kNone;
  SyncNow(std::move(on_committed));
}

void PgConnection::RollbackTransaction() {
  RequireTransactionBlock();
  if (transaction_ == Transaction::kBlock)
    SendQuery("ROLLBACK", {}, "rolling back the open target transaction");
  transaction_ = Transaction::kNone;
  SyncNow(nullptr);
}

void PgConnection::SendMarker(std::function<void()> on_reached) {
  if (queue_.empty()) {
    if (on_reached) on_reached();
    return;
  }
  queue_.push_back({Kind::kMarker, "marker", nullptr, std::move(on_reached)});
}

PgResult PgConnection::QueryNow(const std::string& sql, const Params& params,
                                const std::string& what) {
  auto out = std::make_shared<PgResult>();
  SendQuery(sql, params, what.empty() ? sql : what, [out](const PgResult& r) {
    *out = PgResult(PQcopyResult(r.raw(), PG_COPYRES_ATTRS | PG_COPYRES_TUPLES));
  });
  SendSync();
  Drain();
  return std::move(*out);
}

void PgConnection::RequestResults() {
  if (!flush_requested_) {
    if (PQsendFlushRequest(conn_.get()) != 1) Fail(nullptr, "sending a flush request");
    flush_requested_ = true;
  }
  if (PQflush(conn_.get()) < 0) Fail(nullptr, "sending to the target");
}

bool PgConnection::FrontReady() {
  if (queue_.front().kind == Kind::kMarker) return true;
  if (PQconsumeInput(conn_.get()) != 1) Fail(nullptr, "reading from the target");
  return PQisBusy(conn_.get()) == 0;
}

void PgConnection::ProcessOne(bool blocking) {
  Pending& front = queue_.front();
  if (front.kind == Kind::kMarker) {
    auto callback = std::move(front.callback);
    queue_.pop_front();
    ++processed_;
    if (callback) callback();
    return;
  }
  if (!blocking && !FrontReady()) return;
  PgResult result(PQgetResult(conn_.get()));
  if (front.kind == Kind::kSync) {
    if (result.status() != PGRES_PIPELINE_SYNC) Fail(result.raw(), "pipeline sync");
    auto callback = std::move(front.callback);
    queue_.pop_front();
    ++processed_;
    if (callback) callback();
    return;
  }
  switch (result.status()) {
    case PGRES_COMMAND_OK:
    case PGRES_TUPLES_OK:
      break;
    case PGRES_PIPELINE_ABORTED:
      Fail(nullptr, front.what + ": not run because an earlier statement failed");
    default:
      Fail(result.raw(), front.what);
  }
  // The end of this statement's results.
  PgResult end(PQgetResult(conn_.get()));
  if (end) Fail(end.raw(), front.what + ": unexpected extra result");
  Pending done = std::move(front);
  queue_.pop_front();
  ++processed_;
  --statements_in_flight_;
  if (done.check) done.check(result);
}

void PgConnection::Poll() {
  while (!queue_.empty()) {
    const std::size_t before = queue_.size();
    ProcessOne(/*blocking=*/false);
    if (queue_.size() == before) return;  // nothing ready
  }
}

void PgConnection::Drain() { DrainTo(0); }

void PgConnection::NotCopying(const char* what) const {
  if (copying_)
    throw std::logic_error(std::string(what) + " while a COPY is open (" + copy_what_ + ")");
}

void PgConnection::CopyBegin(const std::string& sql, const std::string& what) {
  NotCopying("starting a COPY");
  RequireTransactionBlock();  // the COPY's simple query would commit an implicit transaction
  copy_left_pipeline_ = pipeline_;
  if (pipeline_) {
    Drain();
    if (PQexitPipelineMode(conn_.get()) != 1) Fail(nullptr, what + ": leaving pipeline mode");
    pipeline_ = false;
  }
  PgResult start(PQexec(conn_.get(), sql.c_str()));
  if (start.status() != PGRES_COPY_IN) Fail(start.raw(), what);
  copying_ = true;
  copy_what_ = what;
}

void PgConnection::CopyPut(std::string_view data) {
  constexpr std::size_t kPiece = 1 << 20;
  for (std::size_t at = 0; at < data.size(); at += kPiece) {
    const std::size_t n = std::min(kPiece, data.size() - at);
    if (PQputCopyData(conn_.get(), data.data() + at, static_cast<int>(n)) != 1)
      Fail(nullptr, copy_what_);
  }
}

std::uint64_t PgConnection::CopyEnd() {
  if (PQputCopyEnd(conn_.get(), nullptr) != 1) Fail(nullptr, copy_what_);
  PgResult done(PQgetResult(conn_.get()));
  if (done.status() != PGRES_COMMAND_OK) Fail(done.raw(), copy_what_);
  const std::uint64_t rows = done.affected();
  while (PgResult extra{PQgetResult(conn_.get())}) {
    if (extra.status() != PGRES_COMMAND_OK) Fail(extra.raw(), copy_what_);
  }
  copying_ = false;
  if (copy_left_pipeline_) StartPipeline();
  return rows;
}

void PgConnection::CopyAbort() {
  if (!copying_) return;
  copying_ = false;
  if (PQputCopyEnd(conn_.get(), "dblog apply stopped") == 1) {
    while (PgResult r{PQgetResult(conn_.get())}) {
      // the COPY's error: expected
    }
  }
  if (copy_left_pipeline_) StartPipeline();
}

void PgConnection::DrainThrough(std::uint64_t count) {
  if (processed_ >= count) return;
  RequestResults();
  while (processed_ < count && !queue_.empty()) ProcessOne(/*blocking=*/true);
}

void PgConnection::DrainTo(std::size_t max) {
  if (queue_.size() > max) RequestResults();
  while (queue_.size() > max) ProcessOne(/*blocking=*/true);
}

std::string PgConnection::QuoteLiteral(std::string_view text) const {
  char* quoted = PQescapeLiteral(conn_.get(), text.data(), text.size());
  if (quoted == nullptr)
    throw TargetError("cannot quote a literal: " + OneLine(PQerrorMessage(conn_.get())), "");
  std::string out(quoted);
  PQfreemem(quoted);
  return out;
}

}  // namespace dblog::apply
