// tests/fuzz/make_seeds.cc: writes the seed inputs of every harness: valid frames, messages and
// COPY streams of each kind a harness reads, so that fuzzing starts from the real formats.
//   fuzz_seeds DIR   ->   DIR/<harness>/seed-<name>
// The output is checked in as tests/fuzz/corpus/; run it again when a format changes.
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "dblog/v1/change.pb.h"
#include "dblog/v1/consumer.pb.h"
#include "wire/frame.h"

namespace {

std::string dir;

void Write(const std::string& harness, const std::string& name, const std::string& bytes) {
  const std::string d = dir + "/" + harness;
  mkdir(d.c_str(), 0755);
  const std::string path = d + "/seed-" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

std::string Frame(const google::protobuf::MessageLite& m) {
  std::string out;
  dblog::wire::AppendFrame(out, m);
  return out;
}

dblog::v1::ClientMessage Hello(const std::string& consumer, const std::string& token) {
  dblog::v1::ClientMessage m;
  auto* h = m.mutable_hello();
  h->set_protocol_version(1);
  h->set_consumer(consumer);
  h->set_token(token);
  h->set_client_name("dblog-tail/0.1");
  h->mutable_resume_after()->set_commit_lsn(100);
  h->mutable_resume_after()->set_seq(1);
  return m;
}

dblog::v1::ClientMessage Ack(std::uint64_t lsn, std::uint32_t seq) {
  dblog::v1::ClientMessage m;
  m.mutable_ack()->mutable_position()->set_commit_lsn(lsn);
  m.mutable_ack()->mutable_position()->set_seq(seq);
  return m;
}

dblog::v1::Relation Relation() {
  dblog::v1::Relation r;
  r.set_oid(16384);
  r.set_schema("public");
  r.set_name("orders");
  const char* names[] = {"id", "note", "at", "price", "blob", "u", "d", "ok"};
  const char* types[] = {"integer", "text", "timestamp with time zone", "double precision",
                         "bytea", "uuid", "date", "boolean"};
  const std::uint32_t oids[] = {23, 25, 1184, 701, 17, 2950, 1082, 16};
  for (int i = 0; i < 8; ++i) {
    auto* c = r.add_columns();
    c->set_name(names[i]);
    c->set_type_name(types[i]);
    c->set_type_oid(oids[i]);
    c->set_typmod(-1);
    c->set_attnum(static_cast<std::uint32_t>(i + 1));
  }
  r.add_key_columns(0);
  r.set_replica_identity("d");
  return r;
}

dblog::v1::Row Row(std::int64_t id, const std::string& note) {
  dblog::v1::Row row;
  row.add_values()->set_int_value(id);
  row.add_values()->set_text_value(note);
  row.add_values()->set_timestamptz_value(789000000000000);
  row.add_values()->set_float8_value(2.5);
  row.add_values()->set_bytes_value(std::string("\x00\xff", 2));
  row.add_values()->set_uuid_value(std::string(16, '\x11'));
  row.add_values()->set_date_value(19000);
  row.add_values()->set_null_value(true);
  return row;
}

// Row(id, "") with the note and the blob split (their bytes in ValuePiece events after it).
dblog::v1::Row SplitRow(std::int64_t id, std::uint64_t note_bytes, std::uint64_t blob_bytes) {
  dblog::v1::Row row = Row(id, "");
  auto* note = row.mutable_values(1)->mutable_split();
  note->set_kind(dblog::v1::SplitValue::TEXT);
  note->set_length(note_bytes);
  auto* blob = row.mutable_values(4)->mutable_split();
  blob->set_kind(dblog::v1::SplitValue::BYTES);
  blob->set_length(blob_bytes);
  return row;
}

// One transaction at lsn whose INSERT has split values: Begin, Relation and the Change in
// `change_in`, then each of `pieces` as a ValuePiece in `piece_in(i)`, then the Commit in the
// last one.
template <typename Event, typename PieceIn>
void SplitTransaction(std::uint64_t lsn, google::protobuf::RepeatedPtrField<Event>* change_in,
                      const std::vector<std::string>& pieces, PieceIn piece_in) {
  auto* begin = change_in->Add()->mutable_begin();
  begin->set_xid(701);
  begin->set_commit_lsn(lsn);
  begin->set_end_lsn(lsn + 8);
  *change_in->Add()->mutable_relation() = Relation();
  auto* c = change_in->Add()->mutable_change();
  c->set_kind(dblog::v1::Change::INSERT);
  c->set_relation_oid(16384);
  c->set_commit_lsn(lsn);
  c->set_seq(1);
  c->set_lsn(lsn - 10);
  c->set_xid(701);
  std::uint64_t bytes = 0;
  for (const auto& p : pieces) bytes += p.size();
  *c->mutable_new_row() = SplitRow(3, bytes - 2, 2);  // the last 2 bytes are the blob's
  for (std::size_t i = 0; i < pieces.size(); ++i)
    piece_in(i)->Add()->mutable_value_piece()->set_data(pieces[i]);
  auto* commit = piece_in(pieces.size() - 1)->Add()->mutable_commit();
  commit->set_commit_lsn(lsn);
  commit->set_end_lsn(lsn + 8);
  commit->set_seq(2);
  commit->set_xid(701);
}

dblog::v1::Row Key(std::int64_t id) {
  dblog::v1::Row row;
  row.add_values()->set_int_value(id);
  return row;
}

// The events of one transaction at commit_lsn: an insert, an update moving the key, a delete.
template <typename Event>
void Transaction(std::uint64_t lsn, bool with_relation, google::protobuf::RepeatedPtrField<Event>* out) {
  auto* begin = out->Add()->mutable_begin();
  begin->set_xid(700);
  begin->set_commit_lsn(lsn);
  begin->set_end_lsn(lsn + 8);
  begin->set_commit_time(789000000000000);
  if (with_relation) *out->Add()->mutable_relation() = Relation();
  std::uint32_t seq = 1;
  auto change = [&](dblog::v1::Change::Kind kind) {
    auto* c = out->Add()->mutable_change();
    c->set_kind(kind);
    c->set_relation_oid(16384);
    c->set_commit_lsn(lsn);
    c->set_seq(seq++);
    c->set_lsn(lsn - 10);
    c->set_xid(700);
    return c;
  };
  *change(dblog::v1::Change::INSERT)->mutable_new_row() = Row(1, "first \"one\"\n");
  auto* update = change(dblog::v1::Change::UPDATE);
  *update->mutable_new_row() = Row(2, "moved \xc3\xa9");
  *update->mutable_old_key() = Key(1);
  *change(dblog::v1::Change::UPDATE)->mutable_new_row() = Row(2, "same key");
  *change(dblog::v1::Change::DELETE)->mutable_old_key() = Key(2);
  auto* message = out->Add()->mutable_message();
  message->set_transactional(true);
  message->set_prefix("app");
  message->set_content("hello");
  message->set_commit_lsn(lsn);
  message->set_seq(seq++);
  auto* commit = out->Add()->mutable_commit();
  commit->set_commit_lsn(lsn);
  commit->set_end_lsn(lsn + 8);
  commit->set_seq(seq);
  commit->set_xid(700);
}

std::string BigEndian(std::uint64_t v, int bytes) {
  std::string out;
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>(v >> (8 * i)));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  dir = argv[1];
  mkdir(dir.c_str(), 0755);

  // ---- frame_decoder_fuzz: control byte (limit, cuts), then frames.
  const std::string hello = Frame(Hello("orders", "s3cret")), ack = Frame(Ack(200, 1));
  Write("frame_decoder_fuzz", "client-frames", std::string(1, '\x00') + hello + ack + ack);
  Write("frame_decoder_fuzz", "small-limit", std::string(1, '\x0d') + "\x03" "abc" "\x80\x01");
  Write("frame_decoder_fuzz", "long-varint",
        std::string(1, '\x01') + "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01");
  Write("frame_decoder_fuzz", "non-minimal", std::string("\x00\x82\x00" "ab" "\x00", 6));

  // ---- client_frames_fuzz: control byte (configuration), then client frames.
  Write("client_frames_fuzz", "hello-acks",
        std::string(1, '\x07') + Frame(Hello("a", "s3cret")) + ack + Frame(Ack(1000, 1)) + ack);
  Write("client_frames_fuzz", "default-scope",
        std::string(1, '\x02') + Frame(Hello("new_consumer", "")) + Frame(Ack(450, 0)));
  Write("client_frames_fuzz", "hello-twice", std::string(1, '\x06') + hello + hello);
  Write("client_frames_fuzz", "ack-first", std::string(1, '\x06') + ack);
  // 0x15: 'a' has a token of its own; 0x0c: client certificates (CN 'a'); message prefixes.
  Write("client_frames_fuzz", "consumer-token",
        std::string(1, '\x15') + Frame(Hello("a", "a-token")) + Frame(Hello("a", "s3cret")));
  auto prefixed = Hello("a", "");
  prefixed.mutable_hello()->add_message_prefixes("app.");
  prefixed.mutable_hello()->add_message_prefixes("audit");
  Write("client_frames_fuzz", "client-cert-prefixes",
        std::string(1, '\x0c') + Frame(prefixed) + Frame(Ack(300, 1)));

  // ---- metrics_http_fuzz: request heads.
  Write("metrics_http_fuzz", "metrics", "GET /metrics HTTP/1.1\r\nHost: localhost:9187\r\n\r\n");
  Write("metrics_http_fuzz", "index", "GET / HTTP/1.0\r\n\r\n");
  Write("metrics_http_fuzz", "post", "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  Write("metrics_http_fuzz", "not-found", "GET /metrics/x?y=1 HTTP/1.1\r\n\r\n");
  Write("metrics_http_fuzz", "unfinished", "GET /metrics HTTP/1.1\r\nHost: localhost\r\n");

  // ---- client_stream_fuzz: control byte (resume, cuts), then server frames.
  dblog::v1::ServerMessage welcome;
  welcome.mutable_welcome()->set_protocol_version(1);
  welcome.mutable_welcome()->set_slot("dblog_orders");
  welcome.mutable_welcome()->add_scope("public.*");
  welcome.mutable_welcome()->set_server_name("dblogd/0.1");
  dblog::v1::ServerMessage events;
  auto* bootstrap = events.mutable_events()->add_events()->mutable_bootstrap_begin();
  bootstrap->set_consistent_point(0x101);
  auto* table = bootstrap->add_tables();
  table->set_schema("public");
  table->set_name("orders");
  table->set_relation_oid(16384);
  table->set_rows_estimated(2);
  auto* read = events.mutable_events()->add_events()->mutable_change();
  read->set_kind(dblog::v1::Change::READ);
  read->set_relation_oid(16384);
  read->set_commit_lsn(0x100);
  read->set_seq(1);
  *read->mutable_new_row() = Row(7, "copied");
  auto* end = events.mutable_events()->add_events()->mutable_bootstrap_end();
  end->set_consistent_point(0x101);
  end->set_commit_lsn(0x100);
  end->set_seq(2);
  Transaction(0x200, true, events.mutable_events()->mutable_events());
  dblog::v1::ServerMessage heartbeat;
  heartbeat.mutable_heartbeat()->mutable_position()->set_commit_lsn(0x200);
  heartbeat.mutable_heartbeat()->set_server_time(1);
  dblog::v1::ServerMessage progress;
  progress.mutable_progress()->set_phase("bootstrap");
  *progress.mutable_progress()->add_tables() = *table;
  dblog::v1::ServerMessage error;
  error.mutable_error()->set_code(dblog::v1::Error::SOURCE_ERROR);
  error.mutable_error()->set_message("gone");
  Write("client_stream_fuzz", "stream",
        std::string(1, '\x00') + Frame(welcome) + Frame(progress) + Frame(events) +
            Frame(heartbeat) + Frame(error));
  Write("client_stream_fuzz", "refused", std::string(1, '\x01') + Frame(error));
  {  // long values in pieces, a heartbeat between them (protocol.md, "Long values")
    std::vector<dblog::v1::ServerMessage> frames(3);
    SplitTransaction(0x200, frames[0].mutable_events()->mutable_events(),
                     {"na\xc3", std::string("\xa9ve\x00\xff", 5)},
                     [&](std::size_t i) { return frames[i + 1].mutable_events()->mutable_events(); });
    Write("client_stream_fuzz", "pieces",
          std::string(1, '\x00') + Frame(welcome) + Frame(frames[0]) + Frame(frames[1]) +
              Frame(heartbeat) + Frame(frames[2]));
  }

  // ---- ndjson_fuzz: an EventBatch.
  Write("ndjson_fuzz", "events", events.events().SerializeAsString());
  dblog::v1::EventBatch odd;
  auto* values = odd.add_events()->mutable_change();
  values->set_kind(dblog::v1::Change::INSERT);
  values->set_relation_oid(99);  // no Relation: rows as arrays
  auto* row = values->mutable_new_row();
  row->add_values()->set_float4_value(-0.0f);
  row->add_values()->set_float8_value(1e300);
  row->add_values()->set_timestamp_value(-9223372036854775807LL);
  row->add_values()->set_date_value(-2147483647);
  row->add_values()->set_literal("{\"a\": [1]}");
  row->add_values()->set_text_value("\x01\x1f\x7f \\ \xe2\x80\xa8 \xf0\x9f\x98\x80");
  row->add_values()->set_bytes_value(std::string("\xc0\xaf\xed\xa0\x80", 5));
  row->add_values()->set_unchanged(true);
  Write("ndjson_fuzz", "odd-values", odd.SerializeAsString());

  // ---- plugin_batch_fuzz: control byte (resume), then plugin messages (varint length + Batch).
  dblog::v1::Batch first, second;
  Transaction(0x300, true, first.mutable_events());
  Transaction(0x400, false, second.mutable_events());
  auto* standalone = second.add_events()->mutable_message();
  standalone->set_prefix("dblog.other");
  standalone->set_lsn(0x410);
  Write("plugin_batch_fuzz", "two-batches", std::string(1, '\x00') + Frame(first) + Frame(second));
  Write("plugin_batch_fuzz", "resume", std::string(1, '\x05') + Frame(first));
  {  // a Change whose long values follow it in pieces, each a plugin message of its own
    std::vector<dblog::v1::Batch> batches(3);
    SplitTransaction(0x500, batches[0].mutable_events(), {"abc", std::string("de\x00\x01", 4)},
                     [&](std::size_t i) { return batches[i + 1].mutable_events(); });
    Write("plugin_batch_fuzz", "pieces",
          std::string(1, '\x00') + Frame(batches[0]) + Frame(batches[1]) + Frame(batches[2]));
  }

  // ---- copy_rows_fuzz: control byte (cuts), then a binary COPY stream of one bytea column.
  std::string copy = std::string("PGCOPY\n\xff\r\n\0", 11) + BigEndian(0, 4) + BigEndian(4, 4) +
                     "ext!";
  for (const std::string& r : {Row(1, "a").SerializeAsString(), std::string(),
                               Row(2, std::string(300, 'x')).SerializeAsString()})
    copy += BigEndian(1, 2) + BigEndian(r.size(), 4) + r;
  Write("copy_rows_fuzz", "rows", std::string(1, '\x03') + copy + BigEndian(0xffff, 2));
  Write("copy_rows_fuzz", "no-trailer", std::string(1, '\x00') + copy);
  return 0;
}
