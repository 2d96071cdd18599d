// sidecar/metrics/status.cc: the status document of GET /status.json (see status.h).
#include "metrics/status.h"

#include <time.h>

#include <cstdio>

#include "common/json.h"
#include "common/lsn.h"

namespace dblog::metrics {

std::string Rfc3339(std::int64_t us) {
  const time_t seconds = static_cast<time_t>(us / 1000000);
  tm utc{};
  gmtime_r(&seconds, &utc);
  char text[80];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(us % 1000000 / 1000));
  return text;
}

const char* Phase(const ConsumerStats& s) {
  if (s.connected.load() == 0) return "disconnected";
  if (s.slot_creation_started_us.load() != 0) return "creating_slot";
  if (s.bootstrap_running.load() != 0) return "bootstrapping";
  return "streaming";
}

std::uint64_t LagBytes(const ConsumerStats& s) {
  const std::uint64_t acked = s.acked_lsn.load(), confirmed = s.confirmed_lsn.load(),
                      wal = s.source_wal_lsn.load();
  const std::uint64_t acknowledged = acked > confirmed ? acked : confirmed;
  return wal > acknowledged ? wal - acknowledged : 0;
}

std::uint64_t RetainedBytes(const ConsumerStats& s) {
  const std::uint64_t confirmed = s.confirmed_lsn.load(), wal = s.source_wal_lsn.load();
  return wal > confirmed ? wal - confirmed : 0;
}

double LagSeconds(const ConsumerStats& s, std::int64_t now_us) {
  const std::int64_t oldest = s.oldest_unacked_commit_us.load();
  return oldest == 0 || now_us < oldest ? 0.0 : double(now_us - oldest) / 1e6;
}

namespace {

void RenderConsumer(common::JsonWriter& json, const std::string& name, const ConsumerStats& s,
                    std::int64_t now_us) {
  const bool connected = s.connected.load() != 0;
  const std::int64_t since = s.connected_since_us.load();
  const std::uint64_t acked = s.acked_lsn.load(), confirmed = s.confirmed_lsn.load(),
                      wal = s.source_wal_lsn.load();
  const std::int64_t last_ack = s.last_ack_us.load();
  const ConsumerStats::Details details = s.details();
  json.BeginObject();
  json.Key("name").String(name);
  json.Key("connected").Bool(connected);
  json.Key("connected_since");
  if (connected && since != 0) {
    json.String(Rfc3339(since));
  } else {
    json.Null();
  }
  const std::int64_t gone = s.disconnected_since_us.load();
  json.Key("disconnected_since");
  if (!connected && gone != 0) {
    json.String(Rfc3339(gone));
  } else {
    json.Null();
  }
  json.Key("disconnected_seconds")
      .Double(!connected && gone != 0 && now_us > gone ? double(now_us - gone) / 1e6 : 0.0);
  json.Key("phase").String(Phase(s));
  json.Key("bootstrap_rows_copied").Uint(s.bootstrap_rows.load());
  json.Key("bootstrap_rows_estimated").Uint(s.bootstrap_rows_estimated.load());
  json.Key("lag_bytes").Uint(LagBytes(s));
  json.Key("lag_seconds").Double(LagSeconds(s, now_us));
  json.Key("retained_bytes").Uint(RetainedBytes(s));
  json.Key("acked_lsn").String(common::FormatLsn(acked));
  json.Key("confirmed_lsn").String(common::FormatLsn(confirmed));
  json.Key("source_wal_lsn").String(common::FormatLsn(wal));
  json.Key("reconciles").Uint(s.reconciles_total.load());
  json.Key("window_redos").Uint(s.window_redos.load());
  json.Key("last_ack");
  if (last_ack != 0) {
    json.String(Rfc3339(last_ack));
  } else {
    json.Null();
  }
  json.Key("sink");
  if (connected && !details.peer.empty()) {
    json.String(details.peer);
  } else {
    json.Null();
  }
  json.Key("client");
  if (connected && !details.peer.empty()) {
    json.String(details.client);
  } else {
    json.Null();
  }
  json.Key("slot_state");
  if (!details.slot_state.empty()) {
    json.String(details.slot_state);
  } else {
    json.Null();
  }
  json.Key("slot_safe_wal_bytes");
  if (!details.slot_state.empty() && details.slot_safe_wal_bytes >= 0) {
    json.Int(details.slot_safe_wal_bytes);
  } else {
    json.Null();
  }
  json.Key("repairs").BeginArray();
  for (const ConsumerStats::Repair& r : details.repairs) {
    json.BeginObject();
    json.Key("id").Uint(r.id);
    json.Key("table").String(r.table);
    json.Key("kind").String(r.kind);
    json.Key("done").Uint(r.done);
    json.Key("estimated").Uint(r.estimated);
    json.Key("chunks").Uint(r.chunks);
    json.Key("running").Bool(r.running);
    json.EndObject();
  }
  json.EndArray();
  json.EndObject();
}

}  // namespace

std::string RenderStatusJson(const Registry& registry, std::int64_t now_us) {
  std::string out;
  common::JsonWriter json(&out);
  json.BeginObject();
  json.Key("now").String(Rfc3339(now_us));
  json.Key("consumers").BeginArray();
  for (const auto& [name, stats] : registry.Consumers()) RenderConsumer(json, name, *stats, now_us);
  json.EndArray();
  json.EndObject();
  out += "\n";
  return out;
}

}  // namespace dblog::metrics
