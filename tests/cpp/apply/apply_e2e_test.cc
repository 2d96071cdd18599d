// tests/cpp/apply/apply_e2e_test.cc: `dblog apply` end to end: a real cluster, the real dblogd
// and the real `dblog apply` binary as child processes, the source in the test's schema and the
// target a database the test creates (and drops) in the same cluster. Convergence is checked
// table by table: row counts and an order-independent hash of the rows' text on both sides,
// and the first differing row on a mismatch.
//
// DBLOG_APPLY_BENCH=1 also runs the rate measurements (1M-row bootstrap, 100k small
// transactions); they print rows/s and assert only convergence.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "apply_e2e_fixture.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;

// Stops and joins a test's writer thread on every way out of the test (an ASSERT included).
struct JoinOnExit {
  std::atomic<bool>& stop;
  std::thread& thread;
  ~JoinOnExit() {
    stop = true;
    if (thread.joinable()) thread.join();
  }
};

// A writer doing random inserts, updates, deletes and key changes on T(a) (bigint id) and
// T(b) ((text, int) key) until stopped.
class Writer {
 public:
  Writer(const std::string& conninfo, std::string schema, int seed)
      : thread_([this, conninfo, schema, seed] {
          PgConn w(conninfo);
          std::mt19937 rng(static_cast<unsigned>(seed));
          while (!stop_) {
            const long id = static_cast<long>(rng() % 60000) + 1;
            const std::string a = schema + ".a", b = schema + ".b", i = std::to_string(id);
            switch (rng() % 6) {
              case 0:
                w.exec("UPDATE " + a + " SET v = v + 1 WHERE id = " + i);
                break;
              case 1:
                w.exec("DELETE FROM " + a + " WHERE id = " + i);
                break;
              case 2:
                w.exec("INSERT INTO " + a + " VALUES (" + std::to_string(id + 100000) +
                       ", 1, 'new') ON CONFLICT DO NOTHING");
                break;
              case 3:
                w.exec("UPDATE " + a + " SET id = id + 1000000 WHERE id = " + i);
                break;
              case 4:
                w.exec("UPDATE " + b +
                       " SET v = v + 1, k2 = k2 + 100000 WHERE k2 = " + std::to_string(id % 5000));
                break;
              case 5:
                w.exec("BEGIN; UPDATE " + a + " SET v = -v WHERE id BETWEEN " + i + " AND " +
                       std::to_string(id + 20) + "; DELETE FROM " + b +
                       " WHERE k2 = " + std::to_string(id % 5000 + 1) + "; COMMIT");
                break;
            }
            ++ops_;
          }
        }) {}
  ~Writer() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  long ops() const { return ops_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<long> ops_{0};
  std::thread thread_;
};

TEST_F(ApplyE2eTest, BootstrapAndLiveChangesConverge) {
  db().exec("CREATE TABLE " + T("a") + " (id bigint PRIMARY KEY, v int, body text)");
  db().exec("CREATE TABLE " + T("b") + " (k1 text, k2 int, v numeric, PRIMARY KEY (k1, k2))");
  db().exec("INSERT INTO " + T("a") + " SELECT g, g, 'row ' || g FROM generate_series(1, 60000) g");
  db().exec("INSERT INTO " + T("b") +
            " SELECT 'k' || (g % 50), g, g / 7.0 FROM "
            "generate_series(1, 5000) g");
  StartDblogd({"--copy-workers=2"});
  Writer writer(conninfo(), schema(), 7);  // during the bootstrap and after it
  StartApply({"--create-tables", "--batch-rows=500"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 120s)) << apply_->log();
  std::this_thread::sleep_for(1s);
  writer.Stop();
  EXPECT_GT(writer.ops(), 100);
  WaitApplied(Sentinel());
  ExpectSameTable("a");
  ExpectSameTable("b");
  ExpectSameTable("sentinel");
  EXPECT_NE(apply_->log().find("no stored position"), std::string::npos);
  EXPECT_NE(apply_->log().find("created target table " + T("a")), std::string::npos);
}

// Transactions commit in the target without waiting for their WAL to be flushed; dblog apply
// makes them durable and acknowledges them once the stream has been quiet for a moment, not at
// dblogd's next heartbeat (every 10 minutes here): the consumer's bootstrap is recorded done, and
// a later change confirmed in the slot, within a minute. Before, both waited for a heartbeat.
TEST_F(ApplyE2eTest, AQuietStreamIsAcknowledgedWithoutWaitingForAHeartbeat) {
  db().exec("CREATE TABLE " + T("a") + " (id bigint PRIMARY KEY, v int)");
  db().exec("INSERT INTO " + T("a") + " SELECT g, g FROM generate_series(1, 1000) g");
  StartDblogd({"--heartbeat-interval=600"});
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
  auto within_a_minute = [](const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(50ms);
    }
    return true;
  };
  EXPECT_TRUE(within_a_minute([&] {
    return db().scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = '" + consumer() +
                       "'") == "done";
  }));
  const std::uint64_t change = Sentinel();
  EXPECT_TRUE(within_a_minute([&] { return ConfirmedFlush() >= change; }))
      << "confirmed " << ConfirmedFlush() << ", change at " << change;
  ExpectSameTable("a");
}

TEST_F(ApplyE2eTest, KeyChangesAndTruncates) {
  db().exec("CREATE TABLE " + T("items") + " (id int PRIMARY KEY, v text)");
  db().exec("CREATE TABLE " + T("pairs") + " (k1 text, k2 int, v int, PRIMARY KEY (k1, k2))");
  StartDblogd({"--bootstrap=false"});
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("connected to dblogd", 20s)) << apply_->log();
  const std::string items = T("items"), pairs = T("pairs");
  db().exec("INSERT INTO " + items + " SELECT g, 'v' || g FROM generate_series(1, 100) g");
  db().exec("INSERT INTO " + pairs + " SELECT 'k' || (g % 3), g, g FROM generate_series(1, 30) g");
  db().exec("UPDATE " + items + " SET id = id + 1000 WHERE id % 10 = 0");
  // many keys move in one statement, then back through other keys in one transaction
  db().exec("UPDATE " + items + " SET id = id + 200 WHERE id < 51");
  db().exec("BEGIN; UPDATE " + items +
            " SET id = id - 199 WHERE id BETWEEN 201 AND 250;"
            " UPDATE " +
            items + " SET v = 'back' WHERE id < 60; COMMIT");
  db().exec("BEGIN; UPDATE " + items +
            " SET id = -id WHERE id BETWEEN 60 AND 70;"
            " UPDATE " +
            items + " SET id = -id + 500, v = 'moved' WHERE id < 0; COMMIT");
  db().exec("UPDATE " + pairs + " SET k1 = 'z', k2 = -k2 WHERE k2 % 4 = 0");
  db().exec("UPDATE " + pairs + " SET k2 = k2 + 1 WHERE k1 = 'k1'");  // ripple within a key prefix
  // a truncate in the middle of a transaction, with rows before and after it
  db().exec("BEGIN; INSERT INTO " + items + " VALUES (5000, 'gone'); TRUNCATE " + items +
            ";"
            " INSERT INTO " +
            items + " SELECT g, 'after' FROM generate_series(1, 20) g; COMMIT");
  db().exec("UPDATE " + items + " SET id = id * 100 WHERE id > 15");
  WaitApplied(Sentinel());
  ExpectSameTable("items");
  ExpectSameTable("pairs");
  // both tables at once, then new rows
  db().exec("TRUNCATE " + items + ", " + pairs);
  db().exec("INSERT INTO " + pairs + " VALUES ('x', 1, 1)");
  WaitApplied(Sentinel());
  ExpectSameTable("items");
  ExpectSameTable("pairs");
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + items), "0");
}

