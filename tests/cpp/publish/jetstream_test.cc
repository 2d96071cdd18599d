// tests/cpp/publish/jetstream_test.cc: `dblog publish` into real NATS JetStream servers that
// the test starts itself (nats-server -js, free ports, temp store dirs), with the real dblogd
// and the real `dblog publish` as child processes. Readers are built on JetStream pull
// consumers: one on every subject (the full stream, Dblog-Part 1 of each position) and one per
// table through a subject filter; each replays what it read (dblogd_fixture.h's Replay) and must
// equal the source, table by table. Every reader also checks that no deduplication id comes
// twice and that every table message's Dblog-Relation-Seq names a Relation of its table.
#include <nats/nats.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string_view>
#include <thread>

#include "client/position.h"
#include "client/publish/batch.h"
#include "client/publish/layout.h"
#include "dblogd_fixture.h"
#include "oracle_workload.h"
#include "common/json.h"
#include "fake_schema_registry.h"
#include "publish_e2e.h"
#include "publish_process.h"

namespace dblog::test {
namespace {

using namespace std::chrono_literals;

// One nats-server process with JetStream, on a free port, its store in a temp dir.
class NatsServer {
 public:
  // cluster: this node's cluster port and every node's (routes); empty: a single server.
  NatsServer(std::string name, std::uint16_t port, std::uint16_t cluster_port,
             std::vector<std::uint16_t> routes)
      : name_(std::move(name)), port_(port), cluster_port_(cluster_port), routes_(std::move(routes)) {
    char tmpl[] = "/tmp/dblog-nats-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~NatsServer() {
    Kill();
    std::error_code ec;
    if (!std::getenv("DBLOG_TEST_KEEP_NATS")) std::filesystem::remove_all(dir_, ec);
  }
  void Start() {
    std::vector<std::string> args = {"nats-server", "-js", "-a", "127.0.0.1", "-p",
                                     std::to_string(port_), "-sd", dir_ + "/store", "-n", name_};
    if (cluster_port_) {
      std::string routes;
      for (auto r : routes_)
        if (r != cluster_port_)
          routes += (routes.empty() ? "" : ",") + std::string("nats://127.0.0.1:") + std::to_string(r);
      args.insert(args.end(), {"--cluster_name", "dblogtest", "--cluster",
                               "nats://127.0.0.1:" + std::to_string(cluster_port_), "--routes",
                               routes});
    }
    pid_ = fork();
    if (pid_ == 0) {
      FILE* f = std::fopen((dir_ + "/log").c_str(), "a");
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("nats-server", argv.data());
      execv("/usr/sbin/nats-server", argv.data());  // Debian's, when /usr/sbin is not on PATH
      _exit(127);
    }
    const auto until = std::chrono::steady_clock::now() + 20s;
    for (;;) {
      const int fd = RawConnect(port_);
      if (fd >= 0) {
        close(fd);
        return;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL() << "nats-server exited; is it installed (scripts/install-deps.sh)? log: " << Log();
      }
      ASSERT_LT(std::chrono::steady_clock::now(), until) << "nats-server did not listen";
      std::this_thread::sleep_for(50ms);
    }
  }
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
  std::string Log() const {
    std::ifstream f(dir_ + "/log");
    return std::string(std::istreambuf_iterator<char>(f), {});
  }

 private:
  std::string name_;
  std::uint16_t port_, cluster_port_;
  std::vector<std::uint16_t> routes_;
  std::string dir_;
  pid_t pid_ = -1;
};

std::string HeaderOf(natsMsg* msg, const char* key) {
  const char* v = nullptr;
  if (natsMsgHeader_Get(msg, key, &v) != NATS_OK || !v) return {};
  return v;
}

// A JetStream client for the readers.
class Nats {
 public:
  explicit Nats(const std::vector<std::string>& urls) {
    natsOptions* o = nullptr;
    natsOptions_Create(&o);
    std::vector<const char*> u;
    for (auto& s : urls) u.push_back(s.c_str());
    natsOptions_SetServers(o, u.data(), static_cast<int>(u.size()));
    natsOptions_SetMaxReconnect(o, 100);
    const natsStatus s = natsConnection_Connect(&nc_, o);
    natsOptions_Destroy(o);
    if (s != NATS_OK) throw std::runtime_error(std::string("nats connect: ") + natsStatus_GetText(s));
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = 10000;
    natsConnection_JetStream(&js_, nc_, &jo);
  }
  ~Nats() {
    jsCtx_Destroy(js_);
    natsConnection_Destroy(nc_);
  }
  jsCtx* js() { return js_; }
  std::string last_error() const {
    std::string all;
    for (const auto& e : errors_) all += e + " | ";
    return all;
  }

