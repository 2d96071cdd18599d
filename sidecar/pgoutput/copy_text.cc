// sidecar/pgoutput/copy_text.cc: COPY TO's text format (see copy_text.h).
#include "pgoutput/copy_text.h"

#include <cstring>

namespace dblog::pgoutput {

void CopyTextParser::Feed(std::string_view data) {
  if (pos_ > 0) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  buffer_.append(data.data(), data.size());
}

bool CopyTextParser::Next(Cells* cells) {
  const char* begin = buffer_.data() + pos_;
  const std::size_t avail = buffer_.size() - pos_;
  const void* nl = std::memchr(begin, '\n', avail);
  if (nl == nullptr) {
    if (avail > max_row_bytes_)
      throw CopyTextError("a COPY row longer than " + std::to_string(max_row_bytes_) + " bytes");
    return false;
  }
  const std::string_view line(begin, static_cast<const char*>(nl) - begin);
  if (line.size() > max_row_bytes_)
    throw CopyTextError("a COPY row longer than " + std::to_string(max_row_bytes_) + " bytes");
  cells->clear();
  std::size_t i = 0;
  while (true) {
    const std::size_t start = i;
    while (i < line.size() && line[i] != '\t') ++i;
    const std::string_view field = line.substr(start, i - start);
    if (field == "\\N") {
      cells->emplace_back(std::nullopt);
    } else {
      std::string value;
      value.reserve(field.size());
      for (std::size_t j = 0; j < field.size(); ++j) {
        char c = field[j];
        if (c == '\r' || c == '\b' || c == '\f' || c == '\v')
          throw CopyTextError("a raw control character COPY TO escapes, in a COPY row");
        if (c != '\\') {
          value += c;
          continue;
        }
        if (++j == field.size()) throw CopyTextError("a COPY value ending in a backslash");
        switch (field[j]) {
          case '\\': value += '\\'; break;
          case 'b': value += '\b'; break;
          case 'f': value += '\f'; break;
          case 'n': value += '\n'; break;
          case 'r': value += '\r'; break;
          case 't': value += '\t'; break;
          case 'v': value += '\v'; break;
          default:
            throw CopyTextError(std::string("an escape COPY TO does not write: \\") + field[j]);
        }
      }
      cells->emplace_back(std::move(value));
    }
    if (i == line.size()) break;
    ++i;  // the tab
  }
  pos_ += line.size() + 1;
  return true;
}

std::string CopyTextLine(const Cells& cells) {
  std::string out;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (i > 0) out += '\t';
    if (!cells[i]) {
      out += "\\N";
      continue;
    }
    for (char c : *cells[i]) {
      switch (c) {
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\v': out += "\\v"; break;
        default: out += c;
      }
    }
  }
  return out + '\n';
}

}  // namespace dblog::pgoutput
