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
       "heartbeats are always acknowledged")
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

std::string TailHelp() {
  std::ostringstream help;
  help << "Usage: dblog tail --consumer NAME [options]\n"
          "\n"
          "Follows a consumer's change stream from dblogd and prints one JSON object per event\n"
          "on stdout (NDJSON). A position is acknowledged only after every line up to it has\n"
          "been written and flushed: at commits, at the end of a bootstrap, and at heartbeats.\n"
          "Stopping (Ctrl-C, SIGTERM) or a crash never acknowledges unwritten lines; lines\n"
          "written after the last acknowledgement are sent again on the next connection.\n"
          "\n"
       << TailFlags()
       << "\n"
          "Environment: DBLOG_HOST, DBLOG_PORT, DBLOG_TOKEN (or DBLOG_TOKEN_FILE), DBLOG_TLS,\n"
          "DBLOG_TLS_CA, DBLOG_TLS_CERT, DBLOG_TLS_KEY, DBLOG_TLS_SERVER_NAME give defaults for\n"
          "the flags of the same names.\n"
          "Exit status: 0 when dblogd ends the stream or on SIGINT/SIGTERM, 1 on errors,\n"
          "2 on a bad command line.\n"
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
  return options;
}

int RunTail(const TailOptions& options, std::shared_ptr<client::Interrupter> interrupter,
            std::FILE* out, std::FILE* err) {
  ProgressDisplay progress(err, isatty(fileno(err)) == 1, isatty(fileno(out)) == 1);
  const auto fail = [&](const std::string& message) {
    progress.Clear();
    std::fflush(out);  // what was rendered is shown; it was not acknowledged
    // One line, whatever the server put in its Error message (a newline, an escape sequence).
    std::fprintf(err, "dblog: %s\n", PrintableText(message).c_str());
    return 1;
  };

  std::optional<client::Client> connection;
  try {
    connection.emplace(client::Client::Connect(options.connect, interrupter));
  } catch (const client::Interrupted&) {
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  client::Client& stream = *connection;

  Position acked = stream.welcome().resume_from();  // never ack at or before this again
  std::optional<Position> unacked;                  // written and flushed, not yet acked
  unsigned boundaries_since_ack = 0;
  // The only way anything is acknowledged: flush first, so the ack never covers a line that is
  // still in our buffer.
  const auto acknowledge = [&](const Position& position) {
    if (ComparePositions(position, acked) <= 0) return;
    FlushOut(out);
    stream.Ack(position);
    acked = position;
    unacked.reset();
    boundaries_since_ack = 0;
  };

  client::RelationCache relations;
  client::ItemRef item;  // valid until the next NextRef: used at once, never kept
  std::string line;
  try {
    for (;;) {
      // Flush before blocking on the network, so a quiet stream is never held in our buffer.
      if (!stream.HasBufferedItems()) FlushOut(out);
      if (!stream.NextRef(item)) break;
      if (const auto* const* ref = std::get_if<const StreamEvent*>(&item)) {
        const StreamEvent* event = *ref;
        relations.Observe(*event);
        line.clear();
        if (client::RenderEvent(*event, relations, options.render, &line)) {
          progress.BeforeOutput();
          WriteOut(out, line);
        }
        if (event->has_commit() || event->has_bootstrap_end()) {
          if (event->has_bootstrap_end()) progress.Clear();
          unacked = client::PositionOf(*event);
          if (++boundaries_since_ack >= options.ack_every) acknowledge(*unacked);
        }
      } else if (const auto* const* hb = std::get_if<const dblog::v1::Heartbeat*>(&item)) {
        const dblog::v1::Heartbeat* heartbeat = *hb;
        // Its position is the last one sent; everything up to it has been rendered above.
        if (heartbeat->has_position()) acknowledge(heartbeat->position());
      } else if (const auto* const* pr = std::get_if<const dblog::v1::Progress*>(&item)) {
        const dblog::v1::Progress* report = *pr;
        FlushOut(out);  // lines before the report reach a shared terminal before the bar
        progress.Show(*report);
      }
    }
    progress.Clear();
    FlushOut(out);
    return 0;  // dblogd ended the stream without an error
  } catch (const client::Interrupted&) {
    progress.Clear();
    try {
      FlushOut(out);
      if (unacked) acknowledge(*unacked);  // a final ack of what --ack-every held back
    } catch (const std::exception& e) {
      return fail(e.what());
    }
    return 0;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

}  // namespace dblog::cli