// A column added at the source arrives with a new Relation: --create-tables adds it to the
// target table (nullable), rows carry on, and the repair the DDL queued fills the default into
// the rows the source never rewrote.
TEST_F(ApplyE2eTest, ColumnsAddedAtTheSourceAreAddedToTheTarget) {
  db().exec("CREATE TABLE " + T("items") + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + T("items") + " SELECT g, 'v' || g FROM generate_series(1, 10) g");
  StartDblogd();
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
  db().exec("BEGIN; ALTER TABLE " + T("items") +
            " ADD COLUMN extra numeric(10,2) DEFAULT 1.5;"
            " INSERT INTO " +
            T("items") + " VALUES (11, 'v11', 2.25); COMMIT");
  db().exec("UPDATE " + T("items") + " SET extra = 3 WHERE id <= 5");
  // the ADD COLUMN's default fills rows the log never carries: the DDL queued a repair of the
  // table in its own transaction (docs/operations.md, "DDL that changes rows without writing
  // them"); wait for it, then for the target
  const std::string repair = "SELECT coalesce(string_agg(state, ','), '') FROM dblog.requests"
                             " WHERE table_name = '" + T("items") + "' AND reason IS NOT NULL";
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (db().scalar(repair) != "done" && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  EXPECT_EQ(db().scalar(repair), "done");
  WaitApplied(Sentinel());
  EXPECT_NE(apply_->log().find("added column extra numeric(10,2) to target table " + T("items")),
            std::string::npos)
      << apply_->log();
  // rows the source rewrote carry their values; the rest the default, through the repair
  EXPECT_EQ(target().scalar("SELECT string_agg(coalesce(extra::text, '-'), ',' ORDER BY id) FROM " +
                            T("items")),
            "3.00,3.00,3.00,3.00,3.00,1.50,1.50,1.50,1.50,1.50,2.25");
}

// REPLICA IDENTITY DEFAULT: the WAL has no value for an unchanged TOASTed column, the stream
// says "unchanged", and the target must keep its own. FULL: the old row carries it.
TEST_F(ApplyE2eTest, UnchangedToastKeepsTheTargetsValue) {
  for (const std::string t : {"d", "f"}) {
    db().exec("CREATE TABLE " + T(t) + " (id int PRIMARY KEY, v int, body text, note text)");
    db().exec("ALTER TABLE " + T(t) + " ALTER COLUMN body SET STORAGE EXTERNAL");
  }
  db().exec("ALTER TABLE " + T("f") + " REPLICA IDENTITY FULL");
  for (const std::string t : {"d", "f"})
    db().exec("INSERT INTO " + T(t) +
              " SELECT g, g, repeat(md5(g::text), 300), 'n' FROM "
              "generate_series(1, 50) g");
  StartDblogd();
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
  for (const std::string t : {"d", "f"}) {
    db().exec("UPDATE " + T(t) + " SET v = v + 100 WHERE id <= 20");       // body unchanged
    db().exec("UPDATE " + T(t) + " SET id = id + 1000 WHERE id % 5 = 0");  // key moves, body kept
    db().exec("BEGIN; UPDATE " + T(t) + " SET note = 'x' WHERE id = 1; UPDATE " + T(t) +
              " SET id = 2000 WHERE id = 1; UPDATE " + T(t) + " SET v = 0 WHERE id = 2000; COMMIT");
    db().exec("UPDATE " + T(t) + " SET body = 'short' WHERE id = 3");
  }
  WaitApplied(Sentinel());
  ExpectSameTable("d");
  ExpectSameTable("f");
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + T("d") + " WHERE length(body) = 9600"), "49");
  // the stream really had unchanged markers for d (and none for f): the applier moved rows
  EXPECT_EQ(apply_->log().find("warning"), std::string::npos) << apply_->log();
}

// An UPDATE that keeps an unchanged TOAST value, for a row the target lost: nothing can be
// applied (the value is in no event), so the applier counts it and logs the key and the exact
// dblog.repair_keys call; running that call on the source restores the row. With REPLICA
// IDENTITY FULL the update carries the whole row and restores it by itself.
TEST_F(ApplyE2eTest, UpdateOfAMissingRowWithUnchangedToastIsReportedWithTheRepairThatFixesIt) {
  for (const std::string t : {"docs", "docs_full"}) {
    db().exec("CREATE TABLE " + T(t) + " (id int PRIMARY KEY, note text, body text)");
    db().exec("ALTER TABLE " + T(t) + " ALTER COLUMN body SET STORAGE EXTERNAL");
    db().exec("INSERT INTO " + T(t) +
              " SELECT g, 'n', repeat(md5(g::text), 400) FROM generate_series(1, 5) g");
  }
  db().exec("ALTER TABLE " + T("docs_full") + " REPLICA IDENTITY FULL");
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
  target().exec("DELETE FROM " + T("docs") + " WHERE id = 2; DELETE FROM " + T("docs_full") +
                " WHERE id = 2");
  db().exec("UPDATE " + T("docs") + " SET note = 'changed' WHERE id = 2");  // body unchanged
  db().exec("UPDATE " + T("docs_full") + " SET note = 'changed' WHERE id = 2");
  WaitApplied(Sentinel());
  ExpectSameTable("docs_full");  // FULL: the update carried the whole row
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + T("docs") + " WHERE id = 2"), "0");

  const std::string call = "SELECT dblog.repair_keys('" + T("docs") + "', '[{\"id\":2}]', '" +
                           consumer() + "');";
  const std::string line = "warning: an update of " + T("docs") +
                           " key {\"id\":2} keeps unchanged TOAST values of a row the target does"
                           " not have: its other columns were not applied (1 such update so far)."
                           " Restore the row from the source with: " + call;
  ASSERT_TRUE(apply_->WaitForLog(line, 10s)) << apply_->log();
  EXPECT_EQ(apply_->log().find("docs_full key"), std::string::npos) << apply_->log();
  // the call, as logged, run on the source: the row comes back whole
  db().exec(call);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (target().scalar("SELECT count(*) FROM " + T("docs") + " WHERE id = 2") != "1") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << apply_->log();
    std::this_thread::sleep_for(50ms);
  }
  WaitApplied(Sentinel());
  ExpectSameTable("docs");
  // counted, and reported when the applier stops
  apply_->Signal(SIGTERM);
  ASSERT_TRUE(apply_->Wait(30s));
  EXPECT_NE(apply_->log().find(", 1 updates of rows the target lacks (not applied: see the repair"
                               " calls logged)"),
            std::string::npos)
      << apply_->log();
}

