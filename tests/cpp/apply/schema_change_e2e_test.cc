// tests/cpp/apply/schema_change_e2e_test.cc: schema changes at the source while `dblog apply`
// applies (issue 15): the real dblogd and `dblog apply --create-tables` into a second
// database, DDL one step at a time with a write after each, and the target compared with the
// source after every step. The target follows by identity (relation oid, column attnum:
// client/apply/relation_map.h); what it cannot apply safely stops it with nothing applied.
// Every row of docs/operations.md's "Schema changes" table is backed by a test here.
#include <sys/wait.h>

#include "apply_e2e_fixture.h"

namespace dblog::test {
namespace {

class SchemaChangeTest : public ApplyE2eTest {
 protected:
  // Runs `sql` at the source, waits until the target applied it, and compares `tables`.
  void Step(const std::string& sql, const std::vector<std::string>& tables) {
    SCOPED_TRACE(sql);
    db().exec(sql);
    WaitApplied(Sentinel());
    for (const auto& t : tables) ExpectSameTable(t);
  }
  // dblog.repair of a source table, waited for until done and applied.
  void Repair(const std::string& table) {
    const std::string id =
        db().scalar("SELECT dblog.repair('" + T(table) + "', '" + consumer() + "')");
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (db().scalar("SELECT state FROM dblog.requests WHERE id = " + id) != "done") {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << apply_->log();
      std::this_thread::sleep_for(50ms);
    }
    WaitApplied(Sentinel());
  }
  // Waits (up to 90 s) until the target's copy of `table` equals the source, with nothing run by
  // hand, then compares it (which reports the first differing row when it never did).
  void WaitConverged(const std::string& table) {
    const std::string sql =
        "SELECT count(*) || ' ' || coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '-')"
        " FROM " + T(table) + " t";
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    while (std::chrono::steady_clock::now() < deadline &&
           db().scalar(sql) != target().scalar(sql)) {
      if (apply_ && apply_->Exited()) break;
      std::this_thread::sleep_for(100ms);
    }
    ExpectSameTable(table);
  }
  // The requests dblog queued itself for `table` (reason not NULL): "reason=state;..." once
  // every one of them is done (or after 60 s, as they are).
  std::string RequestsByDblog(const std::string& table) {
    const std::string sql =
        "SELECT coalesce(string_agg(reason || '=' || state, ';' ORDER BY id), '')"
        " FROM dblog.requests WHERE table_name = '" + T(table) + "' AND reason IS NOT NULL";
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    std::string got = db().scalar(sql);
    while (std::chrono::steady_clock::now() < deadline &&
           (got.empty() || got.find("=queued") != std::string::npos ||
            got.find("=running") != std::string::npos)) {
      std::this_thread::sleep_for(100ms);
      got = db().scalar(sql);
    }
    return got;
  }
  bool TargetHas(const std::string& table) {
    return target().scalar("SELECT to_regclass('" + T(table) + "') IS NOT NULL") == "t";
  }
  std::string TargetColumns(const std::string& table) {
    return target().scalar(
        "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY"
        " attnum) FROM pg_attribute WHERE attrelid = '" + T(table) +
        "'::regclass AND attnum > 0 AND NOT attisdropped");
  }
};

// The table of issue 15, step by step: every step leaves the target equal to the source.
TEST_F(SchemaChangeTest, TheIssuesStepsConverge) {
  db().exec("CREATE TABLE " + T("a") + " (id int PRIMARY KEY, v text, n int)");
  db().exec("INSERT INTO " + T("a") + " SELECT g, 'v' || g, g FROM generate_series(1, 100) g");
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
  ExpectSameTable("a");

  // A column with a default: the source's existing rows have it without any WAL for them; the
  // target gets NULL for them, says so with the repair call, and the repair restores them.
  db().exec("ALTER TABLE " + T("a") + " ADD COLUMN w text DEFAULT 'x'");
  db().exec("UPDATE " + T("a") + " SET v = 'one' WHERE id = 1");
  WaitApplied(Sentinel());
  EXPECT_NE(apply_->log().find("note: the source added column w to " + T("a")),
            std::string::npos)
      << apply_->log();
  EXPECT_NE(apply_->log().find("SELECT dblog.repair('" + T("a") + "', '" + consumer() + "')"),
            std::string::npos)
      << apply_->log();
  Repair("a");
  ExpectSameTable("a");

  Step("ALTER TABLE " + T("a") + " DROP COLUMN n; UPDATE " + T("a") +
           " SET v = 'two' WHERE id = 2",
       {"a"});
  EXPECT_EQ(TargetColumns("a"), "id integer, v text, w text");

  // text -> varchar(20): the target's text holds every value; it stays text
  Step("ALTER TABLE " + T("a") + " ALTER COLUMN v TYPE varchar(20); UPDATE " + T("a") +
           " SET v = 'three' WHERE id = 3",
       {"a"});
  EXPECT_EQ(TargetColumns("a"), "id integer, v text, w text");

  // integer -> bigint: the target column is widened, and a value only bigint holds arrives
  Step("ALTER TABLE " + T("a") + " ADD COLUMN k int; UPDATE " + T("a") + " SET k = id", {"a"});
  Step("ALTER TABLE " + T("a") + " ALTER COLUMN k TYPE bigint; UPDATE " + T("a") +
           " SET k = 1099511627776 WHERE id = 4",
       {"a"});
  EXPECT_EQ(TargetColumns("a"), "id integer, v text, w text, k bigint");

  // a renamed column keeps its values in every row, not only in rows written since
  Step("ALTER TABLE " + T("a") + " RENAME COLUMN w TO w2; UPDATE " + T("a") +
           " SET v = 'five' WHERE id = 5",
       {"a"});
  EXPECT_EQ(TargetColumns("a"), "id integer, v text, w2 text, k bigint");

  Step("CREATE TABLE " + T("b") + " (id int PRIMARY KEY, t text); INSERT INTO " + T("b") +
           " SELECT g, 'b' || g FROM generate_series(1, 10) g",
       {"a", "b"});

  // a renamed table keeps all its rows under its new name; the old name is gone
  Step("ALTER TABLE " + T("a") + " RENAME TO a2; UPDATE " + T("a2") +
           " SET v = 'six' WHERE id = 6",
       {"a2", "b"});
  EXPECT_FALSE(TargetHas("a"));
  EXPECT_NE(apply_->log().find("renamed target table " + T("a") + " to " + T("a2")),
            std::string::npos)
      << apply_->log();

  // DROP TABLE carries nothing: the target keeps the table and its rows
  const std::string b_rows = target().scalar("SELECT count(*) FROM " + T("b"));
  Step("DROP TABLE " + T("b") + "; UPDATE " + T("a2") + " SET v = 'seven' WHERE id = 7",
       {"a2"});
  EXPECT_TRUE(TargetHas("b"));
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + T("b")), b_rows);

