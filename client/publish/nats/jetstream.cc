// client/publish/nats/jetstream.cc: see jetstream.h.
#include "client/publish/nats/jetstream.h"

#include <nats/nats.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <thread>

#include "common/json.h"

namespace dblog::publish {

namespace {

std::string StatusText(natsStatus s) {
  std::string text = natsStatus_GetText(s);
  natsStatus last = NATS_OK;
  if (const char* detail = nats_GetLastError(&last); detail && *detail && last == s)
    text += std::string(" (") + detail + ")";
  return text;
}

// Errors of the connection itself (the server gone, a timeout) can be retried; a refusal of a
// JetStream API request is retried too unless it says the configuration is wrong.
BrokerError Failure(const std::string& what, natsStatus s,
                    jsErrCode code = static_cast<jsErrCode>(0)) {
  std::string message = "NATS: " + what + ": " + StatusText(s);
  if (code != 0) message += " [JetStream error " + std::to_string(static_cast<int>(code)) + "]";
  const bool config_error = s == NATS_NOT_PERMITTED || s == NATS_INVALID_ARG ||
                            code == JSStreamNameExistErr || code == JSStreamSubjectOverlapErr ||
                            code == JSStreamInvalidConfig;
  return BrokerError(message, !config_error);
}

void OnPubAckError(jsCtx*, jsPubAckErr* pae, void* closure) {
  std::string error = "a publish failed: ";
  error += natsStatus_GetText(pae->Err);
  if (pae->ErrText) error += std::string(": ") + pae->ErrText;
  if (pae->ErrCode)
    error += " [JetStream error " + std::to_string(static_cast<int>(pae->ErrCode)) + "]";
  static_cast<JetStream*>(closure)->RecordAsyncError(error);
}

std::string Header(natsMsg* msg, const char* key) {
  const char* value = nullptr;
  if (natsMsgHeader_Get(msg, key, &value) != NATS_OK || !value) return {};
  return value;
}

}  // namespace

std::vector<std::string> ParseNatsUrl(const std::string& url) {
  std::vector<std::string> servers;
  std::size_t start = 0;
  while (start <= url.size()) {
    const std::size_t comma = url.find(',', start);
    std::string one =
        url.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (one.rfind("nats://", 0) != 0) {
      if (servers.empty() || one.find("://") != std::string::npos)
        throw std::invalid_argument("'" + one + "' is not nats://HOST:PORT");
      one = "nats://" + one;  // the later servers of a list may leave the scheme out
    }
    const std::string hostport = one.substr(7);
    const std::size_t colon = hostport.rfind(':');
    if (hostport.empty() || hostport.find('/') != std::string::npos ||
        hostport.find('@') != std::string::npos || colon == 0 ||
        (colon != std::string::npos &&
         (colon + 1 == hostport.size() ||
          hostport.find_first_not_of("0123456789", colon + 1) != std::string::npos)))
      throw std::invalid_argument("'" + one + "' is not nats://HOST:PORT");
    servers.push_back(one);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return servers;
}

JetStream::JetStream(JetStreamOptions options)
    : options_(std::move(options)), subjects_(options_.prefix) {}

JetStream::~JetStream() { Close(); }

void JetStream::Close() {
  if (js_) {
    jsCtx_Destroy(js_);  // pending publishes are dropped: their acks are never waited for
    js_ = nullptr;
  }
  if (nc_) {
    natsConnection_Destroy(nc_);
    nc_ = nullptr;
  }
  pending_ = 0;
  std::lock_guard lock(error_mutex_);
  first_error_.clear();
}

void JetStream::RecordAsyncError(const std::string& error) {
  std::lock_guard lock(error_mutex_);
  if (first_error_.empty()) first_error_ = error;
}

void JetStream::Connect() {
  natsOptions* opts = nullptr;
  natsStatus s = natsOptions_Create(&opts);
  std::vector<const char*> urls;
  for (const auto& u : options_.servers) urls.push_back(u.c_str());
  if (s == NATS_OK) s = natsOptions_SetServers(opts, urls.data(), static_cast<int>(urls.size()));
  if (s == NATS_OK) s = natsOptions_SetTimeout(opts, options_.ack_timeout.count());
  // A lost server is left to the session above (it opens again and reads the tail), but a
  // short reconnect lets a publish in flight finish when another node of the cluster answers.
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, 5);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(opts, 200);
  if (s == NATS_OK) s = natsConnection_Connect(&nc_, opts);
  natsOptions_Destroy(opts);
  if (s != NATS_OK) {
    nc_ = nullptr;
    throw Failure("cannot connect to " + options_.servers.front(), s);
  }

  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = options_.ack_timeout.count();
  jo.PublishAsync.MaxPending = static_cast<int64_t>(options_.max_pending);
  jo.PublishAsync.ErrHandler = OnPubAckError;
  jo.PublishAsync.ErrHandlerClosure = this;
  jo.PublishAsync.StallWait = options_.ack_timeout.count();
  s = natsConnection_JetStream(&js_, nc_, &jo);
  if (s != NATS_OK) {
    js_ = nullptr;
    throw Failure("JetStream context", s);
  }
}

jsStreamInfo* JetStream::StreamInfo() {
  jsStreamInfo* info = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetStreamInfo(&info, js_, options_.stream.c_str(), nullptr, &code);
  if (s == NATS_NOT_FOUND || code == JSStreamNotFoundErr) {
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = options_.stream.c_str();
    const std::string all = subjects_.All();
    const char* subjects[] = {all.c_str()};
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    cfg.Replicas = options_.replicas;
    code = static_cast<jsErrCode>(0);
    s = js_AddStream(&info, js_, &cfg, nullptr, &code);
    if (s != NATS_OK) throw Failure("cannot create stream " + options_.stream, s, code);
  } else if (s != NATS_OK) {
    throw Failure("stream info of " + options_.stream, s, code);
  }
  return info;
}

void JetStream::ReadLastPosition(std::uint64_t first_seq, StoredTail& tail) {
  for (std::uint64_t seq = tail.last_seq; seq >= first_seq && seq > 0; --seq) {
    natsMsg* msg = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus s = js_GetMsg(&msg, js_, options_.stream.c_str(), seq, nullptr, &code);
    if (s == NATS_NOT_FOUND || code == JSNoMessageFoundErr) continue;  // deleted
    if (s != NATS_OK) throw Failure("reading message " + std::to_string(seq), s, code);
    const std::string position = Header(msg, kPositionHeader);
    const std::string part = Header(msg, kPartHeader);
    natsMsg_Destroy(msg);
    if (position.empty()) continue;
    tail.position = ParsePositionText(position);
    if (!tail.position)
      throw BrokerError("NATS: message " + std::to_string(seq) + " of stream " + options_.stream +
                            " has a malformed " + kPositionHeader + " '" + position + "'",
                        false);
    if (!part.empty()) {
      const auto p = ParsePartText(part);
      if (!p)
        throw BrokerError("NATS: message " + std::to_string(seq) + " has a malformed " +
                              kPartHeader + " '" + part + "'",
                          false);
      tail.part = p->first;
      tail.parts = p->second;
    }
    break;
  }
}

// A replicated stream's tail is read only once it holds still. nats-server (2.9.10 in Debian 12)
// checks Nats-Msg-Id and Nats-Expected-Last-Sequence on the stream leader when it proposes a
// message, against what that leader has applied (nats-server PR 6415, January 2025, moved the
// checks to where every replica applies). A leader elected a moment ago may not yet have applied
// what its predecessor had committed: a resend checked then passes both checks and is stored after
// the first copy (seen: the same id at two adjacent sequences after a node was killed). So a tail
// is trusted only when two reads kSettle apart name the same leader and the same last sequence;
// until then nothing is published (R1 streams have no leader to change and are read at once).
jsStreamInfo* JetStream::SettledStreamInfo() {
  using clock = std::chrono::steady_clock;
  constexpr auto kSettle = std::chrono::milliseconds(500);
  const auto deadline =
      clock::now() + std::max(options_.ack_timeout, std::chrono::milliseconds(5000)) * 4;
  jsStreamInfo* info = StreamInfo();
  if (!info->Config || info->Config->Replicas <= 1) return info;
  // (leader, last sequence) of the previous read: a node that is down does not hold it up
  std::optional<std::pair<std::string, std::uint64_t>> seen;
  for (;;) {
    const bool led = info->Cluster && info->Cluster->Leader && *info->Cluster->Leader;
    const auto now =
        led ? std::optional(std::make_pair(std::string(info->Cluster->Leader), info->State.LastSeq))
            : std::nullopt;
    if (now && seen == now) return info;
    seen = now;
    jsStreamInfo_Destroy(info);
    if (clock::now() > deadline)
      throw BrokerError("NATS: stream " + options_.stream +
                            " did not settle (one leader, its last sequence unchanged for " +
                            std::to_string(kSettle.count()) + " ms)",
                        true);
    std::this_thread::sleep_for(kSettle);
    info = StreamInfo();
  }
}

StoredTail JetStream::Open() {
  Close();
  Connect();
  jsStreamInfo* info = SettledStreamInfo();
  bool holds_subjects = false;
  for (int i = 0; info->Config && i < info->Config->SubjectsLen; ++i)
    holds_subjects = holds_subjects || subjects_.All() == info->Config->Subjects[i];
  StoredTail tail;
  tail.last_seq = info->State.LastSeq;
  const std::uint64_t first_seq = info->State.FirstSeq;
  jsStreamInfo_Destroy(info);
  if (!holds_subjects) {
    throw BrokerError("NATS: stream " + options_.stream + " exists but does not hold subjects " +
                          subjects_.All() + " (give another --stream, or --subject-prefix)",
                      false);
  }
  // The last message that carries a position (Relations after it carry none).
  ReadLastPosition(first_seq, tail);
  return tail;
}

void JetStream::Publish(const LogMessage& message, std::uint64_t seq, std::uint64_t relation_seq) {
  {
    std::lock_guard lock(error_mutex_);
    if (!first_error_.empty()) throw BrokerError("NATS: " + first_error_, true);
  }
  natsMsg* msg = nullptr;
  const std::string subject = subjects_.Of(message);
  natsStatus s = natsMsg_Create(&msg, subject.c_str(), nullptr, message.payload.data(),
                                static_cast<int>(message.payload.size()));
  const auto set = [&](const char* key, const std::string& value) {
    if (s == NATS_OK) s = natsMsgHeader_Set(msg, key, value.c_str());
  };
  if (!message.msg_id.empty()) set("Nats-Msg-Id", message.msg_id);
  if (seq > 1) set("Nats-Expected-Last-Sequence", std::to_string(seq - 1));
  set(kEventHeader, EventKindName(message.kind));
  if (message.position) set(kPositionHeader, PositionText(*message.position));
  if (message.parts > 1) set(kPartHeader, PartText(message));
  if (!message.table.empty()) set(kTableHeader, TableHeaderText(message.table));
  if (relation_seq) set(kRelationSeqHeader, std::to_string(relation_seq));
  if (!message.key.empty())
    set(kKeyHeader, message.binary_key ? common::Base64Encode(message.key) : message.key);
  if (s == NATS_OK) s = js_PublishMsgAsync(js_, &msg, nullptr);
  if (s != NATS_OK) {
    if (msg) natsMsg_Destroy(msg);
    throw Failure("publishing to " + subject, s);
  }
  ++pending_;
}

void JetStream::Flush() {
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = options_.ack_timeout.count();
  const natsStatus s = js_PublishAsyncComplete(js_, &po);
  pending_ = 0;
  {
    std::lock_guard lock(error_mutex_);
    if (!first_error_.empty()) throw BrokerError("NATS: " + first_error_, true);
  }
  if (s != NATS_OK) throw Failure("waiting for PubAcks", s);
}

}  // namespace dblog::publish
