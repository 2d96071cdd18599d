// wire/frame.cc: varint-delimited framing (see frame.h).
#include "frame.h"

#include <google/protobuf/message_lite.h>

#include <algorithm>

namespace dblog::wire {

void AppendFrame(std::string& out, std::string_view payload) {
  AppendVarint(out, payload.size());
  out.append(payload.data(), payload.size());
}

void AppendFrame(std::string& out, const google::protobuf::MessageLite& message) {
  const std::size_t size = message.ByteSizeLong();
  AppendVarint(out, size);
  const std::size_t start = out.size();
  out.resize(start + size);
  message.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(&out[start]));
}

std::string FieldFrameHead(std::uint32_t field_number, std::size_t field_size) {
  std::string message_head;
  AppendVarint(message_head, field_number << 3 | 2);  // wire type 2: length-delimited
  AppendVarint(message_head, field_size);
  std::string head;
  AppendVarint(head, message_head.size() + field_size);
  return head + message_head;
}

void FrameDecoder::Feed(const char* data, std::size_t size) {
  if (!error_.empty()) return;
  // Compact once the consumed prefix dominates, so the buffer stays about one frame large.
  if (offset_ > 0 && offset_ >= buffer_.size() / 2) {
    buffer_.erase(0, offset_);
    offset_ = 0;
    // erase() keeps the capacity: one huge frame must not pin its memory for the rest of the
    // connection.
    if (buffer_.capacity() > 4 * std::max<std::size_t>(buffer_.size() + size, 1 << 16))
      buffer_.shrink_to_fit();
  }
  buffer_.append(data, size);
}

FrameDecoder::Status FrameDecoder::Scan(std::size_t* header_size, std::uint64_t* frame_length,
                                        std::string* error) const {
  if (!error_.empty()) {
    *error = error_;
    return Status::kError;
  }
  const std::size_t available = buffer_.size() - offset_;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + offset_);
  std::uint64_t length = 0;
  std::size_t header = 0;
  for (;;) {
    if (header == available) return Status::kNeedMore;
    const unsigned char byte = p[header];
    if (header == 9 && byte > 1) {  // a tenth byte may only hold bit 63
      *error = "frame length is not a valid varint";
      return Status::kError;
    }
    length |= static_cast<std::uint64_t>(byte & 0x7f) << (7 * header);
    ++header;
    if ((byte & 0x80) == 0) break;
  }
  if (length > max_frame_) {
    *error = "frame of " + std::to_string(length) + " bytes exceeds the limit of " +
             std::to_string(max_frame_);
    return Status::kError;
  }
  if (available - header < length) return Status::kNeedMore;
  *header_size = header;
  *frame_length = length;
  return Status::kFrame;
}

bool FrameDecoder::Ready() const {
  std::size_t header = 0;
  std::uint64_t length = 0;
  std::string error;
  return Scan(&header, &length, &error) != Status::kNeedMore;
}

FrameDecoder::Status FrameDecoder::Next(std::string_view* payload, std::string* error) {
  std::size_t header = 0;
  std::uint64_t length = 0;
  const Status status = Scan(&header, &length, error);
  if (status == Status::kError) error_ = *error;  // the decoder stays in error
  if (status != Status::kFrame) return status;
  *payload = std::string_view(buffer_.data() + offset_ + header, length);
  offset_ += header + length;
  return Status::kFrame;
}

}  // namespace dblog::wire
