// client/publish/layout.h: what each event of a consumer's stream becomes in a distributed log
// (docs/publish.md, "Layout in the log"), as pure logic and broker-neutral records: each
// message's destination (the control stream, or a table by oid and names), its parts,
// deduplication id, payload, key and the headers' values. No I/O, no broker library: each
// broker (broker.h; nats/, kafka/) names the destinations its own way (subjects, topics) and
// writes what Layout::Map returns, in order.
// Owns: the mapping event -> messages, the event kinds, the position, part and table headers'
// format.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "client/publish/debezium.h"
#include "client/relation_cache.h"
#include "dblog/v1/consumer.pb.h"

namespace dblog::publish {

// Header names, the same on every broker.
inline constexpr char kPositionHeader[] = "Dblog-Position";       // "0/16B3748:3"
inline constexpr char kPartHeader[] = "Dblog-Part";               // "2/3", only when parts > 1
inline constexpr char kEventHeader[] = "Dblog-Event";             // "change", "relation", ...
inline constexpr char kTableHeader[] = "Dblog-Table";             // "public.items" (table messages)
inline constexpr char kRelationSeqHeader[] = "Dblog-Relation-Seq";  // log sequence of the Relation
inline constexpr char kKeyHeader[] = "Dblog-Key";  // debezium-json: the key as its own JSON

// The kind of a message's (last) event: kEventHeader's value is EventKindName's.
enum class EventKind : std::uint8_t {
  kBegin,
  kCommit,
  kMessage,
  kRelation,
  kChange,
  kTruncate,
  kChunkBegin,
  kChunkEnd,
  kBootstrapBegin,
  kBootstrapEnd,
  kTombstone,  // debezium-json: the empty message after a delete
};
const char* EventKindName(EventKind kind);  // "begin", "chunk_begin", "tombstone", ...

// What a message's payload is.
enum class Format {
  kDblog,         // one serialized dblog.v1.StreamEvent
  kDebeziumJson,  // Debezium's PostgreSQL change event (debezium.h); only changes and truncates
  // The same events as kDebeziumJson with schemas, which the publisher (publisher.h) re-encodes
  // as Avro in Confluent's wire format (avro.h) with the ids of a schema registry: Layout::Map
  // writes them as kDebeziumJson with schemas.enable=true.
  kDebeziumAvro,
};

// One message to write. Its destination: the control stream (relation_oid 0, no table names),
// or a table's (relation_oid and its schema and name).
struct LogMessage {
  std::string payload;  // a serialized dblog.v1.StreamEvent (Format::kDebeziumJson: JSON, or
                        // empty for a tombstone)
  std::optional<dblog::v1::Position> position;  // none: Relation, BootstrapBegin
  std::uint32_t part = 1;
  std::uint32_t parts = 1;
  EventKind kind = EventKind::kChange;
  std::string msg_id;           // the broker's deduplication id; empty: none (Relation)
  std::uint32_t relation_oid = 0;  // table messages: the table; 0: the control stream
  std::string table;            // table messages: "schema.name"
  std::string schema, name;     // table messages: the table's schema and name, apart
  bool control() const { return relation_oid == 0 && schema.empty() && name.empty(); }
  std::string key;              // kKeyHeader's value (debezium-json)
  // debezium-avro: `key` holds Confluent wire bytes (the Kafka record's key), which a NATS
  // header carries in base64
  bool binary_key = false;
  // Layout::set_row_keys(true), Format::kDblog: the row's key (a serialized dblog.v1.Row of its
  // key columns, in key order) on Change messages, for brokers that place messages by key
  // (Kafka); empty elsewhere.
  std::string row_key;
};

// "0/16B3748:3" (client::FormatPosition) and back; nullopt for anything else.
std::string PositionText(const dblog::v1::Position& position);
std::optional<dblog::v1::Position> ParsePositionText(std::string_view text);
// "2/3" and back; PartText is "" for a message that is the whole event (no Dblog-Part header).
std::string PartText(const LogMessage& message);
std::optional<std::pair<std::uint32_t, std::uint32_t>> ParsePartText(std::string_view text);
// kTableHeader's value: "schema.name" with CR, LF and '%' %-escaped (a quoted PostgreSQL name
// may hold CR or LF, which a header cannot).
std::string TableHeaderText(std::string_view table);

// `name` as one token of a dotted name: ASCII letters, digits, '_' and '-' stay, except the
// escape character itself; every other byte becomes the escape character and two hex digits.
// Injective: different names give different tokens. The brokers' names use it (nats/subjects.h'
// SubjectToken, kafka/layout.h's TopicToken).
std::string EscapedToken(std::string_view name, char escape);

class Layout {
 public:
  // prefix: the subject or topic prefix ("dblog.<consumer>" by default), which Debezium's
  // formats name the server by (source.name, the schemas' names).
  explicit Layout(std::string prefix, Format format = Format::kDblog);

