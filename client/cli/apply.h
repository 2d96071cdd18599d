// client/cli/apply.h: `dblog apply`: follow a consumer's stream and apply it to a target
// PostgreSQL database (client/apply/applier.h), acknowledging only what the target committed.
// Owns: the apply command's flags (parsed apart from running, so they can be tested) and its
// read-apply-ack loop. Signal handling lives in main.cc.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "client/apply/applier.h"
#include "client/cli/tail.h"
#include "client/client.h"

namespace dblog::cli {

struct ApplyCommandOptions {
  client::ConnectOptions connect;
  std::string target;  // libpq conninfo or URI
  apply::ApplierOptions applier;
  RetryOptions retry;
};

std::string ApplyHelp();

// Parses the arguments after "apply". nullopt: --help was asked for (written to help_out).
// Throws UsageError for anything wrong.
std::optional<ApplyCommandOptions> ParseApplyArgs(const std::vector<std::string>& args,
                                                  const Environment& env, std::ostream& help_out);

// Runs until `interrupter` fires (0, after rolling back an open target transaction and
// acknowledging what committed) or an error retrying cannot fix (1, one line on `err`). A lost
// connection to dblogd or to the target is retried (logged on `err`): the applier starts again
// on a new target connection and resumes after the position stored in the target. With
// options.retry.once the first loss ends the run instead: 0 when dblogd closed the stream
// between transactions, 1 otherwise. Notable events are logged on `err`, one line each.
int RunApply(const ApplyCommandOptions& options, std::shared_ptr<client::Interrupter> interrupter,
             std::FILE* err);

}  // namespace dblog::cli
