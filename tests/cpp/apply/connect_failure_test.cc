// tests/cpp/apply/connect_failure_test.cc: how dblog apply reads a failed target connection
// (ConnectFailureSqlstate: libpq reports it as text only) and checks --target before using it
// (ConninfoError). No database: libpq's own messages, as they read in English.
#include <gtest/gtest.h>

#include "client/apply/pg.h"
#include "client/retry.h"

namespace dblog::apply {
namespace {

TEST(ConnectFailure, SqlstateFromTheMessage) {
  const std::string socket = "connection to server on socket \"/tmp/.s.PGSQL.5432\" failed: ";
  // permanent: the password, the role, the database, pg_hba.conf
  EXPECT_EQ(ConnectFailureSqlstate(
                socket + "FATAL: password authentication failed for user \"app\"", false),
            "28P01");
  EXPECT_EQ(ConnectFailureSqlstate(socket + "fe_sendauth: no password supplied", true), "28P01");
  EXPECT_EQ(ConnectFailureSqlstate(socket + "FATAL: role \"nobody\" does not exist", false),
            "28000");
  EXPECT_EQ(ConnectFailureSqlstate(
                socket + "FATAL: no pg_hba.conf entry for host \"10.0.0.1\", user \"app\"", false),
            "28000");
  EXPECT_EQ(ConnectFailureSqlstate(socket + "FATAL: database \"replica\" does not exist", false),
            "3D000");
  // transient: everything else
  for (const char* message :
       {"connection to server at \"127.0.0.1\", port 1 failed: Connection refused Is the server "
        "running on that host and accepting TCP/IP connections?",
        "connection to server on socket \"/tmp/.s.PGSQL.5432\" failed: No such file or directory",
        "connection to server at \"db\" (10.0.0.2), port 5432 failed: FATAL: the database system "
        "is starting up",
        "connection to server at \"db\", port 5432 failed: FATAL: sorry, too many clients already",
        "could not translate host name \"db\" to address: Temporary failure in name resolution",
        "connection to server at \"db\", port 5432 failed: timeout expired",
        "FATAL:  la base de données « replica » n'existe pas"}) {  // not English: retried
    EXPECT_EQ(ConnectFailureSqlstate(message, false), "08001") << message;
  }
  EXPECT_TRUE(client::IsRetryableSqlstate("08001"));
  EXPECT_FALSE(client::IsRetryableSqlstate("28P01"));
  EXPECT_FALSE(client::IsRetryableSqlstate("28000"));
  EXPECT_FALSE(client::IsRetryableSqlstate("3D000"));
}

TEST(ConnectFailure, ConninfoIsCheckedBeforeUse) {
  EXPECT_FALSE(ConninfoError("dbname=replica"));
  EXPECT_FALSE(ConninfoError("host=db port=5433 dbname=replica user=dblog connect_timeout=5"));
  EXPECT_FALSE(ConninfoError("postgresql://dblog@db:5433/replica?sslmode=require"));
  EXPECT_FALSE(ConninfoError("replica"));  // a bare database name is a dbname
  EXPECT_EQ(ConninfoError("host=db bogus=1").value_or(""), "invalid connection option \"bogus\"");
  EXPECT_TRUE(ConninfoError("host=db port"));
  EXPECT_TRUE(ConninfoError("postgresql://db:5432/replica?nonsense=1"));
  EXPECT_TRUE(ConninfoError("dbname='unterminated"));
}

}  // namespace
}  // namespace dblog::apply
