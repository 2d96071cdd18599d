// bench/fanout_receiver.cc: dblog_bench_fanout_receiver, one consumer of the fan-out section
// (bench/dblog_bench/sections/fanout.py), the "harness receiver" of an independent CDC benchmark
// (hardbyte/postgresql-job-queue-benchmarking, docs/cdc-harness-design.md) rebuilt for dblog and
// for pg_recvlogical with pgoutput, so that both arms are received, timed and logged alike.
//
// Two inputs, one output:
//   --dblog-port P --consumer NAME   dblogd's TCP stream (client/client.h), acknowledged as it is
//                                    logged; it resumes after the last transaction its log holds
//                                    (Hello.resume_after), as an applier storing its position
//                                    with its data does.
//   --pgoutput-stdin                 what `pg_recvlogical -P pgoutput -o proto_version=1 -f -`
//                                    writes: each message followed by a newline. The section
//                                    restarts pg_recvlogical with --startpos at the end LSN of
//                                    the last transaction the log holds (--print-resume).
// When a transaction's Commit arrives, each of its changes of the table --table (SCHEMA.NAME; its
// key the bigint column pk, with the bigint columns seq and emitted_us, as the benchmark's events
// table) is appended to --log FILE as a line, and then the transaction's own line:
//   <I|U|D> <pk> <seq or -> <emitted_us or -> <received, µs since the epoch>
//   C <commit LSN> <commit seq> <end LSN> <received>
// A DELETE carries only the key, so its seq and emitted_us are "-". Lines are written with
// write(2), whole transactions at a time, when the input has nothing more buffered and at least
// every 100 ms; dblogd is acknowledged only for what was written. Killed at any moment, the log
// may end in a transaction without its C line; a restart cuts that off and asks for what follows
// the last C line, and readers ignore it: nothing is lost and nothing duplicated, if the source
// keeps its promise.
//
// Not a test: it never judges a timing. It fails (exit 1) on a protocol error or a server error;
// the end of its input, even inside a message (pg_recvlogical killed), ends it with 0.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/client.h"
#include "client/position.h"

namespace {

struct Options {
  std::string log;
  std::string schema, table;
  uint16_t dblog_port = 0;
  std::string consumer;
  bool pgoutput_stdin = false;
  bool print_resume = false;  // print the log's resume point (an LSN) and exit
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "dblog_bench_fanout_receiver: %s\n"
               "usage: dblog_bench_fanout_receiver --log FILE "
               "(--table SCHEMA.NAME (--dblog-port P --consumer NAME | --pgoutput-stdin) "
               "| --print-resume)\n",
               why);
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--log") {
      o.log = value();
    } else if (a == "--table") {
      const std::string t = value();
      const auto dot = t.find('.');
      if (dot == std::string::npos) Usage("--table wants SCHEMA.NAME");
      o.schema = t.substr(0, dot);
      o.table = t.substr(dot + 1);
    } else if (a == "--dblog-port") {
      o.dblog_port = static_cast<uint16_t>(std::stoi(value()));
    } else if (a == "--consumer") {
      o.consumer = value();
    } else if (a == "--pgoutput-stdin") {
      o.pgoutput_stdin = true;
    } else if (a == "--print-resume") {
      o.print_resume = true;
    } else {
      Usage(("unknown argument " + a).c_str());
    }
  }
  if (o.log.empty()) Usage("--log is required");
  if (!o.print_resume) {
    if (o.table.empty()) Usage("--table is required");
    if (o.pgoutput_stdin == (o.dblog_port != 0)) Usage("give --dblog-port or --pgoutput-stdin");
    if (o.dblog_port != 0 && o.consumer.empty()) Usage("--consumer is required with --dblog-port");
  }
  return o;
}

std::int64_t NowMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The last logged transaction: (commit LSN, commit seq, end LSN).
struct Resume {
  std::uint64_t commit_lsn = 0, end_lsn = 0;
  std::uint32_t seq = 0;
};

