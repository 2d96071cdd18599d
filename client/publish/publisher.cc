// client/publish/publisher.cc: see publisher.h.
#include "client/publish/publisher.h"

#include <stdexcept>
#include <vector>

#include "client/position.h"

namespace dblog::publish {

using client::ComparePositions;
using dblog::v1::Position;
using dblog::v1::StreamEvent;

Publisher::Publisher(PublisherOptions options, std::shared_ptr<client::Interrupter> interrupter,
                     Log log)
    : options_(std::move(options)), interrupter_(std::move(interrupter)), log_(std::move(log)) {
  if (options_.format == Format::kDebeziumAvro) {
    if (!options_.registry) throw std::invalid_argument("debezium-avro needs a schema registry");
    avro_ = std::make_unique<ConfluentAvroEncoder>(*options_.registry);
  }
}

namespace {

// Where the log ends (Broker::Open), said in the log and turned into the Hello's resume point.
struct ResumePoint {
  // What the log holds: positions up to `stored`, and at `stored` itself parts 1..stored_part.
  std::optional<Position> stored;
  std::uint32_t stored_part = 0;
  // The Hello's (and what counts as acknowledged already): after `stored`, else as configured.
  std::optional<Position> resume_after;
};

ResumePoint FromTail(const StoredTail& tail, const std::optional<Position>& configured,
                     const Publisher::Log& log) {
  ResumePoint r{tail.position, tail.part, configured};
  if (r.stored) {
    if (tail.part < tail.parts) {
      // a fanned-out event cut in the middle: ask for it again (its seq is never 0), keep the
      // parts already stored
      r.resume_after = client::MakePosition(r.stored->commit_lsn(), r.stored->seq() - 1);
    } else {
      r.resume_after = r.stored;
    }
    log("the log holds everything through " + PositionText(*r.stored) +
        (tail.part < tail.parts ? " (part " + std::to_string(tail.part) + " of " +
                                      std::to_string(tail.parts) + ")"
                                : "") +
        " (sequence " + std::to_string(tail.last_seq) + "): resuming after it");
  } else if (!tail.resume_note.empty()) {
    log(tail.resume_note);
  } else {
    log("the log holds no position yet (sequence " + std::to_string(tail.last_seq) +
        "): starting where dblogd has the consumer");
  }
  return r;
}

}  // namespace

// One attempt's state: the log's next sequence, what it already holds (dropped when dblogd
// sends it again), the open batch, what was handed to the broker and what was acknowledged.
class Publisher::Attempt {
 public:
  Attempt(const PublisherOptions& options, Broker& broker, client::Client& stream,
          const StoredTail& tail, const ResumePoint& resume, PublishStats& stats,
          bool& progressed, ConfluentAvroEncoder* avro)
      : options_(options),
        broker_(broker),
        stream_(stream),
        stats_(stats),
        progressed_(progressed),
        layout_(options.prefix, options.format),
        next_seq_(tail.last_seq + 1),
        stored_(resume.stored),
        stored_part_(resume.stored_part),
        acked_(resume.resume_after),
        avro_(avro) {
    layout_.set_row_keys(broker.keyed());
    layout_.set_debezium_options(options.debezium);
    if (options.batch) batcher_.emplace(*options.batch);
  }

  // Reads the stream to its end (false) or an interruption (true), confirming as it goes.
  bool ReadAll() {
    client::ItemRef item;
    try {
      for (;;) {
        // Waiting for PubAcks at every pause of the stream would cost a round trip per frame:
        // only when many are in flight, and at heartbeats (a quiet stream is acknowledged at
        // the next one; what is not acknowledged yet is in the log, and a restart resumes
        // after it).
        if (broker_.pending() >= options_.max_in_flight ||
            in_flight_bytes_ >= options_.max_in_flight_bytes)
          Confirm(std::nullopt);
        // A batch is written when the stream pauses (nothing more to read without waiting): a
        // busy stream fills batches, a quiet one is not held back.
        if (batcher_ && batcher_->open() && !stream_.HasBufferedItems()) CloseBatch();
        if (!stream_.NextRef(item)) break;
        if (const auto* const* hb = std::get_if<const dblog::v1::Heartbeat*>(&item)) {
          // everything before the heartbeat was handed out, and is written (or was stored)
          Confirm((*hb)->has_position() ? std::optional<Position>((*hb)->position())
                                        : std::nullopt);
          continue;
        }
        const auto* const* ref = std::get_if<const StreamEvent*>(&item);
        if (!ref) continue;  // Progress: nothing to publish
        Publish(**ref);
      }
      Confirm(std::nullopt);
      return false;
    } catch (const client::Interrupted&) {
      Confirm(std::nullopt);
      return true;
    }
  }

