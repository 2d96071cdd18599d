// tests/cpp/wire/frame_test.cc: unit and property tests of wire/frame (FrameDecoder,
// AppendFrame, AppendVarint). The property tests compare the decoder, fed in every kind of
// chunking, with a deliberately different reference decoder that sees the whole input at once.
#include "wire/frame.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "dblog/v1/consumer.pb.h"

namespace dblog::wire {
namespace {

using Status = FrameDecoder::Status;

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

std::string Varint(std::uint64_t v) {
  std::string s;
  AppendVarint(s, v);
  return s;
}

// What a decoder must make of a complete input: the frames it holds, then either an error or
// "need more" (a possibly empty incomplete tail).
struct Outcome {
  std::vector<std::string> frames;
  bool error = false;

  bool operator==(const Outcome& o) const { return frames == o.frames && error == o.error; }
};

__extension__ typedef unsigned __int128 Uint128;  // GCC and Clang; __extension__: -Wpedantic

// Reference decoder: whole input at once, the varint accumulated in 128 bits so that
// "does not fit in 64 bits" is a plain comparison rather than the bit trick frame.cc uses.
Outcome Reference(const std::string& in, std::size_t limit) {
  Outcome out;
  std::size_t pos = 0;
  for (;;) {
    Uint128 length = 0;
    std::size_t i = 0;
    bool complete = false;
    while (pos + i < in.size() && i < 10) {
      const auto byte = static_cast<unsigned char>(in[pos + i]);
      length |= static_cast<Uint128>(byte & 0x7f) << (7 * i);
      ++i;
      if ((byte & 0x80) == 0) {
        complete = true;
        break;
      }
    }
    if (!complete) {
      // Ten bytes with the continuation bit still set can never become a valid varint.
      out.error = (i == 10);
      return out;
    }
    if (length > std::numeric_limits<std::uint64_t>::max() || length > limit) {
      out.error = true;
      return out;
    }
    const auto n = static_cast<std::size_t>(length);
    if (in.size() - (pos + i) < n) return out;  // need more
    out.frames.push_back(in.substr(pos + i, n));
    pos += i + n;
  }
}

// Feeds `in` to a fresh decoder in the given chunk sizes (the rest at once when they run out),
// draining frames after every Feed, and reports what came out.
Outcome Decode(const std::string& in, std::size_t limit, const std::vector<std::size_t>& chunks) {
  FrameDecoder decoder(limit);
  Outcome out;
  std::size_t pos = 0;
  std::size_t next_chunk = 0;
  auto drain = [&] {
    for (;;) {
      std::string_view payload;
      std::string error;
      const Status s = decoder.Next(&payload, &error);
      if (s == Status::kFrame) {
        EXPECT_LE(payload.size(), limit);
        out.frames.emplace_back(payload);  // copy: the view dies at the next Feed
        continue;
      }
      if (s == Status::kError) {
        EXPECT_FALSE(error.empty());
        out.error = true;
      }
      return;
    }
  };
  drain();  // an empty decoder needs more
  while (pos < in.size() && !out.error) {
    std::size_t n = next_chunk < chunks.size() ? chunks[next_chunk++] : in.size() - pos;
    n = std::min(n, in.size() - pos);
    decoder.Feed(in.data() + pos, n);
    pos += n;
    drain();
  }
  return out;
}

std::vector<std::size_t> ByteByByte(std::size_t size) { return std::vector<std::size_t>(size, 1); }

std::vector<std::size_t> RandomSplits(std::size_t size, std::mt19937_64& rng) {
  std::vector<std::size_t> chunks;
  std::size_t total = 0;
  while (total < size) {
    // Mostly small pieces (splitting headers), sometimes big ones (several frames at once).
    std::size_t n = rng() % 4 == 0 ? 1 + rng() % 4096 : rng() % 12;
    chunks.push_back(n);  // zero-length feeds included on purpose
    total += n;
  }
  return chunks;
}

TEST(AppendVarint, EdgeValues) {
  EXPECT_EQ(Varint(0), Bytes({0x00}));
  EXPECT_EQ(Varint(1), Bytes({0x01}));
  EXPECT_EQ(Varint(127), Bytes({0x7f}));
  EXPECT_EQ(Varint(128), Bytes({0x80, 0x01}));
  EXPECT_EQ(Varint(300), Bytes({0xac, 0x02}));
  EXPECT_EQ(Varint(std::uint64_t{1} << 32), Bytes({0x80, 0x80, 0x80, 0x80, 0x10}));
  EXPECT_EQ(Varint(std::numeric_limits<std::uint64_t>::max()),
            Bytes({0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}));
  std::string out = "x";
  EXPECT_EQ(AppendVarint(out, 128), 2u);  // returns what it wrote, appends after the prefix
  EXPECT_EQ(out, "x" + Bytes({0x80, 0x01}));
}

TEST(AppendFrame, PayloadAndMessageAgree) {
  dblog::v1::ServerMessage msg;
  msg.mutable_heartbeat()->mutable_position()->set_commit_lsn(0x16B3748);
  msg.mutable_heartbeat()->set_server_time(-5);
  std::string a, b;
  AppendFrame(a, msg);
  AppendFrame(b, msg.SerializeAsString());
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, Varint(msg.ByteSizeLong()) + msg.SerializeAsString());

