// bench/consumer.cc: dblog_bench_consumer, the discarding consumer of the benchmarks
// (bench/run.sh, docs/benchmarks.md).
//
// Connects to dblogd with the client library (client/client.h), reads every event (NextView:
// Changes read in place, their values checked as they are read, other events parsed; with
// --parsed, NextRef: every event parsed into the client's arena, the way before), counts them
// and their values, acknowledges and throws them away. Acknowledgements go out as a batching applier sends them:
// the last Commit (or BootstrapEnd) received, whenever the consumer has caught up with what
// arrived (the client has nothing more buffered), and at the end condition; --ack-every N
// acknowledges every Nth Commit instead. It stops at one of:
//   --until-marker SCHEMA.TABLE   the Commit of the first transaction that changed that table
//   --until-bootstrap-end         the BootstrapEnd event
//   --until-repair-done           the Commit of the transaction holding a ChunkEnd with last set
//                                 (the end of a repair request)
// and prints one line of JSON with what it saw and how long it took (wall seconds from just
// before the TCP connect to the end condition). With --latency it also records, for every
// Commit of a transaction that did not touch the marker table, the delay between the commit
// time in the event and the moment the Commit was handed out by the client (system clock of
// this machine, microseconds) and prints p50/p99/max. With --linger S it goes on consuming for
// S seconds after the end condition before it prints and exits (the repair section measures
// the workload after a repair with the stream still running). --tls-ca FILE connects with TLS
// (dblogd --tls-cert), verifying the server against FILE.
//
// Not a test: it never judges a timing. It fails (exit 1) on a protocol error, a server error,
// a closed stream before the end condition, or when --expect-changes does not match.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/client.h"

namespace {

using dblog::v1::StreamEvent;

struct Options {
  std::string host = "127.0.0.1";
  uint16_t port = 7654;
  std::string consumer;
  std::string until_marker;  // schema.table
  bool until_bootstrap_end = false;
  bool until_repair_done = false;
  bool latency = false;
  long long expect_changes = -1;  // INSERT/UPDATE/DELETE/READ events, marker excluded
  int timeout_s = 600;            // io timeout: no bytes for this long is a failure
  bool ready_line = false;        // print "ready" on stderr once Welcome arrived
  double linger_s = 0;            // keep consuming (and acking) this long after the end
  long ack_every = 0;             // 0: ack when caught up; N: every Nth Commit (and the end's)
  std::string tls_ca;             // non-empty: TLS, the server's certificate checked against it
  bool parsed = false;            // NextRef (every Change parsed) instead of NextView
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "dblog_bench_consumer: %s\n"
               "usage: dblog_bench_consumer --port P --consumer NAME "
               "(--until-marker SCHEMA.TABLE | --until-bootstrap-end | --until-repair-done) "
               "[--host H] [--latency] "
               "[--expect-changes N] [--timeout S] [--ready] [--ack-every N] [--linger S] "
               "[--tls-ca FILE] [--parsed]\n",
               why);
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--host") o.host = value();
    else if (a == "--port") o.port = static_cast<uint16_t>(std::stoi(value()));
    else if (a == "--consumer") o.consumer = value();
    else if (a == "--until-marker") o.until_marker = value();
    else if (a == "--until-bootstrap-end") o.until_bootstrap_end = true;
    else if (a == "--until-repair-done") o.until_repair_done = true;
    else if (a == "--latency") o.latency = true;
    else if (a == "--expect-changes") o.expect_changes = std::stoll(value());
    else if (a == "--timeout") o.timeout_s = std::stoi(value());
    else if (a == "--ready") o.ready_line = true;
    else if (a == "--linger") o.linger_s = std::stod(value());
    else if (a == "--ack-every") o.ack_every = std::max(0L, std::stol(value()));
    else if (a == "--tls-ca") o.tls_ca = value();
    else if (a == "--parsed") o.parsed = true;
    else Usage(("unknown argument " + a).c_str());
  }
  if (o.consumer.empty()) Usage("--consumer is required");
  if (!o.until_marker.empty() + o.until_bootstrap_end + o.until_repair_done != 1)
    Usage("give exactly one of --until-marker, --until-bootstrap-end, --until-repair-done");
  return o;
}

