// tests/cpp/wire/change_view_test.cc: a Change read in place (wire/change_view.h) against the
// same Change parsed by protobuf. Random Changes, serialized as protobuf writes them (the
// plugin's canonical form), must read in place to the same fields, each value's bytes must be
// its serialization, its accessors must give the parsed member, and keys made from the views must
// equal those made from the messages (sidecar/emit/key.h). Any
// other encoding of the same message, and anything protobuf would refuse, must be refused, so
// the pipeline parses it instead.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "emit/key.h"
#include "wire/change_view.h"

namespace dblog::wire {
namespace {

using emit::KeyBytes;

using dblog::v1::Change;
using dblog::v1::Relation;
using dblog::v1::Row;
using dblog::v1::Value;

Value RandomValue(std::mt19937_64& rng) {
  Value v;
  auto text = [&] {
    std::string s(rng() % 40, 'x');
    for (char& c : s) c = static_cast<char>('a' + rng() % 26);
    if (rng() % 4 == 0) s += "\xc3\xa9";  // é: valid UTF-8 beyond ASCII
    return s;
  };
  switch (rng() % 14) {
    // null_value and unchanged are "always true when set"; false ones (never written by the
    // plugin) must not be read in place
    case 0: v.set_null_value(rng() % 16 != 0); break;
    case 1: v.set_unchanged(rng() % 16 != 0); break;
    case 2: v.set_bool_value(rng() % 2); break;
    case 3: v.set_int_value(static_cast<std::int64_t>(rng()) >> (rng() % 64)); break;
    case 4: v.set_float4_value(static_cast<float>(rng() % 1000) / 7.0f); break;
    case 5: v.set_float8_value(rng() % 2 ? -0.0 : static_cast<double>(rng()) / 3.0); break;
    case 6: v.set_text_value(text()); break;
    case 7: v.set_bytes_value(std::string(rng() % 300, static_cast<char>(rng()))); break;
    case 8: v.set_uuid_value(std::string(16, static_cast<char>(rng()))); break;
    case 9: v.set_date_value(static_cast<std::int32_t>(rng())); break;
    case 10: v.set_timestamp_value(-static_cast<std::int64_t>(rng() % 100000)); break;
    case 11: v.set_timestamptz_value(static_cast<std::int64_t>(rng())); break;
    case 12: v.set_literal(text()); break;
    default: break;  // no member
  }
  return v;
}

Row RandomRow(std::mt19937_64& rng, int width) {
  Row row;
  for (int i = 0; i < width; ++i) *row.add_values() = RandomValue(rng);
  return row;
}

Change RandomChange(std::mt19937_64& rng) {
  Change c;
  c.set_kind(static_cast<Change::Kind>(rng() % 5));
  if (rng() % 8) c.set_relation_oid(static_cast<std::uint32_t>(rng()));
  if (rng() % 8) c.set_commit_lsn(rng() >> (rng() % 64));
  if (rng() % 2) c.set_seq(static_cast<std::uint32_t>(rng() % 1000));
  if (rng() % 8) c.set_lsn(rng());
  if (rng() % 8) c.set_xid(rng() % 100000);
  if (rng() % 8) c.set_commit_time(static_cast<std::int64_t>(rng()) >> (rng() % 64));
  const int width = static_cast<int>(rng() % 6);
  if (rng() % 4) *c.mutable_new_row() = RandomRow(rng, width);
  if (rng() % 2) *c.mutable_old_key() = RandomRow(rng, 1 + static_cast<int>(rng() % 2));
  if (rng() % 6 == 0) *c.mutable_old_row() = RandomRow(rng, width);
  return c;
}

template <typename T>
std::string Bits(T v) {
  std::string b(sizeof v, '\0');
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}

// A value's accessors give what the parsed message holds (floats bit for bit).
void ExpectReadsAsParsed(const ValueView& view, const Value& v) {
  switch (v.kind_case()) {
    case Value::kTextValue: EXPECT_EQ(view.text(), v.text_value()); break;
    case Value::kLiteral: EXPECT_EQ(view.text(), v.literal()); break;
    case Value::kBytesValue: EXPECT_EQ(view.text(), v.bytes_value()); break;
    case Value::kUuidValue: EXPECT_EQ(view.text(), v.uuid_value()); break;
    case Value::kBoolValue: EXPECT_EQ(view.integer(), v.bool_value() ? 1 : 0); break;
    case Value::kIntValue: EXPECT_EQ(view.integer(), v.int_value()); break;
    case Value::kDateValue: EXPECT_EQ(view.integer(), v.date_value()); break;
    case Value::kTimestampValue: EXPECT_EQ(view.integer(), v.timestamp_value()); break;
    case Value::kTimestamptzValue: EXPECT_EQ(view.integer(), v.timestamptz_value()); break;
    case Value::kFloat4Value: EXPECT_EQ(Bits(view.float4()), Bits(v.float4_value())); break;
    case Value::kFloat8Value: EXPECT_EQ(Bits(view.float8()), Bits(v.float8_value())); break;
    default:
      EXPECT_EQ(view.text(), "");
      EXPECT_EQ(view.integer(), 0);
      break;
  }
}

TEST(ChangeView, ReadsWhatProtobufParsesAndKeysMatch) {
  std::mt19937_64 rng(20261207);
  ChangeView view;  // reused, as the pipeline reuses its views
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    const Change c = RandomChange(rng);
    const std::string bytes = c.SerializeAsString();
    bool a_false_flag = false;
    for (const Row* row : {&c.new_row(), &c.old_key(), &c.old_row()})
      for (const Value& v : row->values())
        a_false_flag |= (v.has_null_value() && !v.null_value()) ||
                        (v.has_unchanged() && !v.unchanged());
    if (a_false_flag) {
      EXPECT_FALSE(view.Parse(bytes)) << c.DebugString();
      ++refused;
      continue;
    }
    ASSERT_TRUE(view.Parse(bytes)) << c.DebugString();
    EXPECT_EQ(view.kind, c.kind());
    EXPECT_EQ(view.relation_oid, c.relation_oid());
    EXPECT_EQ(view.commit_lsn, c.commit_lsn());
    EXPECT_EQ(view.seq, c.seq());
    EXPECT_EQ(view.lsn, c.lsn());
    EXPECT_EQ(view.xid, c.xid());
    EXPECT_EQ(view.commit_time, c.commit_time());
    EXPECT_EQ(view.has_new_row, c.has_new_row());
    EXPECT_EQ(view.has_old_key, c.has_old_key());
    EXPECT_EQ(view.has_old_row, c.has_old_row());
    EXPECT_EQ(view.raw, bytes);
    // rows: each value's bytes are its serialization, its member the parsed one
    const std::pair<const RowView*, const Row*> rows[] = {
        {&view.new_row, &c.new_row()}, {&view.old_key, &c.old_key()}, {&view.old_row, &c.old_row()}};
    for (const auto& [rv, row] : rows) {
      ASSERT_EQ(rv->size(), static_cast<std::size_t>(row->values_size()));
      EXPECT_EQ(rv->bytes(), row->SerializeAsString());
      bool unchanged = false;
      for (int k = 0; k < row->values_size(); ++k) {
        EXPECT_EQ((*rv)[static_cast<std::size_t>(k)].bytes, row->values(k).SerializeAsString());
        EXPECT_EQ((*rv)[static_cast<std::size_t>(k)].kind, row->values(k).kind_case());
        // what the key log and the windows ask of a value, either way (Repairs::RecordKeys)
        EXPECT_EQ((*rv)[static_cast<std::size_t>(k)].kind == Value::kUnchanged,
                  row->values(k).unchanged());
        EXPECT_EQ((*rv)[static_cast<std::size_t>(k)].kind == Value::kNullValue,
                  row->values(k).null_value());
        unchanged |= row->values(k).unchanged();
        ExpectReadsAsParsed((*rv)[static_cast<std::size_t>(k)], row->values(k));
      }
      EXPECT_EQ(rv->HasUnchanged(), unchanged);
    }
    // keys, as the key log and the windows compare them
    Relation rel;
    const int keys = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < keys; ++k) rel.add_key_columns(static_cast<std::uint32_t>(rng() % 6));
    EXPECT_EQ(KeyBytes(rel, view.new_row), KeyBytes(rel, c.new_row()));
    Change back;
    ASSERT_TRUE(view.ParseInto(&back));
    EXPECT_EQ(back.SerializeAsString(), bytes);
  }
  EXPECT_GT(refused, 100) << "the generator must write false flags, or their refusal is untested";
}

