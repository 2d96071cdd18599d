// wire/change_view.cc: a Change read in place (see change_view.h).
#include "wire/change_view.h"

#include <google/protobuf/stubs/common.h>

#include <cstring>

#include "common/varint.h"

namespace dblog::wire {
namespace {

using dblog::v1::Change;
using dblog::v1::Value;

constexpr int kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

// ReadVarint's way for varints of more than one byte.
bool ReadLongVarint(std::string_view b, std::size_t& i, std::uint64_t* v) {
  *v = 0;
  for (int shift = 0, n = 0; shift < 64 && i < b.size(); shift += 7, ++n) {
    const auto byte = static_cast<unsigned char>(b[i++]);
    if (shift == 63 && byte > 1) return false;  // beyond 64 bits
    *v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return n == 0 || byte != 0;  // a trailing zero byte: not minimal
  }
  return false;
}

// A minimal varint at b[i] (as protobuf writes them), i moved past it; false otherwise. Most
// are one byte (tags, lengths, small numbers): that way is inline.
inline bool ReadVarint(std::string_view b, std::size_t& i, std::uint64_t* v) {
  if (i < b.size() && static_cast<unsigned char>(b[i]) < 0x80) {
    *v = static_cast<unsigned char>(b[i++]);
    return true;
  }
  return ReadLongVarint(b, i, v);
}

// A field's tag at b[i]: its number and wire type.
bool ReadTag(std::string_view b, std::size_t& i, std::uint64_t* number, int* wire_type) {
  std::uint64_t tag = 0;
  if (!ReadVarint(b, i, &tag)) return false;
  *number = tag >> 3;
  *wire_type = static_cast<int>(tag & 7);
  return *number != 0;
}

// A length-delimited payload at b[i].
inline bool ReadBytes(std::string_view b, std::size_t& i, std::string_view* payload) {
  std::uint64_t len = 0;
  if (!ReadVarint(b, i, &len) || len > b.size() - i) return false;
  *payload = b.substr(i, len);
  i += len;
  return true;
}

// A sint32/sint64 field's value from its varint (protobuf's zigzag encoding).
inline std::int64_t ZigZag(std::uint64_t v) {
  return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1);
}

bool Utf8(std::string_view s) {
  return google::protobuf::internal::IsStructurallyValidUTF8(s.data(), static_cast<int>(s.size()));
}

// A serialized Value holding one member, canonically: its member, or KIND_NOT_SET for an
// empty one. False for anything protobuf would read differently or write back otherwise.
bool ReadValue(std::string_view b, Value::KindCase* kind) {
  *kind = Value::KIND_NOT_SET;
  if (b.empty()) return true;
  // Value's members are fields 1-13: their tags are one byte (anything longer is not one)
  const auto tag = static_cast<unsigned char>(b[0]);
  if (tag >= 0x80) return false;
  const std::uint64_t number = tag >> 3;
  const int wire_type = tag & 7;
  std::size_t i = 1;
  std::uint64_t v = 0;
  switch (number) {
    case Value::kNullValue:
    case Value::kUnchanged:  // "always true when set": a false one is read as protobuf reads it
      if (wire_type != kVarint || !ReadVarint(b, i, &v) || v != 1) return false;
      break;
    case Value::kBoolValue:
      if (wire_type != kVarint || !ReadVarint(b, i, &v) || v > 1) return false;
      break;
    case Value::kIntValue:
    case Value::kTimestampValue:
    case Value::kTimestamptzValue:
      if (wire_type != kVarint || !ReadVarint(b, i, &v)) return false;
      break;
    case Value::kDateValue:  // sint32: the zigzag of a 32-bit value
      if (wire_type != kVarint || !ReadVarint(b, i, &v) || v > 0xffffffffu) return false;
      break;
    case Value::kFloat4Value:
      if (wire_type != kFixed32 || b.size() - i < 4) return false;
      i += 4;
      break;
    case Value::kFloat8Value:
      if (wire_type != kFixed64 || b.size() - i < 8) return false;
      i += 8;
      break;
    case Value::kTextValue:
    case Value::kLiteral:
    case Value::kBytesValue:
    case Value::kUuidValue: {
      std::string_view s;
      if (wire_type != kLengthDelimited || !ReadBytes(b, i, &s)) return false;
      // proto3 strings are UTF-8: protobuf refuses to parse one that is not
      if ((number == Value::kTextValue || number == Value::kLiteral) && !Utf8(s)) return false;
      break;
    }
    default:
      return false;
  }
  *kind = static_cast<Value::KindCase>(number);
  return i == b.size();  // one member only
}

}  // namespace

std::string_view ValueView::text() const {
  switch (kind) {
    case Value::kTextValue:
    case Value::kLiteral:
    case Value::kBytesValue:
    case Value::kUuidValue: {
      std::size_t i = 1;  // past the one-byte tag
      std::string_view s;
      return ReadBytes(bytes, i, &s) ? s : std::string_view();
    }
    default:
      return {};
  }
}

std::int64_t ValueView::integer() const {
  std::size_t i = 1;
  std::uint64_t v = 0;
  switch (kind) {
    case Value::kBoolValue:
      return ReadVarint(bytes, i, &v) ? static_cast<std::int64_t>(v) : 0;
    case Value::kIntValue:
    case Value::kTimestampValue:
    case Value::kTimestamptzValue:
    case Value::kDateValue:  // sint64 and sint32: zigzag
      if (!ReadVarint(bytes, i, &v)) return 0;
      return ZigZag(v);
    default:
      return 0;
  }
}

