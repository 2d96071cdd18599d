// sidecar/metrics/metrics.cc: Prometheus rendering and a minimal HTTP endpoint (see metrics.h).
#include "metrics/metrics.h"

#include <chrono>
#include <sstream>

namespace dblog::metrics {
namespace asio = boost::asio;
using asio::ip::tcp;

std::shared_ptr<ConsumerStats> Registry::ForConsumer(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto& slot = consumers_[name];
  if (!slot) slot = std::make_shared<ConsumerStats>();
  return slot;
}

void Registry::Forget(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  consumers_.erase(name);
}

namespace {

void Family(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

}  // namespace

std::string Registry::Render() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  out.precision(17);  // LSNs and byte counters, not 6 significant digits
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();

  Family(out, "dblog_connections_total", "counter", "Consumer TCP connections accepted.");
  out << "dblog_connections_total " << connections_total << "\n";
  Family(out, "dblog_connections_refused_total", "counter",
         "Consumer connections refused at the handshake (auth, name, duplicate, version, "
         "unconfigured cap).");
  out << "dblog_connections_refused_total " << connections_refused << "\n";
  Family(out, "dblog_bad_frames_total", "counter", "Malformed, oversized or unexpected frames.");
  out << "dblog_bad_frames_total " << bad_frames << "\n";
  Family(out, "dblog_unconfigured_consumers_refused_total", "counter",
         "Handshakes of consumers not named by --consumer refused because "
         "--max-unconfigured-consumers of their slots exist.");
  out << "dblog_unconfigured_consumers_refused_total " << unconfigured_refused << "\n";

  struct Metric {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const ConsumerStats&, std::int64_t now_us);
  };
  static const Metric kMetrics[] = {
      {"dblog_consumer_connected", "gauge", "1 while the consumer is connected.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.connected.load()); }},
      {"dblog_consumer_events_sent_total", "counter", "Events sent to the consumer.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.events_sent.load()); }},
      {"dblog_consumer_bytes_sent_total", "counter", "Bytes of frames sent to the consumer.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.bytes_sent.load()); }},
      {"dblog_consumer_transactions_sent_total", "counter", "Transactions sent to the consumer.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.transactions_sent.load()); }},
      {"dblog_consumer_acked_lsn", "gauge", "WAL position the consumer acknowledged.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.acked_lsn.load()); }},
      {"dblog_slot_confirmed_lsn", "gauge",
       "WAL position the consumer's slot was confirmed to (confirmed_flush_lsn).",
       [](const ConsumerStats& s, std::int64_t) { return double(s.confirmed_lsn.load()); }},
      {"dblog_source_wal_lsn", "gauge", "WAL position of the source as last reported to dblogd.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.source_wal_lsn.load()); }},
      {"dblog_consumer_lag_bytes", "gauge",
       "Bytes of source WAL not yet acknowledged by the consumer.",
       [](const ConsumerStats& s, std::int64_t) {
         const auto wal = s.source_wal_lsn.load(), confirmed = s.confirmed_lsn.load();
         return wal > confirmed ? double(wal - confirmed) : 0.0;
       }},
      {"dblog_consumer_lag_seconds", "gauge",
       "Age of the oldest commit sent but not yet acknowledged (0 when all are).",
       [](const ConsumerStats& s, std::int64_t now) {
         const auto oldest = s.oldest_unacked_commit_us.load();
         return oldest == 0 || now < oldest ? 0.0 : double(now - oldest) / 1e6;
       }},
      {"dblog_consumer_queued_bytes", "gauge", "Bytes queued for the consumer, not yet sent.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.queued_bytes.load()); }},
      {"dblog_consumer_backpressure_pauses_total", "counter",
       "Times reading the slot paused because the consumer was slow.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.paused_total.load()); }},
      {"dblog_source_reconnects_total", "counter", "Reconnections to the source database.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.source_reconnects.load()); }},
      {"dblog_bootstrap_running", "gauge", "1 while a bootstrap copy runs for the consumer.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.bootstrap_running.load()); }},
      {"dblog_bootstrap_rows_copied", "gauge", "Rows copied by the current or last bootstrap.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.bootstrap_rows.load()); }},
      {"dblog_bootstrap_rows_estimated", "gauge", "Rows the current or last bootstrap expects.",
       [](const ConsumerStats& s, std::int64_t) {
         return double(s.bootstrap_rows_estimated.load());
       }},
      {"dblog_bootstraps_total", "counter", "Bootstraps started.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.bootstraps_total.load()); }},
      {"dblog_repair_window_redos_total", "counter",
       "Repair windows whose chunk was read again because widening could not be decided.",
       [](const ConsumerStats& s, std::int64_t) { return double(s.window_redos.load()); }},
      {"dblog_foreign_markers_total", "counter",
       "Watermark-like messages in the log that dblogd did not open (ignored).",
       [](const ConsumerStats& s, std::int64_t) { return double(s.foreign_markers.load()); }},
  };
  for (const Metric& m : kMetrics) {
    Family(out, m.name, m.type, m.help);
    for (const auto& [name, stats] : consumers_)
      out << m.name << "{consumer=\"" << name << "\"} " << m.value(*stats, now_us) << "\n";
  }
  return out.str();
}

HttpEndpoint::HttpEndpoint(asio::io_context& io, const tcp::endpoint& at,
                           const Registry& registry)
    : acceptor_(io, at), registry_(registry) {}

void HttpEndpoint::Start() { Accept(); }

void HttpEndpoint::Stop() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

void HttpEndpoint::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec) return;  // closed
    auto sock = std::make_shared<tcp::socket>(std::move(socket));
    auto buf = std::make_shared<asio::streambuf>(8192);
    asio::async_read_until(
        *sock, *buf, "\r\n\r\n", [this, sock, buf](boost::system::error_code rec, std::size_t) {
          if (rec) return;
          std::istream in(buf.get());
          std::string method, path;
          in >> method >> path;
          std::string body, status = "200 OK", type = "text/plain; version=0.0.4";
          if (method != "GET") {
            status = "405 Method Not Allowed";
            body = "only GET\n";
          } else if (path == "/metrics") {
            body = registry_.Render();
          } else if (path == "/") {
            type = "text/plain";
            body = "dblogd: see /metrics\n";
          } else {
            status = "404 Not Found";
            body = "not found\n";
          }
          auto response = std::make_shared<std::string>(
              "HTTP/1.0 " + status + "\r\nContent-Type: " + type +
              "\r\nContent-Length: " + std::to_string(body.size()) +
              "\r\nConnection: close\r\n\r\n" + body);
          asio::async_write(*sock, asio::buffer(*response),
                            [sock, response](boost::system::error_code, std::size_t) {
                              boost::system::error_code ignored;
                              sock->shutdown(tcp::socket::shutdown_both, ignored);
                            });
        });
    Accept();
  });
}

}  // namespace dblog::metrics
