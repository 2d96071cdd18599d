// client/publish/layout.cc: see layout.h.
#include "client/publish/layout.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <stdexcept>

#include "client/position.h"
#include "client/publish/debezium.h"

namespace dblog::publish {

using dblog::v1::StreamEvent;

std::string PositionText(const dblog::v1::Position& position) {
  // client::FormatPosition's "%X/%X:%u", without snprintf: it is written for every event
  char buf[32];
  char* p = buf;
  const auto hex = [&p](std::uint32_t v) {
    static const char kHex[] = "0123456789ABCDEF";
    char digits[8];
    int n = 0;
    do {
      digits[n++] = kHex[v & 15];
      v >>= 4;
    } while (v);
    while (n) *p++ = digits[--n];
  };
  hex(static_cast<std::uint32_t>(position.commit_lsn() >> 32));
  *p++ = '/';
  hex(static_cast<std::uint32_t>(position.commit_lsn()));
  *p++ = ':';
  char digits[10];
  int n = 0;
  std::uint32_t seq = position.seq();
  do {
    digits[n++] = static_cast<char>('0' + seq % 10);
    seq /= 10;
  } while (seq);
  while (n) *p++ = digits[--n];
  return std::string(buf, p);
}

std::optional<dblog::v1::Position> ParsePositionText(std::string_view text) {
  // %X/%X:%u, hex without prefix, no sign, nothing else
  std::uint64_t hi = 0, lo = 0, seq = 0;
  std::size_t i = 0;
  const auto hex = [&](std::uint64_t& out, std::size_t max_digits) {
    std::size_t digits = 0;
    while (i < text.size()) {
      const char c = text[i];
      int v;
      if (c >= '0' && c <= '9') v = c - '0';
      else if (c >= 'A' && c <= 'F') v = c - 'A' + 10;
      else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
      else break;
      out = out * 16 + static_cast<std::uint64_t>(v);
      ++i;
      if (++digits > max_digits) return false;
    }
    return digits > 0;
  };
  if (!hex(hi, 8) || i >= text.size() || text[i++] != '/') return std::nullopt;
  if (!hex(lo, 8) || i >= text.size() || text[i++] != ':') return std::nullopt;
  std::size_t digits = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    seq = seq * 10 + static_cast<std::uint64_t>(text[i++] - '0');
    if (++digits > 10) return std::nullopt;
  }
  if (digits == 0 || i != text.size() || seq > UINT32_MAX) return std::nullopt;
  return client::MakePosition(hi << 32 | lo, static_cast<std::uint32_t>(seq));
}

std::string PartText(const LogMessage& message) {
  if (message.parts <= 1) return "";
  return std::to_string(message.part) + "/" + std::to_string(message.parts);
}

const char* EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kBegin: return "begin";
    case EventKind::kCommit: return "commit";
    case EventKind::kMessage: return "message";
    case EventKind::kRelation: return "relation";
    case EventKind::kChange: return "change";
    case EventKind::kTruncate: return "truncate";
    case EventKind::kChunkBegin: return "chunk_begin";
    case EventKind::kChunkEnd: return "chunk_end";
    case EventKind::kBootstrapBegin: return "bootstrap_begin";
    case EventKind::kBootstrapEnd: return "bootstrap_end";
    case EventKind::kTombstone: return "tombstone";
  }
  return "";
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> ParsePartText(std::string_view text) {
  unsigned part = 0, parts = 0;
  char tail = 0;
  const std::string s(text);
  if (std::sscanf(s.c_str(), "%u/%u%c", &part, &parts, &tail) != 2) return std::nullopt;
  if (part == 0 || part > parts) return std::nullopt;
  return std::make_pair(static_cast<std::uint32_t>(part), static_cast<std::uint32_t>(parts));
}

std::string TableHeaderText(std::string_view table) {
  std::string text;
  for (const char c : table) {
    if (c == '\r')
      text += "%0D";
    else if (c == '\n')
      text += "%0A";
    else if (c == '%')
      text += "%25";
    else
      text += c;
  }
  return text;
}