// Bytes protobuf reads, but not as the plugin writes them (or not at all): refused in place.
TEST(ChangeView, RefusesWhatIsNotTheCanonicalForm) {
  Change c;
  c.set_kind(Change::INSERT);
  c.set_relation_oid(42);
  c.mutable_new_row()->add_values()->set_text_value("hi");
  const std::string good = c.SerializeAsString();
  ChangeView view;
  ASSERT_TRUE(view.Parse(good));
  auto refused = [&](const std::string& bytes, const char* why) {
    EXPECT_FALSE(view.Parse(bytes)) << why;
  };
  // kind written twice (protobuf keeps the last), fields out of order, a zero written out
  refused(good + std::string("\x08\x02", 2), "a field twice");
  refused(std::string("\x10\x2a\x08\x01", 4), "fields out of number order");
  refused(std::string("\x08\x00", 2), "a proto3 zero written out");
  refused(std::string("\x08\x81\x00", 3), "a varint longer than it needs");
  refused(std::string("\x08\x09", 2), "a Change kind this version does not know");
  refused(std::string("\x58\x01", 2), "an unknown field");
  refused(good.substr(0, good.size() - 1), "cut short");
  // Values: two members (protobuf keeps the last), a bool of 2, text that is not UTF-8
  auto with_value = [&](const std::string& value) {
    std::string row = "\x0a" + std::string(1, static_cast<char>(value.size())) + value;
    return std::string("\x08\x01\x10\x2a\x42", 5) + std::string(1, static_cast<char>(row.size())) +
           row;
  };
  ASSERT_TRUE(view.Parse(with_value(std::string("\x3a\x02hi", 4))));
  refused(with_value(std::string("\x20\x02\x3a\x02hi", 6)), "a Value with two members");
  refused(with_value(std::string("\x18\x02", 2)), "a bool of 2");
  refused(with_value(std::string("\x10\x00", 2)), "unchanged: false (protobuf: not unchanged)");
  refused(with_value(std::string("\x08\x00", 2)), "null_value: false");
  ASSERT_TRUE(view.Parse(with_value(std::string("\x18\x00", 2)))) << "bool_value: false";
  refused(with_value(std::string("\x3a\x02\xff\xfe", 4)), "text that is not UTF-8");
  refused(with_value(std::string("\x50\x80\x80\x80\x80\x10", 6)), "a date beyond 32 bits");
  Change parsed;
  EXPECT_FALSE(parsed.ParseFromString(with_value(std::string("\x3a\x02\xff\xfe", 4))))
      << "protobuf refuses it too: the pipeline's parse reports it";
}

TEST(ChangeView, SplitsABatchIntoItsEvents) {
  dblog::v1::Batch batch;
  batch.add_events()->mutable_begin()->set_commit_lsn(7);
  *batch.add_events()->mutable_change() = [] {
    Change c;
    c.set_kind(Change::DELETE);
    return c;
  }();
  batch.add_events()->mutable_commit()->set_commit_lsn(7);
  const std::string bytes = batch.SerializeAsString();
  std::vector<BatchEvent> events;
  ASSERT_TRUE(SplitBatch(bytes, &events));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].member, static_cast<std::uint32_t>(dblog::v1::Event::kBegin));
  EXPECT_EQ(events[1].member, static_cast<std::uint32_t>(dblog::v1::Event::kChange));
  EXPECT_EQ(events[1].payload, batch.events(1).change().SerializeAsString());
  EXPECT_EQ(events[2].event, batch.events(2).SerializeAsString());
  EXPECT_FALSE(SplitBatch(bytes.substr(0, bytes.size() - 1), &events));
  EXPECT_FALSE(SplitBatch(std::string("\x12\x00", 2), &events));  // not Batch.events
}

}  // namespace
}  // namespace dblog::wire
