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

void StreamReader::CheckPosition(const std::optional<Position>& position, bool begin) {
  if (!position) return;
  // Resuming inside a transaction: its Begin comes first, at its own position (commit_lsn, 0),
  // at or before the resume point; its events after the resume point follow.
  const bool resumed_begin = !positioned_ && begin && last_position_.commit_lsn() != 0 &&
                             position->commit_lsn() == last_position_.commit_lsn();
  positioned_ = true;
  if (resumed_begin) return;
  if (ComparePositions(*position, last_position_) <= 0) {
    throw ProtocolError(peer_ + " sent an event at " + FormatPosition(*position) +
                        ", not after the previous position " + FormatPosition(last_position_));
  }
  last_position_ = *position;
}

void StreamReader::Accept(const StreamEvent& event) {
  if (event.event_case() == StreamEvent::EVENT_NOT_SET) {
    // Possibly an event kind newer than this client: skipping it could lose data.
    throw ProtocolError(peer_ + " sent an event of a kind this client does not know");
  }
  CheckPosition(PositionOf(event), event.has_begin());
  NoteReached(event);
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
  if (const auto position = PositionOf(event)) NoteReached(position->commit_lsn());
}

void StreamReader::NoteReached(std::uint64_t commit_lsn) {
  if (!in_bootstrap_ && commit_lsn > through_) through_ = commit_lsn;
}

std::uint64_t StreamReader::received_through() const {
  // What the consumer had before this connection: everything committed before its resume point.
  return std::max(through_, welcome_.resume_from().commit_lsn());
}

bool StreamReader::NextFrame(bool in_place, ItemRef* control) {
  // Everything handed out so far is released here, before the next frame is read.
  batch_ = nullptr;
  split_.clear();
  split_next_ = 0;
  if (views_.size() > kKeptViews) {  // after a huge frame
    views_.resize(kKeptViews);
    if (views_.capacity() > 4 * kKeptViews) views_.shrink_to_fit();
  }
  arena_.Reset();
  std::string_view payload;
  std::string error;
  switch (decoder_.Next(&payload, &error)) {
    case wire::FrameDecoder::Status::kFrame:
      break;
    case wire::FrameDecoder::Status::kError:
      throw ProtocolError(peer_ + " sent a bad frame: " + error);
    case wire::FrameDecoder::Status::kNeedMore:
      return false;
  }
  if (in_place && SplitInPlace(payload)) return true;
  auto* message = google::protobuf::Arena::CreateMessage<ServerMessage>(&arena_);
  if (!message->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
    throw ProtocolError(peer_ + " sent a malformed ServerMessage frame (" +
                        std::to_string(payload.size()) + " bytes)");
  }
  return Dispatch(*message, control);
}

bool StreamReader::SplitInPlace(std::string_view payload) {
  // ServerMessage{events: EventBatch{events: ...}} as dblogd writes it: the one field's tag, its
  // length, the batch, nothing after; each StreamEvent of one member. Every event is read here,
  // before any is handed out, as a parse of the whole frame reads them: a Change in place when
  // it is canonical, anything else parsed. False (nothing split) when the frame is not such a
  // batch or an event does not parse: the caller parses the whole frame, which then answers as
  // NextItem would.
  static_assert(static_cast<int>(dblog::v1::EventBatch::kEventsFieldNumber) ==
                    static_cast<int>(dblog::v1::Batch::kEventsFieldNumber),
                "an EventBatch is split as a plugin Batch is");
  std::string_view batch;
  if (!wire::OneField(payload, ServerMessage::kEventsFieldNumber, &batch) ||
      !wire::SplitBatch(batch, &events_))
    return false;
  std::size_t views = 0;
  for (const wire::BatchEvent& e : events_) {
    SplitEvent item;
    item.bytes = e.event;
    if (e.member == static_cast<std::uint32_t>(StreamEvent::kChange)) {
      if (views == views_.size()) views_.emplace_back();
      if (views_[views].Parse(e.payload)) {
        item.view = views++;
        split_.push_back(item);
        continue;
      }
    }
    auto* event = google::protobuf::Arena::CreateMessage<StreamEvent>(&arena_);
    if (!event->ParseFromArray(e.event.data(), static_cast<int>(e.event.size()))) {
      split_.clear();
      arena_.Reset();
      return false;
    }
    item.event = event;
    split_.push_back(item);
  }
  return true;
}

