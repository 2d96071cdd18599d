// tests/cpp/apply/stream_builder.h: builds dblog.v1 StreamEvents with increasing positions, for
// feeding the Applier directly (no dblogd). Owns: test data construction only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "dblog/v1/consumer.pb.h"
#include "proto_values.h"

namespace dblog::apply::testing {

// Values and rows: proto_values.h.
using dblog::test::Int;
using dblog::test::Lit;
using dblog::test::MakeRow;
using dblog::test::Null;
using dblog::test::Text;
using dblog::test::Unchanged;

struct ColumnSpec {
  std::string name;
  std::string type_name;
  std::uint32_t type_oid;
  bool not_null = false;
};

inline dblog::v1::Relation MakeRelation(std::uint32_t oid, const std::string& schema,
                                        const std::string& name, std::vector<ColumnSpec> columns,
                                        std::vector<std::uint32_t> key) {
  dblog::v1::Relation relation;
  relation.set_oid(oid);
  relation.set_schema(schema);
  relation.set_name(name);
  std::uint32_t attnum = 1;
  for (const auto& c : columns) {
    auto& column = *relation.add_columns();
    column.set_name(c.name);
    column.set_type_name(c.type_name);
    column.set_type_oid(c.type_oid);
    column.set_typmod(-1);
    column.set_not_null(c.not_null);
    column.set_attnum(attnum++);
  }
  for (auto k : key) relation.add_key_columns(k);
  relation.set_replica_identity("d");
  return relation;
}

// Events in stream order with dblogd's positions: Begin (lsn, 0), changes (lsn, 1..), Commit.
class StreamBuilder {
 public:
  std::vector<dblog::v1::StreamEvent> events;

  void Relation(const dblog::v1::Relation& relation) { *Add().mutable_relation() = relation; }
  void Begin() {
    lsn_ += 0x100;
    seq_ = 0;
    auto& begin = *Add().mutable_begin();
    begin.set_commit_lsn(lsn_);
    begin.set_end_lsn(lsn_ + 0x30);
  }
  void Change(dblog::v1::Change::Kind kind, std::uint32_t oid, const dblog::v1::Row* row,
              const dblog::v1::Row* old_key) {
    auto& change = *Add().mutable_change();
    change.set_kind(kind);
    change.set_relation_oid(oid);
    change.set_commit_lsn(lsn_);
    change.set_seq(++seq_);
    if (row) *change.mutable_new_row() = *row;
    if (old_key) *change.mutable_old_key() = *old_key;
  }
  void Insert(std::uint32_t oid, const dblog::v1::Row& row) {
    Change(dblog::v1::Change::INSERT, oid, &row, nullptr);
  }
  void Read(std::uint32_t oid, const dblog::v1::Row& row) {
    Change(dblog::v1::Change::READ, oid, &row, nullptr);
  }
  void Update(std::uint32_t oid, const dblog::v1::Row& old_key, const dblog::v1::Row& row) {
    Change(dblog::v1::Change::UPDATE, oid, &row, &old_key);
  }
  // A repair chunk's fill: an UPDATE without old_key (the key and the filled columns).
  void Fill(std::uint32_t oid, const dblog::v1::Row& row) {
    Change(dblog::v1::Change::UPDATE, oid, &row, nullptr);
  }
  void Delete(std::uint32_t oid, const dblog::v1::Row& key) {
    Change(dblog::v1::Change::DELETE, oid, nullptr, &key);
  }
  void Truncate(std::vector<std::uint32_t> oids) {
    auto& t = *Add().mutable_truncate();
    for (auto oid : oids) t.add_relation_oids(oid);
    t.set_commit_lsn(lsn_);
    t.set_seq(++seq_);
  }
  void Message() {
    auto& m = *Add().mutable_message();
    m.set_transactional(true);
    m.set_prefix("app");
    m.set_commit_lsn(lsn_);
    m.set_seq(++seq_);
  }
  void Commit() {
    auto& commit = *Add().mutable_commit();
    commit.set_commit_lsn(lsn_);
    commit.set_end_lsn(lsn_ + 0x30);
    commit.set_seq(++seq_);
  }
  void ChunkBegin(std::uint32_t oid, bool is_range, const dblog::v1::Row* from, bool from_inclusive,
                  const dblog::v1::Row* to, bool to_inclusive, std::uint64_t request = 1,
                  std::vector<std::string> key_collations = {}) {
    auto& c = *Add().mutable_chunk_begin();
    for (auto& k : key_collations) c.add_key_collations(k);
    c.set_request_id(request);
    c.set_relation_oid(oid);
    c.set_commit_lsn(lsn_);
    c.set_seq(++seq_);
    c.set_is_range(is_range);
    if (from) *c.mutable_from_key() = *from;
    if (to) *c.mutable_to_key() = *to;
    c.set_from_inclusive(from_inclusive);
    c.set_to_inclusive(to_inclusive);
    c.set_chunk(1);
  }
  void ChunkEnd(std::uint32_t oid, std::vector<dblog::v1::Row> kept, std::uint64_t request = 1) {
    auto& c = *Add().mutable_chunk_end();
    c.set_request_id(request);
    c.set_relation_oid(oid);
    c.set_commit_lsn(lsn_);
    c.set_seq(++seq_);
    for (auto& k : kept) *c.add_kept_keys() = k;
    c.set_last(true);
  }
  // Bootstrap rows sit at (consistent_point - 1, 1..n).
  void BootstrapBegin(bool restarted) {
    lsn_ += 0x1000;
    seq_ = 0;
    auto& b = *Add().mutable_bootstrap_begin();
    b.set_consistent_point(lsn_ + 1);
    b.set_restarted(restarted);
  }
  void BootstrapEnd() {
    auto& b = *Add().mutable_bootstrap_end();
    b.set_consistent_point(lsn_ + 1);
    b.set_commit_lsn(lsn_);
    b.set_seq(++seq_);
  }
  void Heartbeat() {}

  dblog::v1::Position LastPosition() const {
    dblog::v1::Position p;
    p.set_commit_lsn(lsn_);
    p.set_seq(seq_);
    return p;
  }
  std::uint64_t lsn() const { return lsn_; }
  void set_lsn(std::uint64_t lsn) { lsn_ = lsn; }

 private:
  dblog::v1::StreamEvent& Add() { return events.emplace_back(); }
  std::uint64_t lsn_ = 0x1000000;
  std::uint32_t seq_ = 0;
};

}  // namespace dblog::apply::testing