constexpr const char* kTypesDdl = R"sql(
  CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
  CREATE DOMAIN posint AS int4 CHECK (VALUE > 0);
  CREATE TYPE pair AS (n int4, f float8, s text);
)sql";
constexpr const char* kTypesTable = R"sql(
  CREATE TABLE all_types (
    id int4 PRIMARY KEY,
    c_bool bool, c_int2 int2, c_int4 int4, c_int8 int8, c_oid oid,
    c_float4 float4, c_float8 float8,
    c_text text, c_varchar varchar(10), c_char char(5), c_name name,
    c_bytea bytea, c_uuid uuid,
    c_date date, c_ts timestamp, c_tstz timestamptz, c_time time,
    c_numeric numeric, c_json json, c_jsonb jsonb, c_interval interval,
    c_int4s int4[], c_texts text[], c_tstzs timestamptz[], c_byteas bytea[],
    c_inet inet, c_domain posint, c_enum mood, c_pair pair,
    c_wide text, c_wide_ext text);
  ALTER TABLE all_types ALTER COLUMN c_wide_ext SET STORAGE EXTERNAL;
)sql";
// The rows of tests/cpp/encoder_equality_test.cc (every type family, NULLs, NaN, infinities,
// -0, protobuf defaults, BC dates, timestamps beyond int64 microseconds), with id offset N.
std::vector<std::string> TypeRows(int n) {
  auto at = [n](int i) { return std::to_string(i + n); };
  return {
      "INSERT INTO all_types (id, c_bool, c_int2, c_int4, c_int8, c_oid, c_float4, c_float8,"
      " c_text, c_varchar, c_char, c_name, c_bytea, c_uuid, c_date, c_ts, c_tstz, c_time,"
      " c_numeric, c_json, c_jsonb, c_interval, c_int4s, c_texts, c_tstzs, c_byteas, c_inet,"
      " c_domain, c_enum, c_pair, c_wide, c_wide_ext) VALUES (" +
          at(1) +
          ", true, -32768,"
          " 2147483647, -9223372036854775808, 4294967295, 1.5, 0.1, 'héllo ☃', 'abc', 'ab', 'nm',"
          " '\\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-02-29',"
          " '2024-02-29 12:34:56.789012', '2024-02-29 12:34:56.789012+02', '12:00:01',"
          " '12345678901234567890.123456789012345678901234567890', '{\"b\": 1,  \"a\": [1,2]}',"
          " '{\"b\": 1,  \"a\": [1,2]}', '1 year 2 mons 3 days 04:05:06.789', '{1,2,3}',"
          " ARRAY['a', 'b c', NULL, '\"q\"'], ARRAY['2024-02-29 12:34:56.789012+02'::timestamptz],"
          " ARRAY['\\x00ff'::bytea], '192.168.0.1/24', 7, 'happy', ROW(1, 1.0::float8 / 3, 'x y'),"
          " repeat('x', 100000), repeat('y', 5000))",
      "INSERT INTO all_types (id) VALUES (" + at(2) + ")",
      "INSERT INTO all_types (id, c_float4, c_float8, c_date, c_ts, c_tstz, c_numeric, c_int4s,"
      " c_texts, c_wide) VALUES (" +
          at(3) +
          ", 'NaN', 'NaN', 'infinity', 'infinity', '-infinity',"
          " 'NaN', '{}', '{}', (SELECT string_agg(md5(i::text) || repeat('-', 64), '')"
          " FROM generate_series(1, 1000) i))",
      "INSERT INTO all_types (id, c_float4, c_float8) VALUES (" + at(4) + ", '-0', '-0')",
      "INSERT INTO all_types (id, c_bool, c_int2, c_int4, c_int8, c_oid, c_float4, c_float8,"
      " c_text, c_varchar, c_char, c_name, c_bytea, c_uuid, c_date, c_ts, c_tstz, c_numeric,"
      " c_json, c_jsonb, c_interval) VALUES (" +
          at(5) +
          ", false, 0, 0, 0, 0, 0, 0, '', '', '',"
          " '', '\\x', '00000000-0000-0000-0000-000000000000', '1970-01-01', '1970-01-01 00:00',"
          " '1970-01-01 00:00+00', 0, 'null', '{}', '0')",
      "INSERT INTO all_types (id, c_float4, c_float8, c_date, c_ts, c_tstz) VALUES (" + at(6) +
          ", 'Infinity', '-Infinity', '-infinity', '-infinity', 'infinity')",
      "INSERT INTO all_types (id, c_date, c_ts, c_tstz) VALUES (" + at(7) +
          ", '4714-11-24 BC',"
          " '1900-01-01 00:00:00.000001', '4714-11-24 00:00:00+00 BC')",
      "INSERT INTO all_types (id, c_date, c_ts, c_tstz) VALUES (" + at(8) +
          ", '5874897-12-31',"
          " '294276-12-31 23:59:59.999999', '294276-12-31 23:59:59.999999+00')",
      "INSERT INTO all_types (id, c_date, c_ts, c_tstz, c_float4, c_float8) VALUES (" + at(9) +
          ", '0001-12-31 BC', '0001-01-01 00:00:00 BC', '0044-03-15 12:00:00+00 BC', 3.4028235e38,"
          " 2.2250738585072014e-308)",
  };
}

TEST_F(ApplyE2eTest, EveryTypeFamilyRoundTrips) {
  db().exec("SET search_path = " + schema());
  db().exec(kTypesDdl);
  db().exec(kTypesTable);
  for (const auto& sql : TypeRows(0)) db().exec(sql);  // copied by the bootstrap
  // the target needs the user-defined types under the same names (format_type qualifies them)
  target().exec("CREATE SCHEMA " + schema() + "; SET search_path = " + schema());
  target().exec(kTypesDdl);
  StartDblogd();
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
  for (const auto& sql : TypeRows(100)) db().exec(sql);  // through the log
  db().exec("UPDATE all_types SET c_text = 'upd', c_int4s = '{9}' WHERE id IN (1, 101)");
  db().exec("UPDATE all_types SET id = id + 1000 WHERE id IN (3, 103)");  // key move, wide value
  db().exec("RESET search_path");
  WaitApplied(Sentinel());
  ExpectSameTable("all_types");
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + T("all_types")), "18");
}

// The bootstrap fills a table whose every column is of a built-in type with a binary form by
// COPY in binary format (client/apply/copy_binary.h), the target reading it faster; a table
// with another type goes as COPY text; a table whose rows include one with no binary form (a
// timestamp beyond int64 microseconds, which the stream carries as a literal) turns to text
// from that row on. Infinities have a binary form.
// Every table ends equal to the source (the values themselves: copy_binary_test.cc).
TEST_F(ApplyE2eTest, TheBootstrapCopiesInBinaryWhereEveryColumnHasABinaryForm) {
  const std::string columns =
      " (id bigint PRIMARY KEY, n numeric, n2 numeric(8,2), t text, c char(3), v varchar(5),"
      " ts timestamptz, tsl timestamp, d date, j jsonb, js json, f4 float4, f8 float8, u uuid,"
      " b bytea, ok bool, i2 int2, i4 int4, o oid)";
  const std::string values =
      " SELECT g, (g * 1.5 - 1000)::numeric * 10 ^ (g % 30 - 15), (g % 999999)::numeric / 100,"
      " 'r' || g || E'\\t\\n\\\\ é', 'c' || g % 10, 'v' || g % 1000,"
      " timestamptz '2000-01-01 UTC' + g * interval '1 day 1.5 s',"
      " timestamp '1999-12-31' - g * interval '77 days', date '2000-01-01' - g * 10,"
      " jsonb_build_object('g', g, 's', 'x y'), json_build_array(g, '  '), g / 7.0, -g / 3.0,"
      " md5(g::text)::uuid, decode(md5(g::text), 'hex'), g % 2 = 0, g % 32767, -g, g"
      " FROM generate_series(1, 3000) g";
  db().exec("CREATE TABLE " + T("plain") + columns);
  db().exec("INSERT INTO " + T("plain") + values);
  db().exec("UPDATE " + T("plain") +
            " SET n = 'NaN', f8 = 'Infinity', ts = 'infinity', d = '-infinity' WHERE id % 100 = 3");
  db().exec("CREATE TABLE " + T("far_future") + columns);
  db().exec("INSERT INTO " + T("far_future") + values);
  db().exec("UPDATE " + T("far_future") + " SET ts = '294270-01-01 UTC' WHERE id = 1500");
  db().exec("CREATE TABLE " + T("with_array") + " (id int PRIMARY KEY, a int4[], t text)");
  db().exec("INSERT INTO " + T("with_array") +
            " SELECT g, ARRAY[g, -g], 'a' || g FROM generate_series(1, 500) g");
  StartDblogd();
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 120s)) << apply_->log();
  WaitApplied(Sentinel());
  for (const char* table : {"plain", "far_future", "with_array"}) ExpectSameTable(table);
  EXPECT_NE(apply_->log().find("a row of " + T("far_future") +
                               " has a value with no binary COPY form in column ts"),
            std::string::npos)
      << apply_->log();
  apply_->Signal(SIGINT);
  ASSERT_TRUE(apply_->Wait().has_value());
  // plain in binary; far_future in binary up to its far row, the rest in text
  const std::string log = apply_->log();
  const std::size_t at = log.find(" copied in binary)");
  ASSERT_NE(at, std::string::npos) << log;
  const std::size_t from = log.rfind('(', at) + 1;
  const long binary = std::stol(log.substr(from, at - from));
  EXPECT_GE(binary, 3000) << log;
  EXPECT_LT(binary, 6000) << log;
}

// --copy-text: the same bootstrap in COPY's text format only.
TEST_F(ApplyE2eTest, WithCopyTextTheBootstrapCopiesAsText) {
  db().exec("CREATE TABLE " + T("plain") +
            " (id bigint PRIMARY KEY, n numeric, ts timestamptz, t text)");
  db().exec("INSERT INTO " + T("plain") +
            " SELECT g, g / 3.0, now() - g * interval '1 h', 'r' || g"
            " FROM generate_series(1, 2000) g");
  StartDblogd();
  StartApply({"--create-tables", "--copy-text"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 120s)) << apply_->log();
  WaitApplied(Sentinel());
  ExpectSameTable("plain");
  apply_->Signal(SIGINT);
  ASSERT_TRUE(apply_->Wait().has_value());
  EXPECT_NE(apply_->log().find(" rows written, "), std::string::npos) << apply_->log();
  EXPECT_EQ(apply_->log().find("copied in binary"), std::string::npos) << apply_->log();
}

