// client/position.h: stream positions as a consumer sees them: which events carry one
// (PositionOf), how they order (ComparePositions) and how they print (FormatPosition).
// Owns: position arithmetic only. No I/O, no sockets, no JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/lsn.h"
#include "dblog/v1/consumer.pb.h"

namespace dblog::client {

// The event's (commit_lsn, seq), following consumer.proto's StreamEvent comment: Begin is
// (commit_lsn, 0); Change, Truncate, Message, Commit, BootstrapEnd, ChunkBegin and ChunkEnd
// carry their own (BootstrapEnd: its commit_lsn, consistent_point - 1, like the copied rows).
// Relation and BootstrapBegin have none, and neither has a non-transactional Message (change.proto
// leaves its commit_lsn and seq unset), nor an empty StreamEvent.
std::optional<dblog::v1::Position> PositionOf(const dblog::v1::StreamEvent& event);

// <0, 0, >0 as a is before, equal to or after b: lexicographic on (commit_lsn, seq).
int ComparePositions(const dblog::v1::Position& a, const dblog::v1::Position& b);

dblog::v1::Position MakePosition(std::uint64_t commit_lsn, std::uint32_t seq);

// An LSN as PostgreSQL prints it (common/lsn.h), e.g. "0/16B3748".
using common::FormatLsn;

// "0/16B3748:3", for messages and logs.
std::string FormatPosition(const dblog::v1::Position& position);

}  // namespace dblog::client
