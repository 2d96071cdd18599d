// tests/cpp/pgoutput/pgoutput_translate_test.cc: pgoutput mode sends the events the extension
// sends (issue 23 items 1 and 4). One workload (inserts, TOAST values left alone by updates,
// key changes, composite keys in another order than the columns, REPLICA IDENTITY FULL and
// USING INDEX, deletes, truncates, transactional and non-transactional messages, a transaction
// with nothing in the publication, a large transaction spilled to disk) runs on a cluster of
// each major from 15 to 18, read from a pgoutput slot over the replication protocol and mapped
// by pgoutput::Translator, with the catalog read by kRelationQuery.
//   - On 15 the same workload is also read from a slot of the extension's plugin: every event
//     must be byte for byte the same, but for the two documented differences (Begin.end_lsn is
//     0, known at the Commit; Begin.origin_id is 0).
//   - On 16, 17 and 18 the events must be the extension's of 15 with LSNs cleared, and xids,
//     times and oids replaced by the order they first appear in (each server has its own).
// A major whose binaries are absent is skipped with the command that fetches them.
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <map>
#include <string>
#include <vector>

#include "pg_test_util.h"
#include "pgoutput/decoder.h"
#include "pgoutput/translate.h"
#include "server_util.h"

namespace {

namespace po = dblog::pgoutput;
using dblog::test::Cluster;
using dblog::test::PgConn;
using dblog::v1::Event;

constexpr const char* kSchemaSql = R"sql(
  CREATE TYPE mood AS ENUM ('sad', 'happy');
  CREATE DOMAIN code AS varchar(8);
  CREATE TABLE items (id int PRIMARY KEY, name text, qty int, big text, tags text[], m mood,
                      c code, at timestamptz);
  ALTER TABLE items ALTER big SET STORAGE EXTERNAL;
  CREATE TABLE pairs (a int NOT NULL, dropped int, b text NOT NULL, v numeric,
                      PRIMARY KEY (b, a));
  ALTER TABLE pairs DROP COLUMN dropped;
  CREATE TABLE full_rows (id int PRIMARY KEY, v text, big text);
  ALTER TABLE full_rows ALTER big SET STORAGE EXTERNAL;
  ALTER TABLE full_rows REPLICA IDENTITY FULL;
  CREATE TABLE by_index (x int NOT NULL, y int NOT NULL, z text);
  CREATE UNIQUE INDEX by_index_yx ON by_index (y, x);
  ALTER TABLE by_index REPLICA IDENTITY USING INDEX by_index_yx;
  CREATE TABLE outside (id int PRIMARY KEY);
  CREATE TABLE bulk (id int PRIMARY KEY, payload text);
  CREATE PUBLICATION pub FOR TABLE items, pairs, full_rows, by_index, bulk;
)sql";

const std::vector<std::string> kWorkload = {
    "INSERT INTO items VALUES (1, 'one', 5, (SELECT string_agg(md5(g::text), '')"
    " FROM generate_series(1, 300) g), '{a,\"b c\"}', 'happy', 'X1', '2024-02-29 12:00+02'),"
    " (2, NULL, 7, 'small', '{}', 'sad', NULL, 'infinity')",
    "UPDATE items SET qty = qty + 1 WHERE id = 1",  // big stays on disk: unchanged
    "UPDATE items SET id = 10 WHERE id = 2",        // a key change: the old key
    "INSERT INTO pairs VALUES (1, 'x', 1.5), (2, 'y', 'NaN')",
    "UPDATE pairs SET b = 'z' WHERE a = 1",
    "DELETE FROM pairs WHERE a = 2",
    "INSERT INTO full_rows VALUES (1, 'a', (SELECT string_agg(md5(g::text), '')"
    " FROM generate_series(1, 300) g))",
    "UPDATE full_rows SET v = 'b' WHERE id = 1",  // FULL: big filled from the old row
    "DELETE FROM full_rows WHERE id = 1",
    "INSERT INTO by_index VALUES (1, 2, 'p'), (3, 4, 'q')",
    "UPDATE by_index SET z = 'r' WHERE x = 1",
    "UPDATE by_index SET y = 5 WHERE x = 3",
    "DELETE FROM by_index WHERE x = 1",
    "INSERT INTO outside VALUES (1)",  // in no publication: nothing at all
    "BEGIN; SELECT pg_logical_emit_message(true, 'test.tx', 'hello');"
    " INSERT INTO items VALUES (3, 'three'); UPDATE items SET name = 'tres' WHERE id = 3;"
    " INSERT INTO pairs VALUES (3, 'w', 0); COMMIT",
    "SELECT pg_logical_emit_message(false, 'test.nontx', '\\x00ff01'::bytea)",
    "BEGIN; INSERT INTO outside VALUES (2); SELECT pg_logical_emit_message(true, 'test.only',"
    " 'x'); COMMIT",  // a transaction whose only event is a message
    "TRUNCATE items, pairs",
    "INSERT INTO items VALUES (4, 'after truncate')",
    "INSERT INTO bulk SELECT g, repeat('x', 200) FROM generate_series(1, 3000) g",
    "DELETE FROM items WHERE id = 10",
};

