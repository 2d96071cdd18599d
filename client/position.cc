// client/position.cc: stream positions (see position.h).
#include "client/position.h"

#include <cstdio>

namespace dblog::client {

using dblog::v1::Position;
using dblog::v1::StreamEvent;

Position MakePosition(std::uint64_t commit_lsn, std::uint32_t seq) {
  Position position;
  position.set_commit_lsn(commit_lsn);
  position.set_seq(seq);
  return position;
}

std::optional<Position> PositionOf(const StreamEvent& event) {
  switch (event.event_case()) {
    case StreamEvent::kBegin:
      return MakePosition(event.begin().commit_lsn(), 0);
    case StreamEvent::kChange:
      return MakePosition(event.change().commit_lsn(), event.change().seq());
    case StreamEvent::kTruncate:
      return MakePosition(event.truncate().commit_lsn(), event.truncate().seq());
    case StreamEvent::kMessage:
      // A non-transactional message is decoded outside any transaction: it has no place in
      // the (commit_lsn, seq) order, and acknowledging "its" (0, 0) would mean nothing.
      if (!event.message().transactional() && event.message().commit_lsn() == 0) {
        return std::nullopt;
      }
      return MakePosition(event.message().commit_lsn(), event.message().seq());
    case StreamEvent::kCommit:
      return MakePosition(event.commit().commit_lsn(), event.commit().seq());
    case StreamEvent::kBootstrapEnd:
      // commit_lsn, not consistent_point: copied rows sit one below the consistent point.
      return MakePosition(event.bootstrap_end().commit_lsn(), event.bootstrap_end().seq());
    case StreamEvent::kChunkBegin:
      return MakePosition(event.chunk_begin().commit_lsn(), event.chunk_begin().seq());
    case StreamEvent::kChunkEnd:
      return MakePosition(event.chunk_end().commit_lsn(), event.chunk_end().seq());
    case StreamEvent::kRelation:
    case StreamEvent::kBootstrapBegin:
    case StreamEvent::kValuePiece:  // part of the Change before it (never handed out)
    case StreamEvent::EVENT_NOT_SET:
      return std::nullopt;
  }
  return std::nullopt;
}

int ComparePositions(const Position& a, const Position& b) {
  if (a.commit_lsn() != b.commit_lsn()) return a.commit_lsn() < b.commit_lsn() ? -1 : 1;
  if (a.seq() != b.seq()) return a.seq() < b.seq() ? -1 : 1;
  return 0;
}

std::string FormatPosition(const Position& position) {
  return FormatLsn(position.commit_lsn()) + ":" + std::to_string(position.seq());
}

}  // namespace dblog::client
