// sidecar/pg/connection.h: one RAII owner per libpq resource (PGconn, PGresult, COPY buffers)
// and the Error every failed libpq call turns into.
//
// Owns: connecting (plain SQL or replication=database), running one statement at a time and
// checking its status, turning server errors into pg::Error with SQLSTATE, SQL and the server's
// words. Does not own: what the SQL means (slot.h), the replication protocol
// (replication_stream.h), threads or event loops (every call here blocks).
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dblog::pg {

// The oldest server dblogd supports (PostgreSQL's PG_VERSION_NUM encoding: 15.0 = 150000).
inline constexpr int kMinServerVersion = 150000;

// A failed statement, replication command or connection attempt.
// what() reads "<message> [SQLSTATE xxxxx] while running: <sql>"; the bracket is left out when
// the failure happened on the client side and has no SQLSTATE (libpq's own errors).
class Error : public std::runtime_error {
 public:
  // `message` is what the reader should see first: the server's primary message, or an
  // explanation of it. `server_message` keeps the server's own primary message verbatim.
  Error(std::string message, std::string sqlstate, std::string sql, std::string server_message,
        std::string detail = {}, std::string hint = {});

  // From a failed result; when `result` is null (out of memory, connection lost) the
  // connection's error message is used. A failure without SQLSTATE on a broken connection gets
  // 08006 (connection_failure).
  static Error FromResult(const PGresult* result, const PGconn* conn, std::string sql);
  // From the connection's current error message (PQerrorMessage), for calls without a result.
  static Error FromConnection(const PGconn* conn, std::string sql);

  const std::string& message() const { return message_; }
  const std::string& sqlstate() const { return sqlstate_; }  // "" when the client failed
  const std::string& sql() const { return sql_; }
  const std::string& server_message() const { return server_message_; }
  const std::string& detail() const { return detail_; }
  const std::string& hint() const { return hint_; }

 private:
  std::string message_;
  std::string sqlstate_;
  std::string sql_;
  std::string server_message_;
  std::string detail_;
  std::string hint_;
};

// One PGresult (PQclear on destruction). Values are text-format views into the result: valid
// as long as this Result lives.
enum class ResultFormat { kText = 0, kBinary = 1 };

class Result {
 public:
  Result() = default;
  explicit Result(PGresult* result) : result_(result) {}

  explicit operator bool() const { return result_ != nullptr; }
  ExecStatusType status() const;
  int ntuples() const;
  int nfields() const;

  // Bounds-checked (std::out_of_range). value() throws std::runtime_error on SQL NULL: use
  // optional_value() or is_null() for nullable columns.
  bool is_null(int row, int col) const;
  std::string_view value(int row, int col) const;
  std::optional<std::string_view> optional_value(int row, int col) const;

  // Typed text-format getters (throw std::runtime_error on SQL NULL or a value of another
  // type): a boolean ("t"/"f"), an unsigned integer (int2/4/8 >= 0, oid, xid8), a signed one.
  bool bool_value(int row, int col) const;
  std::uint64_t u64_value(int row, int col) const;
  std::int64_t i64_value(int row, int col) const;

  // Every row as owned text cells (nullopt for SQL NULL): for results that outlive this Result.
  std::vector<std::vector<std::optional<std::string>>> text_rows() const;

  // Column lookup by name (exact match); throws std::out_of_range for an unknown name.
  int column(std::string_view name) const;
  std::string_view value(int row, std::string_view column_name) const {
    return value(row, column(column_name));
  }
  std::optional<std::string_view> optional_value(int row, std::string_view column_name) const {
    return optional_value(row, column(column_name));
  }

  PGresult* raw() const { return result_.get(); }
  PGresult* release() { return result_.release(); }

 private:
  void check_cell(int row, int col) const;

  struct Clear {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  std::unique_ptr<PGresult, Clear> result_;
};

// A buffer libpq allocated for us (PQgetCopyData): PQfreemem on destruction.
class CopyBuffer {
 public:
  CopyBuffer() = default;
  CopyBuffer(char* data, int size) : data_(data), size_(size > 0 ? size : 0) {}
  CopyBuffer(CopyBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  CopyBuffer& operator=(CopyBuffer&& other) noexcept;
  CopyBuffer(const CopyBuffer&) = delete;
  CopyBuffer& operator=(const CopyBuffer&) = delete;
  ~CopyBuffer() { reset(); }

  std::string_view view() const { return {data_, size_}; }
  void reset();

 private:
  char* data_ = nullptr;
  std::size_t size_ = 0;
};

// libpq keywords every connection dblogd opens gets unless its conninfo sets them: a source
// that goes silent (a host blackholed by a failover, a dead network path) is noticed within
// about a minute by every connection, as PostgreSQL's wal_receiver_timeout (60 s) notices it
// for a standby. Without them a statement waiting for its answer, or an idle connection, waits
// for ever (no keepalive before two hours, no data unacknowledged to time out), and a connect
// to such a host waits for the system's SYN retries (about two minutes) before trying the next
// host of a multi-host conninfo. TCP connections only (a Unix socket ignores them). None when
// the conninfo or PGSERVICE names a service (its file's values stay in force); no
// connect_timeout when PGCONNECT_TIMEOUT is set.
inline constexpr std::pair<const char*, const char*> kSilentPeerDefaults[] = {
    {"connect_timeout", "15"},     {"keepalives", "1"},          {"keepalives_idle", "30"},
    {"keepalives_interval", "10"}, {"keepalives_count", "3"},    {"tcp_user_timeout", "60000"},
};

class Connection {
 public:
  // Connects with PQconnectdbParams and expand_dbname, so `conninfo` may be a key=value string
  // or a postgresql:// URI. replication=true adds replication=database (a walsender that also
  // accepts SQL). `overrides` are extra libpq keywords applied after conninfo (they win), for
  // example {"options", "-c wal_sender_timeout=5s"} or {"application_name", "..."}.
  // application_name falls back to "dblogd"; kSilentPeerDefaults apply unless conninfo sets
  // them. Throws Error (SQLSTATE 08001 when the server could
  // not be reached or refused the connection without one).
  static Connection Open(const std::string& conninfo, bool replication,
                         const std::vector<std::pair<std::string, std::string>>& overrides = {});

  Connection() = default;
  Connection(Connection&&) noexcept;
  Connection& operator=(Connection&&) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  // One statement or replication command (simple query protocol); throws Error unless the
  // result is PGRES_COMMAND_OK or PGRES_TUPLES_OK (a COPY or START_REPLICATION needs raw()).
  // Several statements in one string return the last result.
  Result Exec(const std::string& sql);
  // One statement with $1.. text parameters (nullopt is SQL NULL), text results, or binary
  // ones (each type's send format: bytea as its bytes, text as is, integers big-endian).
  Result ExecParams(const std::string& sql, const std::vector<std::optional<std::string>>& params,
                    ResultFormat format = ResultFormat::kText);
  // The same with each parameter's type given by its oid (0: inferred): the server reads the
  // text with that type's input function, no name looked up.
  Result ExecParams(const std::string& sql, const std::vector<std::optional<std::string>>& params,
                    const std::vector<std::uint32_t>& types,
                    ResultFormat format = ResultFormat::kText);

  // The same as ExecParams (types inferred), through a statement this connection prepared the
  // first time it ran `sql`: parsed and planned once instead of at every call, for the
  // statements a loop repeats (a repair's chunk). PostgreSQL analyzes and plans it again when
  // what it reads changed (DDL), with the search_path it was prepared under. At most
  // kPreparedLimit are kept; the next one deallocates them all first. Gone with the connection.
  Result ExecPrepared(const std::string& sql,
                      const std::vector<std::optional<std::string>>& params,
                      ResultFormat format = ResultFormat::kText);
  static constexpr std::size_t kPreparedLimit = 64;
  std::size_t prepared_count() const { return prepared_.size(); }

  // 'x' -> "'x'" and "x" -> "\"x\"", quoted by libpq for this connection's encoding.
  std::string QuoteLiteral(std::string_view text) const;
  std::string QuoteIdentifier(std::string_view text) const;

  // PQserverVersion: 150020 for 15.20.
  int server_version() const;
  // Throws Error (SQLSTATE 0A000) when the server is older than `min_version`.
  void CheckServerVersion(int min_version = kMinServerVersion) const;

  // Where NOTICE and WARNING messages go (without trailing newline); they are dropped by
  // default instead of being printed to stderr by libpq.
  void SetNoticeHandler(std::function<void(const std::string&)> handler);

  bool is_open() const { return conn_ != nullptr; }
  // Open and not broken (PQstatus is CONNECTION_OK): false after the server went away.
  bool ok() const;
  // Inside a transaction block (PQtransactionStatus is not idle): a failed one included.
  bool in_transaction() const;
  bool is_replication() const { return replication_; }
  int socket() const;  // PQsocket, -1 when closed
  int backend_pid() const;  // PQbackendPID: the server process of this connection, 0 when closed
  PGconn* raw() const { return conn_; }
  // PQerrorMessage without its trailing newline.
  std::string error_message() const;
  // PQfinish now; the object stays valid and reports !is_open().
  void Close();

 private:
  static void OnNotice(void* arg, const PGresult* result);
  Result Checked(Result result, const std::string& sql);

  PGconn* conn_ = nullptr;
  bool replication_ = false;
  // On the heap so libpq's notice receiver argument survives moves of the Connection.
  std::unique_ptr<std::function<void(const std::string&)>> notice_handler_;
  std::unordered_map<std::string, std::string> prepared_;  // statement -> its name (ExecPrepared)
  std::uint64_t prepared_serial_ = 0;
};

// `COPY (...) TO STDOUT` on a connection, read chunk by chunk (PQgetCopyData, blocking).
// The constructor sends the statement (throws Error unless the server starts the copy); Next
// hands out each chunk as the server sent it, and at the end checks the command's result
// (throws Error on failure) and returns false. The connection is busy until then.
class CopyOut {
 public:
  CopyOut(Connection& connection, std::string sql);
  CopyOut(const CopyOut&) = delete;
  CopyOut& operator=(const CopyOut&) = delete;
  bool Next(CopyBuffer* chunk);

 private:
  Connection& connection_;
  std::string sql_;
  bool done_ = false;
};

// Cancels what a connection is running, from any thread (PQcancel: a new connection to the
// server asks it to cancel the current statement of this one's backend). Made while the
// connection is idle; valid after the Connection moves, not after it is closed.
class Canceller {
 public:
  explicit Canceller(const Connection& connection);
  ~Canceller();
  Canceller(const Canceller&) = delete;
  Canceller& operator=(const Canceller&) = delete;
  // Whether the request was delivered (the statement may have ended meanwhile anyway).
  bool Cancel() const;

 private:
  PGcancel* cancel_ = nullptr;
};

}  // namespace dblog::pg
