// tests/fuzz/pgoutput_copy_text_fuzz.cc: pgoutput::CopyTextParser (sidecar/pgoutput/copy_text.h),
// the copy path's COPY TO text rows in pgoutput mode, on arbitrary bytes. Input: the stream.
// Properties: the only failure is a CopyTextError; the same rows and the same error however
// the bytes are cut; every accepted row written back by CopyTextLine is its input line (the
// parser accepts exactly what COPY TO writes).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "pgoutput/copy_text.h"

using dblog::fuzz::Check;
namespace po = dblog::pgoutput;

namespace {

// Every row, then "error" if the parser refused, then "pending" if input is left.
std::vector<std::string> Parse(const std::vector<std::string_view>& pieces) {
  std::vector<std::string> out;
  po::CopyTextParser p(1024);
  po::Cells cells;
  try {
    for (std::string_view piece : pieces) {
      p.Feed(piece);
      while (p.Next(&cells)) out.push_back(po::CopyTextLine(cells));
    }
  } catch (const po::CopyTextError&) {
    out.push_back("error");
    return out;
  }
  if (p.pending()) out.push_back("pending");
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> whole = Parse({input});
  // accepted rows are the input's lines, byte for byte
  std::string rebuilt;
  for (const std::string& r : whole)
    if (r != "error" && r != "pending") rebuilt += r;
  Check(input.compare(0, rebuilt.size(), rebuilt) == 0, "a row that is not its input line");
  Check(Parse(dblog::fuzz::Pieces(input, size)) == whole, "other rows when cut otherwise");
  return 0;
}
