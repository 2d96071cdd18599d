// tests/cpp/sidecar/setup_check_test.cc: `dblogd --check` against the test cluster: every
// problem a first connection would hit is printed with its fix, nothing is created, and the
// exit status says whether any check failed.
#include <sys/wait.h>

#include <cstdio>

#include "dblogd_fixture.h"

namespace dblog::test {
namespace {

struct CheckRun {
  int status = -1;
  std::string out;
};

// The real dblogd binary with --check and these flags; its standard output and exit status.
CheckRun RunCheck(const std::vector<std::string>& flags) {
  std::string command = std::string(DBLOGD_PATH) + " --check";
  for (const std::string& f : flags) {
    command += " '";
    for (char ch : f) command += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    command += "'";
  }
  CheckRun run;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return run;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) run.out.append(buf, n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

class SetupCheckTest : public DblogdTest {
 protected:
  std::string Consumer() const { return "--consumer=" + consumer() + "=" + schema() + ".*"; }
};

TEST_F(SetupCheckTest, AReadySourcePassesAndNothingIsCreated) {
  db().exec("CREATE TABLE " + schema() + ".items (id int PRIMARY KEY, v text)");
  const CheckRun run = RunCheck({"--source=" + conninfo(), Consumer()});
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("ok    extension"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("ok    wal_level"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("tables in scope: "), std::string::npos) << run.out;
  // the test cluster's role is a superuser: said, not failed
  EXPECT_NE(run.out.find("warn  role"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("all checks passed"), std::string::npos) << run.out;
  EXPECT_EQ(db().scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + Slot() +
                        "'"),
            "0");
  EXPECT_EQ(db().scalar("SELECT count(*) FROM dblog.consumers WHERE name = '" + consumer() + "'"),
            "0");
}

// Each problem with its fix, all of them in one run: a role without REPLICATION and grants, a
// table in scope without a key.
TEST_F(SetupCheckTest, EveryProblemIsPrintedWithItsFix) {
  ScopedRole role(db(), "e2e_check");
  db().exec("CREATE TABLE " + schema() + ".nokey (v text)");
  CheckRun run = RunCheck({"--source=" + conninfo() + " user=e2e_check", Consumer()});
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("FAIL  consumer " + consumer()), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("ALTER ROLE e2e_check REPLICATION"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("GRANT SELECT, INSERT, UPDATE ON dblog.consumers"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("some checks failed"), std::string::npos) << run.out;
  // settings only a superuser may read are advice, not a failure
  EXPECT_NE(run.out.find("warn  check_setup"), std::string::npos) << run.out;

  // as the superuser, the keyless table is what is left
  run = RunCheck({"--source=" + conninfo(), Consumer()});
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("no primary key or replica identity index: " + schema() + ".nokey"),
            std::string::npos)
      << run.out;

  // with a key, a table whose index predicate runs its owner's function when planned: the reads
  // would refuse it (plugin/guard.c), and so does the check, by name
  db().exec("DROP TABLE " + schema() + ".nokey");
  db().exec("GRANT USAGE, CREATE ON SCHEMA " + schema() + " TO e2e_check");
  PgConn owner(conninfo() + " user=e2e_check");
  owner.exec("CREATE FUNCTION " + schema() + ".yes() RETURNS boolean LANGUAGE plpgsql IMMUTABLE"
             " AS 'BEGIN RETURN true; END'");
  owner.exec("CREATE TABLE " + schema() + ".planned (id int PRIMARY KEY, v int)");
  owner.exec("CREATE INDEX ON " + schema() + ".planned (v) WHERE " + schema() + ".yes()");
  run = RunCheck({"--source=" + conninfo(), Consumer()});
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find(schema() + ".planned: dblog: table " + schema() +
                         ".planned has an index predicate"),
            std::string::npos)
      << run.out;
}

TEST_F(SetupCheckTest, ASourceWithoutTheExtensionOrUnreachableFails) {
  struct Database {
    PgConn& db;
    ~Database() {
      try {
        db.exec("DROP DATABASE IF EXISTS e2e_check_bare");
      } catch (...) {
      }
    }
  } database{db()};
  db().exec("DROP DATABASE IF EXISTS e2e_check_bare");
  db().exec("CREATE DATABASE e2e_check_bare");
  CheckRun run = RunCheck({"--source=" + conninfo() + " dbname=e2e_check_bare", Consumer()});
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("FAIL  extension"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("CREATE EXTENSION dblog"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("ok    wal_level"), std::string::npos) << run.out;

  run = RunCheck({"--source=host=127.0.0.1 port=1 connect_timeout=2", Consumer()});
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("FAIL  connection"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace dblog::test
