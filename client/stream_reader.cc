// client/stream_reader.cc: server bytes to items (see stream_reader.h).
#include "client/stream_reader.h"

#include <algorithm>

#include "client/position.h"

namespace dblog::client {

using dblog::v1::Position;
using dblog::v1::ServerMessage;
using dblog::v1::StreamEvent;

namespace {

google::protobuf::ArenaOptions ArenaOptions(char* block, std::size_t size) {
  google::protobuf::ArenaOptions o;
  o.initial_block = block;
  o.initial_block_size = size;
  o.max_block_size = size;
  return o;
}

}  // namespace

StreamReader::StreamReader(std::string peer, std::size_t arena_block_bytes)
    : peer_(std::move(peer)),
      arena_block_(new char[arena_block_bytes]),
      arena_(ArenaOptions(arena_block_.get(), arena_block_bytes)) {}

bool StreamReader::NextMessage(ServerMessage& message) {
  std::string_view payload;
  std::string error;
  switch (decoder_.Next(&payload, &error)) {
    case wire::FrameDecoder::Status::kFrame:
      if (!message.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
        throw ProtocolError(peer_ + " sent a malformed ServerMessage frame (" +
                            std::to_string(payload.size()) + " bytes)");
      }
      return true;
    case wire::FrameDecoder::Status::kError:
      throw ProtocolError(peer_ + " sent a bad frame: " + error);
    case wire::FrameDecoder::Status::kNeedMore:
      break;
  }
  return false;
}

void StreamReader::AcceptWelcome(const ServerMessage& answer,
                                 const std::optional<Position>& resume_after) {
  switch (answer.msg_case()) {
    case ServerMessage::kWelcome:
      break;
    case ServerMessage::kError:
      throw ServerError(answer.error().code(), answer.error().message());
    default:
      throw ProtocolError(peer_ + " answered Hello with something other than Welcome or Error");
  }
  welcome_ = answer.welcome();
  if (welcome_.protocol_version() != Client::kProtocolVersion) {
    throw ProtocolError(peer_ + " speaks protocol version " +
                        std::to_string(welcome_.protocol_version()) + "; this client speaks " +
                        std::to_string(Client::kProtocolVersion));
  }
  // Nothing at or before either bound may come: the server's resume point, and ours.
  last_position_ = welcome_.resume_from();
  if (resume_after && ComparePositions(*resume_after, last_position_) > 0) {
    last_position_ = *resume_after;
  }
}

void StreamReader::CheckPosition(const StreamEvent& event) {
  const auto position = PositionOf(event);
  if (!position) return;
  // Resuming inside a transaction: its Begin comes first, at its own position (commit_lsn, 0),
  // at or before the resume point; its events after the resume point follow.
  const bool resumed_begin = !positioned_ && event.has_begin() &&
                             last_position_.commit_lsn() != 0 &&
                             event.begin().commit_lsn() == last_position_.commit_lsn();
  positioned_ = true;
  if (resumed_begin) return;
  if (ComparePositions(*position, last_position_) <= 0) {
    throw ProtocolError(peer_ + " sent an event at " + FormatPosition(*position) +
                        ", not after the previous position " + FormatPosition(last_position_));
  }
  last_position_ = *position;
}

void StreamReader::NoteReached(const StreamEvent& event) {
  // The stream is in commit order: an event of the transaction committed at C means every
  // transaction committed before C was handed out; its Commit, that it is complete too (nothing
  // commits between C and end_lsn). The bootstrap's rows sit below the consistent point but
  // mean nothing until BootstrapEnd: then everything committed before the consistent point is
  // in the copy.
  const auto reach = [this](std::uint64_t lsn) {
    if (lsn > through_) through_ = lsn;
  };
  switch (event.event_case()) {
    case StreamEvent::kBootstrapBegin:
      in_bootstrap_ = true;
      return;
    case StreamEvent::kBootstrapEnd:
      in_bootstrap_ = false;
      reach(event.bootstrap_end().consistent_point());
      return;
    case StreamEvent::kCommit:
      reach(event.commit().end_lsn() != 0 ? event.commit().end_lsn() : event.commit().commit_lsn());
      return;
    default:
      break;
  }
  if (in_bootstrap_) return;
  if (const auto position = PositionOf(event)) reach(position->commit_lsn());
}

std::uint64_t StreamReader::received_through() const {
  // What the consumer had before this connection: everything committed before its resume point.
  return std::max(through_, welcome_.resume_from().commit_lsn());
}

bool StreamReader::NextItem(ItemRef& item) {
  for (;;) {
    if (batch_ != nullptr && batch_next_ < batch_->events_size()) {
      const StreamEvent& event = batch_->events(batch_next_++);
      if (event.event_case() == StreamEvent::EVENT_NOT_SET) {
        // Possibly an event kind newer than this client: skipping it could lose data.
        throw ProtocolError(peer_ + " sent an event of a kind this client does not know");
      }
      CheckPosition(event);
      NoteReached(event);
      item = &event;
      return true;
    }
    // Everything handed out so far is released here, before the next frame is parsed.
    batch_ = nullptr;
    arena_.Reset();
    auto* message = google::protobuf::Arena::CreateMessage<ServerMessage>(&arena_);
    if (!NextMessage(*message)) return false;
    switch (message->msg_case()) {
      case ServerMessage::kEvents:
        batch_ = &message->events();
        batch_next_ = 0;
        continue;
      case ServerMessage::kHeartbeat:
        // Everything the source committed before source_lsn was sent ahead of the heartbeat
        // (not during a bootstrap: the copy is incomplete until BootstrapEnd).
        if (!in_bootstrap_ && message->heartbeat().source_lsn() > through_)
          through_ = message->heartbeat().source_lsn();
        item = &message->heartbeat();
        return true;
      case ServerMessage::kProgress:
        item = &message->progress();
        return true;
      case ServerMessage::kError:
        throw ServerError(message->error().code(), message->error().message());
      case ServerMessage::kWelcome:
        throw ProtocolError(peer_ + " sent a second Welcome");
      case ServerMessage::MSG_NOT_SET:
        throw ProtocolError(peer_ + " sent a ServerMessage of a kind this client does not know");
    }
  }
}

bool StreamReader::HasBufferedItems() const {
  if (batch_ != nullptr && batch_next_ < batch_->events_size()) return true;
  // A decoding error counts as buffered too (Next reports it without waiting).
  return decoder_.Ready();
}

}  // namespace dblog::client
