// sidecar/config/config.cc: flags, config file and environment for dblogd (see config.h).
#include "config/config.h"

#include <boost/program_options.hpp>
#include <fstream>
#include <iostream>
#include <regex>
#include <thread>

#include "scope_match.h"

namespace po = boost::program_options;

namespace dblog::config {
namespace {

constexpr const char* kVersion = "dblogd 0.1.0";

Endpoint ParseEndpoint(const std::string& setting, const std::string& value) {
  const auto colon = value.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == value.size())
    throw ConfigError(setting + ": expected host:port, got '" + value + "'");
  Endpoint e;
  e.host = value.substr(0, colon);
  if (e.host.size() > 2 && e.host.front() == '[' && e.host.back() == ']')
    e.host = e.host.substr(1, e.host.size() - 2);
  const std::string port = value.substr(colon + 1);
  char* end = nullptr;
  const long n = std::strtol(port.c_str(), &end, 10);
  if (*end != '\0' || n < 1 || n > 65535)
    throw ConfigError(setting + ": port must be 1 to 65535, got '" + port + "'");
  e.port = static_cast<std::uint16_t>(n);
  return e;
}

std::chrono::milliseconds Seconds(const std::string& setting, double value) {
  if (!(value > 0) || value > 86400)
    throw ConfigError(setting + ": must be more than 0 and at most 86400 seconds");
  return std::chrono::milliseconds(static_cast<long long>(value * 1000));
}

std::string Trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// A file named by a TLS setting must be readable (it is loaded again, as PEM, at start).
void CheckReadable(const std::string& setting, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(setting + ": cannot read '" + path + "'");
}

// First line of a secret file, trimmed; it must not be empty.
std::string ReadTokenFile(const std::string& setting, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(setting + ": cannot read '" + path + "'");
  std::string token;
  std::getline(in, token);
  token = Trim(token);
  if (!token.empty() && token.back() == '\r') token = Trim(token.substr(0, token.size() - 1));
  if (token.empty()) throw ConfigError(setting + ": '" + path + "' is empty");
  return token;
}

}  // namespace

const std::string& ExpectedToken(const Config& config, const std::string& name) {
  auto it = config.consumers.find(name);
  if (it != config.consumers.end() && !it->second.token.empty()) return it->second.token;
  return config.token;
}

std::vector<std::string> OpenConsumers(const Config& config) {
  std::vector<std::string> open;
  for (const auto& [name, c] : config.consumers)
    if (ExpectedToken(config, name).empty()) open.push_back(name);
  return open;
}

bool Endpoint::loopback() const {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" ||
         host.rfind("127.", 0) == 0;
}

std::string CheckMessagePrefixes(const std::vector<std::string>& prefixes) {
  if (prefixes.size() > 32) return "at most 32 message prefixes";
  for (const auto& p : prefixes)
    if (p.empty() || p.size() > 256 || p.find(',') != std::string::npos)
      return "a message prefix must be 1 to 256 bytes without ','";
  return "";
}

bool ValidConsumerName(const std::string& name) {
  static const std::regex re("[a-z][a-z0-9_]{0,47}");
  return std::regex_match(name, re);
}

Scope Scope::Parse(const std::string& text, int flags) {
  char err[256];
  DblogScope* parsed = dblog_scope_parse(text.c_str(), flags, err, sizeof(err));
  if (parsed == nullptr) throw ConfigError("scope '" + text + "': " + err);
  Scope scope;
  scope.matcher_ = std::shared_ptr<const DblogScope>(parsed, dblog_scope_free);
  auto format = [parsed](int i) {
    std::string out(dblog_scope_format(parsed, i, nullptr, 0), '\0');
    dblog_scope_format(parsed, i, out.data(), out.size() + 1);
    if (out.empty()) throw std::bad_alloc();
    return out;
  };
  scope.text_ = format(-1);
  for (int i = 0; i < dblog_scope_size(parsed); ++i) scope.patterns_.push_back(format(i));
  return scope;
}