std::string EscapedToken(std::string_view name, char escape) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(name.size());
  for (const unsigned char c : name) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        (c == '-' && escape != '-')) {
      out += static_cast<char>(c);
    } else {
      out += escape;
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (out.empty()) out = escape;  // never an empty token (PostgreSQL names are never empty)
  return out;
}

Layout::Layout(std::string prefix, Format format) : prefix_(std::move(prefix)), format_(format) {}

const Layout::TableNames* Layout::Names(std::uint32_t oid) {
  const dblog::v1::Relation* rel = relations_.Find(oid);
  if (!rel) return nullptr;
  // the names of the table, built once per definition (not per event)
  TableNames& names = table_names_[oid];
  if (names.table.empty() || names.schema != rel->schema() || names.name != rel->name()) {
    names.schema = rel->schema();
    names.name = rel->name();
    names.table = rel->schema() + "." + rel->name();
  }
  return &names;
}

namespace {

EventKind KindOf(const StreamEvent& event) {
  switch (event.event_case()) {
    case StreamEvent::kBegin: return EventKind::kBegin;
    case StreamEvent::kRelation: return EventKind::kRelation;
    case StreamEvent::kTruncate: return EventKind::kTruncate;
    case StreamEvent::kMessage: return EventKind::kMessage;
    case StreamEvent::kCommit: return EventKind::kCommit;
    case StreamEvent::kBootstrapBegin: return EventKind::kBootstrapBegin;
    case StreamEvent::kBootstrapEnd: return EventKind::kBootstrapEnd;
    case StreamEvent::kChunkBegin: return EventKind::kChunkBegin;
    case StreamEvent::kChunkEnd: return EventKind::kChunkEnd;
    default: return EventKind::kChange;
  }
}

const char* EventName(const StreamEvent& event) { return EventKindName(KindOf(event)); }

std::string MsgId(const std::optional<dblog::v1::Position>& position, std::uint32_t part,
                  std::uint32_t parts) {
  std::string id = PositionText(*position);
  if (parts > 1) id += "#" + std::to_string(part);
  return id;
}

// part, parts and msg_id of the messages of one event, in order (a Relation has no msg_id).
void NumberParts(const StreamEvent& event, std::vector<LogMessage>& out) {
  const auto parts = static_cast<std::uint32_t>(out.size());
  for (std::uint32_t i = 0; i < parts; ++i) {
    LogMessage& m = out[i];
    m.part = i + 1;
    m.parts = parts;
    if (m.kind == EventKind::kRelation) continue;
    if (m.position) {
      m.msg_id = MsgId(m.position, m.part, parts);
    } else {  // BootstrapBegin: one per bootstrap attempt, told apart by its consistent point
      m.msg_id =
          "bootstrap_begin:" + client::FormatLsn(event.bootstrap_begin().consistent_point()) + "#" +
          std::to_string(m.part);
    }
  }
}

// An UPDATE's key change as the DELETE of its old key, at the UPDATE's position.
dblog::v1::Change OldKeyDelete(const dblog::v1::Change& change) {
  dblog::v1::Change gone;
  gone.set_kind(dblog::v1::Change::DELETE);
  gone.set_relation_oid(change.relation_oid());
  gone.set_commit_lsn(change.commit_lsn());
  gone.set_seq(change.seq());
  gone.set_lsn(change.lsn());
  gone.set_xid(change.xid());
  gone.set_commit_time(change.commit_time());
  *gone.mutable_old_key() = change.old_key();
  if (change.has_old_row()) *gone.mutable_old_row() = change.old_row();
  return gone;
}

}  // namespace

LogMessage Layout::TableMessageByName(const std::string& schema, const std::string& name,
                                      const StreamEvent& event) const {
  LogMessage m;
  m.table = schema + "." + name;
  m.schema = schema;
  m.name = name;
  m.kind = KindOf(event);
  m.position = client::PositionOf(event);
  event.SerializeToString(&m.payload);
  return m;
}

