// tests/cpp/publish/avro_test.cc: `--format debezium-avro` without a broker: the Avro binary
// encoder against the Avro specification's examples, the Avro schema derived from Debezium's
// Connect schemas against Confluent's AvroData conventions, and every record of the type
// matrix (debezium_matrix.h) decoded by Apache Avro's own Python library (avro_check.py, with
// Debian's python3-avro) with the writer schema a fake registry received, compared with the
// JsonConverter payload (schemas.enable=true) of the same event.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <set>

#include "client/publish/avro.h"
#include "client/publish/broker.h"
#include "client/publish/debezium.h"
#include "client/publish/layout.h"
#include "client/publish/schema_registry.h"
#include "common/json.h"
#include "debezium_matrix.h"

namespace dblog::publish {
namespace {

using dblog::v1::Change;
using dblog::v1::StreamEvent;

// A registry in memory: one id per distinct schema (as a registry gives the same schema the
// same id across subjects), and what each subject received.
class FakeRegistry : public SchemaRegistry {
 public:
  std::int32_t Register(const std::string& subject, const std::string& avro_schema) override {
    ++calls;
    auto [it, added] = ids.emplace(avro_schema, static_cast<std::int32_t>(ids.size() + 1));
    subjects[subject].insert(it->second);
    return it->second;
  }
  std::map<std::string, std::int32_t> ids;
  std::map<std::string, std::set<std::int32_t>> subjects;
  int calls = 0;
};

std::string Hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (const unsigned char c : bytes) {
    if (!out.empty()) out += ' ';
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// The specification's examples ("Binary Encoding"): zigzag varints (0 -> 00, -1 -> 01, 1 -> 02,
// -64 -> 7f, 64 -> 80 01), strings as a length then UTF-8 ("foo" -> 06 66 6f 6f), a union as
// the branch's index then the value (["null","string"]: null -> 00, "a" -> 02 02 61), arrays
// as blocks ending with a zero count, floats little-endian IEEE 754; and Confluent's frame.
TEST(AvroEncoding, PrimitivesAsTheSpecificationWritesThem) {
  const auto enc = [](const char* schema, const char* payload) {
    return Hex(AvroEncodeConnect(schema, payload));
  };
  const char* i64 = R"({"type":"int64","optional":false})";
  EXPECT_EQ(enc(i64, "0"), "00");
  EXPECT_EQ(enc(i64, "-1"), "01");
  EXPECT_EQ(enc(i64, "1"), "02");
  EXPECT_EQ(enc(i64, "-64"), "7f");
  EXPECT_EQ(enc(i64, "64"), "80 01");
  EXPECT_EQ(enc(i64, "-9223372036854775808"), "ff ff ff ff ff ff ff ff ff 01");
  EXPECT_EQ(enc(R"({"type":"string","optional":false})", R"("foo")"), "06 66 6f 6f");
  EXPECT_EQ(enc(R"({"type":"string","optional":true})", "null"), "00");
  EXPECT_EQ(enc(R"({"type":"string","optional":true})", R"("a")"), "02 02 61");
  // a default puts T first: [T, "null"] (AvroData), so null is branch 1
  EXPECT_EQ(enc(R"({"type":"string","optional":true,"default":"false"})", "null"), "02");
  EXPECT_EQ(enc(R"({"type":"string","optional":true,"default":"false"})", R"("a")"), "00 02 61");
  EXPECT_EQ(enc(R"({"type":"array","items":{"type":"int32","optional":true},"optional":false})",
                "[1,null]"),
            "04 02 02 00 00");
  EXPECT_EQ(enc(R"({"type":"array","items":{"type":"int32"},"optional":false})", "[]"), "00");
  EXPECT_EQ(enc(R"({"type":"float","optional":false})", "1.5"), "00 00 c0 3f");
  EXPECT_EQ(enc(R"({"type":"double","optional":false})", R"("NaN")"), "00 00 00 00 00 00 f8 7f");
  EXPECT_EQ(enc(R"({"type":"boolean","optional":false})", "true"), "01");
  EXPECT_EQ(enc(R"({"type":"bytes","optional":false})", R"("AP8=")"), "04 00 ff");
  EXPECT_EQ(Hex(ConfluentFrame(258, "\x02")), "00 00 00 01 02 02");
  // what does not fit is refused, naming the field
  const char* rec = R"({"type":"struct","name":"a.R","optional":false,"fields":[{"type":"int16","optional":false,"field":"x"}]})";
  EXPECT_EQ(enc(rec, R"({"x":-2})"), "03");
  EXPECT_THROW(AvroEncodeConnect(rec, R"({"x":40000})"), std::invalid_argument);
  EXPECT_THROW(AvroEncodeConnect(rec, R"({"x":null})"), std::invalid_argument);
  EXPECT_THROW(AvroEncodeConnect(rec, R"({"x":"1"})"), std::invalid_argument);
  EXPECT_THROW(AvroEncodeConnect(rec, R"({"x":1,"y":2})"), std::invalid_argument);
  // Debezium's placeholder for an unchanged TOASTed value where Avro's type cannot carry it
  // (UnchangedToastedPlaceholder has none for a date[] or a numeric): refused, naming the field
  const char* dates = R"({"type":"struct","name":"a.R","optional":false,"fields":[{"type":"array","items":{"type":"int32","name":"io.debezium.time.Date","optional":true},"optional":true,"field":"ds"},{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"ts"}]})";
  EXPECT_EQ(enc(dates, R"({"ds":null,"ts":"__debezium_unavailable_value"})"),
            "00 02 02 02 38 5f 5f 64 65 62 65 7a 69 75 6d 5f 75 6e 61 76 61 69 6c 61 62 6c 65 5f 76 61 6c 75 65 00");
  EXPECT_THROW(AvroEncodeConnect(dates, R"({"ds":"__debezium_unavailable_value","ts":null})"),
               std::invalid_argument);
  const char* decimal = R"({"type":"struct","name":"a.R","optional":false,"fields":[{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"},"optional":true,"field":"n"}]})";
  try {
    AvroEncodeConnect(decimal, R"({"n":"__debezium_unavailable_value"})");
    ADD_FAILURE() << "a Decimal placeholder was encoded";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("n: "), std::string::npos) << e.what();
  }
}