bool StreamReader::Dispatch(const ServerMessage& message, ItemRef* control) {
  switch (message.msg_case()) {
    case ServerMessage::kEvents:
      batch_ = &message.events();
      batch_next_ = 0;
      return true;
    case ServerMessage::kHeartbeat:
      // Everything the source committed before source_lsn was sent ahead of the heartbeat
      // (not during a bootstrap: the copy is incomplete until BootstrapEnd).
      NoteReached(message.heartbeat().source_lsn());
      *control = &message.heartbeat();
      return true;
    case ServerMessage::kProgress:
      *control = &message.progress();
      return true;
    case ServerMessage::kError:
      throw ServerError(message.error().code(), message.error().message());
    case ServerMessage::kWelcome:
      throw ProtocolError(peer_ + " sent a second Welcome");
    case ServerMessage::MSG_NOT_SET:
      break;
  }
  throw ProtocolError(peer_ + " sent a ServerMessage of a kind this client does not know");
}

const StreamEvent* StreamReader::Assemble(const StreamEvent& event) {
  if (event.has_value_piece()) {
    if (due_next_ == due_.size())
      throw ProtocolError(peer_ + " sent a ValuePiece that no split value waits for");
    std::string_view data = event.value_piece().data();
    if (data.empty()) throw ProtocolError(peer_ + " sent an empty ValuePiece");
    while (!data.empty()) {  // a piece may end one value and start the next
      if (due_next_ == due_.size())
        throw ProtocolError(peer_ + " sent more ValuePiece bytes than the split values hold");
      auto& [target, missing] = due_[due_next_];
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(missing, data.size()));
      target->append(data.data(), n);
      data.remove_prefix(n);
      if ((missing -= n) == 0) {
        ++due_next_;
        ++split_values_;
      }
    }
    if (due_next_ < due_.size()) return nullptr;
    due_.clear();
    due_next_ = 0;
    return whole_.get();
  }
  RequireNothingDue();
  if (!event.has_change()) return &event;
  bool split = false;
  for (const auto& v : event.change().new_row().values()) split = split || v.has_split();
  if (!split) return &event;
  // PostgreSQL's largest value: a longer one is a broken stream, not memory to reserve.
  constexpr std::uint64_t kMaxValueBytes = 1u << 30;
  whole_ = std::make_unique<StreamEvent>(event);
  // reserved up front: at most 64 MiB in all (a length is the server's word); beyond, the
  // strings grow as the pieces come
  std::uint64_t reserve = 64u << 20;
  for (auto& v : *whole_->mutable_change()->mutable_new_row()->mutable_values()) {
    if (!v.has_split()) continue;
    const std::uint64_t length = v.split().length();
    if (length == 0 || length > kMaxValueBytes)
      throw ProtocolError(peer_ + " sent a split value of " + std::to_string(length) + " bytes");
    std::string* target = nullptr;
    switch (v.split().kind()) {
      case dblog::v1::SplitValue::TEXT:
        target = v.mutable_text_value();
        break;
      case dblog::v1::SplitValue::BYTES:
        target = v.mutable_bytes_value();
        break;
      case dblog::v1::SplitValue::LITERAL:
        target = v.mutable_literal();
        break;
      default:
        throw ProtocolError(peer_ + " sent a split value of a kind this client does not know");
    }
    const std::uint64_t reserved = std::min(length, reserve);
    target->reserve(static_cast<std::size_t>(reserved));
    reserve -= reserved;
    due_.emplace_back(target, length);
  }
  for (const dblog::v1::Row* row : {&event.change().old_key(), &event.change().old_row()})
    for (const auto& v : row->values())
      if (v.has_split()) throw ProtocolError(peer_ + " sent a split value outside a new row");
  return nullptr;
}

