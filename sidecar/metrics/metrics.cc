// sidecar/metrics/metrics.cc: Prometheus rendering, the lag history and a minimal HTTP endpoint
// (see metrics.h).
#include "metrics/metrics.h"

#include <chrono>
#include <sstream>

#include "log/log.h"
#include "metrics/status.h"
#include "metrics/status_page.h"

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
  lag_history_.erase(name);
}

void Registry::SampleLag(std::int64_t now_us) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, stats] : consumers_) {
    Ring& ring = lag_history_[name];
    const LagSample sample{now_us, LagBytes(*stats), LagSeconds(*stats, now_us)};
    if (ring.samples.size() < kLagSamples) {
      ring.samples.push_back(sample);
    } else {
      ring.samples[ring.next] = sample;
      ring.next = (ring.next + 1) % kLagSamples;
    }
  }
}

std::vector<LagSample> Registry::LagHistory(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = lag_history_.find(name);
  if (it == lag_history_.end()) return {};
  const Ring& ring = it->second;
  std::vector<LagSample> out(ring.samples.begin() + ring.next, ring.samples.end());
  out.insert(out.end(), ring.samples.begin(), ring.samples.begin() + ring.next);
  return out;
}

void ConsumerStats::SetSession(std::string peer, std::string client) {
  std::lock_guard<std::mutex> lock(details_mutex_);
  details_.peer = std::move(peer);
  details_.client = std::move(client);
}

void ConsumerStats::SetRepairs(std::vector<Repair> repairs) {
  std::lock_guard<std::mutex> lock(details_mutex_);
  details_.repairs = std::move(repairs);
}

void ConsumerStats::SetSlotState(std::string wal_status, std::int64_t safe_wal_bytes) {
  std::lock_guard<std::mutex> lock(details_mutex_);
  details_.slot_state = std::move(wal_status);
  details_.slot_safe_wal_bytes = safe_wal_bytes;
}

ConsumerStats::Details ConsumerStats::details() const {
  std::lock_guard<std::mutex> lock(details_mutex_);
  return details_;
}

std::map<std::string, std::shared_ptr<const ConsumerStats>> Registry::Consumers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {consumers_.begin(), consumers_.end()};
}