  // TRUNCATE follows the renamed table too
  Step("TRUNCATE " + T("a2") + "; INSERT INTO " + T("a2") + " (id, v) VALUES (1, 'after')",
       {"a2"});
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + T("a2")), "1");

  // the mapping the target keeps: one relation, its columns by attnum
  EXPECT_EQ(target().scalar("SELECT string_agg(table_name, ',' ORDER BY table_name) FROM"
                            " dblog_apply.relations WHERE consumer = '" + consumer() +
                            "' AND table_name <> 'sentinel'"),
            "a2,b");
  EXPECT_EQ(target().scalar("SELECT string_agg(c.attnum || '=' || c.column_name, ',' ORDER BY"
                            " c.attnum) FROM dblog_apply.columns c JOIN dblog_apply.relations r"
                            " USING (consumer, relation_oid) WHERE r.table_name = 'a2'"),
            "1=id,2=v,4=w2,5=k");
}

// Names swapped in one transaction, a table renamed in the same transaction as its rows
// change, a table dropped and another created under its name: identity, not names, decides.
TEST_F(SchemaChangeTest, SwappedNamesAndAReusedTableNameFollowIdentity) {
  db().exec("CREATE TABLE " + T("p") + " (id int PRIMARY KEY, x text, y text)");
  db().exec("CREATE TABLE " + T("q") + " (id int PRIMARY KEY, z int)");
  db().exec("INSERT INTO " + T("p") + " SELECT g, 'x' || g, 'y' || g FROM generate_series(1, 50) g");
  db().exec("INSERT INTO " + T("q") + " SELECT g, g FROM generate_series(1, 20) g");
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());

  Step("BEGIN; ALTER TABLE " + T("p") + " RENAME COLUMN x TO tmp; ALTER TABLE " + T("p") +
           " RENAME COLUMN y TO x; ALTER TABLE " + T("p") + " RENAME COLUMN tmp TO y;"
           " UPDATE " + T("p") + " SET x = 'new' WHERE id = 1; COMMIT",
       {"p"});
  // a table renamed, then its rows changed, in one transaction
  Step("BEGIN; UPDATE " + T("p") + " SET x = 'before' WHERE id = 2; ALTER TABLE " + T("p") +
           " RENAME TO p2; UPDATE " + T("p2") + " SET y = 'after' WHERE id = 3; COMMIT",
       {"p2"});
  EXPECT_FALSE(TargetHas("p"));

  // q dropped, a new q created: the new q's target is the new table only; the old target
  // table is moved aside, with its rows
  const std::string old_oid = db().scalar("SELECT '" + T("q") + "'::regclass::oid");
  Step("DROP TABLE " + T("q") + "; CREATE TABLE " + T("q") +
           " (id int PRIMARY KEY, z int); INSERT INTO " + T("q") + " VALUES (100, 100)",
       {"q", "p2"});
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + T("q_dblog_" + old_oid)), "20");
  EXPECT_NE(apply_->log().find("renamed it to " + T("q_dblog_" + old_oid)), std::string::npos)
      << apply_->log();
}

