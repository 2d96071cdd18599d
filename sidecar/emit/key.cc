// sidecar/emit/key.cc: see key.h.
#include "emit/key.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "common/varint.h"

namespace dblog::emit {

std::string KeyBytes(const dblog::v1::Relation& relation, const dblog::v1::Row& row) {
  using google::protobuf::io::CodedOutputStream;
  using google::protobuf::internal::WireFormatLite;
  constexpr std::uint32_t kValuesTag = WireFormatLite::MakeTag(
      dblog::v1::Row::kValuesFieldNumber, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
  std::string key;
  for (std::uint32_t k : relation.key_columns()) {
    if (static_cast<int>(k) >= row.values_size()) return {};
    const dblog::v1::Value& v = row.values(static_cast<int>(k));
    const std::size_t size = v.ByteSizeLong();
    const std::size_t at = key.size();
    key.resize(at + CodedOutputStream::VarintSize32(kValuesTag) +
               CodedOutputStream::VarintSize64(size) + size);
    auto* p = reinterpret_cast<std::uint8_t*>(&key[at]);
    p = CodedOutputStream::WriteVarint32ToArray(kValuesTag, p);
    p = CodedOutputStream::WriteVarint64ToArray(size, p);
    v.SerializeWithCachedSizesToArray(p);
  }
  return key;
}

std::string KeyBytes(const dblog::v1::Relation& relation, const wire::RowView& row) {
  constexpr char kValuesTag = (dblog::v1::Row::kValuesFieldNumber << 3) | 2;  // length-delimited
  std::string key;
  for (std::uint32_t k : relation.key_columns()) {
    if (k >= row.size()) return {};
    // Row.values: the tag byte, the length, the Value (canonical)
    const std::string_view v = row[k].bytes;
    key.push_back(kValuesTag);
    common::AppendVarint(key, v.size());
    key.append(v);
  }
  return key;
}

}  // namespace dblog::emit
