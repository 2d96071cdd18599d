// tests/cpp/pgoutput/server_util.cc: see server_util.h.
#include "server_util.h"

#include <boost/asio/io_context.hpp>
#include <chrono>

#include "pg/connection.h"
#include "pg/replication_stream.h"

namespace dblog::test {
namespace {

struct Collector : pg::ReplicationStream::Handler {
  Collector(Read& read, pgoutput::Decoder& decoder) : read(read), decoder(decoder) {}
  Read& read;
  pgoutput::Decoder& decoder;
  pg::ReplicationStream* stream = nullptr;
  bool done = false;

  void OnData(std::uint64_t wal_start, std::uint64_t, std::string_view payload) override {
    read.wal_starts.push_back(wal_start);
    read.payloads.emplace_back(payload);
    read.messages.push_back(decoder.Decode(read.payloads.back()));
    if (auto* m = std::get_if<pgoutput::Message>(&read.messages.back())) {
      if (m->prefix == "test.end") stream->Stop();
    }
  }
  void OnError(const std::exception& e) override {
    read.error = e.what();
    done = true;
  }
  void OnEnd() override { done = true; }
};

}  // namespace

Read ReadSlot(const std::string& conninfo, const std::string& slot, const SlotOptions& options,
              pgoutput::Decoder::Options decoder_options) {
  Read read;
  pgoutput::Decoder decoder(decoder_options);
  boost::asio::io_context io;
  Collector collector(read, decoder);
  pg::ReplicationStream stream(io, pg::Connection::Open(conninfo, true), collector);
  collector.stream = &stream;
  stream.Start(slot, 0, options);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!collector.done && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(50));
    io.restart();
  }
  if (!collector.done) read.error = "timed out reading slot " + slot;
  return read;
}

std::string StartError(const std::string& conninfo, const std::string& slot,
                       const SlotOptions& options) {
  Read read;
  pgoutput::Decoder decoder({});
  boost::asio::io_context io;
  Collector collector(read, decoder);
  try {
    pg::ReplicationStream stream(io, pg::Connection::Open(conninfo, true), collector);
    stream.Start(slot, 0, options);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace dblog::test