// Runs the workload on `sql`'s cluster, after making the slots; ends with "test.end".
void RunWorkload(PgConn& sql, bool with_extension) {
  sql.exec(kSchemaSql);
  sql.exec("SELECT pg_create_logical_replication_slot('po', 'pgoutput')");
  if (with_extension) sql.exec("SELECT pg_create_logical_replication_slot('ext', 'dblog')");
  for (const std::string& s : kWorkload) sql.exec(s);
  sql.exec("SELECT pg_logical_emit_message(false, 'test.end', '')");
  // A non-transactional message does not flush the WAL, and nothing is decoded past the
  // flushed end: a commit flushes it.
  sql.exec("INSERT INTO outside VALUES (3)");
}

// The table's catalog facts, as dblogd will read them: kRelationQuery.
po::CatalogRelation ReadCatalog(PgConn& sql, std::uint32_t oid) {
  const std::string param = std::to_string(oid);
  const char* values[] = {param.c_str()};
  PGresult* res = PQexecParams(sql.raw(), po::kRelationQuery, 1, nullptr, values, nullptr,
                               nullptr, 0);
  std::vector<std::vector<std::optional<std::string>>> rows;
  if (PQresultStatus(res) != PGRES_TUPLES_OK) {
    std::string err = PQresultErrorMessage(res);
    PQclear(res);
    throw std::runtime_error("kRelationQuery: " + err);
  }
  for (int i = 0; i < PQntuples(res); ++i) {
    auto& row = rows.emplace_back();
    for (int j = 0; j < PQnfields(res); ++j)
      row.push_back(PQgetisnull(res, i, j) ? std::nullopt
                                           : std::optional<std::string>(PQgetvalue(res, i, j)));
  }
  PQclear(res);
  return po::ParseRelationRows(oid, rows);
}

// pgoutput mode's events of the slot 'po', as dblogd will read them.
std::vector<Event> PgoutputEvents(const Cluster& cluster, PgConn& sql) {
  const std::string pinned =
      cluster.conninfo() + " options='" + po::OutputSettingsOptions() + "'";
  const std::uint64_t next_xid = std::stoull(sql.scalar("SELECT pg_current_xact_id()::text"));
  dblog::test::Read read = dblog::test::ReadSlot(
      pinned, "po",
      {{"proto_version", "1"}, {"publication_names", "pub"}, {"messages", "true"},
       {"binary", "false"}},
      {1, false});
  EXPECT_EQ(read.error, "");
  po::Translator translator([&](const po::Relation& r, std::uint64_t, std::uint64_t) {
                              return po::CatalogAt{ReadCatalog(sql, r.oid), std::nullopt};
                            },
                            next_xid);
  std::vector<Event> events;
  for (std::size_t i = 0; i < read.messages.size(); ++i) {
    if (const auto* m = std::get_if<po::Message>(&read.messages[i]))
      if (m->prefix == "test.end") break;
    try {
      translator.Translate(read.messages[i], read.wal_starts[i], &events);
    } catch (const po::TranslateError& e) {
      ADD_FAILURE() << "message " << i << " (" << po::MessageName(read.messages[i])
                    << "): " << e.what();
    }
  }
  return events;
}

// The extension's events of the slot 'ext', for the publication's tables.
std::vector<Event> ExtensionEvents(PgConn& sql) {
  std::vector<Event> events;
  for (const auto& r : sql.exec_binary(
           "SELECT data FROM pg_logical_slot_get_binary_changes('ext', NULL, NULL,"
           " 'format', 'binary', 'include_tables',"
           " 'public.items,public.pairs,public.full_rows,public.by_index,public.bulk')")) {
    dblog::v1::Batch batch;
    EXPECT_TRUE(batch.ParseFromString(*r[0]));
    for (auto& e : *batch.mutable_events()) {
      if (e.has_message() && e.message().prefix() == "test.end") return events;
      events.push_back(std::move(e));
    }
  }
  ADD_FAILURE() << "the extension's slot never reached test.end";
  return events;
}

