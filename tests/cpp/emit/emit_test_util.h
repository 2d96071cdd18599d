// tests/cpp/emit/emit_test_util.h: builders for plugin events (as the dblog output plugin writes
// them) and a reader for the emitter's output that keeps the raw bytes of what it parses.
#pragma once

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "dblog/v1/change.pb.h"
#include "dblog/v1/consumer.pb.h"
#include "emit/emitter.h"
#include "proto_values.h"

namespace dblog::emit::test {

using dblog::v1::Change;
using dblog::v1::Event;
using dblog::v1::Relation;
using dblog::v1::Row;
using dblog::v1::StreamEvent;
using dblog::v1::Value;

// ---- Values and rows (proto_values.h) ----------------------------------------------------

using dblog::test::Int;
using dblog::test::MakeRow;
using dblog::test::Null;
using dblog::test::Text;
using dblog::test::Unchanged;

// ---- Plugin events -----------------------------------------------------------------------

// The plugin's coordinates for a transaction committed at `commit_lsn`.
inline std::uint64_t XidOf(std::uint64_t commit_lsn) { return 1000 + commit_lsn % 100000; }
inline std::uint64_t EndOf(std::uint64_t commit_lsn) { return commit_lsn + 0x20; }
inline std::int64_t TimeOf(std::uint64_t commit_lsn) {
  return 1700000000000000 + static_cast<std::int64_t>(commit_lsn);
}

inline Event BeginEv(std::uint64_t commit_lsn) {
  Event e;
  auto* b = e.mutable_begin();
  b->set_xid(XidOf(commit_lsn));
  b->set_commit_lsn(commit_lsn);
  b->set_commit_time(TimeOf(commit_lsn));
  b->set_end_lsn(EndOf(commit_lsn));
  return e;
}

inline Event CommitEv(std::uint64_t commit_lsn, std::uint32_t seq) {
  Event e;
  auto* c = e.mutable_commit();
  c->set_commit_lsn(commit_lsn);
  c->set_end_lsn(EndOf(commit_lsn));
  c->set_commit_time(TimeOf(commit_lsn));
  c->set_seq(seq);
  c->set_xid(XidOf(commit_lsn));
  return e;
}

// A table whose columns are c0..c<ncolumns-1> (int8 unless listed in text_columns), keyed by
// `key_columns` in key order.
inline Relation MakeRelation(std::uint32_t oid, const std::string& name, int ncolumns,
                             std::vector<std::uint32_t> key_columns,
                             std::vector<int> text_columns = {}) {
  Relation rel;
  rel.set_oid(oid);
  rel.set_schema("public");
  rel.set_name(name);
  for (int i = 0; i < ncolumns; ++i) {
    auto* c = rel.add_columns();
    c->set_name("c" + std::to_string(i));
    const bool text = std::find(text_columns.begin(), text_columns.end(), i) != text_columns.end();
    c->set_type_oid(text ? 25 : 20);
    c->set_type_name(text ? "text" : "bigint");
    c->set_typmod(-1);
    c->set_attnum(static_cast<std::uint32_t>(i + 1));
    for (std::uint32_t k : key_columns) {
      if (k == static_cast<std::uint32_t>(i)) c->set_not_null(true);
    }
  }
  for (std::uint32_t k : key_columns) rel.add_key_columns(k);
  rel.set_replica_identity("d");
  return rel;
}

inline Event RelationEv(const Relation& rel) {
  Event e;
  *e.mutable_relation() = rel;
  return e;
}

inline Event ChangeEv(Change::Kind kind, std::uint32_t oid, std::uint64_t commit_lsn,
                      std::uint32_t seq, const Row* new_row, const Row* old_key,
                      const Row* old_row = nullptr) {
  Event e;
  auto* c = e.mutable_change();
  c->set_kind(kind);
  c->set_relation_oid(oid);
  c->set_commit_lsn(commit_lsn);
  c->set_seq(seq);
  c->set_lsn(commit_lsn - 0x100 + seq);
  c->set_xid(XidOf(commit_lsn));
  c->set_commit_time(TimeOf(commit_lsn));
  if (new_row != nullptr) *c->mutable_new_row() = *new_row;
  if (old_key != nullptr) *c->mutable_old_key() = *old_key;
  if (old_row != nullptr) *c->mutable_old_row() = *old_row;
  return e;
}
inline Event InsertEv(std::uint32_t oid, std::uint64_t commit_lsn, std::uint32_t seq,
                      const Row& row) {
  return ChangeEv(Change::INSERT, oid, commit_lsn, seq, &row, nullptr);
}
inline Event UpdateEv(std::uint32_t oid, std::uint64_t commit_lsn, std::uint32_t seq,
                      const Row& old_key, const Row& row, const Row* old_row = nullptr) {
  return ChangeEv(Change::UPDATE, oid, commit_lsn, seq, &row, &old_key, old_row);
}
inline Event DeleteEv(std::uint32_t oid, std::uint64_t commit_lsn, std::uint32_t seq,
                      const Row& old_key) {
  return ChangeEv(Change::DELETE, oid, commit_lsn, seq, nullptr, &old_key);
}

inline Event TruncateEv(std::vector<std::uint32_t> oids, std::uint64_t commit_lsn,
                        std::uint32_t seq) {
  Event e;
  auto* t = e.mutable_truncate();
  for (auto oid : oids) t->add_relation_oids(oid);
  t->set_commit_lsn(commit_lsn);
  t->set_seq(seq);
  t->set_lsn(commit_lsn - 0x100 + seq);
  return e;
}

inline Event MessageEv(bool transactional, std::uint64_t lsn, std::uint64_t commit_lsn = 0,
                       std::uint32_t seq = 0, const std::string& prefix = "app") {
  Event e;
  auto* m = e.mutable_message();
  m->set_transactional(transactional);
  m->set_prefix(prefix);
  m->set_content("hello");
  m->set_lsn(lsn);
  if (transactional) {
    m->set_commit_lsn(commit_lsn);
    m->set_seq(seq);
    m->set_xid(XidOf(commit_lsn));
  }
  return e;
}

// ---- Reading the output -----------------------------------------------------------------

struct Emitted {
  StreamEvent event;
  std::string raw;                         // the StreamEvent's bytes as written
  std::optional<std::string> raw_new_row;  // a Change's new_row bytes as written
};

namespace detail {
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// (field number, payload) of every length-delimited field; throws on anything else.
inline std::vector<std::pair<int, std::string>> LenFields(const std::string& msg) {
  std::vector<std::pair<int, std::string>> out;
  CodedInputStream in(reinterpret_cast<const std::uint8_t*>(msg.data()),
                      static_cast<int>(msg.size()));
  while (std::uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      std::uint32_t len = 0;
      std::string payload;
      if (!in.ReadVarint32(&len) || !in.ReadString(&payload, static_cast<int>(len)))
        throw std::runtime_error("truncated field");
      out.emplace_back(WireFormatLite::GetTagFieldNumber(tag), std::move(payload));
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      throw std::runtime_error("malformed field");
    }
  }
  if (!in.ConsumedEntireMessage()) throw std::runtime_error("malformed message");
  return out;
}
}  // namespace detail

