// client/cli/tail.h: `dblog tail`: follow a consumer's stream and print it as NDJSON on stdout,
// acknowledging only what has been written and flushed.
// Owns: the tail command's flags (parsing and validation, separated from running so it can be
// tested) and its read-render-write-ack loop. Signal handling lives in main.cc.
#pragma once

#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "client/client.h"
#include "client/ndjson.h"
#include "client/retry.h"

namespace dblog::cli {

// A bad command line: main prints it and exits with status 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How a sink keeps running (--once, --retry-min, --retry-max; --idle-timeout is
// ConnectOptions::io_timeout): see client/retry.h.
struct RetryOptions {
  bool once = false;  // exit at the first loss, as before retries existed
  client::BackoffPolicy backoff;
};

// --idle-timeout's default: a dozen of dblogd's heartbeat intervals (5 s by default).
constexpr std::chrono::seconds kDefaultIdleTimeout{60};

struct TailOptions {
  client::ConnectOptions connect;
  client::RenderOptions render;
  unsigned ack_every = 1;  // acknowledge at every Nth Commit / BootstrapEnd
  RetryOptions retry;
};

// Looks up an environment variable; nullopt when unset.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;
Environment ProcessEnvironment();

// The help text of `dblog tail --help`.
std::string TailHelp();

// Parses the arguments after "tail". Returns nullopt when --help was asked for (the help text
// is written to `help_out`). Throws UsageError for anything wrong, flags or their values
// (including environment defaults and an unreadable --token-file).
std::optional<TailOptions> ParseTailArgs(const std::vector<std::string>& args,
                                         const Environment& env, std::ostream& help_out);

// Shared by the commands' flag parsing (apply.cc too):
// a strict decimal (digits only) within [min, max], else UsageError naming `what`;
unsigned long long ParseNumber(const std::string& text, unsigned long long min,
                               unsigned long long max, const std::string& what);
// the token in `path`, trailing whitespace removed; UsageError (naming `what`, where the path
// came from) when unreadable or empty.
std::string ReadTokenFile(const std::string& path, const std::string& what = "--token-file");

// Shared by the subcommands: strict flag parsing (no prefix guessing, no stray words; errors as
// UsageError), --consumer (required, validated), and --host/--port/--token/--token-file and the
// --tls* flags with their DBLOG_* environment defaults.
boost::program_options::variables_map ParseFlags(
    const std::vector<std::string>& args, const boost::program_options::options_description& flags);
void ReadConsumerFlag(const boost::program_options::variables_map& vm,
                      client::ConnectOptions& connect);
void ReadServerFlags(const boost::program_options::variables_map& vm, const Environment& env,
                     client::ConnectOptions& connect);
// --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name (DBLOG_TLS, DBLOG_TLS_CA, ...):
// declared by AddTlsFlags, read by ReadTlsFlags (which ReadServerFlags calls). Any of the
// files or the server name implies --tls; files must be readable, cert and key go together.
void AddTlsFlags(boost::program_options::options_description& flags);
void ReadTlsFlags(const boost::program_options::variables_map& vm, const Environment& env,
                  client::ConnectOptions& connect);
// --once, --retry-min, --retry-max, --idle-timeout: declared by AddRetryFlags, read by
// ReadRetryFlags (--idle-timeout into connect.io_timeout).
void AddRetryFlags(boost::program_options::options_description& flags);
void ReadRetryFlags(const boost::program_options::variables_map& vm, RetryOptions& retry,
                    client::ConnectOptions& connect);
// Seconds as a strict decimal ("0.5", "30"; digits and at most one '.') within [min, max],
// else UsageError naming `what`.
std::chrono::milliseconds ParseSeconds(const std::string& text, double min, double max,
                                       const std::string& what);

// Between two connection attempts of a sink: logs `reason` with the wait ("<reason>; retrying
// in 0.43 s (attempt 3)") and waits it out. False when `interrupter` fired (before or during
// the wait): the command stops.
bool WaitToRetry(client::Backoff& backoff, client::Interrupter& interrupter,
                 const std::function<void(const std::string&)>& log, const std::string& reason);

// True for names dblogd accepts: [a-z][a-z0-9_]{0,47}.
bool IsValidConsumerName(const std::string& name);

// Runs the tail loop until `interrupter` fires (0, after a final acknowledgement of what was
// written) or an error retrying cannot fix (1, one line on `err`). A lost connection is
// retried (logged on `err`) and the stream resumes after the last line written; with
// options.retry.once the first loss ends the run instead: 0 when dblogd closed the stream
// cleanly, 1 otherwise.
int RunTail(const TailOptions& options, std::shared_ptr<client::Interrupter> interrupter,
            std::FILE* out, std::FILE* err);

}  // namespace dblog::cli
