// common/lsn.cc: see lsn.h.
#include "common/lsn.h"

#include <cstdio>
#include <stdexcept>

namespace dblog::common {
namespace {

bool IsHexDigit(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

std::uint32_t HexValue(std::string_view digits) {
  std::uint32_t v = 0;
  for (char c : digits) {
    const int d = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    v = (v << 4) | static_cast<std::uint32_t>(d);
  }
  return v;
}

}  // namespace

std::string FormatLsn(std::uint64_t lsn) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%X/%X", static_cast<unsigned>(lsn >> 32),
                static_cast<unsigned>(lsn & 0xffffffffu));
  return buf;
}

std::uint64_t ParseLsn(std::string_view text) {
  const std::size_t slash = text.find('/');
  auto bad = [&]() {
    return std::invalid_argument("invalid LSN \"" + std::string(text) +
                                 "\": expected X/Y with 1 to 8 hex digits on each side");
  };
  if (slash == std::string_view::npos) throw bad();
  const std::string_view hi = text.substr(0, slash);
  const std::string_view lo = text.substr(slash + 1);
  for (std::string_view part : {hi, lo}) {
    if (part.empty() || part.size() > 8) throw bad();
    for (char c : part)
      if (!IsHexDigit(c)) throw bad();
  }
  return (static_cast<std::uint64_t>(HexValue(hi)) << 32) | HexValue(lo);
}

}  // namespace dblog::common
