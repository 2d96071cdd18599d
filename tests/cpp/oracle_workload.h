// tests/cpp/oracle_workload.h: the randomized write workload of the end-to-end suites (the
// oracle, dblog publish): three tables (single, composite and uuid keys, TOASTed values, NULLs)
// and transactions of inserts, updates, deletes, key changes and truncates, some rolled back.
#pragma once

#include <random>
#include <string>

#include "pg_test_util.h"

namespace dblog::test {

struct WorkloadOptions {
  int large_rows = 2000;                    // rows of the occasional large transaction
  bool key_moves_avoid_collisions = true;   // a composite key moves only to a free key
  bool truncate_two_tables = false;         // TRUNCATE t_uuid and t_comp in one statement
};

// <s>.t_int, <s>.t_comp, <s>.t_uuid.
void CreateWorkloadTables(PgConn& db, const std::string& s);
// One randomized write transaction (or a rollback) on those tables.
void RandomTransaction(PgConn& db, const std::string& s, std::mt19937_64& rng,
                       const WorkloadOptions& options);

}  // namespace dblog::test
