// client/publish/avro.cc: see avro.h. Where a rule comes from Confluent's AvroData
// (github.com/confluentinc/schema-registry, avro-data/.../AvroData.java, fromConnectSchema and
// addAvroRecordField) or from the Avro specification (avro.apache.org, "Binary Encoding"), it
// says so.
#include "client/publish/avro.h"

#include <cctype>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <vector>

#include "common/json.h"

namespace dblog::publish {

namespace {

using common::JsonWriter;

// ---- a small JSON reader: the texts debezium.cc wrote ------------------------------------

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  std::string text;  // kString: the decoded string; kNumber: the number's text
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;
  std::string_view raw;  // the value's own text in the input

  const Json* Get(std::string_view key) const {
    for (const auto& [k, v] : members)
      if (k == key) return &v;
    return nullptr;
  }
  std::string String(std::string_view key) const {
    const Json* v = Get(key);
    return v && v->kind == kString ? v->text : std::string();
  }
  bool Bool(std::string_view key) const {
    const Json* v = Get(key);
    return v && v->kind == kBool && v->boolean;
  }
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : s_(text) {}
  Json ReadDocument() {
    Json v = Value();
    Space();
    if (i_ != s_.size()) Fail("text after the value");
    return v;
  }

 private:
  [[noreturn]] void Fail(const char* what) const {
    throw std::invalid_argument(std::string("JSON: ") + what + " at offset " +
                                std::to_string(i_));
  }
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  bool Eat(char c) {
    Space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void Expect(char c) {
    if (!Eat(c)) Fail("unexpected character");
  }
  unsigned Hex4() {
    if (i_ + 4 > s_.size()) Fail("short \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<unsigned>(c - 'A' + 10);
      else Fail("bad \\u escape");
    }
    return v;
  }
  std::string StringBody() {
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) Fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) Fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = Hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && i_ + 1 < s_.size() && s_[i_] == '\\' &&
              s_[i_ + 1] == 'u') {
            i_ += 2;
            const unsigned low = Hex4();
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          common::AppendUtf8(out, cp);
          break;
        }
        default: Fail("bad escape");
      }
    }
  }
  Json Value() {
    Space();
    if (i_ >= s_.size()) Fail("missing value");
    const std::size_t start = i_;
    Json v;
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      v.kind = Json::kObject;
      if (!Eat('}')) {
        do {
          Space();
          if (i_ >= s_.size() || s_[i_] != '"') Fail("expected a member name");
          ++i_;
          std::string key = StringBody();
          Expect(':');
          v.members.emplace_back(std::move(key), Value());
        } while (Eat(','));
        Expect('}');
      }
    } else if (c == '[') {
      ++i_;
      v.kind = Json::kArray;
      if (!Eat(']')) {
        do v.items.push_back(Value());
        while (Eat(','));
        Expect(']');
      }
    } else if (c == '"') {
      ++i_;
      v.kind = Json::kString;
      v.text = StringBody();
    } else if (s_.substr(i_, 4) == "null") {
      i_ += 4;
    } else if (s_.substr(i_, 4) == "true") {
      i_ += 4;
      v.kind = Json::kBool;
      v.boolean = true;
    } else if (s_.substr(i_, 5) == "false") {
      i_ += 5;
      v.kind = Json::kBool;
    } else {
      while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) ||
                                s_[i_] == '-' || s_[i_] == '+' || s_[i_] == '.' ||
                                s_[i_] == 'e' || s_[i_] == 'E'))
        ++i_;
      if (i_ == start) Fail("unexpected character");
      v.kind = Json::kNumber;
      v.text = std::string(s_.substr(start, i_ - start));
    }
    v.raw = s_.substr(start, i_ - start);
    return v;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

Json Parse(std::string_view text) { return JsonReader(text).ReadDocument(); }

// ---- Connect schema -> Avro schema (AvroData.fromConnectSchema) --------------------------

constexpr char kDecimal[] = "org.apache.kafka.connect.data.Decimal";
constexpr char kPrecisionParam[] = "connect.decimal.precision";
constexpr int kDefaultPrecision = 64;  // AvroData.CONNECT_AVRO_DECIMAL_PRECISION_DEFAULT
constexpr char kUnavailable[] = "__debezium_unavailable_value";