bool Scope::Holds(const std::string& schema, const std::string& table) const {
  return matcher_ && dblog_scope_holds(matcher_.get(), schema.c_str(), table.c_str());
}

Scope ParseScope(const std::string& text) { return Scope::Parse(text, DBLOG_SCOPE_KEEP_CASE); }

std::string FormatScope(const Scope& scope) { return scope.text(); }

// The plugin parses the canonical text with the same matcher.
std::string PluginIncludeOption(const Scope& scope) { return scope.text(); }

const char* SourcePluginName(SourcePlugin plugin) {
  return plugin == SourcePlugin::kPgoutput ? "pgoutput" : "dblog";
}

namespace {

// The settings as given, before they are checked and turned into a Config.
struct Flags {
  std::string listen, metrics, config_file, token_file, default_scope, source_plugin, on_slot_lost;
  std::vector<std::string> consumers, consumer_token_files;
  double status_interval = 10, heartbeat_interval = 5, reconnect_min = 0.5, reconnect_max = 30;
  std::size_t max_buffer_mb = 16;
  std::size_t window_key_mb = 16;
  std::size_t chunk_mb = 8;
  long long repair_rate = 0;
  // given by a flag, the file or the environment (not left at its default)
  bool chunk_size_given = false, max_chunk_size_given = false;
};

// Long: the table of dblogd's settings, one entry (name, default, help text) each.
void DescribeSettings(po::options_description& opts, Config& c, Flags& f) {
  // clang-format off
  opts.add_options()
    ("help,h", "print this help and exit")
    ("version", "print the version and exit")
    ("config", po::value(&f.config_file), "read settings from this file (name = value lines)")
    ("check", po::bool_switch(&c.check),
     "check the source for the configured consumers and exit, starting nothing: one line per "
     "check (server settings, the extension, the role's grants, each scope's tables) with the "
     "fix; exit status 0 when all pass, 1 otherwise")
    ("ddl-trigger-sql", po::bool_switch(&c.ddl_trigger_sql),
     "print the SQL of pgoutput mode's DDL trigger and exit: an administrator who may create "
     "event triggers runs it in the source database (psql -v ON_ERROR_STOP=1), so that DDL "
     "changing rows without writing them (ADD COLUMN with a default, ALTER COLUMN TYPE, an "
     "enum's RENAME VALUE) is repaired with nothing run by hand (docs/pgoutput.md)")
    ("source", po::value(&c.source),
     "libpq connection string or URI of the source database (required); the role needs "
     "REPLICATION and SELECT on the tables in scope")
    ("source-plugin", po::value(&f.source_plugin)->default_value("dblog"),
     "dblog (the extension's output plugin) or pgoutput (PostgreSQL's built-in plugin, for "
     "servers where the extension cannot be installed: managed services, PostgreSQL 16-18; "
     "streams through a publication per consumer: see docs/pgoutput.md)")
    ("listen", po::value(&f.listen)->default_value("127.0.0.1:7654"),
     "host:port for consumers; anything but loopback requires a token and TLS (--tls-cert)")
    ("tls-cert", po::value(&c.tls_cert),
     "PEM certificate (chain) of dblogd's consumer listener; with it every consumer connection "
     "is TLS (1.2 or later), plaintext ones are refused")
    ("tls-key", po::value(&c.tls_key), "PEM private key of --tls-cert (required with it)")
    ("tls-client-ca", po::value(&c.tls_client_ca),
     "PEM CA certificate(s): consumers must present a client certificate signed by it, whose "
     "CN (common name) is the consumer name they connect as; requires --tls-cert")
    ("insecure-no-tls", po::bool_switch(&c.insecure_no_tls),
     "allow a non-loopback --listen without TLS, for a listener only reachable through a "
     "tunnel (SSH, WireGuard); tokens and changes travel in clear text")
    ("max-pending-handshakes", po::value(&c.max_pending_handshakes)->default_value(64),
     "consumer connections that may wait for their handshake (TLS and Hello, 10 s at most) at "
     "a time; more are closed at once (dblog_handshakes_over_limit_total); 1 to 100000")
    ("token", po::value(&c.token),
     "global token: opens every consumer without a token of its own (and, with "
     "--default-scope, the consumers not named by --consumer); visible in ps, prefer "
     "--token-file")
    ("token-file", po::value(&f.token_file), "read the global token from this file (first line)")
    ("consumer", po::value(&f.consumers)->composing(),
     "NAME=SCOPE, repeatable: a consumer and the tables it receives, as comma-separated "
     "schema.table patterns: * anywhere in a name, \"Quoted\" names exact, !schema.table to "
     "exclude, e.g. search='public.order_*,app.*,!app.audit_log'")
    ("consumer-token-file", po::value(&f.consumer_token_files)->composing(),
     "NAME=FILE, repeatable: consumer NAME's own token is the first line of FILE; only it "
     "opens NAME (the global token does not), and it opens no other consumer")
    ("default-scope", po::value(&f.default_scope),
     "scope for consumers not named by --consumer; without it they are refused. They must "
     "present the global token (--token/--token-file; required with a non-loopback --listen)")
    ("max-unconfigured-consumers", po::value(&c.max_unconfigured_consumers)->default_value(8),
     "with --default-scope: how many slots of consumers not named by --consumer may exist in "
     "the source database; a new name beyond that is refused (TOO_MANY_CONSUMERS)")
    ("metrics-listen", po::value(&f.metrics)->default_value("127.0.0.1:9187"),
     "host:port of the Prometheus /metrics endpoint; 'off' disables it")
    ("status-interval", po::value(&f.status_interval)->default_value(10),
     "seconds between standby status updates to PostgreSQL")
    ("heartbeat-interval", po::value(&f.heartbeat_interval)->default_value(5),
     "seconds of silence after which a consumer gets a heartbeat")
    ("reconnect-min", po::value(&f.reconnect_min)->default_value(0.5),
     "first retry delay in seconds after losing the source connection (doubles each time)")
    ("reconnect-max", po::value(&f.reconnect_max)->default_value(30),
     "longest retry delay in seconds")
    ("max-buffer-mb", po::value(&f.max_buffer_mb)->default_value(16),
     "MiB of unsent events per consumer before dblogd stops reading its slot (backpressure)")
    ("batch-bytes", po::value(&c.batch_bytes)->default_value(65536),
     "bytes per plugin message (several changes per message)")
    ("max-message-bytes", po::value(&c.max_message_bytes)->default_value(1u << 20),
     "a message (pg_logical_emit_message) a consumer asked for is forwarded without its "
     "content when it is longer (Message.omitted_bytes says how long); 0 = no limit")
    ("value-piece-bytes", po::value(&c.value_piece_bytes)->default_value(1u << 20),
     "a log change's text, bytea or literal value longer than this goes to a client that puts "
     "values together (Hello.split_values) in pieces of this size, so that no row is held "
     "whole; 0 = every value whole")
    ("copy-workers", po::value(&c.copy_workers)->default_value(0),
     "bootstrap copy workers; 0 = one per CPU")
    ("bootstrap", po::value(&c.bootstrap)->default_value(true),
     "copy existing rows when a consumer connects for the first time")
    ("on-slot-lost", po::value(&f.on_slot_lost)->default_value("bootstrap"),
     "a consumer that resumes after its bootstrap finished and finds its slot gone (a failover "
     "before PostgreSQL 17, or a slot dropped by hand): bootstrap (again, from a new slot, "
     "flagged restarted) or reconcile (a new slot and a whole-table repair of every table in "
     "scope through windows: the consumer keeps its rows and converges; extension mode only; "
     "docs/operations.md#failover)")
    ("chunk-size", po::value(&c.chunk_size)->default_value(2000),
     "rows (or keys) of a repair request's first window; the next ones adapt to "
     "--chunk-memory-mb, up to --max-chunk-size")
    ("max-chunk-size", po::value(&c.max_chunk_size)->default_value(32000),
     "rows (or keys) a repair window grows to at most (each at most twice the one before), "
     "while its rows hold less than --chunk-memory-mb; at or below --chunk-size, windows stay "
     "at --chunk-size, as they do when --chunk-size is set and this is not")
    ("chunk-memory-mb", po::value(&f.chunk_mb)->default_value(8),
     "MiB of rows a repair window aims at: after a chunk of wide rows the next one is smaller "
     "(down to one row), after narrow ones larger")
    ("repair-rows-per-second", po::value(&f.repair_rate)->default_value(0),
     "cap on the rows repairs read per second, averaged over windows, to bound their load on "
     "the source; 0 = no cap")
    ("window-key-memory-mb", po::value(&f.window_key_mb)->default_value(16),
     "MiB of recently streamed keys kept to widen repair windows; when a window needs a "
     "forgotten transaction, its chunk is read again. The open window may hold as much again "
     "of the values the log carried for its keys (beyond it, fills are sent partial)")
    ("unsafe-plain-windows", po::bool_switch(&c.plain_windows),
     "TESTS ONLY: plain DBLog windows without the visibility widening PostgreSQL needs; "
     "can emit stale rows")
    ("log-level", po::value(&c.log_level)->default_value("info"), "debug, info, warn or error");
  // clang-format on
}

// The DBLOG_* variable's setting name ("" for other variables, and those never read from the
// environment).
std::string SettingOfVariable(const po::options_description& opts, const std::string& env) {
  if (env.rfind("DBLOG_", 0) != 0) return "";
  std::string name = env.substr(6);
  for (auto& ch : name) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(ch));
  if (name == "help" || name == "version" || name == "config" || name == "check" ||
      name == "ddl-trigger-sql")
    return "";
  return opts.find_nothrow(name, false) ? name : "";
}

