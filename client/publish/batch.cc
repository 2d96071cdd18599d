// client/publish/batch.cc: see batch.h.
#include "client/publish/batch.h"

#include <cstdint>
#include <utility>

namespace dblog::publish {

void AppendDelimited(std::string_view event, std::string& payload) {
  std::uint64_t n = event.size();
  while (n >= 0x80) {
    payload += static_cast<char>((n & 0x7F) | 0x80);
    n >>= 7;
  }
  payload += static_cast<char>(n);
  payload.append(event);
}

bool SplitDelimited(std::string_view payload, std::vector<std::string_view>& events) {
  events.clear();
  std::size_t i = 0;
  while (i < payload.size()) {
    std::uint64_t n = 0;
    int shift = 0;
    for (;;) {
      if (i >= payload.size() || shift > 28) return false;  // lengths fit 32 bits, as protobuf's
      const auto byte = static_cast<unsigned char>(payload[i++]);
      n |= static_cast<std::uint64_t>(byte & 0x7F) << shift;
      shift += 7;
      if (!(byte & 0x80)) break;
    }
    if (n > payload.size() - i) return false;
    events.push_back(payload.substr(i, n));
    i += n;
  }
  return true;
}

void Batcher::Open(LogMessage message) {
  batch_ = std::move(message);
  std::string event = std::move(batch_.payload);
  batch_.payload.clear();
  AppendDelimited(event, batch_.payload);
  first_id_ = batch_.msg_id;
  count_ = 1;
}

void Batcher::Add(LogMessage message, std::vector<LogMessage>& out) {
  if (!Batchable(message)) {
    Close(out);
    std::string event = std::move(message.payload);
    message.payload.clear();
    AppendDelimited(event, message.payload);
    out.push_back(std::move(message));
    return;
  }
  // (a large event closes the batch before it rather than overfill it: the broker's limit on a
  // message's size, 1 MB by default for NATS, is then only ever passed by one event alone)
  if (count_ > 0 && (message.subject != batch_.subject || count_ >= limits_.max_events ||
                     batch_.payload.size() + message.payload.size() + 10 > limits_.max_bytes))
    Close(out);
  if (count_ == 0) {
    Open(std::move(message));
    return;
  }
  AppendDelimited(message.payload, batch_.payload);
  batch_.position = message.position;
  batch_.event = std::move(message.event);
  last_id_ = std::move(message.msg_id);
  ++count_;
}

void Batcher::Close(std::vector<LogMessage>& out) {
  if (count_ == 0) return;
  // first..last: a message with other boundaries has another id (batch.h)
  if (count_ > 1) batch_.msg_id = first_id_ + ".." + last_id_;
  out.push_back(std::move(batch_));
  batch_ = LogMessage();
  count_ = 0;
}

}  // namespace dblog::publish
