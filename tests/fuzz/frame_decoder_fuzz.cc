// tests/fuzz/frame_decoder_fuzz.cc: wire::FrameDecoder on arbitrary bytes.
// Input: one byte choosing the frame limit and how the rest is cut into pieces, then the bytes
// as they would arrive. Properties: the frames and the final status do not depend on how the
// bytes were cut; frames lie inside the input, back to back; none exceeds the limit; Ready()
// agrees with Next(); a decoder in error stays in error; every frame written by AppendFrame
// decodes to itself.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "wire/frame.h"

using dblog::fuzz::Check;
using dblog::wire::FrameDecoder;

namespace {

struct Outcome {
  std::vector<std::string> frames;
  FrameDecoder::Status last = FrameDecoder::Status::kNeedMore;
};

// Feeds the pieces one by one, taking every frame that is complete after each.
Outcome Decode(const std::vector<std::string_view>& pieces, std::size_t max_frame) {
  Outcome out;
  FrameDecoder decoder(max_frame);
  std::size_t fed = 0;
  for (std::string_view piece : pieces) {
    if (out.last == FrameDecoder::Status::kError) {
      decoder.Feed(piece);  // ignored once in error
      std::string_view payload;
      std::string error;
      Check(decoder.Next(&payload, &error) == FrameDecoder::Status::kError && !error.empty(),
            "a decoder in error stays in error");
      continue;
    }
    decoder.Feed(piece);
    fed += piece.size();
    for (;;) {
      const bool ready = decoder.Ready();
      std::string_view payload;
      std::string error;
      out.last = decoder.Next(&payload, &error);
      Check(ready == (out.last != FrameDecoder::Status::kNeedMore), "Ready() agrees with Next()");
      if (out.last != FrameDecoder::Status::kFrame) {
        Check(out.last == FrameDecoder::Status::kNeedMore || !error.empty(),
              "an error says why");
        break;
      }
      Check(payload.size() <= max_frame, "no frame over the limit");
      out.frames.emplace_back(payload);
    }
    if (out.last == FrameDecoder::Status::kNeedMore)
      Check(decoder.buffered() <= fed, "buffered bytes were fed");
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::uint8_t control = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  static constexpr std::size_t kLimits[] = {dblog::wire::kMaxClientFrame,
                                            dblog::wire::kMaxServerFrame, 0, 1, 5, 127, 128, 300};
  const std::size_t max_frame = kLimits[control & 7];

  const Outcome whole = Decode({bytes}, max_frame);
  const Outcome cut = Decode(dblog::fuzz::Pieces(bytes, control >> 3), max_frame);
  Check(whole.frames == cut.frames, "the same frames however the bytes are cut");
  Check(whole.last == cut.last, "the same final status however the bytes are cut");

  // Frames are back to back from the start: the input begins with each one's header + payload.
  std::size_t at = 0;
  for (const std::string& frame : whole.frames) {
    std::uint64_t length = 0;
    int shift = 0;
    for (;;) {
      Check(at < bytes.size() && shift < 70, "a frame's header is in the input");
      const auto byte = static_cast<unsigned char>(bytes[at++]);
      length |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      shift += 7;
      if ((byte & 0x80) == 0) break;
    }
    Check(length == frame.size(), "the header gives the frame's length");
    Check(bytes.substr(at, frame.size()) == frame, "the frame is the bytes after its header");
    at += frame.size();
  }

  // What AppendFrame writes decodes to itself.
  std::string encoded;
  for (const std::string& frame : whole.frames) dblog::wire::AppendFrame(encoded, frame);
  const Outcome again = Decode(dblog::fuzz::Pieces(encoded, control), max_frame);
  Check(again.frames == whole.frames, "AppendFrame round trip");
  Check(again.last == FrameDecoder::Status::kNeedMore, "AppendFrame output ends between frames");
  return 0;
}
