// common/logfmt.cc: escaping for log lines (see logfmt.h).
#include "common/logfmt.h"

#include <cstdio>

namespace dblog::common {
namespace {

void AppendHex(std::string& out, unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  out.append(buf);
}

bool NeedsQuotes(std::string_view value) {
  if (value.empty()) return true;
  for (const char c : value)
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20)
      return true;
  return false;
}

}  // namespace

void AppendLogfmtValue(std::string& out, std::string_view value) {
  if (!NeedsQuotes(value)) {
    out.append(value);
    return;
  }
  out.push_back('"');
  for (const char c : value) {
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          AppendHex(out, static_cast<unsigned char>(c));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

std::string LogfmtValue(std::string_view value) {
  std::string out;
  AppendLogfmtValue(out, value);
  return out;
}

void AppendLogText(std::string& out, std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') {
      out.append("\\n");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (c < 0x20 || c == 0x7f) {
      AppendHex(out, c);
    } else if (c == 0xc2 && i + 1 < text.size() &&
               (static_cast<unsigned char>(text[i + 1]) & 0xe0) == 0x80) {
      AppendHex(out, c);  // C1: U+0080..U+009F
      AppendHex(out, static_cast<unsigned char>(text[++i]));
    } else {
      out.push_back(text[i]);
    }
  }
}

std::string LogText(std::string_view text) {
  std::string out;
  AppendLogText(out, text);
  return out;
}

}  // namespace dblog::common
