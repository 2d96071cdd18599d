// sidecar/main.cc: dblogd, the daemon. Parses settings (with --check: checks the source and
// exits, consumer/setup_check.h; with --ddl-trigger-sql: prints pgoutput mode's DDL trigger,
// consumer/ddl_trigger.h), starts the consumer listener and the metrics endpoint on one
// io_context, reloads its consumers' settings on SIGHUP and stops gracefully on SIGTERM/SIGINT.
#include <malloc.h>

#include <boost/asio.hpp>
#include <csignal>
#include <functional>
#include <iostream>

#include "config/config.h"
#include "consumer/ddl_trigger.h"
#include "consumer/pipeline.h"
#include "consumer/setup_check.h"
#include "log/log.h"
#include "metrics/metrics.h"
#include "server/server.h"
#include "server/tls.h"

namespace {

using namespace dblog;

// Without a token, the listen address is the only barrier (dblogd refuses to start like this on
// any other than loopback): say who is exposed.
void WarnAboutExposure(const config::Config& cfg) {
  std::string open;
  for (const std::string& name : config::OpenConsumers(cfg))
    open += (open.empty() ? "" : ",") + name;
  if (cfg.default_scope && cfg.token.empty()) open += open.empty() ? "*" : ",*";
  if (!open.empty())
    log::Warn("consumers_without_token",
              {{"consumers", open},
               {"message", "any local process can connect as these consumers (* = any name "
                           "under --default-scope), read their changes and acknowledge them, "
                           "so that their real sink never receives them; give each consumer "
                           "its own --consumer-token-file (or set --token-file)"}});
  if (cfg.insecure_no_tls)
    log::Warn("tls_disabled",
              {{"listen", cfg.listen.host},
               {"message", "--insecure-no-tls: consumer connections to a non-loopback address "
                           "are plaintext; tokens and every change travel in clear text, "
                           "readable and alterable by anyone on the path. Only safe when "
                           "nothing but a tunnel (SSH, WireGuard) reaches this address"}});
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

// SIGHUP: the settings are read again (flags, --config file, environment, token files); what
// may change at once does (config::PlanReload), the rest waits for a restart. `running` is what
// is in force; a reading that fails changes nothing.
void Reload(int argc, char** argv, config::Config& running, metrics::Registry& registry,
            server::Server& server) {
  try {
    std::optional<config::Config> read = config::Parse(argc, argv);
    if (!read) return;
    config::Reload reload = config::PlanReload(running, std::move(*read));
    log::SetMinLevel(log::ParseLevel(reload.next.log_level));
    log::Info("config_reloaded", {{"added", JoinNames(reload.added)},
                                  {"removed", JoinNames(reload.removed)},
                                  {"changed", JoinNames(reload.changed)},
                                  {"ending", JoinNames(reload.end_consumers)},
                                  {"ending_unnamed", reload.end_unconfigured ? "true" : "false"}});
    if (!reload.needs_restart.empty())
      log::Warn("config_needs_restart",
                {{"settings", JoinNames(reload.needs_restart)},
                 {"message", "these settings changed but take effect only when dblogd "
                             "restarts; they keep their running values"}});
    for (const auto& [name, c] : reload.next.consumers) registry.ForConsumer(name);
    server.Reconfigure(reload);
    running = std::move(reload.next);
  } catch (const std::exception& e) {
    log::Error("config_reload_failed",
               {{"error", e.what()}, {"message", "the running settings are kept"}});
  }
}

// SIGTERM/SIGINT: stop accepting, let error frames, the consumers' last acks and final status
// updates go: stop the loop when every pipeline has finished (at once when none was
// connected), or after 2 s.
void StopGracefully(boost::asio::io_context& io, server::Server& server,
                    metrics::HttpEndpoint* http) {
  const bool consumers_connected = server.live_consumers() > 0;
  server.Shutdown();
  if (http) http->Stop();
  const auto deadline = std::chrono::steady_clock::now() +
                        (consumers_connected ? std::chrono::seconds(2) : std::chrono::seconds(0));
  auto timer = std::make_shared<boost::asio::steady_timer>(io);
  auto wait = std::make_shared<std::function<void()>>();
  *wait = [&io, &server, timer, deadline, wait] {
    if (server.live_consumers() == 0 || std::chrono::steady_clock::now() >= deadline) {
      io.stop();
      *wait = nullptr;  // breaks the cycle
      return;
    }
    timer->expires_after(std::chrono::milliseconds(20));
    timer->async_wait([wait](boost::system::error_code) {
      if (*wait) (*wait)();
    });
  };
  (*wait)();
}

// glibc's malloc gives buffers above its mmap threshold their own mapping, and returns the top
// of a heap to the system past its trim threshold; by default the first follows the largest
// mapped block freed so far (128 KiB up to 32 MiB) and the second is twice it. A stream of long
// values in 1 MiB pieces then maps, or grows the heap again, and faults in fresh pages for every
// piece at every copy (libpq's message, the output, the session's queue): 500 MB of pieces cost
// dblogd 2.3-2.7 CPU s, against 0.38-0.42 s with these fixed values (docs/benchmarks.md).
// Blocks of up to 16 MiB come from the heap, and every arena keeps up to 32 MiB free on top;
// larger ones (a whole huge row) are still mapped and given back at once. They override
// GLIBC_TUNABLES' two (docs/architecture.md, "Memory bounds").
void TuneMalloc() {
  mallopt(M_MMAP_THRESHOLD, 16 << 20);
  mallopt(M_TRIM_THRESHOLD, 32 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  TuneMalloc();
  std::optional<config::Config> cfg;
  std::shared_ptr<boost::asio::ssl::context> tls;
  try {
    cfg = config::Parse(argc, argv);
    if (!cfg) return 0;
    log::SetMinLevel(log::ParseLevel(cfg->log_level));
    if (cfg->tls()) tls = server::MakeServerContext(*cfg);
  } catch (const std::exception& e) {
    std::cerr << "dblogd: " << e.what() << "\n(dblogd --help lists every setting)\n";
    return 2;
  }
  std::signal(SIGPIPE, SIG_IGN);
  if (cfg->ddl_trigger_sql) {
    std::cout << consumer::DdlTriggerSql();
    return 0;
  }
  if (cfg->check) {
    try {
      return consumer::RunSetupChecks(*cfg, std::cout) ? 0 : 1;
    } catch (const std::exception& e) {
      std::cerr << "dblogd --check: " << e.what() << "\n";
      return 1;
    }
  }

  try {
    boost::asio::io_context io;
    metrics::Registry registry;
    server::Server server(io, *cfg, registry, consumer::MakeConsumerFactory(*cfg), tls);
    std::unique_ptr<metrics::HttpEndpoint> http;
    if (cfg->metrics) {
      boost::asio::ip::tcp::resolver resolver(io);
      auto at = *resolver.resolve(cfg->metrics->host, std::to_string(cfg->metrics->port)).begin();
      http = std::make_unique<metrics::HttpEndpoint>(io, at, registry);
      http->Start();
      log::Info("metrics_listening", {{"address", at.endpoint().address().to_string()},
                                      {"port", http->local_endpoint().port()}});
    }
    WarnAboutExposure(*cfg);
    for (const auto& [name, c] : cfg->consumers)
      registry.ForConsumer(name);  // so /metrics lists configured consumers before they connect
    // handled before the first consumer can connect
    boost::asio::signal_set hangup(io, SIGHUP);
    config::Config running = *cfg;
    std::function<void()> await_hangup = [&] {
      hangup.async_wait([&](boost::system::error_code ec, int) {
        if (ec) return;
        Reload(argc, argv, running, registry, server);
        await_hangup();
      });
    };
    await_hangup();
    server.Start();

    boost::asio::signal_set signals(io, SIGTERM, SIGINT);
    signals.async_wait([&](boost::system::error_code ec, int signo) {
      if (ec) return;
      log::Info("shutting_down", {{"signal", signo}});
      hangup.cancel();
      StopGracefully(io, server, http.get());
    });
    io.run();
    log::Info("stopped");
  } catch (const std::exception& e) {
    log::Error("fatal", {{"error", e.what()}});
    return 1;
  }
  return 0;
}