// Renames made while dblog apply is down are followed when it comes back: the mapping is in
// the target. A target from before the mapping existed (no rows in dblog_apply.relations) is
// adopted by name at the first change of each table, and followed from then on.
TEST_F(SchemaChangeTest, RenamesWhileStoppedAndTargetsWithoutAMappingAreFollowed) {
  db().exec("CREATE TABLE " + T("r") + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + T("r") + " SELECT g, 'v' || g FROM generate_series(1, 30) g");
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(ApplyBootstrapThenStop());
  // as an older dblog apply left it
  target().exec("DELETE FROM dblog_apply.relations; DELETE FROM dblog_apply.columns");
  StartApply({"--create-tables"});
  Step("UPDATE " + T("r") + " SET v = 'adopted' WHERE id = 1", {"r"});
  EXPECT_EQ(target().scalar("SELECT count(*) FROM dblog_apply.relations WHERE table_name = 'r'"),
            "1");
  apply_->Signal(SIGTERM);
  ASSERT_TRUE(apply_->Wait(30s));

  db().exec("ALTER TABLE " + T("r") + " RENAME COLUMN v TO v2");
  db().exec("ALTER TABLE " + T("r") + " RENAME TO r2");
  db().exec("UPDATE " + T("r2") + " SET v2 = 'later' WHERE id = 2");
  StartApply({"--create-tables"});
  WaitApplied(Sentinel());
  ExpectSameTable("r2");
  EXPECT_FALSE(TargetHas("r"));
}

