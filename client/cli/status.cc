// client/cli/status.cc: `dblog status` (see status.h).
//
// The document is read with Boost.PropertyTree's JSON parser (header-only, part of the Boost
// the build already finds): it keeps every value as text, which is all the table needs, and
// decodes string escapes.
#include "client/cli/status.h"

#include <boost/asio.hpp>
#include <boost/program_options.hpp>
#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <algorithm>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace dblog::cli {

namespace po = boost::program_options;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// The largest answer read: far above any real status document.
constexpr std::size_t kMaxResponseBytes = 64 << 20;

po::options_description StatusFlags() {
  po::options_description flags("Options");
  // clang-format off
  flags.add_options()
      ("metrics-address", po::value<std::string>()->value_name("HOST:PORT"),
       "dblogd's metrics listener, its --metrics-listen (default: $DBLOG_METRICS_ADDRESS, else "
       "127.0.0.1:9187); an IPv6 address in brackets: [::1]:9187")
      ("json", po::bool_switch(), "print the status document as dblogd sent it (JSON)")
      ("max-lag-bytes", po::value<std::string>()->value_name("N"),
       "a consumer whose lag_bytes exceeds N is unhealthy (exit status 1)")
      ("max-lag-seconds", po::value<std::string>()->value_name("SECONDS"),
       "a consumer whose lag_seconds exceeds SECONDS is unhealthy (exit status 1)")
      ("max-disconnected-seconds", po::value<std::string>()->value_name("SECONDS"),
       "a disconnected consumer is unhealthy once disconnected longer than SECONDS (default 0: "
       "at once; a sink restarting, or a consumer that connects only now and then)")
      ("timeout", po::value<std::string>()->value_name("SECONDS"),
       "give up on dblogd after this long (default 5; exit status 2)")
      ("help,h", "show this help and exit");
  // clang-format on
  return flags;
}

// "host:port" or "[v6 address]:port".
void ParseAddress(const std::string& text, const std::string& what, StatusOptions& options) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw UsageError("invalid " + what + " '" + text + "': expected HOST:PORT");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) throw UsageError("invalid " + what + " '" + text + "': expected HOST:PORT");
  options.host = host;
  options.port = static_cast<std::uint16_t>(ParseNumber(text.substr(colon + 1), 1, 65535, what));
}

// A name as the terminal gets it: control characters would move the cursor or reset colours.
std::string Printable(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) c = '?';
  }
  return out;
}

std::string FormatSeconds(double seconds) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << seconds;
  return out.str();
}

// "streaming", "bootstrapping 1200/5000 rows", "repairing #7 a.t 45% (+2 queued)",
// "disconnected 12.0 s", ...
std::string PhaseText(const ConsumerStatus& c) {
  if (c.phase == "bootstrapping")
    return "bootstrapping " + std::to_string(c.bootstrap_rows_copied) + "/" +
           std::to_string(c.bootstrap_rows_estimated) + " rows";
  if (c.phase == "disconnected" && c.disconnected_seconds > 0)
    return "disconnected " + FormatSeconds(c.disconnected_seconds) + " s";
  if (c.phase == "streaming" && !c.repairs.empty()) {
    const RepairStatus& r = c.repairs.front();
    std::string text = "repairing #" + std::to_string(r.id) + " " + Printable(r.table) + " ";
    if (r.estimated > 0) {
      text += std::to_string(std::min<std::uint64_t>(100, r.done * 100 / r.estimated)) + "%";
    } else {
      text += std::to_string(r.done) + (r.kind == "keys" ? " keys" : " rows");
    }
    if (!r.running) text += " (queued)";
    if (c.repairs.size() > 1) text += " (+" + std::to_string(c.repairs.size() - 1) + " queued)";
    return text;
  }
  return Printable(c.phase);
}

