// tests/cpp/apply/bookkeeping_e2e_test.cc: what the stream may not reach (the security review of
// `dblog apply`): its own bookkeeping schema in the target (dblog_apply, or --bookkeeping-schema),
// target tables it did not create or adopt for the consumer, and the lines of its log. The
// real dblogd and `dblog apply` into a second database; the source's tables are written by a
// role of the source, as an attacker with CREATE on the source database would.
#include <sys/wait.h>

#include "apply_e2e_fixture.h"

namespace dblog::test {
namespace {

class BookkeepingTest : public ApplyE2eTest {
 protected:
  void TearDown() override {
    if (!source_schema_.empty()) {
      try {
        db().exec("DROP SCHEMA IF EXISTS " + source_schema_ + " CASCADE");
      } catch (const std::exception& e) {
        std::cerr << "dropping " << source_schema_ << ": " << e.what() << "\n";
      }
    }
    ApplyE2eTest::TearDown();
  }
  // A source schema `name` with tables relations and tables shaped like the applier's
  // bookkeeping of the same names (dropped by TearDown).
  void CreateLookalikeBookkeeping(const std::string& name) {
    source_schema_ = name;
    db().exec("DROP SCHEMA IF EXISTS " + name + " CASCADE; CREATE SCHEMA " + name);
    db().exec("CREATE TABLE " + name +
              ".relations (consumer text, relation_oid oid, table_schema text NOT NULL,"
              " table_name text NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(),"
              " PRIMARY KEY (consumer, relation_oid))");
    db().exec("CREATE TABLE " + name +
              ".tables (consumer text, table_schema text, table_name text,"
              " added_at timestamptz NOT NULL DEFAULT now(),"
              " PRIMARY KEY (consumer, table_schema, table_name))");
  }
  // public.precious in the target: a table of no consumer.
  void CreatePrecious() {
    target().exec(
        "CREATE TABLE public.precious (id int PRIMARY KEY, v text);"
        " INSERT INTO public.precious VALUES (1, 'keep')");
  }
  void ExpectPreciousKept() {
    ASSERT_EQ(target().scalar("SELECT to_regclass('public.precious') IS NOT NULL"), "t")
        << apply_->log();
    EXPECT_EQ(target().scalar("SELECT string_agg(id || '=' || v, ',') FROM public.precious"),
              "1=keep");
  }
  // dblog apply exits 1 (within 60 s, or `status` when it was waited for already) with `message`.
  void ExpectExit1(const std::string& message, std::optional<int> status = std::nullopt) {
    if (!status) status = apply_->Wait(60s);
    ASSERT_TRUE(status) << "dblog apply did not stop:\n" << apply_->log();
    EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << apply_->log();
    EXPECT_NE(apply_->log().find(message), std::string::npos) << apply_->log();
  }

  std::string source_schema_;
};

// The review's reproducer: a consumer whose scope holds a source schema named dblog_apply, with
// tables shaped like the target's bookkeeping, and a row mapping the source's app.a onto the
// target's public.precious. The old applier mirrored it into its own dblog_apply.relations and
// dblog_apply.tables; restarted, at the next write to a it renamed public.precious away. Now
// the bootstrap is refused before anything is applied, and the target's bookkeeping and
// public.precious stay as they were.
TEST_F(BookkeepingTest, TheStreamNeverWritesIntoTheBookkeeping) {
  CreateLookalikeBookkeeping("dblog_apply");
  db().exec("CREATE TABLE " + T("a") + " (id int PRIMARY KEY, v text)");
  const std::string a_oid = db().scalar("SELECT '" + T("a") + "'::regclass::oid");
  db().exec("INSERT INTO dblog_apply.relations VALUES ('" + consumer() + "', " + a_oid +
            ", 'public', 'precious', now())");
  db().exec("INSERT INTO dblog_apply.tables VALUES ('" + consumer() +
            "', 'public', 'precious', now())");
  CreatePrecious();
  StartDblogd({"--consumer=" + consumer() + "=" + schema() + ".*,dblog_apply.*"});
  StartApply({"--create-tables"});
  std::optional<int> status = apply_->Wait(20s);
  if (!status) {
    // The old applier took the rows: restarted, it follows the forged mapping at a's first write.
    apply_->Signal(SIGTERM);
    ASSERT_TRUE(apply_->Wait(30s));
    StartApply({"--create-tables"});
    db().exec("INSERT INTO " + T("a") + " VALUES (1, 'source')");
    std::this_thread::sleep_for(5s);
    apply_->Signal(SIGTERM);
    status = apply_->Wait(30s);
  }
  ExpectExit1(" would be applied into target schema dblog_apply, which holds dblog apply's"
              " bookkeeping",
              status);
  EXPECT_NE(apply_->log().find("dblog apply: error: source table dblog_apply."), std::string::npos)
      << apply_->log();
  ExpectPreciousKept();
  EXPECT_EQ(target().scalar("SELECT count(*) FROM dblog_apply.relations WHERE table_name ="
                            " 'precious' OR relation_oid = " +
                            a_oid),
            "0");
  EXPECT_EQ(target().scalar("SELECT count(*) FROM dblog_apply.tables"), "0");
  EXPECT_EQ(StoredPosition(), "");
}

// The bookkeeping schema is --bookkeeping-schema: there the stream is refused, and a source
// schema of the default's name (or any name but the bookkeeping's) is mirrored like any other.
TEST_F(BookkeepingTest, TheBookkeepingSchemaIsConfigurable) {
  const std::string mirrored = schema() + "_bk";
  CreateLookalikeBookkeeping(mirrored);
  db().exec("INSERT INTO " + mirrored + ".tables VALUES ('x', 'public', 'precious', now())");
  CreatePrecious();
  StartDblogd({"--consumer=" + consumer() + "=" + schema() + ".*," + mirrored + ".*"});
  StartApply({"--create-tables", "--bookkeeping-schema", mirrored});
  ExpectExit1(" would be applied into target schema " + mirrored +
              ", which holds dblog apply's bookkeeping");
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + mirrored + ".tables"), "0");