// A type change the target cannot take safely (bigint -> text: the target's bigint cannot
// hold text, and the classifier does not call bigint -> text lossless) stops dblog apply: the
// transaction that carries it is not applied, the stored position stays. The operator changes
// the target column, starts it again, and it resumes with that transaction.
TEST_F(SchemaChangeTest, AChangeItCannotApplyStopsWithNothingAppliedAndResumesOnceFixed) {
  db().exec("CREATE TABLE " + T("s") + " (id int PRIMARY KEY, k bigint, v text)");
  db().exec("INSERT INTO " + T("s") + " SELECT g, g, 'v' || g FROM generate_series(1, 10) g");
  db().exec("CREATE TABLE " + T("other") + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + T("other") + " VALUES (1, 'v1')");
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
  const std::string stored = StoredPosition();

  // the first write of the transaction is to another table, so that the transaction's
  // Relation of s changes once: the operator's fix below is all it needs
  db().exec("BEGIN; UPDATE " + T("other") + " SET v = 'first' WHERE id = 1; ALTER TABLE " +
            T("s") + " ALTER COLUMN k TYPE text; UPDATE " + T("s") + " SET k = 'k' || id; COMMIT");
  const auto status = apply_->Wait(60s);
  ASSERT_TRUE(status) << "dblog apply did not stop:\n" << apply_->log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << apply_->log();
  EXPECT_NE(apply_->log().find("the source changed the type of column k of " + T("s") +
                               " from bigint to text"),
            std::string::npos)
      << apply_->log();
  EXPECT_EQ(StoredPosition(), stored);
  // nothing of that transaction: not even its first update, made before the ALTER
  EXPECT_EQ(target().scalar("SELECT v FROM " + T("other") + " WHERE id = 1"), "v1");
  EXPECT_EQ(TargetColumns("s"), "id integer, k bigint, v text");

  target().exec("ALTER TABLE " + T("s") + " ALTER COLUMN k TYPE text");
  StartApply({"--create-tables"});
  WaitApplied(Sentinel());
  ExpectSameTable("s");
  ExpectSameTable("other");
}

// ALTER TABLE .. SET SCHEMA within the consumer's scope (two schemas): the target table moves
// to the new schema (created with --create-tables), with all its rows.
TEST_F(SchemaChangeTest, SetSchemaWithinTheScopeMovesTheTargetTable) {
  const std::string other = schema() + "_b";
  db().exec("DROP SCHEMA IF EXISTS " + other + " CASCADE; CREATE SCHEMA " + other);
  db().exec("CREATE TABLE " + T("m") + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + T("m") + " SELECT g, 'v' || g FROM generate_series(1, 40) g");
  StartDblogd({"--consumer=" + consumer() + "=" + schema() + ".*," + other + ".*"});
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
  db().exec("ALTER TABLE " + T("m") + " SET SCHEMA " + other);
  db().exec("UPDATE " + other + ".m SET v = 'moved' WHERE id = 1");
  WaitApplied(Sentinel());
  const std::string sql =
      "SELECT count(*) || ' ' || md5(string_agg(t::text, ',' ORDER BY t::text)) FROM " + other +
      ".m t";
  EXPECT_EQ(target().scalar(sql), db().scalar(sql));
  EXPECT_FALSE(TargetHas("m"));
  db().exec("DROP SCHEMA " + other + " CASCADE");
}

// A table renamed into the consumer's scope (extension 0.4's event trigger, dblogd's
// consumer/scope_changes.h): its rows made before the rename reach the target through the copy
// dblogd queues at the rename's place in the log, the write after the rename through the stream.
TEST_F(SchemaChangeTest, ATableRenamedIntoTheScopeIsCopiedIntoTheTarget) {
  db().exec("CREATE TABLE " + T("in_a") + " (id int PRIMARY KEY, v text)");
  db().exec("CREATE TABLE " + T("out_b") + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + T("out_b") + " SELECT g, 'v' || g FROM generate_series(1, 50) g");
  StartDblogd({"--consumer=" + consumer() + "=" + T("in_*") + "," + T("sentinel")});
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
  WaitApplied(Sentinel());
  EXPECT_FALSE(TargetHas("out_b"));
  db().exec("ALTER TABLE " + T("out_b") + " RENAME TO in_b");
  db().exec("UPDATE " + T("in_b") + " SET v = 'after' WHERE id = 1");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  // one copy, done (a second one is allowed: the DDL's message read again before its
  // transaction was acknowledged, after the first copy started)
  const std::string copied = "SELECT count(*) FILTER (WHERE state = 'done') > 0 AND"
                             " count(*) FILTER (WHERE state <> 'done') = 0"
                             " FROM dblog.requests WHERE consumer = '" + consumer() + "'";
  while (db().scalar(copied) != "t") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << "no copy of in_b was done: " << db().scalar(
               "SELECT string_agg(id || ' ' || table_name || ' ' || state, '; ')"
               " FROM dblog.requests WHERE consumer = '" + consumer() + "'")
        << "\n" << apply_->log();
    std::this_thread::sleep_for(50ms);
  }
  WaitApplied(Sentinel());
  ExpectSameTable("in_b");
}

