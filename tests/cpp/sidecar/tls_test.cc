// tests/cpp/sidecar/tls_test.cc: TLS between dblogd and its consumers, with certificates made at
// test time by the `openssl` command: a TLS consumer streams and converges; a plaintext client
// is told TLS is required and others are served; a client refuses a server it does not trust;
// with --tls-client-ca a client certificate is required, from that CA, with the consumer's name
// as CN; a stalled TLS handshake is closed by the handshake deadline and counted under
// --max-pending-handshakes; `dblog tail` with --tls-ca (and without); settings dblogd refuses
// to start with.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "dblogd_fixture.h"

namespace dblog::test {
namespace {

using dblog::v1::Error;
using Clock = std::chrono::steady_clock;

int Shell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool HaveOpenssl() { return Shell("openssl version >/dev/null 2>&1") == 0; }

// A temp directory with a CA, a server certificate for 127.0.0.1 and localhost, client
// certificates (CN given) signed by the CA, and a second CA with a client certificate of its own.
class Pki {
 public:
  Pki() {
    char tmpl[] = "/tmp/dblog-tls-XXXXXX";
    dir_ = mkdtemp(tmpl);
    Run("printf '[req]\\ndistinguished_name=dn\\n[dn]\\n[ca]\\nbasicConstraints=critical,CA:TRUE\\n"
        "keyUsage=critical,keyCertSign,cRLSign\\n' > openssl.cnf");
    Ca("ca");
    Ca("other_ca");
    Leaf("ca", "server", "localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost");
  }
  ~Pki() { Shell("rm -rf '" + dir_ + "'"); }

  std::string Path(const std::string& file) const { return dir_ + "/" + file; }
  // A client certificate `name`.pem / `name`.key with this CN, signed by `ca`.
  void Client(const std::string& name, const std::string& cn, const std::string& ca = "ca") {
    Leaf(ca, name, cn, "extendedKeyUsage=clientAuth");
  }

 private:
  void Run(const std::string& command) {
    const std::string full = "cd '" + dir_ + "' && (" + command + ") >>openssl.log 2>&1";
    if (Shell(full) != 0) {
      std::ifstream in(dir_ + "/openssl.log");
      std::stringstream log;
      log << in.rdbuf();
      throw std::runtime_error("openssl failed: " + command + "\n" + log.str());
    }
  }
  void Ca(const std::string& name) {
    Run("openssl req -config openssl.cnf -extensions ca -x509 -newkey ec -pkeyopt "
        "ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=" +
        name + " -keyout " + name + ".key -out " + name + ".pem");
  }
  void Leaf(const std::string& ca, const std::string& name, const std::string& cn,
            const std::string& extension) {
    Run("printf 'basicConstraints=CA:FALSE\\n" + extension + "\\n' > " + name + ".ext");
    Run("openssl req -config openssl.cnf -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
        "-subj /CN=" +
        cn + " -keyout " + name + ".key -out " + name + ".csr");
    Run("openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
        ".key -CAcreateserial -days 2 -extfile " + name + ".ext -out " + name + ".pem");
  }
  std::string dir_;
};

// dblogd with these arguments only (plus `prefix` before it, e.g. "timeout 2"); returns its
// exit status and stderr.
std::pair<int, std::string> RunDblogd(const std::string& args, const std::string& prefix = "") {
  char tmpl[] = "/tmp/dblogd-config-XXXXXX";
  const int fd = mkstemp(tmpl);
  close(fd);
  const int status = Shell(prefix + " " + DBLOGD_PATH + " " + args + " 2>" + tmpl + " >/dev/null");
  std::ifstream in(tmpl);
  std::stringstream err;
  err << in.rdbuf();
  unlink(tmpl);
  return {status, err.str()};
}

// Whether the server closed `fd` within `timeout` (whatever it sent first is discarded).
bool ClosedWithin(int fd, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    if (recv(fd, buf, sizeof buf, 0) <= 0) return true;
  }
}

class TlsTest : public DblogdTest {
 protected:
  void SetUp() override {
    if (!HaveOpenssl()) GTEST_SKIP() << "the openssl command is not installed";
    DblogdTest::SetUp();
    if (IsSkipped()) return;
    pki_ = std::make_unique<Pki>();
  }

  std::vector<std::string> TlsFlags() const {
    return {"--tls-cert=" + pki_->Path("server.pem"), "--tls-key=" + pki_->Path("server.key")};
  }

