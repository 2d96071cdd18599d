// tests/cpp/pg_test_util.h: a small RAII libpq wrapper for the C++ tests only (the sidecar has
// its own in pg/). Owns one PGconn; every result is copied out and cleared before returning.
//
// Tests reach the database through DBLOG_TEST_CONNINFO. tests/run.sh always sets it (it starts a
// throwaway cluster); when it is unset, database tests skip with a message instead of failing.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dblog::test {

// A failed libpq call; what() carries the SQL and the server's message.
class PgError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using Cell = std::optional<std::string>;  // nullopt is SQL NULL
using Row = std::vector<Cell>;
using Rows = std::vector<Row>;

// DBLOG_TEST_CONNINFO, or nullopt when unset or empty.
std::optional<std::string> test_conninfo();

class PgConn {
 public:
  explicit PgConn(const std::string& conninfo);  // throws PgError

  // Runs one or more statements (simple query protocol) and returns the rows of the last one,
  // in text format.
  Rows exec(const std::string& sql);

  // Runs one statement with $1.. text parameters and returns binary-format results: a bytea
  // comes back as its raw bytes. Meant for bytea columns; other types arrive in PostgreSQL's
  // binary send format.
  Rows exec_binary(const std::string& sql, const std::vector<std::string>& params = {});

  // Convenience: the single value of a one-row, one-column text query (throws on NULL).
  std::string scalar(const std::string& sql);

  // A SQL string literal for s ('...' with quotes doubled), via PQescapeLiteral.
  std::string literal(const std::string& s);

  PGconn* raw() const { return conn_.get(); }

 private:
  struct Finish {
    void operator()(PGconn* c) const { PQfinish(c); }
  };
  std::unique_ptr<PGconn, Finish> conn_;
};

}  // namespace dblog::test
