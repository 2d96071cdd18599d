// sidecar/server/handshake.cc: client frame and Hello checks (see handshake.h).
#include "server/handshake.h"

namespace dblog::server {
using dblog::v1::Error;

namespace {

// Compares without leaking where the first difference is.
bool SameToken(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

ClientFrame Violation(Error::Code code, std::string error) {
  return {ClientFrame::Kind::kError, code, std::move(error)};
}

}  // namespace

ClientFrame ParseClientFrame(std::string_view payload, bool hello_seen, bool attached,
                             dblog::v1::ClientMessage* message) {
  if (!message->ParseFromArray(payload.data(), static_cast<int>(payload.size())))
    return Violation(Error::BAD_FRAME, "frame is not a dblog.v1.ClientMessage");
  switch (message->msg_case()) {
    case dblog::v1::ClientMessage::kHello:
      if (hello_seen) return Violation(Error::PROTOCOL_VIOLATION, "Hello sent twice");
      return {ClientFrame::Kind::kHello, Error::CODE_UNSPECIFIED, {}};
    case dblog::v1::ClientMessage::kAck:
      if (!hello_seen || !attached)
        return Violation(Error::PROTOCOL_VIOLATION, "Ack before the handshake completed");
      return {ClientFrame::Kind::kAck, Error::CODE_UNSPECIFIED, {}};
    case dblog::v1::ClientMessage::MSG_NOT_SET:
      return Violation(Error::BAD_FRAME, "ClientMessage without a message");
  }
  return Violation(Error::BAD_FRAME, "unknown ClientMessage");
}

std::optional<Refusal> CheckHello(const dblog::v1::Hello& hello, const config::Config& config,
                                  const HelloContext& context, config::ConsumerConfig* consumer,
                                  bool* configured) {
  if (context.shutting_down) return Refusal{Error::SHUTTING_DOWN, "dblogd is shutting down"};
  if (hello.protocol_version() != dblog::v1::PROTOCOL_VERSION_1)
    return Refusal{Error::UNSUPPORTED_VERSION,
                   "protocol version " + std::to_string(hello.protocol_version()) +
                       " is not supported; this server speaks version 1"};
  if (!config::ValidConsumerName(hello.consumer()))
    return Refusal{Error::BAD_CONSUMER_NAME,
                   "consumer name '" + hello.consumer() +
                       "' is not valid: a-z first, then a-z, 0-9 or _, at most 48 characters"};
  // With client certificates, a certificate opens only the consumer its CN names.
  if (!config.tls_client_ca.empty() && context.peer_common_name != hello.consumer())
    return Refusal{Error::AUTH_FAILED, "the client certificate (CN '" + context.peer_common_name +
                                           "') does not open consumer '" + hello.consumer() +
                                           "': its CN must be the consumer name"};
  // The consumer's own token if it has one (no other opens it), else the global one.
  const std::string& expected = config::ExpectedToken(config, hello.consumer());
  if (!expected.empty() && !SameToken(hello.token(), expected))
    return Refusal{Error::AUTH_FAILED,
                   "wrong or missing token for consumer '" + hello.consumer() + "'"};
  if (const std::string wrong = config::CheckMessagePrefixes(
          {hello.message_prefixes().begin(), hello.message_prefixes().end()});
      !wrong.empty())
    return Refusal{Error::PROTOCOL_VIOLATION, "Hello.message_prefixes: " + wrong};
  *configured = config.consumers.count(hello.consumer()) > 0;
  if (*configured) {
    *consumer = config.consumers.at(hello.consumer());
  } else if (config.default_scope) {
    *consumer = {hello.consumer(), *config.default_scope, ""};
  } else {
    return Refusal{Error::UNKNOWN_CONSUMER,
                   "consumer '" + hello.consumer() +
                       "' is not configured (dblogd --consumer NAME=SCOPE) and there is no "
                       "--default-scope"};
  }
  if (context.connected && context.connected(hello.consumer()))
    return Refusal{Error::ALREADY_CONNECTED,
                   "consumer '" + hello.consumer() + "' already has a live connection"};
  return std::nullopt;
}

}  // namespace dblog::server
