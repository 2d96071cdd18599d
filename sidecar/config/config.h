// sidecar/config/config.h: dblogd's settings, read from flags, an optional config file and
// DBLOG_* environment variables (in that order of precedence), validated at start.
// Owns: the setting names, defaults, help text and validation. Nothing here opens sockets or
// connections.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

struct DblogScope;  // plugin/scope_match.h

namespace dblog::config {

struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
  bool loopback() const;
  bool operator==(const Endpoint& o) const { return host == o.host && port == o.port; }
};

// A consumer's scope, parsed and matched by the matcher the plugin and the SQL API share
// (plugin/scope_match.h): comma-separated schema.table patterns, * anywhere in a part, "Quoted"
// names exact, unquoted ones folded to lower case, !schema.table excludes (the grammar is
// docs/operations.md, "Consumers and scopes"). A default-constructed Scope holds no table.
class Scope {
 public:
  // Some positive pattern matches and no exclusion does.
  bool Holds(const std::string& schema, const std::string& table) const;
  // Canonical text (the plugin's include_tables, dblog.consumers.scope): parsing it gives the
  // same scope.
  const std::string& text() const { return text_; }
  // Each pattern's canonical text, exclusions with their '!' (Welcome.scope).
  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  friend Scope ParseScope(const std::string&);
  static Scope Parse(const std::string& text, int flags);
  std::shared_ptr<const ::DblogScope> matcher_;
  std::string text_;
  std::vector<std::string> patterns_;
};

struct ConsumerConfig {
  std::string name;
  Scope scope;
  // Its own credential (--consumer-token-file NAME=FILE): only this token opens this consumer,
  // and it opens no other. Empty: the global token, if any.
  std::string token;
};

// Where the changes come from (--source-plugin): the dblog extension's output plugin (the
// default), or PostgreSQL's built-in pgoutput, where the extension cannot be installed
// (docs/pgoutput.md says what that mode does and what it does not do yet).
enum class SourcePlugin { kDblog, kPgoutput };
const char* SourcePluginName(SourcePlugin plugin);

