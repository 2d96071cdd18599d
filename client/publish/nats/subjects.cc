// client/publish/nats/subjects.cc: see subjects.h.
#include "client/publish/nats/subjects.h"

namespace dblog::publish {

std::string SubjectToken(std::string_view name) { return EscapedToken(name, '%'); }

std::string NatsSubjects::Table(std::string_view schema, std::string_view name) const {
  return prefix_ + ".table." + SubjectToken(schema) + "." + SubjectToken(name);
}

}  // namespace dblog::publish
