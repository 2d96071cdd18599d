// common/quote.cc: see quote.h.
#include "common/quote.h"

namespace dblog::common {

std::string QuoteIdent(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out.push_back('"');
  for (const char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

std::string QuoteQualified(std::string_view schema, std::string_view name) {
  return QuoteIdent(schema) + "." + QuoteIdent(name);
}

}  // namespace dblog::common
