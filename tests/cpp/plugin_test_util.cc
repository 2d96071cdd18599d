// tests/cpp/plugin_test_util.cc: the per-test slot fixture and Batch decoding helpers declared
// in plugin_test_util.h.
#include "plugin_test_util.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>
#include <stdexcept>

namespace dblog::test {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Slot and schema names: lower-case [a-z0-9_], at most NAMEDATALEN-1 bytes.
std::string name_for_current_test() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string("cpp_") + info->test_suite_name() + "_" + info->name();
  for (char& c : name) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name.substr(0, 63);
}

// Calls on_field(number, payload) for every length-delimited field of a message and skips the
// rest.
template <typename F>
void for_each_len_field(const std::string& msg, F on_field) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(msg.data()), static_cast<int>(msg.size()));
  while (uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      uint32_t len = 0;
      std::string payload;
      if (!in.ReadVarint32(&len) || !in.ReadString(&payload, static_cast<int>(len)))
        throw std::runtime_error("truncated length-delimited field");
      on_field(WireFormatLite::GetTagFieldNumber(tag), payload);
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      throw std::runtime_error("malformed field");
    }
  }
  if (!in.ConsumedEntireMessage()) throw std::runtime_error("malformed message");
}

std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace

std::vector<dblog::v1::Change> Transaction::changes() const {
  std::vector<dblog::v1::Change> out;
  for (const auto& e : events)
    if (e.event.has_change()) out.push_back(e.event.change());
  return out;
}

std::vector<dblog::v1::Relation> Transaction::relations() const {
  std::vector<dblog::v1::Relation> out;
  for (const auto& e : events)
    if (e.event.has_relation()) out.push_back(e.event.relation());
  return out;
}

std::vector<std::optional<std::string>> raw_new_rows(const std::string& batch) {
  constexpr int kBatchEvents = 1, kEventChange = 3, kChangeNewRow = 8;
  std::vector<std::optional<std::string>> out;
  for_each_len_field(batch, [&](int field, const std::string& event) {
    if (field != kBatchEvents) return;
    std::optional<std::string> new_row;
    for_each_len_field(event, [&](int f, const std::string& change) {
      if (f != kEventChange) return;
      for_each_len_field(change, [&](int g, const std::string& row) {
        if (g == kChangeNewRow) new_row = row;
      });
    });
    out.push_back(std::move(new_row));
  });
  return out;
}

::testing::AssertionResult BytesEqual(const std::string& expected, const std::string& actual) {
  if (expected == actual) return ::testing::AssertionSuccess();
  size_t at = 0;
  while (at < expected.size() && at < actual.size() && expected[at] == actual[at]) ++at;
  size_t from = at < 16 ? 0 : at - 16;
  return ::testing::AssertionFailure()
         << "byte strings differ: expected " << expected.size() << " bytes, got " << actual.size()
         << "; first difference at offset " << at << "\n  expected[" << from
         << "..]: " << hex(expected.substr(from, 48)) << "\n  actual  [" << from
         << "..]: " << hex(actual.substr(from, 48));
}

void DblogSlotTest::SetUp() {
  auto conninfo = test_conninfo();
  if (!conninfo)
    GTEST_SKIP() << "DBLOG_TEST_CONNINFO is not set; tests/run.sh sets it for a throwaway cluster";
  db_.emplace(*conninfo);
  name_ = name_for_current_test();
  db().exec("CREATE EXTENSION IF NOT EXISTS dblog");
  // Leftovers of an aborted earlier run of this same test.
  db().exec(
      "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
      " WHERE slot_name = " +
      db().literal(name_));
  db().exec("DROP SCHEMA IF EXISTS " + name_ + " CASCADE; CREATE SCHEMA " + name_ +
            "; SET search_path = " + name_ + ", public");
  db().exec("SELECT pg_create_logical_replication_slot(" + db().literal(name_) + ", 'dblog')");
  slot_created_ = true;
}

void DblogSlotTest::TearDown() {
  if (!db_) return;
  try {
    if (slot_created_) db().exec("SELECT pg_drop_replication_slot(" + db().literal(name_) + ")");
    db().exec("DROP SCHEMA IF EXISTS " + name_ + " CASCADE");
  } catch (const std::exception& e) {
    ADD_FAILURE() << "teardown: " << e.what();
  }
}

std::vector<Transaction> DblogSlotTest::decode(const std::vector<std::string>& extra_options) {
  std::string sql =
      "SELECT data FROM pg_logical_slot_get_binary_changes($1, NULL, NULL, "
      "'format', 'binary'";
  for (const auto& opt : extra_options) sql += ", " + db().literal(opt);
  sql += ")";

  std::vector<DecodedEvent> events;
  for (const Row& row : db().exec_binary(sql, {slot()})) {
    const std::string& data = row.at(0).value();
    dblog::v1::Batch batch;
    if (!batch.ParseFromString(data)) {
      ADD_FAILURE() << "a plugin message does not parse as dblog.v1.Batch (" << data.size()
                    << " bytes)";
      continue;
    }
    EXPECT_TRUE(BytesEqual(batch.SerializeAsString(), data))
        << "plugin message is not canonically encoded";
    for (int i = 0; i + 1 < batch.events_size(); ++i)
      EXPECT_FALSE(batch.events(i).has_commit()) << "a Commit must end its Batch";
    auto new_rows = raw_new_rows(data);
    for (int i = 0; i < batch.events_size(); ++i)
      events.push_back({batch.events(i), new_rows.at(i)});
  }

  // Group into transactions. Our tables are those whose Relation names our schema; every
  // relation is described before its first change in a session, so the set is complete.
  std::set<uint32_t> ours;
  for (const auto& e : events)
    if (e.event.has_relation() && e.event.relation().schema() == schema())
      ours.insert(e.event.relation().oid());

  std::vector<Transaction> txns;
  std::optional<Transaction> open;
  for (auto& e : events) {
    if (e.event.has_begin()) {
      EXPECT_FALSE(open) << "Begin inside an open transaction";
      open.emplace();
    }
    if (!open) {
      if (e.event.has_message() && !e.event.message().transactional()) continue;
      ADD_FAILURE() << "event outside a transaction: " << e.event.ShortDebugString();
      continue;
    }
    open->events.push_back(std::move(e));
    if (open->events.back().event.has_commit()) {
      const auto& evs = open->events;
      bool touches_ours = std::any_of(evs.begin(), evs.end(), [&](const DecodedEvent& d) {
        return (d.event.has_change() && ours.count(d.event.change().relation_oid())) ||
               (d.event.has_relation() && ours.count(d.event.relation().oid()));
      });
      if (touches_ours) txns.push_back(std::move(*open));
      open.reset();
    }
  }
  EXPECT_FALSE(open) << "the last transaction has no Commit";
  return txns;
}

}  // namespace dblog::test
