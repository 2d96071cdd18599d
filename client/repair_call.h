// client/repair_call.h: the SQL a consumer runs on the source to have keys copied to it again
// (dblog.repair_keys, docs/repairs.md), for rows it finds it cannot apply: an UPDATE that keeps
// unchanged TOAST values (Value.unchanged) of a row the sink does not have.
// Owns: text only. No I/O.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dblog/v1/change.pb.h"

namespace dblog::client {

// True when the row has an unchanged-TOAST value (an UPDATE the sink can only apply to the
// row it already has).
bool HasUnchangedToast(const dblog::v1::Row& row);

// The key (Row of key values, in key order) as the JSON object dblog.repair_keys takes:
// {"id": 5}, {"k1": "a", "k2": 2} (integers as numbers, everything else as the type's input
// text). Throws std::invalid_argument for a key that does not fit the relation or holds a NULL
// or an unchanged marker.
std::string KeyJson(const dblog::v1::Relation& relation, const dblog::v1::Row& key);

// `SELECT dblog.repair_keys('schema.table', '[{"id": 5}]', 'consumer');`: run on the source,
// it sends `consumer` those keys' rows again as a repair chunk (absent ones as DELETEs). The
// table is the source's (Relation.schema and .name), quoted as needed.
std::string RepairKeysCall(const dblog::v1::Relation& relation,
                           const std::vector<dblog::v1::Row>& keys, std::string_view consumer);

// `SELECT dblog.repair('schema.table', 'consumer');`: the whole table, for when keys are too
// many to list.
std::string RepairTableCall(const dblog::v1::Relation& relation, std::string_view consumer);

}  // namespace dblog::client
