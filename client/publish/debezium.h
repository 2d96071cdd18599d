// client/publish/debezium.h: `dblog publish --format debezium-json`: a change as the change
// event of Debezium's PostgreSQL connector, in the schemaless JSON that Kafka Connect's
// JsonConverter writes with schemas.enable=false (what Flink CDC's debezium-json format, Kafka
// Connect sinks, ClickHouse and Materialize read). docs/publish.md, "Debezium JSON", has the
// mapping and what does not map.
// Owns: rendering only (no I/O): the key JSON, the envelope, values by kind.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "dblog/v1/consumer.pb.h"

namespace dblog::publish {

// What the envelope's `source` says beyond the change itself.
struct DebeziumSource {
  std::string name;           // Debezium's logical name (topic prefix): the subject prefix
  std::string snapshot;       // "true" (bootstrap rows), "incremental" (repair rows), "false"
  std::int64_t commit_time = 0;  // microseconds since the epoch, 0 when unknown (copied rows)
  std::uint64_t xid = 0;         // 0 when unknown (copied rows)
};

// One value as Debezium's JsonConverter writes it (docs/publish.md has the table):
// integers and floats as numbers (NaN, Infinity as strings), text as strings, bytea as base64,
// uuid as its text, date as days since the epoch (io.debezium.time.Date), timestamp as
// microseconds since the epoch (io.debezium.time.MicroTimestamp), timestamptz as ISO 8601 in UTC
// (io.debezium.time.ZonedTimestamp), numeric (decimal.handling.mode=string), json, jsonb and
// every other type as PostgreSQL's text; an unchanged TOAST value as
// "__debezium_unavailable_value".
void WriteDebeziumValue(common::JsonWriter& json, const dblog::v1::Value& value);

// {"id":1}: the key columns by name.
std::string DebeziumKey(const dblog::v1::Relation& relation, const dblog::v1::Row& key);

// The key of a change: of its new row (INSERT, UPDATE, READ) or its old key (DELETE).
dblog::v1::Row KeyOfChange(const dblog::v1::Relation& relation, const dblog::v1::Change& change);

// {"before":..,"after":..,"source":{..},"op":"c|u|d|r","ts_ms":..,"transaction":null}
std::string DebeziumChange(const dblog::v1::Relation& relation, const dblog::v1::Change& change,
                           const DebeziumSource& source);

// {"before":null,"after":null,"source":{..},"op":"t",...} for one table of a TRUNCATE.
std::string DebeziumTruncate(const dblog::v1::Relation& relation,
                             const dblog::v1::Truncate& truncate, const DebeziumSource& source);

}  // namespace dblog::publish
