// client/publish/kafka/layout.cc: see layout.h.
#include "client/publish/kafka/layout.h"

#include <algorithm>

namespace dblog::publish {

std::string TopicToken(std::string_view name) { return EscapedToken(name, '-'); }

std::uint32_t Murmur2(std::string_view key) {
  // org.apache.kafka.common.utils.Utils.murmur2, in unsigned arithmetic
  const std::uint32_t m = 0x5bd1e995u;
  const int r = 24;
  const auto* data = reinterpret_cast<const unsigned char*>(key.data());
  const std::size_t length = key.size();
  std::uint32_t h = 0x9747b28cu ^ static_cast<std::uint32_t>(length);
  const std::size_t length4 = length / 4;
  for (std::size_t i = 0; i < length4; ++i) {
    const std::size_t i4 = i * 4;
    std::uint32_t k = static_cast<std::uint32_t>(data[i4]) |
                      static_cast<std::uint32_t>(data[i4 + 1]) << 8 |
                      static_cast<std::uint32_t>(data[i4 + 2]) << 16 |
                      static_cast<std::uint32_t>(data[i4 + 3]) << 24;
    k *= m;
    k ^= k >> r;
    k *= m;
    h *= m;
    h ^= k;
  }
  const std::size_t tail = length & ~static_cast<std::size_t>(3);
  switch (length % 4) {
    case 3:
      h ^= static_cast<std::uint32_t>(data[tail + 2]) << 16;
      [[fallthrough]];
    case 2:
      h ^= static_cast<std::uint32_t>(data[tail + 1]) << 8;
      [[fallthrough]];
    case 1:
      h ^= static_cast<std::uint32_t>(data[tail]);
      h *= m;
  }
  h ^= h >> 13;
  h *= m;
  h ^= h >> 15;
  return h;
}

std::int32_t KeyPartition(std::string_view key, std::int32_t partitions) {
  if (partitions <= 1) return 0;
  return static_cast<std::int32_t>((Murmur2(key) & 0x7fffffffu) %
                                   static_cast<std::uint32_t>(partitions));
}

std::string KafkaLayout::TableTopic(std::string_view schema, std::string_view name) const {
  return prefix_ + "." + TopicToken(schema) + "." + TopicToken(name);
}

std::string KafkaLayout::TopicOf(const LogMessage& message) const {
  if (message.control()) return ControlTopic();
  return TableTopic(message.schema, message.name);
}

bool KafkaLayout::Owns(std::string_view topic) const {
  if (topic == ControlTopic()) return true;
  if (topic.size() <= prefix_.size() + 1 || topic.substr(0, prefix_.size()) != prefix_ ||
      topic[prefix_.size()] != '.')
    return false;
  const std::string_view rest = topic.substr(prefix_.size() + 1);
  const std::size_t dot = rest.find('.');
  return dot != std::string_view::npos && dot > 0 && dot + 1 < rest.size() &&
         rest.find('.', dot + 1) == std::string_view::npos;
}

std::vector<KafkaRecord> KafkaLayout::Place(const LogMessage& message,
                                            std::int32_t partitions) const {
  std::vector<KafkaRecord> out;
  const std::string topic = TopicOf(message);
  const bool tombstone = message.kind == EventKind::kTombstone;
  const bool keyed = message.kind == EventKind::kChange || tombstone;
  if (topic == ControlTopic()) {
    out.push_back({topic, 0, std::nullopt, false});
  } else if (keyed) {
    const std::string& key = message.key.empty() ? message.row_key : message.key;
    KafkaRecord r{topic, KeyPartition(key, partitions), key, tombstone};
    out.push_back(std::move(r));
  } else {
    for (std::int32_t p = 0; p < std::max(partitions, 1); ++p)
      out.push_back({topic, p, std::nullopt, false});
  }
  return out;
}

}  // namespace dblog::publish
