// client/publish/batch.h: several events in one log message (docs/publish.md, "Batches"), as
// pure logic. The messages of Layout::Map (Format::kDblog) go in, in order; what comes out is
// what the broker writes, in the same order: consecutive single-part events with a position for
// the same destination (the control stream, or one table) share one message (at most max_events,
// about max_bytes), every other message stands alone. Every payload that comes out is a sequence of
// varint-length-delimited serialized dblog.v1.StreamEvents (the framing of dblogd's own TCP stream,
// protobuf's writeDelimitedTo), one or more, whether batched or not.
//
// Why batches are safe for exactly once: a message is stored whole or not at all, its
// Dblog-Position is its last event's (where a restart resumes), and its Nats-Msg-Id names its
// first and last positions, so a resend cut at other boundaries (a restart batches differently)
// is never taken for a duplicate of a message that holds fewer events (JetStream checks the id
// before the expected sequence).
// Owns: which events share a message, the framing, a batch's headers' values. No I/O.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "client/publish/layout.h"

namespace dblog::publish {

struct BatchLimits {
  std::size_t max_events = 1024;       // events in one message
  std::size_t max_bytes = 256 * 1024;  // payload bytes in one message (one event may pass it)
};

class Batcher {
 public:
  explicit Batcher(BatchLimits limits) : limits_(limits) {}

  // Takes the next message of Layout::Map (payload: one serialized StreamEvent) and appends to
  // `out` the messages that are complete now (none while it joins the open batch).
  void Add(LogMessage message, std::vector<LogMessage>& out);
  // The same for an event Layout::SingleTarget placed (at `position`), serialized straight
  // into the batch: no message of its own is built (the common case, per event).
  void AddEvent(const dblog::v1::StreamEvent& event, const Layout::Target& target,
                const dblog::v1::Position& position, std::vector<LogMessage>& out);
  // Appends the open batch, if any, to `out` (to write it now: the stream paused, or the
  // broker's confirmations are to be awaited).
  void Close(std::vector<LogMessage>& out);
  bool open() const { return count_ > 0; }
  // Events in the open batch.
  std::size_t open_events() const { return count_; }

 private:
  static bool Batchable(const LogMessage& message) {
    return message.parts == 1 && message.kind != EventKind::kRelation &&
           message.position.has_value();
  }
  // `relation_oid`: the next event's destination (0: the control stream)
  bool Closes(std::uint32_t relation_oid, std::size_t event_bytes) const;
  void Open(LogMessage message);

  BatchLimits limits_;
  LogMessage batch_;  // the open batch: payload framed, position and id set by Close
  std::uint64_t first_lsn_ = 0, last_lsn_ = 0;  // its first and last event's positions
  std::uint32_t first_seq_ = 0, last_seq_ = 0;
  std::size_t count_ = 0;
};

// Appends `event` (one serialized StreamEvent) to `payload` with its varint length before it.
void AppendDelimited(std::string_view event, std::string& payload);
// Splits a payload into its events' serialized bytes; false when it is not a sequence of
// varint-length-delimited messages (a truncated length or body).
bool SplitDelimited(std::string_view payload, std::vector<std::string_view>& events);

}  // namespace dblog::publish