// The applier is killed at a random moment while small transactions stream in. Its stored
// position is the resume point: the restarted applier says so, and the target converges with
// no gap (every increment of the counter has its event row).
TEST_F(ApplyE2eTest, SigkillOfTheApplierResumesAfterTheStoredPosition) {
  db().exec("CREATE TABLE " + T("counter") + " (id int PRIMARY KEY, n bigint)");
  db().exec("CREATE TABLE " + T("events") + " (n bigint PRIMARY KEY, at timestamptz)");
  db().exec("INSERT INTO " + T("counter") + " VALUES (1, 0)");
  StartDblogd();
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    PgConn w(conninfo());
    while (!stop)
      w.exec("WITH c AS (UPDATE " + T("counter") +
             " SET n = n + 1 WHERE id = 1 RETURNING n)"
             " INSERT INTO " +
             T("events") + " SELECT n, now() FROM c");
  });
  JoinOnExit join_writer{stop, writer};
  const auto wait_events = [&](long at_least) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        if (std::stol(target().scalar("SELECT count(*) FROM " + T("events"))) >= at_least) return;
      } catch (const PgError&) {
      }
      std::this_thread::sleep_for(20ms);
    }
    ADD_FAILURE() << "the target did not get " << at_least << " events";
  };
  for (int round = 0; round < 3; ++round) {
    wait_events(300 * (round + 1));
    apply_->Signal(SIGKILL);
    apply_->Wait();
    // Statements the applier had already sent still run until its backend sees the closed
    // socket (commits included: each stores its own position atomically with its rows).
    const auto gone = std::chrono::steady_clock::now() + 20s;
    while (target().scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                           "'dblog apply " +
                           consumer() + "'") != "0" &&
           std::chrono::steady_clock::now() < gone)
      std::this_thread::sleep_for(10ms);
    const std::string stored = StoredPosition();
    ASSERT_FALSE(stored.empty());
    StartApply({"--create-tables"});
    ASSERT_TRUE(apply_->WaitForLog("connected to dblogd", 20s)) << apply_->log();
    EXPECT_NE(apply_->log().find("resuming after " + stored + " (stored in the target)"),
              std::string::npos)
        << "stored " << stored << "\n"
        << apply_->log();
  }
  stop = true;
  writer.join();
  WaitApplied(Sentinel());
  ExpectSameTable("counter");
  ExpectSameTable("events");
  EXPECT_EQ(target().scalar("SELECT count(*) = max(n) FROM " + T("events")), "t");
  // SIGTERM: a clean stop, exit 0
  apply_->Signal(SIGTERM);
  const auto status = apply_->Wait(20s);
  ASSERT_TRUE(status);
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << apply_->log();
  EXPECT_NE(apply_->log().find("stopped by signal"), std::string::npos) << apply_->log();
  // everything stored was acknowledged: the slot is confirmed past the sentinel's commit
  const std::string position = StoredPosition();
  EXPECT_GE(ConfirmedFlush(), common::ParseLsn(position.substr(0, position.find(':'))));
}

TEST_F(ApplyE2eTest, MismatchedTargetTablesFailWithAClearMessage) {
  db().exec("CREATE TABLE " + T("items") + " (id int PRIMARY KEY, v text, w int)");
  db().exec("INSERT INTO " + T("items") + " VALUES (1, 'a', 1)");
  target().exec("CREATE SCHEMA " + schema() + "; CREATE TABLE " + T("sentinel") +
                " (id int PRIMARY KEY); CREATE TABLE " + T("items") +
                " (id int PRIMARY KEY, v text)");
  StartDblogd();
  StartApply();
  auto status = apply_->Wait(60s);
  ASSERT_TRUE(status) << apply_->log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << apply_->log();
  EXPECT_NE(apply_->log().find("dblog apply: error: target table " + T("items") +
                               " has no column \"w\" (source type integer); add it or run with "
                               "--create-tables"),
            std::string::npos)
      << apply_->log();
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + T("items")), "0");
  EXPECT_EQ(target().scalar("SELECT count(*) FROM dblog_apply.tables WHERE table_name = 'items'"),
            "0");
  // a different key is refused by name too
  target().exec("DROP TABLE " + T("items") + "; CREATE TABLE " + T("items") +
                " (id int, v text PRIMARY KEY, w int)");
  StartApply();
  status = apply_->Wait(60s);
  ASSERT_TRUE(status) << apply_->log();
  EXPECT_NE(apply_->log().find("target table " + T("items") +
                               ": its primary key (v) differs from the source's key (id)"),
            std::string::npos)
      << apply_->log();
  // fixed: it converges
  target().exec("DROP TABLE " + T("items") + "; CREATE TABLE " + T("items") +
                " (id int PRIMARY KEY, v text, w int)");
  StartApply();
  WaitApplied(Sentinel());
  ExpectSameTable("items");
}

// A target column narrower than the source's (numeric(10,2) into integer rounds 1.25 to 1;
// timestamptz into timestamp drops the zone) stops the run before the transaction that first
// writes the table is applied, naming every such column and the flag; wider types (int into
// bigint, varchar(20) into text) pass silently. Before, the rows went in rounded with a note.
// With --allow-lossy-columns the run applies, warning once per column even when the table is
// checked again after a new Relation.
TEST_F(ApplyE2eTest, LossyTargetColumnsAreRefusedUnlessAllowed) {
  const std::string items = T("items");
  db().exec("CREATE TABLE " + items +
            " (id int PRIMARY KEY, amount numeric(10,2), at timestamptz, label varchar(20))");
  target().exec("CREATE SCHEMA " + schema() + "; CREATE TABLE " + T("sentinel") +
                " (id int PRIMARY KEY); CREATE TABLE " + items +
                " (id bigint PRIMARY KEY, amount integer, at timestamp, label text)");
  StartDblogd();
  StartApply();
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();  // no rows
  WaitApplied(Sentinel());
  const std::string before = StoredPosition();
  ASSERT_FALSE(before.empty());
  // The first rows of items come through the log.
  db().exec("INSERT INTO " + items +
            " VALUES (1, 1.25, '2026-01-02 03:04:05.678901+00', 'a'),"
            " (2, 2.5, '2026-01-02 03:04:05+02', 'b')");
  auto status = apply_->Wait(30s);
  ASSERT_TRUE(status) << "dblog apply did not stop; the target has: "
                      << target().scalar("SELECT string_agg(id || ':' || amount, ' ') FROM " +
                                         items)
                      << "\n"
                      << apply_->log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << apply_->log();
  std::string log = apply_->log();
  EXPECT_NE(log.find("dblog apply: error: target table " + items +
                     ": column \"amount\" is integer, the source's is numeric(10,2); column \"at\""
                     " is timestamp without time zone, the source's is timestamp with time zone:"
                     " they cannot hold every value of the source's type without loss (values"
                     " would be rounded, truncated or refused); change the target's type, or run"
                     " with --allow-lossy-columns to apply anyway"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("\"id\""), std::string::npos) << log;  // widenings are not mentioned
  EXPECT_EQ(log.find("\"label\""), std::string::npos) << log;
  EXPECT_EQ(log.find("note: target column"), std::string::npos) << log;
  // nothing applied, the stored position did not move: the transaction comes again
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + items), "0");
  EXPECT_EQ(StoredPosition(), before);
  EXPECT_EQ(target().scalar("SELECT count(*) FROM dblog_apply.tables WHERE table_name = 'items'"),
            "0");
  // and again on the next run
  StartApply();
  status = apply_->Wait(30s);
  ASSERT_TRUE(status) << apply_->log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << apply_->log();
  EXPECT_NE(apply_->log().find("run with --allow-lossy-columns"), std::string::npos)
      << apply_->log();
  EXPECT_EQ(StoredPosition(), before);

  // Allowed: applies (rounded, as PostgreSQL's assignment does), one warning per column.
  StartApply({"--allow-lossy-columns"});
  db().exec("INSERT INTO " + items + " VALUES (3, 3.75, '2026-05-06 07:08:09.5+00', 'c')");
  // a new Relation: the table is checked again, the warnings are not repeated
  target().exec("ALTER TABLE " + items + " ADD COLUMN note text");
  db().exec("BEGIN; ALTER TABLE " + items + " ADD COLUMN note text; UPDATE " + items +
            " SET note = 'n', amount = amount + 1 WHERE id = 1; COMMIT");
  WaitApplied(Sentinel());
  EXPECT_EQ(target().scalar("SELECT string_agg(id || ':' || amount || ':' || at || ':' || label"
                            " || ':' || coalesce(note, '-'), ' ' ORDER BY id) FROM " +
                            items),
            "1:2:2026-01-02 03:04:05.678901:a:n 2:3:2026-01-02 01:04:05:b:- "
            "3:4:2026-05-06 07:08:09.5:c:-");
  log = apply_->log();
  const auto count = [&](const std::string& text) {
    std::size_t n = 0;
    for (auto at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("dblog apply: warning: target column " + items +
                  ".amount is integer, the source's is numeric(10,2): it cannot hold every value"
                  " of the source's type; values are rounded, truncated or refused as"
                  " PostgreSQL's assignment cast does (--allow-lossy-columns)"),
            1u)
      << log;
  EXPECT_EQ(count("warning: target column " + items +
                  ".at is timestamp without time zone, the source's is timestamp with time zone"),
            1u)
      << log;
  EXPECT_EQ(count("warning:"), 2u) << log;
  EXPECT_EQ(log.find("error"), std::string::npos) << log;
}