  // The position of the last message on `subject`, if any. (Walks back from the stream's last
  // sequence with js_GetMsg: js_GetLastMsg times out against a clustered stream with libnats
  // 3.4 and nats-server 2.9.)
  std::optional<dblog::v1::Position> LastPosition(const std::string& stream,
                                                  const std::string& subject, std::string* event) {
    jsStreamInfo* si = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    natsStatus s = js_GetStreamInfo(&si, js_, stream.c_str(), nullptr, &code);
    if (s != NATS_OK) {
      last_error_ = std::string("stream info: ") + natsStatus_GetText(s) + " " +
                    std::to_string(code) + " " + (nats_GetLastError(nullptr) ? nats_GetLastError(nullptr) : "");
      errors_.insert(last_error_);
      return std::nullopt;
    }
    const std::uint64_t last = si->State.LastSeq, first = si->State.FirstSeq;
    jsStreamInfo_Destroy(si);
    for (std::uint64_t seq = last; seq >= first && seq > 0; --seq) {
      natsMsg* msg = nullptr;
      s = js_GetMsg(&msg, js_, stream.c_str(), seq, nullptr, &code);
      if (s != NATS_OK) {
        last_error_ = std::string("get: ") + natsStatus_GetText(s);
        return std::nullopt;
      }
      if (subject != natsMsg_GetSubject(msg)) {
        natsMsg_Destroy(msg);
        continue;
      }
      auto p = publish::ParsePositionText(HeaderOf(msg, publish::kPositionHeader));
      if (event) *event = HeaderOf(msg, publish::kEventHeader);
      natsMsg_Destroy(msg);
      return p;
    }
    return std::nullopt;
  }

