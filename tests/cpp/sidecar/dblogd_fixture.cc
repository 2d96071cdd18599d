// tests/cpp/sidecar/dblogd_fixture.cc: dblogd process control, replay oracle (see the header).
#include "dblogd_fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace dblog::test {
namespace {

std::string Unhex(const std::string& text) {
  if (text.rfind("\\x", 0) != 0) throw std::runtime_error("expected hex bytea: " + text);
  std::string out;
  for (std::size_t i = 2; i + 1 < text.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16)));
  return out;
}

bool Before(const dblog::v1::Position& a, const dblog::v1::Position& b) {
  return a.commit_lsn() != b.commit_lsn() ? a.commit_lsn() < b.commit_lsn() : a.seq() < b.seq();
}

std::string KeyOf(const dblog::v1::Relation& rel, const dblog::v1::Row& row) {
  dblog::v1::Row key;
  for (std::uint32_t k : rel.key_columns()) {
    if (static_cast<int>(k) >= row.values_size()) throw std::runtime_error("key column missing");
    *key.add_values() = row.values(static_cast<int>(k));
  }
  return key.SerializeAsString();
}

// Orders keys of int and text values the way PostgreSQL orders them in this test's tables.
int CompareKeys(const dblog::v1::Row& a, const dblog::v1::Row& b) {
  for (int i = 0; i < a.values_size() && i < b.values_size(); ++i) {
    const auto& x = a.values(i);
    const auto& y = b.values(i);
    if (x.kind_case() == dblog::v1::Value::kIntValue) {
      if (x.int_value() != y.int_value()) return x.int_value() < y.int_value() ? -1 : 1;
    } else if (x.text_value() != y.text_value()) {
      return x.text_value() < y.text_value() ? -1 : 1;
    }
  }
  return 0;
}

bool InRange(const dblog::v1::Row& key, const dblog::v1::ChunkBegin& c) {
  if (c.has_from_key()) {
    const int cmp = CompareKeys(key, c.from_key());
    if (cmp < 0 || (cmp == 0 && !c.from_inclusive())) return false;
  }
  if (c.has_to_key()) {
    const int cmp = CompareKeys(key, c.to_key());
    if (cmp > 0 || (cmp == 0 && !c.to_inclusive())) return false;
  }
  return true;
}

}  // namespace

void Replay::Erase(std::uint32_t oid, const std::string& key) { tables_[oid].erase(key); }

void Replay::Corrupt(std::uint32_t oid, const std::string& key) {
  auto it = tables_[oid].find(key);
  if (it == tables_[oid].end()) return;
  auto* v = it->second.mutable_values(it->second.values_size() - 1);
  v->set_text_value("corrupted");
}

void Replay::Copy(std::uint32_t oid, const std::string& from_key, std::int64_t new_id) {
  auto it = tables_[oid].find(from_key);
  if (it == tables_[oid].end()) return;
  dblog::v1::Row row = it->second;
  row.mutable_values(0)->set_int_value(new_id);
  dblog::v1::Row key;
  *key.add_values() = row.values(0);
  tables_[oid][key.SerializeAsString()] = row;
}

void Replay::Put(std::uint32_t oid, const dblog::v1::Row& key, const dblog::v1::Row& row) {
  tables_[oid][key.SerializeAsString()] = row;
}

// A port nothing listens on, below the kernel's ephemeral range (32768-60999 here): a port
// bind(0) hands out is one the kernel also hands to the next outgoing connection (libpq's, a
// NATS client's), which can take it between this check and the child's bind. Here only
// another FreePort() of a parallel test can, with a chance of one in 12,000, and
// DblogdProcess::Start() retries that.
std::uint16_t FreePort() {
  static std::mt19937 random(std::random_device{}() ^ static_cast<unsigned>(getpid()));
  std::uniform_int_distribution<int> pick(20000, 31999);
  for (int attempt = 0;; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);  // free on every address (tls_test listens on all)
    addr.sin_port = htons(static_cast<std::uint16_t>(pick(random)));
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (free) return ntohs(addr.sin_port);
    if (attempt == 1000) throw std::runtime_error("FreePort: no free port in 20000-31999");
  }
}

DblogdProcess::DblogdProcess(std::vector<std::string> args)
    : args_(std::move(args)), port_(FreePort()), metrics_port_(FreePort()) {
  char tmpl[] = "/tmp/dblogd-test-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  log_path_ = tmpl;
}

DblogdProcess::~DblogdProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (!::testing::Test::HasFailure()) unlink(log_path_.c_str());
}

