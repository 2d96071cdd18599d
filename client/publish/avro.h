// client/publish/avro.h: `dblog publish --format debezium-avro`: Debezium's change events (the
// key and the value with schemas, as debezium.h renders them for JsonConverter with
// schemas.enable=true) re-encoded as Confluent's AvroConverter writes them: Avro binary in the
// Confluent wire format (magic byte 0, the schema's registry id as 4 bytes big-endian, the Avro
// body), the Avro schema derived from the Kafka Connect schema as Confluent's AvroData does it
// (fromConnectSchema, its defaults: connect.meta.data=true, enhanced.avro.schema.support=false).
// The type mapping stays in debezium.cc: this file only translates a Connect schema and a
// JsonConverter payload into Avro, so every column type debezium.cc knows is covered.
// Owns: the Connect-schema-to-Avro-schema translation, the Avro binary encoder (hand-written:
// zigzag varints, length-prefixed bytes, union indexes; docs/publish.md says why), the wire
// framing, and the schema ids' cache. The registry's HTTP client is schema_registry.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

namespace dblog::publish {

// The Avro schema (JSON text) Confluent's AvroData.fromConnectSchema derives from a Kafka
// Connect schema in JsonConverter's JSON (`connect_schema`, as DebeziumValueSchema writes it):
// a struct is a record named by the Connect name split at its last '.' into namespace and name
// (a record already defined is named again by its full name), an optional schema is the union
// ["null", T] with default null ([T, "null"] with the field's default when it has one), int8 and
// int16 are "int" with connect.type, Decimal is bytes with logicalType decimal, precision (64
// without connect.decimal.precision) and scale; every named or versioned schema carries
// connect.name, connect.version, connect.parameters, connect.doc, connect.default.
// Throws std::invalid_argument for a schema it cannot translate (a name that is not an Avro
// name, an unknown type).
std::string AvroSchemaFromConnect(std::string_view connect_schema);

// The Avro binary encoding of `payload` (JSON, as JsonConverter writes a value of
// `connect_schema`) under the schema AvroSchemaFromConnect derives. Bytes and Decimal values
// are base64 in the JSON. Debezium's unavailable-value placeholder, which debezium.cc writes as
// a string for every type, becomes what Debezium's converters make of it: its UTF-8 bytes in a
// bytes field, a one-element array of it in a text array, its bytes as numbers in an int4[] or
// int8[] (UnchangedToastedPlaceholder); other types cannot carry it and are refused. Throws std::invalid_argument for a
// payload that does not fit its schema.
std::string AvroEncodeConnect(std::string_view connect_schema, std::string_view payload);

// Confluent's wire format: 0x00, `schema_id` big-endian in 4 bytes, `body`.
std::string ConfluentFrame(std::int32_t schema_id, std::string_view body);

// Registers an Avro schema under a subject and returns its id (schema_registry.h).
class SchemaRegistry {
 public:
  virtual ~SchemaRegistry() = default;
  // POST /subjects/<subject>/versions {"schema": <avro_schema>} -> {"id": N}. Throws
  // BrokerError (broker.h): retryable when the registry could not be reached.
  virtual std::int32_t Register(const std::string& subject, const std::string& avro_schema) = 0;
};

// Turns the {"schema","payload"} JSON texts of the Debezium layout into Confluent wire bytes,
// registering each distinct schema once per subject (TopicNameStrategy: "<topic>-key",
// "<topic>-value") and caching the ids and the derived Avro schemas.
class ConfluentAvroEncoder {
 public:
  explicit ConfluentAvroEncoder(SchemaRegistry& registry) : registry_(registry) {}
  // `with_schema`: {"schema": <Connect schema>, "payload": <value>} (debezium.h, WithSchema).
  std::string Encode(const std::string& subject, std::string_view with_schema);
  std::size_t registrations() const { return registrations_; }

 private:
  SchemaRegistry& registry_;
  std::map<std::string, std::string, std::less<>> avro_of_connect_;  // Connect -> Avro schema
  // (subject, the Avro schema in avro_of_connect_, which never moves) -> id
  std::map<std::pair<std::string, const std::string*>, std::int32_t> ids_;
  std::size_t registrations_ = 0;
};

}  // namespace dblog::publish
