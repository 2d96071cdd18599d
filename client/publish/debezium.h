// client/publish/debezium.h: `dblog publish --format debezium-json`: a change as the change
// event of Debezium's PostgreSQL connector (Debezium 3.x with its default settings), in the JSON
// that Kafka Connect's JsonConverter writes: schemaless by default (schemas.enable=false), read
// as it is by Flink's `debezium-json` format (schema-include=false, its default) and by readers
// that parse the envelope themselves (a ClickHouse materialized view over a Kafka or NATS engine
// table, Debezium's own JSON deserializers); with `--debezium-option schemas.enable=true`, each
// key and value as {"schema","payload"} with the connector's schemas, which the JDBC sinks need.
// The same records in Avro (`--format debezium-avro`, Materialize's ENVELOPE DEBEZIUM): avro.h,
// from the schemas below. docs/publish.md, "Debezium JSON", has the
// mapping, the options and what does not map.
// Owns: rendering only (no I/O): the key JSON, the envelope, values by column type, schemas.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/json.h"
#include "dblog/v1/consumer.pb.h"

namespace dblog::publish {

// The connector settings a Debezium user may carry over (`--debezium-option KEY=VALUE`, under
// Debezium's own names); the defaults are Debezium's.
struct DebeziumOptions {
  // skipped.operations: the ops not written, of c, u, d, t ("none": none). Debezium: "t".
  bool skip_create = false, skip_update = false, skip_delete = false, skip_truncate = true;
  // tombstones.on.delete: a tombstone (the key, a null value) after each delete.
  bool tombstones_on_delete = true;
  // database.dbname: source.db (dblogd does not tell its consumers the database's name).
  std::string database;
  // schemas.enable (Kafka Connect's JsonConverter's name for it): the key and the value each as
  // {"schema": ..., "payload": ...}, the schema as Debezium's connector builds it. Off, as
  // Debezium's JSON is read by the consumers above; the JDBC sinks need it on.
  bool schemas_enable = false;
  // The processing time (Debezium's top-level ts_ms, ts_us, ts_ns; and source.ts_* of snapshot
  // rows, which have no commit time), nanoseconds since the epoch; unset: the system clock.
  std::function<std::int64_t()> now_nanos;
};

// Applies one `--debezium-option KEY=VALUE`; throws std::invalid_argument for an unknown key
// or a bad value.
void SetDebeziumOption(DebeziumOptions& options, const std::string& key, const std::string& value);

// What the envelope's `source` says beyond the change itself.
struct DebeziumSource {
  std::string name;           // Debezium's logical name (topic prefix): the subject prefix
  std::string db;             // database.dbname
  std::string snapshot;       // "true" (bootstrap rows), "incremental" (repair rows), "false"
  std::int64_t commit_time = 0;  // microseconds since the epoch, 0 when unknown (copied rows)
  std::uint64_t xid = 0;         // 0 when unknown (copied rows)
  // source.sequence[0]: the end LSN of the last transaction committed before this one, as
  // Debezium's lastCommitLsn; 0 when unknown (null)
  std::uint64_t last_commit_lsn = 0;
  // source.lsn of a row that has none of its own (a bootstrap row: the slot's consistent point,
  // as Debezium's snapshot records carry the WAL position the snapshot was taken at)
  std::uint64_t snapshot_lsn = 0;
  std::int64_t now_nanos = 0;  // the processing time (see DebeziumOptions::now_nanos)
};

// One value of `column` as Debezium's PostgresValueConverter makes it and Kafka Connect's
// JsonConverter writes it (docs/publish.md has the table). The column's type (its oid and
// typmod, from the Relation) picks the representation: timestamp(0..3) as milliseconds
// (io.debezium.time.Timestamp), timestamp(4..6) and timestamp as microseconds (MicroTimestamp),
// time likewise (Time, MicroTime), timetz in UTC (ZonedTime), interval as microseconds
// (MicroDuration), numeric as the base64 of its unscaled value (Decimal) or {scale, value}
// without a typmod (VariableScaleDecimal), money as a Decimal of scale 2, arrays as JSON arrays.
void WriteDebeziumValue(common::JsonWriter& json, const dblog::v1::Column& column,
                        const dblog::v1::Value& value);

// {"id":1}: the key columns by name.
std::string DebeziumKey(const dblog::v1::Relation& relation, const dblog::v1::Row& key);

// The key of a change: of its new row (INSERT, UPDATE, READ) or its old key (DELETE).
dblog::v1::Row KeyOfChange(const dblog::v1::Relation& relation, const dblog::v1::Change& change);

// {"before":..,"after":..,"source":{..},"transaction":null,"op":"c|u|d|r","ts_ms":..,...}
std::string DebeziumChange(const dblog::v1::Relation& relation, const dblog::v1::Change& change,
                           const DebeziumSource& source);

// Kafka Connect schemas (JsonConverter with schemas.enable=true), as Debezium's PostgreSQL
// connector builds them (PostgresValueConverter.schemaBuilder, SchemaFactory, Envelope):
// the key's struct "<prefix>.<schema>.<table>.Key" of the key columns (required), the value's
// "<prefix>.<schema>.<table>.Envelope" (before and after as "...Value" structs, each column
// optional unless NOT NULL, source as io.debezium.connector.postgresql.Source, transaction,
// op, ts_ms, ts_us, ts_ns). Each column's schema follows WriteDebeziumValue's representation.
std::string DebeziumKeySchema(const dblog::v1::Relation& relation, const std::string& prefix);
std::string DebeziumValueSchema(const dblog::v1::Relation& relation, const std::string& prefix);
// {"schema":<schema>,"payload":<payload>}: both already JSON texts.
std::string WithSchema(const std::string& schema, const std::string& payload);

// {"before":null,"after":null,"source":{..},"op":"t",...} for one table of a TRUNCATE.
std::string DebeziumTruncate(const dblog::v1::Relation& relation,
                             const dblog::v1::Truncate& truncate, const DebeziumSource& source);

}  // namespace dblog::publish
