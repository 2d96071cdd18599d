// common/lsn.h: a WAL position (LSN) as PostgreSQL writes it: "16/B374D848", the high and low
// 32 bits in upper-case hex.
// Owns: the text form of an LSN, both ways.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dblog::common {

std::string FormatLsn(std::uint64_t lsn);
// Parses "X/Y" (1 to 8 hex digits each side, either case); throws std::invalid_argument.
std::uint64_t ParseLsn(std::string_view text);

}  // namespace dblog::common