const dblog::v1::Relation& Layout::KnownRelation(std::uint32_t oid,
                                                 const StreamEvent& event) const {
  const dblog::v1::Relation* rel = relations_.Find(oid);
  if (!rel) {
    throw std::runtime_error(std::string("a ") + EventName(event) + " of relation " +
                             std::to_string(oid) + " came before its Relation");
  }
  return *rel;
}

LogMessage Layout::TableMessage(std::uint32_t oid, const StreamEvent& event) {
  KnownRelation(oid, event);
  const TableNames& names = *Names(oid);
  LogMessage m;
  m.table = names.table;
  m.schema = names.schema;
  m.name = names.name;
  m.kind = KindOf(event);
  m.position = client::PositionOf(event);
  event.SerializeToString(&m.payload);
  m.relation_oid = oid;
  return m;
}

LogMessage Layout::ControlMessage(const StreamEvent& event) const {
  LogMessage m;
  m.kind = KindOf(event);
  m.position = client::PositionOf(event);
  event.SerializeToString(&m.payload);
  return m;
}

LogMessage Layout::DebeziumMessage(std::uint32_t oid, const StreamEvent& event, std::string payload,
                                   std::string key) const {
  const dblog::v1::Relation* rel = relations_.Find(oid);
  LogMessage m;
  m.table = rel->schema() + "." + rel->name();
  m.schema = rel->schema();
  m.name = rel->name();
  m.relation_oid = oid;
  m.position = client::PositionOf(event);
  m.kind = KindOf(event);
  m.payload = std::move(payload);
  m.key = std::move(key);
  if (debezium_.schemas_enable || format_ == Format::kDebeziumAvro) {
    // schemas.enable: each as {"schema","payload"} (a tombstone's value stays empty: null)
    if (!m.payload.empty()) m.payload = WithSchema(DebeziumValueSchema(*rel, prefix_), m.payload);
    if (!m.key.empty()) m.key = WithSchema(DebeziumKeySchema(*rel, prefix_), m.key);
  }
  return m;
}

void Layout::MapDebeziumChange(const StreamEvent& event, DebeziumSource source,
                               std::vector<LogMessage>& out) const {
  const dblog::v1::Change& change = event.change();
  const std::uint32_t oid = change.relation_oid();
  const dblog::v1::Relation& rel = KnownRelation(oid, event);
  // A partial fill (an UPDATE inside a repair chunk: docs/protocol.md, "A chunk's fills"):
  // its unknown columns are marked unchanged whatever their type, and Debezium has no partial
  // rows: the placeholder in an int field would break a sink that enforces the schema. Left
  // out (docs/publish.md says what a Debezium reader misses); a whole fill is a READ row.
  if (in_chunk_ && change.kind() == dblog::v1::Change::UPDATE) return;
  if (change.commit_time()) source.commit_time = change.commit_time();
  if (change.xid()) source.xid = change.xid();
  std::string key = DebeziumKey(rel, KeyOfChange(rel, change));
  const auto tombstone = [&](const std::string& of_key) {
    if (!debezium_.tombstones_on_delete) return;
    LogMessage m = DebeziumMessage(oid, event, "", of_key);
    m.kind = EventKind::kTombstone;
    out.push_back(std::move(m));
  };
  if (change.kind() == dblog::v1::Change::UPDATE && change.has_old_key() &&
      change.old_key().SerializeAsString() != KeyOfChange(rel, change).SerializeAsString()) {
    // a key change, as Debezium writes it (PostgresChangeRecordEmitter.emitUpdateRecord,
    // RelationalChangeRecordEmitter): a delete of the old key and its tombstone, then a create
    // of the new key (a reader keyed by the key, or a compacted topic, must not keep the old
    // one); each op unless skipped.operations names it
    const dblog::v1::Change gone = OldKeyDelete(change);
    const std::string old_key = DebeziumKey(rel, change.old_key());
    if (!debezium_.skip_delete) {
      out.push_back(DebeziumMessage(oid, event, DebeziumChange(rel, gone, source), old_key));
      tombstone(old_key);
    }
    if (!debezium_.skip_create) {
      dblog::v1::Change created = change;
      created.set_kind(dblog::v1::Change::INSERT);
      created.clear_old_key();
      created.clear_old_row();
      out.push_back(DebeziumMessage(oid, event, DebeziumChange(rel, created, source), key));
    }
    return;
  }
  const auto kind = change.kind();
  if ((kind == dblog::v1::Change::INSERT && debezium_.skip_create) ||
      (kind == dblog::v1::Change::UPDATE && debezium_.skip_update) ||
      (kind == dblog::v1::Change::DELETE && debezium_.skip_delete))
    return;
  out.push_back(DebeziumMessage(oid, event, DebeziumChange(rel, change, source), key));
  if (kind == dblog::v1::Change::DELETE) tombstone(key);
}

