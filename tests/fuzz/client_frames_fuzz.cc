// tests/fuzz/client_frames_fuzz.cc: what dblogd does with a consumer's bytes, without a socket:
// the session's framing (FrameDecoder at kMaxClientFrame), each frame as Session::HandleFrame
// reads it (server::ParseClientFrame), a Hello as Server::OnHello checks it
// (server::CheckHello, against a configuration the first input byte picks: global token,
// --default-scope, configured consumers, client certificates with CN 'a', a token of consumer
// 'a' of its own, shutting down), and Acks as
// Pipeline::OnAck applies them (never beyond what was sent, through emit::AckTracker).
// Properties: a refusal or an error always carries a code and a message; an accepted Hello has
// a valid name and a scope, the token it needs, valid message prefixes and, with client
// certificates, the certificate's CN as its name; the tracker's confirmable LSN never goes down.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "config/config.h"
#include "emit/ack_tracker.h"
#include "emit/position.h"
#include "fuzz_util.h"
#include "server/handshake.h"
#include "wire/frame.h"

using dblog::fuzz::Check;
using dblog::server::ClientFrame;

namespace {

// Bits 3 and 4 together: shutting down; bit 3 alone: client certificates; bit 4 alone: 'a' has
// a token of its own. Bits 5-7: how the bytes are cut (fuzz::Pieces).
bool ShuttingDown(std::uint8_t control) { return (control & 0x18) == 0x18; }
bool ClientCertificates(std::uint8_t control) { return (control & 0x18) == 0x08; }

dblog::config::Config MakeConfig(std::uint8_t control) {
  dblog::config::Config config;
  if (control & 1) config.token = "s3cret";
  if (control & 2) config.default_scope = dblog::config::ParseScope("public.*");
  if (control & 4) {
    config.consumers["orders"] = {"orders", dblog::config::ParseScope("public.orders"), ""};
    config.consumers["a"] = {"a", dblog::config::ParseScope("s.*,t.u"),
                             (control & 0x18) == 0x10 ? "a-token" : ""};
  }
  if (ClientCertificates(control)) config.tls_client_ca = "ca.pem";  // never read here
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t control = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const dblog::config::Config config = MakeConfig(control);
  const std::set<std::string> live = {"orders", "busy"};  // consumers with a live connection
  dblog::server::HelloContext context;
  context.shutting_down = ShuttingDown(control);
  context.peer_common_name = ClientCertificates(control) ? "a" : "";
  context.connected = [&live](const std::string& name) { return live.count(name) != 0; };

  dblog::wire::FrameDecoder decoder(dblog::wire::kMaxClientFrame);
  bool hello_seen = false, attached = false, closed = false;
  // What the pipeline would have sent: commits at (lsn, 1) for lsn 100, 200, ... 1000.
  dblog::emit::AckTracker acks(50);
  dblog::emit::Position last_sent{1000, 1};
  for (std::uint64_t lsn = 100; lsn <= 1000; lsn += 100) acks.OnCommitEmitted({lsn, 1}, lsn + 8);

  for (std::string_view piece : dblog::fuzz::Pieces(bytes, control >> 5)) {
    if (closed) break;
    decoder.Feed(piece);
    for (;;) {
      std::string_view payload;
      std::string error;
      const auto status = decoder.Next(&payload, &error);
      if (status == dblog::wire::FrameDecoder::Status::kNeedMore) break;
      if (status == dblog::wire::FrameDecoder::Status::kError) {
        Check(!error.empty(), "a bad frame says why");
        closed = true;
        break;
      }
      dblog::v1::ClientMessage message;
      const ClientFrame frame =
          dblog::server::ParseClientFrame(payload, hello_seen, attached, &message);
      if (frame.kind == ClientFrame::Kind::kError) {
        Check(frame.code != dblog::v1::Error::CODE_UNSPECIFIED && !frame.error.empty(),
              "a refused frame has a code and a message");
        closed = true;
        break;
      }
      if (frame.kind == ClientFrame::Kind::kHello) {
        Check(!hello_seen && message.has_hello(), "a Hello is the first message");
        hello_seen = true;
        dblog::config::ConsumerConfig consumer;
        bool configured = false;
        const auto refusal =
            dblog::server::CheckHello(message.hello(), config, context, &consumer, &configured);
        if (refusal) {
          Check(refusal->code != dblog::v1::Error::CODE_UNSPECIFIED && !refusal->message.empty(),
                "a refusal has a code and a message");
          closed = true;
          break;
        }
        Check(dblog::config::ValidConsumerName(message.hello().consumer()) &&
                  consumer.name == message.hello().consumer() && !consumer.scope.patterns().empty() &&
                  live.count(consumer.name) == 0 && !context.shutting_down,
              "an accepted Hello names a valid, configured consumer not yet connected");
        Check(configured == (config.consumers.count(consumer.name) != 0) &&
                  (configured || config.default_scope),
              "configured: named by --consumer, else by --default-scope");
        const std::string& expected = dblog::config::ExpectedToken(config, consumer.name);
        Check(expected.empty() || message.hello().token() == expected,
              "an accepted Hello carries the token its consumer needs");
        Check(consumer.name != "a" || (control & 0x18) != 0x10 || !(control & 4) ||
                  message.hello().token() == "a-token",
              "a consumer with a token of its own opens only with that one");
        Check(!ClientCertificates(control) || consumer.name == context.peer_common_name,
              "with client certificates, only the consumer the CN names");
        Check(dblog::config::CheckMessagePrefixes({message.hello().message_prefixes().begin(),
                                                   message.hello().message_prefixes().end()})
                  .empty(),
              "an accepted Hello has valid message prefixes");
        // The pipeline's plugin option for the scope must be computable.
        (void)dblog::config::PluginIncludeOption(consumer.scope);
        (void)dblog::emit::Position::FromProto(message.hello().resume_after()).ToString();
        attached = true;
        continue;
      }
      Check(frame.kind == ClientFrame::Kind::kAck && hello_seen && attached && message.has_ack(),
            "an Ack comes after an accepted Hello");
      const auto pos = dblog::emit::Position::FromProto(message.ack().position());
      if (last_sent < pos) {  // Pipeline::OnAck: "Ack of a position that was never sent"
        closed = true;
        break;
      }
      const std::uint64_t before = acks.confirmable_lsn();
      try {
        const std::uint64_t lsn = acks.OnAck(pos);
        Check(lsn >= before && lsn == acks.confirmable_lsn(), "the confirmable LSN never goes down");
        Check(lsn <= 1008, "nothing beyond what was sent is confirmed");
      } catch (const dblog::emit::AckError&) {
        closed = true;
        break;
      }
    }
  }
  return 0;
}
