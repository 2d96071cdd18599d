// sidecar/emit/key.h: a row's identity key as bytes, the form the window and the transaction
// log compare keys in (and chunk rows carry): the serialized Row{values: the key columns'
// values, in key order}.
// Owns: that encoding. Pure: no I/O.
#pragma once

#include <string>

#include "dblog/v1/change.pb.h"
#include "wire/change_view.h"

namespace dblog::emit {

// The key of `row` under `relation`'s key_columns, written without building that Row (this
// runs for every change the log carries). "" when the row lacks a key column.
std::string KeyBytes(const dblog::v1::Relation& relation, const dblog::v1::Row& row);
// The same key from a row read in place (wire/change_view.h), byte for byte what the overload
// above gives for the parsed row: a canonical value's bytes are its serialization.
std::string KeyBytes(const dblog::v1::Relation& relation, const wire::RowView& row);

}  // namespace dblog::emit
