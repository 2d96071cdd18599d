// sidecar/pgoutput/copy_text.h: the copy path's bytes in pgoutput mode: `COPY (SELECT ...) TO
// STDOUT` in text format, where each column is its type's output function's text, the same
// text pgoutput sends with `binary 'false'` (values.h says why text). Hands out each row's
// cells, unescaped, for FromText.
// The format, as COPY TO writes it (CopyAttributeOutText in copyto.c): columns separated by a
// tab, rows ended by a newline, a NULL as \N, and in a value a backslash, backspace, form feed,
// newline, carriage return, tab and vertical tab written as \\ \b \f \n \r \t \v. Every other
// byte is itself. Anything else (another escape, a raw carriage return, backspace, form feed
// or vertical tab, a \N inside a value)
// is not what COPY TO writes and is a CopyTextError: every byte is untrusted.
// Owns: that parsing. Must not: do I/O. Fuzzed in tests/fuzz/pgoutput_copy_text_fuzz.cc.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dblog::pgoutput {

class CopyTextError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using Cells = std::vector<std::optional<std::string>>;  // nullopt: SQL NULL

class CopyTextParser {
 public:
  // max_row_bytes: a row longer than this is refused (the server's own limit is 1 GiB a value).
  explicit CopyTextParser(std::size_t max_row_bytes = std::size_t{1} << 30)
      : max_row_bytes_(max_row_bytes) {}
  // Any piece of the stream; copied where a row spans pieces.
  void Feed(std::string_view data);
  // The next complete row into *cells. False when more input is needed.
  bool Next(Cells* cells);
  // Input that is not a complete row yet (at the end of the stream: a truncated row).
  bool pending() const { return pos_ < buffer_.size(); }

 private:
  std::string buffer_;
  std::size_t pos_ = 0;
  std::size_t max_row_bytes_;
};

// One row as COPY TO writes it (the parser's inverse; for tests).
std::string CopyTextLine(const Cells& cells);

}  // namespace dblog::pgoutput
