// tests/cpp/publish/batch_resume_test.cc: batch boundaries across failures, deterministically:
// the real dblogd and the real Publisher (in process), writing into a log in memory that keeps
// JetStream's rules (a Nats-Msg-Id already stored is acknowledged and not stored again, checked
// before the expected last sequence; a message is stored only at the next sequence). Attempts
// are cut in the middle of a batch, each attempt batches differently (so a resend never has the
// stored message's boundaries), and a message in flight at a failure lands after the next
// attempt read the tail (a PubAck lost in a node's failover). The log must hold every event once
// and replay into the source, read whole and table by table.
#include <atomic>
#include <future>
#include <limits>
#include <random>
#include <set>
#include <thread>

#include "client/position.h"
#include "client/publish/batch.h"
#include "client/publish/broker.h"
#include "client/publish/publisher.h"
#include "dblogd_fixture.h"
#include "oracle_workload.h"

namespace dblog::test {
namespace {

using publish::BrokerError;
using publish::LogMessage;

class MemoryLog : public publish::Broker {
 public:
  struct Stored {
    LogMessage message;
    std::uint64_t relation_seq;
  };

  // The attempt fails at the publish of its `fail_at`-th message (a kill, a lost connection);
  // with `late`, at the first message of the control subject from there on, and that message
  // was in flight: it is stored after the next attempt read the tail.
  std::uint64_t fail_at = 0;  // 0: never
  bool late = false;
  // Once a Commit (or BootstrapEnd) at or after it is stored, `stop` is interrupted: the
  // attempt then confirms, acknowledges and returns.
  std::atomic<std::uint64_t> end_lsn{0};  // (set by another thread in the last phase)
  std::shared_ptr<client::Interrupter> stop;

  std::uint64_t duplicates = 0;  // publishes acknowledged as duplicates
  std::uint64_t refused = 0;     // publishes refused for the expected sequence
  // late messages the next attempt sent again from their first event: the same message, or
  // cut at other boundaries
  std::uint64_t late_resent = 0, late_cut_elsewhere = 0;
  std::vector<Stored> log;

  publish::StoredTail Open() override {
    publish::StoredTail tail;
    tail.last_seq = log.size();
    for (auto it = log.rbegin(); it != log.rend(); ++it) {
      if (!it->message.position) continue;
      tail.position = it->message.position;
      tail.part = it->message.part;
      tail.parts = it->message.parts;
      break;
    }
    published_ = 0;
    if (in_flight_) {  // lands now, behind the tail this attempt resumes from
      late_first_ = FirstPosition(in_flight_->message);
      late_id_ = in_flight_->message.msg_id;
      Store(std::move(*in_flight_), in_flight_seq_);
      in_flight_.reset();
    }
    return tail;
  }

  void Publish(const LogMessage& message, std::uint64_t seq, std::uint64_t relation_seq) override {
    if (late_first_ &&
        message.kind != publish::EventKind::kRelation) {  // (Relations come again first)
      const auto first = FirstPosition(message);
      if (first && client::ComparePositions(*first, *late_first_) == 0)
        ++(message.msg_id == late_id_ ? late_resent : late_cut_elsewhere);
      late_first_.reset();
    }
    // (late: the failure waits for a Commit, alone or with the next Begin, on the control
    // subject: what a resend can carry in a message cut elsewhere. On a table's subject the
    // next attempt writes the table's Relation first, which the expected sequence refuses.)
    if (fail_at && ++published_ >= fail_at &&
        (!late || (message.position && message.relation_oid == 0 && message.parts == 1 &&
                   (message.kind == publish::EventKind::kCommit ||
                    message.msg_id.find("..") != std::string::npos)))) {
      fail_at = 0;
      if (late) {
        in_flight_ = Stored{message, relation_seq};
        in_flight_seq_ = seq;
      }
      throw BrokerError("the attempt fails here", true);
    }
    Store(Stored{message, relation_seq}, seq);
  }
  void Flush() override {}
  std::size_t pending() const override { return 0; }
  std::string TopicOf(const LogMessage& m) const override {
    return m.control() ? "control" : m.table;
  }

  static std::optional<dblog::v1::Position> FirstPosition(const LogMessage& m) {
    std::vector<std::string_view> bytes;
    if (!publish::SplitDelimited(m.payload, bytes) || bytes.empty()) return std::nullopt;
    dblog::v1::StreamEvent e;
    e.ParseFromArray(bytes.front().data(), static_cast<int>(bytes.front().size()));
    return client::PositionOf(e);
  }

