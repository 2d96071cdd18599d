// Long values in pieces (change.proto, SplitValue; docs/protocol.md, "Long values"): the plugin
// writes a log Change's long values after it as ValuePiece events, dblogd passes them on (or
// drops them with their Change), the client library puts them together. A client that did not
// ask for pieces gets every value whole.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "dblogd_fixture.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;

class SplitValuesTest : public DblogdTest {
 protected:
  // Events until a Commit at or after `lsn`, every event applied to `replay` too; with `ack`,
  // every Commit acknowledged.
  std::vector<dblog::v1::StreamEvent> ReadEvents(client::Client& c, Replay* replay,
                                                 std::uint64_t lsn, bool ack = false) {
    std::vector<dblog::v1::StreamEvent> events;
    const auto deadline = std::chrono::steady_clock::now() + 300s;
    for (;;) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "no Commit at or after the sentinel within 300 s";
        return events;
      }
      client::Item item;
      if (!c.Next(item)) {
        ADD_FAILURE() << "dblogd closed the stream";
        return events;
      }
      if (!std::holds_alternative<dblog::v1::StreamEvent>(item)) continue;
      auto& event = std::get<dblog::v1::StreamEvent>(item);
      if (replay != nullptr) replay->Apply(event);
      if (ack && event.has_commit()) c.Ack(*client::Client::PositionOf(event));
      const bool done = event.has_commit() && event.commit().commit_lsn() >= lsn;
      events.push_back(std::move(event));
      if (done) return events;
    }
  }

  // A second consumer's slot and bookkeeping row, gone (the fixture clears only its own).
  void DropConsumer(const std::string& name) {
    for (int i = 0;; ++i) {
      try {
        db().exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                  " WHERE slot_name = 'dblog_" + name + "'");
        break;
      } catch (const PgError&) {  // still held by a walsender shutting down
        ASSERT_LT(i, 100);
        std::this_thread::sleep_for(100ms);
      }
    }
    db().exec("DELETE FROM dblog.consumers WHERE name = '" + name + "'");
  }

  client::Client ConnectAs(const std::string& name, bool split_values,
                           std::optional<dblog::v1::Position> resume_after = std::nullopt) {
    client::ConnectOptions o;
    o.port = dblogd_->port();
    o.consumer = name;
    o.resume_after = resume_after;
    o.client_name = "dblogd-test";
    o.io_timeout = 60000ms;
    o.split_values = split_values;
    return client::Client::Connect(o);
  }
};

