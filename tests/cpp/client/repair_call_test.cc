// tests/cpp/client/repair_call_test.cc: the dblog.repair_keys call for keys a sink cannot apply
// (client/repair_call.h): key JSON as repair_keys reads it, names and text quoted.
#include <gtest/gtest.h>

#include "client/repair_call.h"
#include "test_events.h"

namespace dblog::client {
namespace {

using namespace dblog::client::testing;

TEST(RepairCall, KeysOfOneOrManyColumnsInKeyOrder) {
  const auto items = RelationEvent(16384, "public", "items", {{"id", "integer"}}, {0});
  EXPECT_EQ(RepairKeysCall(items.relation(), {MakeRow({Int(5)}), MakeRow({Int(-7)})},
                           "sink"),
            R"(SELECT dblog.repair_keys('public.items', '[{"id":5}, {"id":-7}]', 'sink');)");
  // key (k1, k2) in key order, not column order; text through its input text; quotes doubled
  const auto pairs = RelationEvent(16385, "App", "pair's",
                                   {{"v", "integer"}, {"k1", "text"}, {"k2", "uuid"}},
                                   {2, 1});
  dblog::v1::Value uuid;
  uuid.set_uuid_value(std::string("\xa0\xee\xbc\x99\x9c\x0b\x4e\xf8\xbb\x6d\x6b\xb9\xbd\x38\x0a\x11", 16));
  EXPECT_EQ(KeyJson(pairs.relation(), MakeRow({uuid, Text("it's \"x\"")})),
            R"({"k2":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","k1":"it's \"x\""})");
  EXPECT_EQ(RepairKeysCall(pairs.relation(), {MakeRow({uuid, Text("it's")})}, "sink"),
            R"(SELECT dblog.repair_keys('"App"."pair''s"', '[{"k2":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","k1":"it''s"}]', 'sink');)");
  EXPECT_EQ(RepairTableCall(pairs.relation(), "sink"),
            R"(SELECT dblog.repair('"App"."pair''s"', 'sink');)");
}

TEST(RepairCall, RefusesKeysThatDoNotFit) {
  const auto items = RelationEvent(16384, "public", "items", {{"id", "integer"}}, {0});
  EXPECT_THROW(KeyJson(items.relation(), MakeRow({Int(1), Int(2)})), std::invalid_argument);
  EXPECT_THROW(KeyJson(items.relation(), MakeRow({Null()})), std::invalid_argument);
  EXPECT_THROW(KeyJson(items.relation(), MakeRow({Unchanged()})), std::invalid_argument);
  EXPECT_TRUE(HasUnchangedToast(MakeRow({Int(1), Unchanged()})));
  EXPECT_FALSE(HasUnchangedToast(MakeRow({Int(1), Null()})));
}

}  // namespace
}  // namespace dblog::client
