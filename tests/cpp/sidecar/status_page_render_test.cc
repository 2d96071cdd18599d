// tests/cpp/sidecar/status_page_render_test.cc: the status page of GET /status without a
// browser, database or socket: metrics::RenderStatusPage (phases, numbers, repairs, problems,
// every name escaped), RenderSparkline, the lag history's ring (Registry::SampleLag), the ring
// of recent problems (log::RecentProblems) and HttpRespond's answers for /status (headers, the
// same refusals as /metrics). The browser test is status_page_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "log/log.h"
#include "metrics/metrics.h"
#include "metrics/status_page.h"

namespace dblog::metrics {
namespace {

constexpr std::int64_t kNow = 1764950400000000;  // 2025-12-05T16:00:00Z
constexpr std::int64_t kSecond = 1000000;

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// The hostile strings: markup, both quotes, an ampersand, a control character.
const std::string kEvilName = "<script>alert(\"x\")</script>&'\x01";
const std::string kEvilEscaped =
    "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;?";

TEST(StatusPage, EscapesEveryNameTableSinkAndError) {
  EXPECT_EQ(HtmlEscape(kEvilName), kEvilEscaped);
  EXPECT_EQ(HtmlEscape("plain-name_1 ü"), "plain-name_1 ü");

  Registry registry;
  const auto evil = registry.ForConsumer(kEvilName);
  evil->connected = 1;
  evil->connected_since_us = kNow - 10 * kSecond;
  evil->SetSession("\"><script>peer()</script>", "<img src=x onerror=alert(1)>");
  evil->SetRepairs({{3, "public.\"<script>t</script>\"", "table", 10, 100, 1, true}});
  // A real warn line through the log, naming the consumer and carrying the hostile text, as a
  // refused handshake or a failed repair would.
  log::Warn("status_page_test_problem",
            {{"consumer", kEvilName}, {"error", "bad <script>alert('e')</script> & \"q\""}});
  const auto problems = log::RecentProblems();
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems.back().event, "status_page_test_problem");
  EXPECT_EQ(problems.back().consumer, kEvilName);