namespace {

void Family(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

// The daemon's own families (one series each, or one per reason or listener).
void RenderDaemonFamilies(std::ostringstream& out, const Registry& r) {
  Family(out, "dblog_connections_total", "counter", "Consumer TCP connections accepted.");
  out << "dblog_connections_total " << r.connections_total << "\n";
  Family(out, "dblog_connections_refused_total", "counter",
         "Consumer connections refused at the handshake (auth, name, duplicate, version, "
         "unconfigured cap).");
  out << "dblog_connections_refused_total " << r.connections_refused << "\n";
  Family(out, "dblog_bad_frames_total", "counter", "Malformed, oversized or unexpected frames.");
  out << "dblog_bad_frames_total " << r.bad_frames << "\n";
  Family(out, "dblog_handshakes_over_limit_total", "counter",
         "Consumer connections closed at once because --max-pending-handshakes connections "
         "were already waiting for (or had failed) their handshake.");
  out << "dblog_handshakes_over_limit_total " << r.handshakes_over_limit << "\n";
  Family(out, "dblog_tls_handshake_failures_total", "counter",
         "Consumer connections closed before TLS was established: the handshake failed "
         "(reason=handshake: protocol version, client certificate, not TLS at all), did not end "
         "within the handshake deadline (timeout), or the client spoke plaintext (plaintext).");
  out << "dblog_tls_handshake_failures_total{reason=\"handshake\"} " << r.tls_failed_handshake
      << "\n";
  out << "dblog_tls_handshake_failures_total{reason=\"timeout\"} " << r.tls_failed_timeout << "\n";
  out << "dblog_tls_handshake_failures_total{reason=\"plaintext\"} " << r.tls_failed_plaintext
      << "\n";
  Family(out, "dblog_accept_errors_total", "counter",
         "Failed accept() calls (out of file descriptors, ...), retried with backoff.");
  out << "dblog_accept_errors_total{listener=\"consumers\"} " << r.accept_errors_consumers << "\n";
  out << "dblog_accept_errors_total{listener=\"metrics\"} " << r.accept_errors_metrics << "\n";
  Family(out, "dblog_metrics_http_refused_total", "counter",
         "HTTP connections to the metrics endpoint refused: over the connection cap (closed at "
         "once), headers not finished in time (closed) or too large (answered 431).");
  out << "dblog_metrics_http_refused_total{reason=\"connection_limit\"} "
      << r.http_refused_connection_limit << "\n";
  out << "dblog_metrics_http_refused_total{reason=\"header_timeout\"} "
      << r.http_refused_header_timeout << "\n";
  out << "dblog_metrics_http_refused_total{reason=\"header_too_large\"} "
      << r.http_refused_header_too_large << "\n";
  Family(out, "dblog_unconfigured_consumers_refused_total", "counter",
         "Handshakes of consumers not named by --consumer refused because "
         "--max-unconfigured-consumers of their slots exist.");
  out << "dblog_unconfigured_consumers_refused_total " << r.unconfigured_refused << "\n";
}

// Each consumer's families: a name, its type and help, and how a consumer's value is read.
struct Metric {
  const char* name;
  const char* type;
  const char* help;
  double (*value)(const ConsumerStats&, std::int64_t now_us);
};
const Metric kConsumerMetrics[] = {
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
    {"dblog_slot_creation_wait_seconds", "gauge",
     "How long the consumer's slot creation has waited for transactions open in the source "
     "(0 when no slot is being created).",
     [](const ConsumerStats& s, std::int64_t now) {
       const auto since = s.slot_creation_started_us.load();
       return since == 0 || now < since ? 0.0 : double(now - since) / 1e6;
     }},
    {"dblog_bootstraps_total", "counter", "Bootstraps started.",
     [](const ConsumerStats& s, std::int64_t) { return double(s.bootstraps_total.load()); }},
    {"dblog_source_timeline", "gauge",
     "The source's timeline when the consumer's stream last started (it grows at each "
     "promotion of a standby).",
     [](const ConsumerStats& s, std::int64_t) { return double(s.source_timeline.load()); }},
    {"dblog_source_timeline_changes_total", "counter",
     "Stream starts on another timeline than the one before: the source failed over.",
     [](const ConsumerStats& s, std::int64_t) { return double(s.timeline_changes.load()); }},
    {"dblog_reconciles_total", "counter",
     "Slots found gone (a failover, or dropped) and reconciled by whole-table repairs.",
     [](const ConsumerStats& s, std::int64_t) { return double(s.reconciles_total.load()); }},
    {"dblog_repair_window_redos_total", "counter",
     "Repair windows whose chunk was read again because widening could not be decided.",
     [](const ConsumerStats& s, std::int64_t) { return double(s.window_redos.load()); }},
    {"dblog_repair_windows_read_ahead_total", "counter",
     "Repair chunk reads started while the window before them still waited for its high "
     "watermark (windows in a row).",
     [](const ConsumerStats& s, std::int64_t) { return double(s.windows_read_ahead.load()); }},
    {"dblog_repair_fills_total", "counter",
     "Rows of keys the log carried during a repair window with columns left unchanged, whose "
     "unchanged columns the window filled from its chunk (a damaged TOAST value repaired).",
     [](const ConsumerStats& s, std::int64_t) { return double(s.window_fills.load()); }},
    {"dblog_repair_partial_fills_total", "counter",
     "Of those, the rows sent as an UPDATE whose other columns say keep yours (a column was "
     "carried only before the window, or the window's row memory ran out).",
     [](const ConsumerStats& s, std::int64_t) { return double(s.window_partial_fills.load()); }},
    {"dblog_plugin_messages_parsed_whole_total", "counter",
     "Messages of the dblog plugin not in the encoding dblogd reads in place, parsed whole "
     "instead: slower, not wrong (0 unless the extension and dblogd disagree).",
     [](const ConsumerStats& s, std::int64_t) {
       return double(s.plugin_messages_parsed_whole.load());
     }},
    {"dblog_repair_key_log_bytes", "gauge",
     "Bytes of streamed transactions' keys kept to widen repair windows: the transactions a new "
     "snapshot may not see yet (pruned as the stream goes), at most --window-key-memory-mb.",
     [](const ConsumerStats& s, std::int64_t) { return double(s.key_log_bytes.load()); }},
    {"dblog_repair_key_log_horizon", "gauge",
     "The xid that key log was last pruned below: the oldest transaction running then, or a "
     "repair window's snapshot's xmin (a horizon that stops moving names a long-running "
     "transaction, which the log must keep everything after).",
     [](const ConsumerStats& s, std::int64_t) { return double(s.key_log_horizon.load()); }},
    {"dblog_repair_key_log_pruned_total", "counter",
     "Transactions dropped from that key log because every new snapshot sees them.",
     [](const ConsumerStats& s, std::int64_t) { return double(s.key_log_pruned.load()); }},
    {"dblog_repair_key_log_forgotten_total", "counter",
     "Transactions dropped from that key log to stay within --window-key-memory-mb: a repair "
     "window whose snapshot may miss one fails closed and is read again (raise the budget when "
     "this grows while repairs run).",
     [](const ConsumerStats& s, std::int64_t) { return double(s.key_log_forgotten.load()); }},
    {"dblog_foreign_markers_total", "counter",
     "Watermark messages (prefix dblog.watermark) this consumer's pipeline did not open: "
     "forged, other consumers', abandoned windows' (ignored, each one counted).",
     [](const ConsumerStats& s, std::int64_t) { return double(s.foreign_markers.load()); }},
};

// One family per kConsumerMetrics entry, a series per consumer in each.
void RenderConsumerFamilies(std::ostringstream& out,
                            const std::map<std::string, std::shared_ptr<ConsumerStats>>& consumers,
                            std::int64_t now_us) {
  for (const Metric& m : kConsumerMetrics) {
    Family(out, m.name, m.type, m.help);
    for (const auto& [name, stats] : consumers)
      out << m.name << "{consumer=\"" << name << "\"} " << m.value(*stats, now_us) << "\n";
  }
}

}  // namespace

std::string Registry::Render() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  out.precision(17);  // LSNs and byte counters, not 6 significant digits
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  RenderDaemonFamilies(out, *this);
  RenderConsumerFamilies(out, consumers_, now_us);
  return out.str();
}