// dblogd killed in the middle of a bootstrap: the next one is flagged restarted, and the
// applier clears what the first attempt applied (and a stray row) before converging. The
// applier keeps running through it: it retries until dblogd is back.
TEST_F(ApplyE2eTest, RestartedBootstrapClearsTheTargetAndConverges) {
  db().exec("CREATE TABLE " + T("big") + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + T("big") +
            " SELECT g, repeat('v', 50) FROM generate_series(1, 300000) g");
  StartDblogd({"--max-buffer-mb=1"});
  StartApply({"--create-tables", "--batch-rows=500", "--retry-max=1"});
  // some bootstrap batches are committed in the target
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (StoredPosition().empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  ASSERT_FALSE(StoredPosition().empty()) << apply_->log();
  dblogd_->Signal(SIGKILL);
  dblogd_->Wait();
  // the applier noticed, rolled back its open batch and waits for dblogd
  ASSERT_TRUE(apply_->WaitForLog("cannot connect to dblogd", 30s)) << apply_->log();
  EXPECT_FALSE(apply_->Exited()) << apply_->log();
  const long partial = std::stol(target().scalar("SELECT count(*) FROM " + T("big")));
  EXPECT_GT(partial, 0);
  EXPECT_LT(partial, 300000);
  target().exec("INSERT INTO " + T("big") + " VALUES (-1, 'stray')");
  db().exec("UPDATE " + T("big") + " SET v = 'changed' WHERE id % 1000 = 0");
  db().exec("DELETE FROM " + T("big") + " WHERE id % 777 = 0");

  dblogd_->Start();
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 120s)) << apply_->log();
  WaitApplied(Sentinel());
  ExpectSameTable("big");
  const std::string log = apply_->log();
  EXPECT_NE(log.find("(restarted)"), std::string::npos) << log;
  EXPECT_NE(
      log.find("an earlier bootstrap did not finish: clearing 1 target tables (" + T("big") + ")"),
      std::string::npos)
      << log;
  EXPECT_EQ(target().scalar("SELECT count(*) FROM " + T("big") + " WHERE id = -1"), "0");
}

// A bootstrap is a complete image of BootstrapBegin.tables whatever `restarted` says: here the
// source forgot the consumer (its slot and its row in dblog.consumers are gone), so the new
// bootstrap has restarted = false, while the target holds rows from the earlier stream,
// some of which the source deleted meanwhile (no stream carries those deletes). The applier
// clears what the consumer wrote before applying the image.
TEST_F(ApplyE2eTest, BootstrapOfAConsumerTheSourceForgotStillClearsTheTarget) {
  db().exec("CREATE TABLE " + T("items") + " (id int PRIMARY KEY, v text)");
  db().exec("INSERT INTO " + T("items") + " SELECT g, 'v' || g FROM generate_series(1, 100) g");
  StartDblogd();
  ASSERT_NO_FATAL_FAILURE(ApplyBootstrapThenStop());
  for (int i = 0; i < 100; ++i) {
    try {
      db().exec("SELECT pg_drop_replication_slot('" + Slot() + "')");
      break;
    } catch (const PgError&) {
      std::this_thread::sleep_for(100ms);
    }
  }
  db().exec("DELETE FROM dblog.consumers WHERE name = '" + consumer() + "'");
  db().exec("DELETE FROM " + T("items") + " WHERE id % 3 = 0");
  db().exec("UPDATE " + T("items") + " SET v = 'changed' WHERE id % 5 = 0");
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
  ExpectSameTable("items");
  const std::string log = apply_->log();
  EXPECT_EQ(log.find("(restarted)"), std::string::npos) << log;
  EXPECT_NE(log.find("this consumer applied here before: clearing 2 target tables"),
            std::string::npos)
      << log;
}

// The source orders a text key with ICU's root collation ('a' < 'B'), the target table (created
// by --create-tables in a C-locale database) with C ('B' < 'a'). A whole-table repair in
// chunks of one row converges only when the range deletions compare keys as the source does
// (ChunkBegin.key_collations): in C order a later chunk's range would hold rows an earlier
// chunk had just repaired, and delete them.
TEST_F(ApplyE2eTest, RangeRepairsCompareTextKeysInTheSourcesCollation) {
  db().exec("CREATE TABLE " + T("words") + " (w text COLLATE \"und-x-icu\" PRIMARY KEY, n int)");
  db().exec("INSERT INTO " + T("words") +
            " VALUES ('a', 1), ('B', 2), ('c', 3), ('D', 4), ('e', 5), ('F', 6)");
  StartDblogd({"--chunk-size=1"});
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
  // damage: a row the source never had, a lost row
  target().exec("INSERT INTO " + T("words") + " VALUES ('b', -1); DELETE FROM " + T("words") +
                " WHERE w = 'D'");
  const std::string id = db().scalar("SELECT dblog.repair('" + T("words") + "')");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (db().scalar("SELECT state FROM dblog.requests WHERE id = " + id) != "done") {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << apply_->log();
    std::this_thread::sleep_for(50ms);
  }
  WaitApplied(Sentinel());
  ExpectSameTable("words");
  EXPECT_EQ(target().scalar("SELECT count(*) FROM pg_collation WHERE collname = 'icu:und'"), "1");
}

// ---- keeping running (issue 13, 4): losses of dblogd and of the target ------------------