 private:
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
  std::string last_error_;
  std::set<std::string> errors_;
};

// What a reader found, besides its Replay.
struct ReadReport {
  std::uint64_t messages = 0;
  std::uint64_t events = 0;
  std::uint64_t batched = 0;  // messages holding more than one event
  std::uint64_t relation_seq_checked = 0;
  std::uint64_t redelivered = 0;  // delivered again by JetStream (at or below one already read)
  std::map<std::string, std::uint64_t> last_seq;  // subject -> the last stream sequence read
};

// Reads everything `filter` holds through a pull consumer (named `durable`_N) into `replay`.
// full: the reader of every subject, which takes part 1 of each fanned-out position only.
// Reads until the message at stream sequence `until_seq` (the filter's last one). JetStream
// delivers at least once (an ack lost, a consumer moving to another node): a message at or below
// the stream sequence already read is a redelivery, skipped as a reader must (docs/publish.md);
// the log itself is checked for duplicates by ids and positions. from_leader: no consumer, each
// message by sequence as the stream's leader has it ($JS.API.STREAM.MSG.GET, which the leader
// answers: not NATS's Direct Get, which any replica may), those of the filter.
ReadReport ReadLog(Nats& nats, const std::string& stream, const std::string& filter,
                   const std::string& durable, bool full, std::uint64_t until_seq,
                   Replay& replay, bool from_leader = false) {
  ReadReport report;
  std::set<std::string> ids;
  std::map<std::uint64_t, std::uint32_t> relation_at;  // stream seq -> oid (full reader)
  // One message of the filter, at stream sequence `seq`.
  const auto process = [&](natsMsg* m, std::uint64_t seq) {
    report.last_seq[natsMsg_GetSubject(m)] = seq;
    const std::string id = HeaderOf(m, "Nats-Msg-Id");
    if (!id.empty() && !ids.insert(id).second) ADD_FAILURE() << "message id " << id << " twice";
    // a message of --format dblog: one or more length-delimited StreamEvents
    std::vector<std::string_view> bytes;
    if (!publish::SplitDelimited(
            std::string_view(natsMsg_GetData(m) ? natsMsg_GetData(m) : "",
                             static_cast<std::size_t>(natsMsg_GetDataLength(m))),
            bytes) ||
        bytes.empty()) {
      ADD_FAILURE() << "message " << seq << " is not a sequence of delimited events";
      return;
    }
    if (bytes.size() > 1) ++report.batched;
    report.events += bytes.size();
    const std::string rseq = HeaderOf(m, publish::kRelationSeqHeader);
    const std::string part = HeaderOf(m, publish::kPartHeader);
    for (const std::string_view b : bytes) {
      dblog::v1::StreamEvent ev;
      if (!ev.ParseFromArray(b.data(), static_cast<int>(b.size()))) {
        ADD_FAILURE() << "message " << seq << " holds something that is not a StreamEvent";
        continue;
      }
      if (ev.has_relation()) relation_at[seq] = ev.relation().oid();
      // docs/publish.md: always on a table subject's change, chunk and truncate part
      const bool on_table = std::string_view(natsMsg_GetSubject(m)).find(".table.") !=
                            std::string_view::npos;
      if (full && on_table &&
          (ev.has_change() || ev.has_chunk_begin() || ev.has_chunk_end() || ev.has_truncate())) {
        const std::uint32_t oid = ev.has_change()      ? ev.change().relation_oid()
                                  : ev.has_chunk_begin() ? ev.chunk_begin().relation_oid()
                                  : ev.has_chunk_end()   ? ev.chunk_end().relation_oid()
                                  : ev.truncate().relation_oids_size() == 1
                                      ? ev.truncate().relation_oids(0)
                                      : 0;
        const auto it = rseq.empty() ? relation_at.end() : relation_at.find(std::stoull(rseq));
        if (it == relation_at.end() || it->second != oid)
          ADD_FAILURE() << "message " << seq << " (" << HeaderOf(m, publish::kEventHeader)
                        << "): " << publish::kRelationSeqHeader << " '" << rseq
                        << "' is not a Relation of its table";
        ++report.relation_seq_checked;
      }
      if (!(full && !part.empty() && part.rfind("1/", 0) != 0)) {
        try {
          replay.Apply(ev);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "replaying message " << seq << ": " << e.what();
        }
      }
    }
    // the message's Dblog-Position is its last event's
    if (const auto last = publish::ParsePositionText(HeaderOf(m, publish::kPositionHeader))) {
      dblog::v1::StreamEvent ev;
      ev.ParseFromArray(bytes.back().data(), static_cast<int>(bytes.back().size()));
      const auto p = client::PositionOf(ev);
      if (!p || client::ComparePositions(*p, *last) != 0)
        ADD_FAILURE() << "message " << seq << ": " << publish::kPositionHeader << " "
                      << publish::PositionText(*last) << " is not its last event's";
    }
  };
  if (from_leader) {
    // Message by message as the stream's leader stores them (a message get is answered by the
    // leader), those of the filter's subjects.
    const bool wildcard = filter.size() > 1 && filter.compare(filter.size() - 2, 2, ".>") == 0;
    const std::string prefix = wildcard ? filter.substr(0, filter.size() - 1) : filter;
    for (std::uint64_t seq = 1; seq <= until_seq; ++seq) {
      natsMsg* m = nullptr;
      jsErrCode code = static_cast<jsErrCode>(0);
      // (a leader being elected answers nothing, or an error, for a moment: asked again)
      natsStatus s = js_GetMsg(&m, nats.js(), stream.c_str(), seq, nullptr, &code);
      for (const auto until = std::chrono::steady_clock::now() + 60s;
           s != NATS_OK && std::chrono::steady_clock::now() < until;) {
        std::this_thread::sleep_for(100ms);
        code = static_cast<jsErrCode>(0);
        s = js_GetMsg(&m, nats.js(), stream.c_str(), seq, nullptr, &code);
      }
      if (s != NATS_OK) {
        ADD_FAILURE() << "message " << seq << " of " << stream << ": " << natsStatus_GetText(s)
                      << " " << code;
        return report;
      }
      const std::string_view subject = natsMsg_GetSubject(m);
      if (wildcard ? subject.rfind(prefix, 0) == 0 : subject == filter) {
        ++report.messages;
        process(m, seq);
      }
      natsMsg_Destroy(m);
    }
    return report;
  }
  natsSubscription* sub = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = NATS_OK;
  std::uint64_t next_seq = 1;  // the stream sequence to read from
  int generation = 0;
  // (Re)creates the pull consumer at next_seq, as a reader that lost its consumer does: a
  // consumer of a replicated stream can stall for a long while after nodes restarted
  // (nats-server 2.9). A cluster that just regained a node may also take a while to create it.
  const auto subscribe = [&]() -> bool {
    if (sub) {
      natsSubscription_Unsubscribe(sub);
      natsSubscription_Destroy(sub);
      sub = nullptr;
    }
    const auto until = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      const std::string name = durable + "_" + std::to_string(generation++);
      jsSubOptions so;
      jsSubOptions_Init(&so);
      so.Stream = stream.c_str();
      so.Config.DeliverPolicy = js_DeliverByStartSequence;
      so.Config.OptStartSeq = next_seq;
      s = js_PullSubscribe(&sub, nats.js(), filter.c_str(), name.c_str(), nullptr, &so, &code);
      if (s == NATS_OK) return true;
      if (std::chrono::steady_clock::now() > until) {
        ADD_FAILURE() << "pull subscribe " << filter << ": " << natsStatus_GetText(s) << " " << code;
        return false;
      }
      std::this_thread::sleep_for(500ms);
    }
  };
  if (until_seq > 0 && !subscribe()) return report;
  const auto deadline = std::chrono::steady_clock::now() + 300s;
  auto progressed_at = std::chrono::steady_clock::now();
  bool done = until_seq == 0;
  while (!done) {
    natsMsgList list{};
    s = natsSubscription_Fetch(&list, sub, 512, 3000, &code);
    if (s != NATS_OK) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "fetch from " << filter << ": " << natsStatus_GetText(s) << " after "
                      << report.messages << " messages";
        break;
      }
      if (std::chrono::steady_clock::now() - progressed_at > 10s) {
        if (!subscribe()) break;
        progressed_at = std::chrono::steady_clock::now();
      }
      continue;
    }
    progressed_at = std::chrono::steady_clock::now();
    for (int i = 0; i < list.Count; ++i) {
      natsMsg* m = list.Msgs[i];
      ++report.messages;
      jsMsgMetaData* meta = nullptr;
      std::uint64_t seq = 0;
      if (natsMsg_GetMetaData(&meta, m) == NATS_OK) {
        seq = meta->Sequence.Stream;
        jsMsgMetaData_Destroy(meta);
        if (seq < next_seq) {
          --report.messages;
          ++report.redelivered;
          natsMsg_Ack(m, nullptr);
          continue;
        }
        done = seq >= until_seq;
        next_seq = seq + 1;
      } else {
        ADD_FAILURE() << "a message without JetStream metadata";
      }
      process(m, seq);
      natsMsg_Ack(m, nullptr);
    }
    natsMsgList_Destroy(&list);
  }
  if (sub) natsSubscription_Destroy(sub);
  return report;
}