// Display width of UTF-8 text, counting code points (names are ASCII; LSNs and times too).
std::size_t Width(const std::string& text) {
  std::size_t n = 0;
  for (const char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

std::string StatusHelp() {
  std::ostringstream help;
  help << "Usage: dblog status [options]\n"
          "\n"
          "Shows every consumer dblogd knows (configured ones also before they connect): one\n"
          "line each with its phase (streaming, bootstrapping, repairing which request how\n"
          "far, disconnected for how long), connected since, lag in bytes and seconds, the\n"
          "WAL its slot retains, the positions acknowledged and confirmed, the last\n"
          "acknowledgement, the sink's address, reconciles and repair window redos. Read from\n"
          "GET /status.json on dblogd's metrics listener (the same access as /metrics: no\n"
          "token, restrict the listener's address).\n"
          "\n"
       << StatusFlags()
       << "\n"
          "Exit status: 0 when every consumer is connected (or disconnected for at most\n"
          "--max-disconnected-seconds) and within the --max-lag-* given,\n"
          "1 when one is not (each reason on stderr), 2 when dblogd cannot be reached or the\n"
          "command line is wrong.\n";
  return help.str();
}

std::optional<StatusOptions> ParseStatusArgs(const std::vector<std::string>& args,
                                             const Environment& env, std::ostream& help_out) {
  const po::options_description flags = StatusFlags();
  const po::variables_map vm = ParseFlags(args, flags);
  if (vm.count("help")) {
    help_out << StatusHelp();
    return std::nullopt;
  }
  StatusOptions options;
  if (vm.count("metrics-address")) {
    ParseAddress(vm["metrics-address"].as<std::string>(), "--metrics-address", options);
  } else if (const auto address = env("DBLOG_METRICS_ADDRESS"); address && !address->empty()) {
    ParseAddress(*address, "DBLOG_METRICS_ADDRESS", options);
  } else {
    ParseAddress(kDefaultMetricsAddress, "the default address", options);
  }
  options.json = vm["json"].as<bool>();
  if (vm.count("max-lag-bytes")) {
    options.max_lag_bytes = ParseNumber(vm["max-lag-bytes"].as<std::string>(), 0,
                                        std::numeric_limits<std::uint64_t>::max(),
                                        "--max-lag-bytes");
  }
  if (vm.count("max-lag-seconds")) {
    options.max_lag_seconds =
        ParseSeconds(vm["max-lag-seconds"].as<std::string>(), 0, 1e8, "--max-lag-seconds")
            .count() /
        1000.0;
  }
  if (vm.count("max-disconnected-seconds")) {
    options.max_disconnected_seconds =
        ParseSeconds(vm["max-disconnected-seconds"].as<std::string>(), 0, 1e8,
                     "--max-disconnected-seconds")
            .count() /
        1000.0;
  }
  if (vm.count("timeout")) {
    options.timeout = ParseSeconds(vm["timeout"].as<std::string>(), 0.001, 3600, "--timeout");
  }
  return options;
}

std::vector<ConsumerStatus> ParseStatusDocument(const std::string& json) {
  namespace pt = boost::property_tree;
  pt::ptree doc;
  try {
    std::istringstream in(json);
    pt::read_json(in, doc);
  } catch (const pt::json_parser_error& e) {
    throw std::runtime_error(std::string("not JSON: ") + e.what());
  }
  std::vector<ConsumerStatus> consumers;
  try {
    for (const auto& [key, c] : doc.get_child("consumers")) {
      (void)key;
      ConsumerStatus s;
      s.name = c.get<std::string>("name");
      s.connected = c.get<std::string>("connected") == "true";
      s.connected_since = c.get<std::string>("connected_since");
      if (s.connected_since == "null") s.connected_since.clear();
      s.phase = c.get<std::string>("phase");
      s.bootstrap_rows_copied = c.get<std::uint64_t>("bootstrap_rows_copied");
      s.bootstrap_rows_estimated = c.get<std::uint64_t>("bootstrap_rows_estimated");
      s.lag_bytes = c.get<std::uint64_t>("lag_bytes");
      s.lag_seconds = c.get<double>("lag_seconds");
      s.retained_bytes = c.get<std::uint64_t>("retained_bytes");
      s.acked_lsn = c.get<std::string>("acked_lsn");
      s.confirmed_lsn = c.get<std::string>("confirmed_lsn");
      s.reconciles = c.get<std::uint64_t>("reconciles");
      s.window_redos = c.get<std::uint64_t>("window_redos");
      // written since dblogd 0.x's status page (absent from older documents)
      s.disconnected_seconds = c.get<double>("disconnected_seconds", 0.0);
      s.last_ack = c.get<std::string>("last_ack", "");
      if (s.last_ack == "null") s.last_ack.clear();
      s.sink = c.get<std::string>("sink", "");
      if (s.sink == "null") s.sink.clear();
      s.slot_state = c.get<std::string>("slot_state", "");
      if (s.slot_state == "null") s.slot_state.clear();
      if (const auto repairs = c.get_child_optional("repairs")) {
        for (const auto& [unused, r] : *repairs) {
          (void)unused;
          RepairStatus repair;
          repair.id = r.get<std::uint64_t>("id");
          repair.table = r.get<std::string>("table");
          repair.kind = r.get<std::string>("kind");
          repair.done = r.get<std::uint64_t>("done");
          repair.estimated = r.get<std::uint64_t>("estimated");
          repair.running = r.get<std::string>("running") == "true";
          s.repairs.push_back(std::move(repair));
        }
      }
      consumers.push_back(std::move(s));
    }
  } catch (const pt::ptree_error& e) {
    throw std::runtime_error(std::string("not a dblogd status document: ") + e.what());
  }
  return consumers;
}

std::string RenderStatusTable(const std::vector<ConsumerStatus>& consumers) {
  const std::vector<std::string> header = {"CONSUMER",  "PHASE",     "CONNECTED SINCE",
                                           "LAG BYTES", "LAG S",     "RETAINED BYTES",
                                           "SLOT",      "ACKED",     "CONFIRMED",
                                           "LAST ACK",  "SINK",      "RECONCILES",
                                           "REDOS"};
  // Numbers are right-aligned, text left-aligned.
  const std::vector<bool> right = {false, false, false, true,  true,  true, false,
                                   false, false, false, false, true,  true};
  std::vector<std::vector<std::string>> rows = {header};
  auto or_dash = [](const std::string& text) { return text.empty() ? "-" : Printable(text); };
  for (const ConsumerStatus& c : consumers) {
    rows.push_back({Printable(c.name), PhaseText(c), or_dash(c.connected_since),
                    std::to_string(c.lag_bytes), FormatSeconds(c.lag_seconds),
                    std::to_string(c.retained_bytes), or_dash(c.slot_state),
                    Printable(c.acked_lsn),
                    Printable(c.confirmed_lsn), or_dash(c.last_ack), or_dash(c.sink),
                    std::to_string(c.reconciles), std::to_string(c.window_redos)});
  }
  std::vector<std::size_t> widths(header.size(), 0);
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], Width(row[i]));
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const std::string pad(widths[i] - Width(row[i]), ' ');
      if (i > 0) line += "  ";
      line += right[i] ? pad + row[i] : row[i] + pad;
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

std::vector<std::string> Unhealthy(const ConsumerStatus& c, const StatusOptions& options) {
  std::vector<std::string> reasons;
  if (!c.connected) {
    if (options.max_disconnected_seconds == 0) {
      reasons.push_back("disconnected");
    } else if (c.disconnected_seconds > options.max_disconnected_seconds) {
      reasons.push_back("disconnected for " + FormatSeconds(c.disconnected_seconds) +
                        " s, longer than --max-disconnected-seconds " +
                        FormatSeconds(options.max_disconnected_seconds));
    }
  }
  if (options.max_lag_bytes && c.lag_bytes > *options.max_lag_bytes) {
    reasons.push_back("lag_bytes " + std::to_string(c.lag_bytes) + " exceeds --max-lag-bytes " +
                      std::to_string(*options.max_lag_bytes));
  }
  if (options.max_lag_seconds && c.lag_seconds > *options.max_lag_seconds) {
    reasons.push_back("lag_seconds " + FormatSeconds(c.lag_seconds) +
                      " exceeds --max-lag-seconds " + FormatSeconds(*options.max_lag_seconds));
  }
  return reasons;
}

std::string FetchStatus(const std::string& host, std::uint16_t port,
                        std::chrono::milliseconds timeout) {
  asio::io_context io;
  tcp::resolver resolver(io);
  tcp::socket socket(io);
  const std::string request = "GET /status.json HTTP/1.0\r\nHost: " + host + "\r\n\r\n";
  std::string response;
  boost::system::error_code result = asio::error::timed_out;
  const char* step = "connecting";
  resolver.async_resolve(host, std::to_string(port), [&](boost::system::error_code ec,
                                                         tcp::resolver::results_type endpoints) {
    if (ec) {
      result = ec;
      step = "resolving";
      return;
    }
    asio::async_connect(socket, endpoints, [&](boost::system::error_code ec, const tcp::endpoint&) {
      if (ec) {
        result = ec;
        return;
      }
      step = "sending the request";
      asio::async_write(socket, asio::buffer(request), [&](boost::system::error_code ec,
                                                           std::size_t) {
        if (ec) {
          result = ec;
          return;
        }
        step = "reading the answer";
        asio::async_read(socket, asio::dynamic_buffer(response, kMaxResponseBytes),
                         [&](boost::system::error_code ec, std::size_t) { result = ec; });
      });
    });
  });
  io.run_for(timeout);
  const std::string where = host + ":" + std::to_string(port);
  if (result == asio::error::timed_out) {
    throw std::runtime_error("no answer from " + where + " within the timeout (" + step + ")");
  }
  if (result && result != asio::error::eof) {
    throw std::runtime_error(std::string(step) + " " + where + ": " + result.message());
  }
  const auto head_end = response.find("\r\n\r\n");
  if (response.rfind("HTTP/", 0) != 0 || head_end == std::string::npos) {
    throw std::runtime_error(where + " did not answer HTTP (is it dblogd's metrics listener?)");
  }
  const std::string status_line = response.substr(0, response.find("\r\n"));
  const auto space = status_line.find(' ');
  if (space == std::string::npos || status_line.compare(space + 1, 3, "200") != 0) {
    throw std::runtime_error(where + " answered '" + Printable(status_line) +
                             "' to GET /status.json (a dblogd without it?)");
  }
  return response.substr(head_end + 4);
}

int RunStatus(const StatusOptions& options, std::FILE* out, std::FILE* err) {
  std::string body;
  std::vector<ConsumerStatus> consumers;
  try {
    body = FetchStatus(options.host, options.port, options.timeout);
    consumers = ParseStatusDocument(body);
  } catch (const std::exception& e) {
    std::fprintf(err, "dblog status: %s\n", e.what());
    return 2;
  }
  const std::string text = options.json ? body : RenderStatusTable(consumers);
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
  int status = 0;
  for (const ConsumerStatus& c : consumers) {
    for (const std::string& reason : Unhealthy(c, options)) {
      std::fprintf(err, "dblog status: consumer %s: %s\n", Printable(c.name).c_str(),
                   reason.c_str());
      status = 1;
    }
  }
  return status;
}

}  // namespace dblog::cli
