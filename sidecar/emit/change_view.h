// sidecar/emit/change_view.h: a plugin Change read in place. The log path reads every Change
// the plugin sends, but of its rows it needs only which values are unchanged TOAST and the key
// columns' bytes: parsing each value into a message (and each long one into a string) was most
// of dblogd's CPU on a busy stream. A ChangeView holds the Change's scalar fields and views into
// the plugin's bytes for its rows and values; the pipeline, the key log and the emitter read
// those, and parse a Change into messages only where they need one (a row a repair window
// carries, a request of the queue, a key-changing UPDATE the emitter splits).
//
// Only the canonical encoding the plugin writes is read in place (fields in number order, each
// once, minimal varints, one member per Value, null_value and unchanged true, valid UTF-8 in
// text): anything else makes Parse false and the caller parses the Change as a message instead,
// as it did before, so every input means what protobuf says it means. A value's bytes are then exactly what serializing its parsed
// message gives, and keys made from them (KeyBytes) equal those made from the message.
// Owns: that reading. Pure: no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dblog/v1/change.pb.h"

namespace dblog::emit {

// One Row.values element: its bytes (a serialized Value) and the member set.
struct ValueView {
  std::string_view bytes;
  dblog::v1::Value::KindCase kind = dblog::v1::Value::KIND_NOT_SET;
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

// A Change in place: its scalar fields, its rows as views.
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

// The key of `row` under `relation`'s key_columns, byte for byte what KeyBytes(relation, Row)
// gives for the parsed row (key.h). "" when the row lacks a key column.
std::string KeyBytes(const dblog::v1::Relation& relation, const RowView& row);

}  // namespace dblog::emit
