// tests/cpp/client/test_events.h: builders for dblog.v1 stream events and values, shared by the
// client's unit tests. Owns: test data construction only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "dblog/v1/consumer.pb.h"
#include "proto_values.h"

namespace dblog::client::testing {

// Values and rows: proto_values.h.
using dblog::test::Int;
using dblog::test::MakeRow;
using dblog::test::Null;
using dblog::test::Text;
using dblog::test::Unchanged;

// A Relation with columns (name, type_name) and key positions.
inline dblog::v1::StreamEvent RelationEvent(
    std::uint32_t oid, const std::string& schema, const std::string& name,
    std::vector<std::pair<std::string, std::string>> columns, std::vector<std::uint32_t> key) {
  dblog::v1::StreamEvent event;
  auto& relation = *event.mutable_relation();
  relation.set_oid(oid);
  relation.set_schema(schema);
  relation.set_name(name);
  std::uint32_t attnum = 1;
  for (const auto& [column_name, type_name] : columns) {
    auto& column = *relation.add_columns();
    column.set_name(column_name);
    column.set_type_name(type_name);
    column.set_type_oid(type_name == "integer" ? 23 : 25);
    column.set_typmod(-1);
    column.set_attnum(attnum++);
  }
  for (const auto k : key) {
    relation.add_key_columns(k);
    relation.mutable_columns(static_cast<int>(k))->set_not_null(true);
  }
  relation.set_replica_identity("d");
  return event;
}

inline dblog::v1::StreamEvent BeginEvent(std::uint64_t commit_lsn, std::uint64_t xid,
                                         std::int64_t commit_time, std::uint64_t end_lsn) {
  dblog::v1::StreamEvent event;
  auto& begin = *event.mutable_begin();
  begin.set_commit_lsn(commit_lsn);
  begin.set_xid(xid);
  begin.set_commit_time(commit_time);
  begin.set_end_lsn(end_lsn);
  return event;
}

inline dblog::v1::StreamEvent CommitEvent(std::uint64_t commit_lsn, std::uint32_t seq,
                                          std::uint64_t xid, std::int64_t commit_time,
                                          std::uint64_t end_lsn) {
  dblog::v1::StreamEvent event;
  auto& commit = *event.mutable_commit();
  commit.set_commit_lsn(commit_lsn);
  commit.set_seq(seq);
  commit.set_xid(xid);
  commit.set_commit_time(commit_time);
  commit.set_end_lsn(end_lsn);
  return event;
}

inline dblog::v1::StreamEvent ChangeEvent(dblog::v1::Change::Kind kind, std::uint32_t oid,
                                          std::uint64_t commit_lsn, std::uint32_t seq,
                                          std::uint64_t xid, std::int64_t commit_time) {
  dblog::v1::StreamEvent event;
  auto& change = *event.mutable_change();
  change.set_kind(kind);
  change.set_relation_oid(oid);
  change.set_commit_lsn(commit_lsn);
  change.set_seq(seq);
  change.set_lsn(commit_lsn - 0x100 + seq);
  change.set_xid(xid);
  change.set_commit_time(commit_time);
  return event;
}

inline dblog::v1::ServerMessage WelcomeMessage(const std::string& slot = "dblog_test") {
  dblog::v1::ServerMessage message;
  auto& welcome = *message.mutable_welcome();
  welcome.set_protocol_version(1);
  welcome.set_slot(slot);
  welcome.set_server_name("dblogd/test");
  return message;
}

inline dblog::v1::ServerMessage ErrorMessage(dblog::v1::Error::Code code, const std::string& text) {
  dblog::v1::ServerMessage message;
  message.mutable_error()->set_code(code);
  message.mutable_error()->set_message(text);
  return message;
}

inline dblog::v1::ServerMessage BatchMessage(std::initializer_list<dblog::v1::StreamEvent> events) {
  dblog::v1::ServerMessage message;
  message.mutable_events();  // set even when empty: an empty batch is still an EventBatch
  for (const auto& e : events) *message.mutable_events()->add_events() = e;
  return message;
}

inline dblog::v1::ServerMessage HeartbeatMessage(std::uint64_t commit_lsn, std::uint32_t seq) {
  dblog::v1::ServerMessage message;
  auto& heartbeat = *message.mutable_heartbeat();
  heartbeat.mutable_position()->set_commit_lsn(commit_lsn);
  heartbeat.mutable_position()->set_seq(seq);
  heartbeat.set_server_time(1796013963044138);
  heartbeat.set_source_lsn(commit_lsn + 0x1000);
  return message;
}

}  // namespace dblog::client::testing
