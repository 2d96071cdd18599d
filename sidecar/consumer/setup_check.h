// sidecar/consumer/setup_check.h: `dblogd --check`: what a first connection of each configured
// consumer would hit, found without starting anything.
// Owns: the list of checks and how they are printed. The checks themselves are the ones dblogd
// runs when a consumer connects (Bookkeeping::CheckExtension, RoleProblems, the scope's tables
// as the bootstrap enumerates them) and the extension's dblog.check_setup(), so that --check
// and a real connection cannot disagree.
#pragma once

#include <ostream>

#include "config/config.h"

namespace dblog::consumer {

// Prints one line per check ("ok", "warn" or "FAIL", the check, what was found and the fix)
// and a last line saying whether all passed; true when none failed. Opens one connection to
// the source, creates nothing and writes nothing.
bool RunSetupChecks(const config::Config& config, std::ostream& out);

}  // namespace dblog::consumer