class PublishTest : public PublishE2eTest {
 protected:
  // Every message of `subject` in the consumer's stream as (payload, Dblog-Key), read again
  // until there are at least `count` (a test failure after 60 s).
  void ReadSubject(const std::string& url, const std::string& subject,
                   PublishProcess& publisher, std::size_t count,
                   std::vector<std::pair<std::string, std::string>>& messages) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (;;) {
      publisher.Supervise();
      messages.clear();
      try {
        Nats nats({url});
        jsStreamInfo* si = nullptr;
        jsErrCode code = static_cast<jsErrCode>(0);
        if (js_GetStreamInfo(&si, nats.js(), Stream().c_str(), nullptr, &code) == NATS_OK) {
          const std::uint64_t last = si->State.LastSeq;
          jsStreamInfo_Destroy(si);
          for (std::uint64_t seq = 1; seq <= last; ++seq) {
            natsMsg* m = nullptr;
            if (js_GetMsg(&m, nats.js(), Stream().c_str(), seq, nullptr, &code) != NATS_OK) break;
            if (subject == natsMsg_GetSubject(m))
              messages.emplace_back(
                  std::string(natsMsg_GetData(m) ? natsMsg_GetData(m) : "",
                              static_cast<std::size_t>(natsMsg_GetDataLength(m))),
                  HeaderOf(m, publish::kKeyHeader));
            natsMsg_Destroy(m);
          }
        }
      } catch (const std::exception&) {
      }
      if (messages.size() >= count) return;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << messages.size() << " messages; " << publisher.Log();
      std::this_thread::sleep_for(200ms);
    }
  }

  void CreateTables() { CreateWorkloadTables(db(), schema()); }
  std::string Stream() const {
    std::string s = "DBLOG_" + consumer();
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
  }
  // Waits until the log holds a Commit (or BootstrapEnd) at or after `lsn`: everything before it
  // is stored.
  // A new connection each time: a client connected to a node before that node's JetStream was
  // ready gets no answer to its JetStream requests (nats-server 2.9), and nodes restart here.
  void WaitForLog(const std::vector<std::string>& urls, std::uint64_t lsn,
                  PublishProcess& publisher) {
    const auto deadline = std::chrono::steady_clock::now() + 180s;
    std::string errors;
    for (;;) {
      publisher.Supervise();
      try {
        Nats nats(urls);
        std::string event;
        const auto p = nats.LastPosition(Stream(), Prefix() + ".control", &event);
        // (a sentinel committed before the bootstrap's consistent point is one of its rows)
        if (p && p->commit_lsn() >= lsn && (event == "commit" || event == "bootstrap_end")) return;
        errors = nats.last_error() + (p ? " last control message: " +
                                                publish::PositionText(*p) + " " + event
                                          : " no control message");
      } catch (const std::exception& e) {
        errors = e.what();
      }
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "the log never caught up (reading it: " << errors << "); " << publisher.Log()
          << "\n" << dblogd_->log();
      std::this_thread::sleep_for(200ms);
    }
  }
  // The full reader and one reader per table must each equal the source.
  // full_report: what the reader of every subject found. from_leader: read the messages as the
  // stream's leader stores them (ReadLog), not through consumers.
  void ExpectReadersConverge(const std::vector<std::string>& urls,
                             const std::vector<std::string>& tables,
                             ReadReport* full_report = nullptr, bool from_leader = false) {
    Nats nats(urls);
    std::uint64_t last_seq = 0;
    {  // nothing deleted from the stream: no gaps
      jsStreamInfo* si = nullptr;
      jsErrCode code = static_cast<jsErrCode>(0);
      ASSERT_EQ(js_GetStreamInfo(&si, nats.js(), Stream().c_str(), nullptr, &code), NATS_OK);
      last_seq = si->State.LastSeq;
      EXPECT_EQ(si->State.Msgs, si->State.LastSeq);
      jsStreamInfo_Destroy(si);
    }
    Replay full;
    const ReadReport r =
        ReadLog(nats, Stream(), Prefix() + ".>", "full", true, last_seq, full, from_leader);
    EXPECT_EQ(r.messages, last_seq);  // the reader of every subject read every message
    EXPECT_GT(r.relation_seq_checked, 0u);
    if (full_report) *full_report = r;
    ExpectConverged(full, tables);
    for (const auto& t : tables) {
      SCOPED_TRACE("reader of table " + t + " alone");
      Replay one;
      const std::string subject = Prefix() + ".table." + schema() + "." + t;
      const auto last = r.last_seq.find(subject);
      ReadLog(nats, Stream(), subject, "only_" + t, false,
              last == r.last_seq.end() ? 0 : last->second, one, from_leader);
      ExpectConverged(one, {t});
    }
  }
};