// The Avro schema of Debezium's envelope as Confluent's AvroData.fromConnectSchema derives it
// (avro-data/src/main/java/io/confluent/connect/avro/AvroData.java): a record per struct named
// by the Connect name split at its last '.', defined once and then named; optional schemas as
// ["null", T] with default null, [T, "null"] with the field's default when it has one
// (source.snapshot); int16 as int with connect.type; Decimal as bytes with scale, precision
// (64 without connect.decimal.precision: money) and logicalType decimal; connect.name,
// connect.version, connect.parameters, connect.doc, connect.default.
TEST(AvroSchema, DebeziumsEnvelopeAsAvroDataDerivesIt) {
  dblog::v1::Relation rel = MatrixRelation().relation();
  const std::string value = AvroSchemaFromConnect(DebeziumValueSchema(rel, "dblog.c1"));
  for (const char* part : {
           R"({"type":"record","name":"Envelope","namespace":"dblog.c1.public.matrix","fields":[{"name":"before","type":["null",{"type":"record","name":"Value","namespace":"dblog.c1.public.matrix","fields":[{"name":"id","type":"int"},)",
           R"({"name":"b","type":["null","boolean"],"default":null})",
           R"({"name":"i2","type":["null",{"type":"int","connect.type":"int16"}],"default":null})",
           R"({"name":"t","type":"string"})",
           R"({"name":"n","type":["null",{"type":"bytes","scale":2,"precision":10,"connect.version":1,"connect.parameters":{"scale":"2","connect.decimal.precision":"10"},"connect.name":"org.apache.kafka.connect.data.Decimal","logicalType":"decimal"}],"default":null})",
           R"({"name":"nv","type":["null",{"type":"record","name":"VariableScaleDecimal","namespace":"io.debezium.data","fields":[{"name":"scale","type":"int"},{"name":"value","type":"bytes"}],"connect.doc":"Variable scaled decimal","connect.version":1,"connect.name":"io.debezium.data.VariableScaleDecimal"}],"default":null})",
           R"({"name":"m","type":["null",{"type":"bytes","scale":2,"precision":64,)",
           R"({"name":"ts3","type":["null",{"type":"long","connect.version":1,"connect.name":"io.debezium.time.Timestamp"}],"default":null})",
           R"({"name":"ts","type":["null",{"type":"long","connect.version":1,"connect.name":"io.debezium.time.MicroTimestamp"}],"default":null})",
           R"({"name":"ai","type":["null",{"type":"array","items":["null","int"]}],"default":null})",
           R"("connect.name":"dblog.c1.public.matrix.Value"}],"default":null},{"name":"after","type":["null","dblog.c1.public.matrix.Value"],"default":null})",
           R"({"name":"snapshot","type":[{"type":"string","connect.version":1,"connect.parameters":{"allowed":"true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"},"connect.default":"false","connect.name":"io.debezium.data.Enum"},"null"],"default":"false"})",
           R"("connect.version":1,"connect.name":"io.debezium.connector.postgresql.Source"})",
           R"({"name":"transaction","type":["null",{"type":"record","name":"block","namespace":"event",)",
           R"({"name":"op","type":"string"})",
           R"("connect.version":2,"connect.name":"dblog.c1.public.matrix.Envelope"})"})
    EXPECT_NE(value.find(part), std::string::npos) << part << "\n" << value;
  EXPECT_EQ(AvroSchemaFromConnect(DebeziumKeySchema(rel, "dblog.c1")),
            R"({"type":"record","name":"Key","namespace":"dblog.c1.public.matrix","fields":[{"name":"id","type":"int"}],"connect.name":"dblog.c1.public.matrix.Key"})");
  // Avro names are [A-Za-z_][A-Za-z0-9_]*: a table or column outside it is refused, not
  // written for a registry to refuse
  rel.set_name("my-table");
  EXPECT_THROW(AvroSchemaFromConnect(DebeziumKeySchema(rel, "dblog.c1")), std::invalid_argument);
  rel.set_name("matrix");
  rel.mutable_columns(0)->set_name("my id");
  EXPECT_THROW(AvroSchemaFromConnect(DebeziumKeySchema(rel, "dblog.c1")), std::invalid_argument);
}

