// sidecar/metrics/status_page.h: the status page, GET /status on the metrics listener: every
// consumer's health as one server-rendered HTML page (no script; it reloads itself every
// kRefreshSeconds through <meta http-equiv="refresh">).
// Owns: the page's markup: the consumers' table (what /status.json says, status.h), the lag
// sparklines drawn from Registry::LagHistory as inline SVG, the repairs in flight, the last warn
// and error log lines (log::RecentProblems), and the HTML escaping of every text it shows.
// Served by metrics::HttpRespond with the same access rules as /metrics.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "log/log.h"
#include "metrics/metrics.h"

namespace dblog::metrics {

constexpr int kRefreshSeconds = 5;

// The page at `now_us` (microseconds since the Unix epoch), UTF-8. Sections, each an element
// with an id the browser test reads:
//   table#consumers   one tr.consumer per consumer in name order (data-consumer: its name), with
//                     td.name, td.phase (data-phase: status.json's phase, "repairing" while a
//                     repair request runs), td.since, td.sink, td.lag-bytes and
//                     td.retained-bytes (data-value: bytes), td.lag-seconds (data-value),
//                     td.sparkline (an <svg class="sparkline">: lag bytes and lag seconds over
//                     the last hour, each scaled to its own maximum; RenderSparkline),
//                     td.last-ack, td.lsns
//   table#repairs     one tr.repair per request queued or running (or a row saying none)
//   table#problems    the last warn and error log lines, newest first (or a row saying none)
std::string RenderStatusPage(const Registry& registry, const std::vector<log::Problem>& problems,
                             std::int64_t now_us);

// `text` safe as HTML text and as a quoted attribute value: & < > " ' as character references,
// other control characters (but tab and newline) as '?'.
std::string HtmlEscape(std::string_view text);

// The sparkline of one consumer: samples (oldest first) and the current values at `now_us`,
// over the hour before `now_us` (or from the oldest sample when that is younger, at least a
// minute), as an inline <svg class="sparkline"> of width x height and a key under it.
std::string RenderSparkline(const std::vector<LagSample>& samples, const LagSample& now,
                            int width = 160, int height = 28);

}  // namespace dblog::metrics