 private:
  void Store(Stored stored, std::uint64_t seq) {
    // JetStream's order: the id first (a duplicate is acknowledged), then the expected sequence
    if (!stored.message.msg_id.empty() && ids_.count(stored.message.msg_id)) {
      ++duplicates;
      return;
    }
    if (seq != log.size() + 1) {
      ++refused;
      throw BrokerError("wrong last sequence " + std::to_string(log.size()) + ", expected " +
                            std::to_string(seq - 1),
                        true);
    }
    if (!stored.message.msg_id.empty()) ids_.insert(stored.message.msg_id);
    const bool end = stored.message.position &&
                     (stored.message.kind == publish::EventKind::kCommit ||
                      stored.message.kind == publish::EventKind::kBootstrapEnd) &&
                     stored.message.position->commit_lsn() >= end_lsn;
    log.push_back(std::move(stored));
    if (end && end_lsn) stop->Interrupt();
  }

  std::set<std::string> ids_;  // the duplicate window: forever
  std::uint64_t published_ = 0;
  std::optional<Stored> in_flight_;
  std::uint64_t in_flight_seq_ = 0;
  std::optional<dblog::v1::Position> late_first_;
  std::string late_id_;
};

class PublishBatchResumeTest : public DblogdTest {};

TEST_F(PublishBatchResumeTest, AttemptsCutInsideBatchesLeaveEveryEventOnce) {
  const std::string s = schema();
  CreateWorkloadTables(db(), s);
  StartDblogd({"--chunk-size=50"});
  MemoryLog log;
  std::mt19937_64 rng(1603);
  const std::vector<std::size_t> batch_sizes = {3, 7, 1, 16, 5, 64, 2, 1024};
  int attempt = 0, failures = 0;
  // Around a late message (attempts 0, 4, 8, ... of a phase), one event per message and then
  // many, or many and then one: Commit and the next Begin are one message in one attempt and
  // two in the other.
  const auto batch_size = [&](int i) -> std::size_t {
    if (i % 4 == 0) return i % 8 == 0 ? 1 : 1024;
    if (i % 4 == 1) return i % 8 == 1 ? 1024 : 1;
    return batch_sizes[static_cast<std::size_t>(attempt) % batch_sizes.size()];
  };
  // Runs attempts until the log holds `end_lsn`; the first `failing` of them fail a few
  // messages in, every fourth with its last message in flight.
  const auto run_until = [&](std::uint64_t end_lsn, int failing) {
    log.end_lsn = end_lsn;
    for (int i = 0;; ++i, ++attempt) {
      ASSERT_LT(i, 200) << "the log never reached " << log.end_lsn.load();
      publish::PublisherOptions o;
      o.connect.port = dblogd_->port();
      o.connect.consumer = consumer();
      o.connect.io_timeout = std::chrono::milliseconds(30000);
      o.prefix = "dblog." + consumer();
      o.batch = publish::BatchLimits{batch_size(i), 1 << 20};
      log.fail_at = i < failing ? 5 + rng() % 40 : 0;
      log.late = i < failing && i % 4 == 0;
      log.stop = std::make_shared<client::Interrupter>();
      publish::Publisher publisher(o, log.stop, [](const std::string&) {});
      try {
        if (publisher.Run(log)) {
          ++attempt;
          return;
        }
      } catch (const BrokerError& e) {
        ++failures;
      }
    }
  };
  // the bootstrap (of empty tables and the sentinel), before the workload: it is then streamed
  ASSERT_NO_FATAL_FAILURE(run_until(Sentinel(), 0));

  const WorkloadOptions workload{1500, true, true};
  for (int i = 0; i < 30; ++i) RandomTransaction(db(), s, rng, workload);
  // a transaction much larger than any batch, spanning two tables in runs of a few rows
  db().exec("BEGIN");
  for (int run = 0; run < 60; ++run) {
    const int n = 1 + run % 7;
    if (run % 2)
      db().exec("INSERT INTO " + s +
                ".t_int (id, v, s) SELECT g, g, 'mixed' FROM generate_series(" +
                std::to_string(900000 + run * 10) + ", " +
                std::to_string(900000 + run * 10 + n - 1) + ") g");
    else
      db().exec("INSERT INTO " + s + ".t_comp (a, b) SELECT 'mixed', g FROM generate_series(" +
                std::to_string(run * 10) + ", " + std::to_string(run * 10 + n - 1) + ") g");
  }
  db().exec("COMMIT");
  const std::string repair =
      db().scalar("SELECT dblog.repair_range('" + s + ".t_int', '{\"id\": 0}', '{\"id\": 400}')");
  for (int i = 0; i < 10; ++i) RandomTransaction(db(), s, rng, workload);
  // and many small transactions: a Commit and the next Begin are one message or two
  for (int i = 0; i < 300; ++i)
    db().exec("INSERT INTO " + s + ".t_int (id, v) VALUES (" + std::to_string(800000 + i) + ", " +
              std::to_string(i) + ")");
  ASSERT_NO_FATAL_FAILURE(run_until(Sentinel(), 40));
  // and on until the repair's chunks are in the log (done: acknowledged past its window)
  for (int i = 0; db().scalar("SELECT state FROM dblog.requests WHERE id = " + repair) != "done";
       ++i) {
    ASSERT_LT(i, 100) << "the repair never finished";
    // each attempt long enough for a window: dblogd reads the chunks on a thread of its own
    // while the stream goes on, so a sentinel committed before the attempt would end it before
    // a window's high watermark; this one comes 300 ms in
    auto sentinel = std::async(std::launch::async, [&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      log.end_lsn = Sentinel();
    });
    ASSERT_NO_FATAL_FAILURE(run_until(std::numeric_limits<std::uint64_t>::max(), 0));
    sentinel.get();
  }
  std::printf(
      "batch resume: %d attempts, %d failed, %llu duplicates, %llu refused, late "
      "messages sent again from their first event: %llu the same, %llu cut elsewhere; "
      "%zu messages\n",
      attempt, failures, static_cast<unsigned long long>(log.duplicates),
      static_cast<unsigned long long>(log.refused),
      static_cast<unsigned long long>(log.late_resent),
      static_cast<unsigned long long>(log.late_cut_elsewhere), log.log.size());
  EXPECT_GE(failures, 30);
  // the case batch ids exist for happened: a late message whose first event the next attempt sent
  // again, cut elsewhere (and refused for its sequence, never taken for a duplicate)
  EXPECT_GT(log.late_cut_elsewhere, 0u);

  // Read the log whole (part 1 of fanned-out events) and table by table.
  Replay full;
  std::map<std::string, Replay> tables;
  std::optional<dblog::v1::Position> last;
  std::optional<std::uint64_t> open_txn;  // the commit LSN of the Begin read last
  std::uint64_t batched = 0;
  for (std::size_t i = 0; i < log.log.size(); ++i) {
    const LogMessage& m = log.log[i].message;
    std::vector<std::string_view> bytes;
    ASSERT_TRUE(publish::SplitDelimited(m.payload, bytes)) << i;
    if (bytes.size() > 1) ++batched;
    for (const auto b : bytes) {
      dblog::v1::StreamEvent e;
      ASSERT_TRUE(e.ParseFromArray(b.data(), static_cast<int>(b.size())));
      if (e.has_change() || e.has_chunk_begin()) {  // Dblog-Relation-Seq names its Relation
        const std::uint64_t rseq = log.log[i].relation_seq;
        ASSERT_TRUE(rseq >= 1 && rseq <= i + 1)
            << "message " << i + 1 << " " << publish::EventKindName(m.kind);
        EXPECT_TRUE((log.log[rseq - 1].message.kind == publish::EventKind::kRelation) &&
                    log.log[rseq - 1].message.relation_oid == m.relation_oid)
            << "message " << i + 1 << "'s Relation sequence " << rseq;
      }
      if (const auto p = client::PositionOf(e); p && m.part == 1) {
        if (last) {
          EXPECT_GT(client::ComparePositions(*p, *last), 0)
              << "message " << i + 1 << ": " << publish::PositionText(*p) << " after "
              << publish::PositionText(*last);
        }
        last = p;
      }
      if (m.part == 1) {
        // every transaction whole: a Begin, then its Commit (a Begin or a Commit lost or stored
        // twice shows here, where the positions' order may not)
        if (e.has_begin()) {
          EXPECT_FALSE(open_txn) << "message " << i + 1 << ": a Begin inside a transaction";
          open_txn = e.begin().commit_lsn();
        } else if (e.has_commit()) {
          EXPECT_EQ(open_txn, std::optional<std::uint64_t>(e.commit().commit_lsn()))
              << "message " << i + 1 << ": a Commit without its Begin";
          open_txn.reset();
        }
        full.Apply(e);
      }
      if (!m.table.empty()) tables[m.table].Apply(e);
    }
  }
  EXPECT_GT(batched, 0u);
  EXPECT_GT(full.chunks_seen(), 0u);
  std::printf("batch resume: %llu messages of several events, %llu repair chunks\n",
              static_cast<unsigned long long>(batched),
              static_cast<unsigned long long>(full.chunks_seen()));
  ExpectConverged(full, {"t_int", "t_comp", "t_uuid", "sentinel"});
  for (const std::string t : {"t_int", "t_comp", "t_uuid"}) {
    SCOPED_TRACE("reader of table " + t + " alone");
    ExpectConverged(tables[s + "." + t], {t});
  }
}

}  // namespace
}  // namespace dblog::test
