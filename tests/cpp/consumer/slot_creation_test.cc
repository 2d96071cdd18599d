// tests/cpp/consumer/slot_creation_test.cc: consumer::SlotCreation against the test cluster.
// The pipeline's own cases (a client giving up while the creation waits: nothing left) run
// through dblogd in tests/cpp/sidecar/isolation_test.cc.
#include "consumer/slot_creation.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "pg_test_util.h"

namespace dblog::consumer {
namespace {

// Found by the failover oracle (seed 8079): a reconcile's slot whose creation ended just as the
// consumer went away was handed to nobody (the pipeline was gone) and stayed. The next
// connection resumed from it as if it were the consumer's, so nothing said the reconcile to the
// consumer. A slot made but never handed over is dropped. Here the io_context never runs, so
// the outcome is never handed over; the SlotCreation goes once the slot is made.
TEST(SlotCreationTest, ASlotMadeButNeverHandedOverIsDropped) {
  const std::optional<std::string> conninfo = test::test_conninfo();
  if (!conninfo) GTEST_SKIP() << "DBLOG_TEST_CONNINFO is not set";
  test::PgConn db(*conninfo);
  const std::string slot = "dblog_slot_creation_test";
  db.exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
          " WHERE slot_name = '" + slot + "'");
  boost::asio::io_context io;
  {
    SlotCreation creation(io, pg::Connection::Open(*conninfo, true), slot, "test_decoding", false,
                          [](SlotCreation::Outcome) { ADD_FAILURE() << "handed over"; });
    // made: in pg_replication_slots and no longer held by the walsender that made it
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         db.scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot +
                   "' AND NOT active") != "1";) {
      ASSERT_LT(std::chrono::steady_clock::now(), until) << "the slot was not made";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_EQ(db.scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot +
                      "'"),
            "0");
  db.exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
          " WHERE slot_name = '" + slot + "'");
}

}  // namespace
}  // namespace dblog::consumer