// Avro's name grammar ([A-Za-z_][A-Za-z0-9_]*), which Avro's parsers (and so a registry) check.
bool IsAvroName(std::string_view name) {
  if (name.empty()) return false;
  const auto first = static_cast<unsigned char>(name.front());
  if (!std::isalpha(first) && first != '_') return false;
  for (const char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// AvroData.splitName: namespace and name at the last '.'.
std::pair<std::string, std::string> SplitName(const std::string& full) {
  const std::size_t dot = full.rfind('.');
  if (dot == std::string::npos) return {"", full};
  return {full.substr(0, dot), full.substr(dot + 1)};
}

void CheckFullName(const std::string& full) {
  auto [ns, name] = SplitName(full);
  bool ok = IsAvroName(name);
  std::size_t i = 0;
  while (ok && !ns.empty() && i <= ns.size()) {
    std::size_t end = ns.find('.', i);
    if (end == std::string::npos) end = ns.size();
    ok = IsAvroName(std::string_view(ns).substr(i, end - i));
    i = end + 1;
  }
  if (!ok)
    throw std::invalid_argument("'" + full + "' is not an Avro name (letters, digits and '_', "
                                "not starting with a digit, between the dots)");
}

void RawValue(JsonWriter& json, const Json& v) {
  switch (v.kind) {
    case Json::kNull: json.Null(); break;
    case Json::kBool: json.Bool(v.boolean); break;
    case Json::kString: json.String(v.text); break;
    case Json::kNumber: json.Int(std::strtoll(v.text.c_str(), nullptr, 10)); break;
    case Json::kArray:
      json.BeginArray();
      for (const Json& item : v.items) RawValue(json, item);
      json.EndArray();
      break;
    case Json::kObject:
      json.BeginObject();
      for (const auto& [k, item] : v.members) {
        json.Key(k);
        RawValue(json, item);
      }
      json.EndObject();
      break;
  }
}

class AvroSchemaWriter {
 public:
  explicit AvroSchemaWriter(std::string* out) : json_(out) {}

  // fromConnectSchema(schema, ignoreOptional)
  void Schema(const Json& s, bool ignore_optional) {
    const std::string type = s.String("type");
    const bool optional = s.Bool("optional") && !ignore_optional;
    if (type == "struct" && optional) {
      // a struct: the union of null and the struct made required (its record reused)
      json_.BeginArray().String("null");
      Schema(s, true);
      json_.EndArray();
      return;
    }
    const bool has_default = s.Get("default") && s.Get("default")->kind != Json::kNull;
    if (optional) {
      json_.BeginArray();
      if (!has_default) json_.String("null");
    }
    Base(s, type);
    if (optional) {
      if (has_default) json_.String("null");
      json_.EndArray();
    }
  }

 private:
  // The schema without its optionality, with AvroData's connect.* properties.
  void Base(const Json& s, const std::string& type) {
    const std::string name = s.String("name");
    if (type == "struct") {
      const std::string full = name.empty() ? "io.confluent.connect.avro.ConnectDefault" : name;
      if (defined_.count(full)) {  // a named type is defined once, then named
        json_.String(full);
        return;
      }
      CheckFullName(full);
      defined_.insert(full);
      const auto [ns, short_name] = SplitName(full);
      json_.BeginObject().Key("type").String("record").Key("name").String(short_name);
      json_.Key("namespace").String(ns);
      json_.Key("fields").BeginArray();
      if (const Json* fields = s.Get("fields")) {
        for (const Json& f : fields->items) {
          const std::string field = f.String("field");
          if (!IsAvroName(field))
            throw std::invalid_argument("field '" + field + "' of " + full +
                                        " is not an Avro name");
          json_.BeginObject().Key("name").String(field).Key("type");
          Schema(f, false);
          // addAvroRecordField: the schema's default, else null for an optional one
          if (const Json* d = f.Get("default"); d && d->kind != Json::kNull) {
            json_.Key("default");
            RawValue(json_, *d);
          } else if (f.Bool("optional")) {
            json_.Key("default").Null();
          }
          json_.EndObject();
        }
      }
      json_.EndArray();
      Properties(s, name, nullptr);
      json_.EndObject();
      return;
    }
    const char* avro = nullptr;
    const char* connect_type = nullptr;
    if (type == "int8" || type == "int16") {
      avro = "int";
      connect_type = type == "int8" ? "int8" : "int16";
    } else if (type == "int32") {
      avro = "int";
    } else if (type == "int64") {
      avro = "long";
    } else if (type == "float" || type == "float32") {
      avro = "float";
    } else if (type == "double" || type == "float64") {
      avro = "double";
    } else if (type == "boolean") {
      avro = "boolean";
    } else if (type == "string") {
      avro = "string";
    } else if (type == "bytes") {
      avro = "bytes";
    } else if (type == "array") {
      const Json* items = s.Get("items");
      if (!items) throw std::invalid_argument("an array schema without items");
      json_.BeginObject().Key("type").String("array").Key("items");
      Schema(*items, false);
      Properties(s, name, nullptr);
      json_.EndObject();
      return;
    } else if (type == "map") {
      const Json* keys = s.Get("keys");
      const Json* values = s.Get("values");
      if (!keys || !values || keys->String("type") != "string" || keys->Bool("optional"))
        throw std::invalid_argument("a map schema whose keys are not required strings");
      json_.BeginObject().Key("type").String("map").Key("values");
      Schema(*values, false);
      Properties(s, name, nullptr);
      json_.EndObject();
      return;
    } else {
      throw std::invalid_argument("a Connect schema of unknown type '" + type + "'");
    }
    if (name.empty() && !s.Get("version") && !s.Get("doc") && !s.Get("parameters") &&
        !connect_type && !(s.Get("default") && s.Get("default")->kind != Json::kNull)) {
      json_.String(avro);  // a plain primitive
      return;
    }
    json_.BeginObject().Key("type").String(avro);
    Properties(s, name, connect_type);
    json_.EndObject();
  }

  // AvroData's metadata (connect.meta.data=true) and logical types, in its order.
  void Properties(const Json& s, const std::string& name, const char* connect_type) {
    const Json* params = s.Get("parameters");
    const bool decimal = name == kDecimal;
    int scale = 0, precision = kDefaultPrecision;
    if (decimal) {
      scale = std::atoi(params ? params->String("scale").c_str() : "0");
      if (params && params->Get(kPrecisionParam))
        precision = std::atoi(params->String(kPrecisionParam).c_str());
      json_.Key("scale").Int(scale);
      json_.Key("precision").Int(precision);
    }
    if (const Json* doc = s.Get("doc"); doc && doc->kind == Json::kString)
      json_.Key("connect.doc").String(doc->text);
    if (const Json* version = s.Get("version"); version && version->kind == Json::kNumber)
      json_.Key("connect.version").Int(std::strtoll(version->text.c_str(), nullptr, 10));
    if (params && !params->members.empty()) {
      json_.Key("connect.parameters").BeginObject();
      for (const auto& [k, v] : params->members) json_.Key(k).String(v.text);
      json_.EndObject();
    }
    if (const Json* d = s.Get("default"); d && d->kind != Json::kNull) {
      json_.Key("connect.default");
      RawValue(json_, *d);
    }
    if (!name.empty()) json_.Key("connect.name").String(name);
    if (connect_type) json_.Key("connect.type").String(connect_type);
    // logical types: Decimal when scale <= precision (else AvroData's legacy form, which also
    // says logicalType decimal), Connect's Date, Time and Timestamp
    if (decimal) json_.Key("logicalType").String("decimal");
    else if (name == "org.apache.kafka.connect.data.Date") json_.Key("logicalType").String("date");
    else if (name == "org.apache.kafka.connect.data.Time")
      json_.Key("logicalType").String("time-millis");
    else if (name == "org.apache.kafka.connect.data.Timestamp")
      json_.Key("logicalType").String("timestamp-millis");
  }

  JsonWriter json_;
  std::set<std::string> defined_;
};

// ---- Avro binary encoding (the specification's "Binary Encoding") ------------------------

void Long(std::string& out, std::int64_t n) {
  std::uint64_t z = (static_cast<std::uint64_t>(n) << 1) ^ static_cast<std::uint64_t>(n >> 63);
  while (z >= 0x80) {
    out += static_cast<char>((z & 0x7F) | 0x80);
    z >>= 7;
  }
  out += static_cast<char>(z);
}

void Bytes(std::string& out, std::string_view bytes) {
  Long(out, static_cast<std::int64_t>(bytes.size()));
  out.append(bytes);
}

std::optional<std::string> Base64Decode(std::string_view text) {
  std::string out;
  unsigned buffer = 0;
  int bits = 0;
  std::size_t pad = 0;
  for (const char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '+') v = 62;
    else if (c == '/') v = 63;
    else if (c == '=') { ++pad; continue; }
    else return std::nullopt;
    if (pad) return std::nullopt;
    buffer = (buffer << 6) | static_cast<unsigned>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xFF);
    }
  }
  if ((text.size() % 4) != 0 || pad > 2) return std::nullopt;
  return out;
}