// Runs avro_check.py on `doc`: its exit status and what it printed.
std::pair<int, std::string> AvroCheck(const std::string& doc) {
  const std::string path = ::testing::TempDir() + "/avro_records.json";
  std::ofstream(path) << doc;
  // Debian's python3-avro installs into /usr/bin/python3's packages (not a python3 of PATH)
  FILE* p = popen(("/usr/bin/python3 " + std::string(DBLOG_SOURCE_DIR) +
                   "/tests/cpp/publish/avro_check.py " + path + " 2>&1").c_str(), "r");
  std::string out;
  char buf[512];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = p ? pclose(p) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// The payload of a {"schema","payload"} text (the JSON layout's message).
std::string PayloadOf(const std::string& with_schema) {
  const std::string marker = ",\"payload\":";
  const std::size_t at = with_schema.rfind(marker);
  return with_schema.substr(at + marker.size(), with_schema.size() - at - marker.size() - 1);
}

// The matrix's events, and one more: an update whose text, bytea and array columns are
// unchanged TOASTed values (the WAL did not carry them).
std::vector<StreamEvent> MatrixEvents() {
  std::uint32_t seq = 0;
  std::vector<StreamEvent> events = {
      MatrixChange(Change::INSERT, 7, ++seq), MatrixChange(Change::UPDATE, 7, ++seq),
      MatrixChange(Change::UPDATE, 8, ++seq), MatrixChange(Change::DELETE, 8, ++seq),
      MatrixChange(Change::READ, 9, ++seq),   MatrixChange(Change::UPDATE, 9, ++seq)};
  auto* row = events.back().mutable_change()->mutable_new_row();
  for (const int column : {6, 8, 22, 23}) row->mutable_values(column)->set_unchanged(true);  // t, by, ai, at
  events.back().mutable_change()->clear_old_key();  // not a key change
  StreamEvent truncate;
  truncate.mutable_truncate()->add_relation_oids(16500);
  truncate.mutable_truncate()->set_commit_lsn(24023119);
  truncate.mutable_truncate()->set_seq(++seq);
  events.push_back(truncate);
  return events;
}

// Every record of every op over the type matrix (ints of each width, float NaN, text, bytea,
// uuid, numeric as Decimal and VariableScaleDecimal, money, date, timestamps in milliseconds
// and microseconds, timestamptz, time, timetz, interval, json, arrays, NULLs, unchanged TOASTed
// values, a key change as d, tombstone, c, a delete and its tombstone, a bootstrap row, a
// truncate): Format::kDebeziumAvro writes the messages Format::kDebeziumJson with schemas
// writes, with each key and value in Confluent's wire format under the ids the registry gave
// for "<topic>-key" and "<topic>-value"; each decodes with Avro's own library and its writer
// schema into the JSON payload's value; tombstones stay null; each schema is registered once.
TEST(DebeziumAvro, EveryRecordOfTheTypeMatrixDecodesWithAvrosLibraryIntoTheJsonPayload) {
  DebeziumOptions options;
  options.now_nanos = [] { return 1700000000123456789; };
  SetDebeziumOption(options, "skipped.operations", "none");
  Layout avro_layout{"dblog.c1", Format::kDebeziumAvro};
  avro_layout.set_debezium_options(options);
  options.schemas_enable = true;
  Layout json_layout{"dblog.c1", Format::kDebeziumJson};
  json_layout.set_debezium_options(options);
  FakeRegistry registry;
  ConfluentAvroEncoder encoder(registry);
  const std::string topic = "dblog.c1.public.matrix";
  avro_layout.Map(MatrixRelation());
  json_layout.Map(MatrixRelation());
  std::string records;
  std::size_t count = 0;
  const auto add = [&](const std::string& subject, const std::string& with_schema) {
    const std::string frame = encoder.Encode(subject, with_schema);
    records += std::string(count++ ? "," : "") + "{\"subject\":\"" + subject +
               "\",\"frame\":\"" + common::Base64Encode(frame) + "\",\"expected\":" +
               PayloadOf(with_schema) + "}";
  };
  std::size_t messages = 0, tombstones = 0;
  for (const StreamEvent& e : MatrixEvents()) {
    const std::vector<LogMessage> avro = avro_layout.Map(e);
    const std::vector<LogMessage> json = json_layout.Map(e);
    ASSERT_EQ(avro.size(), json.size());
    for (std::size_t i = 0; i < avro.size(); ++i) {
      ++messages;
      // the layout hands the publisher the JSON with schemas it re-encodes
      EXPECT_EQ(avro[i].payload, json[i].payload);
      EXPECT_EQ(avro[i].key, json[i].key);
      EXPECT_EQ(avro[i].part, json[i].part);
      EXPECT_EQ(avro[i].kind, json[i].kind);
      if (!json[i].key.empty()) add(topic + "-key", json[i].key);
      if (json[i].payload.empty())
        ++tombstones;
      else
        add(topic + "-value", json[i].payload);
    }
  }
  EXPECT_EQ(messages, 10u);  // c, u, (d, tombstone, c), d, tombstone, r, u, t
  EXPECT_EQ(tombstones, 2u);
  EXPECT_EQ(registry.calls, 2);  // one key schema, one value schema, registered once each
  ASSERT_EQ(registry.subjects.size(), 2u);
  EXPECT_EQ(registry.subjects[topic + "-key"].size(), 1u);
  EXPECT_EQ(registry.subjects[topic + "-value"].size(), 1u);
  std::string doc = "{\"schemas\":{";
  bool first = true;
  for (const auto& [schema, id] : registry.ids) {
    if (!first) doc += ",";
    first = false;
    doc += "\"" + std::to_string(id) + "\":";
    common::AppendJsonString(doc, schema);
  }
  doc += "},\"subjects\":{";
  first = true;
  for (const auto& [subject, ids] : registry.subjects) {
    if (!first) doc += ",";
    first = false;
    doc += "\"" + subject + "\":[";
    for (const auto id : ids) doc += std::to_string(id) + (id == *ids.rbegin() ? "" : ",");
    doc += "]";
  }
  doc += "},\"records\":[" + records + "]}";
  const auto [status, out] = AvroCheck(doc);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "17 records\n");  // 9 keys (the truncate has none), 8 values
}