// Flags, then the --config file, then the environment, into the variables the options name.
// False when --help or --version was printed instead.
bool ReadSettings(int argc, const char* const* argv, const po::options_description& opts,
                  Flags& f) {
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    if (vm.count("help")) {
      std::cout << opts << "\n";
      return false;
    }
    if (vm.count("version")) {
      std::cout << kVersion << "\n";
      return false;
    }
    if (vm.count("config")) {
      const std::string path = vm["config"].as<std::string>();
      std::ifstream in(path);
      if (!in) throw ConfigError("config: cannot read '" + path + "'");
      po::store(po::parse_config_file(in, opts), vm);
    }
    po::store(po::parse_environment(
                  opts, [&opts](const std::string& env) { return SettingOfVariable(opts, env); }),
              vm);
    po::notify(vm);
    f.chunk_size_given = vm.count("chunk-size") && !vm["chunk-size"].defaulted();
    f.max_chunk_size_given = vm.count("max-chunk-size") && !vm["max-chunk-size"].defaulted();
  } catch (const po::error& e) {
    throw ConfigError(e.what());
  }
  return true;
}

// --consumer NAME=SCOPE, each.
void ParseConsumers(const std::vector<std::string>& specs, Config& c) {
  for (const std::string& spec : specs) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos)
      throw ConfigError("consumer: expected NAME=SCOPE, got '" + spec + "'");
    ConsumerConfig cc{Trim(spec.substr(0, eq)), {}, ""};
    try {
      cc.scope = ParseScope(spec.substr(eq + 1));
    } catch (const ConfigError& e) {
      throw ConfigError("consumer '" + cc.name + "': " + e.what());
    }
    if (!ValidConsumerName(cc.name))
      throw ConfigError("consumer: '" + cc.name +
                        "' is not a valid name (a-z first, then a-z, 0-9, _; at most 48)");
    if (!c.consumers.emplace(cc.name, cc).second)
      throw ConfigError("consumer: '" + cc.name + "' is configured twice");
  }
}

