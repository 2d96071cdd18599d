// tests/cpp/common/json_test.cc: JSON text primitives: string escaping (quotes, backslash,
// control characters, UTF-8 passthrough and repair), UTF-8 validation, base64, numbers, and
// the writer's comma placement.
#include "common/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace dblog::common {
namespace {

std::string Quoted(std::string_view text) {
  std::string out;
  AppendJsonString(out, text);
  return out;
}

TEST(JsonString, PlainTextIsQuoted) {
  EXPECT_EQ(Quoted(""), R"("")");
  EXPECT_EQ(Quoted("one"), R"("one")");
}

TEST(JsonString, EscapesQuoteAndBackslash) {
  EXPECT_EQ(Quoted(R"(say "hi")"), R"("say \"hi\"")");
  EXPECT_EQ(Quoted(R"(C:\dir\)"), R"("C:\\dir\\")");
  EXPECT_EQ(Quoted("/"), R"("/")");  // '/' may stay as is
}

TEST(JsonString, EscapesEveryControlCharacter) {
  EXPECT_EQ(Quoted("\b\f\n\r\t"), R"("\b\f\n\r\t")");
  EXPECT_EQ(Quoted(std::string("a\0b", 3)), R"("a\u0000b")");
  EXPECT_EQ(Quoted("\x01\x1f"), R"("\u0001\u001f")");
  EXPECT_EQ(Quoted("\x0b"), R"("\u000b")");
  for (int c = 0; c < 0x20; ++c) {
    const std::string out = Quoted(std::string(1, static_cast<char>(c)));
    EXPECT_EQ(out[1], '\\') << "control character " << c << " left raw";
  }
  EXPECT_EQ(Quoted("\x7f"), "\"\x7f\"");  // DEL is not a JSON control character
}

TEST(JsonString, PassesValidUtf8Through) {
  EXPECT_EQ(Quoted("caf\xc3\xa9"), "\"caf\xc3\xa9\"");            // 2 bytes
  EXPECT_EQ(Quoted("\xe2\x82\xac 5"), "\"\xe2\x82\xac 5\"");      // 3 bytes
  EXPECT_EQ(Quoted("\xf0\x9f\x90\x98"), "\"\xf0\x9f\x90\x98\"");  // 4 bytes
  EXPECT_EQ(Quoted("\xe2\x80\xa8"), "\"\xe2\x80\xa8\"");          // U+2028
  EXPECT_EQ(Quoted("\xf4\x8f\xbf\xbf"), "\"\xf4\x8f\xbf\xbf\"");  // U+10FFFF
}

TEST(JsonString, ReplacesIllFormedUtf8) {
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(Quoted("a\xff"
                   "b"),
            "\"a" + fffd + "b\"");
  EXPECT_EQ(Quoted("\xc3"), "\"" + fffd + "\"");                        // truncated sequence
  EXPECT_EQ(Quoted("\xc0\xaf"), "\"" + fffd + fffd + "\"");             // overlong '/'
  EXPECT_EQ(Quoted("\xed\xa0\x80"), "\"" + fffd + fffd + fffd + "\"");  // surrogate D800
  EXPECT_EQ(Quoted("\xf4\x90\x80\x80"), "\"" + fffd + fffd + fffd + fffd + "\"");  // > 10FFFF
  EXPECT_EQ(Quoted("\x80"), "\"" + fffd + "\"");  // lone continuation
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("ascii"));
  EXPECT_TRUE(IsValidUtf8(std::string("nul\0inside", 10)));
  EXPECT_TRUE(IsValidUtf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x90\x98"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xc3"));
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\x80"));  // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xbf\xbf"));  // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf5\x80\x80\x80"));
}

TEST(Base64, Rfc4648Vectors) {
  EXPECT_EQ(Base64Encode(""), "");
  EXPECT_EQ(Base64Encode("f"), "Zg==");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
  EXPECT_EQ(Base64Encode("foo"), "Zm9v");
  EXPECT_EQ(Base64Encode("foob"), "Zm9vYg==");
  EXPECT_EQ(Base64Encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("\xff\xfe\x00\x80"), "//4=");  // string literal stops at \x00
  EXPECT_EQ(Base64Encode(std::string("\xff\xfe\x00\x80", 4)), "//4AgA==");
}

std::string Written(void (*write)(JsonWriter&)) {
  std::string out;
  JsonWriter json(&out);
  write(json);
  return out;
}

TEST(JsonWriter, PlacesCommasAndColons) {
  EXPECT_EQ(Written([](JsonWriter& j) {
              j.BeginObject()
                  .Key("a")
                  .Int(1)
                  .Key("b")
                  .BeginArray()
                  .Bool(true)
                  .Null()
                  .BeginObject()
                  .EndObject()
                  .BeginArray()
                  .EndArray()
                  .EndArray()
                  .Key("c")
                  .String("x")
                  .EndObject();
            }),
            R"({"a":1,"b":[true,null,{},[]],"c":"x"})");
  EXPECT_EQ(Written([](JsonWriter& j) { j.BeginObject().EndObject(); }), "{}");
}

TEST(JsonWriter, Integers) {
  EXPECT_EQ(Written([](JsonWriter& j) {
              j.BeginArray()
                  .Int(0)
                  .Int(-1)
                  .Int(std::numeric_limits<std::int64_t>::min())
                  .Int(std::numeric_limits<std::int64_t>::max())
                  .Uint(std::numeric_limits<std::uint64_t>::max())
                  .EndArray();
            }),
            "[0,-1,-9223372036854775808,9223372036854775807,18446744073709551615]");
}

TEST(JsonWriter, FloatsAreShortestRoundTripAndSpecialsAreStrings) {
  EXPECT_EQ(Written([](JsonWriter& j) {
              j.BeginArray()
                  .Double(0.1)
                  .Double(1.5)
                  .Double(-0.0)
                  .Double(1e300)
                  .Double(5e-324)
                  .Double(std::nan(""))
                  .Double(std::numeric_limits<double>::infinity())
                  .Double(-std::numeric_limits<double>::infinity())
                  .EndArray();
            }),
            R"([0.1,1.5,-0,1e+300,5e-324,"NaN","Infinity","-Infinity"])");
  EXPECT_EQ(Written([](JsonWriter& j) {
              j.BeginArray()
                  .Float(0.1f)
                  .Float(3.4028235e38f)
                  .Float(std::numeric_limits<float>::quiet_NaN())
                  .Float(-std::numeric_limits<float>::infinity())
                  .EndArray();
            }),
            R"([0.1,3.4028235e+38,"NaN","-Infinity"])");
}

}  // namespace
}  // namespace dblog::common