void DblogdProcess::Start() {
  std::vector<std::string> argv = {DBLOGD_PATH,
                                   "--listen=127.0.0.1:" + std::to_string(port_),
                                   "--metrics-listen=127.0.0.1:" + std::to_string(metrics_port_)};
  argv.insert(argv.end(), args_.begin(), args_.end());
  // DBLOG_TEST_DBLOGD_LOG_LEVEL=debug: every dblogd a test starts logs at that level (for a
  // failure that only reproduces now and then).
  if (const char* level = std::getenv("DBLOG_TEST_DBLOGD_LOG_LEVEL"))
    argv.push_back(std::string("--log-level=") + level);
  const std::size_t log_before = log().size();  // the log is appended to across restarts
  pid_ = fork();
  if (pid_ == 0) {
    const int fd = open(log_path_.c_str(), O_WRONLY | O_APPEND);
    dup2(fd, 2);
    dup2(fd, 1);
    close(fd);
    if (fd_limit_ > 0) {
      const rlimit limit{static_cast<rlim_t>(fd_limit_), static_cast<rlim_t>(fd_limit_)};
      if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
    }
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  // Ready when it has said so and accepts connections. The kernel accepts as soon as the
  // acceptor listens, a moment before dblogd logs `listening`: a test that reads that line
  // (tls=..., token_required=...) must not race it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    if (log().find("event=listening ") != std::string::npos) {
      boost::asio::io_context io;
      boost::asio::ip::tcp::socket s(io);
      boost::system::error_code ec;
      s.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
      if (!ec) return;
    }
    int status;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      // Another process took the port between FreePort() and dblogd's bind: try again, on new
      // ports if no test has read them yet, else on the same ones once the taker let go.
      const std::string text = log();
      if (text.find("Address already in use", log_before) != std::string::npos &&
          bind_retries_ < 20) {
        ++bind_retries_;
        if (!ports_read_) {
          port_ = FreePort();
          metrics_port_ = FreePort();
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
        std::ofstream(log_path_, std::ios::app) << "[test fixture] dblogd lost a port to another "
                                                   "process; starting it again\n";
        Start();
        return;
      }
      throw std::runtime_error("dblogd exited at start:\n" + text);
    }
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("dblogd did not start listening:\n" + log());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void DblogdProcess::Signal(int signo) {
  if (pid_ > 0) kill(pid_, signo);
}

int DblogdProcess::Wait() {
  int status = 0;
  if (pid_ > 0) waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

void DblogdProcess::Stop() {
  Signal(SIGTERM);
  Wait();
}

std::string DblogdProcess::log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string DblogdProcess::Metrics() const {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket s(io);
  s.connect({boost::asio::ip::make_address("127.0.0.1"), metrics_port_});
  const std::string req = "GET /metrics HTTP/1.0\r\n\r\n";
  boost::asio::write(s, boost::asio::buffer(req));
  std::string body;
  boost::system::error_code ec;
  boost::asio::read(s, boost::asio::dynamic_buffer(body), ec);
  return body;
}

double MetricValue(const std::string& metrics, const std::string& series) {
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return -1;
}

ScopedRole::ScopedRole(PgConn& db, std::string name, const std::string& attributes)
    : db_(db), name_(std::move(name)) {
  db_.exec("DROP ROLE IF EXISTS " + name_);
  db_.exec("CREATE ROLE " + name_ + " " + attributes);
}

ScopedRole::~ScopedRole() {
  try {
    db_.exec("DROP OWNED BY " + name_);
    db_.exec("DROP ROLE " + name_);
  } catch (...) {
  }
}

int CountLogEvents(const std::string& log, const std::string& event) {
  std::istringstream in(log);
  std::string line;
  int n = 0;
  while (std::getline(in, line))
    if ((line + " ").find(" event=" + event + " ") != std::string::npos) ++n;
  return n;
}

int RawConnect(std::uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

RawReply RawExchange(std::uint16_t port, const std::string& request,
                     std::chrono::milliseconds timeout) {
  RawReply reply;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const int fd = RawConnect(port);
  if (fd < 0) {
    reply.closed = true;
    return reply;
  }
  if (!request.empty() && send(fd, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
    close(fd);
    reply.closed = true;
    return reply;
  }
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[16384];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      reply.closed = true;
      break;
    }
    reply.bytes.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return reply;
}

long DblogdProcess::PeakRssKb() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

void Replay::Apply(const dblog::v1::StreamEvent& ev) {
  ++events_;
  if (auto pos = client::Client::PositionOf(ev)) {
    if (last_ && !Before(*last_, *pos))
      throw std::runtime_error("positions must strictly increase");
    last_ = *pos;
  }
  switch (ev.event_case()) {
    case dblog::v1::StreamEvent::kRelation:
      relations_[ev.relation().oid()] = ev.relation();
      return;
    case dblog::v1::StreamEvent::kBootstrapBegin:
      if (ev.bootstrap_begin().restarted()) {
        restarted_ = true;
        tables_.clear();
      }
      return;
    case dblog::v1::StreamEvent::kChunkBegin:
      chunk_ = ev.chunk_begin();
      chunk_keys_.clear();
      return;
    case dblog::v1::StreamEvent::kChunkEnd: {
      if (!chunk_) throw std::runtime_error("ChunkEnd without ChunkBegin");
      ++chunks_;
      if (chunk_->is_range()) {
        // rows of the range that are neither chunk rows nor kept are gone at the source
        for (const auto& k : ev.chunk_end().kept_keys()) chunk_keys_.insert(k.SerializeAsString());
        auto& table = tables_[chunk_->relation_oid()];
        for (auto it = table.begin(); it != table.end();) {
          dblog::v1::Row key;
          key.ParseFromString(it->first);
          if (InRange(key, *chunk_) && !chunk_keys_.count(it->first))
            it = table.erase(it);
          else
            ++it;
        }
      }
      chunk_.reset();
      return;
    }
    case dblog::v1::StreamEvent::kTruncate:
      for (std::uint32_t oid : ev.truncate().relation_oids()) tables_[oid].clear();
      return;
    case dblog::v1::StreamEvent::kChange: {
      const auto& c = ev.change();
      auto rel = relations_.find(c.relation_oid());
      if (rel == relations_.end()) throw std::runtime_error("Change before its Relation");
      auto& table = tables_[c.relation_oid()];
      if (c.kind() == dblog::v1::Change::DELETE) {
        table.erase(c.old_key().SerializeAsString());
        return;
      }
      dblog::v1::Row row = c.new_row();
      // one value per column of the table's latest Relation, in its order: a row encoded for
      // another definition of the table would be read with the wrong columns
      if (row.values_size() != rel->second.columns_size())
        throw std::runtime_error("a row of " + std::to_string(row.values_size()) +
                                 " values after a Relation of " +
                                 std::to_string(rel->second.columns_size()) + " columns");
      std::string old_key =
          c.has_old_key() ? c.old_key().SerializeAsString() : KeyOf(rel->second, row);
      // Unchanged TOAST: keep the value the consumer already has.
      auto prev = table.find(old_key);
      for (int i = 0; i < row.values_size(); ++i) {
        if (!row.values(i).unchanged()) continue;
        if (prev == table.end()) {
          // After a Reconcile the changes between two positions were not sent: the row may have
          // been inserted among them. Its repair brings it; until then it stays absent.
          if (reconciled_) return;
          throw std::runtime_error("unchanged value for an unknown row");
        }
        *row.mutable_values(i) = prev->second.values(i);
      }
      if (c.has_old_key()) table.erase(old_key);
      const std::string key = KeyOf(rel->second, row);
      table[key] = row;
      if (chunk_ && c.kind() == dblog::v1::Change::READ) chunk_keys_.insert(key);
      return;
    }
    default:
      return;
  }
}

std::map<std::string, std::string> Replay::Table(std::uint32_t oid) const {
  std::map<std::string, std::string> out;
  auto it = tables_.find(oid);
  if (it == tables_.end()) return out;
  for (const auto& [key, row] : it->second) out[key] = row.SerializeAsString();
  return out;
}

std::uint32_t TableOid(PgConn& db, const std::string& table) {
  return static_cast<std::uint32_t>(std::stoul(db.scalar("SELECT '" + table + "'::regclass::oid")));
}

std::map<std::string, std::string> SourceTable(PgConn& db, const std::string& table) {
  dblog::v1::Relation rel;
  rel.ParseFromString(Unhex(db.scalar("SELECT dblog.relation_info('" + table + "')")));
  std::map<std::string, std::string> out;
  for (const auto& r : db.exec("SELECT dblog.encode_row(t.*) FROM " + table + " t")) {
    dblog::v1::Row row;
    row.ParseFromString(Unhex(*r[0]));
    out[KeyOf(rel, row)] = row.SerializeAsString();
  }
  return out;
}

void DblogdTest::SetUp() {
  auto ci = test_conninfo();
  if (!ci) GTEST_SKIP() << "DBLOG_TEST_CONNINFO is not set (tests/run.sh sets it)";
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string("e2e_") + info->name();
  for (auto& ch : name)  // a parameterized test's name has a '/'
    ch = std::isalnum(static_cast<unsigned char>(ch))
             ? static_cast<char>(std::tolower(static_cast<unsigned char>(ch)))
             : '_';
  // at most 40 bytes, the end kept (a parameterized test's suffix tells its instances apart)
  if (name.size() > 40) name = name.substr(0, 28) + name.substr(name.size() - 12);
  schema_ = name;
  consumer_ = name;
  PrepareSource(*ci, SourceMode::kExtension);
}

void DblogdTest::BootstrapThenLoseTheSlot(Replay& replay) {
  {
    client::Client c = Connect();
    ReadUntil(c, replay, 0);
    ReadUntil(c, replay, Sentinel());
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (db().scalar("SELECT bootstrap_state FROM dblog.consumers WHERE name = '" + consumer() +
                       "'") != "done") {
      ASSERT_LT(std::chrono::steady_clock::now(), until);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // the consumer is away; its slot goes (inactive once dblogd noticed the disconnect)
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);;) {
    try {
      db().exec("SELECT pg_drop_replication_slot('" + Slot() + "')");
      return;
    } catch (const PgError&) {
      ASSERT_LT(std::chrono::steady_clock::now(), until) << "the slot stayed active";
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

void DblogdTest::UseSource(const std::string& conninfo, SourceMode mode) {
  db_->exec("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE");
  PrepareSource(conninfo, mode);
}

bool DblogdTest::HasBookkeeping() {
  return db_->scalar("SELECT to_regclass('dblog.request_queue') IS NOT NULL AND "
                     "to_regclass('dblog.consumers') IS NOT NULL") == "t";
}

void DblogdTest::PrepareSource(const std::string& conninfo, SourceMode mode) {
  conninfo_ = conninfo;
  db_.emplace(conninfo_);
  if (mode == SourceMode::kExtension) db_->exec("CREATE EXTENSION IF NOT EXISTS dblog");
  db_->exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE slot_name = '" + Slot() + "'");
  if (HasBookkeeping()) {
    db_->exec("DELETE FROM dblog.consumers WHERE name = '" + consumer_ + "'");
    db_->exec("DELETE FROM dblog.request_progress WHERE consumer = '" + consumer_ + "'");
    db_->exec("DELETE FROM dblog.request_queue WHERE consumer = '" + consumer_ +
              "' OR table_name LIKE '" + schema_ + ".%'");
  }
  db_->exec("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE");
  db_->exec("CREATE SCHEMA " + schema_);
  db_->exec("CREATE TABLE " + schema_ + ".sentinel (id int PRIMARY KEY)");
}

void DblogdTest::TearDown() {
  if (HasFailure() && dblogd_) std::cerr << "---- dblogd log ----\n" << dblogd_->log();
  dblogd_.reset();
  if (!db_) return;
  // the slot may still be held for a moment by a walsender that is shutting down
  for (int i = 0; i < 100; ++i) {
    try {
      db_->exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                " WHERE slot_name = '" + Slot() + "'");
      break;
    } catch (const PgError&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  if (HasBookkeeping()) db_->exec("DELETE FROM dblog.consumers WHERE name = '" + consumer_ + "'");
  db_->exec("DROP SCHEMA IF EXISTS " + schema_ + " CASCADE");
}

DblogdProcess& DblogdTest::StartDblogd(std::vector<std::string> extra) {
  CreateDblogd(std::move(extra)).Start();
  return *dblogd_;
}

DblogdProcess& DblogdTest::CreateDblogd(std::vector<std::string> extra) {
  const std::vector<std::string> defaults = {"--source=" + conninfo_,
                                             "--consumer=" + consumer_ + "=" + schema_ + ".*",
                                             "--status-interval=0.5", "--heartbeat-interval=0.5",
                                             "--reconnect-min=0.2", "--reconnect-max=1"};
  std::vector<std::string> args;
  for (const auto& d : defaults) {  // a test's own setting replaces the default
    const std::string name = d.substr(0, d.find('=') + 1);
    bool overridden = false;
    for (const auto& e : extra) overridden |= e.rfind(name, 0) == 0;
    if (!overridden) args.push_back(d);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  dblogd_ = std::make_unique<DblogdProcess>(args);
  dblogd_->set_fd_limit(dblogd_fd_limit_);
  return *dblogd_;
}

client::Client DblogdTest::Connect(std::optional<dblog::v1::Position> resume_after,
                                   const std::string& name) {
  client::ConnectOptions o;
  o.port = dblogd_->port();
  o.consumer = name.empty() ? consumer_ : name;
  o.resume_after = resume_after;
  o.client_name = "dblogd-test";
  o.io_timeout = std::chrono::milliseconds(30000);
  return client::Client::Connect(o);
}

std::uint64_t DblogdTest::Sentinel() {
  db_->exec("BEGIN");
  db_->exec("INSERT INTO " + schema_ + ".sentinel VALUES (" + std::to_string(++sentinel_) + ")");
  const std::uint64_t lsn = common::ParseLsn(db_->scalar("SELECT pg_current_wal_insert_lsn()"));
  db_->exec("COMMIT");
  return lsn;
}

void DblogdTest::ReadUntil(client::Client& c, Replay& replay, std::uint64_t lsn,
                           std::chrono::seconds timeout, bool ack) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  client::Item item;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!c.Next(item)) throw std::runtime_error("server closed the stream");
    if (auto* ev = std::get_if<dblog::v1::StreamEvent>(&item)) {
      replay.Apply(*ev);
      if (ev->has_commit() || ev->has_bootstrap_end()) {
        if (ack) c.Ack(*client::Client::PositionOf(*ev));
        if (ev->has_commit() && ev->commit().commit_lsn() >= lsn) return;
        if (ev->has_bootstrap_end() && lsn == 0) return;
      }
    } else if (auto* hb = std::get_if<dblog::v1::Heartbeat>(&item)) {
      if (ack && (hb->position().commit_lsn() || hb->position().seq())) c.Ack(hb->position());
    }
  }
  FAIL() << "stream did not reach " << lsn << " in time";
}

void DblogdTest::ExpectConverged(const Replay& replay, const std::vector<std::string>& tables) {
  for (const auto& t : tables) {
    const std::string q = schema_ + "." + t;
    const auto source = SourceTable(*db_, q);
    const auto replayed = replay.Table(TableOid(*db_, q));
    EXPECT_EQ(source.size(), replayed.size()) << q;
    for (const auto& [key, row] : source) {
      auto it = replayed.find(key);
      if (it == replayed.end()) {
        ADD_FAILURE() << q << ": a source row is missing from the replay";
        return;
      }
      if (it->second != row) {
        ADD_FAILURE() << q << ": a row differs between source and replay";
        return;
      }
    }
  }
}

std::string DblogdTest::DdlDuringTheBootstrap(const std::string& ddl) {
  db_->exec("CREATE TABLE " + schema_ + ".a_big (id int PRIMARY KEY, v text)");
  db_->exec("INSERT INTO " + schema_ + ".a_big SELECT g, repeat('v', 50) FROM "
            "generate_series(1, 300000) g");
  db_->exec("CREATE TABLE " + schema_ + ".b (id int PRIMARY KEY, v text)");
  db_->exec("INSERT INTO " + schema_ + ".b SELECT g, 'b' || g FROM generate_series(1, 10) g");
  StartDblogd({"--max-buffer-mb=1", "--copy-workers=1"});
  client::Client c = Connect();
  Replay replay;
  client::Item item;
  int reads = 0;
  // the one worker is inside a_big, held back by this consumer, which reads no further
  while (reads < 1000 && c.Next(item))
    if (auto* ev = std::get_if<dblog::v1::StreamEvent>(&item)) {
      replay.Apply(*ev);
      if (ev->has_change()) ++reads;
    }
  db_->exec(ddl);
  try {
    ReadUntil(c, replay, 0, std::chrono::seconds(300));
  } catch (const client::ServerError& e) {
    EXPECT_EQ(e.code(), dblog::v1::Error::SOURCE_ERROR);
    return e.what();
  }
  return "";
}

void DblogdTest::ExpectBootstrapRedone(const std::vector<std::string>& tables) {
  client::Client c = Connect();
  Replay again;
  ReadUntil(c, again, 0, std::chrono::seconds(300));
  EXPECT_TRUE(again.restarted_seen());
  ReadUntil(c, again, Sentinel());
  ExpectConverged(again, tables);
}

std::uint64_t DblogdTest::ConfirmedFlush() {
  const std::string v = db_->scalar("SELECT coalesce(confirmed_flush_lsn, '0/0') FROM "
                                    "pg_replication_slots WHERE slot_name = '" + Slot() + "'");
  return common::ParseLsn(v);
}

std::string IntKey(std::int64_t id) {
  dblog::v1::Row key;
  key.add_values()->set_int_value(id);
  return key.SerializeAsString();
}

dblog::v1::Error::Code ExpectRefused(const std::function<client::Client()>& connect) {
  try {
    client::Client c = connect();
    client::Item item;
    while (c.Next(item)) {
    }
  } catch (const client::ServerError& e) {
    return e.code();
  }
  ADD_FAILURE() << "the server did not refuse";
  return dblog::v1::Error::CODE_UNSPECIFIED;
}

}  // namespace dblog::test
