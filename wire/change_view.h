// wire/change_view.h: a Change read in place. Both ends read every Change: dblogd the plugin's
// (of whose rows it needs only which values are unchanged TOAST and the key columns' bytes),
// consumers the stream's (every value). Parsing each value into a message, and each long one into
// a string, was most of dblogd's CPU on a busy stream and most of a consumer's in a bootstrap. A
// ChangeView holds the Change's scalar fields and views into the received bytes for its rows and
// values; dblogd's pipeline, key log and emitter read those (and parse a Change into messages
// only where they need one: a row a repair window carries, a request of the queue, a
// key-changing UPDATE the emitter splits), and the client library hands them out
// (client/client.h, Client::NextView).
//
// Only the canonical encoding the plugin writes (and dblogd forwards unchanged) is read in place:
// fields in number order, each once, minimal varints, one member per Value, null_value and
// unchanged true, valid UTF-8 in text. Anything else makes Parse false, and the caller parses the
// Change as a message instead, so every input means what protobuf says it means. A value's bytes
// are then exactly what serializing its parsed message gives (so keys made from them equal those
// made from the message: sidecar/emit/key.h).
// Owns: that reading. Pure: no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dblog/v1/change.pb.h"

namespace dblog::wire {

// One Row.values element: its bytes (a serialized Value) and the member set. The accessors
// read the member Parse checked; each is for the kinds its comment names (anything else: 0, "").
struct ValueView {
  std::string_view bytes;
  dblog::v1::Value::KindCase kind = dblog::v1::Value::KIND_NOT_SET;

  // text_value, literal, bytes_value, uuid_value: the bytes (text is valid UTF-8)
  std::string_view text() const;
  // int_value, timestamp_value, timestamptz_value, date_value; bool_value as 0 or 1
  std::int64_t integer() const;
  float float4() const;   // float4_value, bit-exact
  double float8() const;  // float8_value, bit-exact
};

// A Row's values in place. Reused from change to change, it keeps its capacity.
class RowView {
 public:
  // False when `row` is not a canonical Row (see the header comment).
  bool Parse(std::string_view row);
  void Clear();
  std::size_t size() const { return values_.size(); }
  const ValueView& operator[](std::size_t i) const { return values_[i]; }
  std::string_view bytes() const { return bytes_; }
  bool HasUnchanged() const;

 private:
  std::string_view bytes_;
  std::vector<ValueView> values_;
};

// A Change in place: its scalar fields, its rows as views. Its views point into the bytes given
// to Parse: they live as long as those.
struct ChangeView {
  dblog::v1::Change::Kind kind = dblog::v1::Change::KIND_UNSPECIFIED;
  std::uint32_t relation_oid = 0;
  std::uint64_t commit_lsn = 0;
  std::uint32_t seq = 0;
  std::uint64_t lsn = 0;
  std::uint64_t xid = 0;
  std::int64_t commit_time = 0;
  bool has_new_row = false, has_old_key = false, has_old_row = false;
  RowView new_row, old_key, old_row;
  std::string_view raw;  // the whole Change, as the plugin sent it

  // False when `change` is not a canonical Change (or a kind this version does not know).
  bool Parse(std::string_view change);
  // The Change as a message, parsed from `raw` (for what needs one).
  bool ParseInto(dblog::v1::Change* change) const;
};

// One event of a serialized Batch: the Event's bytes, its member's number and that member's
// bytes (for a Change, what ChangeView::Parse reads).
struct BatchEvent {
  std::string_view event;
  std::uint32_t member = 0;
  std::string_view payload;
};
// A Batch's events in order, into `events` (cleared first); false when `batch` is not a Batch
// of Events holding one member each.
bool SplitBatch(std::string_view batch, std::vector<BatchEvent>* events);

// True when `message` is exactly one length-delimited field `number`, canonically (minimal
// varints): *payload is its bytes. (A consumer frame's ServerMessage{events: ...}.)
bool OneField(std::string_view message, std::uint32_t number, std::string_view* payload);

}  // namespace dblog::wire
