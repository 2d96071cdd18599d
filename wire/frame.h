// wire/frame.h: framing of protobuf messages on TCP, shared by dblogd and the clients.
//
// A frame is a varint length followed by that many bytes (protobuf's delimited convention).
// FrameDecoder takes bytes as they arrive and hands out complete frames; it never reads past
// what it was given and refuses frames over its limit before buffering them.
// Owns: framing only. Does not know which message a frame holds, nor any socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/varint.h"

namespace google::protobuf {
class MessageLite;
}

namespace dblog::wire {

// Client frames are small (Hello, Ack); server frames carry event batches. A server frame
// holds at most one plugin Batch: events up to the plugin's batch_bytes (dblogd allows 64 MiB)
// and one change that may be as large as the plugin can encode one (PostgreSQL's 1 GiB
// allocation limit), so any legal row fits in one frame.
inline constexpr std::size_t kMaxClientFrame = 1 << 20;
inline constexpr std::size_t kMaxServerFrame = (1u << 30) + (128u << 20);

// Appends varint(len) + payload to `out`.
void AppendFrame(std::string& out, std::string_view payload);
// Appends varint(size) + the serialized message to `out`, without an intermediate copy.
void AppendFrame(std::string& out, const google::protobuf::MessageLite& message);

// The varint writer (a frame's length prefix): common/varint.h.
using common::AppendVarint;

// The head of a frame whose message holds one length-delimited field (`field_number`) of
// `field_size` bytes: varint(frame length), the field's tag, varint(field_size). The frame is
// this head followed by the field's bytes, which need not be copied next to it.
std::string FieldFrameHead(std::uint32_t field_number, std::size_t field_size);

class FrameDecoder {
 public:
  enum class Status { kFrame, kNeedMore, kError };

  explicit FrameDecoder(std::size_t max_frame) : max_frame_(max_frame) {}

  void Feed(const char* data, std::size_t size);
  void Feed(std::string_view bytes) { Feed(bytes.data(), bytes.size()); }

  // kFrame: *payload is the next frame's bytes, valid until the next Feed or Next call.
  // kNeedMore: no complete frame yet. kError: *error says why; the decoder stays in error.
  Status Next(std::string_view* payload, std::string* error);

  // True when Next would return without more input (a complete frame, or an error).
  bool Ready() const;

  // Bytes received but not yet handed out.
  std::size_t buffered() const { return buffer_.size() - offset_; }

 private:
  std::size_t max_frame_;
  std::string buffer_;
  std::size_t offset_ = 0;
  std::string error_;

  // Reads the next frame's length without consuming anything.
  Status Scan(std::size_t* header, std::uint64_t* length, std::string* error) const;
};

}  // namespace dblog::wire
