// tests/cpp/publish/kafka_test.cc: `dblog publish --to kafka://` against librdkafka's mock
// cluster (no Kafka broker package exists on Debian 12), run by kafka_mock_broker in a process
// of its own, with the real dblogd and the real `dblog publish` as child processes. The whole
// log is read back with a plain librdkafka consumer, and replayed three ways, each of which
// must equal the source table by table:
//   - the whole log: every partition of every topic merged by (Dblog-Position, Dblog-Part),
//     one record per position, each table record read with the Relation its
//     Dblog-Relation-Offset names;
//   - each table's topic alone, the same way;
//   - each partition alone, in offset order, deleting at a range chunk's end only keys it holds.
// Every reader also checks that no partition holds a position (and part) twice.
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <set>
#include <thread>
#include <tuple>

#include "client/position.h"
#include "client/publish/kafka/layout.h"
#include "client/publish/layout.h"
#include "common/json.h"
#include "dblogd_fixture.h"
#include "oracle_workload.h"
#include "fake_schema_registry.h"
#include "publish_e2e.h"
#include "publish_process.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;

// kafka_mock_broker as a child process, driven through its stdin and stdout.
class MockCluster {
 public:
  MockCluster() {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      execl(KAFKA_MOCK_BROKER_PATH, KAFKA_MOCK_BROKER_PATH, "3", nullptr);
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = fdopen(in[1], "w");
    from_ = fdopen(out[0], "r");
    const std::string first = ReadLine();
    if (first.rfind("bootstrap ", 0) != 0) throw std::runtime_error("mock broker: " + first);
    bootstrap_ = first.substr(10);
  }
  ~MockCluster() {
    if (to_) std::fclose(to_);
    if (from_) std::fclose(from_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& bootstrap() const { return bootstrap_; }
  std::string url() const { return "kafka://" + bootstrap_; }
  // "ok" or "error ..."
  std::string Command(const std::string& line) {
    std::fprintf(to_, "%s\n", line.c_str());
    std::fflush(to_);
    return ReadLine();
  }

 private:
  std::string ReadLine() {
    char buf[4096];
    if (!std::fgets(buf, sizeof buf, from_)) return "(mock broker gone)";
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
  }
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  std::string bootstrap_;
};

struct Record {
  std::string topic;
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::optional<std::string> key;
  std::optional<std::string> value;  // nullopt: a tombstone
  std::map<std::string, std::string> headers;
  std::string header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Everything the cluster holds in the topics of `prefix`, partition by partition, in offset
// order.
std::map<std::pair<std::string, std::int32_t>, std::vector<Record>> ReadAll(
    const std::string& bootstrap, const std::string& prefix) {
  std::map<std::pair<std::string, std::int32_t>, std::vector<Record>> out;
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), errstr, sizeof errstr);
  rd_kafka_conf_set(conf, "group.id", "test-reader", errstr, sizeof errstr);
  rd_kafka_conf_set(conf, "enable.partition.eof", "true", errstr, sizeof errstr);
  rd_kafka_conf_set(conf, "allow.auto.create.topics", "false", errstr, sizeof errstr);
  rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
  const rd_kafka_metadata_t* md = nullptr;
  EXPECT_EQ(rd_kafka_metadata(rk, 1, nullptr, &md, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
  const publish::KafkaLayout layout(prefix);
  for (int i = 0; md && i < md->topic_cnt; ++i) {
    const std::string topic = md->topics[i].topic;
    if (!layout.Owns(topic)) continue;
    rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
    for (int p = 0; p < md->topics[i].partition_cnt; ++p) {
      std::int64_t low = 0, high = 0;
      EXPECT_EQ(rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &low, &high, 10000),
                RD_KAFKA_RESP_ERR_NO_ERROR);
      // the mock cluster keeps at most 5 MB (or 100,000 message sets) per partition, dropping
      // the oldest beyond: a test log must stay below that
      EXPECT_EQ(low, 0) << topic << " [" << p << "]: the mock cluster dropped its start";
      auto& records = out[{topic, p}];
      if (high == 0) continue;
      rd_kafka_consume_start(rkt, p, low);
      const auto deadline = std::chrono::steady_clock::now() + 60s;
      while (records.empty() || records.back().offset + 1 < high) {
        if (std::chrono::steady_clock::now() > deadline) {
          ADD_FAILURE() << "reading " << topic << " [" << p << "] timed out";
          break;
        }
        rd_kafka_message_t* m = rd_kafka_consume(rkt, p, 500);
        if (!m) continue;
        if (m->err) {
          rd_kafka_message_destroy(m);
          continue;
        }
        Record r;
        r.topic = topic;
        r.partition = p;
        r.offset = m->offset;
        if (m->key) r.key = std::string(static_cast<const char*>(m->key), m->key_len);
        if (m->payload) r.value = std::string(static_cast<const char*>(m->payload), m->len);
        rd_kafka_headers_t* hdrs = nullptr;
        if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
          const char* name;
          const void* value;
          std::size_t size;
          for (std::size_t h = 0; !rd_kafka_header_get_all(hdrs, h, &name, &value, &size); ++h)
            r.headers[name] = std::string(static_cast<const char*>(value), size);
        }
        rd_kafka_message_destroy(m);
        records.push_back(std::move(r));
      }
      rd_kafka_consume_stop(rkt, p);
    }
    rd_kafka_topic_destroy(rkt);
  }
  if (md) rd_kafka_metadata_destroy(md);
  rd_kafka_destroy(rk);
  return out;
}

using Log = std::map<std::pair<std::string, std::int32_t>, std::vector<Record>>;

dblog::v1::StreamEvent EventOf(const Record& r) {
  dblog::v1::StreamEvent ev;
  if (!r.value || !ev.ParseFromString(*r.value))
    ADD_FAILURE() << r.topic << " [" << r.partition << "] @" << r.offset << " is not a StreamEvent";
  return ev;
}

// (position, part) of a record; a BootstrapBegin (which has no position) sorts at
// (consistent_point - 1, 0), just before its rows; nullopt for Relations.
std::optional<std::tuple<std::uint64_t, std::uint32_t, std::uint32_t>> SortKey(const Record& r) {
  std::uint32_t part = 1;
  if (const auto p = publish::ParsePartText(r.header(publish::kPartHeader))) part = p->first;
  if (const auto pos = publish::ParsePositionText(r.header(publish::kPositionHeader)))
    return std::make_tuple(pos->commit_lsn(), pos->seq(), part);
  if (r.header(publish::kEventHeader) == "bootstrap_begin") {
    const auto ev = EventOf(r);
    return std::make_tuple(ev.bootstrap_begin().consistent_point() - 1, 0u, part);
  }
  return std::nullopt;
}

// What the merged readers found, besides their Replay.
struct MergeReport {
  std::uint64_t applied = 0;
  std::uint64_t relation_offsets_checked = 0;
  std::uint64_t commits_checked = 0;
};

// Replays the records of `partitions` merged by position: one record per position (the lowest
// part), each table record with the Relation its Dblog-Relation-Offset names, in its own
// partition. Also checks the Dblog-Ends watermark of control records: at each Commit, every
// record of its transaction lies below the ends announced so far.
MergeReport ReplayMerged(const Log& log,
                         const std::set<std::pair<std::string, std::int32_t>>& partitions,
                         Replay& replay) {
  MergeReport report;
  std::vector<const Record*> records;
  for (const auto& where : partitions) {
    const auto it = log.find(where);
    if (it == log.end()) continue;
    for (const Record& r : it->second)
      if (SortKey(r)) records.push_back(&r);
  }
  std::stable_sort(records.begin(), records.end(),
                   [](const Record* a, const Record* b) { return *SortKey(*a) < *SortKey(*b); });
  std::optional<std::pair<std::uint64_t, std::uint32_t>> last;
  std::map<std::pair<std::string, std::int32_t>, std::int64_t> ends;
  // records per transaction commit_lsn, for the watermark check: each record's first copy in
  // its partition only. A resend after an error writes a transaction's records again, after
  // the first Commit's Dblog-Ends were announced; readers drop those copies by position
  // (docs/publish.md), and only the first copies must lie below the first Commit's ends.
  std::map<std::uint64_t, std::vector<const Record*>> by_commit;
  std::set<std::tuple<std::string, std::int32_t, std::uint64_t, std::uint32_t, std::uint32_t>>
      first_copies;
  for (const Record* r : records) {
    const auto k = *SortKey(*r);
    if (r->header(publish::kEventHeader) != "bootstrap_begin" && r->topic.size() > 8 &&
        r->topic.substr(r->topic.size() - 8) != ".control" &&
        first_copies
            .emplace(r->topic, r->partition, std::get<0>(k), std::get<1>(k), std::get<2>(k))
            .second)
      by_commit[std::get<0>(k)].push_back(r);
  }
  for (const Record* r : records) {
    const auto k = *SortKey(*r);
    const std::pair<std::uint64_t, std::uint32_t> pos{std::get<0>(k), std::get<1>(k)};
    const std::string event = r->header(publish::kEventHeader);
    if (!r->header(publish::kEndsHeader).empty()) {
      std::stringstream in(r->header(publish::kEndsHeader));
      std::string item;
      while (std::getline(in, item, ',')) {
        const std::size_t b = item.rfind(':'), a = item.rfind(':', b - 1);
        auto& e = ends[{item.substr(0, a), std::stoi(item.substr(a + 1, b - a - 1))}];
        e = std::max<std::int64_t>(e, std::stoll(item.substr(b + 1)));
      }
    }
    if (event == "commit" && r->topic.size() > 8 &&
        r->topic.substr(r->topic.size() - 8) == ".control") {
      ++report.commits_checked;
      for (const Record* t : by_commit[pos.first]) {
        const auto e = ends.find({t->topic, t->partition});
        if (e == ends.end() || t->offset >= e->second) {
          ADD_FAILURE() << "the Commit at " << pos.first << " does not cover " << t->topic << " ["
                        << t->partition << "] @" << t->offset << " in its Dblog-Ends";
          break;
        }
      }
    }
    // one record per position: the lowest part (the whole event; copies are identical)
    if (last && pos == *last) continue;
    last = pos;
    const std::string roff = r->header(publish::kRelationOffsetHeader);
    if (!roff.empty()) {
      const auto& same = log.at({r->topic, r->partition});
      const std::int64_t o = std::stoll(roff);
      const auto rel =
          std::find_if(same.begin(), same.end(), [&](const Record& x) { return x.offset == o; });
      if (rel == same.end() || rel->header(publish::kEventHeader) != "relation") {
        ADD_FAILURE() << r->topic << " @" << r->offset << ": " << publish::kRelationOffsetHeader
                      << " " << roff << " is not a Relation";
      } else {
        replay.Apply(EventOf(*rel));
        ++report.relation_offsets_checked;
      }
    } else if (event == "change") {
      ADD_FAILURE() << r->topic << " @" << r->offset << ": a change without "
                    << publish::kRelationOffsetHeader;
    }
    try {
      replay.Apply(EventOf(*r));
      ++report.applied;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "replaying " << r->topic << " [" << r->partition << "] @" << r->offset
                    << ": " << e.what();
    }
  }
  return report;
}

class KafkaPublishTest : public PublishE2eTest {
 protected:
  // The records of `topic`, in position order, read again until there are at least `count`
  // (a test failure, and what there is, after 60 s).
  std::vector<Record> ReadTopic(MockCluster& cluster, const std::string& topic,
                                PublishProcess& publisher, std::size_t count) {
    std::vector<Record> records;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      publisher.Supervise();
      records.clear();
      for (const auto& [where, rs] : ReadAll(cluster.bootstrap(), Prefix()))
        if (where.first == topic) records.insert(records.end(), rs.begin(), rs.end());
      if (records.size() >= count) break;
      EXPECT_LT(std::chrono::steady_clock::now(), deadline)
          << records.size() << " records; " << publisher.Log();
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(300ms);
    }
    std::sort(records.begin(), records.end(),
              [](const Record& a, const Record& b) { return SortKey(a) < SortKey(b); });
    return records;
  }
  std::string Topic(const std::string& table) const {
    return publish::KafkaLayout(Prefix()).TableTopic(schema(), table);
  }
  // The mock cluster has no controller, so `dblog publish` cannot create topics there: the
  // test creates them (the control topic with one partition, table topics with three).
  // t_int gets 8 partitions: the mock cluster keeps at most 5 MB per partition, and t_int's
  // TOASTed rows are most of the log.
  static std::int32_t Partitions(const std::string& table) { return table == "t_int" ? 8 : 3; }
  void CreateTopics(MockCluster& cluster, const std::vector<std::string>& tables) {
    ASSERT_EQ(cluster.Command("topic " + Prefix() + ".control 1"), "ok");
    for (const auto& t : tables)
      ASSERT_EQ(cluster.Command("topic " + Topic(t) + " " + std::to_string(Partitions(t))), "ok");
  }
  std::vector<std::string> PublishArgs(const MockCluster& cluster,
                                       std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), "--partitions=3");
    return PublishE2eTest::PublishArgs(cluster.url(), extra);
  }
  // Waits until the control topic's last record is a Commit (or BootstrapEnd) at or after lsn.
  void WaitForLog(const MockCluster& cluster, std::uint64_t lsn, PublishProcess& publisher) {
    const auto deadline = std::chrono::steady_clock::now() + 180s;
    for (;;) {
      publisher.Supervise();
      const Log log = ReadAll(cluster.bootstrap(), Prefix());
      const auto it = log.find({Prefix() + ".control", 0});
      if (it != log.end() && !it->second.empty()) {
        const Record& r = it->second.back();
        const auto p = publish::ParsePositionText(r.header(publish::kPositionHeader));
        const std::string event = r.header(publish::kEventHeader);
        if (p && p->commit_lsn() >= lsn && (event == "commit" || event == "bootstrap_end")) return;
      }
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "the log never caught up; " << publisher.Log() << "\n"
          << dblogd_->log();
      std::this_thread::sleep_for(300ms);
    }
  }
  // No partition holds a (position, part) twice, nor one out of order.
  void ExpectEachPositionOncePerPartition(const Log& log) {
    for (const auto& [where, records] : log) {
      std::optional<std::tuple<std::uint64_t, std::uint32_t, std::uint32_t>> prev;
      for (const Record& r : records) {
        if (!publish::ParsePositionText(r.header(publish::kPositionHeader))) continue;
        const auto k = *SortKey(r);
        if (prev && !(*prev < k)) {
          ADD_FAILURE() << where.first << " [" << where.second << "] @" << r.offset << ": "
                        << r.header(publish::kPositionHeader) << " part " << std::get<2>(k)
                        << " is not after the record before it (stored twice?)";
          return;
        }
        prev = k;
      }
    }
  }
  // damage_request: a repair of t_comp whose first chunk a partition's reader meets with a row
  // it should not have (a key of its own partition the source never had): the chunk bounds in
  // every partition must make each reader delete it.
  void ExpectReadersConverge(const MockCluster& cluster, const std::vector<std::string>& tables,
                             const std::vector<std::string>& partition_tables,
                             const std::string& damage_request = "") {
    const Log log = ReadAll(cluster.bootstrap(), Prefix());
    // how close each partition came to the mock's 5 MB (so that a workload change shows its
    // margin before it costs a flaky run)
    std::size_t fullest = 0;
    std::string fullest_name;
    for (const auto& [where, records] : log) {
      std::size_t bytes = 0;
      for (const Record& r : records) {
        bytes += (r.value ? r.value->size() : 0) + (r.key ? r.key->size() : 0);
        for (const auto& [k, v] : r.headers) bytes += k.size() + v.size();
      }
      if (bytes > fullest) {
        fullest = bytes;
        fullest_name = where.first + " [" + std::to_string(where.second) + "]";
      }
    }
    std::printf("fullest partition: %s, %zu bytes of records (the mock keeps 5 MB)\n",
                fullest_name.c_str(), fullest);
    OnScopeExit dump([&] {
      // on failure, the whole log as a reader sees it, for the post-mortem
      if (!HasFailure()) return;
      const std::string path = "/tmp/dblog-kafka-test-" + consumer() + ".log";
      std::ofstream out(path);
      for (const auto& [where, records] : log)
        for (const Record& r : records)
          out << r.topic << " [" << r.partition << "] @" << r.offset << " "
              << r.header(publish::kEventHeader) << " " << r.header(publish::kPositionHeader)
              << " part=" << r.header(publish::kPartHeader)
              << " rel=" << r.header(publish::kRelationOffsetHeader)
              << " ends=" << r.header(publish::kEndsHeader) << "\n";
      ADD_FAILURE() << "the log read back: " << path;
    });
    ExpectEachPositionOncePerPartition(log);
    std::set<std::pair<std::string, std::int32_t>> all;
    for (const auto& [where, records] : log) all.insert(where);
    {
      SCOPED_TRACE("reader of the whole log");
      Replay full;
      const MergeReport r = ReplayMerged(log, all, full);
      EXPECT_GT(r.relation_offsets_checked, 0u);
      EXPECT_GT(r.commits_checked, 0u);
      ExpectConverged(full, tables);
    }
    for (const auto& t : tables) {
      SCOPED_TRACE("reader of table " + t + "'s topic alone");
      std::set<std::pair<std::string, std::int32_t>> mine;
      for (const auto& where : all)
        if (where.first == Topic(t)) mine.insert(where);
      EXPECT_EQ(mine.size(), static_cast<std::size_t>(Partitions(t))) << Topic(t);
      Replay one;
      ReplayMerged(log, mine, one);
      ExpectConverged(one, {t});
    }
    for (const auto& t : partition_tables) {
      SCOPED_TRACE("readers of each partition of " + t + " alone");
      std::map<std::string, std::string> merged;
      int damaged_partitions = 0;
      const std::uint32_t oid = TableOid(db(), schema() + "." + t);
      for (const auto& [where, records] : log) {
        if (where.first != Topic(t)) continue;
        Replay part;
        bool damaged = false;
        for (const Record& r : records) {
          try {
            const dblog::v1::StreamEvent ev = EventOf(r);
            if (!damaged && !damage_request.empty() && ev.has_chunk_begin() &&
                std::to_string(ev.chunk_begin().request_id()) == damage_request) {
              // a sink that gained a row of this partition ('k0', b): its key sorts inside
              // the repair's ranges, and only this partition's chunk copy can remove it
              const auto rows = SourceTable(db(), schema() + "." + t);
              ASSERT_FALSE(rows.empty());
              dblog::v1::Row row;
              row.ParseFromString(rows.begin()->second);
              dblog::v1::Row key;
              for (std::int64_t b = 1000000000000;; ++b) {
                key.Clear();
                key.add_values()->set_text_value("k0");
                key.add_values()->set_int_value(b);
                if (publish::KeyPartition(key.SerializeAsString(), Partitions(t)) == where.second)
                  break;
              }
              row.mutable_values(0)->set_text_value("k0");
              row.mutable_values(1)->set_int_value(key.values(1).int_value());
              part.Put(oid, key, row);
              damaged = true;
              ++damaged_partitions;
            }
            part.Apply(ev);
          } catch (const std::exception& e) {
            ADD_FAILURE() << "replaying " << r.topic << " [" << r.partition << "] @" << r.offset
                          << ": " << e.what();
            break;
          }
        }
        for (const auto& [key, row] : part.Table(oid)) {
          if (publish::KeyPartition(key, Partitions(t)) != where.second)
            ADD_FAILURE() << "partition " << where.second << " holds a key of partition "
                          << publish::KeyPartition(key, Partitions(t));
          merged[key] = row;
        }
      }
      if (!damage_request.empty() && t == "t_comp") {
        EXPECT_EQ(damaged_partitions, Partitions(t));
      }
      const auto source = SourceTable(db(), schema() + "." + t);
      EXPECT_EQ(source.size(), merged.size());
      EXPECT_TRUE(source == merged) << t << ": the union of the partitions differs from the source";
    }
  }
};