// A source with a counter and one event row per increment (every transaction: counter n + 1,
// event n), and the same tables in the target with an audit trigger: every row the applier
// inserts or updates in `events` is logged. Event rows are written once at the source, so a
// transaction applied twice leaves an event logged twice.
class ApplyKeepsRunningTest : public ApplyE2eTest {
 protected:
  void CreateTables() {
    for (PgConn* side : {&db(), &target()}) {
      if (side == &target()) side->exec("CREATE SCHEMA IF NOT EXISTS " + schema());
      side->exec("CREATE TABLE IF NOT EXISTS " + T("counter") + " (id int PRIMARY KEY, n bigint)");
      side->exec("CREATE TABLE IF NOT EXISTS " + T("events") +
                 " (n bigint PRIMARY KEY, at timestamptz)");
      side->exec("CREATE TABLE IF NOT EXISTS " + T("big") + " (id bigint PRIMARY KEY, v text)");
    }
    db().exec("INSERT INTO " + T("counter") + " VALUES (1, 0)");
    target().exec("CREATE TABLE " + T("audit") + " (n bigint, op text)");
    target().exec("CREATE FUNCTION " + T("log_event") +
                  "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO " + T("audit") +
                  " VALUES (NEW.n, TG_OP); RETURN NULL; END $$");
    target().exec("CREATE TRIGGER audit AFTER INSERT OR UPDATE ON " + T("events") +
                  " FOR EACH ROW EXECUTE FUNCTION " + T("log_event") + "()");
  }
  // Increments until stopped, one transaction each.
  void StartWriter() {
    writer_ = std::thread([this] {
      PgConn w(conninfo());
      while (!stop_)
        w.exec("WITH c AS (UPDATE " + T("counter") +
               " SET n = n + 1 WHERE id = 1 RETURNING n)"
               " INSERT INTO " +
               T("events") + " SELECT n, now() FROM c");
    });
  }
  void StopWriter() {
    stop_ = true;
    if (writer_.joinable()) writer_.join();
  }
  void TearDown() override {
    StopWriter();
    ApplyE2eTest::TearDown();
  }
  long TargetEvents() {
    try {
      return std::stol(target().scalar("SELECT count(*) FROM " + T("events")));
    } catch (const PgError&) {
      return 0;
    }
  }
  // Waits until the target has at least `n` events (the applier is applying).
  void WaitForEvents(long n) {
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (TargetEvents() < n) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "the target did not get " << n << " events\n"
          << apply_->log();
      ASSERT_FALSE(apply_->Exited()) << apply_->log();
      std::this_thread::sleep_for(20ms);
    }
  }
  void WaitForSourceEvents(long n) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::stol(db().scalar("SELECT count(*) FROM " + T("events"))) < n) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline);
      std::this_thread::sleep_for(20ms);
    }
  }
  // dblogd recorded the bootstrap as done (acknowledged): a loss from now on does not redo it.
  void WaitForBootstrapDone() {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (db().scalar("SELECT coalesce(max(bootstrap_state), '') FROM dblog.consumers WHERE "
                       "name = '" +
                       consumer() + "'") != "done") {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << apply_->log();
      std::this_thread::sleep_for(20ms);
    }
  }
  // The outcome: the target equals the source, no increment is missing, and no event was
  // applied twice.
  void ExpectEverythingOnce() {
    WaitApplied(Sentinel());
    ExpectSameTable("counter");
    ExpectSameTable("events");
    ExpectSameTable("big");
    EXPECT_EQ(target().scalar("SELECT count(*) = max(n) FROM " + T("events")), "t");
    EXPECT_EQ(target().scalar("SELECT count(*) || ' ' || count(DISTINCT n) FROM " + T("audit")),
              target().scalar("SELECT count(*) || ' ' || count(*) FROM " + T("events")))
        << "events applied more than once: "
        << target().scalar(
               "SELECT string_agg(n || ' x' || c, ', ') FROM (SELECT n, count(*) c"
               " FROM " +
               T("audit") + " GROUP BY n HAVING count(*) > 1 LIMIT 10) d");
    EXPECT_EQ(target().scalar("SELECT count(*) FROM " + T("audit") + " WHERE op <> 'INSERT'"), "0");
  }
  int Count(const std::string& text) {
    const std::string log = apply_->log();
    int n = 0;
    for (auto at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
    return n;
  }

  std::atomic<bool> stop_{false};
  std::thread writer_;
};

// (1) dblog apply started before dblogd: it retries, logging why, until dblogd is up, then
// bootstraps and applies everything.
TEST_F(ApplyKeepsRunningTest, StartedBeforeDblogdAppliesEverythingOnceItIsUp) {
  CreateTables();
  CreateDblogd();
  StartApply({"--create-tables", "--retry-min=0.05", "--retry-max=0.5"});
  ASSERT_TRUE(apply_->WaitForLog("(attempt 3)", 60s)) << apply_->log();
  EXPECT_NE(
      apply_->log().find("dblog apply: cannot connect to dblogd at 127.0.0.1:" +
                         std::to_string(dblogd_->port()) + ": Connection refused; retrying in "),
      std::string::npos)
      << apply_->log();
  StartWriter();  // changes while dblogd is down: the bootstrap copies them
  WaitForSourceEvents(100);
  dblogd_->Start();
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 120s)) << apply_->log();
  WaitForEvents(TargetEvents() + 100);  // and live changes after it
  StopWriter();
  ExpectEverythingOnce();
  EXPECT_FALSE(apply_->Exited()) << apply_->log();
}

