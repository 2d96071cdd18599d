// tests/cpp/pgoutput/translate_test.cc: pgoutput::Translator (sidecar/pgoutput/translate.h) on
// messages built here (no server): what it refuses (a catalog that no longer describes the
// Relation message, a table without a key, a change of an unannounced relation, binary values,
// streamed and two-phase messages, text no output function prints), the deferred Begin, xids
// widened across an epoch, and kRelationQuery's rows parsed. pgoutput_translate_test.cc checks
// it against the extension on real servers.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "pgoutput/translate.h"

namespace {

namespace po = dblog::pgoutput;
using dblog::v1::Event;

po::Relation Announced() {
  po::Relation r;
  r.oid = 16400;
  r.nspname = "public";
  r.relname = "t";
  r.columns = {{true, "id", 23, -1}, {false, "v", 25, -1}};
  return r;
}

po::CatalogRelation Catalog() {
  po::CatalogRelation c;
  c.oid = 16400;
  c.schema = "public";
  c.name = "t";
  c.columns = {{"id", 23, 23, -1, 1, true, "integer"}, {"v", 25, 25, -1, 3, false, "text"}};
  c.key_columns = {0};
  c.dropped_columns = 1;  // attnum 2
  return c;
}

po::Begin BeginAt(std::uint32_t xid) {
  po::Begin b;
  b.final_lsn = 0x1000;
  b.xid = xid;
  return b;
}

po::Insert InsertOf(std::string_view id, std::string_view v) {
  po::Insert i;
  i.relation_oid = 16400;
  i.new_tuple = {{po::Datum::Kind::kText, id}, {po::Datum::Kind::kText, v}};
  return i;
}

struct Fixture {
  po::CatalogRelation catalog = Catalog();
  std::optional<po::CatalogRelation> noted;  // the layout noted before the change, if any
  std::uint64_t asked_lsn = 0, asked_xid = 0;
  po::Translator translator{[this](const po::Relation&, std::uint64_t lsn, std::uint64_t xid) {
                              asked_lsn = lsn;
                              asked_xid = xid;
                              return po::CatalogAt{catalog, noted};
                            },
                            (std::uint64_t{5} << 32) | 100};
  std::vector<Event> events;
  void Feed(const po::LogicalMessage& m, std::uint64_t lsn = 0x900) {
    translator.Translate(m, lsn, &events);
  }
};

TEST(TranslateTest, AnInsertBecomesBeginRelationChangeCommit) {
  Fixture f;
  f.Feed(BeginAt(200));
  f.Feed(Announced());
  EXPECT_TRUE(f.events.empty()) << "Begin and Relation wait for the first change";
  f.Feed(InsertOf("1", "x"), 0x950);
  po::Commit c;
  c.commit_lsn = 0x1000;
  c.end_lsn = 0x1040;
  f.Feed(c);
  ASSERT_EQ(f.events.size(), 4u);
  EXPECT_EQ(f.events[0].begin().xid(), (std::uint64_t{5} << 32) | 200);
  EXPECT_EQ(f.events[0].begin().commit_time(), 946684800000000LL) << "2000-01-01 in Unix us";
  EXPECT_EQ(f.events[1].relation().columns(1).attnum(), 3u) << "the catalog's attnum";
  EXPECT_EQ(f.events[1].relation().key_columns_size(), 1);
  EXPECT_EQ(f.events[2].change().lsn(), 0x950u) << "the XLogData's dataStart";
  EXPECT_EQ(f.events[2].change().seq(), 1u);
  EXPECT_EQ(f.events[2].change().new_row().values(1).text_value(), "x");
  EXPECT_EQ(f.events[3].commit().seq(), 2u);
  EXPECT_EQ(f.events[3].commit().end_lsn(), 0x1040u);
}

TEST(TranslateTest, ATransactionWithNothingToSendSendsNothing) {
  Fixture f;
  f.Feed(BeginAt(200));
  f.Feed(po::Type{});
  po::Commit c;
  c.commit_lsn = 0x1000;
  f.Feed(c);
  EXPECT_TRUE(f.events.empty());
}

TEST(TranslateTest, XidsAreWidenedNextToTheReference) {
  Fixture f;
  f.Feed(BeginAt(4294967000u));  // before the reference's epoch began
  EXPECT_NO_THROW(f.Feed(Announced()));
  f.Feed(InsertOf("1", "x"));
  ASSERT_FALSE(f.events.empty());
  EXPECT_EQ(f.events[0].begin().xid(), (std::uint64_t{4} << 32) | 4294967000u);
}

TEST(TranslateTest, WhatCannotBeMappedIsRefused) {
  {
    Fixture f;
    f.catalog.columns.pop_back();
    f.Feed(BeginAt(200));
    f.Feed(Announced());  // mapped at the change that follows it
    EXPECT_THROW(f.Feed(InsertOf("1", "x")), po::TranslateError) << "a column fewer";
  }
  {
    Fixture f;
    f.catalog.columns[1].name = "w";
    f.Feed(BeginAt(200));
    f.Feed(Announced());  // mapped at the change that follows it
    EXPECT_THROW(f.Feed(InsertOf("1", "x")), po::TranslateError) << "a column renamed";
  }
  {
    Fixture f;
    f.catalog.columns[1].type_oid = 1043;
    f.Feed(BeginAt(200));
    f.Feed(Announced());  // mapped at the change that follows it
    EXPECT_THROW(f.Feed(InsertOf("1", "x")), po::TranslateError) << "a column of another type";
  }
  {
    Fixture f;
    f.catalog.key_columns.clear();
    f.Feed(BeginAt(200));
    f.Feed(Announced());  // mapped at the change that follows it
    EXPECT_THROW(f.Feed(InsertOf("1", "x")), po::TranslateError) << "no key";
  }
  {
    Fixture f;
    f.catalog.key_columns = {1};
    f.Feed(BeginAt(200));
    f.Feed(Announced());  // mapped at the change that follows it
    EXPECT_THROW(f.Feed(InsertOf("1", "x")), po::TranslateError) << "pgoutput flags another key";
  }
  {
    Fixture f;
    f.Feed(BeginAt(200));
    EXPECT_THROW(f.Feed(InsertOf("1", "x")), po::TranslateError) << "an unannounced relation";
  }
  {
    Fixture f;
    f.Feed(BeginAt(200));
    f.Feed(Announced());
    EXPECT_THROW(f.Feed(InsertOf("one", "x")), po::TranslateError) << "int4 text";
    po::Insert binary = InsertOf("1", "x");
    binary.new_tuple[0].kind = po::Datum::Kind::kBinary;
    EXPECT_THROW(f.Feed(binary), po::TranslateError) << "a binary value";
    po::Insert narrow = InsertOf("1", "x");
    narrow.new_tuple.pop_back();
    EXPECT_THROW(f.Feed(narrow), po::TranslateError) << "a value fewer";
  }
  {
    Fixture f;
    EXPECT_THROW(f.Feed(po::StreamStart{}), po::TranslateError);
    EXPECT_THROW(f.Feed(po::PreparedTransaction{}), po::TranslateError);
    po::Message m;
    m.transactional = true;
    EXPECT_THROW(f.Feed(m), po::TranslateError) << "transactional, outside a transaction";
  }
}

// Security review F4: a change, then DDL on its table before dblogd read the change's Relation
// message: the catalog, read now, describes other columns. A table that never dropped a column
// has dense attnums, so its message's i-th column is attnum i+1: renamed and added columns
// since map, with the message's names (as the extension's plugin writes them, from the
// catalog as it was). Retyped columns, and any difference in a table with a dropped column, do
// not: those stay refused.
TEST(TranslateTest, ColumnsRenamedOrAddedSinceTheMessageAreMappedByAttnum) {
  po::CatalogRelation now = Catalog();
  now.dropped_columns = 0;
  now.columns[1].attnum = 2;
  now.columns[1].name = "renamed";
  now.columns.push_back({"added", 20, 20, -1, 3, false, "bigint"});
  now.name = "t_renamed";
  po::Relation then = Announced();
  std::vector<po::ValueKind> kinds;
  const dblog::v1::Relation rel = po::MappedRelation(then, now, &kinds);
  ASSERT_EQ(rel.columns_size(), 2);
  EXPECT_EQ(rel.name(), "t") << "the message's name, as it was";
  EXPECT_EQ(rel.columns(1).name(), "v") << "the message's name, as it was";
  EXPECT_EQ(rel.columns(1).attnum(), 2u);
  EXPECT_EQ(rel.columns(1).type_name(), "text");
  EXPECT_EQ(kinds.size(), 2u);
  ASSERT_EQ(rel.key_columns_size(), 1);
  EXPECT_EQ(rel.key_columns(0), 0u);
  {
    po::CatalogRelation retyped = now;
    retyped.columns[1].type_oid = retyped.columns[1].base_type_oid = 1043;
    EXPECT_THROW(po::MappedRelation(then, retyped, &kinds), po::TranslateError) << "retyped";
  }
  {
    po::CatalogRelation dropped = now;
    dropped.dropped_columns = 1;
    EXPECT_THROW(po::MappedRelation(then, dropped, &kinds), po::TranslateError)
        << "a dropped column: the attnums are not known";
  }
  {
    po::CatalogRelation fewer = now;
    fewer.columns.resize(1);
    EXPECT_THROW(po::MappedRelation(then, fewer, &kinds), po::TranslateError) << "fewer now";
  }
  {
    po::Relation other_key = then;
    other_key.columns[0].key = false;
    other_key.columns[1].key = true;
    EXPECT_THROW(po::MappedRelation(other_key, now, &kinds), po::TranslateError)
        << "another key then";
  }
  {
    po::CatalogRelation generated = now;
    generated.generated_columns = 1;
    EXPECT_THROW(po::MappedRelation(then, generated, &kinds), po::TranslateError)
        << "a generated column (added since): pgoutput does not send it";
  }
  // the catalog as the message describes it, with a dropped column: mapped as it is
  const dblog::v1::Relation same = po::MappedRelation(then, Catalog(), &kinds);
  EXPECT_EQ(same.columns(1).attnum(), 3u);
}

// Issue 23 item 6: a column dropped (then added again under its name) and one retyped since
// the change was written. The catalog now cannot map the message (it has dropped columns); the
// layout the DDL trigger noted before the change lists the message's columns, and gives the
// attnums, types and key the change was written with. The callback is asked with the change's
// LSN and the transaction's 64-bit xid.
TEST(TranslateTest, ALayoutNotedBeforeTheChangeMapsWhatTheCatalogNoLongerCan) {
  Fixture f;
  // now: id:1, v:4 (text, added again), n:5 (bigint); then: id:1, v:2 (text), n:3 (integer)
  f.catalog.columns = {{"id", 23, 23, -1, 1, true, "integer"},
                       {"v", 25, 25, -1, 4, false, "text"},
                       {"n", 20, 20, -1, 5, false, "bigint"}};
  f.catalog.dropped_columns = 2;
  po::Relation r = Announced();
  r.columns = {{true, "id", 23, -1}, {false, "v", 25, -1}, {false, "n", 23, -1}};
  po::Insert i = InsertOf("1", "x");
  i.new_tuple.push_back({po::Datum::Kind::kText, "7"});
  f.Feed(BeginAt(201));
  f.Feed(r, 0);  // the walsender sends a Relation message without an LSN
  EXPECT_THROW(f.Feed(i, 0x950), po::TranslateError) << "the catalog alone cannot map it";
  EXPECT_EQ(f.asked_lsn, 0x950u) << "the LSN of the change the message came for";
  EXPECT_EQ(f.asked_xid, (std::uint64_t{5} << 32) | 201);
  po::CatalogRelation then = Catalog();
  then.columns = {{"id", 23, 23, -1, 1, true, "integer"},
                  {"v", 25, 25, -1, 2, false, "text"},
                  {"n", 23, 23, -1, 3, false, "integer"}};
  then.dropped_columns = 0;
  f.noted = then;
  f.Feed(r, 0);
  f.Feed(i, 0x950);
  ASSERT_EQ(f.events.size(), 3u);
  const auto& rel = f.events[1].relation();
  ASSERT_EQ(rel.columns_size(), 3);
  EXPECT_EQ(rel.columns(1).attnum(), 2u) << "the v dropped since, not the v added again";
  EXPECT_EQ(rel.columns(2).attnum(), 3u);
  EXPECT_EQ(rel.columns(2).type_name(), "integer") << "the type then";
  EXPECT_EQ(f.events[2].change().new_row().values(2).int_value(), 7);
  // a noted layout that does not list the message's columns is not used: the catalog's rules
  then.columns[2].typmod = 4;
  f.noted = then;
  f.Feed(r, 0);
  EXPECT_THROW(f.Feed(i, 0x960), po::TranslateError);
  then.columns[2].typmod = -1;
  then.columns[1].name = "w";
  f.noted = then;
  f.Feed(r, 0);
  EXPECT_THROW(f.Feed(i, 0x960), po::TranslateError);
  f.catalog = Catalog();  // id:1, v:3, one dropped: maps the message of two columns
  f.noted = then;         // a layout of three columns
  f.Feed(Announced(), 0);
  f.Feed(InsertOf("2", "y"), 0x980);
  EXPECT_EQ(f.events.back().change().new_row().values_size(), 2);
  EXPECT_EQ(po::CatalogFor(Announced(), po::CatalogAt{f.catalog, then}).columns.size(), 2u);
}

TEST(TranslateTest, RelationQueryRowsParse) {
  using Cells = std::vector<std::optional<std::string>>;
  std::vector<Cells> rows = {
      {"s", "t", "d", "b", "23", "23", "-1", "1", "t", "integer", "2", "1", "0"},
      {"s", "t", "d", "a", "1043", "1043", "24", "3", "f", "character varying(20)", "1", "1", "0"},
      {"s", "t", "d", "c", "16500", "25", "-1", "4", "f", "code", std::nullopt, "1", "0"}};
  po::CatalogRelation r = po::ParseRelationRows(7, rows);
  EXPECT_EQ(r.schema, "s");
  ASSERT_EQ(r.columns.size(), 3u);
  EXPECT_EQ(r.columns[1].typmod, 24);
  EXPECT_EQ(r.columns[2].base_type_oid, 25u);
  EXPECT_EQ(r.key_columns, (std::vector<std::uint32_t>{1, 0})) << "in key order";
  EXPECT_EQ(r.dropped_columns, 1u);
  rows[0][10] = "3";
  EXPECT_THROW(po::ParseRelationRows(7, rows), po::TranslateError) << "a gap in the key";
  EXPECT_THROW(po::ParseRelationRows(7, {}), po::TranslateError) << "no such table";
  rows[0][10] = "2";
  rows[1][7] = "x";
  EXPECT_THROW(po::ParseRelationRows(7, rows), po::TranslateError) << "attnum not a number";
}

}  // namespace
