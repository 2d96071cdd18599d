// sidecar/metrics/metrics.h: counters and gauges dblogd exposes, and the HTTP endpoint that
// serves them: Prometheus text (GET /metrics), each consumer's health as JSON
// (GET /status.json, status.h) and as an HTML page (GET /status, status_page.h).
// Owns: the metric names and their rendering, each consumer's lag history (one sample per
// kLagSampleInterval for the last hour, for the page's sparklines). Values are written by the
// components that own them (atomics, so copy workers may update them from their threads).
#pragma once

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "log/rate_limit.h"
#include "net/accept_retry.h"

namespace dblog::metrics {

struct ConsumerStats {
  std::atomic<int> connected{0};
  std::atomic<std::int64_t> connected_since_us{0};  // the current session's start; 0: none
  // Without a session since (the last session's end, or when dblogd first knew the consumer);
  // 0 while connected.
  std::atomic<std::int64_t> disconnected_since_us{
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count()};
  std::atomic<std::uint64_t> events_sent{0};
  std::atomic<std::uint64_t> bytes_sent{0};
  std::atomic<std::uint64_t> transactions_sent{0};
  std::atomic<std::uint64_t> acked_lsn{0};          // what the consumer acknowledged
  std::atomic<std::uint64_t> confirmed_lsn{0};      // what the slot was told
  std::atomic<std::uint64_t> source_wal_lsn{0};     // how far the source's WAL is known to be
  std::atomic<std::int64_t> oldest_unacked_commit_us{0};  // commit time, 0 when all acked
  std::atomic<std::uint64_t> source_reconnects{0};
  std::atomic<std::uint64_t> paused_total{0};       // times backpressure paused the slot
  std::atomic<std::uint64_t> queued_bytes{0};
  std::atomic<std::uint64_t> bootstrap_rows{0};
  std::atomic<std::uint64_t> bootstrap_rows_estimated{0};
  std::atomic<int> bootstrap_running{0};
  std::atomic<std::uint64_t> bootstraps_total{0};
  std::atomic<std::uint64_t> reconciles_total{0};   // slots found gone and reconciled
  std::atomic<std::uint64_t> source_timeline{0};    // IDENTIFY_SYSTEM's, at the last stream start
  std::atomic<std::uint64_t> timeline_changes{0};   // promotions seen (another timeline)
  std::atomic<std::uint64_t> foreign_markers{0};    // watermark messages dblogd did not open
  std::atomic<std::uint64_t> window_redos{0};       // windows read again (fail closed)
  std::atomic<std::uint64_t> windows_read_ahead{0};  // chunks read while the window before waited
  std::atomic<std::uint64_t> window_fills{0};       // kept keys' rows completed by a fill
  std::atomic<std::uint64_t> window_partial_fills{0};  // ... of which sent as partial UPDATEs
  std::atomic<std::uint64_t> plugin_messages_parsed_whole{0};  // not read in place (emit/)
  // the keys of streamed transactions kept to widen repair windows (consumer/repairs.h)
  std::atomic<std::uint64_t> key_log_bytes{0};
  std::atomic<std::uint64_t> key_log_horizon{0};    // the xid it was last pruned below
  std::atomic<std::uint64_t> key_log_pruned{0};     // its transactions every snapshot sees
  std::atomic<std::uint64_t> key_log_forgotten{0};  // ... dropped to stay within the budget
  std::atomic<std::int64_t> slot_creation_started_us{0};  // waiting to create the slot since; 0: not
  std::atomic<std::int64_t> last_ack_us{0};  // when the consumer last acknowledged; 0: never

  // A repair request queued or running for the consumer, as the status page and /status.json
  // show it (a copy, refreshed by the consumer's thread once a second while repairs run).
  struct Repair {
    std::uint64_t id = 0;
    std::string table;  // qualified, as regclass prints it
    std::string kind;   // table, range, keys
    std::uint64_t done = 0;       // rows emitted (keys covered, for a key list)
    std::uint64_t estimated = 0;  // rows the table holds (reltuples; keys asked); 0: unknown
    std::uint32_t chunks = 0;
    bool running = false;  // the first in the queue: its windows are the ones opening
  };
  // The session's sink: its address ("127.0.0.1:50312") and Hello.client_name; "" when none.
  void SetSession(std::string peer, std::string client);
  void SetRepairs(std::vector<Repair> repairs);
  // The slot as pg_replication_slots last said: wal_status ("reserved", "extended",
  // "unreserved", "lost"; "missing": no such slot) and safe_wal_size (-1: NULL).
  void SetSlotState(std::string wal_status, std::int64_t safe_wal_bytes);
  struct Details {
    std::string peer, client;
    std::string slot_state;            // "" until first read
    std::int64_t slot_safe_wal_bytes = -1;
    std::vector<Repair> repairs;
  };
  Details details() const;

