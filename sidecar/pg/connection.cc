// sidecar/pg/connection.cc: RAII libpq wrappers and pg::Error (see connection.h).
#include "pg/connection.h"

#include <charconv>
#include <cstdlib>
#include <string>

namespace dblog::pg {
namespace {

std::string TrimNewlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Field(const PGresult* result, int code) {
  const char* v = result ? PQresultErrorField(result, code) : nullptr;
  return v ? std::string(v) : std::string();
}

std::string ComposeMessage(const std::string& primary, const std::string& detail,
                           const std::string& hint) {
  std::string out = primary;
  if (!detail.empty()) out += " (detail: " + detail + ")";
  if (!hint.empty()) out += " (hint: " + hint + ")";
  return out;
}

std::string ComposeWhat(const std::string& message, const std::string& sqlstate,
                        const std::string& sql) {
  std::string out = message;
  if (!sqlstate.empty()) out += " [SQLSTATE " + sqlstate + "]";
  if (!sql.empty()) out += " while running: " + sql;
  return out;
}

// libpq reports a lost connection with its own words and no SQLSTATE; give it the standard one
// so callers can tell "the server said no" from "the server went away".
std::string StateForClientError(const PGconn* conn) {
  return conn != nullptr && PQstatus(conn) == CONNECTION_BAD ? "08006" : "";
}

}  // namespace

// ---- Error ---------------------------------------------------------------------------------

Error::Error(std::string message, std::string sqlstate, std::string sql, std::string server_message,
             std::string detail, std::string hint)
    : std::runtime_error(ComposeWhat(message, sqlstate, sql)),
      message_(std::move(message)),
      sqlstate_(std::move(sqlstate)),
      sql_(std::move(sql)),
      server_message_(std::move(server_message)),
      detail_(std::move(detail)),
      hint_(std::move(hint)) {}

Error Error::FromResult(const PGresult* result, const PGconn* conn, std::string sql) {
  std::string sqlstate = Field(result, PG_DIAG_SQLSTATE);
  std::string primary = Field(result, PG_DIAG_MESSAGE_PRIMARY);
  std::string detail = Field(result, PG_DIAG_MESSAGE_DETAIL);
  std::string hint = Field(result, PG_DIAG_MESSAGE_HINT);
  if (primary.empty()) {
    // libpq's own errors carry only the full message text.
    primary = TrimNewlines(result ? PQresultErrorMessage(result) : "");
    if (primary.empty() && conn != nullptr) primary = TrimNewlines(PQerrorMessage(conn));
    if (primary.empty()) primary = "unknown libpq failure (out of memory?)";
  }
  if (sqlstate.empty()) sqlstate = StateForClientError(conn);
  std::string message = ComposeMessage(primary, detail, hint);
  return Error(std::move(message), std::move(sqlstate), std::move(sql), std::move(primary),
               std::move(detail), std::move(hint));
}

Error Error::FromConnection(const PGconn* conn, std::string sql) {
  std::string primary = conn ? TrimNewlines(PQerrorMessage(conn)) : "no connection";
  if (primary.empty()) primary = "unknown libpq failure";
  std::string sqlstate = conn == nullptr ? "08003" : StateForClientError(conn);
  return Error(primary, std::move(sqlstate), std::move(sql), primary);
}

// ---- Result --------------------------------------------------------------------------------

ExecStatusType Result::status() const {
  return result_ ? PQresultStatus(result_.get()) : PGRES_FATAL_ERROR;
}

int Result::ntuples() const { return result_ ? PQntuples(result_.get()) : 0; }

int Result::nfields() const { return result_ ? PQnfields(result_.get()) : 0; }

void Result::check_cell(int row, int col) const {
  if (row < 0 || row >= ntuples() || col < 0 || col >= nfields())
    throw std::out_of_range("result cell (" + std::to_string(row) + ", " + std::to_string(col) +
                            ") is outside " + std::to_string(ntuples()) + " rows x " +
                            std::to_string(nfields()) + " columns");
}

bool Result::is_null(int row, int col) const {
  check_cell(row, col);
  return PQgetisnull(result_.get(), row, col) != 0;
}

std::string_view Result::value(int row, int col) const {
  auto v = optional_value(row, col);
  if (!v) {
    const char* name = PQfname(result_.get(), col);
    throw std::runtime_error("column " + std::string(name ? name : "?") + " of row " +
                             std::to_string(row) + " is NULL");
  }
  return *v;
}

std::optional<std::string_view> Result::optional_value(int row, int col) const {
  check_cell(row, col);
  if (PQgetisnull(result_.get(), row, col)) return std::nullopt;
  return std::string_view(PQgetvalue(result_.get(), row, col),
                          static_cast<std::size_t>(PQgetlength(result_.get(), row, col)));
}

std::vector<std::vector<std::optional<std::string>>> Result::text_rows() const {
  std::vector<std::vector<std::optional<std::string>>> rows;
  for (int i = 0; i < ntuples(); ++i) {
    auto& row = rows.emplace_back();
    for (int j = 0; j < nfields(); ++j) {
      const auto v = optional_value(i, j);
      row.push_back(v ? std::optional<std::string>(*v) : std::nullopt);
    }
  }
  return rows;
}

int Result::column(std::string_view name) const {
  // Not PQfnumber: it case-folds and parses quotes, we want the name exactly as returned.
  for (int c = 0; c < nfields(); ++c)
    if (name == PQfname(result_.get(), c)) return c;
  throw std::out_of_range("result has no column named " + std::string(name));
}

bool Result::bool_value(int row, int col) const {
  const std::string_view v = value(row, col);
  if (v == "t") return true;
  if (v == "f") return false;
  throw std::runtime_error("column " + std::to_string(col) + " is not a boolean: " +
                           std::string(v.substr(0, 40)));
}

namespace {
template <typename T>
T ParseInteger(std::string_view v, int col) {
  T out{};
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size() || v.empty())
    throw std::runtime_error("column " + std::to_string(col) + " is not an integer: " +
                             std::string(v.substr(0, 40)));
  return out;
}
}  // namespace

