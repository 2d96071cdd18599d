// tests/cpp/consumer/scope_changes_test.cc: the DDL messages of the extension's event trigger
// (consumer/scope_changes.h): the format as plugin/ddl_trigger.c writes it (sql/ddl.sql shows
// the same texts), what is refused, and when a table enters a consumer's scope.
#include "consumer/scope_changes.h"

#include <gtest/gtest.h>

#include <chrono>

namespace dblog::consumer {
namespace {

ScopeChange Change(const std::string& old_schema, const std::string& old_name,
                   const std::string& new_schema, const std::string& new_name) {
  ScopeChange c;
  c.oid = 16384;
  c.kind = "rename";
  c.old_schema = old_schema;
  c.old_name = old_name;
  c.new_schema = new_schema;
  c.new_name = new_name;
  return c;
}

TEST(ScopeChange, ParsesWhatTheTriggerWrites) {
  const auto c = ParseScopeChange(
      R"({"oid":16464,"kind":"rename_schema","old_schema":"ddl_s","old_name":"Two words",)"
      R"("new_schema":"ddl S","new_name":"Two words"})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->oid, 16464u);
  EXPECT_EQ(c->kind, "rename_schema");
  EXPECT_EQ(c->old_schema, "ddl_s");
  EXPECT_EQ(c->old_name, "Two words");
  EXPECT_EQ(c->new_schema, "ddl S");
  EXPECT_EQ(c->new_name, "Two words");
}

TEST(ScopeChange, NamesWithEscapesAndUnicodeComeBackAsSpelled) {
  // escape_json: '"', '\\', control characters; UTF-8 passes through, \u escapes are read
  const auto c = ParseScopeChange(
      "{\"oid\":1,\"kind\":\"rename\",\"old_schema\":\"a\\\"b\\\\c\",\"old_name\":\"x\\ny\\t\","
      "\"new_schema\":\"\xc3\xa9t\xc3\xa9\",\"new_name\":\"\\u00e9\\ud83d\\ude00\\/\"}");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->old_schema, "a\"b\\c");
  EXPECT_EQ(c->old_name, "x\ny\t");
  EXPECT_EQ(c->new_schema, "\xc3\xa9t\xc3\xa9");
  EXPECT_EQ(c->new_name, "\xc3\xa9\xf0\x9f\x98\x80/");
}

TEST(ScopeChange, MembersOfALaterVersionAreIgnored) {
  const auto c = ParseScopeChange(
      R"({"oid":7,"v":2,"kind":"set_schema","old_schema":"a","old_name":"t","new_schema":"b",)"
      R"("new_name":"t","extra":"x"})");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->oid, 7u);
}

TEST(ScopeChange, AnythingElseIsRefused) {
  const char* full = R"("kind":"rename","old_schema":"a","old_name":"t","new_schema":"a","new_name":"u")";
  for (const std::string& bad : {
           std::string(""), std::string("not json"), std::string("{}"),
           std::string("{") + full + "}",                                 // no oid
           std::string(R"({"oid":0,)") + full + "}",                      // oid 0
           std::string(R"({"oid":4294967296,)") + full + "}",             // beyond an oid
           std::string(R"({"oid":99999999999999999999999,)") + full + "}",
           std::string(R"({"oid":-1,)") + full + "}",
           std::string(R"({"oid":1,"oid":2,)") + full + "}",              // twice
           std::string(R"({"oid":1,"kind":"rename"})"),                   // names missing
           std::string(R"({"oid":1,)") + full + R"(,"new_name":"v"})",    // a name twice
           std::string(R"({"oid":1,)") + full + "} trailing",
           std::string(R"({"oid":1,)") + full,                            // truncated
           std::string(R"({"oid":1,"kind":"rename","old_schema":"","old_name":"t","new_schema":"a","new_name":"u"})"),
           std::string(R"({"oid":1,"kind":"rename","old_schema":"a\u0000","old_name":"t","new_schema":"a","new_name":"u"})"),
           std::string(R"({"oid":1,"kind":"rename","old_schema":"a\ud800","old_name":"t","new_schema":"a","new_name":"u"})"),
           std::string(R"({"oid":1,"kind":"rename","old_schema":"a\q","old_name":"t","new_schema":"a","new_name":"u"})"),
           std::string("{\"oid\":1,\"kind\":\"rename\",\"old_schema\":\"a\nb\",\"old_name\":\"t\","
                       "\"new_schema\":\"a\",\"new_name\":\"u\"}"),  // a raw control character
       })
    EXPECT_FALSE(ParseScopeChange(bad)) << bad;
}

TEST(ScopeChange, EntersOnlyFromOutsideToInside) {
  const config::Scope scope = config::ParseScope("app.order_*,app.items,!app.order_audit");
  EXPECT_TRUE(EntersScope(scope, Change("app", "staging", "app", "order_new")));    // rename in
  EXPECT_TRUE(EntersScope(scope, Change("stage", "items", "app", "items")));        // SET SCHEMA in
  EXPECT_TRUE(EntersScope(scope, Change("app", "order_audit", "app", "order_x")));  // out of '!'
  EXPECT_FALSE(EntersScope(scope, Change("app", "order_a", "app", "order_b")));     // inside
  EXPECT_FALSE(EntersScope(scope, Change("app", "order_a", "app", "old_orders")));  // leaving
  EXPECT_FALSE(EntersScope(scope, Change("app", "x", "app", "y")));                 // outside
  EXPECT_FALSE(EntersScope(scope, Change("app", "staging", "app", "order_audit")));  // excluded
  EXPECT_FALSE(EntersScope(scope, Change("stage", "items", "other", "items")));
}

// A DDL written before a change of the scope that the stream has not read past: whatever its
// old name, the table counts as not captured under it (which scopes were in force while it was
// read is not known), so it enters when its new name is in the scope.
TEST(ScopeChange, ADdlWrittenBeforeAnUnsettledScopeChangeEntersWhateverItsOldName) {
  const config::Scope scope = config::ParseScope("app.a,app.b");
  EXPECT_FALSE(EntersScope(scope, Change("app", "a", "app", "b")));
  EXPECT_TRUE(EntersScope(scope, Change("app", "a", "app", "b"), true));
  EXPECT_TRUE(EntersScope(scope, Change("app", "x", "app", "b"), true));
  // leaving, or outside, is never entering
  EXPECT_FALSE(EntersScope(scope, Change("app", "a", "app", "z"), true));
  EXPECT_FALSE(EntersScope(scope, Change("app", "x", "app", "y"), true));
}

// The boundary of a consumer's unsettled scope changes: the later one wins, and a stream that
// read past an earlier boundary does not settle a later change.
TEST(UnsettledScopeChanges, KeepTheLaterBoundaryUntilTheStreamReadsPastIt) {
  UnsettledScopeChanges u;
  EXPECT_EQ(u.Boundary("c"), 0u);
  u.Found("c", 100);
  u.Found("c", 50);
  EXPECT_EQ(u.Boundary("c"), 100u);
  EXPECT_EQ(u.Boundary("other"), 0u);
  u.Found("c", 200);
  u.Settled("c", 100);  // a stream that started under the boundary 100
  EXPECT_EQ(u.Boundary("c"), 200u);
  u.Settled("c", 200);
  EXPECT_EQ(u.Boundary("c"), 0u);
}

TEST(ScopeChange, AnUnloggedTableBecomingLoggedEntersUnderItsOwnName) {
  const config::Scope scope = config::ParseScope("app.*");
  ScopeChange c = Change("app", "u", "app", "u");
  c.kind = "set_logged";
  EXPECT_TRUE(EntersScope(scope, c));
  c.kind = "rename";  // the same names otherwise: a rename inside the scope
  EXPECT_FALSE(EntersScope(scope, c));
  c = Change("other", "u", "other", "u");
  c.kind = "set_logged";
  EXPECT_FALSE(EntersScope(scope, c));
}

TEST(ScopeChange, ASchemaRenameEntersEveryTableItBringsIn) {
  const config::Scope scope = config::ParseScope("live.*");
  EXPECT_TRUE(EntersScope(scope, Change("old", "a", "live", "a")));
  EXPECT_FALSE(EntersScope(scope, Change("live", "a", "dead", "a")));
}

TEST(ScopeChange, SystemSchemasAndDblogsOwnNeverEnter) {
  const config::Scope scope = config::ParseScope("*.*");
  for (const char* schema : {"dblog", "pg_catalog", "information_schema", "pg_toast", "pg_temp_3"})
    EXPECT_FALSE(EntersScope(scope, Change(schema, "t", schema, "u"))) << schema;
  EXPECT_TRUE(EntersScope(scope, Change("dblog", "t", "public", "t")));  // out of dblog's schema
  EXPECT_FALSE(EntersScope(scope, Change("public", "t", "dblog", "t")));
}

// Finding 2: the trigger's longest message (four 63-byte names of control characters, each
// escaped as \u00XX) parses; a byte more is not the trigger's and is not parsed, nor is a huge one.
TEST(ScopeChange, MessagesLongerThanTheTriggersLongestAreNotParsed) {
  std::string name;
  for (int i = 0; i < 63; ++i) name += "\\u001f";
  const std::string longest = R"({"oid":4294967295,"kind":"rename_schema","old_schema":")" + name +
                              R"(","old_name":")" + name + R"(","new_schema":")" + name +
                              R"(","new_name":")" + name + R"("})";
  ASSERT_LE(longest.size(), kMaxScopeChangeBytes);
  ASSERT_TRUE(ParseScopeChange(longest));
  const std::string padded = longest.substr(0, longest.size() - 1) + R"(,"pad":")" +
                             std::string(kMaxScopeChangeBytes - longest.size(), 'a') + R"("})";
  EXPECT_GT(padded.size(), kMaxScopeChangeBytes);
  EXPECT_FALSE(ParseScopeChange(padded));
  const std::string huge = R"({"oid":1,"kind":"rename","old_schema":"a","old_name":"t",)"
                           R"("new_schema":"a","new_name":"u","pad":")" +
                           std::string(64 << 20, 'a') + R"("})";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(ParseScopeChange(huge));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(50));
}