HttpReply HttpRespond(std::string_view received, const Registry& registry,
                      std::size_t max_header_bytes) {
  if (received.substr(0, max_header_bytes).find("\r\n\r\n") == std::string_view::npos) {
    if (received.size() < max_header_bytes) return {HttpReply::Kind::kNeedMore, {}};
    return {HttpReply::Kind::kTooLarge,
            "HTTP/1.0 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n"
            "Connection: close\r\n\r\n"};
  }
  std::istringstream in{std::string(received)};
  std::string method, path;
  in >> method >> path;
  std::string body, status = "200 OK", type = "text/plain; version=0.0.4", headers;
  const auto now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  if (method != "GET") {
    status = "405 Method Not Allowed";
    body = "only GET\n";
  } else if (path == "/metrics") {
    body = registry.Render();
  } else if (path == "/status.json") {
    type = "application/json";
    body = RenderStatusJson(registry, now_us);
  } else if (path == "/status") {
    // No script, style inline only: the page runs nothing even if a name slipped through.
    type = "text/html; charset=utf-8";
    headers =
        "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\n"
        "X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n";
    body = RenderStatusPage(registry, log::RecentProblems(), now_us);
  } else if (path == "/") {
    type = "text/plain";
    body = "dblogd: see /metrics, /status.json and /status\n";
  } else {
    status = "404 Not Found";
    body = "not found\n";
  }
  return {HttpReply::Kind::kResponse,
          "HTTP/1.0 " + status + "\r\nContent-Type: " + type +
              "\r\n" + headers + "Content-Length: " + std::to_string(body.size()) +
              "\r\nConnection: close\r\n\r\n" + body};
}

struct HttpEndpoint::Connection {
  Connection(tcp::socket s, std::shared_ptr<std::size_t> open)
      : socket(std::move(s)), deadline(socket.get_executor()), open(std::move(open)) {
    ++*this->open;
  }
  ~Connection() { --*open; }
  tcp::socket socket;
  asio::streambuf buf{kMaxHeaderBytes};
  asio::steady_timer deadline;
  std::shared_ptr<std::size_t> open;
  std::string response;
  bool headers_done = false;
};

HttpEndpoint::HttpEndpoint(asio::io_context& io, const tcp::endpoint& at, Registry& registry)
    : acceptor_(io, at), registry_(registry),
      retry_(io, "metrics", registry.accept_errors_metrics), sample_timer_(io) {}

