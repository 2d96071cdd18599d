// common/varint.h: protobuf's base-128 varint, written (wire/ frames with it; the emitter and
// the key encoder write message fields with it).
// Owns: writing a varint. Header-only: it is on every event's path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dblog::common {

// Appends the varint encoding of `value`; returns the number of bytes written.
inline std::size_t AppendVarint(std::string& out, std::uint64_t value) {
  std::size_t n = 1;
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
    ++n;
  }
  out.push_back(static_cast<char>(value));
  return n;
}

}  // namespace dblog::common
