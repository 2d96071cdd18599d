// client/ndjson.h: rendering of stream events as NDJSON, one JSON object per line, for
// `dblog tail` and anyone who wants a readable form of the stream. docs/ and the report of the
// client's author list the shape of every op; the rules in short:
//   - every line starts with "position" ({"commit_lsn":"%X/%X","seq":n}, or null for events
//     without one) and "op";
//   - changes name their table ("schema.name") and render rows and keys as objects keyed by
//     column name, using the Relation last seen for the table (RelationCache); for a table
//     whose Relation was never seen, "table" is null, "relation_oid" is added and rows are
//     arrays in column order;
//   - values: SQL NULL -> null; bool; integers -> JSON numbers, always (readers that use IEEE
//     doubles, such as JavaScript, lose precision above 2^53); float4/float8 -> shortest
//     round-trip numbers, NaN/Infinity/-Infinity as strings; text -> string; bytea ->
//     "\\x<hex>"; uuid -> "8-4-4-4-12"; date -> "YYYY-MM-DD"; timestamp ->
//     "YYYY-MM-DDTHH:MM:SS.ffffff", timestamptz the same + "Z"; everything PostgreSQL sent as
//     text (numeric, json, intervals, infinite dates, ...) -> string; an unchanged TOASTed
//     column -> {"unchanged_toast":true}.
// Owns: the mapping from dblog.v1 messages to JSON text. No I/O.
#pragma once

#include <string>

#include "common/json.h"
#include "client/relation_cache.h"
#include "dblog/v1/consumer.pb.h"

namespace dblog::client {

struct RenderOptions {
  bool relations = false;  // print Relation events as op "relation" (hidden by default)
};

void WriteValue(common::JsonWriter& json, const dblog::v1::Value& value);
std::string ValueToJson(const dblog::v1::Value& value);

// Appends the event's line, '\n' included, to *out and returns true; returns false and appends
// nothing for events that are not printed (Relation without options.relations, and an empty
// StreamEvent). The cache is only read: the caller feeds it (RelationCache::Observe) first.
bool RenderEvent(const dblog::v1::StreamEvent& event, const RelationCache& relations,
                 const RenderOptions& options, std::string* out);

}  // namespace dblog::client