// (2) dblogd SIGKILLed and restarted while a workload runs (once while a 150 000-row
// transaction is being applied), and the target's session killed: the applier reconnects each
// time and resumes from the position stored in the target. At the end the target equals the
// source and no transaction was applied twice.
TEST_F(ApplyKeepsRunningTest, DblogdAndTargetLossesUnderLoadApplyEverythingOnce) {
  CreateTables();
  StartDblogd();
  StartApply({"--create-tables", "--retry-min=0.05", "--retry-max=0.5"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
  WaitForBootstrapDone();  // a bootstrap redone would truncate the target (and not the audit)
  db().exec("INSERT INTO " + T("big") +
            " SELECT g, repeat('b', 40) FROM generate_series(1, 150000) g");
  {
    // the applier is inside a target transaction (most likely the big one): kill dblogd then
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (target().scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                           "'dblog apply " +
                           consumer() + "' AND backend_xid IS NOT NULL") == "0" &&
           target().scalar("SELECT count(*) FROM " + T("big")) == "0") {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << apply_->log();
      std::this_thread::sleep_for(5ms);
    }
    dblogd_->Signal(SIGKILL);
    dblogd_->Wait();
    dblogd_->Start();
  }
  StartWriter();
  for (int round = 0; round < 4; ++round) {
    // Applying, and caught up with what the source had: otherwise the events still buffered
    // from a killed dblogd can be 200 and more, and the next loss ends the session before it
    // ever reads the end of the killed one (a loss then goes unnoticed, and unlogged).
    const long source = std::stol(db().scalar("SELECT count(*) FROM " + T("events")));
    WaitForEvents(std::max(TargetEvents() + 200, source));
    if (round % 2 == 0) {
      dblogd_->Signal(SIGKILL);
      dblogd_->Wait();
      dblogd_->Start();
    } else {
      // the target ends the applier's session (as a restart or a failover would)
      target().exec(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
          " WHERE application_name = 'dblog apply " +
          consumer() + "'");
    }
  }
  WaitForEvents(TargetEvents() + 200);  // applying again after the last loss
  StopWriter();
  ExpectEverythingOnce();
  EXPECT_FALSE(apply_->Exited()) << apply_->log();
  // each loss was logged with its reason, and each reconnection resumed from the target
  EXPECT_GE(Count("; retrying in "), 4) << apply_->log();
  EXPECT_GE(Count("resuming after "), 4) << apply_->log();
  EXPECT_NE(apply_->log().find("terminating connection due to administrator command"),
            std::string::npos)
      << apply_->log();
}

// (3) --once: the first loss ends the run, with status 1 and the reason.
TEST_F(ApplyKeepsRunningTest, OnceExitsAtTheFirstLoss) {
  CreateTables();
  StartDblogd();
  StartApply({"--once"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
  dblogd_->Stop();  // SIGTERM: consumers get SHUTTING_DOWN
  auto status = apply_->Wait(30s);
  ASSERT_TRUE(status) << apply_->log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << apply_->log();
  EXPECT_NE(apply_->log().find("dblog apply: error: dblogd refused: SHUTTING_DOWN"),
            std::string::npos)
      << apply_->log();
  EXPECT_EQ(apply_->log().find("; retrying in"), std::string::npos) << apply_->log();
  // and with dblogd not up at all
  StartApply({"--once"});
  status = apply_->Wait(30s);
  ASSERT_TRUE(status) << apply_->log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << apply_->log();
  EXPECT_NE(apply_->log().find("dblog apply: error: cannot connect to dblogd"), std::string::npos)
      << apply_->log();
}

// (4) Errors retrying cannot fix end the run at once, without --once: a refused token, a
// target database that does not exist.
TEST_F(ApplyKeepsRunningTest, ErrorsRetryingCannotFixExitAtOnce) {
  CreateTables();
  const std::string token_file = ::testing::TempDir() + "dblog_apply_token_" + consumer();
  std::ofstream(token_file) << "the-right-token\n";
  StartDblogd({"--consumer-token-file=" + consumer() + "=" + token_file});
  StartApply({"--token", "a-wrong-token"});
  auto status = apply_->Wait(30s);
  ASSERT_TRUE(status) << "dblog apply keeps retrying a refused token:\n" << apply_->log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << apply_->log();
  EXPECT_NE(apply_->log().find("dblog apply: error: dblogd refused: AUTH_FAILED"),
            std::string::npos)
      << apply_->log();
  EXPECT_EQ(apply_->log().find("; retrying in"), std::string::npos) << apply_->log();

  apply_ = std::make_unique<ApplyProcess>(std::vector<std::string>{
      "--consumer", consumer(), "--port", std::to_string(dblogd_->port()), "--token-file",
      token_file, "--target", conninfo() + " dbname=" + target_db_ + "_missing"});
  apply_->Start();
  status = apply_->Wait(30s);
  ASSERT_TRUE(status) << "dblog apply keeps retrying a missing database:\n" << apply_->log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 1) << apply_->log();
  EXPECT_NE(apply_->log().find("dblog apply: error: cannot connect to the target"),
            std::string::npos)
      << apply_->log();
  EXPECT_NE(apply_->log().find("does not exist"), std::string::npos) << apply_->log();
  std::remove(token_file.c_str());
}

// Repairs end to end: a target damaged on purpose (rows lost, changed, invented inside and
// outside the source's key range) converges through whole-table, range and key repairs while
// the source is being written. Range chunks delete what the source lacks; key chunks send
// absent keys as deletes.
TEST_F(ApplyE2eTest, RepairsConvergeADamagedTarget) {
  db().exec("CREATE TABLE " + T("acct") + " (id bigint PRIMARY KEY, n int, v text)");
  db().exec("CREATE TABLE " + T("pairs") + " (k1 text, k2 int, v int, PRIMARY KEY (k1, k2))");
  db().exec("INSERT INTO " + T("acct") + " SELECT g, 0, 'v' || g FROM generate_series(1, 3000) g");
  db().exec("INSERT INTO " + T("pairs") +
            " SELECT 'k' || (g % 20), g, g FROM generate_series(1, 2000) g");
  StartDblogd({"--chunk-size=250"});
  ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
  target().exec("DELETE FROM " + T("acct") +
                " WHERE id % 7 = 0;"
                " UPDATE " +
                T("acct") +
                " SET v = 'damaged' WHERE id % 11 = 0;"
                " INSERT INTO " +
                T("acct") +
                " SELECT g, -1, 'invented' FROM generate_series(5000, 5100) g;"
                " INSERT INTO " +
                T("acct") +
                " VALUES (-7, -1, 'below'), (1500000, -1, 'above');"
                " DELETE FROM " +
                T("pairs") +
                " WHERE k2 % 5 = 0;"
                " INSERT INTO " +
                T("pairs") + " VALUES ('k3', 100000, 0), ('a', 1, 0), ('zz', 1, 0)");

  std::atomic<bool> stop{false};
  std::thread writer([&] {
    PgConn w(conninfo());
    std::mt19937 rng(11);
    while (!stop) {
      const int id = static_cast<int>(rng() % 3500) + 1;
      const std::string t = T("acct"), i = std::to_string(id);
      try {
        switch (rng() % 4) {
          case 0:
            w.exec("UPDATE " + t + " SET n = n + 1 WHERE id = " + i);
            break;
          case 1:
            w.exec("DELETE FROM " + t + " WHERE id = " + i);
            break;
          case 2:
            w.exec("INSERT INTO " + t + " VALUES (" + i +
                   ", 1, 'new') ON CONFLICT (id) DO "
                   "UPDATE SET v = 'upserted'");
            break;
          case 3:
            w.exec("UPDATE " + t + " SET id = id + 5000 WHERE id = " + i);
            break;
        }
      } catch (const PgError&) {
        // a key move onto an existing key: the source refused it
      }
    }
  });
  JoinOnExit join_writer{stop, writer};
  const auto request = [&](const std::string& call) { return db().scalar("SELECT " + call); };
  const std::string acct = "'" + T("acct") + "'", pairs = "'" + T("pairs") + "'";
  const std::vector<std::string> ids = {
      request("dblog.repair(" + acct + ")"),
      request("dblog.repair_range(" + acct + ", '{\"id\": 100}', '{\"id\": 900}')"),
      request("dblog.repair_keys(" + acct + ", '[{\"id\": 14}, {\"id\": 99999}]')"),
      request("dblog.repair(" + pairs + ")")};
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  std::string states;
  while (std::chrono::steady_clock::now() < deadline) {
    states =
        db().scalar("SELECT string_agg(state, ',' ORDER BY id) FROM dblog.requests WHERE id IN (" +
                    ids[0] + "," + ids[1] + "," + ids[2] + "," + ids[3] + ")");
    if (states == "done,done,done,done") break;
    if (apply_->Exited()) break;
    std::this_thread::sleep_for(100ms);
  }
  stop = true;
  writer.join();
  ASSERT_EQ(states, "done,done,done,done") << apply_->log();
  WaitApplied(Sentinel());
  ExpectSameTable("acct");
  ExpectSameTable("pairs");
  EXPECT_NE(apply_->log().find("that the source does not have"), std::string::npos)
      << apply_->log();
}

// One source transaction far larger than the applier's batches: it streams into one open
// target transaction without being held in memory, and commits once.
TEST_F(ApplyE2eTest, LargeTransactionStreamsInBoundedMemory) {
  db().exec("CREATE TABLE " + T("wide") + " (id int PRIMARY KEY, v text)");
  StartDblogd({"--bootstrap=false"});
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("connected to dblogd", 20s)) << apply_->log();
  db().exec("INSERT INTO " + T("wide") +
            " SELECT g, repeat(md5(g::text), 6) FROM "
            "generate_series(1, 500000) g");  // ~100 MB of row text
  db().exec("UPDATE " + T("wide") + " SET v = 'u' WHERE id % 3 = 0");
  WaitApplied(Sentinel(), 300s);
  const long peak_kb = apply_->PeakRssKb();
  ExpectSameTable("wide");
  std::cout << "dblog apply peak RSS after a 500k-row transaction: " << peak_kb / 1024 << " MiB\n";
  EXPECT_GT(peak_kb, 0);
  EXPECT_LT(peak_kb, 64 * 1024) << "the applier seems to hold the transaction in memory";
}

// Issue 13, item 1: `dblog apply` into a database of the same cluster is inside a target
// transaction for a large source transaction when a new consumer connects. The new slot waits
// for every transaction with an xid, the applier's included; the applier waits for dblogd's
// stream. With all consumers on one thread, dblogd's thread waited for the slot: a deadlock
// that never ended. Now the new consumer's slot waits on its own, the applier finishes, and
// then the slot is created.
TEST_F(ApplyE2eTest, ANewConsumerWhileTheApplierHoldsATransactionDoesNotDeadlock) {
  db().exec("CREATE TABLE " + T("big") + " (id int PRIMARY KEY, v text)");
  const std::string other = consumer() + "_b";
  db().exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE slot_name = 'dblog_" + other + "'");
  db().exec("DELETE FROM dblog.consumers WHERE name = '" + other + "'");
  StartDblogd({"--consumer=" + consumer() + "=" + schema() + ".*",
               "--consumer=" + other + "=" + schema() + ".*"});
  StartApply({"--create-tables"});
  WaitApplied(Sentinel());
  std::thread insert([this] {
    PgConn source(conninfo());
    source.exec("INSERT INTO " + T("big") +
                " SELECT g, md5(g::text) FROM generate_series(1, 300000) g");
  });
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join{insert};
  // The applier's target backend holds an xid: it is applying the large transaction.
  PgConn probe(conninfo());
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  bool applying = false;
  while (!applying && std::chrono::steady_clock::now() < deadline) {
    applying = probe.scalar("SELECT count(*) > 0 FROM pg_stat_activity WHERE datname = '" +
                            target_db_ + "' AND backend_xid IS NOT NULL") == "t";
    if (!applying) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(applying) << "the applier never opened its target transaction";
  client::ConnectOptions o;
  o.port = dblogd_->port();
  o.consumer = other;
  o.connect_timeout = 10s;
  o.io_timeout = 30s;
  int waits = 0;
  o.on_slot_wait = [&](const dblog::v1::Progress&) { ++waits; };
  client::Client b = client::Client::Connect(o);  // waits as long as the slot does
  insert.join();
  WaitApplied(Sentinel(), 180s);
  ExpectSameTable("big");
  Replay replay;
  ReadUntil(b, replay, 0);  // b's bootstrap, from the slot's snapshot
  ReadUntil(b, replay, Sentinel());
  ExpectConverged(replay, {"big"});
  std::cout << "the new consumer's slot waited for the applier: " << waits
            << " creating_slot reports\n";
}

// The binary's exit codes without any server: 2 for a bad command line (a --target libpq
// cannot parse included), 1 for an unreachable target with --once (one line), 0 for --help.
TEST(ApplyCli, ExitCodes) {
  const auto run = [](const std::string& args, std::string* err) {
    char tmpl[] = "/tmp/dblog-apply-cli-XXXXXX";
    const int fd = mkstemp(tmpl);
    close(fd);
    const int status =
        std::system((std::string(DBLOG_PATH) + " apply " + args + " >/dev/null 2>" + tmpl).c_str());
    std::ifstream in(tmpl);
    std::stringstream ss;
    ss << in.rdbuf();
    *err = ss.str();
    unlink(tmpl);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string err;
  EXPECT_EQ(run("--consumer c1", &err), 2);
  EXPECT_NE(err.find("--target is required"), std::string::npos) << err;
  EXPECT_NE(err.find("Try 'dblog apply --help'."), std::string::npos) << err;
  EXPECT_EQ(run("--consumer c1 --target x --batch-rows 0", &err), 2);
  EXPECT_EQ(run("--consumer c1 --target 'host=h bogus=1'", &err), 2);
  EXPECT_NE(err.find("invalid --target: invalid connection option \"bogus\""), std::string::npos)
      << err;
  EXPECT_EQ(run("--consumer c1 --target 'port=5432 host'", &err), 2);
  EXPECT_EQ(run("--consumer c1 --retry-min 0 --target x", &err), 2);
  EXPECT_EQ(run("--help", &err), 0);
  EXPECT_EQ(run("--consumer c1 --target 'host=127.0.0.1 port=1 connect_timeout=2' --once", &err),
            1);
  EXPECT_EQ(err.rfind("dblog apply: error: cannot connect to the target", 0), 0u) << err;
  // Without --once an unreachable target is retried (each attempt logged) until stopped.
  {
    char tmpl[] = "/tmp/dblog-apply-cli-XXXXXX";
    close(mkstemp(tmpl));
    const int status = std::system(
        (std::string(DBLOG_PATH) +
         " apply --consumer c1 --target 'host=127.0.0.1 port=1 connect_timeout=2' --retry-min "
         "0.01 --retry-max 0.02 >/dev/null 2>" +
         tmpl + " & pid=$!; sleep 1; kill -TERM $pid; wait $pid")
            .c_str());
    std::ifstream in(tmpl);
    std::stringstream ss;
    ss << in.rdbuf();
    err = ss.str();
    unlink(tmpl);
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0) << err;
  }
  EXPECT_EQ(err.rfind("dblog apply: cannot connect to the target: ", 0), 0u) << err;
  EXPECT_NE(err.find("; retrying in 0.0"), std::string::npos) << err;
  EXPECT_NE(err.find("(attempt 3)"), std::string::npos) << err;
  EXPECT_NE(err.find("dblog apply: stopped by signal"), std::string::npos) << err;
}

// ---- rates (DBLOG_APPLY_BENCH=1) -----------------------------------------------------------

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

class ApplyBench : public ApplyE2eTest {
 protected:
  void SetUp() override {
    if (!std::getenv("DBLOG_APPLY_BENCH")) GTEST_SKIP() << "set DBLOG_APPLY_BENCH=1 to measure";
    ApplyE2eTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    DropReaderSlot();
  }
  void TearDown() override {
    if (!IsSkipped()) DropReaderSlot();
    ApplyE2eTest::TearDown();
  }
  // A second consumer (accepted through --default-scope) that only reads and acknowledges:
  // what dblogd alone delivers, for comparison.
  std::string Reader() { return consumer() + "_r"; }
  void DropReaderSlot() {
    for (int i = 0; i < 50; ++i) {
      try {
        db().exec(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE slot_name = 'dblog_" +
            Reader() + "'");
        db().exec("DELETE FROM dblog.consumers WHERE name = '" + Reader() + "'");
        return;
      } catch (const PgError&) {
        std::this_thread::sleep_for(100ms);  // still active for a moment
      }
    }
  }
};

TEST_F(ApplyBench, BootstrapOfAMillionRows) {
  db().exec("CREATE TABLE " + T("m") +
            " (id bigint PRIMARY KEY, n int, name text, at timestamptz)");
  db().exec("INSERT INTO " + T("m") +
            " SELECT g, g % 1000, 'name ' || g, now() FROM "
            "generate_series(1, 1000000) g");
  db().exec("VACUUM ANALYZE " + T("m"));
  const std::string reader = Reader();
  StartDblogd({"--default-scope=" + schema() + ".*"});
  {
    // dblogd alone: a consumer that reads and acknowledges only
    const auto start = std::chrono::steady_clock::now();
    client::Client c = Connect(std::nullopt, reader);
    Replay replay;
    ReadUntil(c, replay, 0, 600s);
    const double s = Seconds(start);
    std::cout << "dblogd bootstrap to a reading consumer: 1000000 rows in " << s
              << " s = " << 1000000 / s << " rows/s\n";
  }
  const auto start = std::chrono::steady_clock::now();
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 600s)) << apply_->log();
  WaitApplied(Sentinel(), 600s);
  const double s = Seconds(start);
  std::cout << "dblog apply bootstrap: 1000000 rows in " << s << " s = " << 1000000 / s
            << " rows/s (start to target committed)\n"
            << apply_->log();
  ExpectSameTable("m");
}

