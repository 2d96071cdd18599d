// client/publish/schema_registry.cc: see schema_registry.h.
#include "client/publish/schema_registry.h"

#include <boost/asio.hpp>
#include <cctype>
#include <stdexcept>

#include "client/publish/broker.h"
#include "common/json.h"

namespace dblog::publish {

namespace asio = boost::asio;
using asio::ip::tcp;

void ParseRegistryUrl(const std::string& url, std::string& host, std::string& port,
                      std::string& path) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0)
    throw std::invalid_argument("'" + url + "': http://HOST:PORT (https is not supported)");
  std::string rest = url.substr(scheme.size());
  const std::size_t slash = rest.find('/');
  path = slash == std::string::npos ? "" : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.pop_back();
  rest = rest.substr(0, slash);
  const std::size_t colon = rest.rfind(':');
  host = colon == std::string::npos ? rest : rest.substr(0, colon);
  port = colon == std::string::npos ? "80" : rest.substr(colon + 1);
  bool ok = !host.empty() && !port.empty() && port.size() <= 5;
  for (const char c : port) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  for (const char c : path) ok = ok && c > ' ' && c != '?' && c != '#';
  if (!ok) throw std::invalid_argument("'" + url + "': http://HOST:PORT[/PATH]");
}

HttpSchemaRegistry::HttpSchemaRegistry(const std::string& url, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  ParseRegistryUrl(url, host_, port_, path_);
}

namespace {

// A subject in a URL path: RFC 3986 unreserved characters stay, the rest %XX.
std::string PathSegment(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace

std::int32_t HttpSchemaRegistry::Register(const std::string& subject,
                                          const std::string& avro_schema) {
  std::string body = "{\"schema\":";
  common::AppendJsonString(body, avro_schema);
  body += "}";
  const std::string target = path_ + "/subjects/" + PathSegment(subject) + "/versions";
  const std::string request = "POST " + target + " HTTP/1.0\r\nHost: " + host_ + ":" + port_ +
                              "\r\nContent-Type: application/vnd.schemaregistry.v1+json\r\n"
                              "Accept: application/vnd.schemaregistry.v1+json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  asio::io_context io;
  tcp::resolver resolver(io);
  tcp::socket socket(io);
  std::string response;
  boost::system::error_code result = asio::error::timed_out;
  resolver.async_resolve(host_, port_, [&](boost::system::error_code ec,
                                           tcp::resolver::results_type endpoints) {
    if (ec) {
      result = ec;
      return;
    }
    asio::async_connect(socket, endpoints, [&](boost::system::error_code ec, const tcp::endpoint&) {
      if (ec) {
        result = ec;
        return;
      }
      asio::async_write(socket, asio::buffer(request), [&](boost::system::error_code ec,
                                                           std::size_t) {
        if (ec) {
          result = ec;
          return;
        }
        asio::async_read(socket, asio::dynamic_buffer(response, 1 << 20),
                         [&](boost::system::error_code ec, std::size_t) { result = ec; });
      });
    });
  });
  io.run_for(timeout_);
  const std::string where = "schema registry " + host_ + ":" + port_;
  if (result && result != asio::error::eof)
    throw BrokerError(where + ": POST " + target + ": " + result.message(), true);
  const std::size_t head_end = response.find("\r\n\r\n");
  const std::string status_line = response.substr(0, response.find("\r\n"));
  const std::size_t space = status_line.find(' ');
  if (response.rfind("HTTP/", 0) != 0 || head_end == std::string::npos ||
      space == std::string::npos)
    throw BrokerError(where + " did not answer HTTP to POST " + target, true);
  const std::string answer = response.substr(head_end + 4);
  const std::string code = status_line.substr(space + 1, 3);
  if (code != "200") {
    // 409 (incompatible), 422 (invalid schema), 401/403: the registry refuses the schema or
    // us, and retrying cannot change it; 5xx may pass
    const bool retryable = !code.empty() && code[0] == '5';
    throw BrokerError(where + " refused the schema of subject '" + subject + "': " +
                          status_line.substr(space + 1) + " " + answer.substr(0, 500),
                      retryable);
  }
  const std::size_t id_key = answer.find("\"id\"");
  std::size_t i = id_key == std::string::npos ? std::string::npos : answer.find(':', id_key);
  if (i == std::string::npos)
    throw BrokerError(where + ": an answer without an id: " + answer.substr(0, 200), true);
  ++i;
  while (i < answer.size() && answer[i] == ' ') ++i;
  std::int64_t id = 0;
  std::size_t digits = 0;
  for (; i < answer.size() && std::isdigit(static_cast<unsigned char>(answer[i])); ++i, ++digits)
    id = id * 10 + (answer[i] - '0');
  if (!digits || id > 0x7FFFFFFF)
    throw BrokerError(where + ": an answer without an id: " + answer.substr(0, 200), true);
  return static_cast<std::int32_t>(id);
}

}  // namespace dblog::publish
