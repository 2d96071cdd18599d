// tests/cpp/publish/debezium_matrix.h: the Debezium tests' type matrix (a table of every column
// type the Debezium layout maps, one value each) and its events, shared by debezium_test.cc
// (JSON with schemas) and avro_test.cc (the same records in Avro).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dblog/v1/consumer.pb.h"

namespace dblog::publish {
namespace {

dblog::v1::Value Literal(const std::string& text) {
  dblog::v1::Value v;
  v.set_literal(text);
  return v;
}

// numeric(p,s)'s typmod
std::int32_t NumericTypmod(int precision, int scale) { return ((precision << 16) | scale) + 4; }

// A table of the type matrix: (oid, typmod, NOT NULL, a value), id int4 the key.
struct TypedColumn {
  const char* name;
  std::uint32_t oid;
  std::int32_t typmod;
  bool not_null;
  dblog::v1::Value value;
};

std::vector<TypedColumn> TypeMatrix() {
  auto v = [](auto set) {
    dblog::v1::Value x;
    set(x);
    return x;
  };
  auto lit = [](const char* text) { return Literal(text); };
  return {
      {"id", 23, -1, true, v([](auto& x) { x.set_int_value(7); })},
      {"b", 16, -1, false, v([](auto& x) { x.set_bool_value(true); })},
      {"i2", 21, -1, false, v([](auto& x) { x.set_int_value(-32768); })},
      {"i8", 20, -1, false, v([](auto& x) { x.set_int_value(-9223372036854775807LL - 1); })},
      {"f4", 700, -1, false, v([](auto& x) { x.set_float4_value(1.5f); })},
      {"f8", 701, -1, false, v([](auto& x) { x.set_float8_value(std::numeric_limits<double>::quiet_NaN()); })},
      {"t", 25, -1, true, v([](auto& x) { x.set_text_value("naïve \"q\""); })},
      {"vc", 1043, 14, false, v([](auto& x) { x.set_text_value("x"); })},
      {"by", 17, -1, false, v([](auto& x) { x.set_bytes_value(std::string("\x00\xff", 2)); })},
      {"u", 2950, -1, false, v([](auto& x) { x.set_uuid_value(std::string(16, '\x11')); })},
      {"n", 1700, NumericTypmod(10, 2), false, lit("-12.50")},
      {"nv", 1700, -1, false, lit("3.14159")},
      {"m", 790, -1, false, lit("$12.34")},
      {"d", 1082, -1, false, v([](auto& x) { x.set_date_value(19000); })},
      {"ts3", 1114, 3, false, v([](auto& x) { x.set_timestamp_value(1704164645123000); })},
      {"ts", 1114, -1, false, v([](auto& x) { x.set_timestamp_value(1704164645123456); })},
      {"tstz", 1184, -1, false, v([](auto& x) { x.set_timestamptz_value(1704164645123456); })},
      {"ti", 1083, -1, false, lit("10:20:30.123456")},
      {"ti3", 1083, 3, false, lit("10:20:30.123")},
      {"ttz", 1266, -1, false, lit("10:20:30+02")},
      {"iv", 1186, -1, false, lit("1 day 02:03:04")},
      {"js", 3802, -1, false, lit(R"({"a": [1, 2]})")},
      {"ai", 1007, -1, false, lit("{1,2,NULL}")},
      {"at", 1009, -1, false, lit(R"({a,"b c"})")},
      {"an", 1231, -1, false, lit("{1.5,NaN}")},
      {"nul", 25, -1, false, v([](auto& x) { x.set_null_value(true); })},
  };
}

dblog::v1::StreamEvent MatrixRelation() {
  dblog::v1::StreamEvent e;
  auto* r = e.mutable_relation();
  r->set_oid(16500);
  r->set_schema("public");
  r->set_name("matrix");
  int attnum = 0;
  for (const auto& c : TypeMatrix()) {
    auto* col = r->add_columns();
    col->set_name(c.name);
    col->set_attnum(++attnum);
    col->set_type_oid(c.oid);
    col->set_typmod(c.typmod);
    col->set_not_null(c.not_null);
  }
  r->add_key_columns(0);
  return e;
}

dblog::v1::StreamEvent MatrixChange(dblog::v1::Change::Kind kind, std::int64_t id, std::uint32_t seq) {
  dblog::v1::StreamEvent e;
  auto* c = e.mutable_change();
  c->set_kind(kind);
  c->set_relation_oid(16500);
  c->set_commit_lsn(24023119);
  c->set_seq(seq);
  c->set_lsn(24023128 + seq);
  c->set_xid(555);
  c->set_commit_time(1559033904863000);
  dblog::v1::Row row, key;
  for (const auto& col : TypeMatrix()) *row.add_values() = col.value;
  row.mutable_values(0)->set_int_value(id);
  key.add_values()->set_int_value(id);
  if (kind == dblog::v1::Change::DELETE) {
    *c->mutable_old_key() = key;
  } else {
    *c->mutable_new_row() = row;
    if (kind == dblog::v1::Change::UPDATE && id != 7) {  // a key change from 7
      c->mutable_old_key()->add_values()->set_int_value(7);
    }
  }
  return e;
}

}  // namespace
}  // namespace dblog::publish