// --consumer-token-file NAME=FILE, each: a configured consumer's own token, shared with no one.
void ReadConsumerTokens(const std::vector<std::string>& specs, Config& c) {
  std::map<std::string, std::string> token_owner;  // token -> consumer, to refuse a shared one
  if (!c.token.empty()) token_owner[c.token] = "the global token";
  for (const std::string& spec : specs) {
    const auto eq = spec.find('=');
    if (eq == std::string::npos || eq + 1 == spec.size())
      throw ConfigError("consumer-token-file: expected NAME=FILE, got '" + spec + "'");
    const std::string name = Trim(spec.substr(0, eq));
    auto it = c.consumers.find(name);
    if (it == c.consumers.end())
      throw ConfigError("consumer-token-file: '" + name +
                        "' is not a configured consumer (--consumer " + name + "=SCOPE)");
    if (!it->second.token.empty())
      throw ConfigError("consumer-token-file: '" + name + "' is given twice");
    it->second.token = ReadTokenFile("consumer-token-file", Trim(spec.substr(eq + 1)));
    auto [owner, fresh] = token_owner.emplace(it->second.token, "consumer '" + name + "'");
    if (!fresh)
      throw ConfigError("consumer-token-file: consumer '" + name + "' has the same token as " +
                        owner->second + "; each consumer needs its own");
  }
}

