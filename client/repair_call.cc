// client/repair_call.cc: the repair_keys call for keys a sink cannot apply (see repair_call.h).
#include "client/repair_call.h"

#include <stdexcept>

#include "client/apply/sql_text.h"
#include "common/json.h"

namespace dblog::client {
namespace {

// An identifier as regclass input reads it: plain when it would read back unchanged (lower
// case, digits, underscores), else double-quoted.
std::string RegclassPart(std::string_view name) {
  bool plain = !name.empty() && !(name[0] >= '0' && name[0] <= '9');
  for (const char c : name)
    plain = plain && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  return plain ? std::string(name) : apply::QuoteIdent(name);
}

std::string SqlLiteral(std::string_view text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

}  // namespace

bool HasUnchangedToast(const dblog::v1::Row& row) {
  for (const auto& v : row.values())
    if (v.kind_case() == dblog::v1::Value::kUnchanged) return true;
  return false;
}

std::string KeyJson(const dblog::v1::Relation& relation, const dblog::v1::Row& key) {
  if (key.values_size() != relation.key_columns_size())
    throw std::invalid_argument("a key of " + std::to_string(key.values_size()) +
                                " values for a key of " +
                                std::to_string(relation.key_columns_size()) + " columns");
  std::string out;
  common::JsonWriter json(&out);
  json.BeginObject();
  for (int k = 0; k < key.values_size(); ++k) {
    const std::uint32_t column = relation.key_columns(k);
    if (column >= static_cast<std::uint32_t>(relation.columns_size()))
      throw std::invalid_argument("a key column beyond the relation's columns");
    json.Key(relation.columns(static_cast<int>(column)).name());
    const dblog::v1::Value& v = key.values(k);
    if (v.kind_case() == dblog::v1::Value::kIntValue) {
      json.Int(v.int_value());
      continue;
    }
    const auto text = apply::ValueText(v);  // throws for an unchanged marker
    if (!text) throw std::invalid_argument("a key with a NULL value");
    json.String(*text);
  }
  json.EndObject();
  return out;
}

std::string RepairTableCall(const dblog::v1::Relation& relation, std::string_view consumer) {
  return "SELECT dblog.repair(" +
         SqlLiteral(RegclassPart(relation.schema()) + "." + RegclassPart(relation.name())) + ", " +
         SqlLiteral(consumer) + ");";
}

std::string RepairKeysCall(const dblog::v1::Relation& relation,
                           const std::vector<dblog::v1::Row>& keys, std::string_view consumer) {
  std::string list = "[";
  for (std::size_t i = 0; i < keys.size(); ++i)
    list += (i ? ", " : "") + KeyJson(relation, keys[i]);
  list += "]";
  return "SELECT dblog.repair_keys(" +
         SqlLiteral(RegclassPart(relation.schema()) + "." + RegclassPart(relation.name())) + ", " +
         SqlLiteral(list) + ", " + SqlLiteral(consumer) + ");";
}

}  // namespace dblog::client
