// client/relation_cache.cc: table definitions seen on the stream (see relation_cache.h).
#include "client/relation_cache.h"

namespace dblog::client {

void RelationCache::Observe(const dblog::v1::StreamEvent& event) {
  if (event.has_relation()) Put(event.relation());
}

void RelationCache::Put(const dblog::v1::Relation& relation) {
  relations_[relation.oid()] = relation;
}

const dblog::v1::Relation* RelationCache::Find(std::uint32_t oid) const {
  const auto it = relations_.find(oid);
  return it == relations_.end() ? nullptr : &it->second;
}

std::optional<std::string> RelationCache::TableName(std::uint32_t oid) const {
  const dblog::v1::Relation* relation = Find(oid);
  if (relation == nullptr) return std::nullopt;
  return relation->schema() + "." + relation->name();
}

std::optional<dblog::v1::Row> KeyOfRow(const dblog::v1::Relation& relation,
                                       const dblog::v1::Row& row) {
  dblog::v1::Row key;
  for (const std::uint32_t column : relation.key_columns()) {
    if (column >= static_cast<std::uint32_t>(row.values_size())) return std::nullopt;
    *key.add_values() = row.values(static_cast<int>(column));
  }
  return key;
}

}  // namespace dblog::client