// The TLS files come in pairs, can be read, and TLS is not also waived.
void CheckTls(const Config& c) {
  if (!c.tls_cert.empty() && c.tls_key.empty())
    throw ConfigError("tls-key: required with --tls-cert");
  if (c.tls_cert.empty() && !c.tls_key.empty())
    throw ConfigError("tls-cert: required with --tls-key");
  if (!c.tls_client_ca.empty() && c.tls_cert.empty())
    throw ConfigError("tls-client-ca: requires --tls-cert and --tls-key (the listener's own "
                      "certificate)");
  if (!c.tls_cert.empty()) CheckReadable("tls-cert", c.tls_cert);
  if (!c.tls_key.empty()) CheckReadable("tls-key", c.tls_key);
  if (!c.tls_client_ca.empty()) CheckReadable("tls-client-ca", c.tls_client_ca);
  if (c.insecure_no_tls && c.tls())
    throw ConfigError("insecure-no-tls: contradicts --tls-cert; give one of them");
}

// A listener other than loopback: every consumer needs a token, and the connections TLS
// (unless --insecure-no-tls).
void CheckExposedListener(const Config& c) {
  if (!c.listen.loopback()) {
    const std::vector<std::string> open = OpenConsumers(c);
    if (c.token.empty() && (c.default_scope || open.size() == c.consumers.size()))
      throw ConfigError("listen: " + c.listen.host +
                        " is not a loopback address, so a token is required (--token or "
                        "--token-file" +
                        (c.default_scope ? std::string(": --default-scope needs the global one)")
                                         : std::string(", or --consumer-token-file per consumer)")));
    if (!open.empty())
      throw ConfigError("listen: " + c.listen.host +
                        " is not a loopback address, so every consumer needs a token; '" +
                        open.front() + "' has none (--consumer-token-file " + open.front() +
                        "=FILE, or --token/--token-file)");
  }
  if (!c.listen.loopback() && !c.tls() && !c.insecure_no_tls)
    throw ConfigError("listen: " + c.listen.host +
                      " is not a loopback address, so TLS is required (--tls-cert and "
                      "--tls-key; or --insecure-no-tls when only a tunnel reaches it)");
}

