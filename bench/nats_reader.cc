// bench/nats_reader.cc: dblog_bench_nats_reader, a downstream reader of what `dblog publish`
// wrote into NATS JetStream (bench/publish.sh, docs/benchmarks.md "dblog publish").
//
//   dblog_bench_nats_reader --server URL --stream NAME --marker SUBJECT
//                           [--filter SUBJECTS] [--start-seq N] [--wait-only]
//
// Reads the stream from sequence N (default 1) through an ephemeral pull consumer on
// --filter (default every subject), unpacks every message (--format dblog: varint-length-
// delimited dblog.v1.StreamEvents, docs/publish.md), parses and counts the events, and stops at
// the first message on the --marker subject that holds a Change (the marker transaction the
// benchmark writes last). Prints one line of JSON: events, messages, wall seconds from the
// subscription to the marker. --wait-only: reads nothing, waits for a change on the marker
// subject (a plain NATS subscription), then for the stream's last message on that subject to be
// that change, stored at or after --start-seq (how the benchmark sees that the publisher caught
// up), and prints the wall seconds.
//
// Not a test: it never judges a timing. Exit 1 on a malformed message or a NATS error.
#include <nats/nats.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "client/publish/batch.h"
#include "dblog/v1/consumer.pb.h"

namespace {

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "dblog_bench_nats_reader: %s\n", why.c_str());
  std::exit(1);
}

void Check(natsStatus s, const char* what) {
  if (s != NATS_OK) Die(std::string(what) + ": " + natsStatus_GetText(s));
}

std::string Header(natsMsg* m, const char* key) {
  const char* v = nullptr;
  if (natsMsgHeader_Get(m, key, &v) != NATS_OK || !v) return {};
  return v;
}

// Whether the last message on `marker` in the stream is a change stored at or after start_seq.
bool IsStoredChange(jsCtx* js, const std::string& stream, const std::string& marker,
                    unsigned long long start_seq) {
  // (nats-server 2.9.10 crashes on a get of the last message of a stream that does not exist
  // yet: ask for the stream first)
  jsStreamInfo* si = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  if (js_GetStreamInfo(&si, js, stream.c_str(), nullptr, &code) != NATS_OK) return false;
  jsStreamInfo_Destroy(si);
  natsMsg* m = nullptr;
  if (js_GetLastMsg(&m, js, stream.c_str(), marker.c_str(), nullptr, &code) != NATS_OK)
    return false;
  const bool stored = Header(m, "Dblog-Event") == "change" && natsMsg_GetSequence(m) >= start_seq;
  natsMsg_Destroy(m);
  return stored;
}