// A primary key changed at the source: the target's key no longer fits; dblog apply stops
// before applying the transaction, and resumes with it once the target's key is changed.
TEST_F(SchemaChangeTest, AChangedPrimaryKeyStopsUntilTheTargetsKeyIsChanged) {
  db().exec("CREATE TABLE " + T("pk") + " (id int, v int, PRIMARY KEY (id))");
  db().exec("INSERT INTO " + T("pk") + " SELECT g, g FROM generate_series(1, 10) g");
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
  const std::string stored = StoredPosition();
  db().exec("BEGIN; ALTER TABLE " + T("pk") + " DROP CONSTRAINT pk_pkey; ALTER TABLE " + T("pk") +
            " ADD PRIMARY KEY (id, v); INSERT INTO " + T("pk") + " VALUES (1, 2); COMMIT");
  const auto status = apply_->Wait(60s);
  ASSERT_TRUE(status) << "dblog apply did not stop:\n" << apply_->log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << apply_->log();
  EXPECT_NE(apply_->log().find("its primary key (id) differs from the source's key (id, v)"),
            std::string::npos)
      << apply_->log();
  EXPECT_EQ(StoredPosition(), stored);
  target().exec("ALTER TABLE " + T("pk") + " DROP CONSTRAINT pk_pkey, ADD PRIMARY KEY (id, v)");
  StartApply({"--create-tables"});
  WaitApplied(Sentinel());
  ExpectSameTable("pk");
}

// --keep-dropped-columns: the target keeps a dropped column (nullable, no longer written); a
// new source column of the same name moves it aside (<name>_dblog_<attnum>).
TEST_F(SchemaChangeTest, KeptDroppedColumnsStayAndMoveAsideForANewColumnOfTheirName) {
  db().exec("CREATE TABLE " + T("k") + " (id int PRIMARY KEY, n int NOT NULL, v text)");
  db().exec("INSERT INTO " + T("k") + " SELECT g, g, 'v' || g FROM generate_series(1, 10) g");
  StartDblogd();
  StartApply({"--create-tables", "--keep-dropped-columns"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
  WaitApplied(Sentinel());

  db().exec("ALTER TABLE " + T("k") + " DROP COLUMN n");
  db().exec("INSERT INTO " + T("k") + " VALUES (11, 'v11')");
  WaitApplied(Sentinel());
  ExpectSameSourceColumns("k");
  EXPECT_EQ(TargetColumns("k"), "id integer, n integer, v text");
  EXPECT_EQ(target().scalar("SELECT count(n) FROM " + T("k")), "10");  // the new row: NULL

  db().exec("ALTER TABLE " + T("k") + " ADD COLUMN n text");
  db().exec("UPDATE " + T("k") + " SET n = 'new' || id");
  WaitApplied(Sentinel());
  ExpectSameSourceColumns("k");
  EXPECT_EQ(TargetColumns("k"), "id integer, n_dblog_2 integer, v text, n text");
  EXPECT_EQ(target().scalar("SELECT sum(n_dblog_2) FROM " + T("k")), "55");
}

// Issue 28 item 1, as a new user met it: a column added with a constant default is filled by
// PostgreSQL without writing a row, so the log never carries its value for the 91 rows not
// updated since. The DDL's event trigger queued a repair of the table in the DDL's own
// transaction (dblog.requests, with the reason): the target converges with nothing run by hand.
TEST_F(SchemaChangeTest, AColumnFilledByItsDefaultConvergesWithNothingRunByHand) {
  db().exec("CREATE TABLE " + T("a") + " (id int PRIMARY KEY, v text, n int)");
  db().exec("INSERT INTO " + T("a") + " SELECT g, 'v' || g, g FROM generate_series(1, 100) g");
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
  db().exec("ALTER TABLE " + T("a") + " ADD COLUMN w text DEFAULT 'x'");
  db().exec("UPDATE " + T("a") + " SET v = 'u' || id WHERE id <= 9");
  WaitConverged("a");
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + T("a") + " WHERE w = 'x'"), "100");
  EXPECT_EQ(RequestsByDblog("a"), "ALTER TABLE ADD COLUMN w DEFAULT=done");
  // a volatile default rewrites the table, which is not decoded either
  db().exec("ALTER TABLE " + T("a") + " ADD COLUMN r int DEFAULT (random() * 1000)::int");
  WaitConverged("a");
}

