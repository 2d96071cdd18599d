// tests/cpp/pg/pg_fixture.h: the fixture the sidecar/pg database tests share: a SQL
// connection to DBLOG_TEST_CONNINFO (skip when unset), names unique to the running test, and
// cleanup of the slots, schemas and roles a test made, also when it fails half-way.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pg/connection.h"

namespace dblog::pg::test {

using Options = std::vector<std::pair<std::string, std::string>>;

class PgTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  const std::string& conninfo() const { return conninfo_; }
  Connection& sql() { return *sql_; }

  Connection OpenSql(const Options& overrides = {});
  Connection OpenReplication(const Options& overrides = {});

  // A name for this test's object: "pgt_<suite>_<test>[_suffix]" lower-cased to [a-z0-9_], at
  // most 63 bytes (40 for schemas; a hash keeps shortened names unique). Registered for
  // cleanup in TearDown.
  std::string SlotName(const std::string& suffix = "");
  std::string Schema(const std::string& suffix = "");  // also created
  std::string Role(const std::string& suffix = "");    // not created

  bool IsSuperuser();

  // Polls `done` every 20 ms until it is true or `timeout` passes; returns its last value.
  static bool WaitFor(const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  std::string UniqueName(const std::string& kind, const std::string& suffix,
                         std::size_t max_len = 63);

  std::string conninfo_;
  std::optional<Connection> sql_;
  std::vector<std::string> slots_, schemas_, roles_;
};

}  // namespace dblog::pg::test
