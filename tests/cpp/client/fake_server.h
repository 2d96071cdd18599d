// tests/cpp/client/fake_server.h: a scripted stand-in for dblogd in the client's tests. It
// listens on 127.0.0.1 (ephemeral port), accepts one connection (or a given number, one after
// the other) on its own thread and runs a test-supplied script that reads ClientMessages and writes
// ServerMessages with wire/frame. Every wait is bounded (poll with a timeout), so a misbehaving
// client fails a test, never hangs it. Owns: the listening socket, the accepted connection, the
// script's thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "dblog/v1/consumer.pb.h"
#include "wire/frame.h"

namespace dblog::client::testing {

using namespace std::chrono_literals;

class FakeConnection {
 public:
  explicit FakeConnection(int fd) : fd_(fd) {}
  ~FakeConnection();
  FakeConnection(const FakeConnection&) = delete;
  FakeConnection& operator=(const FakeConnection&) = delete;

  // The next ClientMessage. False (with a gtest failure unless `expect_eof`) on EOF, timeout
  // or a bad frame.
  bool Read(dblog::v1::ClientMessage* message, std::chrono::milliseconds timeout = 5s);
  // True when the client closed the connection within `timeout`, without sending anything.
  bool WaitForEof(std::chrono::milliseconds timeout = 5s);

  void Send(const dblog::v1::ServerMessage& message);
  void SendRaw(std::string_view bytes);
  // Closes the connection (the client sees EOF).
  void Close();

 private:
  // Reads more bytes into the decoder; 0 on EOF, -1 on timeout or error.
  long Fill(std::chrono::steady_clock::time_point deadline);

  int fd_;
  wire::FrameDecoder decoder_{wire::kMaxClientFrame};
};

class FakeServer {
 public:
  using Script = std::function<void(FakeConnection&)>;

  // Accepts `connections` connections one after the other (each within 10 s of the previous
  // one's end) and runs `script` on each: a client that reconnects meets the same script
  // again (it can count its calls).
  explicit FakeServer(Script script, int connections = 1);
  ~FakeServer();  // joins the script's thread
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  std::uint16_t port() const { return port_; }
  // Waits for the script to finish (also done by the destructor).
  void Join();

 private:
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

// A port on 127.0.0.1 that refuses connections: bound but not listening, and kept bound for
// the object's lifetime so no concurrently running test can be handed the same port.
class RefusingPort {
 public:
  RefusingPort();
  ~RefusingPort();
  RefusingPort(const RefusingPort&) = delete;
  RefusingPort& operator=(const RefusingPort&) = delete;
  std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace dblog::client::testing
