// client/publish/layout.h: where each event of a consumer's stream goes in a distributed log
// (docs/publish.md, "Layout in the log"), as pure logic: subjects, parts, deduplication ids and
// the position header's text. No I/O, no broker library: the brokers (broker.h) write what
// Layout::Map returns, in order.
// Owns: the mapping event -> messages, subject names, the position header format.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "client/relation_cache.h"
#include "dblog/v1/consumer.pb.h"

namespace dblog::publish {

// Header names, the same on every broker.
inline constexpr char kPositionHeader[] = "Dblog-Position";       // "0/16B3748:3"
inline constexpr char kPartHeader[] = "Dblog-Part";               // "2/3", only when parts > 1
inline constexpr char kEventHeader[] = "Dblog-Event";             // "change", "relation", ...
inline constexpr char kTableHeader[] = "Dblog-Table";             // "public.items" (table messages)
inline constexpr char kRelationSeqHeader[] = "Dblog-Relation-Seq";  // log sequence of the Relation

// One message to write.
struct LogMessage {
  std::string subject;
  std::string payload;  // a serialized dblog.v1.StreamEvent
  std::optional<dblog::v1::Position> position;  // none: Relation, BootstrapBegin
  std::uint32_t part = 1;
  std::uint32_t parts = 1;
  std::string event;            // kEventHeader's value
  std::string msg_id;           // the broker's deduplication id; empty: none (Relation)
  std::uint32_t relation_oid = 0;  // table messages: the table; 0: the control subject
  std::string table;            // table messages: "schema.name"
  bool is_relation = false;
};

// "0/16B3748:3" (client::FormatPosition) and back; nullopt for anything else.
std::string PositionText(const dblog::v1::Position& position);
std::optional<dblog::v1::Position> ParsePositionText(std::string_view text);
// "2/3" and back.
std::optional<std::pair<std::uint32_t, std::uint32_t>> ParsePartText(std::string_view text);

// A schema or table name as one NATS subject token: ASCII letters, digits, '_' and '-' stay,
// every other byte becomes %XX (so '.', '*', '>', spaces and '%' itself never reach the
// subject). Injective: different names give different tokens.
std::string SubjectToken(std::string_view name);

class Layout {
 public:
  // prefix: "dblog.<consumer>" by default; subjects are <prefix>.control and
  // <prefix>.table.<schema token>.<table token>.
  explicit Layout(std::string prefix);

  const std::string& prefix() const { return prefix_; }
  std::string ControlSubject() const { return prefix_ + ".control"; }
  std::string TableSubject(const std::string& schema, const std::string& name) const;
  // Everything this layout writes: <prefix>.>
  std::string AllSubjects() const { return prefix_ + ".>"; }

  // The messages of one event, in the order to write them. Throws std::runtime_error for an
  // event naming a table whose Relation did not come first, or an event with nothing to
  // publish (an empty StreamEvent, a non-transactional Message: never requested).
  std::vector<LogMessage> Map(const dblog::v1::StreamEvent& event);

 private:
  LogMessage TableMessage(std::uint32_t oid, const dblog::v1::StreamEvent& event) const;
  LogMessage TableMessageByName(const std::string& schema, const std::string& name,
                                const dblog::v1::StreamEvent& event) const;

  std::string prefix_;
  client::RelationCache relations_;
};

}  // namespace dblog::publish