void HttpEndpoint::Start() {
  Accept();
  // The first sample once the loop runs (the configured consumers are registered by then).
  sample_timer_.expires_after(std::chrono::seconds(0));
  sample_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec && acceptor_.is_open()) SampleLag();
  });
}

void HttpEndpoint::Stop() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  retry_.Cancel();
  sample_timer_.cancel();
}

void HttpEndpoint::SampleLag() {
  registry_.SampleLag(std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count());
  sample_timer_.expires_after(Registry::kLagSampleInterval);
  sample_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec && acceptor_.is_open()) SampleLag();
  });
}

void HttpEndpoint::Refused(std::atomic<std::uint64_t>& counter, const char* reason) {
  counter++;
  refused_log_.Warn("metrics_connection_refused", {{"reason", reason}});
}

void HttpEndpoint::Accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;  // closed
    if (ec) {  // out of file descriptors, or the like: retry, do not stop for good
      retry_.Failed(ec, [this] { Accept(); });
      return;
    }
    retry_.Succeeded();
    if (*open_ >= kMaxConnections) {
      Refused(registry_.http_refused_connection_limit, "connection_limit");
      boost::system::error_code ignored;
      socket.close(ignored);
    } else {
      Serve(std::make_shared<Connection>(std::move(socket), open_));
    }
    Accept();
  });
}

namespace {

// Writes the response and closes; a client that does not read it is cut off after kWriteTimeout.
template <typename Conn>
void Discard(std::shared_ptr<Conn> c) {
  c->buf.consume(c->buf.size());
  c->socket.async_read_some(c->buf.prepare(4096),
                            [c](boost::system::error_code ec, std::size_t) {
                              if (!ec) Discard(c);
                            });
}

// `drain`: the request was not read to its end. Reading on until the client closes (or the
// timeout) keeps the kernel from resetting the connection before the client read the answer.
template <typename Conn>
void Respond(std::shared_ptr<Conn> c, std::string response, std::chrono::seconds timeout,
             bool drain = false) {
  c->headers_done = true;
  c->response = std::move(response);
  c->deadline.expires_after(timeout);  // replaces the header deadline
  c->deadline.async_wait([weak = std::weak_ptr<Conn>(c)](boost::system::error_code ec) {
    if (auto conn = weak.lock(); conn && !ec) {
      boost::system::error_code ignored;
      conn->socket.close(ignored);
    }
  });
  asio::async_write(c->socket, asio::buffer(c->response),
                    [c, drain](boost::system::error_code ec, std::size_t) {
                      boost::system::error_code ignored;
                      if (drain && !ec) {
                        c->socket.shutdown(tcp::socket::shutdown_send, ignored);
                        Discard(c);  // the deadline still bounds it
                        return;
                      }
                      c->socket.shutdown(tcp::socket::shutdown_both, ignored);
                      c->deadline.cancel();
                    });
}

}  // namespace

void HttpEndpoint::Serve(std::shared_ptr<Connection> c) {
  c->deadline.expires_after(kHeaderTimeout);
  // The timer holds the connection only weakly: it must not keep a finished one alive.
  c->deadline.async_wait([this, weak = std::weak_ptr<Connection>(c)](boost::system::error_code ec) {
    auto conn = weak.lock();
    if (ec || !conn || conn->headers_done) return;
    Refused(registry_.http_refused_header_timeout, "header_timeout");
    boost::system::error_code ignored;
    conn->socket.close(ignored);  // the pending read ends with an error
  });
  asio::async_read_until(
      c->socket, c->buf, "\r\n\r\n", [this, c](boost::system::error_code rec, std::size_t) {
        if (rec && rec != asio::error::not_found) {
          c->deadline.cancel();
          return;
        }
        // not_found: kMaxHeaderBytes without the end of the headers.
        HttpReply reply = HttpRespond(
            std::string_view(static_cast<const char*>(c->buf.data().data()), c->buf.size()),
            registry_);
        switch (reply.kind) {
          case HttpReply::Kind::kTooLarge:
            Refused(registry_.http_refused_header_too_large, "header_too_large");
            Respond(c, std::move(reply.response), kWriteTimeout, /*drain=*/true);
            return;
          case HttpReply::Kind::kResponse:
            Respond(c, std::move(reply.response), kWriteTimeout);
            return;
          case HttpReply::Kind::kNeedMore:  // cannot be: read_until ended with the blank line
            c->deadline.cancel();
            return;
        }
      });
}

}  // namespace dblog::metrics