  FrameDecoder decoder(kMaxServerFrame);
  decoder.Feed(a);
  std::string_view payload;
  std::string error;
  ASSERT_EQ(decoder.Next(&payload, &error), Status::kFrame);
  dblog::v1::ServerMessage parsed;
  ASSERT_TRUE(parsed.ParseFromArray(payload.data(), static_cast<int>(payload.size())));
  EXPECT_EQ(parsed.heartbeat().position().commit_lsn(), 0x16B3748u);
  EXPECT_EQ(decoder.Next(&payload, &error), Status::kNeedMore);
  EXPECT_EQ(decoder.buffered(), 0u);
}

// dblogd sends ServerMessage{events} as FieldFrameHead + the emitter's EventBatch bytes: the
// same bytes AppendFrame writes for the whole message, for batches of every size class.
TEST(FieldFrameHead, HeadPlusFieldIsTheFramedMessage) {
  for (std::size_t values : {0u, 1u, 20u, 3000u, 100000u}) {
    dblog::v1::ServerMessage msg;
    auto* change = msg.mutable_events()->add_events()->mutable_change();
    for (std::size_t i = 0; i < values; ++i)
      change->mutable_new_row()->add_values()->set_int_value(static_cast<std::int64_t>(i));
    const std::string batch = msg.events().SerializeAsString();
    std::string framed;
    AppendFrame(framed, msg);
    EXPECT_EQ(FieldFrameHead(dblog::v1::ServerMessage::kEventsFieldNumber, batch.size()) + batch,
              framed)
        << values << " values";
  }
}

TEST(AppendFrame, EmptyMessageIsAZeroLengthFrame) {
  std::string out;
  AppendFrame(out, dblog::v1::ClientMessage());
  EXPECT_EQ(out, Bytes({0x00}));
  FrameDecoder decoder(16);
  decoder.Feed(out);
  std::string_view payload = "not empty";
  std::string error;
  ASSERT_EQ(decoder.Next(&payload, &error), Status::kFrame);
  EXPECT_TRUE(payload.empty());
}

TEST(FrameDecoder, EmptyDecoderNeedsMore) {
  FrameDecoder decoder(16);
  std::string_view payload;
  std::string error;
  EXPECT_EQ(decoder.Next(&payload, &error), Status::kNeedMore);
  decoder.Feed("", 0);
  EXPECT_EQ(decoder.Next(&payload, &error), Status::kNeedMore);
  EXPECT_EQ(decoder.buffered(), 0u);
}

// Ready() answers "would Next return without more input" at every prefix of a stream, and
// consumes nothing: a frame is Ready exactly when Next hands it out, an error when Next fails.
TEST(FrameDecoder, ReadyAgreesWithNextAtEveryPrefix) {
  std::string stream;
  AppendFrame(stream, std::string(200, 'x'));  // two-byte length
  AppendFrame(stream, std::string());
  AppendFrame(stream, "abc");
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    FrameDecoder decoder(kMaxServerFrame);
    decoder.Feed(stream.substr(0, cut));
    for (;;) {
      const bool ready = decoder.Ready();
      EXPECT_EQ(decoder.Ready(), ready) << "asking twice changes nothing";
      std::string_view payload;
      std::string error;
      const Status status = decoder.Next(&payload, &error);
      EXPECT_EQ(ready, status != Status::kNeedMore) << "cut " << cut;
      if (status != Status::kFrame) break;
    }
  }
  FrameDecoder oversized(16);
  oversized.Feed(Varint(17));
  EXPECT_TRUE(oversized.Ready());  // the error is there to report
  std::string_view payload;
  std::string error;
  EXPECT_EQ(oversized.Next(&payload, &error), Status::kError);
  EXPECT_TRUE(oversized.Ready());  // and stays
}

TEST(FrameDecoder, LengthsAroundOneByteBoundary) {
  for (std::size_t n : {0, 1, 127, 128, 129, 16383, 16384}) {
    std::string payload(n, 'a');
    std::string in;
    AppendFrame(in, payload);
    EXPECT_EQ(in.size() - n, n < 128 ? 1u : n < 16384 ? 2u : 3u);
    Outcome got = Decode(in, 1 << 20, ByteByByte(in.size()));
    EXPECT_FALSE(got.error) << n;
    ASSERT_EQ(got.frames.size(), 1u) << n;
    EXPECT_EQ(got.frames[0], payload) << n;
  }
}

