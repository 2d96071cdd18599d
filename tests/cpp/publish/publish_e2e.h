// tests/cpp/publish/publish_e2e.h: what the broker tests (jetstream_test.cc, kafka_test.cc) do
// alike around the real `dblog publish` (publish_process.h) and dblogd: its arguments, the
// workload and a writer of it on a thread of its own, disturbances at random moments (kills of
// `dblog publish` and of dblogd, repairs, and the broker's own) and the wait for the repairs
// they requested. Reading the log back is each broker's own.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "dblogd_fixture.h"
#include "oracle_workload.h"
#include "publish_process.h"

namespace dblog::test {

// The oracle's workload, with smaller large transactions and truncates of two tables at once
// (one Truncate event for two subjects, or topics).
inline constexpr WorkloadOptions kPublishWorkload{500, false, true};

// The workload's random transactions on a connection and a thread of their own, until Stop or
// `max` of them are written (0: no limit), `pace` apart; a lost connection is opened again.
class WorkloadWriter {
 public:
  WorkloadWriter(std::string conninfo, std::string schema, std::uint64_t seed, int max = 0,
                 std::chrono::milliseconds pace = std::chrono::milliseconds(0))
      : thread_([this, conninfo, schema, seed, max, pace] {
          std::mt19937_64 rng(seed);
          std::optional<PgConn> conn;
          for (int done = 0; !stop_ && (max == 0 || done < max);) {
            try {
              if (!conn) conn.emplace(conninfo);
              RandomTransaction(*conn, schema, rng, kPublishWorkload);
              ++done;
              if (pace.count() > 0) std::this_thread::sleep_for(pace);
            } catch (const PgError&) {
              conn.reset();
              std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
          }
        }) {}
  ~WorkloadWriter() { Stop(); }
  WorkloadWriter(const WorkloadWriter&) = delete;
  WorkloadWriter& operator=(const WorkloadWriter&) = delete;
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;  // (last: it starts once stop_ is made)
};

class PublishE2eTest : public DblogdTest {
 protected:
  std::string Prefix() const { return "dblog." + consumer(); }
  // `dblog publish` into `to` for this test's consumer, retrying fast.
  std::vector<std::string> PublishArgs(const std::string& to,
                                       const std::vector<std::string>& extra = {}) {
    std::vector<std::string> a = {"--consumer=" + consumer(),
                                  "--port=" + std::to_string(dblogd_->port()),
                                  "--to=" + to,
                                  "--retry-min=0.1",
                                  "--retry-max=1",
                                  "--ack-timeout=3"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  struct Disturbances {
    int publish_kills = 0;
    int dblogd_kills = 0;
    std::vector<std::string> requests;  // the repairs' request ids
  };
  // For `duration`, every 0.3 to 1 s (restarting `publisher` first if it exited), one of, drawn
  // from `rng`: `publisher` SIGKILLed and restarted; dblogd SIGKILLed and restarted; a repair of
  // one of `repaired` (tables of this test's schema); a range repair of t_int; one of `broker`,
  // the broker's own disturbances.
  void Disturb(std::mt19937_64& rng, std::chrono::seconds duration, PublishProcess& publisher,
               const std::vector<std::string>& repaired,
               const std::vector<std::function<void()>>& broker, Disturbances& done) {
    const std::string& s = schema();
    // A repair needs the consumer's scope on record, which its first connection writes: with
    // some seeds (tests/soak.sh) the first disturbance is a repair, before the publisher's
    // first connection got that far.
    const auto registered = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (db().scalar("SELECT count(*) FROM dblog.consumers WHERE name = '" + consumer() +
                       "'") == "0") {
      ASSERT_LT(std::chrono::steady_clock::now(), registered) << "the consumer never connected";
      publisher.Supervise();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const auto end = std::chrono::steady_clock::now() + duration;
    while (std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 700));
      publisher.Supervise();
      const std::size_t what = rng() % (4 + broker.size());
      switch (what) {
        case 0:
          publisher.Kill();
          publisher.Start();
          ++done.publish_kills;
          break;
        case 1:
          dblogd_->Signal(SIGKILL);
          dblogd_->Wait();
          dblogd_->Start();
          ++done.dblogd_kills;
          break;
        case 2:
          done.requests.push_back(db().scalar("SELECT dblog.repair('" + s + "." +
                                              repaired[rng() % repaired.size()] + "')"));
          break;
        case 3:
          done.requests.push_back(db().scalar("SELECT dblog.repair_range('" + s +
                                              ".t_int', '{\"id\": " + std::to_string(rng() % 1000) +
                                              "}', '{\"id\": 2500}')"));
          break;
        default:
          broker[what - 4]();
      }
    }
  }
  // Waits (up to 180 s in all) until every request is done, keeping `publisher` running.
  void WaitForRequests(const std::vector<std::string>& requests, PublishProcess& publisher) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    for (const auto& id : requests) {
      while (db().scalar("SELECT state FROM dblog.requests WHERE id = " + id) != "done") {
        publisher.Supervise();
        ASSERT_LT(std::chrono::steady_clock::now(), deadline)
            << "repair " << id << " never done; " << publisher.Log();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
  }
};

}  // namespace dblog::test
