// client/cli/apply.cc: `dblog apply` (see apply.h).
//
// The loop: read an event, hand it to the Applier (which sends SQL through a pipeline without
// waiting), and acknowledge Applier::durable() whenever it moves. Commits are made durable
// (WaitForCommits: one durable commit) every kAckWait while the stream is busy and once it has
// been quiet for kAckWait, so a quiet stream is acknowledged promptly while a busy one never
// waits for the target between events.
#include "client/cli/apply.h"

#include <sys/resource.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <sstream>
#include <type_traits>
#include <variant>

#include "client/position.h"
#include "common/logfmt.h"

namespace dblog::cli {

namespace po = boost::program_options;
using client::ComparePositions;
using dblog::v1::Position;
using dblog::v1::StreamEvent;

namespace {

// How often a busy stream makes the target's commits durable before reading on, and how long a
// quiet one waits for more before it does (see ApplyStream).
constexpr std::chrono::milliseconds kAckWait{200};

po::options_description ApplyFlags() {
  po::options_description flags("Options");
  // clang-format off
  flags.add_options()
      ("consumer", po::value<std::string>()->value_name("NAME"),
       "consumer name, [a-z][a-z0-9_]{0,47} (required)")
      ("target", po::value<std::string>()->value_name("CONNINFO"),
       "target database, a libpq connection string or URI (required; default $DBLOG_TARGET)")
      ("host", po::value<std::string>()->value_name("HOST"),
       "dblogd host (default: $DBLOG_HOST, else 127.0.0.1)")
      ("port", po::value<std::string>()->value_name("PORT"),
       "dblogd port (default: $DBLOG_PORT, else 7654)")
      ("token", po::value<std::string>()->value_name("TOKEN"),
       "the consumer's token, when dblogd requires one (default: $DBLOG_TOKEN); other users "
       "can see command lines, so prefer --token-file or the environment")
      ("token-file", po::value<std::string>()->value_name("FILE"),
       "read the token from FILE (trailing whitespace removed; default: $DBLOG_TOKEN_FILE)");
  AddTlsFlags(flags);
  flags.add_options()
      ("create-tables", po::bool_switch(),
       "create missing target schemas and tables (and add missing columns) from the source's "
       "definitions; without it they must exist and fit")
      ("allow-lossy-columns", po::bool_switch(),
       "apply into existing target columns whose type cannot hold every value of the "
       "source's (numeric(10,2) into integer rounds 1.25 to 1), with one warning per column; "
       "without it such a column stops the run before anything is applied to its table")
      ("keep-dropped-columns", po::bool_switch(),
       "keep a target column whose source column was dropped (made nullable, no longer "
       "written); without it the target column is dropped too")
      ("schema-map", po::value<std::vector<std::string>>()->value_name("FROM=TO")->composing(),
       "apply tables of source schema FROM into target schema TO (repeatable)")
      ("bookkeeping-schema", po::value<std::string>()->value_name("NAME"),
       "the target schema of dblog apply's own tables (default dblog_apply); the stream never "
       "writes there: a source table that would land in it stops the run, so give a source "
       "schema of this name another --schema-map, or the bookkeeping another name")
      ("copy-text", po::bool_switch(),
       "fill tables in the bootstrap with COPY's text format only; without it a table whose "
       "every column is of a built-in type with a binary form (integers, floats, numeric, "
       "text, bytea, uuid, dates, timestamps, json, jsonb, bool) is filled in COPY's binary "
       "format, which the target reads faster")
      ("batch-rows", po::value<std::string>()->value_name("N"),
       "rows per multi-row statement (default 1000); a bootstrap commits every 20 batches");
  AddRetryFlags(flags);
  flags.add_options()
      ("help,h", "show this help and exit");
  // clang-format on
  return flags;
}

}  // namespace

std::string ApplyHelp() {
  std::ostringstream help;
  help << "Usage: dblog apply --consumer NAME --target CONNINFO [options]\n"
          "\n"
          "Applies a consumer's change stream from dblogd to a target PostgreSQL database.\n"
          "Each source transaction becomes one target transaction, which also stores its\n"
          "position in dblog_apply.progress (dblog_apply: --bookkeeping-schema); on start\n"
          "the stored position is where the stream resumes, so every change is applied\n"
          "exactly once whatever was killed when. A position is acknowledged to dblogd only\n"
          "once the target's commit of it is durable (transactions commit with\n"
          "synchronous_commit off; every 200 ms one commit at the session's own level\n"
          "flushes them).\n"
          "\n"
          "The target tables are a mirror of the source's, not a place for other data:\n"
          "  - a row with a key the source sends is overwritten (upsert), and a source\n"
          "    TRUNCATE truncates the target table;\n"
          "  - a repair (dblog.repair*) deletes the target rows it covers (a key range, or\n"
          "    keys) that the source lacks: a whole-table repair, every row the source does\n"
          "    not have;\n"
          "  - a restarted bootstrap, and any bootstrap of a consumer that applied here\n"
          "    before, first TRUNCATEs every target table the consumer ever wrote\n"
          "    (listed in dblog_apply.tables), rows of other writers included;\n"
          "  - --create-tables also alters existing tables: it adds the source's columns\n"
          "    they lack (nullable);\n"
          "  - target tables and columns follow the source's by identity (relation oid,\n"
          "    column attnum, kept in dblog_apply.relations and dblog_apply.columns): a table\n"
          "    or column renamed at the source is renamed in the target, a dropped column is\n"
          "    dropped (unless --keep-dropped-columns), a column whose type changed is widened\n"
          "    when its values all fit the new type; a change it cannot apply safely stops\n"
          "    the run before anything of its transaction is applied.\n"
          "A target column whose type cannot hold every value of the source's (a narrower\n"
          "numeric, integer, float, varchar or timestamp) stops the run before anything is\n"
          "applied to its table, unless --allow-lossy-columns is given.\n"
          "It never applies the stream into its own bookkeeping schema (a source table that\n"
          "would land there stops the run before anything is applied), and never renames,\n"
          "alters or truncates a target table other than the one it created or adopted: a\n"
          "mapping or registration whose name now holds another table (its oid is not the\n"
          "one recorded) stops the run instead.\n"
          "\n"
          "It keeps running: when dblogd or the target is not up yet, restarts, or a connection\n"
          "is lost, it says why on stderr, rolls back the open target transaction and\n"
          "reconnects (waits of 0.5 s doubling to 30 s, with jitter), resuming after the\n"
          "position stored in the target: nothing is applied twice or skipped. Errors retrying\n"
          "cannot fix exit at once: a refused token, an unknown consumer, a scope error, a\n"
          "protocol violation, TLS that cannot be set up, a target table that does not fit,\n"
          "a target that refuses a row or a statement, a refused target password, a target\n"
          "database that does not exist. With --once the first loss ends it, as a script may\n"
          "want.\n"
          "\n"
       << ApplyFlags()
       << "\n"
          "Environment: DBLOG_HOST, DBLOG_PORT, DBLOG_TOKEN (or DBLOG_TOKEN_FILE), DBLOG_TLS,\n"
          "DBLOG_TLS_CA, DBLOG_TLS_CERT, DBLOG_TLS_KEY, DBLOG_TLS_SERVER_NAME, DBLOG_TARGET give\n"
          "defaults.\n"
          "Exit status: 0 on SIGINT/SIGTERM (an open target transaction is rolled back; with\n"
          "--once also when dblogd ends the stream between transactions), 1 on an error\n"
          "retrying cannot fix (with --once: on any error), 2 on a bad command line.\n";
  return help.str();
}

namespace {

// --bookkeeping-schema and --schema-map: no source schema is mapped into the bookkeeping.
void ReadSchemaFlags(const po::variables_map& vm, apply::ApplierOptions& options) {
  if (vm.count("bookkeeping-schema")) {
    const std::string schema = vm["bookkeeping-schema"].as<std::string>();
    if (schema.empty() || schema.size() > 63 || schema.rfind("pg_", 0) == 0)
      throw UsageError("invalid --bookkeeping-schema '" + schema +
                       "': a schema name of 1 to 63 bytes, not starting with pg_");
    options.bookkeeping_schema = schema;
  }
  if (vm.count("schema-map")) {
    std::set<std::string> seen;
    for (const std::string& pair : vm["schema-map"].as<std::vector<std::string>>()) {
      const auto eq = pair.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size())
        throw UsageError("invalid --schema-map '" + pair + "': expected FROM=TO");
      const std::string from = pair.substr(0, eq);
      if (!seen.insert(from).second)
        throw UsageError("--schema-map maps schema '" + from + "' twice");
      const std::string to = pair.substr(eq + 1);
      if (to == options.bookkeeping_schema)
        throw UsageError("--schema-map maps schema " + from + " into the bookkeeping schema " + to +
                         " (--bookkeeping-schema): the stream never writes there");
      options.schema_map.Add(from, to);
    }
  }
}

}  // namespace