TEST(FrameDecoder, OverlongTenByteVarintIsAccepted) {
  // 3 written with ten bytes: redundant continuation bytes are legal protobuf.
  const std::string in =
      Bytes({0x83, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00}) + "abc";
  Outcome got = Decode(in, 16, {});
  EXPECT_FALSE(got.error);
  ASSERT_EQ(got.frames.size(), 1u);
  EXPECT_EQ(got.frames[0], "abc");
  EXPECT_EQ(Decode(in, 16, ByteByByte(in.size())), got);
}

TEST(FrameDecoder, ElevenByteVarintIsAnError) {
  std::string in(10, static_cast<char>(0x80));
  in += Bytes({0x00});
  FrameDecoder decoder(1 << 20);
  std::string_view payload;
  std::string error;
  // Nine continuation bytes could still end well...
  decoder.Feed(in.substr(0, 9));
  EXPECT_EQ(decoder.Next(&payload, &error), Status::kNeedMore);
  // ...the tenth cannot carry a continuation bit.
  decoder.Feed(in.substr(9));
  EXPECT_EQ(decoder.Next(&payload, &error), Status::kError);
  EXPECT_NE(error.find("varint"), std::string::npos) << error;
}

TEST(FrameDecoder, TenthByteBeyondSixtyFourBitsIsAnError) {
  // Bits 64..69 set: not a uint64 even though the varint terminates.
  const std::string in = Bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02});
  EXPECT_TRUE(Decode(in, SIZE_MAX, {}).error);
  EXPECT_TRUE(Reference(in, SIZE_MAX).error);
  // 2^63 fits in 64 bits but no limit admits it.
  const std::string top = Bytes({0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01});
  EXPECT_TRUE(Decode(top, kMaxServerFrame, {}).error);
}

TEST(FrameDecoder, OversizedFrameRefusedFromItsHeaderAlone) {
  const std::size_t limit = 1000;
  FrameDecoder decoder(limit);
  std::string_view payload;
  std::string error;
  decoder.Feed(Varint(limit + 1));  // no payload byte yet: the header is enough to refuse
  EXPECT_EQ(decoder.Next(&payload, &error), Status::kError);
  EXPECT_NE(error.find("exceeds the limit"), std::string::npos) << error;
  EXPECT_EQ(decoder.buffered(), Varint(limit + 1).size());
  // Whatever follows is not buffered.
  decoder.Feed(std::string(5000, 'x'));
  EXPECT_EQ(decoder.buffered(), Varint(limit + 1).size());

  // Exactly the limit is fine.
  FrameDecoder at_limit(limit);
  at_limit.Feed(Varint(limit));
  EXPECT_EQ(at_limit.Next(&payload, &error), Status::kNeedMore);
  at_limit.Feed(std::string(limit, 'y'));
  ASSERT_EQ(at_limit.Next(&payload, &error), Status::kFrame);
  EXPECT_EQ(payload.size(), limit);
}

TEST(FrameDecoder, HugeDeclaredLengthsAreRefused) {
  for (std::uint64_t n : {std::uint64_t{1} << 32, std::uint64_t{1} << 62,
                          std::numeric_limits<std::uint64_t>::max()}) {
    FrameDecoder decoder(kMaxClientFrame);
    decoder.Feed(Varint(n));
    std::string_view payload;
    std::string error;
    EXPECT_EQ(decoder.Next(&payload, &error), Status::kError) << n;
  }
}

TEST(FrameDecoder, TruncatedInputNeedsMoreNeverGarbage) {
  std::string in;
  const std::vector<std::string> payloads = {"", "a", std::string(200, 'b'), "cd",
                                             std::string(20000, 'e')};
  for (const auto& p : payloads) AppendFrame(in, p);
  for (std::size_t cut = 0; cut <= in.size(); ++cut) {
    const std::string prefix = in.substr(0, cut);
    Outcome got = Decode(prefix, 1 << 20, {});
    ASSERT_FALSE(got.error) << cut;
    // Exactly the frames that are complete within the prefix, and nothing else.
    std::size_t complete = 0, end = 0;
    for (const auto& p : payloads) {
      end += Varint(p.size()).size() + p.size();
      if (end > cut) break;
      ++complete;
    }
    ASSERT_EQ(got.frames.size(), complete) << cut;
    for (std::size_t i = 0; i < complete; ++i) ASSERT_EQ(got.frames[i], payloads[i]) << cut;
  }
}

