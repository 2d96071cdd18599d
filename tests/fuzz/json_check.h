// tests/fuzz/json_check.h: a strict JSON (RFC 8259) validator for the NDJSON harnesses: one
// value, nothing after it, strings in well-formed UTF-8 without raw control characters.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/json.h"

namespace dblog::fuzz {

class JsonCheck {
 public:
  static bool Valid(std::string_view text) {
    JsonCheck c(text);
    c.Space();
    if (!c.Value(0)) return false;
    c.Space();
    return c.at_ == text.size();
  }

 private:
  explicit JsonCheck(std::string_view t) : t_(t) {}
  bool More() const { return at_ < t_.size(); }
  char Peek() const { return More() ? t_[at_] : '\0'; }
  void Space() {
    while (More() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' || Peek() == '\r')) ++at_;
  }
  bool Eat(char c) {
    if (Peek() != c || !More()) return false;
    ++at_;
    return true;
  }
  bool Word(std::string_view w) {
    if (t_.substr(at_, w.size()) != w) return false;
    at_ += w.size();
    return true;
  }
  static bool Digit(char c) { return c >= '0' && c <= '9'; }
  bool Number() {
    Eat('-');
    if (Eat('0')) {
    } else if (More() && Digit(Peek()) && Peek() != '0') {
      while (More() && Digit(Peek())) ++at_;
    } else {
      return false;
    }
    if (Eat('.')) {
      if (!More() || !Digit(Peek())) return false;
      while (More() && Digit(Peek())) ++at_;
    }
    if (Eat('e') || Eat('E')) {
      if (!Eat('+')) Eat('-');
      if (!More() || !Digit(Peek())) return false;
      while (More() && Digit(Peek())) ++at_;
    }
    return true;
  }
  bool String() {
    if (!Eat('"')) return false;
    const std::size_t begin = at_;
    while (More() && Peek() != '"') {
      const auto c = static_cast<unsigned char>(Peek());
      if (c < 0x20) return false;
      if (c == '\\') {
        ++at_;
        const char e = Peek();
        if (e == 'u') {
          for (int i = 0; i < 4; ++i) {
            ++at_;
            const char h = Peek();
            if (!(Digit(h) || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return false;
          }
        } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos || !More()) {
          return false;
        }
      }
      ++at_;
    }
    if (!common::IsValidUtf8(t_.substr(begin, at_ - begin))) return false;
    return Eat('"');
  }
  bool Value(int depth) {
    if (depth > 64) return false;
    Space();
    switch (Peek()) {
      case '{':
        ++at_;
        Space();
        if (Eat('}')) return true;
        for (;;) {
          Space();
          if (!String()) return false;
          Space();
          if (!Eat(':') || !Value(depth + 1)) return false;
          Space();
          if (Eat('}')) return true;
          if (!Eat(',')) return false;
        }
      case '[':
        ++at_;
        Space();
        if (Eat(']')) return true;
        for (;;) {
          if (!Value(depth + 1)) return false;
          Space();
          if (Eat(']')) return true;
          if (!Eat(',')) return false;
        }
      case '"':
        return String();
      case 't':
        return Word("true");
      case 'f':
        return Word("false");
      case 'n':
        return Word("null");
      default:
        return Number();
    }
  }

  std::string_view t_;
  std::size_t at_ = 0;
};

}  // namespace dblog::fuzz