std::optional<ApplyCommandOptions> ParseApplyArgs(const std::vector<std::string>& args,
                                                  const Environment& env, std::ostream& help_out) {
  const po::options_description flags = ApplyFlags();
  const po::variables_map vm = ParseFlags(args, flags);
  if (vm.count("help")) {
    help_out << ApplyHelp();
    return std::nullopt;
  }

  ApplyCommandOptions options;
  options.connect.client_name = "dblog-apply/0.1";
  ReadConsumerFlag(vm, options.connect);
  options.applier.consumer = options.connect.consumer;

  if (vm.count("target")) {
    options.target = vm["target"].as<std::string>();
  } else if (const auto target = env("DBLOG_TARGET")) {
    options.target = *target;
  } else {
    throw UsageError("--target is required (a libpq connection string, e.g. 'dbname=replica')");
  }
  if (options.target.empty()) throw UsageError("--target is empty");
  if (const auto error = apply::ConninfoError(options.target)) {
    throw UsageError("invalid --target: " + *error);
  }

  ReadServerFlags(vm, env, options.connect);

  options.applier.create_tables = vm["create-tables"].as<bool>();
  options.applier.allow_lossy_columns = vm["allow-lossy-columns"].as<bool>();
  options.applier.copy_binary = !vm["copy-text"].as<bool>();
  if (vm["keep-dropped-columns"].as<bool>())
    options.applier.dropped_columns = apply::DroppedColumns::kKeep;
  ReadSchemaFlags(vm, options.applier);
  if (vm.count("batch-rows")) {
    options.applier.batch_rows = static_cast<std::size_t>(
        ParseNumber(vm["batch-rows"].as<std::string>(), 1, 100000, "--batch-rows"));
  }
  options.applier.bootstrap_commit_rows = 20 * options.applier.batch_rows;
  ReadRetryFlags(vm, options.retry, options.connect);
  return options;
}