// Text cut inside multi-byte characters, bytea, a literal (jsonb), several long values in one
// row, a key-changing UPDATE (DELETE + INSERT) and REPLICA IDENTITY FULL: both clients get the
// source's values byte for byte, whether they asked for pieces or not; a consumer resuming
// inside a transaction gets the Changes after its position with their values whole (the pieces
// of the Changes dropped by resume are dropped with them).
TEST_F(SplitValuesTest, LongValuesArriveWholeWithOrWithoutPieces) {
  const std::string s = schema();
  db().exec("CREATE TABLE " + s + ".docs (id int PRIMARY KEY, t text, b bytea, j jsonb, n int)");
  // b and j out of line, uncompressed: an UPDATE that leaves them carries them unchanged
  db().exec("ALTER TABLE " + s + ".docs ALTER b SET STORAGE EXTERNAL, ALTER j SET STORAGE EXTERNAL");
  db().exec("CREATE TABLE " + s + ".full_docs (id int PRIMARY KEY, t text)");
  db().exec("CREATE TABLE " + s + ".keyed (k text PRIMARY KEY, v text)");  // a long key
  db().exec("ALTER TABLE " + s + ".full_docs REPLICA IDENTITY FULL");
  const std::string whole = consumer() + "_w";  // asks for no pieces
  DropConsumer(whole);
  OnScopeExit drop([&] {
    dblogd_->Stop();
    DropConsumer(whole);
  });
  StartDblogd({"--consumer=" + consumer() + "=" + s + ".*", "--consumer=" + whole + "=" + s + ".*",
               "--value-piece-bytes=4096"});
  std::optional<client::Client> pieces(ConnectAs(consumer(), true));
  client::Client plain = ConnectAs(whole, false);
  Replay with_pieces, without;
  ReadUntil(*pieces, with_pieces, 0);
  ReadUntil(plain, without, 0);

  // 'é' and '€' are 2 and 3 bytes: 4096-byte pieces end inside characters
  const std::string long_text = "repeat('aé€', 7000)";
  db().exec("INSERT INTO " + s + ".docs VALUES (1, " + long_text +
            ", decode(repeat('00ff10', 5000), 'hex'), (SELECT jsonb_agg(g) FROM "
            "generate_series(1, 3000) g), 1), (2, 'short', '\\x00', '{}', 2)");
  db().exec("INSERT INTO " + s + ".full_docs VALUES (1, " + long_text + ")");
  // a key column is never split (the emitter would stop the session), its other values are
  db().exec("INSERT INTO " + s + ".keyed VALUES (repeat('k', 6000), repeat('v', 7000))");

  db().exec("BEGIN");
  db().exec("UPDATE " + s + ".docs SET id = 3, t = t || 'x' WHERE id = 1");  // key changed
  db().exec("UPDATE " + s + ".docs SET n = 20 WHERE id = 2");
  db().exec("UPDATE " + s + ".full_docs SET t = t || 'y'");
  db().exec("INSERT INTO " + s + ".docs VALUES (4, repeat('z', 100000), NULL, NULL, 4)");
  db().exec("COMMIT");
  const std::uint64_t until = Sentinel();
  const auto events = ReadEvents(*pieces, &with_pieces, until);
  ReadEvents(plain, &without, until);
  ExpectConverged(with_pieces, {"docs", "full_docs", "keyed"});
  ExpectConverged(without, {"docs", "full_docs", "keyed"});
  // t, b, j of id 1; t of the key change; full_docs' two t; keyed's v; id 4's t
  EXPECT_EQ(pieces->split_values_received(), 8u);
  EXPECT_EQ(plain.split_values_received(), 0u);
  // a plugin message holding a Change with split values is parsed whole (docs/operations.md)
  EXPECT_GE(MetricValue(dblogd_->Metrics(), "dblog_plugin_messages_parsed_whole_total{consumer=\"" +
                                                consumer() + "\"}"),
            6);

  // The multi-statement transaction: resume after its second Change and get the rest again,
  // values whole (the first Change's pieces dropped with it).
  std::vector<dblog::v1::Change> txn;
  for (const auto& e : events)
    if (e.has_change() && e.change().new_row().values_size() > 0 &&
        e.change().relation_oid() == TableOid(db(), s + ".docs") &&
        e.change().new_row().values(0).int_value() == 3)
      for (const auto& f : events)
        if (f.has_change() && f.change().commit_lsn() == e.change().commit_lsn())
          txn.push_back(f.change());
  // the key change (one UPDATE: b and j are unchanged TOAST), UPDATE 2, UPDATE full_docs,
  // INSERT 4
  ASSERT_EQ(txn.size(), 4u);
  pieces.reset();  // the connection closed, nothing acknowledged past the sentinel
  dblog::v1::Position after;
  after.set_commit_lsn(txn[1].commit_lsn());
  after.set_seq(txn[1].seq());
  client::Client resumed = ConnectAs(consumer(), true, after);
  const auto again = ReadEvents(resumed, nullptr, until);
  std::vector<dblog::v1::Change> rest;
  for (const auto& e : again)
    if (e.has_change() && e.change().commit_lsn() == txn[1].commit_lsn()) rest.push_back(e.change());
  ASSERT_EQ(rest.size(), 2u);
  for (std::size_t i = 0; i < rest.size(); ++i)
    EXPECT_EQ(rest[i].SerializeAsString(), txn[i + 2].SerializeAsString()) << i;

  // A row of the extension's own tables is never split either (dblogd reads a repair request
  // whole): a request longer than a piece is carried out, the stream going on.
  std::string keys = "[";
  for (int i = 0; i < 400; ++i)
    keys += (i ? ", " : "") + std::string("{\"id\": ") + std::to_string(i) + "}";
  keys += "]";
  const std::string request = db().scalar("SELECT dblog.repair_keys('" + s + ".docs', '" + keys +
                                          "', '" + consumer() + "')");
  for (auto until_done = std::chrono::steady_clock::now() + 60s;
       db().scalar("SELECT state FROM dblog.requests WHERE id = " + request) != "done";) {
    ASSERT_LT(std::chrono::steady_clock::now(), until_done) << "the repair request stayed open";
    ReadEvents(resumed, nullptr, Sentinel(), /*ack=*/true);  // the request's progress follows
  }
}

// Target 5 of issue 25: memory bounded whatever the row size. A 500 MB value inserted after
// the bootstrap goes through dblogd in pieces; dblogd's peak RSS stays under 100 MB.
TEST_F(SplitValuesTest, A500MbValuePassesThroughDblogdInPieces) {
  const std::string s = schema();
  constexpr long kValueBytes = 500L << 20;
  db().exec("CREATE TABLE " + s + ".big (id int PRIMARY KEY, v text)");
  StartDblogd();
  client::Client c = ConnectAs(consumer(), true);
  Replay replay;
  ReadUntil(c, replay, 0);
  db().exec("INSERT INTO " + s + ".big VALUES (1, repeat('y', " + std::to_string(kValueBytes) +
            "))");
  const std::uint64_t until = Sentinel();
  const auto events = ReadEvents(c, &replay, until);
  const long peak_mb = dblogd_->PeakRssKb() / 1024;
  std::cerr << "dblogd peak RSS: " << peak_mb << " MB for a " << (kValueBytes >> 20)
            << " MB value\n";
  bool seen = false;
  for (const auto& e : events) {
    if (!e.has_change() || e.change().relation_oid() != TableOid(db(), s + ".big")) continue;
    seen = true;
    ASSERT_EQ(e.change().new_row().values_size(), 2);
    const std::string& v = e.change().new_row().values(1).text_value();
    EXPECT_EQ(v.size(), static_cast<std::size_t>(kValueBytes));
    EXPECT_EQ(v.find_first_not_of('y'), std::string::npos);
  }
  EXPECT_TRUE(seen);
  EXPECT_EQ(c.split_values_received(), 1u);
  EXPECT_LT(peak_mb, 100);
}

}  // namespace
}  // namespace dblog::test