 private:
  mutable std::mutex details_mutex_;
  Details details_;
};

// One lag sample of a consumer: when, and its lag_bytes and lag_seconds as /status.json
// derives them (status.h).
struct LagSample {
  std::int64_t at_us = 0;
  std::uint64_t lag_bytes = 0;
  double lag_seconds = 0;
};

class Registry {
 public:
  std::shared_ptr<ConsumerStats> ForConsumer(const std::string& name);
  // Drops a consumer's series (an unconfigured consumer's, when it disconnects).
  void Forget(const std::string& name);
  std::string Render() const;  // Prometheus text exposition format 0.0.4
  // Each consumer's stats, in name order (for the status page, status.h).
  std::map<std::string, std::shared_ptr<const ConsumerStats>> Consumers() const;

  // The lag history: one sample per kLagSampleInterval (HttpEndpoint takes them), the last
  // kLagSamples (an hour) kept per consumer, dropped by Forget: bounded memory (24 bytes a
  // sample, 5.6 KiB a consumer).
  static constexpr std::chrono::seconds kLagSampleInterval{15};
  static constexpr std::size_t kLagSamples = 240;
  // Appends every consumer's lag at `now_us` to its history.
  void SampleLag(std::int64_t now_us);
  // A consumer's samples, oldest first (empty when none or unknown).
  std::vector<LagSample> LagHistory(const std::string& name) const;

  std::atomic<std::uint64_t> connections_total{0};
  std::atomic<std::uint64_t> connections_refused{0};
  std::atomic<std::uint64_t> bad_frames{0};
  std::atomic<std::uint64_t> handshakes_over_limit{0};  // closed at once: too many pending
  // Consumer connections closed before TLS was established, by reason: the handshake failed
  // (no shared version, an untrusted or missing client certificate, garbage), it did not end
  // within the handshake deadline, or the client spoke plaintext to a TLS listener.
  std::atomic<std::uint64_t> tls_failed_handshake{0};
  std::atomic<std::uint64_t> tls_failed_timeout{0};
  std::atomic<std::uint64_t> tls_failed_plaintext{0};
  std::atomic<std::uint64_t> accept_errors_consumers{0};  // accept() failed (EMFILE, ...)
  std::atomic<std::uint64_t> accept_errors_metrics{0};
  std::atomic<std::uint64_t> http_refused_connection_limit{0};
  std::atomic<std::uint64_t> http_refused_header_timeout{0};
  std::atomic<std::uint64_t> http_refused_header_too_large{0};
  // Names not configured by --consumer refused by --max-unconfigured-consumers (one series for
  // all: refused names get none of their own).
  std::atomic<std::uint64_t> unconfigured_refused{0};

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<ConsumerStats>> consumers_;
  struct Ring {
    std::vector<LagSample> samples;  // at most kLagSamples; `next` is the oldest once full
    std::size_t next = 0;
  };
  std::map<std::string, Ring> lag_history_;  // under mutex_
};

// Serves GET /metrics, GET /status.json, GET /status (and / as a short index) over HTTP/1.0 on
// the given endpoint, and samples every consumer's lag each Registry::kLagSampleInterval. A
// client that does not finish its request headers (at most kMaxHeaderBytes) within
// kHeaderTimeout is disconnected; beyond kMaxConnections open connections, new ones are closed
// at once. Each is counted in dblog_metrics_http_refused_total{reason}.
class HttpEndpoint {
 public:
  static constexpr std::size_t kMaxConnections = 16;
  static constexpr std::size_t kMaxHeaderBytes = 8192;
  static constexpr std::chrono::seconds kHeaderTimeout{5};
  static constexpr std::chrono::seconds kWriteTimeout{10};

  HttpEndpoint(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& at,
               Registry& registry);
  void Start();
  void Stop();
  boost::asio::ip::tcp::endpoint local_endpoint() const { return acceptor_.local_endpoint(); }

 private:
  struct Connection;
  void Accept();
  void Serve(std::shared_ptr<Connection> c);
  void SampleLag();
  void Refused(std::atomic<std::uint64_t>& counter, const char* reason);
  boost::asio::ip::tcp::acceptor acceptor_;
  Registry& registry_;
  // open connections; shared with each connection, which may outlive the endpoint
  std::shared_ptr<std::size_t> open_ = std::make_shared<std::size_t>(0);
  net::AcceptRetry retry_;
  boost::asio::steady_timer sample_timer_;
  log::RateLimited refused_log_{std::chrono::seconds(10)};
};

// What the metrics endpoint answers to `received`, the bytes read from a connection so far (at
// most max_header_bytes: the read stops there). kNeedMore: the request head has not ended yet
// (no blank line), read on. kTooLarge: max_header_bytes without the end of the head, answered
// 431. kResponse: the whole response to the request: GET /metrics, GET /status.json, GET
// /status (the HTML page), GET / (an index), 404 for other paths, 405 for other methods. Pure: HttpEndpoint's parser, callable
// without a socket.
struct HttpReply {
  enum class Kind { kNeedMore, kTooLarge, kResponse };
  Kind kind = Kind::kNeedMore;
  std::string response;  // kTooLarge, kResponse: what to write before closing
};
HttpReply HttpRespond(std::string_view received, const Registry& registry,
                      std::size_t max_header_bytes = HttpEndpoint::kMaxHeaderBytes);

}  // namespace dblog::metrics
