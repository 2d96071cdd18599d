// sidecar/metrics/status_page.cc: the HTML status page of GET /status (see status_page.h).
#include "metrics/status_page.h"

#include <algorithm>
#include <cstdio>

#include "common/lsn.h"
#include "metrics/status.h"

namespace dblog::metrics {

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      case '\t':
      case '\n': out.push_back(ch); break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) {
          out.push_back('?');
        } else {
          out.push_back(ch);
        }
    }
  }
  return out;
}

namespace {

constexpr std::int64_t kHourUs = 3600LL * 1000000;

std::string Format(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// 512 B, 1.5 KiB, 20.0 MiB, 3.2 GiB
std::string Bytes(std::uint64_t n) {
  if (n < 1024) return std::to_string(n) + " B";
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = double(n) / 1024;
  int unit = 0;
  while (v >= 1024 && unit < 3) {
    v /= 1024;
    ++unit;
  }
  return Format("%.1f ", v) + units[unit];
}

// 42 s, 5 m 3 s, 2 h 10 m, 3 d 4 h
std::string Duration(std::int64_t us) {
  const std::int64_t s = us < 0 ? 0 : us / 1000000;
  if (s < 60) return std::to_string(s) + " s";
  if (s < 3600) return std::to_string(s / 60) + " m " + std::to_string(s % 60) + " s";
  if (s < 86400) return std::to_string(s / 3600) + " h " + std::to_string(s % 3600 / 60) + " m";
  return std::to_string(s / 86400) + " d " + std::to_string(s % 86400 / 3600) + " h";
}

// A moment and how long ago it was: "2026-12-05T16:50:00.123Z (5 m 3 s ago)".
std::string Moment(std::int64_t at_us, std::int64_t now_us, const char* suffix) {
  const std::string when = Rfc3339(at_us);
  return "<time datetime=\"" + when + "\">" + when + "</time><br><span class=\"ago\">(" +
         Duration(now_us - at_us) + suffix + ")</span>";
}

// done of estimated as a whole percentage, at most 100 (estimates are reltuples); -1: unknown.
int Percent(std::uint64_t done, std::uint64_t estimated) {
  if (estimated == 0) return -1;
  return static_cast<int>(std::min<std::uint64_t>(100, done * 100 / estimated));
}

std::string RepairProgress(const ConsumerStats::Repair& r) {
  const char* unit = r.kind == "keys" ? " keys" : " rows";
  const int pct = Percent(r.done, r.estimated);
  if (pct < 0) return std::to_string(r.done) + unit + ", " + std::to_string(r.chunks) + " chunks";
  return std::to_string(pct) + "% (" + std::to_string(r.done) + " of " +
         std::to_string(r.estimated) + unit + ", " + std::to_string(r.chunks) + " chunks)";
}

// The phase cell: its data-phase value and its text.
std::pair<std::string, std::string> PhaseOf(const ConsumerStats& s,
                                            const ConsumerStats::Details& d, std::int64_t now_us) {
  const std::string phase = Phase(s);
  if (phase == "creating_slot") {
    return {phase, "creating its slot (waiting " +
                       Duration(now_us - s.slot_creation_started_us.load()) +
                       " for transactions open in the source)"};
  }
  if (phase == "bootstrapping") {
    const std::uint64_t copied = s.bootstrap_rows.load(),
                        estimated = s.bootstrap_rows_estimated.load();
    if (estimated == 0)  // no table in scope was ever analyzed: no estimate
      return {phase, "bootstrapping: " + std::to_string(copied) + " rows copied"};
    return {phase, "bootstrapping: " + std::to_string(copied) + " of ~" +
                       std::to_string(estimated) + " rows (" +
                       std::to_string(Percent(copied, estimated)) + "%)"};
  }
  if (phase == "streaming" && !d.repairs.empty()) {
    const ConsumerStats::Repair& r = d.repairs.front();
    std::string text = "repairing request " + std::to_string(r.id) + " at " + RepairProgress(r);
    if (d.repairs.size() > 1) text += ", " + std::to_string(d.repairs.size() - 1) + " queued";
    return {"repairing", text};
  }
  return {phase, phase};
}

void ConsumerRow(std::string& out, const std::string& name, const ConsumerStats& s,
                 const std::vector<LagSample>& history, std::int64_t now_us) {
  const ConsumerStats::Details d = s.details();
  const bool connected = s.connected.load() != 0;
  const auto [phase, phase_text] = PhaseOf(s, d, now_us);
  const std::uint64_t lag_bytes = LagBytes(s), retained = RetainedBytes(s);
  const double lag_seconds = LagSeconds(s, now_us);
  const std::string n = HtmlEscape(name);
  out += "<tr class=\"consumer phase-" + phase + "\" data-consumer=\"" + n + "\">";
  out += "<td class=\"name\">" + n + "</td>";
  out += "<td class=\"phase\" data-phase=\"" + phase + "\">" + HtmlEscape(phase_text) + "</td>";
  out += "<td class=\"since\">";
  const std::int64_t since = s.connected_since_us.load();
  out += connected && since != 0 ? Moment(since, now_us, "") : "-";
  out += "</td><td class=\"sink\">";
  if (connected && !d.peer.empty()) {
    out += HtmlEscape(d.peer);
    if (!d.client.empty()) out += "<br><span class=\"client\">" + HtmlEscape(d.client) + "</span>";
  } else {
    out += "-";
  }
  out += "</td>";
  out += "<td class=\"num lag-bytes\" data-value=\"" + std::to_string(lag_bytes) + "\">" +
         Bytes(lag_bytes) + "</td>";
  out += "<td class=\"num lag-seconds\" data-value=\"" + Format("%.3f", lag_seconds) + "\">" +
         Format("%.1f s", lag_seconds) + "</td>";
  out += "<td class=\"sparkline\">" +
         RenderSparkline(history, LagSample{now_us, lag_bytes, lag_seconds}) + "</td>";
  out += "<td class=\"num retained-bytes\" data-value=\"" + std::to_string(retained) + "\">" +
         Bytes(retained) + "</td>";
  const std::int64_t last_ack = s.last_ack_us.load();
  out += "<td class=\"last-ack\">" + (last_ack != 0 ? Moment(last_ack, now_us, " ago") : "-") +
         "</td>";
  out += "<td class=\"lsns\">" + common::FormatLsn(s.acked_lsn.load()) + "<br>" +
         common::FormatLsn(s.confirmed_lsn.load()) + "<br>" +
         common::FormatLsn(s.source_wal_lsn.load()) + "</td>";
  // the slot's wal_status as last read, and its safe_wal_size when limited
  const std::string slot = d.slot_state.empty() ? "-" : HtmlEscape(d.slot_state);
  out += "<td class=\"slot\" data-state=\"" + slot + "\">" + slot;
  if (!d.slot_state.empty() && d.slot_safe_wal_bytes >= 0)
    out += "<br>" + Bytes(static_cast<std::uint64_t>(d.slot_safe_wal_bytes)) + " safe";
  out += "</td>";
  out += "</tr>\n";
}

void RepairRows(std::string& out, const std::string& name, const ConsumerStats& s) {
  for (const ConsumerStats::Repair& r : s.details().repairs) {
    const int pct = Percent(r.done, r.estimated);
    out += "<tr class=\"repair\" data-consumer=\"" + HtmlEscape(name) + "\" data-request=\"" +
           std::to_string(r.id) + "\"><td>" + HtmlEscape(name) + "</td><td class=\"num\">" +
           std::to_string(r.id) + "</td><td class=\"table\">" + HtmlEscape(r.table) +
           "</td><td>" + HtmlEscape(r.kind) + "</td><td>" + (r.running ? "running" : "queued") +
           "</td><td class=\"progress\">";
    if (pct >= 0)
      out += "<progress max=\"100\" value=\"" + std::to_string(pct) + "\"></progress> ";
    out += HtmlEscape(RepairProgress(r)) + "</td></tr>\n";
  }
}

const char* LevelName(log::Level level) {
  return level == log::Level::kError ? "error" : level == log::Level::kWarn ? "warn" : "info";
}

constexpr const char* kStyle =
    "body{font-family:sans-serif;margin:1em;color:#222}"
    "h1{font-size:1.4em;margin:0 0 .2em}h2{font-size:1.1em;margin:1.4em 0 .4em}"
    "p.now{color:#555;margin:0}"
    "table{border-collapse:collapse;font-size:.9em}"
    "th,td{border-bottom:1px solid #ddd;padding:.3em .45em;text-align:left;vertical-align:top}"
    "th{background:#f4f4f4}td.num{text-align:right;white-space:nowrap}"
    "td.lsns,td.since,td.last-ack,td.time{font-family:monospace;font-size:.85em;"
    "white-space:nowrap}"
    ".ago,.client{color:#666}td.name{font-weight:bold;min-width:8em;overflow-wrap:anywhere}"
    "td.phase{min-width:10em;max-width:16em}td.sink{white-space:nowrap}"
    "tr.phase-disconnected td.phase{color:#b00}tr.phase-streaming td.phase{color:#070}"
    "tr.phase-bootstrapping td.phase,tr.phase-repairing td.phase,"
    "tr.phase-creating_slot td.phase{color:#a60}"
    "tr.error td.level{color:#b00;font-weight:bold}tr.warn td.level{color:#a60}"
    "td.text{font-family:monospace;font-size:.85em;word-break:break-all;max-width:60em}"
    "svg.sparkline polyline{fill:none;stroke-width:1.5}"
    "svg.sparkline .bytes{stroke:#1f6fb4}svg.sparkline .seconds{stroke:#d9731a}"
    "span.key{font-size:.75em;color:#666}"
    "span.key .bytes{color:#1f6fb4}span.key .seconds{color:#d9731a}";

}  // namespace

std::string RenderSparkline(const std::vector<LagSample>& samples, const LagSample& now,
                            int width, int height) {
  std::vector<LagSample> points;
  for (const LagSample& s : samples)
    if (s.at_us >= now.at_us - kHourUs && s.at_us <= now.at_us) points.push_back(s);
  points.push_back(now);
  // The width spans the hour, or less while the history is younger (dblogd just started): from
  // the oldest sample, at least a minute.
  const std::int64_t span =
      std::max<std::int64_t>(60 * 1000000LL, now.at_us - points.front().at_us);
  std::uint64_t max_bytes = 0;
  double max_seconds = 0;
  for (const LagSample& p : points) {
    max_bytes = std::max(max_bytes, p.lag_bytes);
    max_seconds = std::max(max_seconds, p.lag_seconds);
  }
  const double top = 2, bottom = height - 2;
  const auto x = [&](const LagSample& p) {
    return double(width - 1) * double(p.at_us - (now.at_us - span)) / double(span);
  };
  const auto line = [&](const char* cls, auto value, double max) {
    std::string pts;
    for (const LagSample& p : points) {
      const double y = max <= 0 ? bottom : bottom - (bottom - top) * double(value(p)) / max;
      pts += Format("%.1f", x(p)) + "," + Format("%.1f", y) + " ";
    }
    if (points.size() == 1) {  // one point: a short stroke ending at it
      const double y = max <= 0 ? bottom : top;
      pts = Format("%.1f", std::max(0.0, x(points[0]) - 3)) + "," + Format("%.1f", y) + " " + pts;
    }
    pts.pop_back();
    return std::string("<polyline class=\"") + cls + "\" points=\"" + pts + "\"/>";
  };
  std::string out = "<svg class=\"sparkline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    std::to_string(width) + "\" height=\"" + std::to_string(height) +
                    "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
                    "\" role=\"img\" data-samples=\"" + std::to_string(points.size()) + "\">";
  const std::string over = span >= kHourUs ? "the last hour" : "the last " + Duration(span);
  out += "<title>lag over " + over + ", " + std::to_string(points.size()) +
         " samples: at most " + Bytes(max_bytes) + " and " + Format("%.1f", max_seconds) +
         " s</title>";
  out += "<rect width=\"" + std::to_string(width) + "\" height=\"" + std::to_string(height) +
         "\" fill=\"#fafafa\" stroke=\"#ddd\"/>";
  out += line("bytes", [](const LagSample& p) { return double(p.lag_bytes); }, double(max_bytes));
  out += line("seconds", [](const LagSample& p) { return p.lag_seconds; }, max_seconds);
  out += "</svg>";
  out += "<br><span class=\"key\">" + over + ": <span class=\"bytes\">max " + Bytes(max_bytes) +
         "</span> / <span class=\"seconds\">" + Format("%.1f s", max_seconds) + "</span></span>";
  return out;
}

std::string RenderStatusPage(const Registry& registry, const std::vector<log::Problem>& problems,
                             std::int64_t now_us) {
  const auto consumers = registry.Consumers();
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta http-equiv=\"refresh\" content=\"" +
      std::to_string(kRefreshSeconds) +
      "\"><meta name=\"viewport\" content=\"width=device-width\">"
      "<title>dblogd status</title><style>" +
      std::string(kStyle) + "</style></head>\n<body>\n<h1>dblogd status</h1>\n";
  out += "<p class=\"now\">As of <time id=\"now\" datetime=\"" + Rfc3339(now_us) + "\">" +
         Rfc3339(now_us) + "</time>; reloads every " + std::to_string(kRefreshSeconds) +
         " s. Lag sampled every " + std::to_string(Registry::kLagSampleInterval.count()) +
         " s over the last hour. The same as JSON: <a href=\"/status.json\">/status.json</a>; "
         "<a href=\"/metrics\">/metrics</a>.</p>\n";

  out += "<h2>Consumers (" + std::to_string(consumers.size()) + ")</h2>\n";
  out += "<table id=\"consumers\"><thead><tr><th>consumer</th><th>phase</th>"
         "<th>connected since</th><th>sink</th><th>lag</th><th>lag s</th>"
         "<th>lag, last hour</th><th>WAL retained</th><th>last ack</th>"
         "<th>acked<br>confirmed<br>source WAL</th><th>slot</th></tr></thead><tbody>\n";
  for (const auto& [name, stats] : consumers)
    ConsumerRow(out, name, *stats, registry.LagHistory(name), now_us);
  if (consumers.empty())
    out += "<tr class=\"none\"><td colspan=\"11\">no consumer configured or connected</td></tr>\n";
  out += "</tbody></table>\n";

  out += "<h2>Repairs in flight</h2>\n<table id=\"repairs\"><thead><tr><th>consumer</th>"
         "<th>request</th><th>table</th><th>kind</th><th>state</th><th>progress</th></tr>"
         "</thead><tbody>\n";
  const std::size_t before = out.size();
  for (const auto& [name, stats] : consumers) RepairRows(out, name, *stats);
  if (out.size() == before) out += "<tr class=\"none\"><td colspan=\"6\">none</td></tr>\n";
  out += "</tbody></table>\n";

  out += "<h2>Last problems</h2>\n<p class=\"now\">The last " +
         std::to_string(log::kRecentProblems) +
         " warn and error lines of the log, newest first.</p>\n<table id=\"problems\"><thead>"
         "<tr><th>time</th><th>level</th><th>consumer</th><th>event</th><th>details</th></tr>"
         "</thead><tbody>\n";
  for (auto it = problems.rbegin(); it != problems.rend(); ++it) {
    const char* level = LevelName(it->level);
    out += std::string("<tr class=\"problem ") + level + "\"><td class=\"time\">" +
           Moment(it->at_us, now_us, " ago") + "</td><td class=\"level\">" + level +
           "</td><td class=\"consumer\">" + HtmlEscape(it->consumer) +
           "</td><td class=\"event\">" + HtmlEscape(it->event) + "</td><td class=\"text\">" +
           HtmlEscape(it->text) + "</td></tr>\n";
  }
  if (problems.empty()) out += "<tr class=\"none\"><td colspan=\"5\">none</td></tr>\n";
  out += "</tbody></table>\n</body></html>\n";
  return out;
}

}  // namespace dblog::metrics