// The end-to-end test: the randomized workload with repairs while `dblog publish` and dblogd
// are SIGKILLed and restarted, a broker is taken down and brought back, and the mock cluster
// fails produce requests (retried by the idempotent producer, or fatal to the producer: an
// attempt that ends and resumes from the tails). Every partition must hold every position
// once, and the three kinds of readers must equal the source.
TEST_F(KafkaPublishTest, KilledPublisherDblogdAndBrokerErrorsLeaveEveryEventOnce) {
  MockCluster cluster;
  const std::string s = schema();
  CreateWorkloadTables(db(), s);
  ASSERT_NO_FATAL_FAILURE(CreateTopics(cluster, {"t_int", "t_comp", "t_uuid", "sentinel"}));
  std::mt19937_64 rng(1701);
  for (int i = 0; i < 40; ++i) RandomTransaction(db(), s, rng, kPublishWorkload);
  // (the mock cluster keeps 5 MB per partition: every whole-table repair of t_int copies it
  // all again)
  db().exec("INSERT INTO " + s +
            ".t_int (id, v, s) SELECT g, g, 'bulk' FROM "
            "generate_series(1000000, 1002000) g");
  StartDblogd({"--chunk-size=300"});
  PublishProcess publisher(PublishArgs(cluster));
  publisher.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  publisher.Kill();  // in the bootstrap, most likely
  publisher.Start();

  // At most kTransactions, paced over the 20 s below: the control topic's one partition gets
  // two records per transaction (with Dblog-Ends, up to a few hundred bytes each), and the mock
  // keeps 5 MB per partition. Unpaced, a fast machine wrote past that (CI: "the mock cluster
  // dropped its start").
  constexpr int kTransactions = 1500;
  WorkloadWriter writer(conninfo(), s, 7, kTransactions, 10ms);
  Disturbances done;
  done.publish_kills = 1;  // that one
  int broker_errors = 0;
  const std::vector<std::function<void()>> broker = {
      [&] {
        // Produce (API key 0) refused: NOT_ENOUGH_REPLICAS (19) is retried by the producer;
        // OUT_OF_ORDER_SEQUENCE_NUMBER (45) is fatal to it (the attempt ends, the next one
        // reads the tails)
        const int code = rng() % 2 ? 19 : 45;
        EXPECT_EQ(cluster.Command("error 0 " + std::to_string(code) + " 3"), "ok");
        ++broker_errors;
      },
      [&] {
        const int id = 1 + static_cast<int>(rng() % 3);
        EXPECT_EQ(cluster.Command("down " + std::to_string(id)), "ok");
        std::this_thread::sleep_for(std::chrono::milliseconds(500 + rng() % 3000));
        EXPECT_EQ(cluster.Command("up " + std::to_string(id)), "ok");
        ++broker_errors;
      }};
  // (whole-table repairs of t_comp and t_uuid; t_int's TOASTed rows, copied whole again, would
  // outgrow the mock cluster's 5 MB per partition: range repairs of t_int only)
  Disturb(rng, 20s, publisher, {"t_comp", "t_uuid"}, broker, done);
  writer.Stop();
  // the repair whose chunks the partition readers meet damaged (ExpectReadersConverge)
  db().exec("INSERT INTO " + s + ".t_comp VALUES ('k0', 1, '{}', now()) ON CONFLICT DO NOTHING");
  const std::string damage_request = db().scalar("SELECT dblog.repair('" + s + ".t_comp')");
  done.requests.push_back(damage_request);
  ASSERT_NO_FATAL_FAILURE(WaitForRequests(done.requests, publisher));
  ASSERT_NO_FATAL_FAILURE(WaitForLog(cluster, Sentinel(), publisher));
  publisher.Kill();
  EXPECT_EQ(publisher.exits(), 0) << publisher.Log();
  const std::string plog = publisher.Log();
  const auto count = [&](const std::string& what) {
    int n = 0;
    for (std::size_t at = plog.find(what); at != std::string::npos; at = plog.find(what, at + 1))
      ++n;
    return n;
  };
  std::printf(
      "kafka publish e2e: %d publish kills, %d dblogd kills, %d broker errors, %zu "
      "repairs; %d attempts of dblog publish, %d of them after an error\n",
      done.publish_kills, done.dblogd_kills, broker_errors, done.requests.size(),
      count("resuming from the consumer's"), count("; retrying in"));
  // per partition: t_int's key moves carry unchanged TOAST values whose old row lives in the
  // old key's partition (docs/publish.md): read by merged readers only
  ExpectReadersConverge(cluster, {"t_int", "t_comp", "t_uuid", "sentinel"},
                        {"t_comp", "t_uuid", "sentinel"}, damage_request);
  if (HasFailure()) ADD_FAILURE() << plog;
}