float ValueView::float4() const {
  float f = 0;
  if (kind == Value::kFloat4Value && bytes.size() == 5) {
    std::uint32_t u = 0;
    for (int k = 3; k >= 0; --k) u = (u << 8) | static_cast<unsigned char>(bytes[1 + k]);
    std::memcpy(&f, &u, sizeof f);
  }
  return f;
}

double ValueView::float8() const {
  double d = 0;
  if (kind == Value::kFloat8Value && bytes.size() == 9) {
    std::uint64_t u = 0;
    for (int k = 7; k >= 0; --k) u = (u << 8) | static_cast<unsigned char>(bytes[1 + k]);
    std::memcpy(&d, &u, sizeof d);
  }
  return d;
}

bool RowView::Parse(std::string_view row) {
  Clear();
  bytes_ = row;
  std::size_t i = 0;
  constexpr char kValuesTag = (dblog::v1::Row::kValuesFieldNumber << 3) | kLengthDelimited;
  while (i < row.size()) {
    ValueView v;
    // Row has one field, values: its tag is one byte
    if (row[i++] != kValuesTag || !ReadBytes(row, i, &v.bytes) || !ReadValue(v.bytes, &v.kind))
      return false;
    values_.push_back(v);
  }
  return true;
}

void RowView::Clear() {
  bytes_ = {};
  values_.clear();
}

bool RowView::HasUnchanged() const {
  for (const ValueView& v : values_)
    if (v.kind == Value::kUnchanged) return true;
  return false;
}

bool ChangeView::Parse(std::string_view change) {
  kind = Change::KIND_UNSPECIFIED;
  relation_oid = 0;
  commit_lsn = lsn = xid = 0;
  seq = 0;
  commit_time = 0;
  has_new_row = has_old_key = has_old_row = false;
  new_row.Clear();
  old_key.Clear();
  old_row.Clear();
  raw = change;
  std::size_t i = 0;
  std::uint64_t last = 0;
  while (i < change.size()) {
    std::uint64_t number = 0, v = 0;
    int wire_type = 0;
    if (!ReadTag(change, i, &number, &wire_type) || number <= last) return false;
    last = number;
    if (number <= 7) {
      // proto3 scalars: written only when not zero
      if (wire_type != kVarint || !ReadVarint(change, i, &v) || v == 0) return false;
      switch (number) {
        case Change::kKindFieldNumber:
          if (v > Change::READ) return false;
          kind = static_cast<Change::Kind>(v);
          break;
        case Change::kRelationOidFieldNumber:
          if (v > 0xffffffffu) return false;
          relation_oid = static_cast<std::uint32_t>(v);
          break;
        case Change::kCommitLsnFieldNumber:
          commit_lsn = v;
          break;
        case Change::kSeqFieldNumber:
          if (v > 0xffffffffu) return false;
          seq = static_cast<std::uint32_t>(v);
          break;
        case Change::kLsnFieldNumber:
          lsn = v;
          break;
        case Change::kXidFieldNumber:
          xid = v;
          break;
        case Change::kCommitTimeFieldNumber:  // sint64: zigzag
          commit_time = ZigZag(v);
          break;
      }
      continue;
    }
    std::string_view row;
    if (wire_type != kLengthDelimited || !ReadBytes(change, i, &row)) return false;
    switch (number) {
      case Change::kNewRowFieldNumber:
        has_new_row = true;
        if (!new_row.Parse(row)) return false;
        break;
      case Change::kOldKeyFieldNumber:
        has_old_key = true;
        if (!old_key.Parse(row)) return false;
        break;
      case Change::kOldRowFieldNumber:
        has_old_row = true;
        if (!old_row.Parse(row)) return false;
        break;
      default:
        return false;
    }
  }
  return true;
}

bool ChangeView::ParseInto(dblog::v1::Change* change) const {
  return change->ParseFromArray(raw.data(), static_cast<int>(raw.size()));
}

bool SplitBatch(std::string_view batch, std::vector<BatchEvent>* events) {
  events->clear();
  std::size_t i = 0;
  while (i < batch.size()) {
    std::uint64_t number = 0, member = 0;
    int wire_type = 0, member_type = 0;
    BatchEvent e;
    if (!ReadTag(batch, i, &number, &wire_type) ||
        number != static_cast<std::uint64_t>(dblog::v1::Batch::kEventsFieldNumber) ||
        wire_type != kLengthDelimited || !ReadBytes(batch, i, &e.event))
      return false;
    std::size_t j = 0;
    if (!ReadTag(e.event, j, &member, &member_type) || member_type != kLengthDelimited ||
        member > 0xffffffffu || !ReadBytes(e.event, j, &e.payload) || j != e.event.size())
      return false;
    e.member = static_cast<std::uint32_t>(member);
    events->push_back(e);
  }
  return true;
}

bool OneField(std::string_view message, std::uint32_t number, std::string_view* payload) {
  std::size_t i = 0;
  std::uint64_t n = 0;
  int wire_type = 0;
  return ReadTag(message, i, &n, &wire_type) && n == number && wire_type == kLengthDelimited &&
         ReadBytes(message, i, payload) && i == message.size();
}

}  // namespace dblog::wire
