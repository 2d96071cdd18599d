// tests/fuzz/metrics_http_fuzz.cc: the /metrics endpoint's request parser
// (metrics::HttpRespond) on arbitrary bytes received so far. The endpoint reads up to
// HttpEndpoint::kMaxHeaderBytes (8192) until a blank line (run with -max_len=8192). Properties:
// no answer while the head has not ended within the limit; 431 when the limit holds no end;
// else one HTTP/1.0 status line, headers and a body whose length Content-Length states, and a
// 200 only for GET / and GET /metrics.
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "metrics/metrics.h"

using dblog::fuzz::Check;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kMax = dblog::metrics::HttpEndpoint::kMaxHeaderBytes;
  if (size > kMax) return 0;  // the endpoint's streambuf limit: never received
  const std::string request(reinterpret_cast<const char*>(data), size);
  static dblog::metrics::Registry* registry = [] {
    auto* r = new dblog::metrics::Registry();
    r->ForConsumer("orders")->events_sent = 42;
    r->ForConsumer("b")->oldest_unacked_commit_us = 1;
    return r;
  }();
  using Kind = dblog::metrics::HttpReply::Kind;
  const dblog::metrics::HttpReply reply = dblog::metrics::HttpRespond(request, *registry);
  const bool ended = request.find("\r\n\r\n") != std::string::npos;
  if (!ended) {
    Check(reply.kind == (size < kMax ? Kind::kNeedMore : Kind::kTooLarge),
          "without a blank line: read on, or 431 at the limit");
    if (reply.kind == Kind::kTooLarge)
      Check(reply.response.rfind("HTTP/1.0 431 ", 0) == 0, "a 431 for a head too large");
    else
      Check(reply.response.empty(), "no answer before the head ends");
    return 0;
  }
  Check(reply.kind == Kind::kResponse, "a head that ended is answered");
  const std::string& response = reply.response;
  Check(response.rfind("HTTP/1.0 ", 0) == 0, "an HTTP/1.0 status line");
  const std::size_t head_end = response.find("\r\n\r\n");
  Check(head_end != std::string::npos, "the head ends with a blank line");
  const std::string head = response.substr(0, head_end + 2);
  const std::string body = response.substr(head_end + 4);
  Check(head.find("\r\nContent-Length: " + std::to_string(body.size()) + "\r\n") !=
            std::string::npos,
        "Content-Length is the body's length");
  if (head.rfind("HTTP/1.0 200 ", 0) == 0)
    Check(request.rfind("GET", 0) == 0 || std::isspace(static_cast<unsigned char>(request[0])),
          "200 only for GET");
  return 0;
}
