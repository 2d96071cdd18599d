// client/publish/nats/subjects.h: the NATS subjects of a consumer's log (docs/publish.md,
// "Layout in the log"), as pure logic: <prefix>.control for the control stream and
// <prefix>.table.<schema token>.<table token> for a table's messages.
// Owns: subject names and their escaping. No I/O.
#pragma once

#include <string>
#include <string_view>

#include "client/publish/layout.h"

namespace dblog::publish {

// A schema or table name as one NATS subject token: ASCII letters, digits, '_' and '-' stay,
// every other byte becomes %XX (so '.', '*', '>', spaces and '%' itself never reach the
// subject). Injective: different names give different tokens.
std::string SubjectToken(std::string_view name);

class NatsSubjects {
 public:
  // prefix: "dblog.<consumer>" by default (--subject-prefix)
  explicit NatsSubjects(std::string prefix) : prefix_(std::move(prefix)) {}

  std::string Control() const { return prefix_ + ".control"; }
  std::string Table(std::string_view schema, std::string_view name) const;
  // Everything the log holds: <prefix>.>
  std::string All() const { return prefix_ + ".>"; }
  // The subject of a message of the layout: its table's, or the control subject.
  std::string Of(const LogMessage& message) const {
    return message.control() ? Control() : Table(message.schema, message.name);
  }

 private:
  std::string prefix_;
};

}  // namespace dblog::publish