class AvroEncoder {
 public:
  explicit AvroEncoder(std::string* out) : out_(*out) {}

  // `v` as a value of Connect schema `s` (ignore_optional: the union already written).
  void Value(const Json& s, const Json& v, const std::string& path, bool ignore_optional = false) {
    const std::string type = s.String("type");
    if (s.Bool("optional") && !ignore_optional) {
      // the union of AvroSchemaWriter::Schema: [null, T], or [T, null] with a default
      const bool default_first = type != "struct" && s.Get("default") &&
                                 s.Get("default")->kind != Json::kNull;
      if (v.kind == Json::kNull) {
        Long(out_, default_first ? 1 : 0);
        return;
      }
      Long(out_, default_first ? 0 : 1);
    } else if (v.kind == Json::kNull) {
      Fail(path, "null for a required field");
    }
    if (type == "boolean") {
      if (v.kind != Json::kBool) Fail(path, "not a boolean");
      out_ += static_cast<char>(v.boolean ? 1 : 0);
    } else if (type == "int8" || type == "int16" || type == "int32" || type == "int64") {
      std::int64_t n = 0;
      if (v.kind != Json::kNumber ||
          std::from_chars(v.text.data(), v.text.data() + v.text.size(), n).ptr !=
              v.text.data() + v.text.size())
        Fail(path, "not an integer");
      const std::int64_t limit = type == "int8"    ? 0x7F
                                 : type == "int16" ? 0x7FFF
                                 : type == "int32" ? 0x7FFFFFFF
                                                   : INT64_MAX;
      if (n > limit || n < -limit - 1) Fail(path, "out of range for " + type);
      Long(out_, n);
    } else if (type == "float" || type == "float32" || type == "double" || type == "float64") {
      double d = 0;
      if (v.kind == Json::kNumber) d = std::strtod(v.text.c_str(), nullptr);
      else if (v.kind == Json::kString && v.text == "NaN") d = std::nan("");
      else if (v.kind == Json::kString && v.text == "Infinity") d = HUGE_VAL;
      else if (v.kind == Json::kString && v.text == "-Infinity") d = -HUGE_VAL;
      else Fail(path, "not a number");
      if (type == "float" || type == "float32") {
        const float f = static_cast<float>(d);
        std::uint32_t bits;
        std::memcpy(&bits, &f, 4);
        for (int k = 0; k < 4; ++k) out_ += static_cast<char>((bits >> (8 * k)) & 0xFF);
      } else {
        std::uint64_t bits;
        std::memcpy(&bits, &d, 8);
        for (int k = 0; k < 8; ++k) out_ += static_cast<char>((bits >> (8 * k)) & 0xFF);
      }
    } else if (type == "string") {
      if (v.kind != Json::kString) Fail(path, "not a string");
      Bytes(out_, v.text);
    } else if (type == "bytes") {
      if (v.kind != Json::kString) Fail(path, "not a base64 string");
      if (v.text == kUnavailable && s.String("name").empty()) {
        // Debezium's placeholder in a bytea column: its bytes (unavailable.value.placeholder);
        // a Decimal has none
        Bytes(out_, v.text);
        return;
      }
      const auto bytes = Base64Decode(v.text);
      if (!bytes) Fail(path, "not a base64 string");
      Bytes(out_, *bytes);
    } else if (type == "array") {
      const Json& items = *s.Get("items");
      if (v.kind == Json::kString && v.text == kUnavailable) {
        // an unchanged TOASTed array as Debezium's UnchangedToastedPlaceholder makes it
        // (PostgreSQL connector): text arrays a one-element array of the placeholder, int4[]
        // and int8[] the placeholder's bytes as numbers; Debezium has none for other arrays
        const std::string item_type = items.String("type");
        const bool optional_items = items.Bool("optional");
        if (item_type == "string") {
          Long(out_, 1);
          if (optional_items) Long(out_, 1);
          Bytes(out_, v.text);
        } else if ((item_type == "int32" || item_type == "int64") && items.String("name").empty()) {
          Long(out_, static_cast<std::int64_t>(v.text.size()));
          for (const char c : v.text) {
            if (optional_items) Long(out_, 1);
            Long(out_, static_cast<signed char>(c));
          }
        } else {
          Fail(path, "an unchanged TOASTed array of " +
                         (items.String("name").empty() ? item_type : items.String("name")) +
                         ", which Debezium has no placeholder for");
        }
        Long(out_, 0);
        return;
      }
      if (v.kind != Json::kArray) Fail(path, "not an array");
      if (!v.items.empty()) {
        Long(out_, static_cast<std::int64_t>(v.items.size()));
        for (std::size_t k = 0; k < v.items.size(); ++k)
          Value(items, v.items[k], path + "[" + std::to_string(k) + "]");
      }
      Long(out_, 0);
    } else if (type == "map") {
      if (v.kind != Json::kObject) Fail(path, "not an object");
      if (!v.members.empty()) {
        Long(out_, static_cast<std::int64_t>(v.members.size()));
        for (const auto& [k, item] : v.members) {
          Bytes(out_, k);
          Value(*s.Get("values"), item, path + "." + k);
        }
      }
      Long(out_, 0);
    } else if (type == "struct") {
      if (v.kind != Json::kObject) Fail(path, "not an object");
      static const Json kNullValue;
      if (const Json* fields = s.Get("fields")) {
        for (const Json& f : fields->items) {
          const std::string name = f.String("field");
          const Json* member = v.Get(name);
          Value(f, member ? *member : kNullValue, path.empty() ? name : path + "." + name);
        }
        for (const auto& [k, item] : v.members) {
          bool known = false;
          for (const Json& f : fields->items) known = known || f.String("field") == k;
          if (!known) Fail(path, "member '" + k + "' that the schema does not name");
        }
      }
    } else {
      Fail(path, "a schema of unknown type '" + type + "'");
    }
  }

