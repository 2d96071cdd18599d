// client/cli/tail.cc: `dblog tail` (see tail.h).
//
// Flags are parsed with Boost.Program_options: it generates the --help table from the same
// declarations that parse, and reports unknown, repeated and value-less flags with clear
// messages. Numbers are validated here, not by its lexical_cast (which accepts "-1" for an
// unsigned), and abbreviated flags are turned off so a prefix never silently means a flag.
#include "client/cli/tail.h"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "client/cli/progress_bar.h"
#include "client/position.h"
#include "client/relation_cache.h"
#include "common/logfmt.h"

namespace dblog::cli {

namespace po = boost::program_options;
using client::ComparePositions;
using dblog::v1::Position;
using dblog::v1::StreamEvent;

namespace {

po::options_description TailFlags() {
  po::options_description flags("Options");
  // clang-format off
  flags.add_options()
      ("consumer", po::value<std::string>()->value_name("NAME"),
       "consumer name, [a-z][a-z0-9_]{0,47} (required); dblogd keeps its position in the "
       "replication slot dblog_NAME")
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
      ("relations", po::bool_switch(),
       "also print table definitions (Relation events) as op \"relation\"")
      ("messages", po::value<std::vector<std::string>>()->value_name("PREFIX"),
       "also print messages (pg_logical_emit_message) whose prefix starts with PREFIX; "
       "repeatable (default: no messages)")
      ("ack-every", po::value<std::string>()->value_name("N"),
       "acknowledge at every Nth commit / bootstrap end instead of every one (default 1); "
       "heartbeats are always acknowledged");
  AddRetryFlags(flags);
  flags.add_options()
      ("help,h", "show this help and exit");
  // clang-format on
  return flags;
}

// Thrown when stdout cannot be written: nothing may be acknowledged after that.
class OutputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void WriteOut(std::FILE* out, const std::string& text) {
  if (std::fwrite(text.data(), 1, text.size(), out) != text.size()) {
    throw OutputError(std::string("writing to stdout failed: ") + std::strerror(errno));
  }
}

void FlushOut(std::FILE* out) {
  if (std::fflush(out) != 0 || std::ferror(out)) {
    throw OutputError(std::string("writing to stdout failed: ") + std::strerror(errno));
  }
}

}  // namespace

// Strict decimal: digits only, within [min, max].
unsigned long long ParseNumber(const std::string& text, unsigned long long min,
                               unsigned long long max, const std::string& what) {
  const bool digits_only = !text.empty() && text.size() <= 20 &&
                           text.find_first_not_of("0123456789") == std::string::npos;
  errno = 0;
  const unsigned long long value = digits_only ? std::strtoull(text.c_str(), nullptr, 10) : 0;
  if (!digits_only || errno != 0 || value < min || value > max) {
    throw UsageError("invalid " + what + " '" + text + "': expected a number from " +
                     std::to_string(min) + " to " + std::to_string(max));
  }
  return value;
}

// `what` names where the path came from (--token-file or DBLOG_TOKEN_FILE), for messages.
std::string ReadTokenFile(const std::string& path, const std::string& what) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    throw UsageError("cannot read " + what + " " + path + ": " + std::strerror(errno));
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  std::string token = contents.str();
  const auto end = token.find_last_not_of(" \t\r\n");
  token.erase(end == std::string::npos ? 0 : end + 1);
  if (token.empty()) throw UsageError(what + " " + path + " is empty");
  return token;
}

Environment ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

bool IsValidConsumerName(const std::string& name) {
  if (name.empty() || name.size() > 48) return false;
  if (name[0] < 'a' || name[0] > 'z') return false;
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

std::chrono::milliseconds ParseSeconds(const std::string& text, double min, double max,
                                       const std::string& what) {
  const auto dot = text.find('.');
  const std::string whole = text.substr(0, dot);
  const std::string fraction = dot == std::string::npos ? "" : text.substr(dot + 1);
  const bool decimal =
      !whole.empty() && whole.size() <= 9 &&
      whole.find_first_not_of("0123456789") == std::string::npos &&
      (dot == std::string::npos || (!fraction.empty() && fraction.size() <= 3 &&
                                    fraction.find_first_not_of("0123456789") == std::string::npos));
  const double seconds = decimal ? std::strtod(text.c_str(), nullptr) : -1;
  if (!decimal || seconds < min || seconds > max) {
    std::ostringstream range;
    range << min << " to " << max;
    throw UsageError("invalid " + what + " '" + text + "': expected seconds from " + range.str() +
                     " (at most 3 decimals)");
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000 + 0.5));
}