// The end-to-end test: the randomized workload with repairs while `dblog publish` and dblogd are
// SIGKILLed and restarted at random moments (publish also during the bootstrap); the log must
// hold every event once and replay into the source, read whole and table by table.
// DBLOG_PUBLISH_SEED (tests/soak.sh) draws another workload and other disturbances.
TEST_F(PublishTest, KilledPublisherAndDblogdLeaveEveryEventOnceInTheLog) {
  NatsServer nats_server("n1", FreePort(), 0, {});
  ASSERT_NO_FATAL_FAILURE(nats_server.Start());
  const std::string s = schema();
  CreateTables();
  const char* seed_env = std::getenv("DBLOG_PUBLISH_SEED");
  const std::uint64_t seed = seed_env ? std::strtoull(seed_env, nullptr, 10) : 1601;
  SCOPED_TRACE("publish seed " + std::to_string(seed) + " (replay: DBLOG_PUBLISH_SEED=" +
               std::to_string(seed) + ")");
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 40; ++i) RandomTransaction(db(), s, rng, kPublishWorkload);
  db().exec("INSERT INTO " + s + ".t_int (id, v, s) SELECT g, g, 'bulk' FROM "
            "generate_series(1000000, 1020000) g");
  {
    // The stream made here with a duplicate window of 100 ms (JetStream's smallest), so that
    // Nats-Msg-Id cannot hide a resend: what keeps the log exactly once is the resume point read
    // from the log and the expected sequence.
    Nats nats({nats_server.url()});
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const std::string name = Stream(), subjects = Prefix() + ".>";
    const char* list[] = {subjects.c_str()};
    cfg.Name = name.c_str();
    cfg.Subjects = list;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.Duplicates = 100 * 1000 * 1000;  // nanoseconds
    jsStreamInfo* si = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    ASSERT_EQ(js_AddStream(&si, nats.js(), &cfg, nullptr, &code), NATS_OK) << code;
    jsStreamInfo_Destroy(si);
  }
  StartDblogd({"--chunk-size=300"});
  PublishProcess publisher(PublishArgs(nats_server.url()));
  publisher.Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  publisher.Kill();  // in the bootstrap, most likely
  publisher.Start();

  WorkloadWriter writer(conninfo(), s, seed_env ? seed : 7);
  Disturbances done;
  done.publish_kills = 1;  // that one
  Disturb(rng, 20s, publisher, {"t_int", "t_comp", "t_uuid"}, {}, done);
  writer.Stop();
  ASSERT_NO_FATAL_FAILURE(WaitForRequests(done.requests, publisher));
  ASSERT_NO_FATAL_FAILURE(WaitForLog({nats_server.url()}, Sentinel(), publisher));
  publisher.Kill();
  EXPECT_EQ(publisher.exits(), 0) << publisher.Log();
  ReadReport report;
  ExpectReadersConverge({nats_server.url()}, {"t_int", "t_comp", "t_uuid", "sentinel"}, &report);
  std::printf("publish e2e: %d publish kills, %d dblogd kills, %zu repairs; %llu events in %llu "
              "messages (%llu of several events)\n",
              done.publish_kills, done.dblogd_kills, done.requests.size(),
              static_cast<unsigned long long>(report.events),
              static_cast<unsigned long long>(report.messages),
              static_cast<unsigned long long>(report.batched));
  EXPECT_GT(report.batched, 0u);  // batches were written (and read back) under the kills
}

