// client/apply/pg.h: the applier's connection to the target PostgreSQL: one RAII owner per libpq
// resource, and a pipeline (libpq pipeline mode) that sends statements without waiting for
// their results and checks every result later, in order.
//
// Owns: the PGconn, the queue of statements sent but not yet answered, and turning failed
// results into TargetError (the statement's description plus the server's words). Does not own:
// what the SQL means (applier.cc, target_tables.cc, progress_store.cc).
//
// This is deliberately not sidecar/pg/: client/ depends only on consumer.proto and libpq, never
// on the daemon's internals.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dblog::apply {

// A statement the target refused, or a lost connection. what() reads
// "<what was being done>: <server message> [SQLSTATE xxxxx]".
class TargetError : public std::runtime_error {
 public:
  TargetError(const std::string& message, std::string sqlstate)
      : std::runtime_error(message), sqlstate_(std::move(sqlstate)) {}
  const std::string& sqlstate() const { return sqlstate_; }

 private:
  std::string sqlstate_;
};

// One PGresult; PQclear on destruction.
class PgResult {
 public:
  PgResult() = default;
  explicit PgResult(PGresult* result) : result_(result) {}
  explicit operator bool() const { return result_ != nullptr; }
  ExecStatusType status() const {
    return result_ ? PQresultStatus(result_.get()) : PGRES_FATAL_ERROR;
  }
  int rows() const { return result_ ? PQntuples(result_.get()) : 0; }
  bool is_null(int row, int col) const { return PQgetisnull(result_.get(), row, col) != 0; }
  // Text value; "" for NULL (check is_null where it matters).
  std::string get(int row, int col) const;
  std::optional<std::string> get_optional(int row, int col) const;
  // PQcmdTuples as a number: rows affected by INSERT/UPDATE/DELETE (0 when not applicable).
  std::uint64_t affected() const;
  PGresult* raw() const { return result_.get(); }

 private:
  struct Clear {
    void operator()(PGresult* r) const { PQclear(r); }
  };
  std::unique_ptr<PGresult, Clear> result_;
};

using Params = std::vector<std::optional<std::string>>;  // text parameters; nullopt is NULL

// libpq reports a failed connection as text only. The SQLSTATE the server had for it, as far as
// its (English) message tells: 28P01 a password refused or missing, 28000 no pg_hba.conf entry
// or an unknown role, 3D000 an unknown database; anything else (refused, unreachable, the
// server starting or stopping, a message in another language) 08001. retry.h retries 08001
// only.
std::string ConnectFailureSqlstate(std::string_view message, bool needs_password);

// Why `conninfo` is not a valid connection string or URI (libpq's words), or nullopt (also for
// a plain database name, which is what Open() takes a value without '=' or URI prefix for).
std::optional<std::string> ConninfoError(const std::string& conninfo);

// The target connection. Setup work runs statement by statement (Exec/Query, outside pipeline
// mode); the apply loop switches to pipeline mode once (StartPipeline) and from then on every
// statement goes through Send*, with results checked in order as they arrive.
class PgConnection {
 public:
  // What to do with a statement's successful result (e.g. look at the affected row count).
  using Check = std::function<void(const PgResult&)>;

  // PQconnectdb with expand_dbname (key=value or URI). Throws TargetError, with the SQLSTATE of
  // ConnectFailureSqlstate.
  static PgConnection Open(const std::string& conninfo, const std::string& application_name);

  PgConnection() = default;
  PgConnection(PgConnection&&) noexcept = default;
  PgConnection& operator=(PgConnection&&) noexcept = default;
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
  ~PgConnection() = default;

  // ---- outside pipeline mode ----
  // One statement (or several, simple protocol, when params is empty); the last result.
  // Throws TargetError with `what` unless it succeeded.
  PgResult Exec(const std::string& sql, const std::string& what = {});
  PgResult Query(const std::string& sql, const Params& params, const std::string& what = {});

  // ---- pipeline mode ----
  void StartPipeline();
  bool in_pipeline() const { return pipeline_; }
  // Queue a statement. `what` describes it for error messages (never the data).
  void SendPrepare(const std::string& name, const std::string& sql, int nparams,
                   const std::string& what);
  void SendPrepared(const std::string& name, const Params& params, const std::string& what,
                    Check check = nullptr);
  void SendQuery(const std::string& sql, const Params& params, const std::string& what,
                 Check check = nullptr);
  // A sync point; `on_synced` runs once every statement before it succeeded (in order with the
  // other callbacks). A sync inside BEGIN..COMMIT does not end the transaction.
  void SendSync(std::function<void()> on_synced = nullptr);
  // A callback that runs after every result queued so far was checked (no server round trip).
  void SendMarker(std::function<void()> on_reached);
  // Sends a statement and waits for its result (everything queued before it is checked first).
  PgResult QueryNow(const std::string& sql, const Params& params, const std::string& what);