  const std::string page = RenderStatusPage(registry, problems, kNow);
  // Nothing of what was given became markup: no script, no image, no attribute broken out of.
  EXPECT_FALSE(Has(Lower(page), "<script")) << page;
  EXPECT_FALSE(Has(Lower(page), "<img")) << page;
  EXPECT_FALSE(Has(page, "\x01")) << page;
  // Each shown escaped, as text and in attributes.
  EXPECT_TRUE(Has(page, "<td class=\"name\">" + kEvilEscaped + "</td>")) << page;
  EXPECT_TRUE(Has(page, "data-consumer=\"" + kEvilEscaped + "\"")) << page;
  EXPECT_TRUE(Has(page, "<td class=\"sink\">&quot;&gt;&lt;script&gt;peer()&lt;/script&gt;<br>"
                        "<span class=\"client\">&lt;img src=x onerror=alert(1)&gt;</span></td>"))
      << page;
  EXPECT_TRUE(Has(page, "<td class=\"table\">public.&quot;&lt;script&gt;t&lt;/script&gt;&quot;"
                        "</td>"))
      << page;
  EXPECT_TRUE(Has(page, "<td class=\"consumer\">" + kEvilEscaped + "</td>")) << page;
  EXPECT_TRUE(Has(page, "bad &lt;script&gt;alert(&#39;e&#39;)&lt;/script&gt; &amp; "))
      << page;
}

TEST(StatusPage, OneRowPerConsumerWithItsPhaseLagsAndRepairs) {
  Registry registry;
  const auto copying = registry.ForConsumer("boot");
  copying->connected = 1;
  copying->connected_since_us = kNow - 75 * kSecond;
  copying->bootstrap_running = 1;
  copying->bootstrap_rows = 1200;
  copying->bootstrap_rows_estimated = 5000;
  const auto unanalyzed = registry.ForConsumer("boot2");
  unanalyzed->connected = 1;
  unanalyzed->bootstrap_running = 1;
  unanalyzed->bootstrap_rows = 700;  // reltuples unknown: no estimate
  const auto waiting = registry.ForConsumer("creating");
  waiting->connected = 1;
  waiting->connected_since_us = kNow;
  waiting->slot_creation_started_us = kNow - 3 * kSecond;
  registry.ForConsumer("gone");  // configured, never connected
  const auto repairing = registry.ForConsumer("mend");
  repairing->connected = 1;
  repairing->connected_since_us = kNow - 3700 * kSecond;
  repairing->SetSession("127.0.0.1:50312", "dblog-apply");
  repairing->SetSlotState("unreserved", 1048576);
  repairing->SetRepairs({{7, "public.items", "range", 400, 1000, 4, true},
                         {8, "public.other", "keys", 0, 0, 0, false}});
  const auto streaming = registry.ForConsumer("search");
  streaming->connected = 1;
  streaming->connected_since_us = kNow - 90 * kSecond;
  streaming->acked_lsn = 0x100000000ULL + 100;
  streaming->confirmed_lsn = 0x100000000ULL + 50;
  streaming->source_wal_lsn = 0x100000000ULL + 600;
  streaming->oldest_unacked_commit_us = kNow - 1500000;
  streaming->last_ack_us = kNow - 2 * kSecond;

  const std::string page = RenderStatusPage(registry, {}, kNow);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                       "<meta http-equiv=\"refresh\" content=\"5\">",
                       0),
            0u)
      << page;
  EXPECT_TRUE(Has(page, "<time id=\"now\" datetime=\"2025-12-05T16:00:00.000Z\">")) << page;
  EXPECT_TRUE(Has(page, "<h2>Consumers (6)</h2>")) << page;
  // In name order.
  const auto at = [&page](const std::string& name) {
    return page.find("data-consumer=\"" + name + "\"");
  };
  EXPECT_LT(at("boot"), at("boot2"));
  EXPECT_LT(at("boot2"), at("creating"));
  EXPECT_LT(at("creating"), at("gone"));
  EXPECT_LT(at("gone"), at("mend"));
  EXPECT_LT(at("mend"), at("search"));

  EXPECT_TRUE(Has(page, "<td class=\"phase\" data-phase=\"bootstrapping\">bootstrapping: 1200 of "
                        "~5000 rows (24%)</td>"))
      << page;
  EXPECT_TRUE(Has(page, "<td class=\"phase\" data-phase=\"bootstrapping\">bootstrapping: 700 rows "
                        "copied</td>"))
      << page;
  EXPECT_TRUE(Has(page, "<td class=\"phase\" data-phase=\"creating_slot\">creating its slot "
                        "(waiting 3 s for transactions open in the source)</td>"))
      << page;
  EXPECT_TRUE(Has(page, "<tr class=\"consumer phase-disconnected\" data-consumer=\"gone\">"
                        "<td class=\"name\">gone</td><td class=\"phase\" "
                        "data-phase=\"disconnected\">disconnected</td><td class=\"since\">-</td>"
                        "<td class=\"sink\">-</td>"))
      << page;
  EXPECT_TRUE(Has(page, "<td class=\"phase\" data-phase=\"repairing\">repairing request 7 at 40% "
                        "(400 of 1000 rows, 4 chunks), 1 queued</td>"))
      << page;
  EXPECT_TRUE(Has(page, "<td class=\"sink\">127.0.0.1:50312<br><span class=\"client\">"
                        "dblog-apply</span></td>"))
      << page;
  EXPECT_TRUE(Has(page, "(1 h 1 m)")) << page;  // connected for 3,700 s
  EXPECT_TRUE(Has(page, "<td class=\"phase\" data-phase=\"streaming\">streaming</td>"
                        "<td class=\"since\"><time datetime=\"2025-12-05T15:58:30.000Z\">"
                        "2025-12-05T15:58:30.000Z</time><br><span class=\"ago\">(1 m 30 s)</span>"))
      << page;
  // search: lag from the ack (500 bytes, 1.5 s), retained from the slot (550)
  EXPECT_TRUE(Has(page, "<td class=\"num lag-bytes\" data-value=\"500\">500 B</td>"
                        "<td class=\"num lag-seconds\" data-value=\"1.500\">1.5 s</td>"))
      << page;
  EXPECT_TRUE(Has(page, "<td class=\"num retained-bytes\" data-value=\"550\">550 B</td>"
                        "<td class=\"last-ack\"><time datetime=\"2025-12-05T15:59:58.000Z\">"))
      << page;
  EXPECT_TRUE(Has(page, "<td class=\"lsns\">1/64<br>1/32<br>1/258</td>")) << page;
  // the slot's wal_status and safe_wal_size as last read; "-" before the first read
  EXPECT_TRUE(Has(page, "<td class=\"slot\" data-state=\"unreserved\">unreserved<br>1.0 MiB safe</td>"))
      << page;
  EXPECT_TRUE(Has(page, "<td class=\"slot\" data-state=\"-\">-</td>")) << page;
  // Every consumer has its sparkline.
  std::size_t sparklines = 0;
  for (auto i = page.find("<svg class=\"sparkline\""); i != std::string::npos;
       i = page.find("<svg class=\"sparkline\"", i + 1))
    ++sparklines;
  EXPECT_EQ(sparklines, 6u);

  // The repairs in flight: the running one with its progress bar, the queued key list.
  EXPECT_TRUE(Has(page, "<tr class=\"repair\" data-consumer=\"mend\" data-request=\"7\"><td>mend"
                        "</td><td class=\"num\">7</td><td class=\"table\">public.items</td>"
                        "<td>range</td><td>running</td><td class=\"progress\"><progress "
                        "max=\"100\" value=\"40\"></progress> 40% (400 of 1000 rows, 4 chunks)"
                        "</td></tr>"))
      << page;
  EXPECT_TRUE(Has(page, "data-request=\"8\"><td>mend</td><td class=\"num\">8</td><td "
                        "class=\"table\">public.other</td><td>keys</td><td>queued</td><td "
                        "class=\"progress\">0 keys, 0 chunks</td></tr>"))
      << page;
  EXPECT_TRUE(Has(page, "<table id=\"problems\">")) << page;
  EXPECT_TRUE(Has(page, "<tr class=\"none\"><td colspan=\"5\">none</td></tr>")) << page;
  // No script at all: the page works without JavaScript.
  EXPECT_FALSE(Has(Lower(page), "<script")) << page;

  // Nothing configured or connected: the tables say so.
  const std::string empty = RenderStatusPage(Registry(), {}, kNow);
  EXPECT_TRUE(Has(empty, "<h2>Consumers (0)</h2>")) << empty;
  EXPECT_TRUE(Has(empty, "no consumer configured or connected")) << empty;
  EXPECT_TRUE(Has(empty, "<tr class=\"none\"><td colspan=\"6\">none</td></tr>")) << empty;
}

