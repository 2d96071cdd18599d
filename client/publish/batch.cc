// client/publish/batch.cc: see batch.h.
#include "client/publish/batch.h"

#include <cstdint>
#include <utility>

#include "client/position.h"

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

bool Batcher::Closes(std::uint32_t relation_oid, std::size_t event_bytes) const {
  // (a large event closes the batch before it rather than overfill it: the broker's limit on a
  // message's size, 1 MB by default for NATS, is then only ever passed by one event alone; a
  // table renamed in between is a Relation, which closes the batch before it)
  return count_ > 0 && (relation_oid != batch_.relation_oid || count_ >= limits_.max_events ||
                        batch_.payload.size() + event_bytes + 10 > limits_.max_bytes);
}

void Batcher::Open(LogMessage message) {
  batch_ = std::move(message);
  std::string event = std::move(batch_.payload);
  batch_.payload.clear();
  AppendDelimited(event, batch_.payload);
  first_lsn_ = last_lsn_ = batch_.position->commit_lsn();
  first_seq_ = last_seq_ = batch_.position->seq();
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
  if (Closes(message.relation_oid, message.payload.size())) Close(out);
  if (count_ == 0) {
    Open(std::move(message));
    return;
  }
  AppendDelimited(message.payload, batch_.payload);
  last_lsn_ = message.position->commit_lsn();
  last_seq_ = message.position->seq();
  batch_.kind = message.kind;
  ++count_;
}

void Batcher::AddEvent(const dblog::v1::StreamEvent& event, const Layout::Target& target,
                       const dblog::v1::Position& position, std::vector<LogMessage>& out) {
  const std::size_t size = event.ByteSizeLong();
  if (Closes(target.relation_oid, size)) Close(out);
  if (count_ == 0) {
    batch_.schema = *target.schema;
    batch_.name = *target.name;
    batch_.table = *target.table;
    batch_.relation_oid = target.relation_oid;
    first_lsn_ = position.commit_lsn();
    first_seq_ = position.seq();
  }
  std::uint64_t n = size;
  while (n >= 0x80) {
    batch_.payload += static_cast<char>((n & 0x7F) | 0x80);
    n >>= 7;
  }
  batch_.payload += static_cast<char>(n);
  const std::size_t at = batch_.payload.size();
  batch_.payload.resize(at + size);
  event.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(&batch_.payload[at]));
  last_lsn_ = position.commit_lsn();
  last_seq_ = position.seq();
  batch_.kind = target.kind;
  ++count_;
}

void Batcher::Close(std::vector<LogMessage>& out) {
  if (count_ == 0) return;
  batch_.position = client::MakePosition(last_lsn_, last_seq_);
  // first..last: a message with other boundaries has another id (batch.h); one event: its
  // position, as without batches
  batch_.msg_id = PositionText(client::MakePosition(first_lsn_, first_seq_));
  if (count_ > 1) batch_.msg_id += ".." + PositionText(*batch_.position);
  out.push_back(std::move(batch_));
  batch_ = LogMessage();
  count_ = 0;
}

}  // namespace dblog::publish