std::int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Percentile(std::vector<std::int64_t>& v, double p) {
  if (v.empty()) return 0;
  const std::size_t k =
      std::min(v.size() - 1, static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return static_cast<double>(v[k]);
}

// What the consumer saw, printed as the JSON line.
struct Tally {
  std::uint64_t events = 0, changes = 0, reads = 0, inserts = 0, updates = 0, deletes = 0,
                commits = 0, relations = 0, heartbeats = 0, progress = 0, acks = 0, values = 0;
  std::vector<std::int64_t> latencies;
  double first_event_s = -1;
  std::uint64_t chunks = 0, chunk_rows = 0, chunk_deletes = 0;
  std::int64_t first_chunk_us = 0, last_chunk_us = 0;  // system clock, microseconds
  double wall = 0;
  std::int64_t done_us = 0;
};

// What an event asks of the acknowledgements: nothing, or its position is the one to
// acknowledge, when caught up (kLater) or at once (kNow).
enum class Ack { kNone, kLater, kNow };

// The consumer's state between events: the end condition, the marker table, the transaction's
// flags, the tally.
struct Run {
  explicit Run(const Options& o) : opt(o) {
    if (!opt.until_marker.empty()) {
      const auto dot = opt.until_marker.find('.');
      if (dot == std::string::npos) Usage("--until-marker wants SCHEMA.TABLE");
      marker_schema = opt.until_marker.substr(0, dot);
      marker_table = opt.until_marker.substr(dot + 1);
    }
  }

  // Counts one event; says whether the end condition was met in `done`.
  Ack OnEvent(const StreamEvent& ev) {
    switch (ev.event_case()) {
      case StreamEvent::kRelation:
        ++t.relations;
        is_marker[ev.relation().oid()] =
            ev.relation().schema() == marker_schema && ev.relation().name() == marker_table;
        break;
      case StreamEvent::kBegin:
        txn_has_marker = false;
        txn_has_last_chunk = false;
        break;
      case StreamEvent::kChunkBegin:
        if (t.first_chunk_us == 0) t.first_chunk_us = NowMicros();
        break;
      case StreamEvent::kChunkEnd:
        ++t.chunks;
        t.chunk_rows += ev.chunk_end().rows();
        t.chunk_deletes += ev.chunk_end().deletes();
        t.last_chunk_us = NowMicros();
        if (ev.chunk_end().last()) txn_has_last_chunk = true;
        break;
      case StreamEvent::kChange:  // (a Change NextView could not read in place)
        OnChange(ev.change().relation_oid(), ev.change().kind(),
                 ev.change().new_row().values_size() + ev.change().old_key().values_size());
        break;
      case StreamEvent::kCommit:
        ++t.commits;
        if (opt.latency && !txn_has_marker)
          t.latencies.push_back(NowMicros() - ev.commit().commit_time());
        if (txn_has_marker && !opt.until_marker.empty()) done = true;
        if (txn_has_last_chunk && opt.until_repair_done) done = true;
        if (done) return Ack::kNow;
        return opt.ack_every > 0 && t.commits % static_cast<std::uint64_t>(opt.ack_every) == 0
                   ? Ack::kNow
                   : Ack::kLater;
      case StreamEvent::kBootstrapEnd:
        if (opt.until_bootstrap_end) done = true;
        return done || opt.ack_every > 0 ? Ack::kNow : Ack::kLater;
      default:
        break;
    }
    return Ack::kNone;
  }

  // A Change read in place: its values were read (and checked) by the client.
  Ack OnChange(const dblog::wire::ChangeView& c) {
    ++t.events;
    OnChange(c.relation_oid, c.kind, c.new_row.size() + c.old_key.size());
    return Ack::kNone;
  }

  void OnChange(std::uint32_t relation_oid, dblog::v1::Change::Kind kind, std::size_t values) {
    t.values += values;
    if (is_marker[relation_oid]) {
      txn_has_marker = true;
      return;
    }
    ++t.changes;
    switch (kind) {
      case dblog::v1::Change::INSERT: ++t.inserts; break;
      case dblog::v1::Change::UPDATE: ++t.updates; break;
      case dblog::v1::Change::DELETE: ++t.deletes; break;
      case dblog::v1::Change::READ: ++t.reads; break;
      default: break;
    }
  }

  const Options& opt;
  std::string marker_schema, marker_table;
  Tally t;
  std::map<std::uint32_t, bool> is_marker;  // relation oid -> is the marker table
  bool txn_has_marker = false;
  bool txn_has_last_chunk = false;
  bool done = false;
};

dblog::client::ConnectOptions ConnectOptionsOf(const Options& opt) {
  dblog::client::ConnectOptions co;
  co.host = opt.host;
  co.port = opt.port;
  co.consumer = opt.consumer;
  co.client_name = "dblog-bench-consumer";
  co.connect_timeout = std::chrono::milliseconds(60000);
  co.io_timeout = std::chrono::milliseconds(1000LL * opt.timeout_s);
  co.tls = !opt.tls_ca.empty();
  co.tls_ca_file = opt.tls_ca;
  return co;
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Connects and consumes to the end condition, then --linger seconds more. False when dblogd
// closed the stream before the end condition.
bool Consume(Run& run, std::chrono::steady_clock::time_point t0) {
  const Options& opt = run.opt;
  Tally& t = run.t;
  dblog::client::Client client = dblog::client::Client::Connect(ConnectOptionsOf(opt));
  if (opt.ready_line) std::cerr << "ready" << std::endl;
  dblog::client::ItemRef item;
  dblog::client::ItemView view;
  std::optional<dblog::v1::Position> unacked;  // the last Commit/BootstrapEnd not acked yet
  auto ack = [&] {
    client.Ack(*unacked);
    unacked.reset();
    ++t.acks;
  };
  // The next item as NextRef hands it out; a Change read in place is counted here and comes
  // back as no item (nullptr).
  const auto next = [&]() -> bool {
    if (opt.parsed) return client.NextRef(item);
    if (!client.NextView(view)) return false;
    if (const auto* e = std::get_if<dblog::client::EventView>(&view)) {
      if (e->change != nullptr) {
        if (t.events == 0) t.first_event_s = SecondsSince(t0);
        if (!run.done) run.OnChange(*e->change);  // (not counted while lingering)
        item = static_cast<const StreamEvent*>(nullptr);
      } else {
        item = e->event;
      }
    } else if (const auto* const* h = std::get_if<const dblog::v1::Heartbeat*>(&view)) {
      item = *h;
    } else {
      item = std::get<const dblog::v1::Progress*>(view);
    }
    return true;
  };
  while (!run.done) {
    if (unacked && opt.ack_every == 0 && !client.HasBufferedItems()) ack();
    if (!next()) {
      std::fprintf(stderr, "dblog_bench_consumer: dblogd closed the stream early\n");
      return false;
    }
    if (std::holds_alternative<const dblog::v1::Heartbeat*>(item)) {
      ++t.heartbeats;
      continue;
    }
    if (std::holds_alternative<const dblog::v1::Progress*>(item)) {
      ++t.progress;
      continue;
    }
    const StreamEvent* ev = std::get<const StreamEvent*>(item);
    if (ev == nullptr) continue;  // a Change read in place, counted
    if (t.events++ == 0) t.first_event_s = SecondsSince(t0);
    const Ack a = run.OnEvent(*ev);
    if (a == Ack::kNone) continue;
    unacked = dblog::client::Client::PositionOf(*ev);
    if (a == Ack::kNow) ack();
  }
  t.wall = SecondsSince(t0);
  t.done_us = NowMicros();
  // --linger: the stream goes on as before (a workload measured "after" still pays for
  // being streamed); what comes now is read, acknowledged and not counted.
  while (SecondsSince(t0) < t.wall + opt.linger_s) {
    if (unacked && !client.HasBufferedItems()) ack();
    if (!next()) break;
    if (const auto* const* ev = std::get_if<const StreamEvent*>(&item);
        ev && *ev && ((*ev)->has_commit() || (*ev)->has_bootstrap_end()))
      unacked = dblog::client::Client::PositionOf(**ev);
  }
  return true;
}

void PrintTally(const Tally& t, bool latency) {
  std::printf(
      "{\"wall_s\": %.6f, \"first_event_s\": %.6f, \"events\": %llu, \"changes\": %llu, "
      "\"inserts\": %llu, \"updates\": %llu, \"deletes\": %llu, \"reads\": %llu, "
      "\"commits\": %llu, \"relations\": %llu, \"heartbeats\": %llu, \"progress\": %llu, "
      "\"acks\": %llu, \"chunks\": %llu, \"chunk_rows\": %llu, \"chunk_deletes\": %llu, "
      "\"first_chunk_us\": %lld, \"last_chunk_us\": %lld, \"done_us\": %lld, \"values\": %llu",
      t.wall, t.first_event_s, (unsigned long long)t.events, (unsigned long long)t.changes,
      (unsigned long long)t.inserts, (unsigned long long)t.updates, (unsigned long long)t.deletes,
      (unsigned long long)t.reads, (unsigned long long)t.commits, (unsigned long long)t.relations,
      (unsigned long long)t.heartbeats, (unsigned long long)t.progress, (unsigned long long)t.acks,
      (unsigned long long)t.chunks, (unsigned long long)t.chunk_rows,
      (unsigned long long)t.chunk_deletes, (long long)t.first_chunk_us, (long long)t.last_chunk_us,
      (long long)t.done_us, (unsigned long long)t.values);
  if (latency) {
    std::vector<std::int64_t> v = t.latencies;
    const double mx = v.empty() ? 0 : static_cast<double>(*std::max_element(v.begin(), v.end()));
    std::printf(", \"latency_n\": %zu, \"latency_p50_us\": %.0f, \"latency_p99_us\": %.0f, "
                "\"latency_max_us\": %.0f",
                v.size(), Percentile(v, 50), Percentile(v, 99), mx);
  }
  std::printf("}\n");
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = Parse(argc, argv);
  Run run(opt);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (!Consume(run, t0)) return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dblog_bench_consumer: %s\n", e.what());
    return 1;
  }
  PrintTally(run.t, opt.latency);
  if (opt.expect_changes >= 0 && static_cast<long long>(run.t.changes) != opt.expect_changes) {
    std::fprintf(stderr, "dblog_bench_consumer: expected %lld changes, saw %llu\n",
                 opt.expect_changes, (unsigned long long)run.t.changes);
    return 1;
  }
  return 0;
}
