// tests/fuzz/scope_match_fuzz.cc: the scope matcher (plugin/scope_match.c) on arbitrary text.
// Scopes reach it from dblogd's configuration, the plugin's options and SQL
// (dblog._scope_match, callable by any role), so it runs inside a backend on whatever text a
// caller sends. Input: one byte of flags, then the scope text (up to the first NUL).
// Properties: a refusal says where ("at character N: ..." within the text); an accepted scope's
// canonical text parses, with and without KEEP_CASE, to the same canonical text and holds the
// same names (names cut from the input itself, so that they often match).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "scope_match.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz property failed: %s\n", what);
    std::abort();
  }
}

std::string Canonical(const DblogScope* scope) {
  std::string out(dblog_scope_format(scope, -1, nullptr, 0), '\0');
  dblog_scope_format(scope, -1, out.data(), out.size() + 1);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int flags = data[0] & (DBLOG_SCOPE_NO_EXCLUSIONS | DBLOG_SCOPE_KEEP_CASE);
  const std::string text(reinterpret_cast<const char*>(data + 1),
                         strnlen(reinterpret_cast<const char*>(data + 1), size - 1));
  char err[256];
  DblogScope* scope = dblog_scope_parse(text.c_str(), flags, err, sizeof(err));
  if (scope == nullptr) {
    int at = 0;
    Check(std::sscanf(err, "at character %d: ", &at) == 1, "a refusal says where");
    Check(at >= 1 && static_cast<std::size_t>(at) <= text.size() + 1, "the position is in the text");
    return 0;
  }
  Check(dblog_scope_size(scope) >= 1, "an accepted scope has patterns");
  const std::string canonical = Canonical(scope);
  for (int again_flags : {0, DBLOG_SCOPE_KEEP_CASE}) {
    DblogScope* again = dblog_scope_parse(canonical.c_str(), again_flags, err, sizeof(err));
    Check(again != nullptr, "the canonical text parses");
    Check(Canonical(again) == canonical, "the canonical text is a fixed point");
    for (std::size_t cut = 0; cut <= text.size(); cut += 1 + text.size() / 8) {
      const std::string schema = text.substr(0, cut), table = text.substr(cut);
      Check(dblog_scope_holds(scope, schema.c_str(), table.c_str()) ==
                dblog_scope_holds(again, schema.c_str(), table.c_str()),
            "the canonical text holds the same names");
    }
    dblog_scope_free(again);
  }
  dblog_scope_free(scope);
  return 0;
}