namespace {

// One run of `dblog apply`, over as many connections to dblogd and to the target as it takes.
// The resume point of every connection is the position stored in the target: after any loss
// the applier is built again on a new target connection, and Start() reads it.
class ApplyRun {
 public:
  ApplyRun(const ApplyCommandOptions& options, std::shared_ptr<client::Interrupter> interrupter,
           std::FILE* err)
      : options_(options), interrupter_(std::move(interrupter)), err_(err) {}

  int Run();

 private:
  // How one attempt ended.
  struct End {
    enum Kind { kStopped, kClosed, kFailed } kind;
    std::string message;
    bool retryable = false;
    int status = 0;  // kStopped: the exit status
  };

  End Session();
  // A new applier on a new target connection; sets stored_, the position stored there. An End
  // when that failed.
  std::optional<End> StartApplier();
  // Reads the stream and applies it until dblogd closes the connection (or something throws).
  void ApplyStream(client::Client& stream);
  // Acknowledges the applier's durable position once it is past what this connection has.
  void Acknowledge(client::Client& stream);
  // How the session ends when dblogd closed the connection between frames.
  End StreamClosed(client::Client& stream, const client::ConnectOptions& connect);
  // One line whatever the message holds (names of the source, the target's messages).
  void Log(const std::string& line) const {
    std::fprintf(err_, "dblog apply: %s\n", common::LogText(line).c_str());
    std::fflush(err_);
  }
  int Fail(const std::string& message) const {
    Log("error: " + message);
    return 1;
  }
  // Ends the current applier: rolls back its open target transaction, releases the consumer's
  // lock; on a target that is gone, just drops the connection (the server ends the session).
  void Discard();
  std::string Summary() const;

  const ApplyCommandOptions& options_;
  std::shared_ptr<client::Interrupter> interrupter_;
  std::FILE* err_;