std::uint64_t Result::u64_value(int row, int col) const {
  return ParseInteger<std::uint64_t>(value(row, col), col);
}

std::int64_t Result::i64_value(int row, int col) const {
  return ParseInteger<std::int64_t>(value(row, col), col);
}

// ---- CopyBuffer ----------------------------------------------------------------------------

CopyBuffer& CopyBuffer::operator=(CopyBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void CopyBuffer::reset() {
  if (data_ != nullptr) PQfreemem(data_);
  data_ = nullptr;
  size_ = 0;
}

// ---- Connection ----------------------------------------------------------------------------

namespace {

// Whether `conninfo` or PGSERVICE names a connection service file entry.
bool NamesService(const std::string& conninfo) {
  if (const char* service = std::getenv("PGSERVICE"); service && *service) return true;
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    PQfreemem(error);
    return false;  // a plain database name, or a conninfo libpq refuses anyway
  }
  bool named = false;
  for (const PQconninfoOption* o = options; o->keyword; ++o)
    named |= std::string_view(o->keyword) == "service" && o->val && *o->val;
  PQconninfoFree(options);
  return named;
}

}  // namespace

Connection Connection::Open(const std::string& conninfo, bool replication,
                            const std::vector<std::pair<std::string, std::string>>& overrides) {
  // With expand_dbname, the first "dbname" entry is parsed as a conninfo string or URI: it
  // overrides the keywords before it (kSilentPeerDefaults) and every later keyword overrides
  // what it set.
  std::vector<const char*> keys, values;
  // Set explicitly, they would also hide a service file's values and PGCONNECT_TIMEOUT (libpq
  // reads those only for what is still unset): none with a service, no connect_timeout with it.
  if (!NamesService(conninfo))
    for (const auto& [key, value] : kSilentPeerDefaults) {
      if (std::string_view(key) == "connect_timeout" && std::getenv("PGCONNECT_TIMEOUT"))
        continue;
      keys.push_back(key);
      values.push_back(value);
    }
  keys.push_back("dbname");
  values.push_back(conninfo.c_str());
  if (replication) {
    keys.push_back("replication");
    values.push_back("database");
  }
  for (const auto& [key, value] : overrides) {
    keys.push_back(key.c_str());
    values.push_back(value.c_str());
  }
  keys.push_back("fallback_application_name");
  values.push_back("dblogd");
  keys.push_back(nullptr);
  values.push_back(nullptr);

  Connection out;
  out.replication_ = replication;
  out.conn_ = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (out.conn_ == nullptr)
    throw Error("out of memory connecting to PostgreSQL", "08001", "", "out of memory");
  if (PQstatus(out.conn_) != CONNECTION_OK) {
    std::string msg = TrimNewlines(PQerrorMessage(out.conn_));
    throw Error("cannot connect to PostgreSQL: " + msg, "08001", "", msg);
  }
  out.notice_handler_ = std::make_unique<std::function<void(const std::string&)>>();
  PQsetNoticeReceiver(out.conn_, &Connection::OnNotice, out.notice_handler_.get());
  // As pg_dump does: with an empty search_path, no function, operator or type a role created
  // in a schema can stand in for pg_catalog's in dblogd's statements. With row_security off,
  // a table whose policies would hide rows from dblogd's role is an error, never a silent
  // partial copy. constraint_exclusion = partition (its default, whatever the server's or
  // the database's setting): "on" would make the planner fold a table's CHECK constraints,
  // its owner's code, as dblogd (dblog._bind_relation refuses "on"). client_encoding UTF8
  // (whatever PGCLIENTENCODING or the database's setting): names and key values dblogd reads
  // and sends back are the same bytes in every statement. A walsender takes simple SQL too, so
  // both kinds of connection get them.
  out.Exec(
      "SELECT pg_catalog.set_config('search_path', '', false),"
      " pg_catalog.set_config('row_security', 'off', false),"
      " pg_catalog.set_config('constraint_exclusion', 'partition', false),"
      " pg_catalog.set_config('standard_conforming_strings', 'on', false),"
      " pg_catalog.set_config('client_encoding', 'UTF8', false)");
  return out;
}

