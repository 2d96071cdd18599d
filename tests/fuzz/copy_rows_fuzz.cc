// tests/fuzz/copy_rows_fuzz.cc: bootstrap::CopyRowParser (binary COPY of one bytea column) on
// arbitrary bytes, fed whole and in pieces as libpq hands out CopyData.
// Properties: the same rows, the same end (finished, more needed, or the same error) however
// the bytes are cut; each row is the bytes after its 6-byte field header, in input order;
// nothing comes after the trailer.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/copier.h"
#include "fuzz_util.h"

using dblog::fuzz::Check;

namespace {

struct Outcome {
  std::vector<std::string> rows;
  std::string end;
  bool operator==(const Outcome& o) const { return rows == o.rows && end == o.end; }
};

Outcome Parse(const std::vector<std::string_view>& pieces) {
  Outcome out;
  dblog::bootstrap::CopyRowParser parser;
  try {
    for (std::string_view piece : pieces) {
      parser.Feed(piece);
      std::string_view row;
      while (parser.Next(&row)) {
        Check(!parser.finished(), "no row after the trailer");
        out.rows.emplace_back(row);
      }
    }
    std::string_view row;
    Check(!parser.Next(&row), "nothing more without input");
    out.end = parser.finished() ? "finished" : "more";
  } catch (const std::runtime_error& e) {
    out.end = std::string("error: ") + e.what();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t control = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const Outcome whole = Parse({bytes});
  const Outcome cut = Parse(dblog::fuzz::Pieces(bytes, control));
  Check(whole == cut, "the same rows and end however the bytes are cut");
  // Rows are input bytes, in input order.
  std::size_t at = 0;
  for (const std::string& row : whole.rows) {
    const std::size_t found = bytes.find(row, at);
    Check(found != std::string_view::npos, "a row is input bytes, in order");
    at = found + row.size();
  }
  return 0;
}