std::vector<LogMessage> Layout::MapDebezium(const StreamEvent& event) {
  std::vector<LogMessage> out;
  DebeziumSource source;
  source.name = prefix_;
  source.db = debezium_.database;
  source.snapshot = in_bootstrap_ ? "true" : in_chunk_ ? "incremental" : "false";
  source.xid = xid_;
  source.commit_time = commit_time_;
  source.last_commit_lsn = last_commit_end_;
  source.snapshot_lsn = consistent_point_;
  source.now_nanos = debezium_.now_nanos
                         ? debezium_.now_nanos()
                         : std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  switch (event.event_case()) {
    case StreamEvent::kRelation:
      relations_.Put(event.relation());
      break;
    case StreamEvent::kBegin:
      xid_ = event.begin().xid();
      commit_time_ = event.begin().commit_time();
      break;
    case StreamEvent::kCommit:
      xid_ = 0;
      commit_time_ = 0;
      // Debezium's lastCommitLsn: the position of the COMMIT message, where PostgreSQL's
      // walsender puts the end of the commit record (PostgresStreamingChangeEventSource
      // .commitMessage, PostgresOffsetContext.updateCommitPosition)
      last_commit_end_ = event.commit().end_lsn();
      break;
    case StreamEvent::kBootstrapBegin:
      in_bootstrap_ = true;
      consistent_point_ = event.bootstrap_begin().consistent_point();
      break;
    case StreamEvent::kBootstrapEnd:
      in_bootstrap_ = false;
      break;
    case StreamEvent::kChunkBegin:
      in_chunk_ = true;
      break;
    case StreamEvent::kChunkEnd:
      in_chunk_ = false;
      break;
    case StreamEvent::kMessage:
      if (!event.message().transactional())
        throw std::runtime_error("a non-transactional message has no position to publish at");
      break;
    case StreamEvent::kChange:
      MapDebeziumChange(event, source, out);
      break;
    case StreamEvent::kTruncate:
      // skipped.operations=t, Debezium's default, skips them (CommonConnectorConfig
      // .SKIPPED_OPERATIONS, EventDispatcher.dispatchDataChangeEvent)
      for (const std::uint32_t oid : event.truncate().relation_oids()) {
        const dblog::v1::Relation& rel = KnownRelation(oid, event);
        if (debezium_.skip_truncate) continue;
        out.push_back(DebeziumMessage(oid, event, DebeziumTruncate(rel, event.truncate(), source), ""));
      }
      break;
    default:
      throw std::runtime_error("an event with nothing to publish");
  }
  return out;
}

void Layout::MapChange(const StreamEvent& event, std::vector<LogMessage>& out) {
  out.push_back(TableMessage(event.change().relation_oid(), event));
  if (!row_keys_) return;
  const dblog::v1::Change& change = event.change();
  const dblog::v1::Relation& rel = *relations_.Find(change.relation_oid());
  out.back().row_key = KeyOfChange(rel, change).SerializeAsString();
  if (change.kind() == dblog::v1::Change::UPDATE && change.has_old_key() &&
      change.old_key().SerializeAsString() != out.back().row_key) {
    // the key moved: the old key's delete, placed by the old key (set_row_keys)
    StreamEvent gone;
    *gone.mutable_change() = OldKeyDelete(change);
    LogMessage m = TableMessage(change.relation_oid(), gone);
    m.row_key = change.old_key().SerializeAsString();
    out.push_back(std::move(m));
  }
}

