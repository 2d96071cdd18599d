// sidecar/server/tls.cc: TLS settings of the consumer listener (see tls.h).
#include "server/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace dblog::server {
namespace ssl = boost::asio::ssl;

namespace {

// What OpenSSL says went wrong, for a message naming the setting.
std::string Reason(const boost::system::error_code& ec) {
  std::string r = ec.message();
  return r.empty() ? "unknown error" : r;
}

}  // namespace

std::shared_ptr<ssl::context> MakeServerContext(const config::Config& config) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                   ssl::context::no_compression | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx->native_handle(),
                      SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(config.tls_cert, ec);
  if (ec)
    throw config::ConfigError("tls-cert: '" + config.tls_cert +
                              "' is not a usable PEM certificate: " + Reason(ec));
  ctx->use_private_key_file(config.tls_key, ssl::context::pem, ec);
  if (ec && Reason(ec).find("mismatch") != std::string::npos)
    throw config::ConfigError("tls-key: '" + config.tls_key + "' does not match the certificate '" +
                              config.tls_cert + "'");
  if (ec)
    throw config::ConfigError("tls-key: '" + config.tls_key +
                              "' is not a usable PEM private key: " + Reason(ec));
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    throw config::ConfigError("tls-key: '" + config.tls_key + "' does not match the certificate '" +
                              config.tls_cert + "'");
  if (!config.tls_client_ca.empty()) {
    ctx->load_verify_file(config.tls_client_ca, ec);
    if (ec)
      throw config::ConfigError("tls-client-ca: '" + config.tls_client_ca +
                                "' is not a usable PEM CA certificate: " + Reason(ec));
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    // Tell clients which CA to pick a certificate for.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(config.tls_client_ca.c_str()))
      SSL_CTX_set_client_CA_list(ctx->native_handle(), names);
  } else {
    ctx->set_verify_mode(ssl::verify_none);
  }
  ERR_clear_error();
  return ctx;
}

std::string PeerCommonName(SSL* ssl) {
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return "";
  std::string cn;
  const X509_NAME* subject = X509_get_subject_name(cert);
  const int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (at >= 0 && X509_NAME_get_index_by_NID(subject, NID_commonName, at) < 0) {
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, data);
    if (n > 0) {
      cn.assign(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(n));
      if (cn.find('\0') != std::string::npos) cn.clear();
    }
    OPENSSL_free(utf8);
  }
  X509_free(cert);
  return cn;
}

std::string HandshakeError(const boost::system::error_code& ec) {
  if (ec.category() == boost::asio::error::get_ssl_category()) {
    const char* reason = ERR_reason_error_string(static_cast<unsigned long>(ec.value()));
    if (reason != nullptr) return reason;
  }
  return ec.message();
}

}  // namespace dblog::server
