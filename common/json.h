// common/json.h: the JSON text primitives the NDJSON renderer is built from: string escaping,
// UTF-8 validation, base64, numbers, and a small streaming writer that places the commas.
// Owns: JSON syntax only. Knows nothing about dblog's messages (that is ndjson.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dblog::common {

// True when `bytes` is well-formed UTF-8 (RFC 3629: no overlongs, no surrogates, <= U+10FFFF).
bool IsValidUtf8(std::string_view bytes);

// Appends code point `cp` (<= U+10FFFF; a caller decoding \u escapes checks surrogates) as
// UTF-8: what JSON readers write for a \uXXXX escape.
void AppendUtf8(std::string& out, std::uint32_t cp);

// Appends `text` as a JSON string literal, quotes included. '"', '\\' and the control
// characters U+0000..U+001F are escaped (\b \f \n \r \t, else \u00XX); valid UTF-8 passes
// through unchanged; each byte of an ill-formed sequence becomes U+FFFD, so the output is
// always valid JSON in valid UTF-8.
void AppendJsonString(std::string& out, std::string_view text);

// Standard base64 (RFC 4648 section 4) with '=' padding.
std::string Base64Encode(std::string_view bytes);

// Builds one JSON text into a caller-owned string. It tracks nesting only to place commas and
// colons; a caller that misnests (a Key inside an array) gets wrong JSON, not an error.
class JsonWriter {
 public:
  explicit JsonWriter(std::string* out) : out_(out) {}

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  JsonWriter& Key(std::string_view name);

  JsonWriter& String(std::string_view text);
  JsonWriter& Int(std::int64_t value);
  JsonWriter& Uint(std::uint64_t value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // Shortest text that reads back to the same value; NaN and the infinities become the
  // strings "NaN", "Infinity", "-Infinity" (PostgreSQL's spelling), as JSON has no such numbers.
  JsonWriter& Double(double value);
  JsonWriter& Float(float value);

 private:
  void BeforeValue();
  void Open(char bracket);
  void Close(char bracket);

  std::string* out_;
  std::vector<bool> has_member_;  // per open object/array: something was written already
  bool after_key_ = false;
};

}  // namespace dblog::common