Connection::Connection(Connection&& other) noexcept
    : conn_(std::exchange(other.conn_, nullptr)),
      replication_(other.replication_),
      notice_handler_(std::move(other.notice_handler_)),
      prepared_(std::exchange(other.prepared_, {})),
      prepared_serial_(other.prepared_serial_) {}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    Close();
    conn_ = std::exchange(other.conn_, nullptr);
    replication_ = other.replication_;
    notice_handler_ = std::move(other.notice_handler_);
    prepared_ = std::exchange(other.prepared_, {});
    prepared_serial_ = other.prepared_serial_;
  }
  return *this;
}

Connection::~Connection() { Close(); }

void Connection::Close() {
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
  prepared_.clear();
}

namespace {

// libpq's parameter values: each one's text, or null for SQL NULL (views into `params`).
std::vector<const char*> ValuePointers(const std::vector<std::optional<std::string>>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  return values;
}

}  // namespace

Result Connection::Exec(const std::string& sql) {
  if (conn_ == nullptr) throw Error::FromConnection(nullptr, sql);
  Result result(PQexec(conn_, sql.c_str()));
  return Checked(std::move(result), sql);
}

Result Connection::ExecParams(const std::string& sql,
                              const std::vector<std::optional<std::string>>& params,
                              ResultFormat format) {
  if (conn_ == nullptr) throw Error::FromConnection(nullptr, sql);
  const std::vector<const char*> values = ValuePointers(params);
  Result result(PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                             values.data(), nullptr, nullptr, static_cast<int>(format)));
  return Checked(std::move(result), sql);
}

Result Connection::ExecParams(const std::string& sql,
                              const std::vector<std::optional<std::string>>& params,
                              const std::vector<std::uint32_t>& types, ResultFormat format) {
  if (conn_ == nullptr) throw Error::FromConnection(nullptr, sql);
  if (types.size() != params.size())
    throw Error("one type per parameter", "22023", sql, "one type per parameter");
  const std::vector<const char*> values = ValuePointers(params);
  std::vector<Oid> oids(types.begin(), types.end());
  Result result(PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), oids.data(),
                             values.data(), nullptr, nullptr, static_cast<int>(format)));
  return Checked(std::move(result), sql);
}

Result Connection::ExecPrepared(const std::string& sql,
                                const std::vector<std::optional<std::string>>& params,
                                ResultFormat format) {
  if (conn_ == nullptr) throw Error::FromConnection(nullptr, sql);
  auto it = prepared_.find(sql);
  if (it == prepared_.end()) {
    if (prepared_.size() >= kPreparedLimit) {
      Exec("DEALLOCATE ALL");
      prepared_.clear();
    }
    std::string name = "dblog_" + std::to_string(++prepared_serial_);
    Checked(Result(PQprepare(conn_, name.c_str(), sql.c_str(), static_cast<int>(params.size()),
                             nullptr)),
            sql);
    it = prepared_.emplace(sql, std::move(name)).first;
  }
  const std::vector<const char*> values = ValuePointers(params);
  Result result(PQexecPrepared(conn_, it->second.c_str(), static_cast<int>(values.size()),
                               values.data(), nullptr, nullptr, static_cast<int>(format)));
  return Checked(std::move(result), sql);
}

