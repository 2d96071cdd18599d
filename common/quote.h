// common/quote.h: SQL identifiers quoted for text dblog generates: always in double quotes,
// a double quote doubled, every other byte as it is (also valid for the replication command
// grammar, where backslashes are not special either).
// Owns: identifier quoting without a connection (libpq's PQescapeIdentifier needs one).
#pragma once

#include <string>
#include <string_view>

namespace dblog::common {

// "name" with any " doubled: never an alias, a keyword or a case-folded name.
std::string QuoteIdent(std::string_view name);
// "schema"."name", both quoted.
std::string QuoteQualified(std::string_view schema, std::string_view name);

}  // namespace dblog::common
