// tests/fuzz/plugin_batch_fuzz.cc: dblogd's reading of the plugin's messages, as
// Pipeline::OnData does it: each message parsed as a dblog.v1.Batch, the plugin's bytes of
// each Change sliced out of it (emit::ChangeBytes), every event fed to the Emitter with them.
// Input: a control byte (resume position), then plugin messages, each a varint length and
// that many bytes.
// Properties: ChangeBytes hands out, when it does, exactly the bytes each Change was parsed
// from; an Emitter fed the same events without those bytes (so it serializes every Change)
// accepts and refuses the same events and sends the same stream (the splice changes nothing but
// how it is written); the emitter's output parses as an EventBatch. Read in place (SplitBatch,
// ChangeView, as the pipeline reads first): only what protobuf parses is read so, to the same
// fields and the same key bytes (a ValuePiece: its bytes, ConsumePiece), and an Emitter fed the
// views (ConsumeChange) accepts, refuses and sends the same.
#include <google/protobuf/arena.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dblog/v1/change.pb.h"
#include "dblog/v1/consumer.pb.h"
#include "emit/ack_tracker.h"
#include "wire/change_view.h"
#include "emit/key.h"
#include "emit/emitter.h"
#include "fuzz_util.h"

using dblog::fuzz::Check;

namespace {

// The stream a consumer would read from `bytes` (EventBatch wire form), fields it does not know
// left out: the two paths may place or drop those differently (a seq of the wrong wire type).
std::string Canonical(const std::string& bytes) {
  dblog::v1::EventBatch batch;
  Check(batch.ParseFromString(bytes), "the emitter's output is an EventBatch");
  batch.DiscardUnknownFields();
  std::string out;
  batch.SerializeToString(&out);
  return out;
}

bool ReadVarint(std::string_view& in, std::uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
    const auto byte = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    *v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t control = data[0];
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  const dblog::emit::Position resume{(control & 1) ? 0x100u : 0u,
                                    static_cast<std::uint32_t>(control >> 1)};
  dblog::emit::AckTracker acks_spliced(0, resume), acks_serialized(0, resume),
      acks_viewed(0, resume);
  dblog::emit::Emitter spliced(resume, &acks_spliced), serialized(resume, &acks_serialized),
      viewed(resume, &acks_viewed);
  std::vector<dblog::wire::BatchEvent> split;
  std::vector<dblog::wire::ChangeView> views;
  google::protobuf::Arena arena;

  std::uint64_t length = 0;
  while (ReadVarint(in, &length) && length <= in.size()) {
    const std::string_view payload = in.substr(0, length);
    in.remove_prefix(length);
    arena.Reset();
    // the pipeline's first reading: in place
    bool in_place = dblog::wire::SplitBatch(payload, &split);
    views.clear();
    std::vector<std::string_view> pieces;  // a ValuePiece's bytes in place, as the pipeline
    for (const auto& e : split) {
      if (!in_place) break;
      pieces.emplace_back();
      if (e.member == dblog::v1::Event::kValuePiece &&
          dblog::wire::OneField(e.payload, dblog::v1::ValuePiece::kDataFieldNumber,
                                &pieces.back()) &&
          !pieces.back().empty())
        continue;
      pieces.back() = {};
      if (e.member != dblog::v1::Event::kChange) {
        dblog::v1::Event event;  // the other events are parsed, as Pipeline::ReadBatchInPlace does
        in_place = event.ParseFromArray(e.event.data(), static_cast<int>(e.event.size()));
        continue;
      }
      views.emplace_back();
      in_place = views.back().Parse(e.payload);
    }
    auto* batch = google::protobuf::Arena::CreateMessage<dblog::v1::Batch>(&arena);
    const bool parses = batch->ParseFromArray(payload.data(), static_cast<int>(payload.size()));
    Check(!in_place || parses, "read in place only what protobuf parses");
    if (!parses) return 0;
    if (in_place) {
      Check(split.size() == static_cast<std::size_t>(batch->events_size()),
            "SplitBatch: every event");
      std::size_t v = 0;
      for (int i = 0; i < batch->events_size(); ++i) {
        const auto& event = batch->events(i);
        Check(event.has_change() == (split[static_cast<std::size_t>(i)].member ==
                                     dblog::v1::Event::kChange),
              "SplitBatch: the member");
        if (!event.has_change()) continue;
        const dblog::wire::ChangeView& view = views[v++];
        const dblog::v1::Change& c = event.change();
        Check(view.kind == c.kind() && view.relation_oid == c.relation_oid() &&
                  view.commit_lsn == c.commit_lsn() && view.seq == c.seq() &&
                  view.lsn == c.lsn() && view.xid == c.xid() &&
                  view.commit_time == c.commit_time() && view.has_new_row == c.has_new_row() &&
                  view.has_old_key == c.has_old_key() && view.has_old_row == c.has_old_row(),
              "ChangeView: the fields protobuf parses");
        Check(view.raw == split[static_cast<std::size_t>(i)].payload, "ChangeView: its bytes");
        const std::pair<const dblog::wire::RowView*, const dblog::v1::Row*> rows[] = {
            {&view.new_row, &c.new_row()}, {&view.old_key, &c.old_key()},
            {&view.old_row, &c.old_row()}};
        for (const auto& [rv, row] : rows) {
          Check(rv->bytes() == row->SerializeAsString() &&
                    rv->size() == static_cast<std::size_t>(row->values_size()),
                "ChangeView: rows in place are their serialization");
          for (int k = 0; k < row->values_size(); ++k) {
            const dblog::wire::ValueView& value = (*rv)[static_cast<std::size_t>(k)];
            Check(value.kind == row->values(k).kind_case() &&
                      value.bytes == row->values(k).SerializeAsString() &&
                      (value.kind == dblog::v1::Value::kUnchanged) == row->values(k).unchanged(),
                  "ChangeView: each value as protobuf parses it");
          }
        }
        dblog::v1::Relation rel;  // key columns from the bytes: any order, repeats, past the end
        for (std::size_t k = 0; k < 3 && k < view.raw.size(); ++k)
          rel.add_key_columns(static_cast<unsigned char>(view.raw[k]) % 8);
        Check(dblog::emit::KeyBytes(rel, view.new_row) == dblog::emit::KeyBytes(rel, c.new_row()),
              "ChangeView: the same key bytes");
      }
    }
    const std::vector<std::string_view> change_bytes =
        dblog::emit::ChangeBytes(payload, batch->events_size());
    Check(change_bytes.empty() ||
              change_bytes.size() == static_cast<std::size_t>(batch->events_size()),
          "ChangeBytes: one slice per event, or none");
    for (std::size_t i = 0; i < change_bytes.size(); ++i) {
      const std::string_view raw = change_bytes[i];
      if (raw.empty()) continue;
      Check(raw.data() >= payload.data() && raw.data() + raw.size() <= payload.data() + payload.size(),
            "ChangeBytes: slices lie inside the message");
      const auto& event = batch->events(static_cast<int>(i));
      Check(event.has_change(), "ChangeBytes: a slice only for a Change");
      dblog::v1::Change parsed;
      Check(parsed.ParseFromArray(raw.data(), static_cast<int>(raw.size())) &&
                parsed.SerializeAsString() == event.change().SerializeAsString(),
            "ChangeBytes: the slice is what the Change was parsed from");
    }
    std::size_t view_index = 0;
    for (int i = 0; i < batch->events_size(); ++i) {
      dblog::v1::Event copy = batch->events(i), original = batch->events(i);
      bool spliced_ok = true, serialized_ok = true;
      try {
        spliced.Consume(*batch->mutable_events(i),
                        change_bytes.empty() ? std::string_view() : change_bytes[i]);
      } catch (const std::logic_error&) {
        spliced_ok = false;
      }
      try {
        serialized.Consume(copy);
      } catch (const std::logic_error&) {
        serialized_ok = false;
      }
      Check(spliced_ok == serialized_ok, "the splice accepts what serializing accepts");
      // the pipeline's way: the message read in place, or (not canonical) parsed whole
      bool viewed_ok = true;
      try {
        if (in_place && !pieces[static_cast<std::size_t>(i)].empty()) {
          Check(original.has_value_piece() &&
                    original.value_piece().data() == pieces[static_cast<std::size_t>(i)],
                "a ValuePiece in place: the bytes protobuf parses");
          viewed.ConsumePiece(pieces[static_cast<std::size_t>(i)]);
        } else if (in_place && original.has_change())
          viewed.ConsumeChange(views[view_index++]);
        else if (in_place)
          viewed.Consume(original);
        else
          viewed.Consume(original, change_bytes.empty() ? std::string_view() : change_bytes[i]);
      } catch (const std::logic_error&) {
        viewed_ok = false;
      }
      Check(viewed_ok == serialized_ok, "as the pipeline reads it, the same events are accepted");
      if (!spliced_ok) return 0;  // the pipeline ends the session
    }
    const std::string serialized_out = Canonical(serialized.TakeOutput());
    Check(Canonical(spliced.TakeOutput()) == serialized_out,
          "the splice sends the stream serializing sends");
    Check(Canonical(viewed.TakeOutput()) == serialized_out,
          "as the pipeline reads it, the same stream is sent");
    Check(spliced.last_position() == serialized.last_position() &&
              viewed.last_position() == serialized.last_position() &&
              acks_spliced.unacknowledged() == acks_serialized.unacknowledged() &&
              acks_viewed.unacknowledged() == acks_serialized.unacknowledged(),
          "the same positions either way");
  }
  return 0;
}