  // the default bookkeeping (dblog_apply): the source's schema is only data
  target().exec("DROP SCHEMA " + mirrored + " CASCADE");
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
  WaitApplied(Sentinel());
  EXPECT_EQ(target().scalar("SELECT string_agg(consumer || ':' || table_name, ',') FROM " +
                            mirrored + ".tables"),
            "x:precious");
  EXPECT_EQ(target().scalar("SELECT count(*) FROM dblog_apply.tables WHERE table_name ="
                            " 'precious'"),
            "0");
  ExpectPreciousKept();

  // --schema-map into the bookkeeping schema is a bad command line
  apply_->Signal(SIGTERM);
  ASSERT_TRUE(apply_->Wait(30s));
  StartApply({"--schema-map", mirrored + "=dblog_apply"});
  const auto status = apply_->Wait(30s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 2) << apply_->log();
  EXPECT_NE(apply_->log().find("--schema-map maps schema " + mirrored +
                               " into the bookkeeping schema dblog_apply"),
            std::string::npos)
      << apply_->log();
}

// A stored mapping that the target's catalog contradicts (a target table recorded under its
// oid, the name now another table's) is refused, not followed: the applier never renames or
// alters a target table it did not create or adopt for the consumer. Here the mapping of m is
// pointed at public.precious (as a poisoned bookkeeping from before this check would have it)
// and the source renames m: the old applier renamed public.precious.
TEST_F(BookkeepingTest, AMappingTheTargetsCatalogContradictsIsRefused) {
  db().exec("CREATE TABLE " + T("m") + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + T("m") + " VALUES (1, 'm')");
  CreatePrecious();
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(ApplyBootstrapThenStop());
  target().exec("DROP TABLE " + T("m") +
                "; UPDATE dblog_apply.relations SET table_schema = 'public', table_name ="
                " 'precious' WHERE table_name = 'm'");
  db().exec("ALTER TABLE " + T("m") + " RENAME TO m2");
  db().exec("UPDATE " + T("m2") + " SET v = 'renamed'");
  StartApply({"--create-tables"});
  ExpectExit1("maps source relation oid");
  EXPECT_NE(apply_->log().find("to target table public.precious, recorded as table oid"),
            std::string::npos)
      << apply_->log();
  ExpectPreciousKept();
}

// The same for the tables a new bootstrap clears: a registered name that is now another table
// (its oid is not the one registered) is not truncated; the bootstrap is refused instead.
TEST_F(BookkeepingTest, ABootstrapNeverTruncatesATableItDidNotRegister) {
  db().exec("CREATE TABLE " + T("b") + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + T("b") + " VALUES (1, 'b')");
  CreatePrecious();
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(ApplyBootstrapThenStop());
  target().exec(
      "UPDATE dblog_apply.tables SET table_schema = 'public', table_name = 'precious'"
      " WHERE table_name = 'b'");
  // a new slot: a new bootstrap, which clears what the consumer wrote here before
  for (int i = 0; i < 100; ++i) {
    try {
      db().exec("SELECT pg_drop_replication_slot('" + Slot() + "')");
      break;
    } catch (const PgError&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  db().exec("DELETE FROM dblog.consumers WHERE name = '" + consumer() + "'");
  StartApply({"--create-tables"});
  ExpectExit1("lists target table public.precious for consumer " + consumer() + " as table oid");
  ExpectPreciousKept();
}

// A source table named to forge a log line (the review's LOW finding): every line dblog apply
// writes is its own, and the name is one value, escaped as dblogd's logfmt escapes values.
TEST_F(BookkeepingTest, SourceNamesCannotForgeLogLines) {
  const std::string forged = "new\nts=0 level=error event=forged_by_name";
  db().exec("CREATE TABLE " + schema() + ".\"" + forged + "\" (id int PRIMARY KEY)");
  db().exec("INSERT INTO " + schema() + ".\"" + forged + "\" VALUES (1)");
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
  const std::string log = apply_->log();
  EXPECT_NE(log.find("dblog apply: created target table \"" + schema() +
                     ".new\\nts=0 level=error event=forged_by_name\"\n"),
            std::string::npos)
      << log;
  std::size_t start = 0;
  for (std::size_t end; (end = log.find('\n', start)) != std::string::npos; start = end + 1)
    EXPECT_EQ(log.compare(start, 13, "dblog apply: "), 0) << log.substr(start, end - start);
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + schema() + ".\"" + forged + "\""), "1");
}

}  // namespace
}  // namespace dblog::test