Result Connection::Checked(Result result, const std::string& sql) {
  const ExecStatusType st = result.status();
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return result;
  if (st == PGRES_FATAL_ERROR || st == PGRES_NONFATAL_ERROR || !result)
    throw Error::FromResult(result.raw(), conn_, sql);
  // COPY and the like: the statement worked but needs a caller that speaks that protocol.
  const std::string msg =
      std::string("the statement returned ") + PQresStatus(st) + ", which Exec does not handle";
  throw Error(msg, "", sql, msg);
}

std::string Connection::QuoteLiteral(std::string_view text) const {
  char* q = conn_ ? PQescapeLiteral(conn_, text.data(), text.size()) : nullptr;
  if (q == nullptr) throw Error::FromConnection(conn_, "PQescapeLiteral");
  std::string out(q);
  PQfreemem(q);
  return out;
}

std::string Connection::QuoteIdentifier(std::string_view text) const {
  char* q = conn_ ? PQescapeIdentifier(conn_, text.data(), text.size()) : nullptr;
  if (q == nullptr) throw Error::FromConnection(conn_, "PQescapeIdentifier");
  std::string out(q);
  PQfreemem(q);
  return out;
}

int Connection::server_version() const { return conn_ ? PQserverVersion(conn_) : 0; }

void Connection::CheckServerVersion(int min_version) const {
  const int version = server_version();
  if (version >= min_version) return;
  auto human = [](int v) { return std::to_string(v / 10000) + "." + std::to_string(v % 10000); };
  std::string msg = "dblogd needs PostgreSQL " + human(min_version) + " or later; the server is " +
                    (version > 0 ? human(version) : "unknown");
  throw Error(msg, "0A000", "", msg);
}

void Connection::SetNoticeHandler(std::function<void(const std::string&)> handler) {
  if (!notice_handler_) return;
  *notice_handler_ = std::move(handler);
}

int Connection::socket() const { return conn_ ? PQsocket(conn_) : -1; }

bool Connection::ok() const { return conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK; }

CopyOut::CopyOut(Connection& connection, std::string sql)
    : connection_(connection), sql_(std::move(sql)) {
  Result started(PQexec(connection_.raw(), sql_.c_str()));
  if (PQresultStatus(started.raw()) != PGRES_COPY_OUT)
    throw Error::FromResult(started.raw(), connection_.raw(), sql_);
}

bool Connection::in_transaction() const {
  return conn_ && PQtransactionStatus(conn_) != PQTRANS_IDLE;
}

bool CopyOut::Next(CopyBuffer* chunk) {
  if (done_) return false;
  char* buf = nullptr;
  const int n = PQgetCopyData(connection_.raw(), &buf, 0);
  if (n >= 0) {
    *chunk = CopyBuffer(buf, n);
    return true;
  }
  if (n == -2) throw Error::FromConnection(connection_.raw(), sql_);
  done_ = true;
  chunk->reset();
  Result finished(PQgetResult(connection_.raw()));
  while (PGresult* extra = PQgetResult(connection_.raw())) PQclear(extra);
  if (PQresultStatus(finished.raw()) != PGRES_COMMAND_OK)
    throw Error::FromResult(finished.raw(), connection_.raw(), sql_);
  return false;
}

int Connection::backend_pid() const { return conn_ ? PQbackendPID(conn_) : 0; }

Canceller::Canceller(const Connection& connection)
    : cancel_(connection.raw() ? PQgetCancel(connection.raw()) : nullptr) {}

Canceller::~Canceller() {
  if (cancel_) PQfreeCancel(cancel_);
}

bool Canceller::Cancel() const {
  if (!cancel_) return false;
  char error[256];
  return PQcancel(cancel_, error, sizeof error) == 1;
}

std::string Connection::error_message() const {
  return conn_ ? TrimNewlines(PQerrorMessage(conn_)) : std::string("no connection");
}

void Connection::OnNotice(void* arg, const PGresult* result) {
  auto* handler = static_cast<std::function<void(const std::string&)>*>(arg);
  if (handler == nullptr || !*handler) return;
  (*handler)(TrimNewlines(PQresultErrorMessage(result)));
}

}  // namespace dblog::pg