// The numeric settings: each in its range, then in the units Config keeps.
void SetLimits(const Flags& f, Config& c) {
  if (c.max_unconfigured_consumers < 0 || c.max_unconfigured_consumers > 10000)
    throw ConfigError("max-unconfigured-consumers: must be 0 to 10000");
  c.status_interval = Seconds("status-interval", f.status_interval);
  c.heartbeat_interval = Seconds("heartbeat-interval", f.heartbeat_interval);
  c.reconnect_min = Seconds("reconnect-min", f.reconnect_min);
  c.reconnect_max = Seconds("reconnect-max", f.reconnect_max);
  if (c.reconnect_max < c.reconnect_min)
    throw ConfigError("reconnect-max: must not be below reconnect-min");
  if (c.max_pending_handshakes < 1 || c.max_pending_handshakes > 100000)
    throw ConfigError("max-pending-handshakes: must be 1 to 100000");
  if (f.max_buffer_mb < 1 || f.max_buffer_mb > 4096)
    throw ConfigError("max-buffer-mb: must be 1 to 4096");
  c.max_buffer_bytes = f.max_buffer_mb << 20;
  if (c.max_message_bytes > (1u << 30))
    throw ConfigError("max-message-bytes: must be 0 to 1073741824");
  if (c.value_piece_bytes != 0 &&
      (c.value_piece_bytes < 1024 || c.value_piece_bytes > (64u << 20)))
    throw ConfigError("value-piece-bytes: must be 0 (off) or 1024 to 67108864");
  if (c.batch_bytes < 0 || c.batch_bytes > (64 << 20))
    throw ConfigError("batch-bytes: must be 0 to 67108864");
  if (c.copy_workers < 0 || c.copy_workers > 64) throw ConfigError("copy-workers: must be 0 to 64");
  if (c.chunk_size < 1 || c.chunk_size > 1000000)
    throw ConfigError("chunk-size: must be 1 to 1000000");
  if (c.max_chunk_size < 1 || c.max_chunk_size > 1000000)
    throw ConfigError("max-chunk-size: must be 1 to 1000000");
  // --chunk-size alone keeps its meaning from before chunks adapted: every chunk that size
  if (f.chunk_size_given && !f.max_chunk_size_given) c.max_chunk_size = c.chunk_size;
  if (f.chunk_mb < 1 || f.chunk_mb > 4096) throw ConfigError("chunk-memory-mb: must be 1 to 4096");
  c.chunk_memory_bytes = f.chunk_mb << 20;
  if (f.repair_rate < 0) throw ConfigError("repair-rows-per-second: must be 0 or more");
  c.repair_rows_per_second = static_cast<std::uint64_t>(f.repair_rate);
  if (f.window_key_mb < 1 || f.window_key_mb > 4096)
    throw ConfigError("window-key-memory-mb: must be 1 to 4096");
  c.window_key_memory_bytes = f.window_key_mb << 20;
  if (c.copy_workers == 0)
    c.copy_workers = std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

std::optional<Config> Parse(int argc, const char* const* argv) {
  Config c;
  Flags f;
  po::options_description opts("dblogd: change-data capture for PostgreSQL, served over TCP.\n\n"
                               "Every setting can also be given in the --config file (name = "
                               "value) or as an environment variable DBLOG_<NAME> (upper case, "
                               "dashes as underscores). Flags win over the file, the file over "
                               "the environment.\n\nSettings");
  DescribeSettings(opts, c, f);
  if (!ReadSettings(argc, argv, opts, f)) return std::nullopt;
  if (c.ddl_trigger_sql) return c;  // printed by main; needs no other setting

  if (c.source.empty()) throw ConfigError("source: required (a libpq connection string)");
  if (f.source_plugin == "dblog") {
    c.source_plugin = SourcePlugin::kDblog;
  } else if (f.source_plugin == "pgoutput") {
    c.source_plugin = SourcePlugin::kPgoutput;
  } else {
    throw ConfigError("source-plugin: '" + f.source_plugin + "' is neither dblog nor pgoutput");
  }
  if (f.on_slot_lost == "bootstrap") {
    c.on_slot_lost = Config::SlotLost::kBootstrap;
  } else if (f.on_slot_lost == "reconcile") {
    c.on_slot_lost = Config::SlotLost::kReconcile;
  } else {
    throw ConfigError("on-slot-lost: '" + f.on_slot_lost + "' is neither bootstrap nor reconcile");
  }
  c.listen = ParseEndpoint("listen", f.listen);
  if (f.metrics != "off") c.metrics = ParseEndpoint("metrics-listen", f.metrics);
  if (!f.token_file.empty()) c.token = ReadTokenFile("token-file", f.token_file);
  ParseConsumers(f.consumers, c);
  ReadConsumerTokens(f.consumer_token_files, c);
  if (!f.default_scope.empty()) {
    try {
      c.default_scope = ParseScope(f.default_scope);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("default-scope: ") + e.what());
    }
  }
  CheckTls(c);
  CheckExposedListener(c);
  SetLimits(f, c);
  if (c.consumers.empty() && !c.default_scope)
    throw ConfigError("consumer: configure at least one (--consumer NAME=SCOPE) or a "
                      "--default-scope");
  return c;
}

