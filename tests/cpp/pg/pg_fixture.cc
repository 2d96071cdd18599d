// tests/cpp/pg/pg_fixture.cc: the shared database fixture of the sidecar/pg tests.
#include "pg_fixture.h"

#include <cctype>
#include <cstdio>
#include <functional>
#include <thread>

#include "pg/slot.h"
#include "pg_test_util.h"

namespace dblog::pg::test {

void PgTest::SetUp() {
  auto conninfo = dblog::test::test_conninfo();
  if (!conninfo)
    GTEST_SKIP() << "DBLOG_TEST_CONNINFO is not set; tests/run.sh sets it for a throwaway cluster";
  conninfo_ = *conninfo;
  sql_.emplace(OpenSql());
}

void PgTest::TearDown() {
  if (!sql_) return;
  for (const auto& slot : slots_) {
    // A walsender that was just told to stop may still hold the slot for a moment.
    bool dropped = WaitFor([&] {
      try {
        DropSlot(sql(), slot, /*missing_ok=*/true);
        return true;
      } catch (const Error& e) {
        if (e.sqlstate() != "55006") throw;
        return false;
      }
    });
    EXPECT_TRUE(dropped) << "slot " << slot << " stayed active";
  }
  for (const auto& schema : schemas_) sql().Exec("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
  for (const auto& role : roles_) sql().Exec("DROP ROLE IF EXISTS " + role);
}

Connection PgTest::OpenSql(const Options& overrides) {
  return Connection::Open(conninfo_, false, overrides);
}

Connection PgTest::OpenReplication(const Options& overrides) {
  return Connection::Open(conninfo_, true, overrides);
}

std::string PgTest::UniqueName(const std::string& kind, const std::string& suffix,
                               std::size_t max_len) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = kind + "_" + info->test_suite_name() + "_" + info->name();
  if (!suffix.empty()) name += "_" + suffix;
  for (char& c : name) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  if (name.size() > max_len) {
    char hash[10];
    std::snprintf(hash, sizeof hash, "_%08x",
                  static_cast<unsigned>(std::hash<std::string>{}(name)&0xffffffffu));
    name = name.substr(0, max_len - 9) + hash;
  }
  return name;
}

std::string PgTest::SlotName(const std::string& suffix) {
  std::string name = UniqueName("pgt", suffix);
  DropSlot(sql(), name, /*missing_ok=*/true);  // left over by an aborted earlier run
  slots_.push_back(name);
  return name;
}

std::string PgTest::Schema(const std::string& suffix) {
  // Short: the plugin's include_tables splits "schema.*" as one identifier, which PostgreSQL
  // truncates to 63 bytes.
  std::string name = UniqueName("pgt", suffix, 40);
  sql().Exec("DROP SCHEMA IF EXISTS " + name + " CASCADE; CREATE SCHEMA " + name);
  schemas_.push_back(name);
  return name;
}

std::string PgTest::Role(const std::string& suffix) {
  std::string name = UniqueName("pgt_role", suffix);
  sql().Exec("DROP ROLE IF EXISTS " + name);
  roles_.push_back(name);
  return name;
}

bool PgTest::IsSuperuser() {
  return sql().Exec("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").value(0, 0) ==
         "t";
}

bool PgTest::WaitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace dblog::pg::test