void StreamReader::RequireNothingDue() const {
  if (due_next_ < due_.size())
    throw ProtocolError(peer_ + " sent another event before the last ValuePiece of a Change");
}

const StreamEvent* StreamReader::NextParsedEvent() {
  if (batch_ != nullptr && batch_next_ < batch_->events_size())
    return &batch_->events(batch_next_++);
  if (split_next_ < split_.size()) {
    const SplitEvent& e = split_[split_next_++];
    if (e.event != nullptr) return e.event;
    // a Change read in place, asked for parsed (NextItem after NextView): it parsed above, as
    // a view, so it parses as a message
    auto* event = google::protobuf::Arena::CreateMessage<StreamEvent>(&arena_);
    event->ParseFromArray(e.bytes.data(), static_cast<int>(e.bytes.size()));
    return event;
  }
  return nullptr;
}

bool StreamReader::NextItem(ItemRef& item) {
  if (due_.empty()) whole_.reset();  // handed out last time
  for (;;) {
    if (const StreamEvent* event = NextParsedEvent()) {
      event = Assemble(*event);
      if (event == nullptr) continue;
      Accept(*event);
      item = event;
      return true;
    }
    ItemRef control;
    if (!NextFrame(/*in_place=*/false, &control)) return false;
    if (batch_ == nullptr) {
      if (HoldBack(control)) continue;
      item = control;
      return true;
    }
  }
}

bool StreamReader::NextView(ItemView& item) {
  if (due_.empty()) whole_.reset();  // handed out last time
  for (;;) {
    if (split_next_ < split_.size() && split_[split_next_].event == nullptr) {
      RequireNothingDue();  // (a view holds no split value: change_view.h)
      const wire::ChangeView& change = views_[split_[split_next_++].view];
      CheckPosition(MakePosition(change.commit_lsn, change.seq), /*begin=*/false);
      NoteReached(change.commit_lsn);
      item = EventView{nullptr, &change};
      return true;
    }
    if (const StreamEvent* event = NextParsedEvent()) {
      event = Assemble(*event);
      if (event == nullptr) continue;
      Accept(*event);
      item = EventView{event, nullptr};
      return true;
    }
    ItemRef control = static_cast<const StreamEvent*>(nullptr);
    if (!NextFrame(/*in_place=*/true, &control)) return false;
    if (HoldBack(control)) continue;
    if (const auto* const* h = std::get_if<const dblog::v1::Heartbeat*>(&control)) {
      item = *h;
      return true;
    }
    if (const auto* const* p = std::get_if<const dblog::v1::Progress*>(&control)) {
      item = *p;
      return true;
    }
  }
}

bool StreamReader::HoldBack(const ItemRef& control) const {
  // A heartbeat's position while a Change waits for its pieces could name that Change, which
  // was not handed out: acknowledging it would skip it. dblogd leaves it out
  // (Emitter::complete_position); this client does not rely on it.
  return due_next_ < due_.size() && std::holds_alternative<const dblog::v1::Heartbeat*>(control);
}

bool StreamReader::HasBufferedItems() const {
  // While a Change waits for its pieces, what is buffered may be only pieces: Next would read
  // the socket. Say no (a consumer then flushes early, which is harmless).
  if (due_next_ < due_.size()) return false;
  return HasBuffered();
}

bool StreamReader::HasBuffered() const {
  if (batch_ != nullptr && batch_next_ < batch_->events_size()) return true;
  if (split_next_ < split_.size()) return true;
  // A decoding error counts as buffered too (Next reports it without waiting).
  return decoder_.Ready();
}

}  // namespace dblog::client