// The check can fail: a body that is not its schema's value, a wrong id, a value that differs.
TEST(DebeziumAvro, TheAvroCheckRefusesWrongBytes) {
  FakeRegistry registry;
  ConfluentAvroEncoder encoder(registry);
  const std::string with_schema =
      R"({"schema":{"type":"struct","name":"a.Key","optional":false,"fields":[{"type":"int32","optional":false,"field":"id"}]},"payload":{"id":7}})";
  const std::string frame = encoder.Encode("t-key", with_schema);
  EXPECT_EQ(Hex(frame), "00 00 00 00 01 0e");
  const std::string schemas =
      R"({"schemas":{"1":"{\"type\":\"record\",\"name\":\"Key\",\"namespace\":\"a\",\"fields\":[{\"name\":\"id\",\"type\":\"int\"}]}"},"records":[)";
  const auto check = [&](const std::string& bytes, const std::string& expected) {
    return AvroCheck(schemas + R"({"subject":"t-key","frame":")" + common::Base64Encode(bytes) +
                     R"(","expected":)" + expected + "}]}");
  };
  EXPECT_EQ(check(frame, R"({"id":7})").first, 0);
  EXPECT_EQ(check(frame, R"({"id":8})").first, 1);
  EXPECT_EQ(check(std::string("\x00\x00\x00\x00\x02\x0e", 6), R"({"id":7})").first, 1);
  EXPECT_EQ(check(std::string("\x01\x00\x00\x00\x01\x0e", 6), R"({"id":7})").first, 1);
  EXPECT_EQ(check(frame + "\x02", R"({"id":7})").first, 1);  // a byte left over
  // the encoder's cache: the same schema again is not registered again
  encoder.Encode("t-key", with_schema);
  EXPECT_EQ(registry.calls, 1);
  encoder.Encode("u-key", with_schema);
  EXPECT_EQ(registry.calls, 2);
}