struct Config {
  std::string source;               // libpq connection string of the source database
  SourcePlugin source_plugin = SourcePlugin::kDblog;
  Endpoint listen{"127.0.0.1", 7654};
  // The global token: opens configured consumers without a token of their own and, with
  // --default-scope, consumers not named by --consumer. Required unless listening on loopback
  // (or every consumer has its own and there is no default scope).
  std::string token;
  std::optional<Endpoint> metrics;  // Prometheus /metrics; default 127.0.0.1:9187
  // TLS for consumer connections (PEM files). With a certificate every connection is TLS.
  std::string tls_cert;
  std::string tls_key;
  // When set, clients must present a certificate signed by this CA, and its CN must be the
  // name of the consumer it connects as.
  std::string tls_client_ca;
  // Lets a non-loopback --listen go without TLS (behind a tunnel); logged at every start.
  bool insecure_no_tls = false;
  bool check = false;  // --check: print the source's setup checks and exit (consumer/setup_check.h)
  // --ddl-trigger-sql: print pgoutput mode's DDL trigger for an administrator and exit
  // (consumer/ddl_trigger.h); nothing else is read or checked
  bool ddl_trigger_sql = false;
  bool tls() const { return !tls_cert.empty(); }
  std::map<std::string, ConsumerConfig> consumers;
  // Consumers not configured by name: refused unless default_scope is set.
  std::optional<Scope> default_scope;
  // How many slots of consumers not named by --consumer may exist in the source database
  // before dblogd refuses to create another (TOO_MANY_CONSUMERS).
  int max_unconfigured_consumers = 8;
  std::chrono::milliseconds status_interval{10000};
  std::chrono::milliseconds heartbeat_interval{5000};
  std::chrono::milliseconds reconnect_min{500};
  std::chrono::milliseconds reconnect_max{30000};
  std::size_t max_buffer_bytes = 16u << 20;  // per consumer, before reading the slot pauses
  // Consumer connections without a consumer yet (no Hello, or refused and closing); more are
  // closed at once, so idle connections cannot use up the file descriptors.
  std::size_t max_pending_handshakes = 64;
  int batch_bytes = 65536;                   // plugin Batch size
  std::size_t max_message_bytes = 1u << 20;  // longer messages are forwarded without content
  // A log Change's longer values go in pieces of this size to clients that put them together
  // (Hello.split_values); 0 = every value whole.
  std::size_t value_piece_bytes = 1u << 20;
  int copy_workers = 0;                      // 0 = one per CPU
  bool bootstrap = true;                     // copy existing rows for a new consumer
  // What a consumer whose bootstrap finished gets when it resumes and its slot is gone (a
  // failover to a standby that never had it, before PostgreSQL 17's failover slots; or dropped
  // by hand): a new bootstrap from a new slot (kBootstrap, flagged restarted), or a new slot and
  // a whole-table repair of every table in scope through windows (kReconcile: the consumer is
  // not emptied; extension mode only, pgoutput mode has no repairs yet).
  enum class SlotLost { kBootstrap, kReconcile };
  SlotLost on_slot_lost = SlotLost::kBootstrap;
  int chunk_size = 2000;                     // rows of a request's first repair window
  // A request's later windows hold about chunk_memory_bytes of rows, at most twice the rows of
  // the one before and at most max(chunk_size, max_chunk_size) (consumer::NextChunkRows).
  int max_chunk_size = 32000;
  std::size_t chunk_memory_bytes = 8u << 20;
  std::uint64_t repair_rows_per_second = 0;  // repair pacing; 0 = as fast as it goes
  std::size_t window_key_memory_bytes = 16u << 20;  // keys kept for window widening
  bool plain_windows = false;                // tests only: no visibility widening (unsafe)
  std::string log_level = "info";
};

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses argv (+ --config file + environment). Throws ConfigError with a message naming the
// setting. Returns std::nullopt when --help or --version was printed.
std::optional<Config> Parse(int argc, const char* const* argv);

// SIGHUP: what reading the settings again changes in a running dblogd. The consumers (their
// scopes and tokens), --default-scope, --token-file, --max-unconfigured-consumers and
// --log-level take effect at once; any other setting that changed is named in needs_restart and
// keeps its running value until dblogd restarts.
struct Reload {
  Config next;                             // the settings in force from now on
  std::vector<std::string> needs_restart;  // changed settings that wait for a restart
  // Connections that must end (and reconnect under the new settings): configured consumers
  // removed, or whose scope or token changed (also: the global token changed for those
  // without their own).
  std::vector<std::string> end_consumers;
  // Consumers not named by --consumer: their connections end too (--default-scope or the
  // global token changed).
  bool end_unconfigured = false;
  // Consumers added, removed or changed, for the log line.
  std::vector<std::string> added, removed, changed;
};
Reload PlanReload(const Config& running, Config read);

// A scope as configured (--consumer, --default-scope) or stored in dblog.consumers.scope: throws
// ConfigError ("scope '...': at character N: reason"). Unquoted names are matched as spelled
// (DBLOG_SCOPE_KEEP_CASE), as dblogd always matched them; the canonical text quotes upper case,
// so the plugin, which folds unquoted names, reads it the same.
Scope ParseScope(const std::string& text);
std::string FormatScope(const Scope& scope);  // scope.text()
bool ValidConsumerName(const std::string& name);
// Hello.message_prefixes: at most 32, each 1 to 256 bytes, no ','. Empty string when valid,
// else what is wrong.
std::string CheckMessagePrefixes(const std::vector<std::string>& prefixes);
// The token a Hello for consumer `name` must carry: the consumer's own, else the global one;
// "" when that consumer needs none.
const std::string& ExpectedToken(const Config& config, const std::string& name);
// Configured consumers that need no token: on a loopback address any local process may connect
// as them.
std::vector<std::string> OpenConsumers(const Config& config);
// The plugin's include_tables option for a scope.
std::string PluginIncludeOption(const Scope& scope);

}  // namespace dblog::config