  const std::string& prefix() const { return prefix_; }

  // The messages of one event, in the order to write them. Throws std::runtime_error for an
  // event naming a table whose Relation did not come first, or an event with nothing to
  // publish (an empty StreamEvent, a non-transactional Message: never requested).
  // Format::kDebeziumJson writes changes and truncates only (every event is still observed):
  // a change is one message on its table's subject, a DELETE two (the event, then a tombstone
  // with an empty payload; without tombstones.on.delete one), a Truncate one per table with op
  // "t" when skipped.operations does not name "t" (by default it does: none); an op that
  // skipped.operations names is not written (debezium.h, DebeziumOptions).
  std::vector<LogMessage> Map(const dblog::v1::StreamEvent& event);

  // Format::kDblog, for the events that are one message with a position (Begin, Commit, a
  // transactional Message, and a known table's Change, ChunkBegin and ChunkEnd): where Map
  // would put it, without building the message (the publisher's batches serialize such events
  // straight into the batch: batch.h). nullopt for every other event: it goes through Map.
  struct Target {
    std::uint32_t relation_oid;  // 0: the control stream
    const std::string* schema;   // "" on the control stream
    const std::string* name;
    const std::string* table;    // "schema.name"; "" on the control stream
    EventKind kind;
  };
  std::optional<Target> SingleTarget(const dblog::v1::StreamEvent& event);

  // For brokers that place messages by key (Kafka, broker.h's keyed()): Format::kDblog Change
  // messages carry row_key, and an UPDATE that changes the key is two parts: the UPDATE (keyed
  // by the new key), then a DELETE of the old key (keyed by the old key), so that each key's
  // events stay in one place. Format::kDebeziumJson writes a key change as Debezium does in
  // any case (a delete and its tombstone for the old key, a create for the new one).
  void set_row_keys(bool on) { row_keys_ = on; }

  // Format::kDebeziumJson: the connector settings (debezium.h); Debezium's defaults otherwise.
  void set_debezium_options(DebeziumOptions options) { debezium_ = std::move(options); }

 private:
  struct TableNames {
    std::string schema, name, table;
  };
  // The table's names for a known Relation (rebuilt when it is renamed); nullptr: unknown.
  const TableNames* Names(std::uint32_t oid);

  // The Relation of a table `event` names; throws std::runtime_error when it did not come first.
  const dblog::v1::Relation& KnownRelation(std::uint32_t oid,
                                           const dblog::v1::StreamEvent& event) const;

  LogMessage ControlMessage(const dblog::v1::StreamEvent& event) const;
  LogMessage TableMessage(std::uint32_t oid, const dblog::v1::StreamEvent& event);
  LogMessage TableMessageByName(const std::string& schema, const std::string& name,
                                const dblog::v1::StreamEvent& event) const;

  // Format::kDblog: the messages of one event, in order (Map numbers their parts).
  std::vector<LogMessage> MapDblog(const dblog::v1::StreamEvent& event);
  // A Change on its table's subject (and, with row keys, an old key's DELETE after it).
  void MapChange(const dblog::v1::StreamEvent& event, std::vector<LogMessage>& out);
  // The whole event on the control subject, then one per table naming only that table.
  void FanOutTruncate(const dblog::v1::StreamEvent& event, std::vector<LogMessage>& out);
  void FanOutBootstrap(const dblog::v1::StreamEvent& event, std::vector<LogMessage>& out) const;

  // Format::kDebeziumJson: the messages of one event (none for most), in order.
  std::vector<LogMessage> MapDebezium(const dblog::v1::StreamEvent& event);
  void MapDebeziumChange(const dblog::v1::StreamEvent& event, DebeziumSource source,
                         std::vector<LogMessage>& out) const;
  LogMessage DebeziumMessage(std::uint32_t oid, const dblog::v1::StreamEvent& event,
                             std::string payload, std::string key) const;

  std::string prefix_;
  Format format_;
  bool row_keys_ = false;
  client::RelationCache relations_;
  std::unordered_map<std::uint32_t, TableNames> table_names_;  // by relation oid
  std::string no_table_;
  // debezium-json: the settings; the open transaction's xid and commit time, the end LSN of the
  // last transaction committed (0: none seen yet), the bootstrap's consistent point, and whether
  // rows are a bootstrap's or a repair's
  DebeziumOptions debezium_;
  std::uint64_t last_commit_end_ = 0;
  std::uint64_t consistent_point_ = 0;
  std::uint64_t xid_ = 0;
  std::int64_t commit_time_ = 0;
  bool in_bootstrap_ = false;
  bool in_chunk_ = false;
};

}  // namespace dblog::publish