// `dblog publish` SIGKILLed twice while one large transaction is being written: the log's
// partitions end inside it, each at its own position; the next run (dblogd resends from the
// consumer's acknowledged position) drops, partition by partition, what is already there,
// including the transaction's Begin on the control topic. Every partition must hold each
// position once and the readers must converge.
TEST_F(KafkaPublishTest, KilledInsideATransactionResumesInsideIt) {
  MockCluster cluster;
  const std::string s = schema();
  CreateWorkloadTables(db(), s);
  ASSERT_NO_FATAL_FAILURE(CreateTopics(cluster, {"t_int", "t_comp", "t_uuid", "sentinel"}));
  StartDblogd();
  PublishProcess publisher(PublishArgs(cluster));
  publisher.Start();
  ASSERT_NO_FATAL_FAILURE(WaitForLog(cluster, Sentinel(), publisher));
  // records in a topic, from its partitions' high watermarks (cheap enough to poll while the
  // transaction is being written)
  char errstr[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", cluster.bootstrap().c_str(), errstr, sizeof errstr);
  rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof errstr);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
  OnScopeExit destroy([&] { rd_kafka_destroy(rk); });
  const auto records_of = [&](const std::string& topic) {
    std::int64_t n = 0;
    for (std::int32_t p = 0; p < Partitions("t_int"); ++p) {
      std::int64_t low = 0, high = 0;
      if (rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &low, &high, 5000) == 0) n += high;
    }
    return static_cast<std::size_t>(n);
  };
  const std::size_t before = records_of(Topic("t_int"));
  // (the mock cluster keeps 5 MB per partition: 40,000 short rows over 8 partitions)
  db().exec("INSERT INTO " + s +
            ".t_int (id, v, s) SELECT g, g, 'one transaction' FROM "
            "generate_series(1, 40000) g");
  for (int kill = 0; kill < 2; ++kill) {
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (records_of(Topic("t_int")) < before + 8000u * static_cast<std::size_t>(kill + 1)) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << publisher.Log();
      std::this_thread::sleep_for(1ms);
    }
    publisher.Kill();
    publisher.Start();
  }
  ASSERT_NO_FATAL_FAILURE(WaitForLog(cluster, Sentinel(), publisher));
  publisher.Kill();
  const std::string log = publisher.Log();
  // it was killed inside the transaction: the run after the first kill found the log ending
  // before the transaction's Commit (the last position's seq below 40001)
  const std::size_t at = log.find("the last position ");
  ASSERT_NE(at, std::string::npos) << log;
  const auto last = publish::ParsePositionText(log.substr(at + 18, log.find(')', at) - at - 18));
  ASSERT_TRUE(last) << log;
  EXPECT_LT(last->seq(), 40001u) << "killed after the transaction ended; " << log;
  ExpectReadersConverge(cluster, {"t_int", "sentinel"}, {"sentinel"});
  if (HasFailure()) ADD_FAILURE() << log;
}