// LSNs cleared (each server writes its own WAL: the 15 comparison checks them exactly), xids,
// times and oids replaced by the order of their first appearance.
std::vector<Event> Normalized(std::vector<Event> events) {
  std::map<std::uint64_t, std::uint64_t> xids, oids;
  std::map<std::int64_t, std::int64_t> times;
  auto ord = [](auto& map, auto v) {
    if (v == 0) return decltype(v){0};
    auto [it, fresh] = map.emplace(v, map.size() + 1);
    return static_cast<decltype(v)>(it->second);
  };
  auto lsn = [](std::uint64_t) { return std::uint64_t{0}; };
  auto oid = [&](std::uint32_t v) { return static_cast<std::uint32_t>(ord(oids, std::uint64_t{v})); };
  for (Event& e : events) {
    if (e.has_begin()) {
      auto* b = e.mutable_begin();
      b->set_xid(ord(xids, b->xid()));
      b->set_commit_lsn(lsn(b->commit_lsn()));
      b->set_end_lsn(lsn(b->end_lsn()));
      b->set_commit_time(ord(times, b->commit_time()));
    } else if (e.has_relation()) {
      auto* r = e.mutable_relation();
      r->set_oid(oid(r->oid()));
      for (auto& c : *r->mutable_columns())
        if (c.type_oid() >= 16384) c.set_type_oid(oid(c.type_oid()));
    } else if (e.has_change()) {
      auto* c = e.mutable_change();
      c->set_relation_oid(oid(c->relation_oid()));
      c->set_commit_lsn(lsn(c->commit_lsn()));
      c->set_lsn(lsn(c->lsn()));
      c->set_xid(ord(xids, c->xid()));
      c->set_commit_time(ord(times, c->commit_time()));
    } else if (e.has_truncate()) {
      auto* t = e.mutable_truncate();
      for (auto& o : *t->mutable_relation_oids()) o = oid(o);
      t->set_commit_lsn(lsn(t->commit_lsn()));
      t->set_lsn(lsn(t->lsn()));
    } else if (e.has_message()) {
      auto* m = e.mutable_message();
      m->set_lsn(lsn(m->lsn()));
      m->set_commit_lsn(lsn(m->commit_lsn()));
      m->set_xid(ord(xids, m->xid()));
    } else if (e.has_commit()) {
      auto* c = e.mutable_commit();
      c->set_commit_lsn(lsn(c->commit_lsn()));
      c->set_end_lsn(lsn(c->end_lsn()));
      c->set_commit_time(ord(times, c->commit_time()));
      c->set_xid(ord(xids, c->xid()));
    }
  }
  return events;
}

void ExpectSameEvents(const std::vector<Event>& expected, const std::vector<Event>& actual,
                      const std::string& what) {
  EXPECT_EQ(expected.size(), actual.size()) << what << ": event counts";
  int shown = 0;
  for (std::size_t i = 0; i < std::min(expected.size(), actual.size()) && shown < 5; ++i) {
    if (expected[i].SerializeAsString() == actual[i].SerializeAsString()) continue;
    ++shown;
    ADD_FAILURE() << what << ": event " << i << " differs\n  extension: "
                  << expected[i].ShortDebugString().substr(0, 600)
                  << "\n  pgoutput:  " << actual[i].ShortDebugString().substr(0, 600);
  }
}

// The documented differences: Begin.end_lsn and Begin.origin_id are 0 in pgoutput mode.
std::vector<Event> WithoutBeginEnds(std::vector<Event> events) {
  for (Event& e : events)
    if (e.has_begin()) {
      e.mutable_begin()->set_end_lsn(0);
      e.mutable_begin()->set_origin_id(0);
    }
  return events;
}

TEST(PgoutputTranslateTest, TheEventsAreTheExtensionsOnEveryMajor) {
  Cluster c15(15);
  ASSERT_EQ(c15.status(), 0) << "tests/pg-cluster.sh start 15 failed";
  PgConn sql15(c15.conninfo());
  RunWorkload(sql15, true);
  const std::vector<Event> extension = ExtensionEvents(sql15);
  const std::vector<Event> pgoutput15 = PgoutputEvents(c15, sql15);
  ASSERT_GT(extension.size(), 3000u);
  ExpectSameEvents(WithoutBeginEnds(extension), pgoutput15, "PostgreSQL 15");
  const std::vector<Event> expected = Normalized(WithoutBeginEnds(extension));

  // What the workload must have produced (so that agreement is not agreement on nothing).
  int changes = 0, truncates = 0, messages = 0, unchanged = 0, old_rows = 0;
  for (const Event& e : pgoutput15) {
    if (e.has_change()) {
      ++changes;
      for (const auto& v : e.change().new_row().values()) unchanged += v.unchanged();
      old_rows += e.change().old_row().values_size() > 0;
    }
    truncates += e.has_truncate();
    messages += e.has_message();
  }
  EXPECT_EQ(changes, 3000 + 20);
  EXPECT_EQ(truncates, 1);
  EXPECT_EQ(messages, 3);
  EXPECT_EQ(unchanged, 1) << "items 1's big value, left alone by the first update";
  EXPECT_EQ(old_rows, 2) << "full_rows' update and delete";

  for (int major : {16, 17, 18}) {
    SCOPED_TRACE("PostgreSQL " + std::to_string(major));
    Cluster cluster(major);
    if (cluster.status() == 3) {
      ADD_FAILURE() << "PostgreSQL " << major
                    << " binaries absent: run scripts/fetch-postgres.sh " << major;
      continue;
    }
    ASSERT_EQ(cluster.status(), 0);
    PgConn sql(cluster.conninfo());
    RunWorkload(sql, false);
    ExpectSameEvents(expected, Normalized(PgoutputEvents(cluster, sql)),
                     "PostgreSQL " + std::to_string(major) + " against the extension on 15");
  }
}

}  // namespace