void AddRetryFlags(po::options_description& flags) {
  // clang-format off
  flags.add_options()
      ("once", po::bool_switch(),
       "exit at the first lost or refused connection instead of reconnecting (as before "
       "sinks kept running): for scripts")
      ("retry-min", po::value<std::string>()->value_name("SECONDS"),
       "the first wait before reconnecting (default 0.5); it doubles at every failed attempt, "
       "each wait a random point between half of it and all of it")
      ("retry-max", po::value<std::string>()->value_name("SECONDS"),
       "the longest wait before reconnecting (default 30)")
      ("idle-timeout", po::value<std::string>()->value_name("SECONDS"),
       "a connection to dblogd silent for this long counts as lost (default 60: a dozen of "
       "dblogd's heartbeats; keep it above dblogd's --heartbeat-interval); 0 waits forever");
  // clang-format on
}

void ReadRetryFlags(const po::variables_map& vm, RetryOptions& retry,
                    client::ConnectOptions& connect) {
  retry.once = vm["once"].as<bool>();
  if (vm.count("retry-min")) {
    retry.backoff.min =
        ParseSeconds(vm["retry-min"].as<std::string>(), 0.001, 86400, "--retry-min");
  }
  if (vm.count("retry-max")) {
    retry.backoff.max =
        ParseSeconds(vm["retry-max"].as<std::string>(), 0.001, 86400, "--retry-max");
  }
  if (retry.backoff.max < retry.backoff.min) {
    if (vm.count("retry-max")) throw UsageError("--retry-max must not be below --retry-min");
    retry.backoff.max = retry.backoff.min;  // only --retry-min, above the default maximum
  }
  connect.io_timeout = kDefaultIdleTimeout;
  if (vm.count("idle-timeout")) {
    connect.io_timeout =
        ParseSeconds(vm["idle-timeout"].as<std::string>(), 0, 86400, "--idle-timeout");
  }
}

bool WaitToRetry(client::Backoff& backoff, client::Interrupter& interrupter,
                 const std::function<void(const std::string&)>& log, const std::string& reason) {
  if (interrupter.interrupted()) return false;
  const std::chrono::milliseconds wait = backoff.Next();
  log(reason + "; retrying in " + client::FormatWait(wait) + " (attempt " +
      std::to_string(backoff.attempts()) + ")");
  return !interrupter.WaitFor(wait);
}

std::string TailHelp() {
  std::ostringstream help;
  help << "Usage: dblog tail --consumer NAME [options]\n"
          "\n"
          "Follows a consumer's change stream from dblogd and prints one JSON object per event\n"
          "on stdout (NDJSON). A position is acknowledged only after every line up to it has\n"
          "been written and flushed: at commits, at the end of a bootstrap, and at heartbeats.\n"
          "Stopping (Ctrl-C, SIGTERM) or a crash never acknowledges unwritten lines; a new\n"
          "dblog tail gets the lines written after the last acknowledgement again.\n"
          "\n"
          "It keeps running: when dblogd is not up yet, restarts, or the connection is lost,\n"
          "it says why on stderr and reconnects (waits of 0.5 s doubling to 30 s, with\n"
          "jitter), resuming after the last line it wrote. No line with a position is written\n"
          "twice, and none is skipped as long as dblogd sends the stream the same way again.\n"
          "It does, except:\n"
          "  - a transaction that carried a repair chunk, cut by the loss after the chunk\n"
          "    began: the rest of it (chunk rows, chunk_end, commit) never comes, and the\n"
          "    chunk comes again later, in a new window, at new positions;\n"
          "  - a bootstrap cut by the loss or whose end was not acknowledged yet: dblogd\n"
          "    copies again (bootstrap_begin with \"restarted\":true, every row, new positions);\n"
          "  - the consumer's scope changed while disconnected (dblogd restarted with another\n"
          "    --consumer value): the transactions sent again may differ.\n"
          "A relation line identical to the last one of its table is not written again.\n"
          "Errors retrying cannot fix exit at once: a refused token, an unknown consumer, a\n"
          "scope error, a protocol violation, TLS that cannot be set up, stdout closed. With\n"
          "--once the first loss ends it, as a script may want.\n"
          "\n"
       << TailFlags()
       << "\n"
          "Environment: DBLOG_HOST, DBLOG_PORT, DBLOG_TOKEN (or DBLOG_TOKEN_FILE), DBLOG_TLS,\n"
          "DBLOG_TLS_CA, DBLOG_TLS_CERT, DBLOG_TLS_KEY, DBLOG_TLS_SERVER_NAME give defaults for\n"
          "the flags of the same names.\n"
          "Exit status: 0 on SIGINT/SIGTERM (with --once also when dblogd ends the stream\n"
          "cleanly), 1 on an error retrying cannot fix (with --once: on any error), 2 on a bad\n"
          "command line.\n"
          "While a bootstrap copies rows and stderr is a terminal, a progress line is shown on\n"
          "stderr.\n";
  return help.str();
}

