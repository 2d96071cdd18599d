// sidecar/metrics/status.h: each consumer's health as one JSON document, the body of
// GET /status.json on the metrics listener (what `dblog status` reads).
// Owns: the status document's fields and how each is derived from ConsumerStats (the phase, the
// lags; the HTML page, status_page.h, shows the same). Served by metrics::HttpRespond with the same access rules as /metrics.
#pragma once

#include <cstdint>
#include <string>

#include "metrics/metrics.h"

namespace dblog::metrics {

// The JSON text of the status document at `now_us` (microseconds since the Unix epoch):
//   {"now": "<RFC 3339 UTC>", "consumers": [{...}, ...]}
// with one object per consumer, in name order:
//   name             the consumer's name (a JSON string, escaped)
//   connected        true while a session is attached
//   connected_since  RFC 3339 UTC time the session started; null when disconnected
//   disconnected_since  RFC 3339 UTC time the last session ended (or dblogd first knew the
//                    consumer, when none has connected since it started); null when connected
//   disconnected_seconds  how long since then; 0 when connected
//   phase            "disconnected", "creating_slot" (waiting for open transactions of the
//                    source), "bootstrapping" (the copy runs) or "streaming"
//   bootstrap_rows_copied, bootstrap_rows_estimated   the current or last bootstrap's
//   lag_bytes        source_wal_lsn minus the furthest of acked_lsn and confirmed_lsn (the
//                    latter before a session's first ack): WAL the consumer has not acknowledged
//   lag_seconds      age of the oldest commit sent and not acknowledged (0 when all are)
//   retained_bytes   source_wal_lsn minus confirmed_lsn: WAL the slot still holds (as
//                    dblog_consumer_lag_bytes in /metrics)
//   acked_lsn, confirmed_lsn, source_wal_lsn   as PostgreSQL writes LSNs ("16/B374D848")
//   reconciles       slots found gone and reconciled (dblog_reconciles_total)
//   window_redos     repair windows read again (dblog_repair_window_redos_total)
//   last_ack         RFC 3339 UTC time of the consumer's last acknowledgement; null: none yet
//   sink             the connected client's address ("127.0.0.1:50312"); null when disconnected
//   client           its Hello.client_name ("dblog-tail/1"); null when disconnected
//   slot_state       the slot's pg_replication_slots.wal_status as dblogd last read it (every
//                    heartbeat while streaming): "reserved", "extended", "unreserved", "lost",
//                    or "missing"; null before the first read
//   slot_safe_wal_bytes  its safe_wal_size: WAL that may still be written before the slot is
//                    in danger of losing WAL (max_slot_wal_keep_size); null when unlimited
//   repairs          the repair requests queued or running, in order: [{"id", "table", "kind",
//                    "done" (rows emitted; keys covered for a key list), "estimated" (rows of
//                    the table, keys asked; 0: unknown), "chunks", "running" (the first)}]
std::string RenderStatusJson(const Registry& registry, std::int64_t now_us);

// The derived values, shared by the JSON, the page and the lag history.
std::uint64_t LagBytes(const ConsumerStats& s);      // lag_bytes above
std::uint64_t RetainedBytes(const ConsumerStats& s); // retained_bytes above
double LagSeconds(const ConsumerStats& s, std::int64_t now_us);
// "disconnected", "creating_slot", "bootstrapping" or "streaming"
const char* Phase(const ConsumerStats& s);
// "2026-12-05T16:50:00.123Z": UTC, milliseconds.
std::string Rfc3339(std::int64_t us);

}  // namespace dblog::metrics