  client::ConnectOptions Options(const std::string& name = "") const {
    client::ConnectOptions o;
    o.port = dblogd_->port();
    o.consumer = name.empty() ? consumer() : name;
    o.client_name = "tls-test";
    o.io_timeout = std::chrono::milliseconds(30000);
    o.connect_timeout = std::chrono::milliseconds(15000);
    o.tls = true;
    o.tls_ca_file = pki_->Path("ca.pem");
    return o;
  }

  double Metric(const std::string& series) const { return MetricValue(dblogd_->Metrics(), series); }
  // A failed handshake is counted on its connection's thread once the server side sees it
  // fail, which may be after the client gave up: the value once it reaches `expected`, or
  // after 10 s whatever it is then.
  double SettledMetric(const std::string& series, double expected) const {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    double v = Metric(series);
    while (v != expected && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      v = Metric(series);
    }
    return v;
  }

  // Streams this test's table to convergence over `c`.
  void StreamAndConverge(client::Client& c) {
    Replay replay;
    ReadUntil(c, replay, 0);  // the bootstrap
    db().exec("INSERT INTO " + schema() + ".t SELECT g, 'v' || g FROM generate_series(101, 200) g");
    db().exec("UPDATE " + schema() + ".t SET v = 'changed' WHERE id % 7 = 0");
    db().exec("DELETE FROM " + schema() + ".t WHERE id % 11 = 0");
    ReadUntil(c, replay, Sentinel());
    ExpectConverged(replay, {"t"});
  }

  void CreateTable() {
    db().exec("CREATE TABLE " + schema() + ".t (id int PRIMARY KEY, v text)");
    db().exec("INSERT INTO " + schema() + ".t SELECT g, 'v' || g FROM generate_series(1, 100) g");
  }