void AddTlsFlags(po::options_description& flags) {
  // clang-format off
  flags.add_options()
      ("tls", po::bool_switch(),
       "connect with TLS (dblogd --tls-cert); implied by the other --tls-* flags "
       "(default: $DBLOG_TLS, 1 or 0)")
      ("tls-ca", po::value<std::string>()->value_name("FILE"),
       "PEM CA certificate(s) the server's certificate must chain to (default: $DBLOG_TLS_CA, "
       "else the system's trusted CAs)")
      ("tls-cert", po::value<std::string>()->value_name("FILE"),
       "PEM client certificate, for a dblogd with --tls-client-ca: its CN must be the consumer "
       "name (default: $DBLOG_TLS_CERT)")
      ("tls-key", po::value<std::string>()->value_name("FILE"),
       "PEM private key of --tls-cert (default: $DBLOG_TLS_KEY)")
      ("tls-server-name", po::value<std::string>()->value_name("NAME"),
       "the DNS name or IP address the server's certificate must name (default: "
       "$DBLOG_TLS_SERVER_NAME, else --host)");
  // clang-format on
}

po::variables_map ParseFlags(const std::vector<std::string>& args,
                             const po::options_description& flags) {
  po::variables_map vm;
  try {
    const int style =
        po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
    const po::parsed_options parsed =
        po::command_line_parser(args).options(flags).style(style).run();
    // Without a positional description, program_options collects stray words silently.
    const auto stray = po::collect_unrecognized(parsed.options, po::include_positional);
    if (!stray.empty()) throw UsageError("unexpected argument '" + stray.front() + "'");
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
  return vm;
}

void ReadConsumerFlag(const po::variables_map& vm, client::ConnectOptions& connect) {
  if (!vm.count("consumer")) throw UsageError("--consumer is required");
  connect.consumer = vm["consumer"].as<std::string>();
  if (!IsValidConsumerName(connect.consumer)) {
    throw UsageError("invalid --consumer '" + connect.consumer +
                     "': expected [a-z][a-z0-9_]{0,47}");
  }
}

void ReadServerFlags(const po::variables_map& vm, const Environment& env,
                     client::ConnectOptions& connect) {
  if (vm.count("host")) {
    connect.host = vm["host"].as<std::string>();
  } else if (const auto host = env("DBLOG_HOST"); host && !host->empty()) {
    connect.host = *host;
  }
  if (connect.host.empty()) throw UsageError("--host is empty");

  if (vm.count("port")) {
    connect.port =
        static_cast<uint16_t>(ParseNumber(vm["port"].as<std::string>(), 1, 65535, "--port"));
  } else if (const auto port = env("DBLOG_PORT"); port && !port->empty()) {
    connect.port = static_cast<uint16_t>(ParseNumber(*port, 1, 65535, "DBLOG_PORT"));
  }

  if (vm.count("token") && vm.count("token-file")) {
    throw UsageError("--token and --token-file exclude each other");
  }
  if (vm.count("token")) {
    connect.token = vm["token"].as<std::string>();
  } else if (vm.count("token-file")) {
    connect.token = ReadTokenFile(vm["token-file"].as<std::string>(), "--token-file");
  } else {
    const auto token = env("DBLOG_TOKEN");
    const auto token_file = env("DBLOG_TOKEN_FILE");
    if (token && token_file) throw UsageError("DBLOG_TOKEN and DBLOG_TOKEN_FILE exclude each other");
    if (token) connect.token = *token;
    if (token_file) connect.token = ReadTokenFile(*token_file, "DBLOG_TOKEN_FILE");
  }
  ReadTlsFlags(vm, env, connect);
  // A new consumer's slot waits for the source's open transactions: say so (the first report,
  // then every 30th, one a second) and keep waiting.
  connect.on_slot_wait = [reports = std::make_shared<unsigned>(0)](const dblog::v1::Progress& p) {
    if ((*reports)++ % 30 != 0) return;
    std::cerr << "dblog: dblogd is creating this consumer's slot, which has waited "
              << p.waiting_ms() / 1000 << " s for transactions open in the source to end: "
              << p.waiting_for() << "\n";
  };
}

void ReadTlsFlags(const po::variables_map& vm, const Environment& env,
                  client::ConnectOptions& connect) {
  // A flag, else its environment variable (unset or empty: not given).
  const auto value = [&](const std::string& flag, const std::string& variable,
                         std::string* from) -> std::string {
    if (vm.count(flag)) {
      *from = "--" + flag;
      return vm[flag].as<std::string>();
    }
    *from = variable;
    const auto v = env(variable);
    return v ? *v : std::string();
  };
  // A file given must be readable now: a typo is a usage error, not a failed connection.
  const auto file = [&](const std::string& flag, const std::string& variable) {
    std::string from;
    const std::string path = value(flag, variable, &from);
    if (!path.empty() && !std::ifstream(path)) {
      throw UsageError("cannot read " + from + " " + path + ": " + std::strerror(errno));
    }
    return path;
  };
  connect.tls_ca_file = file("tls-ca", "DBLOG_TLS_CA");
  connect.tls_cert_file = file("tls-cert", "DBLOG_TLS_CERT");
  connect.tls_key_file = file("tls-key", "DBLOG_TLS_KEY");
  std::string from;
  connect.tls_server_name = value("tls-server-name", "DBLOG_TLS_SERVER_NAME", &from);
  if (connect.tls_cert_file.empty() != connect.tls_key_file.empty()) {
    throw UsageError("--tls-cert and --tls-key go together (a client certificate and its key)");
  }
  bool tls = vm.count("tls") && vm["tls"].as<bool>();
  if (!tls) {
    if (const auto v = env("DBLOG_TLS"); v && !v->empty()) {
      if (*v == "1" || *v == "true" || *v == "yes" || *v == "on") {
        tls = true;
      } else if (!(*v == "0" || *v == "false" || *v == "no" || *v == "off")) {
        throw UsageError("invalid DBLOG_TLS '" + *v + "': expected 1 or 0");
      }
    }
  }
  connect.tls = tls || !connect.tls_ca_file.empty() || !connect.tls_cert_file.empty() ||
                !connect.tls_server_name.empty();
}

std::optional<TailOptions> ParseTailArgs(const std::vector<std::string>& args,
                                         const Environment& env, std::ostream& help_out) {
  const po::options_description flags = TailFlags();
  const po::variables_map vm = ParseFlags(args, flags);
  if (vm.count("help")) {
    help_out << TailHelp();
    return std::nullopt;
  }

  TailOptions options;
  options.connect.client_name = "dblog-tail/0.1";
  ReadConsumerFlag(vm, options.connect);

  ReadServerFlags(vm, env, options.connect);

  options.render.relations = vm["relations"].as<bool>();
  if (vm.count("messages"))
    options.connect.message_prefixes = vm["messages"].as<std::vector<std::string>>();
  if (vm.count("ack-every")) {
    options.ack_every = static_cast<unsigned>(
        ParseNumber(vm["ack-every"].as<std::string>(), 1, 1000000000, "--ack-every"));
  }
  ReadRetryFlags(vm, options.retry, options.connect);
  return options;
}

namespace {

// One run of `dblog tail`, over as many connections as it takes. What it has written survives
// a lost connection, so the next one resumes after it.
class TailRun {
 public:
  TailRun(const TailOptions& options, std::shared_ptr<client::Interrupter> interrupter,
          std::FILE* out, std::FILE* err)
      : options_(options),
        interrupter_(std::move(interrupter)),
        out_(out),
        err_(err),
        progress_(err, isatty(fileno(err)) == 1, isatty(fileno(out)) == 1) {}

  int Run();

 private:
  // How one connection ended.
  struct End {
    enum Kind { kInterrupted, kClosed, kFailed } kind;
    std::string message;     // kFailed: what went wrong
    bool retryable = false;  // kFailed: another connection may get past it
    bool fatal = false;      // kFailed: writing stdout failed; nothing more may be acked
  };

  End Session();
  // Reads the stream and writes it until dblogd closes the connection (or something throws).
  void Follow(client::Client& stream);
  // One event: written unless it was written before the connection was lost (or is a relation
  // line already written), acknowledged per --ack-every at commits and bootstrap ends.
  void OnEvent(client::Client& stream, const StreamEvent& event);
  int Fail(const std::string& message);
  void Note(const std::string& message);
  // The only way anything is acknowledged: flush first, so the ack never covers a line that is
  // still in our buffer.
  void Acknowledge(client::Client& stream, const Position& position);

  const TailOptions& options_;
  std::shared_ptr<client::Interrupter> interrupter_;
  std::FILE* out_;
  std::FILE* err_;
  ProgressDisplay progress_;
  client::RelationCache relations_;

  // Across connections:
  std::optional<Position> written_;  // the last positioned event handled (written or not shown)
  std::optional<Position> resume_;   // the last Commit/BootstrapEnd written: Hello.resume_after
  bool progressed_ = false;          // the current connection brought a line not written before
  std::optional<std::chrono::steady_clock::time_point> connected_at_;  // of the current one
  int connections_ = 0;

  // Per connection:
  Position acked_;                   // never ack at or before this again
  std::optional<Position> unacked_;  // written and flushed, not yet acked
  unsigned boundaries_since_ack_ = 0;
  std::string line_;  // the rendering of the current event
};

int TailRun::Fail(const std::string& message) {
  progress_.Clear();
  std::fflush(out_);  // what was rendered is shown; it was not acknowledged
  // One line, whatever the server put in its Error message (a newline, an escape sequence):
  // escaped as dblogd's log escapes values (common/logfmt.h).
  std::fprintf(err_, "dblog: %s\n", common::LogText(message).c_str());
  return 1;
}

void TailRun::Note(const std::string& message) {
  progress_.Clear();
  std::fprintf(err_, "dblog: %s\n", common::LogText(message).c_str());
  std::fflush(err_);
}

void TailRun::Acknowledge(client::Client& stream, const Position& position) {
  if (ComparePositions(position, acked_) <= 0) return;
  FlushOut(out_);
  stream.Ack(position);
  acked_ = position;
  unacked_.reset();
  boundaries_since_ack_ = 0;
}

int TailRun::Run() {
  client::Backoff backoff(options_.retry.backoff);
  for (;;) {
    const End end = Session();
    if (end.kind == End::kInterrupted) return 0;
    std::string reason;
    if (end.kind == End::kClosed) {
      progress_.Clear();
      try {
        FlushOut(out_);
      } catch (const std::exception& e) {
        return Fail(e.what());
      }
      if (options_.retry.once) return 0;  // dblogd ended the stream without an error
      reason = "dblogd at " + options_.connect.host + ":" + std::to_string(options_.connect.port) +
               " closed the connection";
    } else {
      if (end.fatal || !end.retryable || options_.retry.once) return Fail(end.message);
      reason = end.message;
      try {
        FlushOut(out_);  // what was written before the loss is out before we wait
      } catch (const std::exception& e) {
        return Fail(e.what());
      }
    }
    const auto connected_for = connected_at_ ? std::chrono::steady_clock::now() - *connected_at_
                                             : std::chrono::steady_clock::duration::zero();
    if (client::ConnectionWorked(options_.retry.backoff, progressed_, connected_for)) {
      backoff.Reset();
    }
    if (!WaitToRetry(
            backoff, *interrupter_, [this](const std::string& line) { Note(line); }, reason)) {
      return 0;  // stopped while waiting: everything written was flushed
    }
  }
}

TailRun::End TailRun::Session() {
  progressed_ = false;
  connected_at_.reset();
  client::ConnectOptions connect = options_.connect;
  if (resume_) connect.resume_after = resume_;
  std::optional<client::Client> connection;
  try {
    connection.emplace(client::Client::Connect(connect, interrupter_));
  } catch (const client::Interrupted&) {
    return {End::kInterrupted, {}};
  } catch (const std::exception& e) {
    return {End::kFailed, e.what(), client::IsRetryable(e)};
  }
  client::Client& stream = *connection;
  connected_at_ = std::chrono::steady_clock::now();
  if (++connections_ > 1) {
    Note("reconnected to dblogd at " + connect.host + ":" + std::to_string(connect.port) +
         (written_ ? "; resuming after " + client::FormatPosition(*written_) +
                         " (the last position written)"
                   : std::string("; nothing written yet")));
  }

  if (const std::string note = client::ReconcileNote(stream.welcome()); !note.empty()) Note(note);
  acked_ = stream.welcome().resume_from();
  unacked_.reset();
  boundaries_since_ack_ = 0;
  try {
    Follow(stream);
    return {End::kClosed, {}};
  } catch (const client::Interrupted&) {
    progress_.Clear();
    try {
      FlushOut(out_);
      if (unacked_) Acknowledge(stream, *unacked_);  // a final ack of what --ack-every held back
    } catch (const std::exception& e) {
      return {End::kFailed, e.what(), false, true};
    }
    return {End::kInterrupted, {}};
  } catch (const OutputError& e) {
    return {End::kFailed, e.what(), false, true};
  } catch (const std::exception& e) {
    return {End::kFailed, e.what(), client::IsRetryable(e)};
  }
}

void TailRun::Follow(client::Client& stream) {
  client::ItemRef item;  // valid until the next NextRef: used at once, never kept
  for (;;) {
    // Flush before blocking on the network, so a quiet stream is never held in our buffer.
    if (!stream.HasBufferedItems()) FlushOut(out_);
    if (!stream.NextRef(item)) return;
    if (const auto* const* ref = std::get_if<const StreamEvent*>(&item)) {
      OnEvent(stream, **ref);
    } else if (const auto* const* hb = std::get_if<const dblog::v1::Heartbeat*>(&item)) {
      const dblog::v1::Heartbeat* heartbeat = *hb;
      // Its position is the last one sent; everything up to it has been rendered above.
      if (heartbeat->has_position()) Acknowledge(stream, heartbeat->position());
    } else if (const auto* const* pr = std::get_if<const dblog::v1::Progress*>(&item)) {
      const dblog::v1::Progress* report = *pr;
      FlushOut(out_);  // lines before the report reach a shared terminal before the bar
      progress_.Show(*report);
    }
  }
}

void TailRun::OnEvent(client::Client& stream, const StreamEvent& event) {
  const std::optional<Position> position = client::PositionOf(event);
  // Written before the connection was lost: dblogd sends the interrupted transaction (or the
  // transactions after the last acknowledgement) again from its start.
  if (position && written_ && ComparePositions(*position, *written_) <= 0) return;
  bool show = true;
  if (event.has_relation()) {
    // Sent again on every connection: an unchanged definition is not news.
    const dblog::v1::Relation* known = relations_.Find(event.relation().oid());
    show = known == nullptr || known->SerializeAsString() != event.relation().SerializeAsString();
  }
  relations_.Observe(event);
  line_.clear();
  if (show && client::RenderEvent(event, relations_, options_.render, &line_)) {
    progress_.BeforeOutput();
    WriteOut(out_, line_);
  }
  if (position) {
    written_ = position;
    progressed_ = true;
  }
  if (event.has_commit() || event.has_bootstrap_end()) {
    if (event.has_bootstrap_end()) progress_.Clear();
    resume_ = position;
    unacked_ = position;
    if (++boundaries_since_ack_ >= options_.ack_every) Acknowledge(stream, *unacked_);
  }
}

}  // namespace

int RunTail(const TailOptions& options, std::shared_ptr<client::Interrupter> interrupter,
            std::FILE* out, std::FILE* err) {
  TailRun run(options, std::move(interrupter), out, err);
  return run.Run();
}

}  // namespace dblog::cli