TEST(StatusPage, ProblemsNewestFirstWithLevelAndConsumer) {
  std::vector<log::Problem> problems = {
      {kNow - 120 * kSecond, log::Level::kWarn, "source_disconnected", "a", "error=\"gone\""},
      {kNow - 5 * kSecond, log::Level::kError, "repair_failed", "b", "request=3"},
      {kNow - 1 * kSecond, log::Level::kWarn, "consumer_refused", "", "peer=127.0.0.1:4"}};
  const std::string page = RenderStatusPage(Registry(), problems, kNow);
  const auto first = page.find("consumer_refused"), second = page.find("repair_failed"),
             third = page.find("source_disconnected");
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
  EXPECT_TRUE(Has(page, "<tr class=\"problem error\"><td class=\"time\"><time "
                        "datetime=\"2025-12-05T15:59:55.000Z\">2025-12-05T15:59:55.000Z</time><br>"
                        "<span class=\"ago\">(5 s ago)</span></td><td class=\"level\">error</td>"
                        "<td class=\"consumer\">b</td><td class=\"event\">repair_failed</td>"
                        "<td class=\"text\">request=3</td></tr>"))
      << page;
  EXPECT_TRUE(Has(page, "<td class=\"text\">error=&quot;gone&quot;</td>")) << page;
}