// A three-node JetStream cluster on loopback with a replicated (R3) stream: one node is killed
// and restarted while `dblog publish` writes; nothing may be lost or stored twice.
TEST_F(PublishTest, ReplicatedStreamSurvivesANodeKilledAndRestarted) {
  const std::vector<std::uint16_t> cluster = {FreePort(), FreePort(), FreePort()};
  std::vector<std::unique_ptr<NatsServer>> nodes;
  std::string urls;
  for (int i = 0; i < 3; ++i) {
    nodes.push_back(std::make_unique<NatsServer>("n" + std::to_string(i + 1), FreePort(),
                                                 cluster[i], cluster));
    urls += (i ? "," : "") + nodes.back()->url();
  }
  for (auto& n : nodes) ASSERT_NO_FATAL_FAILURE(n->Start());
  const std::string s = schema();
  CreateTables();
  std::mt19937_64 rng(1602);
  for (int i = 0; i < 20; ++i) RandomTransaction(db(), s, rng, kPublishWorkload);
  StartDblogd();
  PublishProcess publisher(PublishArgs(urls, {"--replicas=3"}));
  publisher.Start();
  const std::vector<std::string> all = {nodes[0]->url(), nodes[1]->url(), nodes[2]->url()};
  ASSERT_NO_FATAL_FAILURE(WaitForLog(all, Sentinel(), publisher));  // the stream exists, R3

  WorkloadWriter writer(conninfo(), s, 11);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(1500ms);
    auto& node = *nodes[static_cast<std::size_t>(round)];
    node.Kill();  // the stream's leader, a follower, the node publish is connected to: any
    std::this_thread::sleep_for(1500ms);
    publisher.Supervise();
    ASSERT_NO_FATAL_FAILURE(node.Start());
  }
  std::this_thread::sleep_for(1s);
  writer.Stop();
  ASSERT_NO_FATAL_FAILURE(WaitForLog(all, Sentinel(), publisher));
  publisher.Kill();
  EXPECT_EQ(publisher.exits(), 0) << publisher.Log();
  // Read as the stream's leader stores it: seen with nats-server 2.9.10 (Debian 12), consumers
  // of per-table readers handed out ids twice at sequences of their own after a node's restart
  // and catch-up, while the reader of the whole log, its consumer elsewhere, and the stream's
  // own counts had every message once (read as a replica holding messages twice;
  // docs/publish.md). What `dblog publish` stored is what the leader has.
  ExpectReadersConverge(all, {"t_int", "t_comp", "t_uuid", "sentinel"}, nullptr,
                        /*from_leader=*/true);
  if (HasFailure()) ADD_FAILURE() << publisher.Log();
}

// --format debezium-json end to end: the type matrix through the real encoder (a bootstrap row,
// then an insert, an update, a delete, a truncate and an insert), read back from the table's
// subject: op, snapshot, `after` as Debezium's PostgreSQL connector writes each type with its
// defaults (the expectations and their sources in debezium_test.cc), the key header, the
// tombstone, and no truncate (skipped.operations=t, Debezium's default).
TEST_F(PublishTest, DebeziumJsonCarriesEveryOpAndTheTypeMatrix) {
  NatsServer nats_server("n1", FreePort(), 0, {});
  ASSERT_NO_FATAL_FAILURE(nats_server.Start());
  const std::string s = schema();
  db().exec("CREATE TABLE " + s + ".types (id int PRIMARY KEY, b bool, i2 smallint, i8 bigint, "
            "f4 real, f8 double precision, t text, vc varchar(5), bp char(3), by bytea, u uuid, "
            "d date, ts timestamp, tz timestamptz, n numeric(10,3), j jsonb, js json, iv interval, "
            "ts3 timestamp(3), ti time, ti3 time(3), ttz timetz, m money, ia int[], nv numeric)");
  const std::string values =
      "true, -2, 9007199254740993, 1.5, 0.1, 'na\u00efve', 'ab', 'x', '\\x0001ff', "
      "'12345678-9abc-def0-1234-56789abcdef0', '2024-01-01', '2024-01-01 00:00:00', "
      "'2024-01-02 03:04:05.5+00', 12.5, '{\"a\": [1, 2]}', '{\"b\":1}', '1 day 02:00:00', "
      "'2024-01-02 03:04:05.123', '13:51:30', '13:51:30.123', '13:51:30.123789+02', 12.34, "
      "'{1,2,3}', 22.2200";
  db().exec("INSERT INTO " + s + ".types VALUES (1, " + values + ")");
  StartDblogd();
  PublishProcess publisher(PublishArgs(nats_server.url(), {"--format=debezium-json"}));
  publisher.Start();
  const std::string subject = Prefix() + ".table." + s + ".types";
  std::vector<std::pair<std::string, std::string>> messages;  // payload, Dblog-Key
  const auto read_until = [&](std::size_t count) {
    ReadSubject(nats_server.url(), subject, publisher, count, messages);
  };
  ASSERT_NO_FATAL_FAILURE(read_until(1));  // the bootstrap's row: changes come after it
  db().exec("INSERT INTO " + s + ".types VALUES (2, " + values + ")");
  db().exec("UPDATE " + s + ".types SET t = 'changed' WHERE id = 2");
  db().exec("DELETE FROM " + s + ".types WHERE id = 2");
  db().exec("TRUNCATE " + s + ".types");
  db().exec("INSERT INTO " + s + ".types VALUES (3, " + values + ")");
  // (the log holds no control subject in this format)
  ASSERT_NO_FATAL_FAILURE(read_until(6));
  ASSERT_EQ(messages.size(), 6u);  // r, c, u, d, tombstone, (no t), c
  const auto field = [](const std::string& json, const std::string& name, const std::string& next) {
    const std::size_t a = json.find("\"" + name + "\":");
    const std::size_t b = json.find(",\"" + next + "\":", a);
    if (a == std::string::npos || b == std::string::npos) return std::string("(absent)");
    return json.substr(a + name.size() + 3, b - a - name.size() - 3);
  };
  const std::string after =
      R"({"b":true,"i2":-2,"i8":9007199254740993,"f4":1.5,"f8":0.1,"t":"naïve","vc":"ab",)"
      R"("bp":"x  ","by":"AAH/","u":"12345678-9abc-def0-1234-56789abcdef0","d":19723,)"
      R"("ts":1704067200000000,"tz":"2024-01-02T03:04:05.500000Z","n":"MNQ=",)"
      R"("j":"{\"a\": [1, 2]}","js":"{\"b\":1}","iv":93600000000,"ts3":1704164645123,)"
      R"("ti":49890000000,"ti3":49890123,"ttz":"11:51:30.123789Z","m":"BNI=","ia":[1,2,3],)"
      R"("nv":{"scale":2,"value":"CK4="}})";
  const auto row = [&](int id, const std::string& t) {
    std::string a = after;
    a.replace(a.find(R"("t":"naïve")"), std::string(R"("t":"naïve")").size(), "\"t\":\"" + t + "\"");
    return "{\"id\":" + std::to_string(id) + "," + a.substr(1);
  };
  EXPECT_EQ(field(messages[0].first, "op", "ts_ms"), "\"r\"");
  EXPECT_EQ(field(messages[0].first, "snapshot", "db"), "\"true\"");
  EXPECT_EQ(field(messages[0].first, "after", "source"), row(1, "naïve"));
  EXPECT_EQ(messages[0].second, R"({"id":1})");
  EXPECT_EQ(field(messages[1].first, "op", "ts_ms"), "\"c\"");
  EXPECT_EQ(field(messages[1].first, "snapshot", "db"), "\"false\"");
  EXPECT_EQ(field(messages[1].first, "before", "after"), "null");
  EXPECT_EQ(field(messages[1].first, "after", "source"), row(2, "naïve"));
  EXPECT_EQ(field(messages[1].first, "table", "txId"), "\"types\"");
  EXPECT_EQ(field(messages[2].first, "op", "ts_ms"), "\"u\"");
  EXPECT_EQ(field(messages[2].first, "after", "source"), row(2, "changed"));
  EXPECT_EQ(field(messages[3].first, "op", "ts_ms"), "\"d\"");
  EXPECT_EQ(field(messages[3].first, "after", "source"), "null");
  EXPECT_EQ(messages[3].second, R"({"id":2})");
  EXPECT_EQ(messages[4].first, "");  // the tombstone
  EXPECT_EQ(messages[4].second, R"({"id":2})");
  EXPECT_EQ(field(messages[5].first, "op", "ts_ms"), "\"c\"");  // the truncate was skipped
  EXPECT_EQ(messages[5].second, R"({"id":3})");
  publisher.Kill();
  EXPECT_EQ(publisher.exits(), 0) << publisher.Log();
}