// --format debezium-json into Kafka: the record key is the key's JSON, the value Debezium's
// envelope; a delete is followed by a tombstone (null value) with the same key; a key change
// is the old key's delete and tombstone, then a create of the new key; a truncate (written with
// skipped.operations=none: Debezium's default skips them) is in every partition of the table's
// topic.
TEST_F(KafkaPublishTest, DebeziumJsonRecordsAreKeyedWithTombstones) {
  MockCluster cluster;
  const std::string s = schema();
  db().exec("CREATE TABLE " + s + ".items (id int PRIMARY KEY, name text)");
  db().exec("INSERT INTO " + s + ".items VALUES (1, 'one')");
  ASSERT_NO_FATAL_FAILURE(CreateTopics(cluster, {"items", "sentinel"}));
  StartDblogd();
  PublishProcess publisher(PublishArgs(
      cluster, {"--format=debezium-json", "--debezium-option=skipped.operations=none"}));
  publisher.Start();
  const std::string topic = Topic("items");
  const auto read_until = [&](std::size_t count) {
    return ReadTopic(cluster, topic, publisher, count);
  };
  read_until(1);
  db().exec("INSERT INTO " + s + ".items VALUES (2, 'two')");
  db().exec("UPDATE " + s + ".items SET name = 'TWO' WHERE id = 2");
  db().exec("UPDATE " + s + ".items SET id = 3 WHERE id = 2");
  // a key change within one partition ({"id":4} and {"id":5} are both in partition 2 of 3):
  // all three records are written there too
  db().exec("INSERT INTO " + s + ".items VALUES (4, 'four')");
  db().exec("UPDATE " + s + ".items SET id = 5 WHERE id = 4");
  db().exec("DELETE FROM " + s + ".items WHERE id = 3");
  db().exec("TRUNCATE " + s + ".items");
  // r, c, u, (d, tombstone, c), c, (d, tombstone, c), d, tombstone, t in each of 3 partitions
  const std::vector<Record> records = read_until(15);
  ASSERT_EQ(records.size(), 15u);
  const auto op = [](const Record& r) {
    if (!r.value) return std::string("tombstone");
    const std::size_t a = r.value->find("\"op\":\"");
    return a == std::string::npos ? std::string("?") : r.value->substr(a + 6, 1);
  };
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"r", R"({"id":1})"}, {"c", R"({"id":2})"},         {"u", R"({"id":2})"},
      {"d", R"({"id":2})"}, {"tombstone", R"({"id":2})"}, {"c", R"({"id":3})"},
      {"c", R"({"id":4})"}, {"d", R"({"id":4})"},         {"tombstone", R"({"id":4})"},
      {"c", R"({"id":5})"}, {"d", R"({"id":3})"},         {"tombstone", R"({"id":3})"}};
  ASSERT_EQ(publish::KeyPartition(R"({"id":4})", 3), publish::KeyPartition(R"({"id":5})", 3));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(op(records[i]), expected[i].first) << i;
    EXPECT_EQ(records[i].key.value_or("(none)"), expected[i].second) << i;
    EXPECT_EQ(records[i].partition, publish::KeyPartition(expected[i].second, 3)) << i;
  }
  std::set<std::int32_t> truncated;
  for (std::size_t i = expected.size(); i < records.size(); ++i) {
    EXPECT_EQ(op(records[i]), "t");
    EXPECT_FALSE(records[i].key);
    truncated.insert(records[i].partition);
  }
  EXPECT_EQ(truncated.size(), 3u);
  EXPECT_NE(records[1].value->find(R"("after":{"id":2,"name":"two"})"), std::string::npos)
      << *records[1].value;
  publisher.Kill();
  EXPECT_EQ(publisher.exits(), 0) << publisher.Log();
}