namespace {

bool SameScope(const std::optional<Scope>& a, const std::optional<Scope>& b) {
  return a.has_value() == b.has_value() && (!a || a->text() == b->text());
}

// A setting that only a restart changes: named when it differs, and kept as it runs.
template <typename T>
void KeepRunning(const char* name, const T& running, T& read, std::vector<std::string>& out) {
  if (running == read) return;
  out.push_back(name);
  read = running;
}

}  // namespace

Reload PlanReload(const Config& running, Config read) {
  Reload r;
  auto& keep = r.needs_restart;
  KeepRunning("source", running.source, read.source, keep);
  KeepRunning("source-plugin", running.source_plugin, read.source_plugin, keep);
  KeepRunning("listen", running.listen, read.listen, keep);
  KeepRunning("metrics-listen", running.metrics, read.metrics, keep);
  KeepRunning("tls-cert", running.tls_cert, read.tls_cert, keep);
  KeepRunning("tls-key", running.tls_key, read.tls_key, keep);
  KeepRunning("tls-client-ca", running.tls_client_ca, read.tls_client_ca, keep);
  KeepRunning("insecure-no-tls", running.insecure_no_tls, read.insecure_no_tls, keep);
  KeepRunning("status-interval", running.status_interval, read.status_interval, keep);
  KeepRunning("heartbeat-interval", running.heartbeat_interval, read.heartbeat_interval, keep);
  KeepRunning("reconnect-min", running.reconnect_min, read.reconnect_min, keep);
  KeepRunning("reconnect-max", running.reconnect_max, read.reconnect_max, keep);
  KeepRunning("max-buffer-bytes", running.max_buffer_bytes, read.max_buffer_bytes, keep);
  KeepRunning("max-pending-handshakes", running.max_pending_handshakes,
              read.max_pending_handshakes, keep);
  KeepRunning("batch-bytes", running.batch_bytes, read.batch_bytes, keep);
  KeepRunning("max-message-bytes", running.max_message_bytes, read.max_message_bytes, keep);
  KeepRunning("value-piece-bytes", running.value_piece_bytes, read.value_piece_bytes, keep);
  KeepRunning("copy-workers", running.copy_workers, read.copy_workers, keep);
  KeepRunning("bootstrap", running.bootstrap, read.bootstrap, keep);
  KeepRunning("chunk-size", running.chunk_size, read.chunk_size, keep);
  KeepRunning("max-chunk-size", running.max_chunk_size, read.max_chunk_size, keep);
  KeepRunning("chunk-memory-mb", running.chunk_memory_bytes, read.chunk_memory_bytes, keep);
  KeepRunning("repair-rows-per-second", running.repair_rows_per_second,
              read.repair_rows_per_second, keep);
  KeepRunning("window-key-memory-bytes", running.window_key_memory_bytes,
              read.window_key_memory_bytes, keep);
  KeepRunning("plain-windows", running.plain_windows, read.plain_windows, keep);

  const bool token_changed = running.token != read.token;
  for (const auto& [name, old] : running.consumers) {
    auto it = read.consumers.find(name);
    if (it == read.consumers.end()) {
      r.removed.push_back(name);
      r.end_consumers.push_back(name);
      continue;
    }
    const bool changed = old.scope.text() != it->second.scope.text() ||
                         old.token != it->second.token;
    if (changed) r.changed.push_back(name);
    // a consumer that opened with the global token must show the new one
    if (changed || (token_changed && (old.token.empty() || it->second.token.empty())))
      r.end_consumers.push_back(name);
  }
  for (const auto& [name, c] : read.consumers)
    if (!running.consumers.count(name)) r.added.push_back(name);
  r.end_unconfigured = !SameScope(running.default_scope, read.default_scope) || token_changed;
  r.next = std::move(read);
  return r;
}

}  // namespace dblog::config
