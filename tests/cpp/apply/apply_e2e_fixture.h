// tests/cpp/apply/apply_e2e_fixture.h: the fixture of the `dblog apply` end-to-end suites: the
// real dblogd (DblogdTest), a target database the test creates and drops in the same cluster,
// the real `dblog apply` (ApplyProcess), and the comparison of a source table with its target
// copy (row counts and an order-independent hash of the rows' text; the first differing row on
// a mismatch).
#pragma once

#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "apply_process.h"
#include "dblogd_fixture.h"

namespace dblog::test {

using namespace std::chrono_literals;

class ApplyE2eTest : public DblogdTest {
 protected:
  void SetUp() override {
    DblogdTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    target_db_ = "t_" + consumer();
    db().exec("DROP DATABASE IF EXISTS " + target_db_ + " WITH (FORCE)");
    db().exec("CREATE DATABASE " + target_db_);
    target_conninfo_ = conninfo() + " dbname=" + target_db_;
    target_.emplace(target_conninfo_);
  }
  void TearDown() override {
    if (HasFailure() && apply_) std::cerr << "---- dblog apply log ----\n" << apply_->log();
    apply_.reset();
    target_.reset();
    if (!target_db_.empty()) {
      try {
        db().exec("DROP DATABASE IF EXISTS " + target_db_ + " WITH (FORCE)");
      } catch (const std::exception& e) {
        std::cerr << "dropping " << target_db_ << ": " << e.what() << "\n";
      }
    }
    DblogdTest::TearDown();
  }

  PgConn& target() { return *target_; }

  ApplyProcess& StartApply(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--consumer", consumer(),
                                     "--port",     std::to_string(dblogd_->port()),
                                     "--target",   target_conninfo_};
    args.insert(args.end(), extra.begin(), extra.end());
    apply_ = std::make_unique<ApplyProcess>(args);
    apply_->Start();
    return *apply_;
  }

  // dblog apply (--create-tables) started and through its bootstrap: received, and what the
  // source committed before a Sentinel() applied. Fatal failures end only this function: call
  // it in ASSERT_NO_FATAL_FAILURE.
  void StartApplyThroughBootstrap() {
    StartApply({"--create-tables"});
    ASSERT_TRUE(apply_->WaitForLog("bootstrap received", 60s)) << apply_->log();
    WaitApplied(Sentinel());
  }

  // The same, then dblog apply stopped (SIGTERM, exited within 30 s): the target holds the
  // bootstrap and its position. Call it in ASSERT_NO_FATAL_FAILURE.
  void ApplyBootstrapThenStop() {
    ASSERT_NO_FATAL_FAILURE(StartApplyThroughBootstrap());
    apply_->Signal(SIGTERM);
    ASSERT_TRUE(apply_->Wait(30s));
  }

  // "commit_lsn:seq" as the applier logs positions, or "" when none is stored.
  std::string StoredPosition() {
    try {
      auto rows = target().exec(
          "SELECT commit_lsn::text || ':' || seq FROM dblog_apply.progress WHERE consumer = '" +
          consumer() + "' AND commit_lsn IS NOT NULL");
      return rows.empty() ? "" : *rows[0][0];
    } catch (const PgError&) {
      return "";  // the applier has not created dblog_apply yet
    }
  }

  // Waits until the target stored a position at or after `lsn` (a Sentinel()).
  void WaitApplied(std::uint64_t lsn, std::chrono::seconds timeout = 120s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char text[32];
    std::snprintf(text, sizeof text, "%X/%X", static_cast<unsigned>(lsn >> 32),
                  static_cast<unsigned>(lsn));
    while (std::chrono::steady_clock::now() < deadline) {
      try {
        auto rows = target().exec("SELECT commit_lsn >= '" + std::string(text) +
                                  "'::pg_lsn FROM dblog_apply.progress WHERE consumer = '" +
                                  consumer() + "'");
        if (!rows.empty() && rows[0][0] == std::string("t")) return;
      } catch (const PgError&) {
        // dblog_apply does not exist yet
      }
      if (apply_ && apply_->Exited()) {
        FAIL() << "dblog apply exited before applying " << text << ":\n" << apply_->log();
      }
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "the target did not reach " << text << " in time";
  }

  // Counts and an order-independent hash of the rows' text; on a mismatch the first row that
  // differs.
  void ExpectSameTable(const std::string& table) {
    const std::string q = schema() + "." + table;
    const std::string sql =
        "SELECT count(*) || ' ' || coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '-')"
        " FROM " +
        q + " t";
    const std::string source = db().scalar(sql);
    const std::string copy = target().scalar(sql);
    if (source == copy) return;
    ADD_FAILURE() << q << ": source " << source << ", target " << copy;
    std::set<std::string> a, b;
    for (const auto& r : db().exec("SELECT t::text FROM " + q + " t")) a.insert(*r[0]);
    for (const auto& r : target().exec("SELECT t::text FROM " + q + " t")) b.insert(*r[0]);
    for (const auto& row : a)
      if (!b.count(row)) {
        ADD_FAILURE() << q << ": source row missing or different in the target: " << row;
        break;
      }
    for (const auto& row : b)
      if (!a.count(row)) {
        ADD_FAILURE() << q << ": target row not in the source: " << row;
        break;
      }
  }

  // Like ExpectSameTable, over the source's columns only (by name, in the source's order): for
  // targets that keep columns the source dropped, or whose column order differs.
  void ExpectSameSourceColumns(const std::string& table) {
    const std::string q = schema() + "." + table;
    const std::string columns = db().scalar(
        "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute"
        " WHERE attrelid = '" + q + "'::regclass AND attnum > 0 AND NOT attisdropped");
    const std::string sql =
        "SELECT count(*) || ' ' || coalesce(md5(string_agg(r::text, ',' ORDER BY r::text)), '-')"
        " FROM (SELECT " + columns + " FROM " + q + ") r";
    const std::string source = db().scalar(sql);
    const std::string copy = target().scalar(sql);
    EXPECT_EQ(source, copy) << q << " (columns " << columns << ")";
  }

  std::string T(const std::string& table) { return schema() + "." + table; }

  std::unique_ptr<ApplyProcess> apply_;
  std::string target_db_;
  std::string target_conninfo_;
  std::optional<PgConn> target_;
};

}  // namespace dblog::test
