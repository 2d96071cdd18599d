// tests/cpp/sidecar/handshake_test.cc: dblogd's pure reading of consumer frames and Hellos
// (server/handshake.h), of /metrics requests (metrics::HttpRespond) and the pages they get
// (Registry::Render, metrics::RenderStatusJson). No database, no socket.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "metrics/metrics.h"
#include "metrics/status.h"
#include "server/handshake.h"

namespace {

using dblog::server::CheckHello;
using dblog::server::ClientFrame;
using dblog::server::ParseClientFrame;
using dblog::v1::Error;

std::string HelloBytes(const std::string& consumer, const std::string& token = "",
                       std::uint32_t version = 1) {
  dblog::v1::ClientMessage m;
  m.mutable_hello()->set_protocol_version(version);
  m.mutable_hello()->set_consumer(consumer);
  m.mutable_hello()->set_token(token);
  return m.SerializeAsString();
}

TEST(ParseClientFrame, HelloFirstThenAcksOnceAttached) {
  dblog::v1::ClientMessage m;
  EXPECT_EQ(ParseClientFrame(HelloBytes("a"), false, false, &m).kind, ClientFrame::Kind::kHello);
  EXPECT_EQ(m.hello().consumer(), "a");
  const ClientFrame twice = ParseClientFrame(HelloBytes("a"), true, true, &m);
  EXPECT_EQ(twice.kind, ClientFrame::Kind::kError);
  EXPECT_EQ(twice.code, Error::PROTOCOL_VIOLATION);
  EXPECT_EQ(twice.error, "Hello sent twice");

  dblog::v1::ClientMessage ack;
  ack.mutable_ack()->mutable_position()->set_commit_lsn(5);
  const std::string ack_bytes = ack.SerializeAsString();
  EXPECT_EQ(ParseClientFrame(ack_bytes, true, false, &m).code, Error::PROTOCOL_VIOLATION);
  EXPECT_EQ(ParseClientFrame(ack_bytes, false, false, &m).code, Error::PROTOCOL_VIOLATION);
  EXPECT_EQ(ParseClientFrame(ack_bytes, true, true, &m).kind, ClientFrame::Kind::kAck);
  EXPECT_EQ(m.ack().position().commit_lsn(), 5u);
}

TEST(ParseClientFrame, BadFrames) {
  dblog::v1::ClientMessage m;
  EXPECT_EQ(ParseClientFrame("", false, false, &m).error, "ClientMessage without a message");
  EXPECT_EQ(ParseClientFrame("\xff", false, false, &m).error,
            "frame is not a dblog.v1.ClientMessage");
  EXPECT_EQ(ParseClientFrame("\xff", false, false, &m).code, Error::BAD_FRAME);
}

using dblog::server::HelloContext;

struct Checked {
  Error::Code code;
  std::string consumer;
  bool configured;
  std::string message;
};

Checked Check(const dblog::config::Config& config, const std::string& bytes,
              const HelloContext& context) {
  dblog::v1::ClientMessage m;
  m.ParseFromString(bytes);
  dblog::config::ConsumerConfig consumer;
  bool configured = false;
  auto refusal = CheckHello(m.hello(), config, context, &consumer, &configured);
  if (refusal) return {refusal->code, consumer.name, configured, refusal->message};
  return {Error::CODE_UNSPECIFIED, consumer.name, configured, ""};
}

TEST(CheckHello, RefusesInOrderAndAcceptsConfigured) {
  dblog::config::Config config;
  config.token = "t";
  config.consumers["orders"] = {"orders", dblog::config::ParseScope("public.orders"), ""};
  const std::set<std::string> live = {"busy"};
  HelloContext context;
  context.connected = [&live](const std::string& n) { return live.count(n) != 0; };
  auto check = [&](const std::string& bytes, bool shutting_down = false) {
    HelloContext c = context;
    c.shutting_down = shutting_down;
    return Check(config, bytes, c);
  };
  EXPECT_EQ(check(HelloBytes("orders", "t"), true).code, Error::SHUTTING_DOWN);
  EXPECT_EQ(check(HelloBytes("orders", "t", 2)).code, Error::UNSUPPORTED_VERSION);
  EXPECT_EQ(check(HelloBytes("Orders", "x")).code, Error::BAD_CONSUMER_NAME);
  EXPECT_EQ(check(HelloBytes("orders", "x")).code, Error::AUTH_FAILED);
  EXPECT_EQ(check(HelloBytes("other", "t")).code, Error::UNKNOWN_CONSUMER);
  const Checked orders = check(HelloBytes("orders", "t"));
  EXPECT_EQ(orders.code, Error::CODE_UNSPECIFIED);
  EXPECT_EQ(orders.consumer, "orders");
  EXPECT_TRUE(orders.configured);
  config.default_scope = dblog::config::ParseScope("public.*");
  const Checked other = check(HelloBytes("other", "t"));
  EXPECT_EQ(other.code, Error::CODE_UNSPECIFIED);
  EXPECT_EQ(other.consumer, "other");
  EXPECT_FALSE(other.configured);
  EXPECT_EQ(check(HelloBytes("busy", "t")).code, Error::ALREADY_CONNECTED);
}

TEST(CheckHello, ConsumerTokenOpensOnlyItsConsumer) {
  dblog::config::Config config;
  config.token = "global";
  config.consumers["a"] = {"a", dblog::config::ParseScope("public.*"), "own"};
  config.consumers["b"] = {"b", dblog::config::ParseScope("public.*"), ""};
  const HelloContext context;
  EXPECT_EQ(Check(config, HelloBytes("a", "own"), context).code, Error::CODE_UNSPECIFIED);
  const Checked global_for_a = Check(config, HelloBytes("a", "global"), context);
  EXPECT_EQ(global_for_a.code, Error::AUTH_FAILED);
  EXPECT_EQ(global_for_a.message, "wrong or missing token for consumer 'a'");
  EXPECT_EQ(Check(config, HelloBytes("b", "own"), context).code, Error::AUTH_FAILED);
  EXPECT_EQ(Check(config, HelloBytes("b", "global"), context).code, Error::CODE_UNSPECIFIED);
}

TEST(CheckHello, ClientCertificateCnMustBeTheConsumer) {
  dblog::config::Config config;
  config.tls_client_ca = "/ca.pem";
  config.consumers["a"] = {"a", dblog::config::ParseScope("public.*"), ""};
  HelloContext context;
  context.peer_common_name = "b";
  const Checked wrong = Check(config, HelloBytes("a"), context);
  EXPECT_EQ(wrong.code, Error::AUTH_FAILED);
  EXPECT_EQ(wrong.message,
            "the client certificate (CN 'b') does not open consumer 'a': its CN must be the "
            "consumer name");
  context.peer_common_name = "a";
  EXPECT_EQ(Check(config, HelloBytes("a"), context).code, Error::CODE_UNSPECIFIED);
  config.tls_client_ca.clear();  // without client certificates the CN is not looked at
  context.peer_common_name = "";
  EXPECT_EQ(Check(config, HelloBytes("a"), context).code, Error::CODE_UNSPECIFIED);
}

TEST(CheckHello, MessagePrefixesAreChecked) {
  dblog::config::Config config;
  config.consumers["a"] = {"a", dblog::config::ParseScope("public.*"), ""};
  dblog::v1::ClientMessage m;
  m.mutable_hello()->set_protocol_version(1);
  m.mutable_hello()->set_consumer("a");
  m.mutable_hello()->add_message_prefixes("app.");
  EXPECT_EQ(Check(config, m.SerializeAsString(), {}).code, Error::CODE_UNSPECIFIED);
  m.mutable_hello()->add_message_prefixes("");
  const Checked bad = Check(config, m.SerializeAsString(), {});
  EXPECT_EQ(bad.code, Error::PROTOCOL_VIOLATION);
  EXPECT_EQ(bad.message.rfind("Hello.message_prefixes: ", 0), 0u);
}

std::string Respond(const std::string& request, const dblog::metrics::Registry& registry) {
  const auto reply = dblog::metrics::HttpRespond(request, registry);
  EXPECT_EQ(reply.kind, dblog::metrics::HttpReply::Kind::kResponse) << request;
  return reply.response;
}

TEST(HttpRespond, MetricsIndexAndRefusals) {
  dblog::metrics::Registry registry;
  registry.connections_total = 3;
  const std::string metrics = Respond("GET /metrics HTTP/1.1\r\n\r\n", registry);
  EXPECT_EQ(metrics.rfind("HTTP/1.0 200 OK\r\n", 0), 0u);
  EXPECT_NE(metrics.find("\ndblog_connections_total 3\n"), std::string::npos);
  EXPECT_EQ(Respond("GET / HTTP/1.0\r\n\r\n", registry),
            "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 47\r\n"
            "Connection: close\r\n\r\ndblogd: see /metrics, /status.json and /status\n");
  registry.ForConsumer("a");
  const std::string status = Respond("GET /status.json HTTP/1.1\r\n\r\n", registry);
  EXPECT_EQ(status.rfind("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n", 0), 0u)
      << status;
  EXPECT_NE(status.find("\r\n\r\n{\"now\":\""), std::string::npos) << status;
  EXPECT_NE(status.find(",\"consumers\":[{\"name\":\"a\",\"connected\":false,"), std::string::npos)
      << status;
  EXPECT_EQ(Respond("PUT /metrics\r\n\r\n", registry).rfind("HTTP/1.0 405 Method Not Allowed\r\n", 0),
            0u);
  EXPECT_EQ(Respond("GET /x\r\n\r\n", registry).rfind("HTTP/1.0 404 Not Found\r\n", 0), 0u);
  EXPECT_EQ(Respond("\r\n\r\n", registry).rfind("HTTP/1.0 405 ", 0), 0u);
}

// Registry::Render, the bytes of GET /metrics: each family's HELP and TYPE before its series,
// the daemon's families first, then one series per consumer in name order; LSNs and counters
// in full (not 6 significant digits); lag derived at render time, never negative.
TEST(MetricsRender, FamiliesThenOneSeriesPerConsumer) {
  dblog::metrics::Registry registry;
  registry.connections_total = 7;
  registry.tls_failed_timeout = 2;
  registry.http_refused_header_too_large = 3;
  const auto b = registry.ForConsumer("b");
  const auto a = registry.ForConsumer("a");
  a->confirmed_lsn = 0x100000000ULL;
  a->source_wal_lsn = 0x100000000ULL + 500;
  b->connected = 1;
  b->confirmed_lsn = 9;  // the slot ahead of the WAL position last reported: no lag
  b->source_wal_lsn = 5;
  const std::string text = registry.Render();
  const auto has = [&text](const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  EXPECT_EQ(text.rfind("# HELP dblog_connections_total Consumer TCP connections accepted.\n"
                       "# TYPE dblog_connections_total counter\n"
                       "dblog_connections_total 7\n"
                       "# HELP dblog_connections_refused_total ",
                       0),
            0u)
      << text;
  EXPECT_TRUE(has("\ndblog_tls_handshake_failures_total{reason=\"handshake\"} 0\n"
                  "dblog_tls_handshake_failures_total{reason=\"timeout\"} 2\n"
                  "dblog_tls_handshake_failures_total{reason=\"plaintext\"} 0\n"));
  EXPECT_TRUE(has("\ndblog_metrics_http_refused_total{reason=\"header_too_large\"} 3\n"
                  "# HELP dblog_unconfigured_consumers_refused_total "));
  EXPECT_TRUE(has("\n# TYPE dblog_consumer_connected gauge\n"
                  "dblog_consumer_connected{consumer=\"a\"} 0\n"
                  "dblog_consumer_connected{consumer=\"b\"} 1\n"
                  "# HELP dblog_consumer_events_sent_total Events sent to the consumer.\n"));
  EXPECT_TRUE(has("\ndblog_source_wal_lsn{consumer=\"a\"} 4294967796\n"));
  EXPECT_TRUE(has("\ndblog_consumer_lag_bytes{consumer=\"a\"} 500\n"
                  "dblog_consumer_lag_bytes{consumer=\"b\"} 0\n"));
  EXPECT_TRUE(has("\ndblog_consumer_lag_seconds{consumer=\"a\"} 0\n"));
  const std::string end = "\ndblog_foreign_markers_total{consumer=\"b\"} 0\n";
  EXPECT_EQ(text.substr(text.size() - end.size()), end);
  std::size_t families = 0;
  for (auto at = text.find("# HELP "); at != std::string::npos; at = text.find("# HELP ", at + 1))
    ++families;
  EXPECT_EQ(families, 8u + 30u);  // the daemon's, each consumer's
}

// metrics::RenderStatusJson, the body of GET /status.json: one object per consumer in name
// order, every name escaped (quotes, backslashes, control characters), the phase from the
// stats, lags derived at `now` and never negative, LSNs as PostgreSQL writes them; the last ack,
// the sink and the repairs in flight (no sink while disconnected); since when and how long a
// consumer has been disconnected; the slot's wal_status and safe_wal_size as last read.
TEST(StatusJson, OneEscapedObjectPerConsumerWithPhaseAndLags) {
  dblog::metrics::Registry registry;
  const std::int64_t now = 1764950400000000;  // 2025-12-05T16:00:00Z
  const auto streaming = registry.ForConsumer("s");
  streaming->connected = 1;
  streaming->connected_since_us = now - 90 * 1000000LL - 250000;
  streaming->acked_lsn = 0x100000000ULL + 100;
  streaming->confirmed_lsn = 0x100000000ULL + 50;
  streaming->source_wal_lsn = 0x100000000ULL + 600;
  streaming->oldest_unacked_commit_us = now - 1500000;
  streaming->reconciles_total = 2;
  streaming->window_redos = 3;
  streaming->last_ack_us = now - 2000000;
  streaming->SetSession("127.0.0.1:50312", "dblog-tail");
  streaming->SetSlotState("extended", 1048576);
  streaming->SetRepairs({{7, "public.\"t\"", "range", 40, 100, 2, true},
                         {8, "public.u", "keys", 0, 0, 0, false}});
  const auto copying = registry.ForConsumer("b");
  copying->connected = 1;
  copying->connected_since_us = now;
  copying->bootstrap_running = 1;
  copying->bootstrap_rows = 1200;
  copying->bootstrap_rows_estimated = 5000;
  copying->confirmed_lsn = 80;  // no ack in this session yet: lag from the slot's position
  copying->source_wal_lsn = 100;
  copying->oldest_unacked_commit_us = now + 5000000;  // a source clock ahead: no lag
  const auto waiting = registry.ForConsumer("c");
  waiting->connected = 1;
  waiting->connected_since_us = now;
  waiting->slot_creation_started_us = now - 1;
  // Names dblogd's handshake would refuse, as a registry may still hold any string.
  const auto odd = registry.ForConsumer("q\"uo\\te\nnew\x01line");
  odd->acked_lsn = 9;  // ahead of the WAL position last reported: no lag (the slot has some)
  odd->source_wal_lsn = 5;
  odd->connected_since_us = now;  // not connected: no time shown
  odd->SetSession("127.0.0.1:1", "gone");  // nor a sink
  odd->disconnected_since_us = now - 12 * 1000000LL;  // since its session ended

  EXPECT_EQ(
      dblog::metrics::RenderStatusJson(registry, now),
      "{\"now\":\"2025-12-05T16:00:00.000Z\",\"consumers\":["
      "{\"name\":\"b\",\"connected\":true,\"connected_since\":\"2025-12-05T16:00:00.000Z\","
      "\"disconnected_since\":null,\"disconnected_seconds\":0,"
      "\"phase\":\"bootstrapping\",\"bootstrap_rows_copied\":1200,"
      "\"bootstrap_rows_estimated\":5000,"
      "\"lag_bytes\":20,\"lag_seconds\":0,\"retained_bytes\":20,\"acked_lsn\":\"0/0\","
      "\"confirmed_lsn\":\"0/50\",\"source_wal_lsn\":\"0/64\",\"reconciles\":0,\"window_redos\":0,"
      "\"last_ack\":null,\"sink\":null,\"client\":null,\"slot_state\":null,\"slot_safe_wal_bytes\":null,\"repairs\":[]},"
      "{\"name\":\"c\",\"connected\":true,\"connected_since\":\"2025-12-05T16:00:00.000Z\","
      "\"disconnected_since\":null,\"disconnected_seconds\":0,"
      "\"phase\":\"creating_slot\",\"bootstrap_rows_copied\":0,\"bootstrap_rows_estimated\":0,"
      "\"lag_bytes\":0,\"lag_seconds\":0,\"retained_bytes\":0,\"acked_lsn\":\"0/0\","
      "\"confirmed_lsn\":\"0/0\",\"source_wal_lsn\":\"0/0\",\"reconciles\":0,\"window_redos\":0,"
      "\"last_ack\":null,\"sink\":null,\"client\":null,\"slot_state\":null,\"slot_safe_wal_bytes\":null,\"repairs\":[]},"
      "{\"name\":\"q\\\"uo\\\\te\\nnew\\u0001line\",\"connected\":false,\"connected_since\":null,"
      "\"disconnected_since\":\"2025-12-05T15:59:48.000Z\",\"disconnected_seconds\":12,"
      "\"phase\":\"disconnected\",\"bootstrap_rows_copied\":0,\"bootstrap_rows_estimated\":0,"
      "\"lag_bytes\":0,\"lag_seconds\":0,\"retained_bytes\":5,\"acked_lsn\":\"0/9\","
      "\"confirmed_lsn\":\"0/0\",\"source_wal_lsn\":\"0/5\",\"reconciles\":0,\"window_redos\":0,"
      "\"last_ack\":null,\"sink\":null,\"client\":null,\"slot_state\":null,\"slot_safe_wal_bytes\":null,\"repairs\":[]},"
      "{\"name\":\"s\",\"connected\":true,\"connected_since\":\"2025-12-05T15:58:29.750Z\","
      "\"disconnected_since\":null,\"disconnected_seconds\":0,"
      "\"phase\":\"streaming\",\"bootstrap_rows_copied\":0,\"bootstrap_rows_estimated\":0,"
      "\"lag_bytes\":500,\"lag_seconds\":1.5,\"retained_bytes\":550,\"acked_lsn\":\"1/64\","
      "\"confirmed_lsn\":\"1/32\",\"source_wal_lsn\":\"1/258\",\"reconciles\":2,\"window_redos\":3,"
      "\"last_ack\":\"2025-12-05T15:59:58.000Z\",\"sink\":\"127.0.0.1:50312\","
      "\"client\":\"dblog-tail\",\"slot_state\":\"extended\",\"slot_safe_wal_bytes\":1048576,"
      "\"repairs\":["
      "{\"id\":7,\"table\":\"public.\\\"t\\\"\",\"kind\":\"range\",\"done\":40,"
      "\"estimated\":100,\"chunks\":2,\"running\":true},"
      "{\"id\":8,\"table\":\"public.u\",\"kind\":\"keys\",\"done\":0,\"estimated\":0,"
      "\"chunks\":0,\"running\":false}]}"
      "]}\n");
  EXPECT_EQ(dblog::metrics::RenderStatusJson(dblog::metrics::Registry(), now),
            "{\"now\":\"2025-12-05T16:00:00.000Z\",\"consumers\":[]}\n");
}

TEST(HttpRespond, HeadEndAndSizeLimit) {
  using Kind = dblog::metrics::HttpReply::Kind;
  dblog::metrics::Registry registry;
  EXPECT_EQ(dblog::metrics::HttpRespond("", registry).kind, Kind::kNeedMore);
  EXPECT_EQ(dblog::metrics::HttpRespond("GET / HTTP/1.0\r\n", registry).kind, Kind::kNeedMore);
  const std::string full(dblog::metrics::HttpEndpoint::kMaxHeaderBytes, 'a');
  const auto too_large = dblog::metrics::HttpRespond(full, registry);
  EXPECT_EQ(too_large.kind, Kind::kTooLarge);
  EXPECT_EQ(too_large.response,
            "HTTP/1.0 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
            "Connection: close\r\n\r\n");
  // The blank line within the limit ends the head, whatever follows it.
  EXPECT_EQ(dblog::metrics::HttpRespond("GET / HTTP/1.0\r\n\r\n" + full, registry, 8192).kind,
            Kind::kResponse);
  EXPECT_EQ(dblog::metrics::HttpRespond("GET /\r\n\r\n", registry, 5).kind, Kind::kTooLarge);
}

}  // namespace
