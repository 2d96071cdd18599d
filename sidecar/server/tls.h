// sidecar/server/tls.h: the TLS side of the consumer listener: the server context built from
// --tls-cert/--tls-key/--tls-client-ca, and what a handshake tells about the peer.
// Owns: TLS settings (protocol floor, options, verification). Does not accept or read (Server,
// Session).
#pragma once

#include <boost/asio/ssl.hpp>
#include <memory>
#include <string>

#include "config/config.h"

namespace dblog::server {

// The consumer listener's TLS context: TLS 1.2 or later, no compression, no renegotiation;
// with --tls-client-ca, a client certificate signed by it is required. Throws
// config::ConfigError naming the setting when a file is not a usable PEM certificate or key
// (or the key does not match the certificate).
std::shared_ptr<boost::asio::ssl::context> MakeServerContext(const config::Config& config);

// The subject CN of the peer's verified certificate; "" when it sent none, or it has no CN or
// several, or the CN holds a NUL byte.
std::string PeerCommonName(SSL* ssl);

// The first OpenSSL error reason of a failed handshake, shorter than ec.message() where that
// holds the whole error stack.
std::string HandshakeError(const boost::system::error_code& ec);

}  // namespace dblog::server