  std::unique_ptr<Pki> pki_;
};

TEST_F(TlsTest, ConsumerStreamsOverTlsAndConverges) {
  CreateTable();
  StartDblogd(TlsFlags());
  EXPECT_NE(dblogd_->log().find("tls=on"), std::string::npos) << dblogd_->log();
  client::ConnectOptions o = Options();
  o.host = "localhost";  // verified against the certificate's DNS name
  client::Client c = client::Client::Connect(o);
  StreamAndConverge(c);
  // The readiness probe (connect, close) is no TLS failure.
  EXPECT_EQ(Metric("dblog_tls_handshake_failures_total{reason=\"handshake\"}"), 0);
  EXPECT_EQ(Metric("dblog_tls_handshake_failures_total{reason=\"plaintext\"}"), 0);
}

TEST_F(TlsTest, PlaintextClientIsToldTlsIsRequiredAndOthersAreServed) {
  CreateTable();
  StartDblogd(TlsFlags());
  client::ConnectOptions plain = Options();
  plain.tls = false;
  const auto start = Clock::now();
  try {
    client::Client::Connect(plain);
    ADD_FAILURE() << "a plaintext client connected to a TLS dblogd";
  } catch (const client::ServerError& e) {
    EXPECT_EQ(e.code(), Error::PROTOCOL_VIOLATION);
    EXPECT_NE(std::string(e.what()).find("requires TLS"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));  // at once, not by a timeout
  EXPECT_EQ(SettledMetric("dblog_tls_handshake_failures_total{reason=\"plaintext\"}", 1), 1);
  EXPECT_EQ(CountLogEvents(dblogd_->log(), "consumer_tls_failed"), 1);
  client::Client c = client::Client::Connect(Options());
  StreamAndConverge(c);
}

TEST_F(TlsTest, ClientRefusesAServerItDoesNotTrust) {
  CreateTable();
  StartDblogd(TlsFlags());
  struct Case {
    std::string ca;           // "": the system's trusted CAs
    std::string server_name;  // "": the host
    std::string message;
  } cases[] = {
      {pki_->Path("other_ca.pem"), "", "certificate"},
      {"", "", "certificate"},
      {pki_->Path("ca.pem"), "db.example", "mismatch"},
  };
  for (const auto& k : cases) {
    client::ConnectOptions o = Options();
    o.tls_ca_file = k.ca;
    o.tls_server_name = k.server_name;
    try {
      client::Client::Connect(o);
      ADD_FAILURE() << "connected to a server it should not trust: " << k.ca << " "
                    << k.server_name;
    } catch (const client::TransportError& e) {
      EXPECT_NE(std::string(e.what()).find("TLS handshake"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(k.message), std::string::npos) << e.what();
    }
  }
  // dblogd saw the clients abort their handshakes, and still serves.
  EXPECT_EQ(SettledMetric("dblog_tls_handshake_failures_total{reason=\"handshake\"}", 3), 3);
  client::Client c = client::Client::Connect(Options());
  StreamAndConverge(c);
}

TEST_F(TlsTest, ClientCertificatesFromTheCaNamingTheConsumer) {
  CreateTable();
  pki_->Client("mine", consumer());
  pki_->Client("someone_else", consumer() + "_other");
  pki_->Client("foreign", consumer(), "other_ca");
  StartDblogd({"--tls-cert=" + pki_->Path("server.pem"), "--tls-key=" + pki_->Path("server.key"),
               "--tls-client-ca=" + pki_->Path("ca.pem"), "--default-scope=" + schema() + ".*"});
  EXPECT_NE(dblogd_->log().find("tls=client_certificates"), std::string::npos);

  // Without a certificate, or with one of another CA: the handshake fails (with TLS 1.3 the
  // client learns it at its first read).
  for (const std::string& cert : {std::string(), std::string("foreign")}) {
    client::ConnectOptions o = Options();
    if (!cert.empty()) {
      o.tls_cert_file = pki_->Path(cert + ".pem");
      o.tls_key_file = pki_->Path(cert + ".key");
    }
    EXPECT_THROW(client::Client::Connect(o), client::ClientError) << cert;
  }
  EXPECT_EQ(SettledMetric("dblog_tls_handshake_failures_total{reason=\"handshake\"}", 2), 2);

  // A certificate of the CA opens only the consumer its CN names (configured or not).
  client::ConnectOptions other = Options(consumer() + "_other");
  other.tls_cert_file = pki_->Path("mine.pem");
  other.tls_key_file = pki_->Path("mine.key");
  try {
    client::Client::Connect(other);
    ADD_FAILURE() << "a certificate for " << consumer() << " opened another consumer";
  } catch (const client::ServerError& e) {
    EXPECT_EQ(e.code(), Error::AUTH_FAILED);
    EXPECT_NE(std::string(e.what()).find("CN '" + consumer() + "'"), std::string::npos) << e.what();
  }
  client::ConnectOptions wrong = Options();
  wrong.tls_cert_file = pki_->Path("someone_else.pem");
  wrong.tls_key_file = pki_->Path("someone_else.key");
  try {
    client::Client::Connect(wrong);
    ADD_FAILURE() << "a certificate for another consumer opened " << consumer();
  } catch (const client::ServerError& e) {
    EXPECT_EQ(e.code(), Error::AUTH_FAILED);
  }

  client::ConnectOptions mine = Options();
  mine.tls_cert_file = pki_->Path("mine.pem");
  mine.tls_key_file = pki_->Path("mine.key");
  client::Client c = client::Client::Connect(mine);
  StreamAndConverge(c);
}

// `dblog tail` with --tls-ca (and without: told TLS is required); the flags reach the client.
TEST_F(TlsTest, DblogTailOverTls) {
  CreateTable();
  StartDblogd(TlsFlags());
  const std::string out = pki_->Path("tail.out"), err = pki_->Path("tail.err");
  const std::string tail = std::string(DBLOG_PATH) + " tail --consumer " + consumer() + " --port " +
                           std::to_string(dblogd_->port());
  // Runs until timeout interrupts it (SIGINT: a clean stop, exit 0, so timeout says 124).
  EXPECT_EQ(Shell("timeout -s INT 4 " + tail + " --tls-ca " + pki_->Path("ca.pem") + " >" + out +
                  " 2>" + err),
            124);
  std::ifstream in(out);
  std::stringstream lines;
  lines << in.rdbuf();
  EXPECT_NE(lines.str().find("\"op\":\"bootstrap_end\""), std::string::npos) << lines.str();
  EXPECT_NE(lines.str().find("\"v\":\"v100\""), std::string::npos);

  EXPECT_EQ(Shell("timeout -s INT 10 " + tail + " >" + out + " 2>" + err), 1);
  std::ifstream in_err(err);
  std::stringstream message;
  message << in_err.rdbuf();
  EXPECT_NE(message.str().find("requires TLS"), std::string::npos) << message.str();
  // An untrusted server: refused by dblog tail, exit 1.
  EXPECT_EQ(Shell("timeout -s INT 10 " + tail + " --tls-ca " + pki_->Path("other_ca.pem") + " >" +
                  out + " 2>" + err),
            1);
}

TEST_F(TlsTest, StalledHandshakesAreClosedByTheDeadlineAndCountedAsPending) {
  CreateTable();
  std::vector<std::string> flags = TlsFlags();
  flags.push_back("--max-pending-handshakes=3");
  StartDblogd(flags);
  // StartDblogd's readiness probe is a connection too: it counts against the cap until dblogd
  // has seen it close (it closes at once; no metric counts it), so let that happen first.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const int a = RawConnect(dblogd_->port());
  const int b = RawConnect(dblogd_->port());
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  // Two stalled handshakes do not keep a consumer out.
  const auto start = Clock::now();
  client::Client c = client::Client::Connect(Options());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  // A third fills the cap: the next connection is closed at once.
  const int d = RawConnect(dblogd_->port());
  ASSERT_GE(d, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // accepted in order
  const RawReply over = RawExchange(dblogd_->port(), "", std::chrono::milliseconds(3000));
  EXPECT_TRUE(over.closed);
  EXPECT_EQ(Metric("dblog_handshakes_over_limit_total"), 1);
  // The deadline (10 s) closes the stalled ones, without an Error frame (no TLS yet).
  for (const int fd : {a, b, d}) {
    EXPECT_TRUE(ClosedWithin(fd, std::chrono::seconds(15)));
    close(fd);
  }
  EXPECT_GE(Clock::now() - start, std::chrono::seconds(9));
  EXPECT_EQ(SettledMetric("dblog_tls_handshake_failures_total{reason=\"timeout\"}", 3), 3);
  StreamAndConverge(c);
  // Handshakes go on after the cap freed up: a second connection as the same consumer gets
  // through TLS and to its (refused) Hello.
  try {
    client::Client::Connect(Options());
    ADD_FAILURE() << "two live connections for one consumer";
  } catch (const client::ServerError& e) {
    EXPECT_EQ(e.code(), Error::ALREADY_CONNECTED);
  }
}

TEST(DblogdTlsConfig, RefusesTlsSettingsItCannotUse) {
  if (!HaveOpenssl()) GTEST_SKIP() << "the openssl command is not installed";
  Pki pki;
  std::ofstream(pki.Path("garbage.pem")) << "not a certificate\n";
  const std::string base = "--source=dbname=none --metrics-listen=off --consumer=a=public.* ";
  const std::string cert = " --tls-cert=" + pki.Path("server.pem");
  const std::string key = " --tls-key=" + pki.Path("server.key");
  struct Case {
    std::string args;
    std::string message;
  } cases[] = {
      {"--listen=0.0.0.0:1 --token=t", "so TLS is required"},
      {cert, "tls-key: required with --tls-cert"},
      {key, "tls-cert: required with --tls-key"},
      {" --tls-client-ca=" + pki.Path("ca.pem"), "tls-client-ca: requires --tls-cert"},
      {" --tls-cert=/nonexistent/cert.pem" + key, "tls-cert: cannot read '/nonexistent/cert.pem'"},
      {cert + " --tls-key=/nonexistent/key.pem", "tls-key: cannot read"},
      {cert + key + " --tls-client-ca=/nonexistent/ca.pem", "tls-client-ca: cannot read"},
      {" --tls-cert=" + pki.Path("garbage.pem") + key, "is not a usable PEM certificate"},
      {cert + " --tls-key=" + pki.Path("garbage.pem"), "is not a usable PEM private key"},
      {cert + " --tls-key=" + pki.Path("ca.key"), "does not match the certificate"},
      {cert + key + " --tls-client-ca=" + pki.Path("garbage.pem"),
       "is not a usable PEM CA certificate"},
      {cert + key + " --insecure-no-tls", "insecure-no-tls: contradicts --tls-cert"},
  };
  for (const auto& c : cases) {
    const auto [status, err] = RunDblogd(base + c.args);
    EXPECT_EQ(status, 2) << c.args << "\n" << err;
    EXPECT_NE(err.find(c.message), std::string::npos) << c.args << "\n" << err;
  }
  // The escape hatch starts (and says so, loudly); a token is still required.
  const std::string listen = "--listen=0.0.0.0:" + std::to_string(FreePort());
  {
    const auto [status, err] = RunDblogd(base + listen + " --insecure-no-tls", "timeout 2");
    EXPECT_EQ(status, 2) << err;
    EXPECT_NE(err.find("a token is required"), std::string::npos) << err;
  }
  const auto [status, err] = RunDblogd(base + listen + " --insecure-no-tls --token=t", "timeout 2");
  EXPECT_EQ(status, 124) << err;  // still running when timeout stopped it
  EXPECT_NE(err.find("event=tls_disabled"), std::string::npos) << err;
}

}  // namespace
}  // namespace dblog::test
