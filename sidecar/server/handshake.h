// sidecar/server/handshake.h: the pure part of reading a consumer's frames: which ClientMessage
// a frame holds and whether it may come now (Session), and the Hello checks (Server). No
// sockets, no database: Session and Server call these, and so does tests/fuzz/.
// Owns: the rules and the Error code and message of each refusal. Not here: the cap on slots
// of consumers not named by --consumer (Server, it asks the database).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "config/config.h"
#include "dblog/v1/consumer.pb.h"

namespace dblog::server {

// What one client frame asks the session to do.
struct ClientFrame {
  enum class Kind { kHello, kAck, kError };
  Kind kind = Kind::kError;
  dblog::v1::Error::Code code = dblog::v1::Error::CODE_UNSPECIFIED;  // kError: what to send
  std::string error;                                                  // kError: why
};

// Parses `payload` (one frame's bytes) into *message and checks it against the session's
// state: a Hello only as the first message, an Ack only once a consumer is attached.
ClientFrame ParseClientFrame(std::string_view payload, bool hello_seen, bool attached,
                             dblog::v1::ClientMessage* message);

struct Refusal {
  dblog::v1::Error::Code code;
  std::string message;
};

// What CheckHello needs to know about the server and the connection.
struct HelloContext {
  bool shutting_down = false;
  // The CN of the client certificate (with --tls-client-ca; "" without a certificate).
  std::string peer_common_name;
  // Whether a consumer of this name has a live connection.
  std::function<bool(const std::string&)> connected;
};

// The Hello checks, in order: shutting down, protocol version, consumer name, the client
// certificate's CN (with --tls-client-ca: it must be the consumer name), token (the consumer's
// own, else the global one), message_prefixes, configured (by name or --default-scope), one live
// connection per name. nullopt: accepted; *consumer is its configuration and *configured tells
// whether --consumer names it (if not, it came by --default-scope).
std::optional<Refusal> CheckHello(const dblog::v1::Hello& hello, const config::Config& config,
                                  const HelloContext& context, config::ConsumerConfig* consumer,
                                  bool* configured);

}  // namespace dblog::server