// Splits EventBatch bytes into its StreamEvents, keeping the raw bytes. Fails the test (and
// returns what it has) when the bytes are not a well-formed EventBatch.
inline std::vector<Emitted> ReadStream(const std::string& bytes) {
  std::vector<Emitted> out;
  dblog::v1::EventBatch batch;
  EXPECT_TRUE(batch.ParseFromString(bytes)) << "output is not an EventBatch";
  for (auto& [field, payload] : detail::LenFields(bytes)) {
    EXPECT_EQ(field, 1) << "EventBatch holds only field 1";
    Emitted e;
    EXPECT_TRUE(e.event.ParseFromString(payload));
    e.raw = payload;
    if (e.event.has_change()) {
      for (auto& [f, member] : detail::LenFields(payload)) {
        if (f != StreamEvent::kChange) continue;
        for (auto& [cf, cpayload] : detail::LenFields(member)) {
          if (cf == 8) e.raw_new_row = cpayload;
        }
      }
    }
    out.push_back(std::move(e));
  }
  EXPECT_EQ(out.size(), static_cast<std::size_t>(batch.events_size()));
  return out;
}

// The position an event carries, if any (Relation has none).
inline std::optional<Position> PositionOf(const StreamEvent& e) {
  switch (e.event_case()) {
    case StreamEvent::kBegin:
      return Position{e.begin().commit_lsn(), 0};
    case StreamEvent::kChange:
      return Position{e.change().commit_lsn(), e.change().seq()};
    case StreamEvent::kTruncate:
      return Position{e.truncate().commit_lsn(), e.truncate().seq()};
    case StreamEvent::kMessage:
      return Position{e.message().commit_lsn(), e.message().seq()};
    case StreamEvent::kCommit:
      return Position{e.commit().commit_lsn(), e.commit().seq()};
    case StreamEvent::kBootstrapBegin:
      return Position{e.bootstrap_begin().consistent_point() - 1, 0};
    case StreamEvent::kBootstrapEnd:
      return Position{e.bootstrap_end().commit_lsn(), e.bootstrap_end().seq()};
    case StreamEvent::kChunkBegin:
      return Position{e.chunk_begin().commit_lsn(), e.chunk_begin().seq()};
    case StreamEvent::kChunkEnd:
      return Position{e.chunk_end().commit_lsn(), e.chunk_end().seq()};
    default:
      return std::nullopt;
  }
}

// A compact rendering for readable assertions: "B 100:0", "R 16384", "I 100:1", "U", "D",
// "T", "M", "C", "BB", "BE", "CB", "CE", and READ as "READ".
inline std::string Describe(const StreamEvent& e) {
  std::string kind;
  switch (e.event_case()) {
    case StreamEvent::kBegin:
      kind = "B";
      break;
    case StreamEvent::kRelation:
      return "R " + std::to_string(e.relation().oid());
    case StreamEvent::kChange:
      kind = e.change().kind() == Change::INSERT   ? "I"
             : e.change().kind() == Change::UPDATE ? "U"
             : e.change().kind() == Change::DELETE ? "D"
             : e.change().kind() == Change::READ   ? "READ"
                                                   : "?";
      break;
    case StreamEvent::kTruncate:
      kind = "T";
      break;
    case StreamEvent::kMessage:
      kind = "M";
      break;
    case StreamEvent::kCommit:
      kind = "C";
      break;
    case StreamEvent::kBootstrapBegin:
      kind = "BB";
      break;
    case StreamEvent::kBootstrapEnd:
      kind = "BE";
      break;
    case StreamEvent::kChunkBegin:
      kind = "CB";
      break;
    case StreamEvent::kChunkEnd:
      kind = "CE";
      break;
    case StreamEvent::kValuePiece:
      return "P " + e.value_piece().data();
    default:
      return "?";
  }
  const Position p = *PositionOf(e);
  return kind + " " + std::to_string(p.commit_lsn) + ":" + std::to_string(p.seq);
}

inline std::vector<std::string> Describe(const std::vector<Emitted>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(Describe(e.event));
  return out;
}

}  // namespace dblog::emit::test