// The ring of recent problems: warn and error lines only, the last kRecentProblems, each text
// cut at kMaxProblemText bytes (not inside a UTF-8 character).
TEST(RecentProblems, LastWarnAndErrorLinesBounded) {
  log::Info("status_page_test_info", {{"consumer", "x"}});
  for (std::size_t i = 0; i < log::kRecentProblems + 5; ++i)
    log::Warn("status_page_test_ring", {{"consumer", "c"}, {"n", i}});
  auto problems = log::RecentProblems();
  ASSERT_EQ(problems.size(), log::kRecentProblems);
  for (const auto& p : problems) EXPECT_EQ(p.event, "status_page_test_ring");
  EXPECT_EQ(problems.front().text, "consumer=c n=5");
  EXPECT_EQ(problems.back().text, "consumer=c n=" + std::to_string(log::kRecentProblems + 4));
  EXPECT_EQ(problems.back().level, log::Level::kWarn);
  EXPECT_GT(problems.back().at_us, kNow);

  // "e=" and 512 bytes: the limit falls between the two bytes of the ü at 509.
  std::string long_text(log::kMaxProblemText, 'a');
  long_text.replace(509, 2, "\xc3\xbc");
  log::Error("status_page_test_long", {{"e", long_text}});
  problems = log::RecentProblems();
  EXPECT_EQ(problems.back().level, log::Level::kError);
  EXPECT_EQ(problems.back().consumer, "");
  EXPECT_EQ(problems.back().text, "e=" + std::string(509, 'a') + "...");
}

// The hour (or the history, when younger) across the width; each lag scaled to its maximum.
TEST(Sparkline, TheLastHourScaledToItsMaximum) {
  const std::vector<LagSample> samples = {
      {kNow - 2 * 3600 * kSecond, 999999, 99.0},  // older than an hour: not drawn
      {kNow - 3600 * kSecond, 0, 0.0},
      {kNow - 1800 * kSecond, 1000, 4.0},
      {kNow - 900 * kSecond, 500, 2.0}};
  const std::string svg = RenderSparkline(samples, LagSample{kNow, 250, 1.0}, 101, 24);
  EXPECT_EQ(svg.rfind("<svg class=\"sparkline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"101\""
                      " height=\"24\" viewBox=\"0 0 101 24\" role=\"img\" data-samples=\"4\">"
                      "<title>lag over the last hour, 4 samples: at most 1000 B and 4.0 s</title>",
                      0),
            0u)
      << svg;
  // x: the hour over 0..100; y: 22 (bottom) for 0, 2 (top) for the maximum
  EXPECT_TRUE(Has(svg, "<polyline class=\"bytes\" points=\"0.0,22.0 50.0,2.0 75.0,12.0 "
                       "100.0,17.0\"/>"))
      << svg;
  EXPECT_TRUE(Has(svg, "<polyline class=\"seconds\" points=\"0.0,22.0 50.0,2.0 75.0,12.0 "
                       "100.0,17.0\"/>"))
      << svg;
  EXPECT_TRUE(Has(svg, "the last hour: <span class=\"bytes\">max 1000 B")) << svg;

  // A younger history spans the width from its oldest sample (at least a minute).
  const std::string young = RenderSparkline(
      {{kNow - 200 * kSecond, 100, 1.0}, {kNow - 100 * kSecond, 0, 0.0}},
      LagSample{kNow, 50, 0.5}, 101, 24);
  EXPECT_TRUE(Has(young, "<title>lag over the last 3 m 20 s, 3 samples: ")) << young;
  EXPECT_TRUE(Has(young, "<polyline class=\"bytes\" points=\"0.0,2.0 50.0,22.0 100.0,12.0\"/>"))
      << young;
  const std::string short_history =
      RenderSparkline({{kNow - 15 * kSecond, 100, 1.0}}, LagSample{kNow, 100, 1.0}, 101, 24);
  EXPECT_TRUE(Has(short_history, "<title>lag over the last 1 m 0 s, 2 samples: ")) << short_history;
  EXPECT_TRUE(Has(short_history, "points=\"75.0,2.0 100.0,2.0\"")) << short_history;

  // No history yet: a short stroke at the current value; no lag: along the bottom.
  const std::string fresh = RenderSparkline({}, LagSample{kNow, 0, 0}, 101, 24);
  EXPECT_TRUE(Has(fresh, "data-samples=\"1\"")) << fresh;
  EXPECT_TRUE(Has(fresh, "<polyline class=\"bytes\" points=\"97.0,22.0 100.0,22.0\"/>")) << fresh;
}

