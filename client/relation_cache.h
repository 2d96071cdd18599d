// client/relation_cache.h: the consumer's view of table definitions. The stream sends a Relation
// before a table's first change and again whenever its definition changes; this cache keeps the
// latest one per oid so rows can be shown with column names and identity keys.
// Owns: the oid -> Relation map and key extraction. No I/O, no rendering.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "dblog/v1/consumer.pb.h"

namespace dblog::client {

class RelationCache {
 public:
  // Remembers `event` when it is a Relation (replacing any earlier definition of that oid);
  // ignores every other event. Call it for every event, in stream order.
  void Observe(const dblog::v1::StreamEvent& event);
  void Put(const dblog::v1::Relation& relation);

  // nullptr when no Relation with this oid has been seen.
  const dblog::v1::Relation* Find(std::uint32_t oid) const;

  // "schema.name", or nullopt for an unknown oid.
  std::optional<std::string> TableName(std::uint32_t oid) const;

  std::size_t size() const { return relations_.size(); }
  void Clear() { relations_.clear(); }

 private:
  std::unordered_map<std::uint32_t, dblog::v1::Relation> relations_;
};

// The identity key of a full row (one value per live column): the values at
// relation.key_columns(), in key order. nullopt when a key position lies outside the row.
std::optional<dblog::v1::Row> KeyOfRow(const dblog::v1::Relation& relation,
                                       const dblog::v1::Row& row);

}  // namespace dblog::client
