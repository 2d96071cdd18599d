// tests/cpp/pg_test_util.cc: the test-only libpq wrapper declared in pg_test_util.h.
#include "pg_test_util.h"

#include <cstdlib>

namespace dblog::test {
namespace {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

void ignore_notice(void*, const char*) {}

// Throws unless the result is a success; the message names the SQL and the server's words.
Result checked(Result res, PGconn* conn, const std::string& sql) {
  ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return res;
  std::string msg = res ? PQresultErrorMessage(res.get()) : PQerrorMessage(conn);
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  throw PgError("SQL failed: " + sql + "\n  server: " + msg);
}

Rows copy_rows(const PGresult* res) {
  Rows rows;
  const int nrows = PQntuples(res);
  const int ncols = PQnfields(res);
  rows.reserve(nrows);
  for (int r = 0; r < nrows; ++r) {
    Row row;
    row.reserve(ncols);
    for (int c = 0; c < ncols; ++c) {
      if (PQgetisnull(res, r, c))
        row.emplace_back(std::nullopt);
      else
        row.emplace_back(std::string(PQgetvalue(res, r, c), PQgetlength(res, r, c)));
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

std::optional<std::string> test_conninfo() {
  const char* v = std::getenv("DBLOG_TEST_CONNINFO");
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

PgConn::PgConn(const std::string& conninfo) : conn_(PQconnectdb(conninfo.c_str())) {
  if (!conn_) throw PgError("PQconnectdb: out of memory");
  if (PQstatus(conn_.get()) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn_.get());
    throw PgError("cannot connect to '" + conninfo + "': " + msg);
  }
  PQsetNoticeProcessor(conn_.get(), ignore_notice, nullptr);
}

Rows PgConn::exec(const std::string& sql) {
  Result res = checked(Result(PQexec(conn_.get(), sql.c_str())), conn_.get(), sql);
  return copy_rows(res.get());
}

Rows PgConn::exec_binary(const std::string& sql, const std::vector<std::string>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p.c_str());
  Result res(PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr,
                          values.data(), nullptr, nullptr, /*resultFormat=*/1));
  res = checked(std::move(res), conn_.get(), sql);
  return copy_rows(res.get());
}

std::string PgConn::scalar(const std::string& sql) {
  Rows rows = exec(sql);
  if (rows.size() != 1 || rows[0].size() != 1 || !rows[0][0])
    throw PgError("expected one non-NULL value from: " + sql);
  return *rows[0][0];
}

std::string PgConn::literal(const std::string& s) {
  char* q = PQescapeLiteral(conn_.get(), s.data(), s.size());
  if (q == nullptr) throw PgError(std::string("PQescapeLiteral: ") + PQerrorMessage(conn_.get()));
  std::string out(q);
  PQfreemem(q);
  return out;
}

}  // namespace dblog::test