// `--format debezium-avro` into JetStream: each message's payload is the value in Confluent's
// wire format, header Dblog-Key the key's wire bytes in base64 (NATS has no record key), both
// registered under "<subject>-key" / "<subject>-value" (the table's subject standing for the
// topic) in a fake registry over HTTP, and each decodes with Apache Avro's own library
// (avro_check.py --decode) into Debezium's r, c, d and the tombstone's empty payload.
TEST_F(PublishTest, DebeziumAvroPayloadsAndBase64KeysOnNats) {
  NatsServer nats_server("n1", FreePort(), 0, {});
  ASSERT_NO_FATAL_FAILURE(nats_server.Start());
  FakeSchemaRegistry registry;
  const std::string s = schema();
  db().exec("CREATE TABLE " + s + ".items (id int PRIMARY KEY, name text, amount numeric(10,2))");
  db().exec("INSERT INTO " + s + ".items VALUES (1, 'one', 12.50)");
  StartDblogd();
  PublishProcess publisher(PublishArgs(
      nats_server.url(), {"--format=debezium-avro", "--schema-registry=" + registry.url()}));
  publisher.Start();
  const std::string subject = Prefix() + ".table." + s + ".items";
  std::vector<std::pair<std::string, std::string>> messages;  // payload, Dblog-Key
  const auto read_until = [&](std::size_t count) {
    ReadSubject(nats_server.url(), subject, publisher, count, messages);
  };
  ASSERT_NO_FATAL_FAILURE(read_until(1));
  db().exec("INSERT INTO " + s + ".items VALUES (2, 'two', NULL)");
  db().exec("DELETE FROM " + s + ".items WHERE id = 2");
  ASSERT_NO_FATAL_FAILURE(read_until(4));
  ASSERT_EQ(messages.size(), 4u);  // r, c, d, tombstone
  EXPECT_TRUE(messages[3].first.empty());  // the tombstone
  std::string frames;
  std::size_t n = 0;
  for (const auto& [payload, key] : messages) {
    frames += std::string(n++ ? "," : "") + R"({"subject":")" + subject + R"(-key","frame":")" +
              key + R"("})";
    if (!payload.empty())
      frames += R"(,{"subject":")" + subject + R"(-value","frame":")" +
                common::Base64Encode(payload) + R"("})";
  }
  const auto [status, decoded] = DecodeAvro(registry.State(), frames);
  ASSERT_EQ(status, 0) << (decoded.empty() ? "" : decoded[0]);
  ASSERT_EQ(decoded.size(), 7u);  // 4 keys, 3 values
  EXPECT_EQ(decoded[0], R"({"id":1})");
  EXPECT_NE(decoded[1].find(R"({"before":null,"after":{"id":1,"name":"one","amount":"12.50"},)"),
            std::string::npos) << decoded[1];
  EXPECT_NE(decoded[1].find(R"("snapshot":"true")"), std::string::npos) << decoded[1];
  EXPECT_EQ(decoded[2], R"({"id":2})");
  EXPECT_NE(decoded[3].find(R"("after":{"id":2,"name":"two","amount":null},)"), std::string::npos)
      << decoded[3];
  EXPECT_NE(decoded[3].find(R"("op":"c")"), std::string::npos) << decoded[3];
  EXPECT_EQ(decoded[4], R"({"id":2})");
  EXPECT_NE(decoded[5].find(R"("after":null,)"), std::string::npos) << decoded[5];
  EXPECT_NE(decoded[5].find(R"("op":"d")"), std::string::npos) << decoded[5];
  EXPECT_EQ(decoded[6], R"({"id":2})");  // the tombstone's key
  publisher.Kill();
  EXPECT_EQ(publisher.exits(), 0) << publisher.Log();
}