TEST(FrameDecoder, StaysInErrorAfterAnError) {
  FrameDecoder decoder(4);
  std::string_view payload;
  std::string error;
  std::string in;
  AppendFrame(in, "ok");
  AppendFrame(in, "too long");
  AppendFrame(in, "ok");
  decoder.Feed(in);
  ASSERT_EQ(decoder.Next(&payload, &error), Status::kFrame);
  EXPECT_EQ(payload, "ok");
  ASSERT_EQ(decoder.Next(&payload, &error), Status::kError);
  const std::string first_error = error;
  const std::size_t buffered = decoder.buffered();

  // Valid frames after the error change nothing: the stream has lost its framing.
  std::string more;
  AppendFrame(more, "ok");
  decoder.Feed(more);
  for (int i = 0; i < 3; ++i) {
    error.clear();
    EXPECT_EQ(decoder.Next(&payload, &error), Status::kError);
    EXPECT_EQ(error, first_error);
  }
  EXPECT_EQ(decoder.buffered(), buffered);
}

TEST(FrameDecoder, FramesSurviveBufferCompaction) {
  // Many frames fed in pieces that straddle frames, so the decoder compacts its buffer while
  // frames are partly received.
  std::mt19937_64 rng(7);
  std::vector<std::string> payloads;
  std::string in;
  for (int i = 0; i < 2000; ++i) {
    std::string p(rng() % 300, '\0');
    for (char& c : p) c = static_cast<char>(rng());
    AppendFrame(in, p);
    payloads.push_back(std::move(p));
  }
  FrameDecoder decoder(1 << 20);
  std::size_t pos = 0, next = 0;
  std::size_t max_buffered = 0;
  while (pos < in.size()) {
    const std::size_t n = std::min<std::size_t>(1 + rng() % 700, in.size() - pos);
    decoder.Feed(in.data() + pos, n);
    pos += n;
    max_buffered = std::max(max_buffered, decoder.buffered());
    std::string_view payload;
    std::string error;
    while (decoder.Next(&payload, &error) == Status::kFrame) {
      ASSERT_LT(next, payloads.size());
      ASSERT_EQ(payload, payloads[next]) << next;
      ++next;
    }
  }
  EXPECT_EQ(next, payloads.size());
  EXPECT_EQ(decoder.buffered(), 0u);
  EXPECT_LT(max_buffered, 700u + 300u + 2u);  // one read plus at most one partial frame
}

// Round trip: random payload sequences, framed, fed byte by byte, all at once and in random
// splits, must come out exactly as they went in.
TEST(FrameDecoderProperty, RoundTripInAnyChunking) {
  std::mt19937_64 rng(20240601);
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<std::string> payloads(rng() % 20);
    std::string in;
    for (auto& p : payloads) {
      const int shape = static_cast<int>(rng() % 10);
      const std::size_t size = shape == 0  ? 0
                               : shape < 7 ? rng() % 130
                               : shape < 9 ? rng() % 20000
                                           : 100000 + rng() % 100000;
      p.resize(size);
      for (char& c : p) c = static_cast<char>(rng());
      AppendFrame(in, p);
    }
    const std::size_t limit = 200000;
    const Outcome expected{payloads, false};
    ASSERT_EQ(Reference(in, limit), expected) << iter;
    ASSERT_EQ(Decode(in, limit, {}), expected) << iter;
    ASSERT_EQ(Decode(in, limit, RandomSplits(in.size(), rng)), expected) << iter;
    if (in.size() < 50000) {
      ASSERT_EQ(Decode(in, limit, ByteByByte(in.size())), expected) << iter;
    }
  }
}

// Fuzz: random bytes (biased towards plausible headers) never crash the decoder, and it agrees
// with the reference decoder however the input is split.
TEST(FrameDecoderProperty, RandomGarbageAgreesWithReference) {
  std::mt19937_64 rng(12345);
  std::size_t errors = 0, frames = 0;
  for (int iter = 0; iter < 100000; ++iter) {
    std::string in(rng() % 40, '\0');
    for (char& c : in) {
      const auto r = rng() % 8;
      c = static_cast<char>(r == 0 ? 0x80 : r == 1 ? 0xff : r < 4 ? rng() % 8 : rng());
    }
    const std::size_t limit = rng() % 2 ? rng() % 16 : (rng() % 2 ? SIZE_MAX : 1 << 20);
    const Outcome expected = Reference(in, limit);
    errors += expected.error;
    frames += expected.frames.size();
    const Outcome got = iter % 2 ? Decode(in, limit, RandomSplits(in.size(), rng))
                                 : Decode(in, limit, ByteByByte(in.size()));
    ASSERT_EQ(got, expected) << "iteration " << iter;
  }
  // The generator must exercise both outcomes, or the loop proves nothing.
  EXPECT_GT(errors, 1000u);
  EXPECT_GT(frames, 10000u);
}

}  // namespace
}  // namespace dblog::wire
