// tests/cpp/client/fake_server.cc: the scripted fake dblogd (see fake_server.h).
#include "fake_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace dblog::client::testing {
namespace {

int PollFor(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return 0;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    return n;
  }
}

int ListenOnLoopback(std::uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, 4) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(address.sin_port);
  return fd;
}

}  // namespace

FakeConnection::~FakeConnection() { Close(); }

void FakeConnection::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

long FakeConnection::Fill(std::chrono::steady_clock::time_point deadline) {
  if (fd_ < 0 || PollFor(fd_, POLLIN, deadline) <= 0) return -1;
  char buffer[4096];
  const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
  if (n < 0) return -1;
  decoder_.Feed(buffer, static_cast<std::size_t>(n));
  return n;
}

bool FakeConnection::Read(dblog::v1::ClientMessage* message, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::string_view payload;
    std::string error;
    switch (decoder_.Next(&payload, &error)) {
      case wire::FrameDecoder::Status::kFrame:
        if (!message->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
          ADD_FAILURE() << "fake dblogd: malformed ClientMessage";
          return false;
        }
        return true;
      case wire::FrameDecoder::Status::kError:
        ADD_FAILURE() << "fake dblogd: bad frame from the client: " << error;
        return false;
      case wire::FrameDecoder::Status::kNeedMore:
        break;
    }
    const long n = Fill(deadline);
    if (n <= 0) {
      ADD_FAILURE() << "fake dblogd: " << (n == 0 ? "EOF" : "timeout or error")
                    << " while waiting for a ClientMessage";
      return false;
    }
  }
}

bool FakeConnection::WaitForEof(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const long n = Fill(deadline);
    if (n == 0) return decoder_.buffered() == 0;
    if (n < 0) return false;
  }
}

void FakeConnection::Send(const dblog::v1::ServerMessage& message) {
  std::string frame;
  wire::AppendFrame(frame, message);
  SendRaw(frame);
}

void FakeConnection::SendRaw(std::string_view bytes) {
  while (!bytes.empty() && fd_ >= 0) {
    const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      ADD_FAILURE() << "fake dblogd: send failed: " << std::strerror(errno);
      return;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

FakeServer::FakeServer(Script script, int connections) {
  listen_fd_ = ListenOnLoopback(&port_);
  if (listen_fd_ < 0) {
    ADD_FAILURE() << "fake dblogd: cannot listen on 127.0.0.1: " << std::strerror(errno);
    return;
  }
  thread_ = std::thread([this, script = std::move(script), connections] {
    for (int i = 0; i < connections; ++i) {
      const auto deadline = std::chrono::steady_clock::now() + 10s;
      if (PollFor(listen_fd_, POLLIN, deadline) <= 0) {
        ADD_FAILURE() << "fake dblogd: no client connected within 10 s (connection " << i + 1
                      << " of " << connections << ")";
        return;
      }
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) {
        ADD_FAILURE() << "fake dblogd: accept failed: " << std::strerror(errno);
        return;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      FakeConnection connection(fd);
      script(connection);
    }
  });
}

FakeServer::~FakeServer() {
  Join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void FakeServer::Join() {
  if (thread_.joinable()) thread_.join();
}

RefusingPort::RefusingPort() {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ADD_FAILURE() << "cannot bind a port on 127.0.0.1: " << std::strerror(errno);
    return;
  }
  port_ = ntohs(address.sin_port);
}

RefusingPort::~RefusingPort() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace dblog::client::testing