 private:
  void Publish(const StreamEvent& event) {
    const std::optional<Position> position = client::PositionOf(event);
    if (batcher_ && position) {
      // the common case: one message of its own, serialized straight into the batch
      if (const auto target = layout_.SingleTarget(event)) {
        if (stored_ && ComparePositions(*position, *stored_) <= 0) {
          ++stats_.skipped;
          return;
        }
        ++stats_.events;
        batcher_->AddEvent(event, *target, *position, ready_);
        WriteReady();
        written_ = position;
        stored_.reset();
        return;
      }
    }
    std::vector<LogMessage> messages = layout_.Map(event);  // also learns Relations
    if (avro_)
      for (LogMessage& m : messages) ToAvro(m);
    std::uint32_t skip_parts = 0;
    if (position && stored_) {
      const int c = ComparePositions(*position, *stored_);
      if (c < 0) {
        ++stats_.skipped;
        return;
      }
      if (c == 0) {
        if (stored_part_ >= messages.size()) {
          ++stats_.skipped;
          return;
        }
        skip_parts = stored_part_;
      }
    }
    for (std::uint32_t i = skip_parts; i < messages.size(); ++i) {
      ++stats_.events;
      if (batcher_) {
        batcher_->Add(std::move(messages[i]), ready_);
        WriteReady();
      } else {
        Write(messages[i]);
      }
    }
    if (position) {
      written_ = position;
      stored_.reset();  // past the resume point: nothing more to drop
    }
  }

  // Format::kDebeziumAvro: the key and value ({"schema","payload"} JSON from the layout) as
  // Confluent wire bytes, their schemas registered under TopicNameStrategy's subjects; a
  // tombstone's value stays empty (null).
  void ToAvro(LogMessage& m) {
    const std::string topic = broker_.TopicOf(m);
    try {
      if (!m.payload.empty()) m.payload = avro_->Encode(topic + "-value", m.payload);
      if (!m.key.empty()) {
        m.key = avro_->Encode(topic + "-key", m.key);
        m.binary_key = true;
      }
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error("table " + m.table + ": cannot write it as Avro: " + e.what());
    }
  }

  void Write(const LogMessage& m) {
    const std::uint64_t seq = next_seq_++;
    if (m.kind == EventKind::kRelation) relation_seq_[m.relation_oid] = seq;
    std::uint64_t rseq = 0;
    if (m.relation_oid) {
      const auto it = relation_seq_.find(m.relation_oid);
      if (it != relation_seq_.end()) rseq = it->second;
    }
    broker_.Publish(m, seq, rseq);
    in_flight_bytes_ += m.payload.size();
    ++stats_.messages;
    progressed_ = true;
  }

  void WriteReady() {
    for (const LogMessage& m : ready_) Write(m);
    ready_.clear();
  }

  // Hands the open batch to the broker: `written_` then holds for the broker.
  void CloseBatch() {
    if (!batcher_ || !batcher_->open()) return;
    batcher_->Close(ready_);
    WriteReady();
  }

  // Waits for the broker's confirmations, then acknowledges what they cover.
  void Confirm(const std::optional<Position>& also) {
    CloseBatch();
    if (broker_.pending() > 0) broker_.Flush();
    in_flight_bytes_ = 0;
    std::optional<Position> ack = written_;
    if (also && (!ack || ComparePositions(*also, *ack) > 0)) ack = also;
    if (ack && (!acked_ || ComparePositions(*ack, *acked_) > 0)) {
      stream_.Ack(*ack);
      acked_ = ack;
      stats_.acked = ack;
    }
  }

  const PublisherOptions& options_;
  Broker& broker_;
  client::Client& stream_;
  PublishStats& stats_;
  bool& progressed_;
  Layout layout_;
  std::optional<Batcher> batcher_;
  std::vector<LogMessage> ready_;  // what the batcher completed, to write now
  std::unordered_map<std::uint32_t, std::uint64_t> relation_seq_;
  std::uint64_t next_seq_;
  std::optional<Position> stored_;
  std::uint32_t stored_part_;
  std::optional<Position> written_;  // last position whose every part was handed to the broker
  std::optional<Position> acked_;
  std::size_t in_flight_bytes_ = 0;
  ConfluentAvroEncoder* avro_;  // Format::kDebeziumAvro, else nullptr
};

bool Publisher::Run(Broker& broker) {
  progressed_ = false;
  const StoredTail tail = broker.Open();
  const ResumePoint resume = FromTail(tail, options_.connect.resume_after, log_);
  client::ConnectOptions connect = options_.connect;
  connect.resume_after = resume.resume_after;
  client::Client stream = client::Client::Connect(connect, interrupter_);
  log_("connected to dblogd at " + connect.host + ":" + std::to_string(connect.port) + ", slot " +
       stream.welcome().slot() + (stream.welcome().slot_created() ? " (new)" : ""));
  if (const std::string note = client::ReconcileNote(stream.welcome()); !note.empty()) log_(note);
  Attempt attempt(options_, broker, stream, tail, resume, stats_, progressed_, avro_.get());
  return attempt.ReadAll();
}

}  // namespace dblog::publish