dblog::v1::Message DdlMessage(std::uint64_t xid, const std::string& content) {
  dblog::v1::Message m;
  m.set_prefix(kScopeChangePrefix);
  m.set_transactional(true);
  m.set_xid(xid);
  m.set_content(content);
  return m;
}

std::string Renamed(std::uint32_t oid, const std::string& from, const std::string& to) {
  return R"({"oid":)" + std::to_string(oid) +
         R"(,"kind":"rename","old_schema":"app","old_name":")" + from +
         R"(","new_schema":"app","new_name":")" + to + R"("})";
}

// Finding 3: however many messages of one transaction name a table, it is remembered once (one
// statement and one log line at the commit); what does not enter is not remembered at all.
TEST(ScopeChanges, ATableNamedByManyMessagesOfATransactionIsRememberedOnce) {
  config::ConsumerConfig consumer;
  consumer.name = "c";
  consumer.scope = config::ParseScope("app.in_*");
  ScopeChanges changes(consumer);
  changes.OnBegin();
  for (int i = 0; i < 20000; ++i) changes.OnMessage(DdlMessage(7, Renamed(100, "out", "in_a")));
  changes.OnMessage(DdlMessage(7, Renamed(101, "out", "in_b")));
  changes.OnMessage(DdlMessage(7, Renamed(102, "in_c", "in_d")));  // inside already
  changes.OnMessage(DdlMessage(7, Renamed(103, "in_e", "out")));   // leaving
  changes.OnMessage(DdlMessage(7, "not json"));
  ASSERT_EQ(changes.entering().size(), 2u);
  EXPECT_EQ(changes.entering()[0].oid, 100u);
  EXPECT_EQ(changes.entering()[1].oid, 101u);
  // a new transaction (or the same one read again after a reconnect) starts afresh
  changes.OnBegin();
  EXPECT_TRUE(changes.entering().empty());
  changes.OnMessage(DdlMessage(8, Renamed(100, "out", "in_a")));
  changes.OnMessage(DdlMessage(9, Renamed(101, "out", "in_b")));  // another xid: a new one
  ASSERT_EQ(changes.entering().size(), 1u);
  EXPECT_EQ(changes.entering()[0].oid, 101u);
}

}  // namespace
}  // namespace dblog::consumer