void Layout::FanOutTruncate(const StreamEvent& event, std::vector<LogMessage>& out) {
  out.push_back(ControlMessage(event));
  for (const std::uint32_t oid : event.truncate().relation_oids()) {
    StreamEvent one = event;
    one.mutable_truncate()->clear_relation_oids();
    one.mutable_truncate()->add_relation_oids(oid);
    out.push_back(TableMessage(oid, one));
  }
}

void Layout::FanOutBootstrap(const StreamEvent& event, std::vector<LogMessage>& out) const {
  out.push_back(ControlMessage(event));
  const auto& tables = event.has_bootstrap_begin() ? event.bootstrap_begin().tables()
                                                   : event.bootstrap_end().tables();
  for (const auto& table : tables) {
    StreamEvent one = event;
    auto* list = one.has_bootstrap_begin() ? one.mutable_bootstrap_begin()->mutable_tables()
                                           : one.mutable_bootstrap_end()->mutable_tables();
    list->Clear();
    *list->Add() = table;
    LogMessage m = TableMessageByName(table.schema(), table.name(), one);
    m.relation_oid = table.relation_oid();
    out.push_back(std::move(m));
  }
}

std::vector<LogMessage> Layout::MapDblog(const StreamEvent& event) {
  std::vector<LogMessage> out;
  switch (event.event_case()) {
    case StreamEvent::kBegin:
    case StreamEvent::kCommit:
      out.push_back(ControlMessage(event));
      break;
    case StreamEvent::kMessage:
      if (!event.message().transactional())
        throw std::runtime_error("a non-transactional message has no position to publish at");
      out.push_back(ControlMessage(event));
      break;
    case StreamEvent::kRelation: {
      relations_.Put(event.relation());
      out.push_back(TableMessage(event.relation().oid(), event));
      break;
    }
    case StreamEvent::kChange:
      MapChange(event, out);
      break;
    case StreamEvent::kChunkBegin:
      out.push_back(TableMessage(event.chunk_begin().relation_oid(), event));
      break;
    case StreamEvent::kChunkEnd:
      out.push_back(TableMessage(event.chunk_end().relation_oid(), event));
      break;
    case StreamEvent::kTruncate:
      FanOutTruncate(event, out);
      break;
    case StreamEvent::kBootstrapBegin:
    case StreamEvent::kBootstrapEnd:
      FanOutBootstrap(event, out);
      break;
    default:
      throw std::runtime_error("an event with nothing to publish");
  }
  return out;
}

std::vector<LogMessage> Layout::Map(const StreamEvent& event) {
  std::vector<LogMessage> out =
      format_ == Format::kDblog ? MapDblog(event) : MapDebezium(event);
  NumberParts(event, out);
  return out;
}

std::optional<Layout::Target> Layout::SingleTarget(const StreamEvent& event) {
  if (format_ != Format::kDblog) return std::nullopt;
  std::uint32_t oid = 0;
  switch (event.event_case()) {
    case StreamEvent::kBegin:
    case StreamEvent::kCommit:
      return Target{0, &no_table_, &no_table_, &no_table_, KindOf(event)};
    case StreamEvent::kMessage:
      if (!event.message().transactional()) return std::nullopt;  // (Map refuses it)
      return Target{0, &no_table_, &no_table_, &no_table_, KindOf(event)};
    case StreamEvent::kChange:
      oid = event.change().relation_oid();
      break;
    case StreamEvent::kChunkBegin:
      oid = event.chunk_begin().relation_oid();
      break;
    case StreamEvent::kChunkEnd:
      oid = event.chunk_end().relation_oid();
      break;
    default:
      return std::nullopt;
  }
  const TableNames* names = Names(oid);
  if (!names) return std::nullopt;  // (Map says what is wrong)
  return Target{oid, &names->schema, &names->name, &names->table, KindOf(event)};
}

}  // namespace dblog::publish
