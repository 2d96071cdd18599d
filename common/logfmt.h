// common/logfmt.h: text for log lines on stderr, so that no name or message from a database or
// a server can break a line or forge one: dblogd's logfmt values (log/log.h) and the clients'
// lines (`dblog tail`, `dblog apply`, `dblog publish`) escape the same way.
// Owns: the escaping. Knows nothing about what is logged or where it is written.
#pragma once

#include <string>
#include <string_view>

namespace dblog::common {

// A logfmt value: as it is when it holds no space, '"', '=', '\' or control character (and is
// not empty), else in double quotes with '"' and '\' escaped, newline and tab as \n and \t, other
// control characters (U+0000..U+001F) as \xNN.
void AppendLogfmtValue(std::string& out, std::string_view value);
std::string LogfmtValue(std::string_view value);

// `text` (a whole message, prose with values in it) kept on one line of a terminal: newline and
// tab as \n and \t, every other C0 control character, DEL and the C1 controls (U+0080..U+009F,
// as UTF-8 encodes them) as \xNN per byte; every other byte as it is. A value already escaped by
// AppendLogfmtValue comes through unchanged.
void AppendLogText(std::string& out, std::string_view text);
std::string LogText(std::string_view text);

}  // namespace dblog::common