// `dblog publish` SIGKILLed in the middle of a large transaction, larger than a batch (at most
// 50 events per message here, so the transaction is thousands of messages): the log ends inside
// it, at a batch's end, the next run resumes inside it (dblogd sends that transaction's Begin
// and the events of the stored batches again, which the log already holds) and the log still
// holds every event once. The stream's duplicate window is made too short for Nats-Msg-Id to
// help.
TEST_F(PublishTest, KilledInsideATransactionResumesInsideIt) {
  NatsServer nats_server("n1", FreePort(), 0, {});
  ASSERT_NO_FATAL_FAILURE(nats_server.Start());
  const std::string s = schema();
  CreateTables();
  {
    Nats nats({nats_server.url()});
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const std::string name = Stream(), subjects = Prefix() + ".>";
    const char* list[] = {subjects.c_str()};
    cfg.Name = name.c_str();
    cfg.Subjects = list;
    cfg.SubjectsLen = 1;
    cfg.Duplicates = 100 * 1000 * 1000;  // 100 ms, in nanoseconds
    jsStreamInfo* si = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    ASSERT_EQ(js_AddStream(&si, nats.js(), &cfg, nullptr, &code), NATS_OK) << code;
    jsStreamInfo_Destroy(si);
  }
  StartDblogd();
  PublishProcess publisher(PublishArgs(nats_server.url(), {"--batch-events=50"}));
  publisher.Start();
  ASSERT_NO_FATAL_FAILURE(WaitForLog({nats_server.url()}, Sentinel(), publisher));
  std::uint64_t before = 0;
  {
    Nats nats({nats_server.url()});
    jsStreamInfo* si = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    ASSERT_EQ(js_GetStreamInfo(&si, nats.js(), Stream().c_str(), nullptr, &code), NATS_OK);
    before = si->State.LastSeq;
    jsStreamInfo_Destroy(si);
  }
  db().exec("INSERT INTO " + s + ".t_int (id, v, s) SELECT g, g, 'one transaction' FROM "
            "generate_series(1, 200000) g");
  // kill it once part of the transaction is in the log, and again after it restarted
  for (int kill = 0; kill < 2; ++kill) {
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    for (;;) {
      Nats nats({nats_server.url()});
      jsStreamInfo* si = nullptr;
      jsErrCode code = static_cast<jsErrCode>(0);
      ASSERT_EQ(js_GetStreamInfo(&si, nats.js(), Stream().c_str(), nullptr, &code), NATS_OK);
      const std::uint64_t last = si->State.LastSeq;
      jsStreamInfo_Destroy(si);
      if (last > before + 400u * static_cast<std::uint64_t>(kill + 1)) break;
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << publisher.Log();
      std::this_thread::sleep_for(10ms);
    }
    publisher.Kill();
    publisher.Start();
  }
  ASSERT_NO_FATAL_FAILURE(WaitForLog({nats_server.url()}, Sentinel(), publisher));
  publisher.Kill();
  const std::string log = publisher.Log();
  // it did resume inside the transaction at least once (not at a Begin, not at a Commit)
  EXPECT_NE(log.find("resuming after"), std::string::npos) << log;
  ReadReport report;
  ExpectReadersConverge({nats_server.url()}, {"t_int", "sentinel"}, &report);
  EXPECT_GE(report.messages, 200000u / 50);  // the transaction took many batches
  EXPECT_GT(report.batched, 0u);
}

}  // namespace
}  // namespace dblog::test
