// tests/fuzz/pgoutput_values_fuzz.cc: pgoutput::FromText (sidecar/pgoutput/values.h), the one
// converter of pgoutput mode, on arbitrary text. Input: one byte picking the kind, then the
// text. Properties: the only failure is a ValueError; an accepted value is of its kind's field
// (or a literal where the encoder makes one); strings hold UTF-8 (the Value serializes and
// parses back to itself); the same text gives the same value; text kinds and literals keep the
// text byte for byte; an accepted integer's decimal is its text; a bytea
// holds one byte per hex digit pair, a uuid 16; a date or timestamp is its kind's field or a
// literal.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "pgoutput/values.h"

using dblog::fuzz::Check;
namespace po = dblog::pgoutput;
using dblog::v1::Value;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const auto kind = static_cast<po::ValueKind>(data[0] % 15);
  // A copy of its own, so that ASan sees any read past the text's end.
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  Value v;
  try {
    po::FromText(kind, text, &v);
  } catch (const po::ValueError&) {
    Check(v.kind_case() == Value::KIND_NOT_SET, "a refused text left a value behind");
    return 0;
  }
  Value again;
  Check(again.ParseFromString(v.SerializeAsString()), "an accepted value does not parse back");
  Check(again.SerializeAsString() == v.SerializeAsString(), "a value changed in a round trip");
  Value twice;
  po::FromText(kind, text, &twice);
  Check(twice.SerializeAsString() == v.SerializeAsString(), "the same text, another value");
  switch (kind) {
    case po::ValueKind::kBool:
      Check(v.kind_case() == Value::kBoolValue && text == (v.bool_value() ? "t" : "f"), "bool");
      break;
    case po::ValueKind::kInt2:
    case po::ValueKind::kInt4:
    case po::ValueKind::kInt8:
    case po::ValueKind::kOid:
      Check(v.kind_case() == Value::kIntValue, "an integer of another field");
      Check(std::to_string(v.int_value()) == text, "an integer that is not its text");
      break;
    case po::ValueKind::kFloat4:
      Check(v.kind_case() == Value::kFloat4Value, "float4 of another field");
      break;
    case po::ValueKind::kFloat8:
      Check(v.kind_case() == Value::kFloat8Value, "float8 of another field");
      break;
    case po::ValueKind::kText:
    case po::ValueKind::kName:
      Check(v.kind_case() == Value::kTextValue && v.text_value() == text, "text changed");
      break;
    case po::ValueKind::kLiteral:
      Check(v.kind_case() == Value::kLiteral && v.literal() == text, "literal changed");
      break;
    case po::ValueKind::kBytea:
      Check(v.kind_case() == Value::kBytesValue && v.bytes_value().size() * 2 + 2 == text.size(),
            "bytea of another length");
      break;
    case po::ValueKind::kUuid:
      Check(v.kind_case() == Value::kUuidValue && v.uuid_value().size() == 16, "uuid");
      break;
    case po::ValueKind::kDate:
      Check(v.kind_case() == Value::kDateValue || v.kind_case() == Value::kLiteral, "date");
      break;
    case po::ValueKind::kTimestamp:
      Check(v.kind_case() == Value::kTimestampValue || v.kind_case() == Value::kLiteral, "ts");
      break;
    case po::ValueKind::kTimestamptz:
      Check(v.kind_case() == Value::kTimestamptzValue || v.kind_case() == Value::kLiteral, "tstz");
      break;
  }
  return 0;
}
