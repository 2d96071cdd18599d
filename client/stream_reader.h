// client/stream_reader.h: the part of the client that reads what dblogd sends, without a socket:
// bytes -> frames (wire::FrameDecoder) -> ServerMessages -> items, with the checks Client
// applies (the handshake answer, message order, known event kinds, positions strictly
// increasing), and puts split values together (a Change with SplitValues is handed out once
// its ValuePieces have come, its values whole). Client feeds it what it reads; tests/fuzz/
// feeds it arbitrary bytes.
// Owns: the decoder, the arena frames are parsed into, the position of the last item, the
// Change being put together.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <google/protobuf/arena.h>

#include "client/client.h"
#include "wire/change_view.h"
#include "wire/frame.h"

namespace dblog::client {

class StreamReader {
 public:
  // `peer` names the server in error messages ("dblogd at host:port"). arena_block_bytes: the
  // arena's own first block (and its largest block size).
  explicit StreamReader(std::string peer, std::size_t arena_block_bytes = kArenaBlockBytes);

  void Feed(const char* data, std::size_t size) { decoder_.Feed(data, size); }

  // The next complete frame, parsed into *message. False when no complete frame has been fed.
  // Throws ProtocolError for a bad frame or one that is not a ServerMessage.
  bool NextMessage(dblog::v1::ServerMessage& message);

  // The server's answer to Hello: a Welcome of our protocol version, or ServerError /
  // ProtocolError. Positions handed out later must be after Welcome.resume_from and after
  // `resume_after`.
  void AcceptWelcome(const dblog::v1::ServerMessage& answer,
                     const std::optional<dblog::v1::Position>& resume_after);
  const dblog::v1::Welcome& welcome() const { return welcome_; }

  // The next item of the stream, pointing into the reader until the next call. False when more
  // bytes are needed. Throws ServerError, ProtocolError.
  bool NextItem(ItemRef& item);
  // The same with Changes read in place (Client::NextView).
  bool NextView(ItemView& item);

  // True when NextItem can answer without more bytes (the rest of an EventBatch, a complete
  // frame, or a decoding error); false while a Change waits for its pieces.
  bool HasBufferedItems() const;
  // Events or a frame buffered, whatever they are (pieces too): the socket need not be read.
  bool HasBuffered() const;
  // Bytes fed but not yet parsed (nonzero at a clean close: the server cut a frame).
  std::size_t buffered() const { return decoder_.buffered(); }

  // Client::received_through: every transaction the source committed before this LSN has been
  // handed out (or was had before, per Welcome.resume_from).
  std::uint64_t received_through() const;
  // Split values put together so far.
  std::uint64_t split_values_received() const { return split_values_; }

 private:
  static constexpr std::size_t kArenaBlockBytes = 1u << 20;

  // The next frame: its events made the current batch (true), or a Heartbeat or Progress
  // handed out in *control (true), or no complete frame yet (false). in_place: an EventBatch
  // frame is split into its events without parsing them (split_), else parsed whole (batch_).
  bool NextFrame(bool in_place, ItemRef* control);
  // Splits an EventBatch frame into split_ (see the .cc); false: parse it whole.
  bool SplitInPlace(std::string_view payload);
  // A frame's message handed out: its events as the current batch, or *control.
  bool Dispatch(const dblog::v1::ServerMessage& message, ItemRef* control);
  // The next event of the current batch, parsed (false when the batch is done).
  const dblog::v1::StreamEvent* NextParsedEvent();
  // Every event handed out passes through here: a known kind, its position after the last,
  // what it tells about received_through().
  void Accept(const dblog::v1::StreamEvent& event);
  void CheckPosition(const std::optional<dblog::v1::Position>& position, bool begin);
  // The event to hand out for `event`: itself; or, for a Change with split values and each
  // ValuePiece after it, nullptr until the last piece, then the Change put together (whole_).
  // Throws ProtocolError for a piece no Change waits for, or another event before the last.
  const dblog::v1::StreamEvent* Assemble(const dblog::v1::StreamEvent& event);
  void RequireNothingDue() const;
  // A Heartbeat that arrives while a Change waits for its pieces is not handed out.
  bool HoldBack(const ItemRef& control) const;
  // What the item handed out tells about received_through().
  void NoteReached(const dblog::v1::StreamEvent& event);
  void NoteReached(std::uint64_t commit_lsn);

  std::string peer_;
  wire::FrameDecoder decoder_{wire::kMaxServerFrame};
  dblog::v1::Welcome welcome_;
  // Frames are parsed into arena_, reset before the next frame is parsed: what NextItem handed
  // out lives until then. The first block is ours and survives resets: parsing a frame of the
  // usual size allocates nothing but the buffers of strings too long to be stored inline.
  std::unique_ptr<char[]> arena_block_;
  google::protobuf::Arena arena_;
  const dblog::v1::EventBatch* batch_ = nullptr;  // being handed out, from batch_next_ on
  int batch_next_ = 0;
  // Or the frame's events split in place (NextView), from split_next_ on: a canonical Change
  // as views_[view], any other event parsed into the arena.
  struct SplitEvent {
    std::string_view bytes;                       // the StreamEvent
    std::size_t view = 0;                         // when event is null
    const dblog::v1::StreamEvent* event = nullptr;
  };
  std::vector<SplitEvent> split_;
  std::size_t split_next_ = 0;
  std::vector<wire::BatchEvent> events_;  // the split, reused
  // Reused from frame to frame (each keeps its rows' capacity), at most kKeptViews kept: more
  // than a bootstrap's frame holds (dblogd's copier sends up to 2,000 rows a batch), so that a
  // bootstrap allocates no views after its first frames.
  std::vector<wire::ChangeView> views_;
  static constexpr std::size_t kKeptViews = 4096;
  dblog::v1::Position last_position_;  // of the last event handed out (from Welcome.resume_from)
  bool positioned_ = false;            // a positioned event was handed out
  bool in_bootstrap_ = false;          // between BootstrapBegin and BootstrapEnd
  std::uint64_t through_ = 0;          // received_through(), from what was handed out
  // A Change with split values being put together (Assemble), its split values' strings and
  // the bytes each still lacks, in row order; released at the next call after it is handed out.
  std::unique_ptr<dblog::v1::StreamEvent> whole_;
  std::vector<std::pair<std::string*, std::uint64_t>> due_;
  std::size_t due_next_ = 0;
  std::uint64_t split_values_ = 0;
};

}  // namespace dblog::client