// `--format debezium-avro --schema-registry URL` end to end: the records Debezium's change
// events make (a bootstrap r, c, u, a key change as d, tombstone, c, a d and its tombstone, a t
// in each of the topic's 3 partitions) carry each key and value in Confluent's wire format
// (magic byte 0, the id the registry gave, the Avro body); each decodes with Apache Avro's own
// library (avro_check.py --decode, python3-avro) under the writer schema the registry received
// for "<topic>-key" or "<topic>-value"; keyed records are in the murmur2 partition of their
// key's bytes (what Confluent's serializer and Kafka's default partitioner do); the dblog
// headers stay.
TEST_F(KafkaPublishTest, DebeziumAvroRecordsDecodeWithTheSchemasTheRegistryReceived) {
  MockCluster cluster;
  FakeSchemaRegistry registry;
  const std::string s = schema();
  db().exec("CREATE TABLE " + s + ".items (id int PRIMARY KEY, name text, amount numeric(10,2), "
            "at timestamp(3), tags text[], data bytea)");
  db().exec("INSERT INTO " + s + ".items VALUES (1, 'one', 12.50, '2024-01-02 03:04:05.123', "
            "'{a,b}', '\\x00ff')");
  ASSERT_NO_FATAL_FAILURE(CreateTopics(cluster, {"items", "sentinel"}));
  StartDblogd();
  PublishProcess publisher(PublishArgs(
      cluster, {"--format=debezium-avro", "--schema-registry=" + registry.url(),
                "--debezium-option=skipped.operations=none"}));
  publisher.Start();
  const std::string topic = Topic("items");
  const auto read_until = [&](std::size_t count) {
    return ReadTopic(cluster, topic, publisher, count);
  };
  read_until(1);
  db().exec("INSERT INTO " + s + ".items VALUES (2, 'two', NULL, NULL, NULL, NULL)");
  db().exec("UPDATE " + s + ".items SET name = 'TWO' WHERE id = 2");
  db().exec("UPDATE " + s + ".items SET id = 3 WHERE id = 2");
  db().exec("DELETE FROM " + s + ".items WHERE id = 3");
  db().exec("TRUNCATE " + s + ".items");
  // r, c, u, (d, tombstone, c), d, tombstone, t in each of 3 partitions
  const std::vector<Record> records = read_until(11);
  ASSERT_EQ(records.size(), 11u) << publisher.Log();

  // every key and value through Avro's library, with the schemas the registry holds
  const std::string state = registry.State();
  ASSERT_NE(state.find("\"" + topic + "-key\""), std::string::npos) << state;
  ASSERT_NE(state.find("\"" + topic + "-value\""), std::string::npos) << state;
  std::string frames;
  std::vector<std::string> what;  // "key" / "value" per frame
  for (const Record& r : records) {
    for (const auto& [kind, bytes] : {std::make_pair("key", r.key), std::make_pair("value", r.value)}) {
      if (!bytes) continue;
      frames += std::string(what.empty() ? "" : ",") + R"({"subject":")" + topic + "-" + kind +
                R"(","frame":")" + common::Base64Encode(*bytes) + R"("})";
      what.push_back(kind);
    }
  }
  const auto [status, decoded] = DecodeAvro(state, frames);
  ASSERT_EQ(status, 0) << (decoded.empty() ? "" : decoded[0]);
  ASSERT_EQ(decoded.size(), 8u + 9u);  // 8 keys (tombstones' too, the t none), 9 values

  // the records as Debezium writes them: ops and keys in order
  std::vector<std::string> ops, keys;
  for (std::size_t i = 0; i < decoded.size(); ++i) {
    const std::string& d = decoded[i];
    if (what[i] == "key") {
      keys.push_back(d);
      continue;
    }
    const std::size_t a = d.find("\"op\":\"");
    ops.push_back(a == std::string::npos ? "?" : d.substr(a + 6, 1));
  }
  EXPECT_EQ(keys, (std::vector<std::string>{R"({"id":1})", R"({"id":2})", R"({"id":2})",
                                            R"({"id":2})", R"({"id":2})", R"({"id":3})",
                                            R"({"id":3})", R"({"id":3})"}));
  EXPECT_EQ(ops, (std::vector<std::string>{"r", "c", "u", "d", "c", "d", "t", "t", "t"}));
  // the bootstrap row's values: numeric(10,2) a Decimal, timestamp(3) milliseconds, text[],
  // bytea (base64 here)
  EXPECT_NE(decoded[1].find(R"("after":{"id":1,"name":"one","amount":"12.50","at":1704164645123,"tags":["a","b"],"data":"AP8="})"),
            std::string::npos) << decoded[1];
  EXPECT_NE(decoded[3].find(R"("after":{"id":2,"name":"two","amount":null,"at":null,"tags":null,"data":null})"),
            std::string::npos) << decoded[3];
  std::set<std::int32_t> truncated;
  for (const Record& r : records) {
    EXPECT_FALSE(r.header(publish::kPositionHeader).empty());
    ASSERT_TRUE(r.key || r.value);
    if (r.key) {
      ASSERT_GE(r.key->size(), 5u);
      EXPECT_EQ((*r.key)[0], '\0');
      EXPECT_EQ(r.partition, publish::KeyPartition(*r.key, 3));
    } else {
      truncated.insert(r.partition);
    }
    if (r.value) {
      EXPECT_EQ((*r.value)[0], '\0');
    }
  }
  EXPECT_EQ(truncated.size(), 3u);
  publisher.Kill();
  EXPECT_EQ(publisher.exits(), 0) << publisher.Log();
}

}  // namespace
}  // namespace dblog::test