 private:
  [[noreturn]] static void Fail(const std::string& path, const std::string& what) {
    throw std::invalid_argument("Avro: " + (path.empty() ? std::string("the value") : path) +
                                ": " + what);
  }
  std::string& out_;
};

}  // namespace

std::string AvroSchemaFromConnect(std::string_view connect_schema) {
  const Json schema = Parse(connect_schema);
  std::string out;
  AvroSchemaWriter(&out).Schema(schema, false);
  return out;
}

std::string AvroEncodeConnect(std::string_view connect_schema, std::string_view payload) {
  const Json schema = Parse(connect_schema);
  const Json value = Parse(payload);
  std::string out;
  AvroEncoder(&out).Value(schema, value, "");
  return out;
}

std::string ConfluentFrame(std::int32_t schema_id, std::string_view body) {
  std::string out;
  out.reserve(5 + body.size());
  out += '\0';
  const auto id = static_cast<std::uint32_t>(schema_id);
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((id >> shift) & 0xFF);
  out.append(body);
  return out;
}

std::string ConfluentAvroEncoder::Encode(const std::string& subject, std::string_view with_schema) {
  const Json doc = Parse(with_schema);
  const Json* schema = doc.Get("schema");
  const Json* payload = doc.Get("payload");
  if (!schema || !payload) throw std::invalid_argument("not a {\"schema\",\"payload\"} document");
  auto it = avro_of_connect_.find(schema->raw);
  if (it == avro_of_connect_.end()) {
    std::string avro;
    AvroSchemaWriter(&avro).Schema(*schema, false);
    it = avro_of_connect_.emplace(std::string(schema->raw), std::move(avro)).first;
  }
  std::pair<std::string, const std::string*> key(subject, &it->second);
  auto id = ids_.find(key);
  if (id == ids_.end()) {
    const std::int32_t registered = registry_.Register(subject, it->second);
    ++registrations_;
    id = ids_.emplace(std::move(key), registered).first;
  }
  std::string body;
  AvroEncoder(&body).Value(*schema, *payload, "");
  return ConfluentFrame(id->second, body);
}

}  // namespace dblog::publish