TEST_F(ApplyBench, HundredThousandSmallTransactions) {
  db().exec("CREATE TABLE " + T("s") + " (id bigint PRIMARY KEY, n int, name text)");
  db().exec("INSERT INTO " + T("s") + " SELECT g, 0, 'x' FROM generate_series(1, 1000) g");
  const std::string reader = Reader();
  StartDblogd({"--bootstrap=false", "--default-scope=" + schema() + ".*"});
  // both slots exist before the load; the applier creates its tables and stops
  { client::Client c = Connect(std::nullopt, reader); }
  StartApply({"--create-tables"});
  ASSERT_TRUE(apply_->WaitForLog("connected to dblogd", 20s)) << apply_->log();
  WaitApplied(Sentinel());
  apply_->Signal(SIGTERM);
  apply_->Wait();
  const auto gen = std::chrono::steady_clock::now();
  db().exec(
      "DO $$ BEGIN FOR i IN 1..100000 LOOP"
      " IF i % 3 = 0 THEN UPDATE " +
      T("s") +
      " SET n = n + 1 WHERE id = i % 1000 + 1;"
      " ELSE INSERT INTO " +
      T("s") +
      " VALUES (i + 1000, i, 'n' || i); END IF;"
      " COMMIT; END LOOP; END $$");
  const std::uint64_t until = Sentinel();
  std::cout << "generated 100000 transactions in " << Seconds(gen) << " s\n";
  {
    const auto start = std::chrono::steady_clock::now();
    client::Client c = Connect(std::nullopt, reader);
    Replay replay;
    ReadUntil(c, replay, until, 600s);
    const double s = Seconds(start);
    std::cout << "dblogd to a reading consumer: 100000 transactions in " << s
              << " s = " << 100000 / s << " txn/s\n";
  }
  const auto start = std::chrono::steady_clock::now();
  StartApply({"--create-tables"});
  WaitApplied(until, 600s);
  const double s = Seconds(start);
  std::cout << "dblog apply: 100000 transactions in " << s << " s = " << 100000 / s
            << " txn/s (rows/s alike: one row each)\n";
  ExpectSameTable("s");
}

}  // namespace
}  // namespace dblog::test