// Registry::SampleLag keeps the last kLagSamples of each consumer, oldest first; Forget drops
// them with the consumer.
TEST(LagHistory, BoundedRingPerConsumerOldestFirst) {
  Registry registry;
  const auto a = registry.ForConsumer("a");
  a->source_wal_lsn = 1000;
  for (std::size_t i = 0; i < Registry::kLagSamples + 10; ++i) {
    a->confirmed_lsn = i;  // lag 1000 - i
    registry.SampleLag(kNow + std::int64_t(i) * 15 * kSecond);
  }
  auto history = registry.LagHistory("a");
  ASSERT_EQ(history.size(), Registry::kLagSamples);
  EXPECT_EQ(history.front().at_us, kNow + 10 * 15 * kSecond);
  EXPECT_EQ(history.front().lag_bytes, 990u);
  EXPECT_EQ(history.back().lag_bytes, 1000u - (Registry::kLagSamples + 9));
  for (std::size_t i = 1; i < history.size(); ++i)
    EXPECT_LT(history[i - 1].at_us, history[i].at_us);
  EXPECT_TRUE(registry.LagHistory("b").empty());
  registry.Forget("a");
  EXPECT_TRUE(registry.LagHistory("a").empty());
}

std::string Respond(const std::string& request, const Registry& registry) {
  const auto reply = HttpRespond(request, registry);
  EXPECT_EQ(reply.kind, HttpReply::Kind::kResponse) << request;
  return reply.response;
}

// GET /status through the same handler as /metrics and /status.json: HTML with a policy that
// allows no script; whatever /metrics refuses, /status refuses the same way.
TEST(HttpRespond, StatusPageAndTheSameRefusalsAsMetrics) {
  Registry registry;
  registry.ForConsumer("a");
  const std::string page = Respond("GET /status HTTP/1.1\r\nHost: x\r\n\r\n", registry);
  EXPECT_EQ(page.rfind("HTTP/1.0 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
                       "Content-Security-Policy: default-src 'none'; style-src 'unsafe-inline'\r\n"
                       "X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n"
                       "Content-Length: ",
                       0),
            0u)
      << page;
  const auto body = page.find("\r\n\r\n") + 4;
  EXPECT_TRUE(Has(page, "Content-Length: " + std::to_string(page.size() - body) + "\r\n"));
  EXPECT_EQ(page.substr(body, 15), "<!DOCTYPE html>");
  EXPECT_TRUE(Has(page, "data-consumer=\"a\"")) << page;

  for (const char* path : {"/metrics", "/status"}) {
    const std::string p = path;
    EXPECT_EQ(Respond("POST " + p + " HTTP/1.0\r\n\r\n", registry)
                  .rfind("HTTP/1.0 405 Method Not Allowed\r\n", 0),
              0u)
        << p;
    const std::string huge = "GET " + p + " HTTP/1.0\r\nX: " +
                             std::string(HttpEndpoint::kMaxHeaderBytes, 'a');
    const auto refused = HttpRespond(huge, registry);
    EXPECT_EQ(refused.kind, HttpReply::Kind::kTooLarge) << p;
    EXPECT_EQ(refused.response.rfind("HTTP/1.0 431 ", 0), 0u) << p;
  }
  EXPECT_EQ(Respond("GET /status/x HTTP/1.0\r\n\r\n", registry).rfind("HTTP/1.0 404 ", 0), 0u);
}

}  // namespace
}  // namespace dblog::metrics
