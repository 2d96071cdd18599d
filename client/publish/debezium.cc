// client/publish/debezium.cc: see debezium.h.
#include "client/publish/debezium.h"

#include <cstdio>

#include "client/relation_cache.h"
#include "client/time_format.h"

namespace dblog::publish {

using common::JsonWriter;

namespace {

// ISO 8601 in UTC with the fraction trimmed, as Java's ISO_OFFSET_DATE_TIME prints an instant
// (io.debezium.time.ZonedTimestamp): "2024-01-02T03:04:05Z", "2024-01-02T03:04:05.5Z".
std::string ZonedTimestamp(std::int64_t micros) {
  std::string text = client::FormatTimestamp(micros);  // always six fraction digits
  const std::size_t dot = text.rfind('.');
  if (dot != std::string::npos) {
    std::size_t end = text.size();
    while (end > dot + 1 && text[end - 1] == '0') --end;
    text.resize(end == dot + 1 ? dot : end);
  }
  return text + "Z";
}

std::string UuidText(const std::string& bytes) {
  if (bytes.size() != 16) return common::Base64Encode(bytes);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    const auto c = static_cast<unsigned char>(bytes[i]);
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

void WriteRow(JsonWriter& json, const dblog::v1::Relation& relation, const dblog::v1::Row& row) {
  json.BeginObject();
  for (int i = 0; i < relation.columns_size() && i < row.values_size(); ++i) {
    json.Key(relation.columns(i).name());
    WriteDebeziumValue(json, row.values(i));
  }
  json.EndObject();
}

// A DELETE's `before` without REPLICA IDENTITY FULL: the key columns, the others null (what
// Debezium sends for the default replica identity).
void WriteKeyOnlyRow(JsonWriter& json, const dblog::v1::Relation& relation,
                     const dblog::v1::Row& key) {
  json.BeginObject();
  for (int i = 0; i < relation.columns_size(); ++i) {
    json.Key(relation.columns(i).name());
    int k = -1;
    for (int j = 0; j < relation.key_columns_size(); ++j)
      if (static_cast<int>(relation.key_columns(j)) == i) k = j;
    if (k >= 0 && k < key.values_size())
      WriteDebeziumValue(json, key.values(k));
    else
      json.Null();
  }
  json.EndObject();
}

void WriteSource(JsonWriter& json, const dblog::v1::Relation& relation,
                 const DebeziumSource& source, std::uint64_t commit_lsn, std::uint64_t lsn) {
  json.Key("source").BeginObject();
  json.Key("version").String("dblog-0.1");
  json.Key("connector").String("postgresql");
  json.Key("name").String(source.name);
  json.Key("ts_ms").Int(source.commit_time / 1000);
  json.Key("snapshot").String(source.snapshot);
  json.Key("db").String("");
  json.Key("sequence").String("[\"" + std::to_string(commit_lsn) + "\",\"" +
                              std::to_string(lsn) + "\"]");
  json.Key("schema").String(relation.schema());
  json.Key("table").String(relation.name());
  if (source.xid)
    json.Key("txId").Uint(source.xid & 0xFFFFFFFFu);  // PostgreSQL's 32-bit xid, as Debezium
  else
    json.Key("txId").Null();
  json.Key("lsn").Uint(lsn);
  json.Key("xmin").Null();
  json.EndObject();
}

}  // namespace

void WriteDebeziumValue(JsonWriter& json, const dblog::v1::Value& value) {
  using dblog::v1::Value;
  switch (value.kind_case()) {
    case Value::kNullValue: json.Null(); break;
    case Value::kUnchanged: json.String("__debezium_unavailable_value"); break;
    case Value::kBoolValue: json.Bool(value.bool_value()); break;
    case Value::kIntValue: json.Int(value.int_value()); break;
    case Value::kFloat4Value: json.Float(value.float4_value()); break;
    case Value::kFloat8Value: json.Double(value.float8_value()); break;
    case Value::kTextValue: json.String(value.text_value()); break;
    case Value::kBytesValue: json.String(common::Base64Encode(value.bytes_value())); break;
    case Value::kUuidValue: json.String(UuidText(value.uuid_value())); break;
    case Value::kDateValue: json.Int(value.date_value()); break;
    case Value::kTimestampValue: json.Int(value.timestamp_value()); break;
    case Value::kTimestamptzValue: json.String(ZonedTimestamp(value.timestamptz_value())); break;
    case Value::kLiteral: json.String(value.literal()); break;
    default: json.Null(); break;
  }
}

std::string DebeziumKey(const dblog::v1::Relation& relation, const dblog::v1::Row& key) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  for (int j = 0; j < relation.key_columns_size() && j < key.values_size(); ++j) {
    const auto col = relation.key_columns(j);
    json.Key(static_cast<int>(col) < relation.columns_size() ? relation.columns(col).name() : "");
    WriteDebeziumValue(json, key.values(j));
  }
  json.EndObject();
  return out;
}

dblog::v1::Row KeyOfChange(const dblog::v1::Relation& relation, const dblog::v1::Change& change) {
  if (change.kind() == dblog::v1::Change::DELETE) return change.old_key();
  if (auto key = client::KeyOfRow(relation, change.new_row())) return *key;
  return change.old_key();
}

std::string DebeziumChange(const dblog::v1::Relation& relation, const dblog::v1::Change& change,
                           const DebeziumSource& source) {
  using dblog::v1::Change;
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  json.Key("before");
  if (change.has_old_row() && change.kind() != Change::INSERT && change.kind() != Change::READ)
    WriteRow(json, relation, change.old_row());  // REPLICA IDENTITY FULL
  else if (change.kind() == Change::DELETE)
    WriteKeyOnlyRow(json, relation, change.old_key());
  else
    json.Null();
  json.Key("after");
  if (change.kind() == Change::DELETE)
    json.Null();
  else
    WriteRow(json, relation, change.new_row());
  WriteSource(json, relation, source, change.commit_lsn(), change.lsn());
  const char* op = change.kind() == Change::INSERT   ? "c"
                   : change.kind() == Change::UPDATE ? "u"
                   : change.kind() == Change::DELETE ? "d"
                                                     : "r";
  json.Key("op").String(op);
  json.Key("ts_ms").Int(source.commit_time / 1000);
  json.Key("transaction").Null();
  json.EndObject();
  return out;
}

std::string DebeziumTruncate(const dblog::v1::Relation& relation,
                             const dblog::v1::Truncate& truncate, const DebeziumSource& source) {
  std::string out;
  JsonWriter json(&out);
  json.BeginObject();
  json.Key("before").Null();
  json.Key("after").Null();
  WriteSource(json, relation, source, truncate.commit_lsn(), truncate.lsn());
  json.Key("op").String("t");
  json.Key("ts_ms").Int(source.commit_time / 1000);
  json.Key("transaction").Null();
  json.EndObject();
  return out;
}

}  // namespace dblog::publish