  std::optional<apply::Applier> applier_;  // kept across failed connections to dblogd
  std::optional<Position> stored_;         // what its Start() read: Hello.resume_after
  apply::ApplierStats done_;               // of the appliers discarded so far
  std::optional<Position> acked_;          // the last position acknowledged, any connection
  std::optional<Position> connection_acked_;  // the server has everything up to it already
  bool progressed_ = false;  // the current connection committed something new in the target
  std::optional<std::chrono::steady_clock::time_point> connected_at_;  // of the current one
};

void ApplyRun::Discard() {
  if (!applier_) return;
  try {
    applier_->Release();
  } catch (const std::exception&) {
    // The target connection failed: whatever committed stays, the rest is rolled back by the
    // server when the session ends.
  }
  done_ += applier_->stats();
  applier_.reset();
}

std::string ApplyRun::Summary() const {
  apply::ApplierStats s = done_;
  if (applier_) s += applier_->stats();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  char cpu[64];
  std::snprintf(cpu, sizeof cpu, "%.2f s cpu, ",
                static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                    static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6);
  return std::string(cpu) + std::to_string(s.transactions) + " target transactions, " +
         std::to_string(s.rows_written) + " rows written" +
         (s.rows_copied_binary
              ? " (" + std::to_string(s.rows_copied_binary) + " copied in binary)"
              : "") +
         ", " + std::to_string(s.rows_deleted) +
         " deleted, " + std::to_string(s.truncates) + " truncated tables" +
         (s.range_deleted ? ", " + std::to_string(s.range_deleted) + " removed by repairs" : "") +
         (s.rows_unchanged ? ", " + std::to_string(s.rows_unchanged) +
                                 " copied rows the target had already (not written)"
                           : "") +
         (s.missing_rows ? ", " + std::to_string(s.missing_rows) +
                               " updates of rows the target lacks (not applied: see the repair"
                               " calls logged)"
                         : "") +
         (s.range_deletes_skipped ? ", " + std::to_string(s.range_deletes_skipped) +
                                        " range deletions skipped (collation)"
                                  : "") +
         (acked_ ? ", acknowledged through " + client::FormatPosition(*acked_) : "");
}

int ApplyRun::Run() {
  client::Backoff backoff(options_.retry.backoff);
  for (;;) {
    const End end = Session();
    if (end.kind == End::kStopped) {
      Discard();
      return end.status;
    }
    if (end.kind == End::kFailed && (!end.retryable || options_.retry.once)) {
      Discard();
      return Fail(end.message);
    }
    const auto connected_for = connected_at_ ? std::chrono::steady_clock::now() - *connected_at_
                                             : std::chrono::steady_clock::duration::zero();
    if (client::ConnectionWorked(options_.retry.backoff, progressed_, connected_for)) {
      backoff.Reset();
    }
    if (!WaitToRetry(
            backoff, *interrupter_, [this](const std::string& line) { Log(line); }, end.message)) {
      Discard();
      Log("stopped by signal: " + Summary());
      return 0;
    }
  }
}

ApplyRun::End ApplyRun::Session() {
  progressed_ = false;
  connected_at_.reset();
  if (!applier_) {
    if (std::optional<End> failed = StartApplier()) return *failed;
  }
  client::ConnectOptions connect = options_.connect;
  connect.resume_after = stored_;
  std::optional<client::Client> connection;
  try {
    connection.emplace(client::Client::Connect(connect, interrupter_));
  } catch (const client::Interrupted&) {
    Log("stopped by signal: " + Summary());
    return {End::kStopped, {}, false, 0};
  } catch (const std::exception& e) {
    // Nothing was applied: the applier (and its target connection) waits for the next attempt.
    return {End::kFailed, e.what(), client::IsRetryable(e)};
  }
  client::Client& stream = *connection;
  connected_at_ = std::chrono::steady_clock::now();
  Log("connected to dblogd at " + connect.host + ":" + std::to_string(connect.port) + ", slot " +
      stream.welcome().slot() + (stream.welcome().slot_created() ? " (new)" : ""));
  if (const std::string note = client::ReconcileNote(stream.welcome()); !note.empty()) Log(note);
  if (stream.welcome().has_reconcile())
    applier_->SourceWentBack(stream.welcome().reconcile().consistent_point());

  connection_acked_ = stored_;
  try {
    ApplyStream(stream);
    return StreamClosed(stream, connect);
  } catch (const client::Interrupted&) {
    try {
      applier_->Stop();
      Acknowledge(stream);
    } catch (const std::exception& e) {
      return {End::kFailed, e.what(), false};
    }
    Log("stopped by signal: " + Summary());
    return {End::kStopped, {}, false, 0};
  } catch (const apply::TargetError& e) {
    // Whatever committed stays committed; nothing more is acknowledged (the target may be
    // unreachable), the next connection resumes from the stored position.
    const bool retryable = client::IsRetryableSqlstate(e.sqlstate());
    Discard();
    return {End::kFailed, e.what(), retryable};
  } catch (const std::exception& e) {
    const bool retryable = client::IsRetryable(e);  // client errors; the applier's are final
    Discard();
    return {End::kFailed, e.what(), retryable};
  }
}

std::optional<ApplyRun::End> ApplyRun::StartApplier() {
  try {
    applier_.emplace(
        apply::PgConnection::Open(options_.target, "dblog apply " + options_.connect.consumer),
        options_.applier, [this](const std::string& line) { Log(line); });
    stored_ = applier_->Start();
  } catch (const apply::TargetError& e) {
    applier_.reset();
    return End{End::kFailed, e.what(), client::IsRetryableSqlstate(e.sqlstate())};
  } catch (const std::exception& e) {
    applier_.reset();
    return End{End::kFailed, e.what(), false};
  }
  if (stored_) {
    Log("resuming after " + client::FormatPosition(*stored_) + " (stored in the target)");
  } else {
    Log("no stored position for consumer " + options_.connect.consumer +
        " in the target: starting where dblogd has it");
  }
  return std::nullopt;
}

void ApplyRun::Acknowledge(client::Client& stream) {
  const auto& durable = applier_->durable();
  if (!durable || (connection_acked_ && ComparePositions(*durable, *connection_acked_) <= 0))
    return;
  progressed_ = true;  // committed in the target beyond where this connection started
  stream.Ack(*durable);
  connection_acked_ = *durable;
  acked_ = *durable;
}

void ApplyRun::ApplyStream(client::Client& stream) {
  apply::Applier& applier = *applier_;
  // valid until the next NextView or NextRef: used at once, never kept. In a bootstrap, Changes
  // come read in place (its rows go from the frame into the target's COPY without being parsed);
  // elsewhere each is parsed once, as the applier needs it parsed (NextRef).
  client::ItemView item;
  client::ItemRef ref;
  const auto next = [&]() -> bool {
    if (applier.in_bootstrap()) return stream.NextView(item);
    if (!stream.NextRef(ref)) return false;
    std::visit(
        [&](const auto* message) {
          if constexpr (std::is_same_v<std::decay_t<decltype(*message)>, StreamEvent>)
            item = client::EventView{message, nullptr};
          else
            item = message;
        },
        ref);
    return true;
  };
  auto last_wait = std::chrono::steady_clock::now();
  for (;;) {
    if (!stream.HasBufferedItems()) {
      // About to block on the network. Making the target's commits durable costs a round
      // trip, a flush and the overlap of both sides, so a busy stream only does it every
      // kAckWait; the rest of the time whatever is durable already is acknowledged.
      const auto now = std::chrono::steady_clock::now();
      if (now - last_wait >= kAckWait) {
        applier.WaitForCommits();
        last_wait = now;
      } else {
        applier.Poll();
      }
      Acknowledge(stream);
      // What was committed since is made durable and acknowledged once the stream has been
      // quiet for kAckWait, not at the next heartbeat (seconds later): the slot and the
      // consumer's bootstrap_state follow the target promptly. An open COPY ends then too.
      if ((applier.durable_behind() || applier.copying()) && !stream.WaitForItems(kAckWait)) {
        applier.WaitForCommits();
        last_wait = std::chrono::steady_clock::now();
        Acknowledge(stream);
      }
    }
    if (!next()) return;
    if (const auto* view = std::get_if<client::EventView>(&item)) {
      if (view->change != nullptr) {
        applier.Apply(*view->change);
        continue;
      }
      const StreamEvent* event = view->event;
      applier.Apply(*event);
      if (event->has_commit() || event->has_bootstrap_end()) {
        applier.Poll();
        Acknowledge(stream);
      }
    } else if (const auto* const* hb = std::get_if<const dblog::v1::Heartbeat*>(&item)) {
      const dblog::v1::Heartbeat* heartbeat = *hb;
      applier.OnHeartbeat(*heartbeat);
      applier.WaitForCommits();
      last_wait = std::chrono::steady_clock::now();
      Acknowledge(stream);
    }
  }
}

ApplyRun::End ApplyRun::StreamClosed(client::Client& stream,
                                     const client::ConnectOptions& connect) {
  // A connection closed between frames is a clean end only between transactions; in the
  // middle of one (or of the bootstrap) dblogd went away (killed, say).
  const bool cut = applier_->in_source_transaction();
  if (options_.retry.once) {
    applier_->Stop();
    Acknowledge(stream);
    if (cut) {
      return {End::kFailed,
              "dblogd closed the connection in the middle of a transaction (rolled back; "
              "it comes again on the next run): " +
                  Summary(),
              false};
    }
    Log("dblogd closed the stream: " + Summary());
    return {End::kStopped, {}, false, 0};
  }
  const std::string message =
      "dblogd at " + connect.host + ":" + std::to_string(connect.port) + " closed the connection" +
      (cut ? " in the middle of a transaction (rolled back; it comes again)" : "");
  Discard();
  return {End::kClosed, message, true};
}

}  // namespace

int RunApply(const ApplyCommandOptions& options, std::shared_ptr<client::Interrupter> interrupter,
             std::FILE* err) {
  ApplyRun run(options, std::move(interrupter), err);
  return run.Run();
}

}  // namespace dblog::cli
