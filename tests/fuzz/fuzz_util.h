// tests/fuzz/fuzz_util.h: what the harnesses share: cutting an input into the pieces a socket
// might deliver, and a check that aborts (so libFuzzer reports it) when a property fails.
#pragma once

#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

namespace dblog::fuzz {

// protobuf logs every string field with invalid UTF-8 it refuses to parse: noise here.
[[maybe_unused]] inline const bool kQuietProtobuf = (google::protobuf::SetLogHandler(nullptr), true);

// Aborts with a message when `ok` is false: a property of the parser under test was broken.
inline void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz property failed: %s\n", what);
    std::abort();
  }
}

// Cuts `bytes` into pieces whose sizes follow from `seed` (1 to 64 bytes, now and then one
// big piece), as reads from a socket might: the same bytes in other pieces must parse the same.
inline std::vector<std::string_view> Pieces(std::string_view bytes, std::uint64_t seed) {
  std::vector<std::string_view> out;
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  while (!bytes.empty()) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::size_t n = (x % 8 == 0) ? bytes.size() : 1 + (x >> 3) % 64;
    if (n > bytes.size()) n = bytes.size();
    out.push_back(bytes.substr(0, n));
    bytes.remove_prefix(n);
  }
  return out;
}

}  // namespace dblog::fuzz