  // ---- transactions, in pipeline mode ----
  // Opens a transaction without a statement: what follows runs in the extended protocol's
  // implicit transaction, which the sync of CommitTransaction commits (two statements fewer
  // per transaction than BEGIN .. COMMIT). Anything that needs a sync point while it is open
  // (SendSync, QueryNow, Exec, Query, CopyIn) first sends BEGIN, which turns it into a
  // transaction block holding what ran before (PostgreSQL's BeginTransactionBlock of a
  // started transaction), so that the sync does not commit half of it. A statement that fails
  // rolls the transaction back, but unlike a block's failure, the next sync ends the error:
  // transactions sent after it run and commit. The applier chains them (each stores its
  // position only over the previous one's: ProgressStore::SendPosition), so they fail too.
  void BeginTransaction();
  // Makes the open transaction a transaction block now (BEGIN), if it is not one yet.
  void RequireTransactionBlock();
  // Ends it: COMMIT when it became a block, then the sync; `on_committed` runs once every
  // statement before it succeeded (as SendSync's callback).
  void CommitTransaction(std::function<void()> on_committed);
  // Rolls it back (as a block: no warning), then a sync.
  void RollbackTransaction();
  bool in_transaction() const { return transaction_ != Transaction::kNone; }

  // A COPY .. FROM STDIN streamed in pieces, in the open transaction if any. COPY cannot run
  // in pipeline mode: CopyBegin processes everything queued, leaves pipeline mode and starts
  // it; CopyPut sends rows as the caller produces them, so the server inserts them while the
  // caller reads the next ones; CopyEnd finishes it (returns the rows copied) and enters
  // pipeline mode again; CopyAbort ends it with an error (the transaction is then aborted).
  // Nothing else may be sent while a COPY is open (std::logic_error).
  void CopyBegin(const std::string& sql, const std::string& what);
  void CopyPut(std::string_view data);
  std::uint64_t CopyEnd();
  void CopyAbort();
  bool copying() const { return copying_; }

  // Processes results that have arrived, without blocking.
  void Poll();
  // Blocks until every queued statement, sync and marker has been processed.
  void Drain();
  // Blocks until at most `max` entries are still waiting.
  void DrainTo(std::size_t max);
  // Blocks until the first `count` entries ever queued have been processed.
  void DrainThrough(std::uint64_t count);
  std::size_t pending() const { return queue_.size(); }
  std::uint64_t queued_total() const { return processed_ + queue_.size(); }

  std::string QuoteLiteral(std::string_view text) const;
  PGconn* raw() const { return conn_.get(); }
  // After a TargetError the connection is unusable: the caller gives up (the server rolls back
  // whatever transaction was open when the connection closes).
  void Close() { conn_.reset(); }

 private:
  enum class Kind { kStatement, kSync, kMarker };
  enum class Transaction { kNone, kImplicit, kBlock };
  struct Pending {
    Kind kind;
    std::string what;
    Check check;
    std::function<void()> callback;
  };

  void RequestResults();           // make sure the server flushes what it has for us
  void ProcessOne(bool blocking);  // handle the front entry (blocking: wait for it)
  bool FrontReady();
  [[noreturn]] void Fail(const PGresult* result, const std::string& what);
  void SendQueueFull();

  struct Finish {
    void operator()(PGconn* c) const { PQfinish(c); }
  };
  std::unique_ptr<PGconn, Finish> conn_;
  bool pipeline_ = false;
  std::deque<Pending> queue_;
  std::size_t statements_in_flight_ = 0;
  std::uint64_t processed_ = 0;
  bool flush_requested_ = true;  // nothing sent since the last flush request or sync
  Transaction transaction_ = Transaction::kNone;
  bool copying_ = false;
  bool copy_left_pipeline_ = false;
  std::string copy_what_;
  void NotCopying(const char* what) const;  // std::logic_error while a COPY is open
  void SyncNow(std::function<void()> on_synced);  // SendSync without the transaction check
};

}  // namespace dblog::apply