struct Args {
  std::string server, stream, marker, filter;
  unsigned long long start_seq = 1;
  bool wait_only = false;
};

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--server")
      args.server = next();
    else if (a == "--stream")
      args.stream = next();
    else if (a == "--marker")
      args.marker = next();
    else if (a == "--filter")
      args.filter = next();
    else if (a == "--start-seq")
      args.start_seq = std::strtoull(next().c_str(), nullptr, 10);
    else if (a == "--wait-only")
      args.wait_only = true;
    else
      Die("unknown argument " + a);
  }
  if (args.server.empty() || args.stream.empty() || args.marker.empty())
    Die("usage: --server URL --stream NAME --marker SUBJECT [--filter F] [--start-seq N] "
        "[--wait-only]");
  return args;
}

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --wait-only: told by a plain NATS subscription to the marker's subject (no polling load on
// the server), then confirmed stored in the stream.
void WaitForTheMarker(natsConnection* nc, jsCtx* js, const Args& args,
                      std::chrono::steady_clock::time_point t0) {
  natsSubscription* notify = nullptr;
  Check(natsConnection_SubscribeSync(&notify, nc, args.marker.c_str()), "subscribe");
  Check(natsConnection_Flush(nc), "flush");
  for (;;) {
    if (SecondsSince(t0) > 600) Die("the marker never came");
    natsMsg* m = nullptr;
    if (natsSubscription_NextMsg(&m, notify, 1000) != NATS_OK) {
      if (!IsStoredChange(js, args.stream, args.marker, args.start_seq)) continue;
      break;
    }
    const bool change = Header(m, "Dblog-Event") == "change";
    natsMsg_Destroy(m);
    if (!change) continue;
    while (!IsStoredChange(js, args.stream, args.marker, args.start_seq)) {
      if (SecondsSince(t0) > 600) Die("the marker was never stored");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    break;
  }
}

// An ephemeral pull consumer of the stream from --start-seq on --filter, once the stream exists.
natsSubscription* PullSubscribe(jsCtx* js, const Args& args) {
  natsSubscription* sub = nullptr;
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = args.stream.c_str();
  so.Config.DeliverPolicy = js_DeliverByStartSequence;
  so.Config.OptStartSeq = args.start_seq;
  so.Config.AckPolicy = js_AckAll;  // one ack per fetched batch of messages
  jsErrCode code = static_cast<jsErrCode>(0);
  const std::string subject = args.filter.empty() ? ">" : args.filter;
  for (int tries = 0;; ++tries) {  // (the publisher creates the stream when it starts)
    const natsStatus s = js_PullSubscribe(&sub, js, subject.c_str(), nullptr, nullptr, &so, &code);
    if (s == NATS_OK) break;
    if (tries > 300) Check(s, "pull subscribe");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return sub;
}

struct Counts {
  unsigned long long messages = 0, events = 0, changes = 0;
};

// Fetches, unpacks and parses every message up to the first Change on the marker subject.
Counts ReadToTheMarker(natsSubscription* sub, const std::string& marker,
                       std::chrono::steady_clock::time_point t0) {
  Counts n;
  jsErrCode code = static_cast<jsErrCode>(0);
  std::vector<std::string_view> parts;
  dblog::v1::StreamEvent event;
  bool done = false;
  while (!done) {
    natsMsgList list{};
    const natsStatus s = natsSubscription_Fetch(&list, sub, 1024, 5000, &code);
    if (s == NATS_TIMEOUT) {
      if (SecondsSince(t0) > 600) Die("the marker never came");
      continue;
    }
    Check(s, "fetch");
    for (int i = 0; i < list.Count; ++i) {
      natsMsg* m = list.Msgs[i];
      ++n.messages;
      const char* data = natsMsg_GetData(m);
      if (!dblog::publish::SplitDelimited(
              std::string_view(data ? data : "",
                               static_cast<std::size_t>(natsMsg_GetDataLength(m))),
              parts))
        Die("a message is not a sequence of delimited events");
      const bool on_marker = marker == natsMsg_GetSubject(m);
      for (const auto p : parts) {
        if (!event.ParseFromArray(p.data(), static_cast<int>(p.size())))
          Die("a message holds something that is not a StreamEvent");
        ++n.events;
        if (event.has_change()) {
          ++n.changes;
          if (on_marker) done = true;
        }
      }
    }
    if (list.Count > 0) natsMsg_Ack(list.Msgs[list.Count - 1], nullptr);
    natsMsgList_Destroy(&list);
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  natsConnection* nc = nullptr;
  Check(natsConnection_ConnectTo(&nc, args.server.c_str()), "connect");
  jsCtx* js = nullptr;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 10000;
  Check(natsConnection_JetStream(&js, nc, &jo), "JetStream");
  const auto t0 = std::chrono::steady_clock::now();
  if (args.wait_only) {
    WaitForTheMarker(nc, js, args, t0);
    std::printf("{\"wall_s\": %.3f}\n", SecondsSince(t0));
    return 0;
  }
  natsSubscription* sub = PullSubscribe(js, args);
  const Counts n = ReadToTheMarker(sub, args.marker, t0);
  std::printf("{\"messages\": %llu, \"events\": %llu, \"changes\": %llu, \"wall_s\": %.3f}\n",
              n.messages, n.events, n.changes, SecondsSince(t0));
  natsSubscription_Destroy(sub);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  return 0;
}
