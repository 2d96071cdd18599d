// client/apply/column_types.cc: lossless and lossy column type pairs (see column_types.h).
#include "client/apply/column_types.h"

#include <cstdlib>
#include <optional>
#include <vector>

namespace dblog::apply {
namespace {

// A format_type() text split into its name and its modifier: "timestamp(3) with time zone" is
// {"timestamp with time zone", {3}, false}.
struct TypeText {
  std::string base;
  std::vector<long> mods;
  bool array = false;
};

// nullopt for what this does not understand (a quoted name, nested parentheses, a modifier
// that is not numbers): such a type only matches its identical text.
std::optional<TypeText> Parse(std::string text) {
  TypeText out;
  if (text.size() > 2 && text.compare(text.size() - 2, 2, "[]") == 0) {
    out.array = true;  // format_type prints one [] whatever the dimensions
    text.resize(text.size() - 2);
  }
  if (text.empty() || text.find('"') != std::string::npos || text.find('[') != std::string::npos)
    return std::nullopt;
  const auto open = text.find('(');
  if (open == std::string::npos) {
    if (text.find(')') != std::string::npos) return std::nullopt;
    out.base = text;
    return out;
  }
  const auto close = text.find(')', open);
  if (close == std::string::npos) return std::nullopt;
  out.base = text.substr(0, open) + text.substr(close + 1);
  if (out.base.find_first_of("()") != std::string::npos) return std::nullopt;
  const std::string mods = text.substr(open + 1, close - open - 1);
  std::size_t at = 0;
  while (at <= mods.size()) {
    auto comma = mods.find(',', at);
    if (comma == std::string::npos) comma = mods.size();
    const std::string number = mods.substr(at, comma - at);
    char* end = nullptr;
    const long value = std::strtol(number.c_str(), &end, 10);
    if (number.empty() || end != number.c_str() + number.size()) return std::nullopt;
    out.mods.push_back(value);
    at = comma + 1;
  }
  return out;
}

// Decimal digits an integer type needs left of the point; 0 for other types.
int IntegerDigits(const std::string& base) {
  if (base == "smallint") return 5;
  if (base == "integer" || base == "oid") return 10;
  if (base == "bigint") return 19;
  return 0;
}

bool IsTemporalWithPrecision(const std::string& base) {
  return base == "timestamp without time zone" || base == "timestamp with time zone" ||
         base == "time without time zone" || base == "time with time zone" ||
         base.rfind("interval", 0) == 0;
}

bool IsUnboundedText(const TypeText& t) {
  return t.base == "text" || (t.base == "character varying" && t.mods.empty());
}

bool Widens(const TypeText& s, const TypeText& t) {
  // Integers (and oid, an unsigned 32-bit integer).
  if (const int digits = IntegerDigits(s.base)) {
    if (t.base == "smallint" || t.base == "integer" || t.base == "bigint") {
      if (s.base == "oid") return t.base == "bigint";
      return IntegerDigits(t.base) >= digits;
    }
    if (t.base == "numeric") {
      if (t.mods.empty()) return true;
      const long p = t.mods[0], scale = t.mods.size() > 1 ? t.mods[1] : 0;
      return scale >= 0 && p - scale >= digits;
    }
    if (t.base == "real") return s.base == "smallint";            // 24 bits of mantissa
    if (t.base == "double precision") return s.base != "bigint";  // 53 bits
    return false;
  }
  if (s.base == "real") return t.base == "double precision";
  // numeric(p,s) holds multiples of 10^-s below 10^(p-s): the target needs as many digits on
  // both sides of the point. Unconstrained numeric holds any of them.
  if (s.base == "numeric") {
    if (t.base != "numeric") return false;
    if (t.mods.empty()) return true;
    if (s.mods.empty()) return false;
    const long sp = s.mods[0], ss = s.mods.size() > 1 ? s.mods[1] : 0;
    const long tp = t.mods[0], ts = t.mods.size() > 1 ? t.mods[1] : 0;
    return ts >= ss && tp - ts >= sp - ss;
  }
  // Character strings. char(n) pads with blanks that a cast to text or varchar drops: only a
  // wider char(m) keeps them.
  if (s.base == "text" || s.base == "character varying" || s.base == "name") {
    if (IsUnboundedText(t)) return true;
    if (t.base != "character varying") return false;
    if (s.base == "name") return t.mods[0] >= 63;  // NAMEDATALEN - 1 bytes, so at most 63 chars
    return !s.mods.empty() && t.mods[0] >= s.mods[0];
  }
  if (s.base == "character") {
    return t.base == "character" && !s.mods.empty() && !t.mods.empty() && t.mods[0] >= s.mods[0];
  }
  if (s.base == "bit" || s.base == "bit varying") {
    if (t.base != "bit varying") return false;
    if (t.mods.empty()) return true;
    return !s.mods.empty() && t.mods[0] >= s.mods[0];
  }
  // Fractional second digits; absent means 6 (microseconds, all there is).
  if (IsTemporalWithPrecision(s.base)) {
    if (t.base != s.base) return false;
    const long sp = s.mods.empty() ? 6 : s.mods[0];
    const long tp = t.mods.empty() ? 6 : t.mods[0];
    return tp >= sp;
  }
  return false;
}

}  // namespace

Conversion ClassifyConversion(const std::string& source_type, const std::string& target_type) {
  if (source_type == target_type) return Conversion::kSame;
  const auto s = Parse(source_type);
  const auto t = Parse(target_type);
  if (!s || !t || s->array != t->array) return Conversion::kLossy;
  return Widens(*s, *t) ? Conversion::kWidening : Conversion::kLossy;
}

}  // namespace dblog::apply
