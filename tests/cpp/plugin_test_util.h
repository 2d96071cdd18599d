// tests/cpp/plugin_test_util.h: a GoogleTest fixture that gives each test its own schema and
// dblog replication slot, and reads the slot through the plugin's binary path
// (pg_logical_slot_get_binary_changes), parsing every message as a dblog.v1.Batch.
//
// Only transactions that touch the test's own schema are returned, so tests may run in
// parallel against one database.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "dblog/v1/change.pb.h"
#include "pg_test_util.h"

namespace dblog::test {

// One event as decoded, plus, for a Change with a new_row, the new_row's bytes exactly as the
// plugin wrote them (not re-encoded by the C++ protobuf library).
struct DecodedEvent {
  dblog::v1::Event event;
  std::optional<std::string> raw_new_row;
};

// Events from a Begin through its Commit.
struct Transaction {
  std::vector<DecodedEvent> events;

  const dblog::v1::Begin& begin() const { return events.front().event.begin(); }
  const dblog::v1::Commit& commit() const { return events.back().event.commit(); }
  std::vector<dblog::v1::Change> changes() const;
  std::vector<dblog::v1::Relation> relations() const;
};

// The raw bytes of each Change.new_row in a serialized Batch, one entry per event (nullopt for
// events that are not a Change with a new_row). Throws std::runtime_error on malformed input.
std::vector<std::optional<std::string>> raw_new_rows(const std::string& batch);

// gtest helper: equal byte strings, or a failure naming sizes and the first difference.
::testing::AssertionResult BytesEqual(const std::string& expected, const std::string& actual);

class DblogSlotTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  PgConn& db() { return *db_; }
  const std::string& schema() const { return name_; }
  const std::string& slot() const { return name_; }

  // Consumes everything pending on the slot in one decoding session, with options
  // 'format' 'binary' plus `extra_options` (name, value pairs). Checks on the way that every
  // message parses as a Batch, is canonically encoded, and that a Commit ends its Batch.
  std::vector<Transaction> decode(const std::vector<std::string>& extra_options = {});

 private:
  std::optional<PgConn> db_;
  std::string name_;  // slot and schema name, derived from the test's name
  bool slot_created_ = false;
};

}  // namespace dblog::test