// Cuts off what follows the log's last C line (a transaction a kill interrupted) and returns that
// line's transaction, if the log has one.
std::optional<Resume> LastLogged(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::optional<Resume> r;
  std::string line;
  std::uintmax_t read = 0, whole = 0;  // bytes read; up to the end of the last C line
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: torn
    read += line.size() + 1;
    unsigned long long commit = 0, end = 0;
    unsigned cseq = 0;
    if (line.size() > 2 && line[0] == 'C' &&
        std::sscanf(line.c_str() + 2, "%llu %u %llu", &commit, &cseq, &end) == 3) {
      r = Resume{commit, end, cseq};
      whole = read;
    }
  }
  in.close();
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && std::filesystem::file_size(path, ec) > whole)
    std::filesystem::resize_file(path, whole);
  return r;
}

// One change of the table, as logged.
struct Logged {
  char op;
  std::int64_t pk;
  std::optional<std::int64_t> seq, emitted_us;
};

// The log: whole transactions, appended with write(2) when flushed.
class Log {
 public:
  explicit Log(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0) throw std::runtime_error("cannot open " + path);
  }
  ~Log() { ::close(fd_); }
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  void Transaction(const std::vector<Logged>& changes, std::int64_t received,
                   std::uint64_t commit_lsn, std::uint32_t seq, std::uint64_t end_lsn) {
    char line[160];
    for (const Logged& c : changes) {
      char s[24] = "-", e[24] = "-";
      if (c.seq) std::snprintf(s, sizeof s, "%" PRId64, *c.seq);
      if (c.emitted_us) std::snprintf(e, sizeof e, "%" PRId64, *c.emitted_us);
      pending_.append(line, static_cast<std::size_t>(std::snprintf(
                                line, sizeof line, "%c %" PRId64 " %s %s %" PRId64 "\n", c.op,
                                c.pk, s, e, received)));
    }
    pending_.append(line, static_cast<std::size_t>(std::snprintf(
                              line, sizeof line, "C %" PRIu64 " %" PRIu32 " %" PRIu64 " %" PRId64
                              "\n", commit_lsn, seq, end_lsn, received)));
  }
  // Writes what is pending when asked to, or when the last write is 100 ms old.
  void Flush(bool now) {
    const auto t = std::chrono::steady_clock::now();
    if (pending_.empty() || (!now && t - last_ < std::chrono::milliseconds(100))) return;
    for (std::size_t off = 0; off < pending_.size();) {
      const ssize_t n = ::write(fd_, pending_.data() + off, pending_.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error("cannot write the log: " + std::string(std::strerror(errno)));
      off += static_cast<std::size_t>(n);
    }
    pending_.clear();
    last_ = t;
  }
  bool Pending() const { return !pending_.empty(); }

 private:
  int fd_;
  std::string pending_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// Where the table's columns are, per relation oid; absent: another table.
struct Columns {
  int pk = -1, seq = -1, emitted_us = -1;
};

// ---- dblogd -----------------------------------------------------------------------------

std::optional<std::int64_t> IntOf(const dblog::v1::Row& row, int i) {
  if (i < 0 || i >= row.values_size()) return std::nullopt;
  const auto& v = row.values(i);
  if (v.kind_case() != dblog::v1::Value::kIntValue) return std::nullopt;
  return v.int_value();
}

int RunDblog(const Options& opt) {
  dblog::client::ConnectOptions co;
  co.port = opt.dblog_port;
  co.consumer = opt.consumer;
  co.client_name = "dblog-bench-fanout-receiver";
  co.connect_timeout = std::chrono::milliseconds(60000);
  if (auto r = LastLogged(opt.log))
    co.resume_after = dblog::client::MakePosition(r->commit_lsn, r->seq);
  Log log(opt.log);
  dblog::client::Client client = dblog::client::Client::Connect(co);
  std::cerr << "ready" << std::endl;
  std::unordered_map<std::uint32_t, Columns> tables;
  std::vector<Logged> txn;
  std::optional<dblog::v1::Position> unacked;
  dblog::client::ItemRef item;
  for (;;) {
    if (!client.HasBufferedItems()) log.Flush(true);
    if (unacked && !log.Pending()) {  // everything up to it is written
      client.Ack(*unacked);
      unacked.reset();
    }
    if (!client.NextRef(item)) return 0;
    const auto* const* evp = std::get_if<const dblog::v1::StreamEvent*>(&item);
    if (evp == nullptr) continue;
    const dblog::v1::StreamEvent& ev = **evp;
    switch (ev.event_case()) {
      case dblog::v1::StreamEvent::kRelation: {
        const auto& rel = ev.relation();
        tables.erase(rel.oid());
        if (rel.schema() != opt.schema || rel.name() != opt.table) break;
        Columns c;
        for (int i = 0; i < rel.columns_size(); ++i) {
          const std::string& n = rel.columns(i).name();
          if (n == "pk") c.pk = i;
          if (n == "seq") c.seq = i;
          if (n == "emitted_us") c.emitted_us = i;
        }
        tables[rel.oid()] = c;
        break;
      }
      case dblog::v1::StreamEvent::kBegin:
        txn.clear();
        break;
      case dblog::v1::StreamEvent::kChange: {
        const auto& c = ev.change();
        const auto it = tables.find(c.relation_oid());
        if (it == tables.end()) break;
        const Columns& cols = it->second;
        Logged l{'?', -1, std::nullopt, std::nullopt};
        if (c.kind() == dblog::v1::Change::DELETE) {
          l.op = 'D';
          l.pk = IntOf(c.old_key(), 0).value_or(-1);  // the key is pk alone
        } else {
          l.op = c.kind() == dblog::v1::Change::INSERT ? 'I'
                 : c.kind() == dblog::v1::Change::UPDATE ? 'U'
                                                          : 'R';
          l.pk = IntOf(c.new_row(), cols.pk).value_or(-1);
          l.seq = IntOf(c.new_row(), cols.seq);
          l.emitted_us = IntOf(c.new_row(), cols.emitted_us);
        }
        txn.push_back(l);
        break;
      }
      case dblog::v1::StreamEvent::kCommit: {
        const auto& c = ev.commit();
        const std::int64_t now = NowMicros();
        log.Transaction(txn, now, c.commit_lsn(), c.seq(), c.end_lsn());
        txn.clear();
        unacked = dblog::client::Client::PositionOf(ev);
        log.Flush(false);
        break;
      }
      default:
        break;
    }
  }
}

// ---- pg_recvlogical with pgoutput (protocol version 1, text values) -----------------------

// The input ended inside a message: pg_recvlogical was killed in the middle of a write.
struct EndOfInput {};

// Reads stdin in large blocks; says whether more bytes are already waiting.
class Input {
 public:
  bool Byte(std::uint8_t& b) {
    if (pos_ == len_ && !Fill()) return false;
    b = buf_[pos_++];
    return true;
  }
  void Bytes(void* out, std::size_t n) {
    auto* o = static_cast<std::uint8_t*>(out);
    for (std::size_t i = 0; i < n; ++i)
      if (!Byte(o[i])) throw EndOfInput{};
  }
  std::uint64_t U(int n) {
    std::uint8_t b[8];
    Bytes(b, static_cast<std::size_t>(n));
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | b[i];
    return v;
  }
  std::string CString() {
    std::string s;
    std::uint8_t b;
    for (;;) {
      if (!Byte(b)) throw EndOfInput{};
      if (b == 0) return s;
      s.push_back(static_cast<char>(b));
    }
  }
  bool Buffered() const { return pos_ < len_; }

 private:
  bool Fill() {
    for (;;) {
      const ssize_t n = ::read(0, buf_, sizeof buf_);
      if (n > 0) {
        pos_ = 0;
        len_ = static_cast<std::size_t>(n);
        return true;
      }
      if (n == 0) return false;
      if (errno != EINTR) throw std::runtime_error("read: " + std::string(std::strerror(errno)));
    }
  }
  std::uint8_t buf_[1 << 16];
  std::size_t pos_ = 0, len_ = 0;
};

std::optional<std::int64_t> IntOf(const std::optional<std::string>& text) {
  if (!text || text->empty()) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(text->c_str(), &end, 10);
  if (*end != '\0') return std::nullopt;
  return v;
}

int RunPgoutput(const Options& opt) {
  Input in;
  Log log(opt.log);
  std::unordered_map<std::uint32_t, Columns> tables;
  std::vector<Logged> txn;
  // Reads a TupleData; the texts of its columns (absent: null, unchanged TOAST).
  std::vector<std::optional<std::string>> values;
  auto tuple = [&] {
    values.clear();
    const int n = static_cast<int>(in.U(2));
    for (int i = 0; i < n; ++i) {
      std::uint8_t kind;
      in.Bytes(&kind, 1);
      if (kind == 't' || kind == 'b') {
        std::string v(in.U(4), '\0');
        in.Bytes(v.data(), v.size());
        values.emplace_back(std::move(v));
      } else if (kind == 'n' || kind == 'u') {
        values.emplace_back();
      } else {
        throw std::runtime_error("pgoutput: unknown tuple column kind");
      }
    }
  };
  auto at = [&](int i) {
    return i >= 0 && i < static_cast<int>(values.size()) ? IntOf(values[i]) : std::nullopt;
  };
  std::uint8_t type;
  auto next = [&] {  // reads and logs one message; false at the end of the input
    if (!in.Byte(type)) return false;
    switch (type) {
      case 'B':  // final LSN, commit time, xid
        in.U(8);
        in.U(8);
        in.U(4);
        txn.clear();
        break;
      case 'C': {  // flags, commit LSN, end LSN, commit time
        in.U(1);
        const std::uint64_t commit_lsn = in.U(8), end_lsn = in.U(8);
        in.U(8);
        const std::int64_t now = NowMicros();
        log.Transaction(txn, now, commit_lsn, 0, end_lsn);
        txn.clear();
        break;
      }
      case 'O':  // origin: LSN, name
        in.U(8);
        in.CString();
        break;
      case 'Y':  // type: oid, namespace, name
        in.U(4);
        in.CString();
        in.CString();
        break;
      case 'R': {  // relation: oid, namespace, name, replica identity, columns
        const auto oid = static_cast<std::uint32_t>(in.U(4));
        const std::string ns = in.CString(), name = in.CString();
        in.U(1);
        const int n = static_cast<int>(in.U(2));
        Columns c;
        for (int i = 0; i < n; ++i) {
          in.U(1);
          const std::string att = in.CString();
          in.U(4);
          in.U(4);
          if (att == "pk") c.pk = i;
          if (att == "seq") c.seq = i;
          if (att == "emitted_us") c.emitted_us = i;
        }
        tables.erase(oid);
        if (ns == opt.schema && name == opt.table) tables[oid] = c;
        break;
      }
      case 'I':
      case 'U':
      case 'D': {
        const auto oid = static_cast<std::uint32_t>(in.U(4));
        std::uint8_t part;
        in.Bytes(&part, 1);
        if (type == 'U' && (part == 'K' || part == 'O')) {  // the old key or row, then 'N'
          tuple();
          in.Bytes(&part, 1);
        }
        tuple();  // 'N' for INSERT and UPDATE; 'K' or 'O' for DELETE (pk at its place)
        const auto it = tables.find(oid);
        if (it == tables.end()) break;
        Logged l{static_cast<char>(type), at(it->second.pk).value_or(-1), std::nullopt,
                 std::nullopt};
        if (type != 'D') {
          l.seq = at(it->second.seq);
          l.emitted_us = at(it->second.emitted_us);
        }
        txn.push_back(l);
        break;
      }
      case 'T': {  // truncate: relations, options, oids
        const int n = static_cast<int>(in.U(4));
        in.U(1);
        for (int i = 0; i < n; ++i) in.U(4);
        break;
      }
      default:
        throw std::runtime_error("pgoutput: unknown message type " + std::to_string(type));
    }
    std::uint8_t nl;
    if (!in.Byte(nl)) return false;
    if (nl != '\n') throw std::runtime_error("pgoutput: a message not followed by a newline");
    log.Flush(!in.Buffered());
    return true;
  };
  try {
    while (next()) {
    }
  } catch (const EndOfInput&) {
    // pg_recvlogical killed in the middle of a write: the unfinished transaction is not logged
  }
  log.Flush(true);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = Parse(argc, argv);
  try {
    if (opt.print_resume) {
      if (auto r = LastLogged(opt.log))
        std::printf("%X/%X\n", static_cast<unsigned>(r->end_lsn >> 32),
                    static_cast<unsigned>(r->end_lsn));
      return 0;
    }
    if (opt.pgoutput_stdin) {
      LastLogged(opt.log);  // cuts off an unfinished transaction
      return RunPgoutput(opt);
    }
    return RunDblog(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dblog_bench_fanout_receiver: %s\n", e.what());
    return 1;
  }
}
