// tests/cpp/pgoutput/pgoutput_server_test.cc: the pgoutput decoder (sidecar/pgoutput/) against
// the real pgoutput of every server major dblog targets: 15 (Debian's) and 16, 17, 18
// (scripts/fetch-postgres.sh). For each major the test starts its own cluster
// (tests/pg-cluster.sh), creates a publication and pgoutput slots, runs one workload, reads each
// slot over the replication protocol (pg::ReplicationStream, CopyBoth as dblogd reads) and checks
// every decoded message against what the workload did: relations, column names, types and
// typmods, values in text and in binary mode (against the server's own text and binary output
// of the same rows), unchanged TOAST markers, old keys and old rows, truncate flags,
// transactional and non-transactional messages, and large transactions streamed (protocol 2+)
// with their commit and aborts (protocol 4's parallel abort fields on 16+). It also pins which
// protocol versions and options each major accepts (docs/pgoutput.md's table).
// A major whose binaries are absent is skipped with the command that fetches them.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "pg_test_util.h"
#include "pgoutput/decoder.h"
#include "server_util.h"

namespace {

using dblog::pgoutput::Datum;
using dblog::pgoutput::Decoder;
using dblog::pgoutput::LogicalMessage;
using dblog::test::Cluster;
using dblog::test::PgConn;
using dblog::test::Read;
using dblog::test::ReadSlot;
using dblog::test::Rows;
using dblog::test::StartError;
namespace po = dblog::pgoutput;

// The id column of bulk as text, from its text or its binary (int4send) form.
std::string IdText(const Datum& d) {
  if (d.kind != Datum::Kind::kBinary) return std::string(d.bytes);
  if (d.bytes.size() != 4) return "bad int4 of " + std::to_string(d.bytes.size()) + " bytes";
  std::uint32_t v = 0;
  for (char c : d.bytes) v = (v << 8) | static_cast<unsigned char>(c);
  return std::to_string(static_cast<std::int32_t>(v));
}

std::string Kind(const Datum& d) { return std::string(1, static_cast<char>(d.kind)); }

// The tuple against one row of the server's own output of the same values, text or binary.
// `unchanged`: columns that must be 'u'; a SQL NULL must be 'n'.
void ExpectTuple(const po::Tuple& tuple, const dblog::test::Row& row, bool binary,
                 const std::set<std::size_t>& unchanged, const std::string& where) {
  ASSERT_EQ(tuple.size(), row.size()) << where;
  for (std::size_t i = 0; i < row.size(); ++i) {
    SCOPED_TRACE(where + ", column " + std::to_string(i));
    if (unchanged.count(i)) {
      EXPECT_EQ(Kind(tuple[i]), "u");
    } else if (!row[i]) {
      EXPECT_EQ(Kind(tuple[i]), "n");
    } else {
      EXPECT_EQ(Kind(tuple[i]), binary ? "b" : "t");
      EXPECT_EQ(std::string(tuple[i].bytes), *row[i]);
    }
  }
}

// The old key of a DEFAULT replica identity: the key column set, the others 'n'.
void ExpectKeyOnly(const po::Tuple& tuple, std::size_t ncols, const std::string& key,
                   const std::string& where) {
  ASSERT_EQ(tuple.size(), ncols) << where;
  EXPECT_EQ(Kind(tuple[0]), "t") << where;  // checked in text mode only
  EXPECT_EQ(std::string(tuple[0].bytes), key) << where;
  for (std::size_t i = 1; i < ncols; ++i) EXPECT_EQ(Kind(tuple[i]), "n") << where << " col " << i;
}

class PgoutputServerTest : public ::testing::TestWithParam<int> {};

TEST_P(PgoutputServerTest, EveryMessageOfTheWorkloadDecodesAsTheServerWroteIt) {
  const int major = GetParam();
  Cluster cluster(major);
  if (cluster.status() == 3) {
    GTEST_SKIP() << "PostgreSQL " << major << " binaries absent: run scripts/fetch-postgres.sh "
                 << major;
  }
  ASSERT_EQ(cluster.status(), 0) << "tests/pg-cluster.sh start " << major << " failed";
  PgConn sql(cluster.conninfo());
  ASSERT_EQ(sql.scalar("SELECT current_setting('server_version_num')::int / 10000"),
            std::to_string(major));
  const int max_proto = major >= 16 ? 4 : 3;  // 15: 3, 16-18: 4 (pinned below)

  sql.exec(R"(
    CREATE TYPE mood AS ENUM ('sad', 'happy');
    CREATE TABLE items (id int PRIMARY KEY, name text, qty int, price numeric(10,2),
                        ts timestamptz, tags text[], m mood, big text);
    ALTER TABLE items ALTER big SET STORAGE EXTERNAL;
    CREATE TABLE full_rows (id int PRIMARY KEY, v text);
    ALTER TABLE full_rows REPLICA IDENTITY FULL;
    CREATE TABLE bulk (id int PRIMARY KEY, payload text);
    CREATE PUBLICATION pub FOR TABLE items, full_rows, bulk;
  )");
  for (const char* slot : {"s_v1", "s_text", "s_binary", "s_parallel"}) {
    if (std::string(slot) == "s_parallel" && major < 16) continue;
    sql.exec(std::string("SELECT pg_create_logical_replication_slot('") + slot + "', 'pgoutput')");
  }
  // One transaction of several statements, returning what `xid_query` returned.
  auto transaction = [&](const std::vector<std::string>& before, const std::string& xid_query,
                         const std::vector<std::string>& after) {
    sql.exec("BEGIN");
    for (const auto& s : before) sql.exec(s);
    std::string xid = sql.scalar(xid_query);
    for (const auto& s : after) sql.exec(s);
    return xid;
  };
  const std::string xid_query = "SELECT txid_current() % 4294967296";

  const std::string item_cols = "id, name, qty, price, ts, tags, m, big";
  auto text_rows = [&](const std::string& q) { return sql.exec(q); };
  auto binary_rows = [&](const std::string& q) { return sql.exec_binary(q); };
  std::map<std::string, Rows> text, binary;  // expected rows at each step, by step name
  auto snapshot = [&](const std::string& step, const std::string& query) {
    text[step] = text_rows(query);
    binary[step] = binary_rows(query);
  };

  // 1: inserts, one with a value stored out of line (TOAST, not compressed)
  sql.exec(
      "INSERT INTO items VALUES (1, 'one', 5, 1.50, '2024-01-02 03:04:05+00', '{a,b}',"
      " 'happy', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 300) g)),"
      " (2, NULL, 7, 'NaN', 'infinity', '{}', 'sad', 'small')");
  snapshot("insert", "SELECT " + item_cols + " FROM items ORDER BY id");
  // 2: an update that leaves the TOASTed value alone
  sql.exec("UPDATE items SET qty = qty + 1 WHERE id = 1");
  snapshot("update_toast", "SELECT " + item_cols + " FROM items WHERE id = 1");
  // 3: a key change
  sql.exec("UPDATE items SET id = 10 WHERE id = 2");
  snapshot("update_key", "SELECT " + item_cols + " FROM items WHERE id = 10");
  // 4: REPLICA IDENTITY FULL: the old row in update and delete
  sql.exec("INSERT INTO full_rows VALUES (1, 'a')");
  sql.exec("UPDATE full_rows SET v = 'b' WHERE id = 1");
  sql.exec("DELETE FROM full_rows WHERE id = 1");
  // 5: a delete by key
  sql.exec("DELETE FROM items WHERE id = 10");
  // 6: a transactional message with a change, 7: a non-transactional one
  sql.exec(
      "BEGIN; SELECT pg_logical_emit_message(true, 'test.tx', 'hello');"
      " INSERT INTO full_rows VALUES (2, 'c'); COMMIT");
  sql.exec("SELECT pg_logical_emit_message(false, 'test.nontx', '\\x00ff01'::bytea)");
  // 8: truncate
  sql.exec("TRUNCATE full_rows RESTART IDENTITY");
  // 9: a large transaction (well past logical_decoding_work_mem = 64kB): streamed in protocol 2+
  const std::string big_xid =
      transaction({"INSERT INTO bulk SELECT g, repeat('x', 200) FROM generate_series(1, 3000) g"},
                  xid_query, {"COMMIT"});
  // 10: a large transaction rolled back: Stream Abort of the whole transaction
  const std::string aborted_xid = transaction(
      {"INSERT INTO bulk SELECT g, repeat('y', 200) FROM generate_series(3001, 6000) g"}, xid_query,
      {"ROLLBACK"});
  // 11: a large transaction with a subtransaction rolled back: Stream Abort of the subxid
  const std::string sub_xid = transaction(
      {"INSERT INTO bulk SELECT g, repeat('z', 200) FROM generate_series(6001, 9000) g",
       "SAVEPOINT s",
       "INSERT INTO bulk SELECT g, repeat('w', 200) FROM generate_series(9001, 12000) g"},
      xid_query, {"ROLLBACK TO s", "COMMIT"});
  sql.exec("SELECT pg_logical_emit_message(false, 'test.end', '')");

  const std::string items_oid = sql.scalar("SELECT 'items'::regclass::oid");
  const std::string full_oid = sql.scalar("SELECT 'full_rows'::regclass::oid");
  const std::string bulk_oid = sql.scalar("SELECT 'bulk'::regclass::oid");
  const std::string mood_oid = sql.scalar("SELECT 'mood'::regtype::oid");

  struct Mode {
    std::string slot;
    int proto;
    bool binary;
    std::string streaming;  // "" (not streamed), "on", "parallel"
  };
  std::vector<Mode> modes = {{"s_v1", 1, false, ""},
                             {"s_text", max_proto, false, "on"},
                             {"s_binary", max_proto, true, "on"}};
  if (major >= 16) modes.push_back({"s_parallel", 4, false, "parallel"});

  for (const Mode& mode : modes) {
    SCOPED_TRACE("PostgreSQL " + std::to_string(major) + ", slot " + mode.slot + ", proto " +
                 std::to_string(mode.proto));
    std::vector<std::pair<std::string, std::string>> options = {
        {"proto_version", std::to_string(mode.proto)},
        {"publication_names", "pub"},
        {"messages", "true"},
        {"binary", mode.binary ? "true" : "false"}};
    if (!mode.streaming.empty()) options.push_back({"streaming", mode.streaming});
    Read read = ReadSlot(cluster.conninfo(), mode.slot, options,
                         {mode.proto, mode.streaming == "parallel"});
    ASSERT_EQ(read.error, "");

    // Walk the stream as a consumer would: transactions (plain or streamed) applied in
    // commit order, streamed changes held per top-level xid until their Stream Commit.
    std::map<std::string, const po::Relation*> relations;  // by name
    std::vector<const po::Insert*> inserts;
    std::vector<const po::Update*> updates;
    std::vector<const po::Delete*> deletes;
    std::vector<const po::Truncate*> truncates;
    std::vector<const po::Message*> messages;
    std::vector<const po::Type*> types;
    std::vector<std::pair<bool, const po::Message*>> message_in_txn;
    std::map<std::uint32_t, std::vector<std::pair<std::uint32_t, const po::Insert*>>> streamed;
    std::set<std::string> bulk_ids;  // committed ids of bulk, as text
    std::vector<po::StreamStart> stream_starts;
    std::vector<po::StreamCommit> stream_commits;
    std::vector<po::StreamAbort> stream_aborts;
    std::uint32_t current_stream = 0;
    std::uint64_t begin_lsn = 0;
    int commits = 0;
    bool in_txn = false;
    std::vector<const po::Insert*> txn_bulk;
    for (const LogicalMessage& lm : read.messages) {
      if (auto* m = std::get_if<po::Begin>(&lm)) {
        begin_lsn = m->final_lsn;
        in_txn = true;
        txn_bulk.clear();
      } else if (auto* m = std::get_if<po::Commit>(&lm)) {
        EXPECT_EQ(m->commit_lsn, begin_lsn) << "Begin's final_lsn is the commit's LSN";
        EXPECT_GT(m->end_lsn, m->commit_lsn);
        ++commits;
        in_txn = false;
        for (auto* i : txn_bulk) bulk_ids.insert(IdText(i->new_tuple[0]));
      } else if (auto* m = std::get_if<po::Relation>(&lm)) {
        relations[m->relname] = m;
        EXPECT_EQ(m->nspname, "public");
        EXPECT_EQ(m->xid.has_value(), current_stream != 0);
      } else if (auto* m = std::get_if<po::Type>(&lm)) {
        types.push_back(m);
      } else if (auto* m = std::get_if<po::Insert>(&lm)) {
        EXPECT_EQ(m->xid.has_value(), current_stream != 0);
        if (std::to_string(m->relation_oid) == bulk_oid) {
          if (current_stream != 0) {
            streamed[current_stream].push_back({*m->xid, m});
          } else {
            txn_bulk.push_back(m);
          }
        } else {
          inserts.push_back(m);
        }
      } else if (auto* m = std::get_if<po::Update>(&lm)) {
        updates.push_back(m);
      } else if (auto* m = std::get_if<po::Delete>(&lm)) {
        deletes.push_back(m);
      } else if (auto* m = std::get_if<po::Truncate>(&lm)) {
        truncates.push_back(m);
      } else if (auto* m = std::get_if<po::Message>(&lm)) {
        messages.push_back(m);
        message_in_txn.push_back({in_txn, m});
      } else if (auto* m = std::get_if<po::StreamStart>(&lm)) {
        EXPECT_FALSE(mode.streaming.empty()) << "streamed without streaming on";
        EXPECT_EQ(m->first_segment, streamed.count(m->xid) == 0);
        streamed[m->xid];  // a block may carry no change of bulk
        current_stream = m->xid;
        stream_starts.push_back(*m);
      } else if (std::get_if<po::StreamStop>(&lm)) {
        current_stream = 0;
      } else if (auto* m = std::get_if<po::StreamCommit>(&lm)) {
        stream_commits.push_back(*m);
        for (auto& [xid, i] : streamed[m->xid]) bulk_ids.insert(IdText(i->new_tuple[0]));
        streamed.erase(m->xid);
      } else if (auto* m = std::get_if<po::StreamAbort>(&lm)) {
        stream_aborts.push_back(*m);
        auto& changes = streamed[m->xid];
        if (m->subxid == m->xid) {
          streamed.erase(m->xid);
        } else {
          std::vector<std::pair<std::uint32_t, const po::Insert*>> kept;
          for (auto& c : changes) {
            if (c.first != m->subxid) kept.push_back(c);
          }
          changes = kept;
        }
        EXPECT_EQ(m->abort_lsn.has_value(), mode.streaming == "parallel");
        if (m->abort_lsn) {
          EXPECT_GT(*m->abort_lsn, 0u);
          EXPECT_NE(*m->abort_time, 0);
        }
      } else {
        ADD_FAILURE() << "unexpected " << po::MessageName(lm);
      }
    }

    // Relations: names, types, typmods, key flags, replica identity.
    ASSERT_TRUE(relations.count("items") && relations.count("full_rows") &&
                relations.count("bulk"));
    const po::Relation& items = *relations["items"];
    EXPECT_EQ(std::to_string(items.oid), items_oid);
    EXPECT_EQ(items.replica_identity, 'd');
    EXPECT_EQ(relations["full_rows"]->replica_identity, 'f');
    EXPECT_EQ(std::to_string(relations["full_rows"]->oid), full_oid);
    const std::vector<std::string> names = {"id", "name", "qty", "price", "ts", "tags", "m", "big"};
    const std::vector<std::string> type_oids = {"23",   "25",   "23",     "1700",
                                                "1184", "1009", mood_oid, "25"};
    ASSERT_EQ(items.columns.size(), names.size());
    for (std::size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(items.columns[i].name, names[i]);
      EXPECT_EQ(std::to_string(items.columns[i].type_oid), type_oids[i]) << names[i];
      EXPECT_EQ(items.columns[i].key, i == 0) << names[i];
      EXPECT_EQ(items.columns[i].typmod, i == 3 ? ((10 << 16) | 2) + 4 : -1) << names[i];
    }
    // full_rows: every column is part of the identity under REPLICA IDENTITY FULL
    for (const auto& c : relations["full_rows"]->columns) EXPECT_TRUE(c.key) << c.name;
    ASSERT_EQ(types.size(), 1u) << "the enum's Type message";
    EXPECT_EQ(std::to_string(types[0]->oid), mood_oid);
    EXPECT_EQ(types[0]->nspname, "public");
    EXPECT_EQ(types[0]->name, "mood");

    // Values: items' inserts (1, 2) then full_rows' (1, 'a') and (2, 'c').
    const auto& expect = mode.binary ? binary : text;
    ASSERT_EQ(inserts.size(), 4u);
    ExpectTuple(inserts[0]->new_tuple, expect.at("insert")[0], mode.binary, {}, "insert 1");
    ExpectTuple(inserts[1]->new_tuple, expect.at("insert")[1], mode.binary, {}, "insert 2");
    EXPECT_GT(expect.at("insert")[0][7]->size(), 8000u) << "the value that goes out of line";
    ASSERT_EQ(updates.size(), 3u);
    // the TOASTed value left alone by the update: 'u', and no old tuple
    EXPECT_EQ(updates[0]->old_kind, 0);
    EXPECT_FALSE(updates[0]->old_tuple.has_value());
    ExpectTuple(updates[0]->new_tuple, expect.at("update_toast")[0], mode.binary, {7},
                "update leaving TOAST");
    // the key change: the old key
    EXPECT_EQ(updates[1]->old_kind, 'K');
    ASSERT_TRUE(updates[1]->old_tuple.has_value());
    if (!mode.binary) ExpectKeyOnly(*updates[1]->old_tuple, 8, "2", "old key");
    ExpectTuple(updates[1]->new_tuple, expect.at("update_key")[0], mode.binary, {},
                "update of the key");
    // REPLICA IDENTITY FULL: the whole old row
    EXPECT_EQ(updates[2]->old_kind, 'O');
    ASSERT_TRUE(updates[2]->old_tuple.has_value());
    if (!mode.binary) {
      ExpectTuple(*updates[2]->old_tuple, {"1", "a"}, false, {}, "full old row");
      ExpectTuple(updates[2]->new_tuple, {"1", "b"}, false, {}, "full new row");
      ExpectTuple(inserts[3]->new_tuple, {"2", "c"}, false, {}, "insert in the message's txn");
    }
    ASSERT_EQ(deletes.size(), 2u);
    EXPECT_EQ(deletes[0]->old_kind, 'O');
    if (!mode.binary) ExpectTuple(deletes[0]->old_tuple, {"1", "b"}, false, {}, "full delete");
    EXPECT_EQ(deletes[1]->old_kind, 'K');
    if (!mode.binary) ExpectKeyOnly(deletes[1]->old_tuple, 8, "10", "delete by key");
    ASSERT_EQ(truncates.size(), 1u);
    EXPECT_EQ(truncates[0]->relation_oids,
              std::vector<std::uint32_t>{static_cast<std::uint32_t>(std::stoul(full_oid))});
    EXPECT_TRUE(truncates[0]->restart_seqs);
    EXPECT_FALSE(truncates[0]->cascade);

    // Messages: the transactional one inside its transaction, the others outside any.
    ASSERT_EQ(messages.size(), 3u);
    EXPECT_TRUE(message_in_txn[0].first);
    EXPECT_TRUE(messages[0]->transactional);
    EXPECT_EQ(messages[0]->prefix, "test.tx");
    EXPECT_EQ(messages[0]->content, "hello");
    EXPECT_FALSE(message_in_txn[1].first);
    EXPECT_FALSE(messages[1]->transactional);
    EXPECT_EQ(messages[1]->prefix, "test.nontx");
    EXPECT_EQ(messages[1]->content, std::string("\x00\xff\x01", 3));
    EXPECT_GT(messages[1]->lsn, 0u);
    EXPECT_EQ(messages[2]->prefix, "test.end");

    // The large transactions: 1..3000 committed, 3001..6000 aborted, 6001..9000 committed
    // without the rolled-back subtransaction's 9001..12000.
    std::set<std::string> want_bulk;
    for (int i = 1; i <= 3000; ++i) want_bulk.insert(std::to_string(i));
    for (int i = 6001; i <= 9000; ++i) want_bulk.insert(std::to_string(i));
    EXPECT_EQ(bulk_ids.size(), want_bulk.size());
    EXPECT_TRUE(bulk_ids == want_bulk) << "the committed rows of bulk";
    if (mode.streaming.empty()) {
      EXPECT_TRUE(stream_starts.empty());
      EXPECT_EQ(commits, 11) << "every committed transaction as Begin..Commit";
    } else {
      ASSERT_GE(stream_starts.size(), 2u);
      std::set<std::string> committed, aborted_whole, aborted_sub;
      for (const auto& c : stream_commits) {
        committed.insert(std::to_string(c.xid));
        EXPECT_GT(c.end_lsn, c.commit_lsn);
      }
      for (const auto& a : stream_aborts) {
        (a.subxid == a.xid ? aborted_whole : aborted_sub).insert(std::to_string(a.xid));
      }
      EXPECT_TRUE(committed.count(big_xid)) << "Stream Commit of the large transaction";
      EXPECT_TRUE(committed.count(sub_xid)) << "Stream Commit of the one with a subtransaction";
      // 18 looks the transaction up before streaming it (ReorderBufferCheckAndTruncateAbortedTXN)
      // and drops one that has already aborted, as here, where the slot is read afterwards.
      std::set<std::string> started;
      for (const auto& s : stream_starts) started.insert(std::to_string(s.xid));
      if (major >= 18) {
        EXPECT_FALSE(started.count(aborted_xid)) << "an already aborted transaction streamed";
        EXPECT_FALSE(aborted_whole.count(aborted_xid));
      } else {
        EXPECT_TRUE(aborted_whole.count(aborted_xid)) << "Stream Abort of the rolled-back one";
      }
      EXPECT_TRUE(aborted_sub.count(sub_xid)) << "Stream Abort of the rolled-back savepoint";
      EXPECT_TRUE(streamed.empty()) << "a streamed transaction neither committed nor aborted";
    }
  }

  // What each major accepts (docs/pgoutput.md).
  auto start_error = [&](std::vector<std::pair<std::string, std::string>> options) {
    options.push_back({"publication_names", "pub"});
    return StartError(cluster.conninfo(), "s_text", options);
  };
  EXPECT_EQ(start_error({{"proto_version", std::to_string(max_proto)}}), "");
  EXPECT_NE(start_error({{"proto_version", std::to_string(max_proto + 1)}}).find("proto_version"),
            std::string::npos);
  const std::string origin = start_error({{"proto_version", "1"}, {"origin", "none"}});
  if (major >= 16) {
    EXPECT_EQ(origin, "") << "origin filtering";
  } else {
    EXPECT_NE(origin.find("origin"), std::string::npos) << origin;
  }
  const std::string parallel = start_error({{"proto_version", "3"}, {"streaming", "parallel"}});
  EXPECT_NE(parallel, "") << "streaming 'parallel' below protocol 4";
  // Failover slots (synchronized to standbys): the fifth argument, 17+.
  bool failover_ok = true;
  try {
    sql.exec(
        "SELECT pg_create_logical_replication_slot('s_failover', 'pgoutput', false, false,"
        " true)");
  } catch (const std::exception&) {
    failover_ok = false;
  }
  EXPECT_EQ(failover_ok, major >= 17);
}

INSTANTIATE_TEST_SUITE_P(Majors, PgoutputServerTest, ::testing::Values(15, 16, 17, 18),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "PostgreSQL" + std::to_string(info.param);
                         });

}  // namespace