// HttpSchemaRegistry against fake_schema_registry.py over real HTTP (the stand-in the Kafka test
// uses; no Confluent registry can run here): POST /subjects/<subject>/versions answers the id,
// the same schema gets the same id under another subject; a schema the registry refuses (422,
// as Confluent's registry refuses an invalid schema) is a BrokerError retrying cannot fix; a
// registry that cannot be reached is a retryable one; URLs other than http://HOST:PORT[/PATH]
// are refused.
TEST(HttpSchemaRegistry, RegistersAndSaysWhatRetryingCanFix) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const std::string state = ::testing::TempDir() + "/registry_unit.json";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    const std::string script =
        std::string(DBLOG_SOURCE_DIR) + "/tests/cpp/publish/fake_schema_registry.py";
    execl("/usr/bin/python3", "python3", script.c_str(), state.c_str(), nullptr);
    _exit(127);
  }
  close(out[1]);
  FILE* from = fdopen(out[0], "r");
  char line[256] = {0};
  const bool started = std::fgets(line, sizeof line, from) != nullptr;
  std::string url = line;
  url = url.substr(4, url.find_last_not_of("\r\n") - 3);
  const auto stop = [&] {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    std::fclose(from);
  };
  if (!started || url.rfind("http://", 0) != 0) {
    stop();
    FAIL() << "fake registry: " << line;
  }
  HttpSchemaRegistry registry(url);
  const std::string key = R"({"type":"record","name":"Key","namespace":"a","fields":[{"name":"id","type":"int"}]})";
  EXPECT_EQ(registry.Register("t-key", key), 1);
  EXPECT_EQ(registry.Register("t-value", R"("string")"), 2);
  EXPECT_EQ(registry.Register("u-key", key), 1);
  try {
    registry.Register("t-value", R"({"type":"record","name":"1bad","fields":[]})");
    ADD_FAILURE() << "an invalid schema was accepted";
  } catch (const BrokerError& e) {
    EXPECT_FALSE(e.retryable());
    EXPECT_NE(std::string(e.what()).find("422"), std::string::npos) << e.what();
  }
  stop();
  try {
    HttpSchemaRegistry(url, std::chrono::seconds(2)).Register("t-key", key);
    ADD_FAILURE() << "a registry that is gone answered";
  } catch (const BrokerError& e) {
    EXPECT_TRUE(e.retryable()) << e.what();
  }
  for (const char* bad : {"https://r:8081", "r:8081", "http://r:port", "http://:8081"})
    EXPECT_THROW(HttpSchemaRegistry{bad}, std::invalid_argument) << bad;
}

}  // namespace
}  // namespace dblog::publish