// ALTER COLUMN .. TYPE .. USING rewrites every row with new values, none of them decoded: the
// target widens the column at the next Relation and the repair brings the values.
TEST_F(SchemaChangeTest, AColumnTypeChangeUsingAnExpressionConverges) {
  db().exec("CREATE TABLE " + T("a") + " (id int PRIMARY KEY, v text, n int)");
  db().exec("INSERT INTO " + T("a") + " SELECT g, 'v' || g, g FROM generate_series(1, 100) g");
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
  db().exec("ALTER TABLE " + T("a") + " ALTER COLUMN n TYPE bigint USING n * 10000000000");
  db().exec("UPDATE " + T("a") + " SET v = 'u' || id WHERE id <= 9");
  WaitConverged("a");
  EXPECT_EQ(TargetColumns("a"), "id integer, v text, n bigint");
  EXPECT_EQ(RequestsByDblog("a"), "ALTER TABLE ALTER COLUMN n TYPE USING=done");
}

// ALTER TYPE .. RENAME VALUE changes how every row holding the label reads, in every table
// whose column holds the enum (here directly and in an array), without writing one. The
// target keeps labels, and the array, as text (as a non-PostgreSQL sink would).
TEST_F(SchemaChangeTest, AnEnumsRenamedLabelConvergesInEveryTableHoldingIt) {
  db().exec("CREATE TYPE " + T("mood") + " AS ENUM ('sad', 'ok', 'happy')");
  db().exec("CREATE TABLE " + T("e") + " (id int PRIMARY KEY, m " + T("mood") + ")");
  db().exec("CREATE TABLE " + T("f") + " (id int PRIMARY KEY, ms " + T("mood") + "[])");
  db().exec("INSERT INTO " + T("e") + " SELECT g, (ARRAY['sad', 'ok', 'happy'])[1 + g % 3]::" +
            T("mood") + " FROM generate_series(1, 100) g");
  db().exec("INSERT INTO " + T("f") + " SELECT g, ARRAY['ok'::" + T("mood") +
            ", 'sad'] FROM generate_series(1, 20) g");
  target().exec("CREATE SCHEMA " + schema());
  // dblog apply casts values to the source's type name: the target's type knows every label
  target().exec("CREATE TYPE " + T("mood") + " AS ENUM ('sad', 'ok', 'happy', 'fine')");
  target().exec("CREATE TABLE " + T("e") + " (id int PRIMARY KEY, m text)");
  target().exec("CREATE TABLE " + T("f") + " (id int PRIMARY KEY, ms text)");
  StartDblogd();
  // text holds every label; dblog apply does not know a user type's values, so it is told
  StartApply({"--create-tables", "--allow-lossy-columns"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
  WaitApplied(Sentinel());
  ExpectSameTable("e");
  db().exec("ALTER TYPE " + T("mood") + " RENAME VALUE 'ok' TO 'fine'");
  db().exec("UPDATE " + T("e") + " SET m = 'happy' WHERE id <= 9");
  WaitConverged("e");
  WaitConverged("f");
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + T("e") + " WHERE m = 'ok'"), "0");
  EXPECT_EQ(RequestsByDblog("e"), "ALTER TYPE " + T("mood") + " RENAME VALUE=done");
}

}  // namespace
}  // namespace dblog::test
