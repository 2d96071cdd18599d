// client/ndjson.cc: stream events as NDJSON lines (see ndjson.h for the shape).
#include "client/ndjson.h"

#include <cstdio>
#include <stdexcept>

#include "client/position.h"
#include "client/time_format.h"

namespace dblog::client {
namespace {

using common::JsonWriter;
using dblog::v1::Change;
using dblog::v1::Relation;
using dblog::v1::Row;
using dblog::v1::StreamEvent;
using dblog::v1::TableProgress;
using dblog::v1::Value;

constexpr char kHex[] = "0123456789abcdef";

std::string ByteaText(const std::string& bytes) {
  std::string out = "\\x";
  out.reserve(2 + 2 * bytes.size());
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

std::string UuidText(const std::string& bytes) {
  if (bytes.size() != 16) return ByteaText(bytes);  // not a uuid: show the bytes, invent nothing
  std::string out;
  out.reserve(36);
  for (std::size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    const auto b = static_cast<unsigned char>(bytes[i]);
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

void WritePosition(JsonWriter& json, const StreamEvent& event) {
  json.Key("position");
  const auto position = PositionOf(event);
  if (!position) {
    json.Null();
    return;
  }
  json.BeginObject()
      .Key("commit_lsn")
      .String(FormatLsn(position->commit_lsn()))
      .Key("seq")
      .Uint(position->seq())
      .EndObject();
}

std::string ColumnName(const Relation& relation, std::size_t index) {
  if (index < static_cast<std::size_t>(relation.columns_size())) {
    return relation.columns(static_cast<int>(index)).name();
  }
  return "$" + std::to_string(index + 1);  // more values than columns: keep them, numbered
}

void WriteValuesArray(JsonWriter& json, const Row& row) {
  json.BeginArray();
  for (const Value& value : row.values()) WriteValue(json, value);
  json.EndArray();
}

// A full row: {column: value} in column order.
void WriteRow(JsonWriter& json, const Relation* relation, const Row& row) {
  if (relation == nullptr) return WriteValuesArray(json, row);
  json.BeginObject();
  for (int i = 0; i < row.values_size(); ++i) {
    json.Key(ColumnName(*relation, static_cast<std::size_t>(i)));
    WriteValue(json, row.values(i));
  }
  json.EndObject();
}

// A key row (one value per key column, in key order): {key column: value}.
void WriteKey(JsonWriter& json, const Relation* relation, const Row& key) {
  if (relation == nullptr) return WriteValuesArray(json, key);
  json.BeginObject();
  for (int i = 0; i < key.values_size(); ++i) {
    if (i < relation->key_columns_size()) {
      json.Key(ColumnName(*relation, relation->key_columns(i)));
    } else {
      json.Key("$key" + std::to_string(i + 1));
    }
    WriteValue(json, key.values(i));
  }
  json.EndObject();
}

void WriteTable(JsonWriter& json, const RelationCache& relations, std::uint32_t oid) {
  json.Key("table");
  if (const auto name = relations.TableName(oid)) {
    json.String(*name);
  } else {
    json.Null().Key("relation_oid").Uint(oid);
  }
}

void WriteXidAndTime(JsonWriter& json, std::uint64_t xid, std::int64_t commit_time) {
  if (xid != 0) json.Key("xid").Uint(xid);
  if (commit_time != 0) json.Key("commit_time").String(FormatTimestampTz(commit_time));
}

const char* ChangeOp(Change::Kind kind) {
  switch (kind) {
    case Change::INSERT:
      return "insert";
    case Change::UPDATE:
      return "update";
    case Change::DELETE:
      return "delete";
    case Change::READ:
      return "read";
    default:
      return "unknown_change";
  }
}

void WriteChange(JsonWriter& json, const Change& change, const RelationCache& relations) {
  json.Key("op").String(ChangeOp(change.kind()));
  if (change.kind() != Change::INSERT && change.kind() != Change::UPDATE &&
      change.kind() != Change::DELETE && change.kind() != Change::READ) {
    json.Key("kind").Int(change.kind());
  }
  WriteTable(json, relations, change.relation_oid());
  WriteXidAndTime(json, change.xid(), change.commit_time());
  const Relation* relation = relations.Find(change.relation_oid());

  // "key" is the row's identity after the change: from the new row for insert, read and
  // update; the old key for delete. An update also shows "old_key" (different from "key" when
  // the key itself changed).
  if (change.has_new_row()) {
    if (relation != nullptr) {
      if (const auto key = KeyOfRow(*relation, change.new_row())) {
        json.Key("key");
        WriteKey(json, relation, *key);
      }
    }
  } else if (change.has_old_key()) {
    json.Key("key");
    WriteKey(json, relation, change.old_key());
  }
  if (change.has_new_row() && change.has_old_key()) {
    json.Key("old_key");
    WriteKey(json, relation, change.old_key());
  }
  if (change.has_new_row()) {
    json.Key("row");
    WriteRow(json, relation, change.new_row());
  }
  if (change.has_old_row()) {
    json.Key("old_row");
    WriteRow(json, relation, change.old_row());
  }
}

void WriteTableCounts(JsonWriter& json,
                      const google::protobuf::RepeatedPtrField<TableProgress>& tables,
                      const char* count_name, bool copied) {
  json.Key("tables").BeginArray();
  for (const TableProgress& table : tables) {
    json.BeginObject()
        .Key("table")
        .String(table.schema() + "." + table.name())
        .Key("relation_oid")
        .Uint(table.relation_oid())
        .Key(count_name)
        .Uint(copied ? table.rows_copied() : table.rows_estimated())
        .EndObject();
  }
  json.EndArray();
}

void WriteRelation(JsonWriter& json, const Relation& relation) {
  json.Key("op").String("relation");
  json.Key("table").String(relation.schema() + "." + relation.name());
  json.Key("relation_oid").Uint(relation.oid());
  json.Key("replica_identity").String(relation.replica_identity());
  json.Key("key").BeginArray();
  for (const std::uint32_t column : relation.key_columns()) {
    json.String(ColumnName(relation, column));
  }
  json.EndArray();
  json.Key("columns").BeginArray();
  for (const auto& column : relation.columns()) {
    json.BeginObject()
        .Key("name")
        .String(column.name())
        .Key("type")
        .String(column.type_name())
        .Key("type_oid")
        .Uint(column.type_oid())
        .Key("typmod")
        .Int(column.typmod())
        .Key("not_null")
        .Bool(column.not_null())
        .Key("attnum")
        .Uint(column.attnum())
        .EndObject();
  }
  json.EndArray();
}

void WriteBegin(JsonWriter& json, const dblog::v1::Begin& begin) {
  json.Key("op").String("begin");
  WriteXidAndTime(json, begin.xid(), begin.commit_time());
  json.Key("end_lsn").String(FormatLsn(begin.end_lsn()));
  if (begin.origin_id() != 0) json.Key("origin_id").Uint(begin.origin_id());
}

void WriteCommit(JsonWriter& json, const dblog::v1::Commit& commit) {
  json.Key("op").String("commit");
  WriteXidAndTime(json, commit.xid(), commit.commit_time());
  json.Key("end_lsn").String(FormatLsn(commit.end_lsn()));
}

void WriteTruncate(JsonWriter& json, const dblog::v1::Truncate& truncate,
                   const RelationCache& relations) {
  json.Key("op").String("truncate").Key("tables").BeginArray();
  for (const std::uint32_t oid : truncate.relation_oids()) {
    if (const auto name = relations.TableName(oid)) {
      json.String(*name);
    } else {
      json.Uint(oid);  // never described by a Relation: the oid, not a made-up name
    }
  }
  json.EndArray();
  json.Key("cascade").Bool(truncate.cascade());
  json.Key("restart_identity").Bool(truncate.restart_identity());
}

void WriteMessage(JsonWriter& json, const dblog::v1::Message& message) {
  json.Key("op").String("message");
  json.Key("transactional").Bool(message.transactional());
  if (message.xid() != 0) json.Key("xid").Uint(message.xid());
  json.Key("lsn").String(FormatLsn(message.lsn()));
  json.Key("prefix").String(message.prefix());
  if (common::IsValidUtf8(message.content())) {
    json.Key("content").String(message.content());
  } else {
    json.Key("content_base64").String(common::Base64Encode(message.content()));
  }
  if (message.omitted_bytes() != 0) json.Key("omitted_bytes").Uint(message.omitted_bytes());
}

void WriteBootstrapBegin(JsonWriter& json, const dblog::v1::BootstrapBegin& begin) {
  json.Key("op").String("bootstrap_begin");
  json.Key("consistent_point").String(FormatLsn(begin.consistent_point()));
  json.Key("restarted").Bool(begin.restarted());
  WriteTableCounts(json, begin.tables(), "rows_estimated", false);
}

void WriteBootstrapEnd(JsonWriter& json, const dblog::v1::BootstrapEnd& end) {
  json.Key("op").String("bootstrap_end");
  json.Key("consistent_point").String(FormatLsn(end.consistent_point()));
  WriteTableCounts(json, end.tables(), "rows_copied", true);
}

// A range bound: the key, or null when the range is unbounded on that side.
void WriteBound(JsonWriter& json, const Relation* relation, bool has_key, const Row& key) {
  if (has_key) {
    WriteKey(json, relation, key);
  } else {
    json.Null();
  }
}

void WriteChunkBegin(JsonWriter& json, const dblog::v1::ChunkBegin& chunk,
                     const RelationCache& relations) {
  json.Key("op").String("chunk_begin");
  json.Key("request_id").Uint(chunk.request_id());
  WriteTable(json, relations, chunk.relation_oid());
  json.Key("chunk").Uint(chunk.chunk());
  json.Key("is_range").Bool(chunk.is_range());
  if (!chunk.is_range()) return;
  const Relation* relation = relations.Find(chunk.relation_oid());
  json.Key("from_key");
  WriteBound(json, relation, chunk.has_from_key(), chunk.from_key());
  json.Key("from_inclusive").Bool(chunk.from_inclusive());
  json.Key("to_key");
  WriteBound(json, relation, chunk.has_to_key(), chunk.to_key());
  json.Key("to_inclusive").Bool(chunk.to_inclusive());
  // how the source orders each key column (docs/protocol.md, "Range chunks")
  json.Key("key_collations").BeginArray();
  for (const auto& collation : chunk.key_collations()) json.String(collation);
  json.EndArray();
}

void WriteChunkEnd(JsonWriter& json, const dblog::v1::ChunkEnd& chunk,
                   const RelationCache& relations) {
  json.Key("op").String("chunk_end");
  json.Key("request_id").Uint(chunk.request_id());
  WriteTable(json, relations, chunk.relation_oid());
  json.Key("rows").Uint(chunk.rows());
  json.Key("deletes").Uint(chunk.deletes());
  if (chunk.kept_keys_size() > 0) {  // range chunks: keys the log carried; keep them
    const Relation* relation = relations.Find(chunk.relation_oid());
    json.Key("kept_keys").BeginArray();
    for (const auto& key : chunk.kept_keys()) WriteKey(json, relation, key);
    json.EndArray();
  }
  json.Key("last").Bool(chunk.last());
}

}  // namespace

void WriteValue(JsonWriter& json, const Value& value) {
  switch (value.kind_case()) {
    case Value::kNullValue:
    case Value::KIND_NOT_SET:  // proto3 cannot tell "unset" from "null"; neither carries data
      json.Null();
      break;
    case Value::kUnchanged:
      json.BeginObject().Key("unchanged_toast").Bool(true).EndObject();
      break;
    case Value::kBoolValue:
      json.Bool(value.bool_value());
      break;
    case Value::kIntValue:
      json.Int(value.int_value());
      break;
    case Value::kFloat4Value:
      json.Float(value.float4_value());
      break;
    case Value::kFloat8Value:
      json.Double(value.float8_value());
      break;
    case Value::kTextValue:
      json.String(value.text_value());
      break;
    case Value::kBytesValue:
      json.String(ByteaText(value.bytes_value()));
      break;
    case Value::kUuidValue:
      json.String(UuidText(value.uuid_value()));
      break;
    case Value::kDateValue:
      json.String(FormatDate(value.date_value()));
      break;
    case Value::kTimestampValue:
      json.String(FormatTimestamp(value.timestamp_value()));
      break;
    case Value::kTimestamptzValue:
      json.String(FormatTimestampTz(value.timestamptz_value()));
      break;
    case Value::kLiteral:
      json.String(value.literal());
      break;
    case Value::kSplit:  // the client library puts split values together before
      throw std::invalid_argument("a split value that was not put together");
  }
}

std::string ValueToJson(const Value& value) {
  std::string out;
  JsonWriter json(&out);
  WriteValue(json, value);
  return out;
}

bool RenderEvent(const StreamEvent& event, const RelationCache& relations,
                 const RenderOptions& options, std::string* out) {
  if (event.event_case() == StreamEvent::EVENT_NOT_SET) return false;
  if (event.has_relation() && !options.relations) return false;

  JsonWriter json(out);
  json.BeginObject();
  WritePosition(json, event);
  switch (event.event_case()) {
    case StreamEvent::kBegin:
      WriteBegin(json, event.begin());
      break;
    case StreamEvent::kRelation:
      WriteRelation(json, event.relation());
      break;
    case StreamEvent::kChange:
      WriteChange(json, event.change(), relations);
      break;
    case StreamEvent::kTruncate:
      WriteTruncate(json, event.truncate(), relations);
      break;
    case StreamEvent::kMessage:
      WriteMessage(json, event.message());
      break;
    case StreamEvent::kCommit:
      WriteCommit(json, event.commit());
      break;
    case StreamEvent::kBootstrapBegin:
      WriteBootstrapBegin(json, event.bootstrap_begin());
      break;
    case StreamEvent::kBootstrapEnd:
      WriteBootstrapEnd(json, event.bootstrap_end());
      break;
    case StreamEvent::kChunkBegin:
      WriteChunkBegin(json, event.chunk_begin(), relations);
      break;
    case StreamEvent::kChunkEnd:
      WriteChunkEnd(json, event.chunk_end(), relations);
      break;
    case StreamEvent::kValuePiece:  // put together by the client library, never handed out
    case StreamEvent::EVENT_NOT_SET:
      break;
  }
  json.EndObject();
  out->push_back('\n');
  return true;
}

}  // namespace dblog::client
