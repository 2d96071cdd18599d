// client/publish/publisher.cc: see publisher.h.
#include "client/publish/publisher.h"

#include <vector>

#include "client/position.h"

namespace dblog::publish {

using client::ComparePositions;
using dblog::v1::Position;
using dblog::v1::StreamEvent;

Publisher::Publisher(PublisherOptions options, std::shared_ptr<client::Interrupter> interrupter,
                     Log log)
    : options_(std::move(options)), interrupter_(std::move(interrupter)), log_(std::move(log)) {}

bool Publisher::Run(Broker& broker) {
  progressed_ = false;
  const StoredTail tail = broker.Open();
  std::uint64_t next_seq = tail.last_seq + 1;

  // What the log holds: positions up to `stored`, and at `stored` itself parts 1..stored_part.
  std::optional<Position> stored = tail.position;
  std::uint32_t stored_part = tail.part;
  client::ConnectOptions connect = options_.connect;
  if (stored) {
    if (tail.part < tail.parts) {
      // a fanned-out event cut in the middle: ask for it again (its seq is never 0), keep the
      // parts already stored
      connect.resume_after = client::MakePosition(stored->commit_lsn(), stored->seq() - 1);
    } else {
      connect.resume_after = stored;
    }
    log_("the log holds everything through " + PositionText(*stored) +
         (tail.part < tail.parts ? " (part " + std::to_string(tail.part) + " of " +
                                       std::to_string(tail.parts) + ")"
                                 : "") +
         " (sequence " + std::to_string(tail.last_seq) + "): resuming after it");
  } else if (!tail.resume_note.empty()) {
    log_(tail.resume_note);
  } else {
    log_("the log holds no position yet (sequence " + std::to_string(tail.last_seq) +
         "): starting where dblogd has the consumer");
  }

  client::Client stream = client::Client::Connect(connect, interrupter_);
  log_("connected to dblogd at " + connect.host + ":" + std::to_string(connect.port) + ", slot " +
       stream.welcome().slot() + (stream.welcome().slot_created() ? " (new)" : ""));

  Layout layout(options_.prefix, options_.format);
  layout.set_row_keys(broker.keyed());
  std::optional<Batcher> batcher;
  if (options_.batch) batcher.emplace(*options_.batch);
  std::vector<LogMessage> ready;  // what the batcher completed, to write now
  std::unordered_map<std::uint32_t, std::uint64_t> relation_seq;
  std::optional<Position> written;  // last position whose every part was handed to the broker
  std::optional<Position> acked = connect.resume_after;
  std::size_t in_flight_bytes = 0;

  const auto write = [&](const LogMessage& m) {
    const std::uint64_t seq = next_seq++;
    if (m.is_relation) relation_seq[m.relation_oid] = seq;
    std::uint64_t rseq = 0;
    if (m.relation_oid) {
      const auto it = relation_seq.find(m.relation_oid);
      if (it != relation_seq.end()) rseq = it->second;
    }
    broker.Publish(m, seq, rseq);
    in_flight_bytes += m.payload.size();
    ++stats_.messages;
    progressed_ = true;
  };
  const auto write_ready = [&] {
    for (const LogMessage& m : ready) write(m);
    ready.clear();
  };
  // Hands the open batch to the broker: `written` then holds for the broker.
  const auto close_batch = [&] {
    if (!batcher || !batcher->open()) return;
    batcher->Close(ready);
    write_ready();
  };

  // Waits for the broker's confirmations, then acknowledges what they cover.
  const auto confirm = [&](const std::optional<Position>& also) {
    close_batch();
    if (broker.pending() > 0) broker.Flush();
    in_flight_bytes = 0;
    std::optional<Position> ack = written;
    if (also && (!ack || ComparePositions(*also, *ack) > 0)) ack = also;
    if (ack && (!acked || ComparePositions(*ack, *acked) > 0)) {
      stream.Ack(*ack);
      acked = ack;
      stats_.acked = ack;
    }
  };

  client::ItemRef item;
  try {
    for (;;) {
      // Waiting for PubAcks at every pause of the stream would cost a round trip per frame:
      // only when many are in flight, and at heartbeats (a quiet stream is acknowledged at the
      // next one; what is not acknowledged yet is in the log, and a restart resumes after it).
      if (broker.pending() >= options_.max_in_flight ||
          in_flight_bytes >= options_.max_in_flight_bytes)
        confirm(std::nullopt);
      // A batch is written when the stream pauses (nothing more to read without waiting): a
      // busy stream fills batches, a quiet one is not held back.
      if (batcher && batcher->open() && !stream.HasBufferedItems()) close_batch();
      if (!stream.NextRef(item)) break;
      if (const auto* const* hb = std::get_if<const dblog::v1::Heartbeat*>(&item)) {
        // everything before the heartbeat was handed out, and is written (or was stored)
        confirm((*hb)->has_position() ? std::optional<Position>((*hb)->position())
                                      : std::nullopt);
        continue;
      }
      const auto* const* ref = std::get_if<const StreamEvent*>(&item);
      if (!ref) continue;  // Progress: nothing to publish
      const StreamEvent& event = **ref;
      const std::optional<Position> position = client::PositionOf(event);
      if (batcher && position) {
        // the common case: one message of its own, serialized straight into the batch
        if (const auto target = layout.SingleTarget(event)) {
          if (stored && ComparePositions(*position, *stored) <= 0) {
            ++stats_.skipped;
            continue;
          }
          ++stats_.events;
          batcher->AddEvent(event, *target, *position, ready);
          write_ready();
          written = position;
          stored.reset();
          continue;
        }
      }
      std::vector<LogMessage> messages = layout.Map(event);  // also learns Relations
      std::uint32_t skip_parts = 0;
      if (position && stored) {
        const int c = ComparePositions(*position, *stored);
        if (c < 0) {
          ++stats_.skipped;
          continue;
        }
        if (c == 0) {
          if (stored_part >= messages.size()) {
            ++stats_.skipped;
            continue;
          }
          skip_parts = stored_part;
        }
      }
      for (std::uint32_t i = skip_parts; i < messages.size(); ++i) {
        ++stats_.events;
        if (batcher) {
          batcher->Add(std::move(messages[i]), ready);
          write_ready();
        } else {
          write(messages[i]);
        }
      }
      if (position) {
        written = position;
        stored.reset();  // past the resume point: nothing more to drop
      }
    }
    confirm(std::nullopt);
    return false;
  } catch (const client::Interrupted&) {
    confirm(std::nullopt);
    return true;
  }
}

}  // namespace dblog::publish
