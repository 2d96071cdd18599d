// sidecar/emit/ack_tracker.h: turns a consumer's acknowledgements into the LSN its slot may be
// confirmed to (confirmed_flush_lsn). Pure logic: the owner sends the standby status update.
//
// The slot may forget WAL only up to what the consumer has durably applied: the end_lsn of the
// last emitted commit at or before the consumer's ack. When everything emitted is acknowledged
// and no transaction is open, it may go further, to the WAL position decoding has reached
// (OnIdle): otherwise a consumer whose tables are quiet would hold back the server's WAL forever.
//
// Memory: one entry (16 bytes of position + 8 of LSN) per emitted point that is not yet
// acknowledged: each Commit, the BootstrapEnd, each non-transactional Message. An ack frees every
// entry at or before it. The owner bounds the total by bounding how far the stream may run ahead
// of acks; nothing here grows with the size of a transaction.
#pragma once

#include <cstdint>
#include <deque>
#include <stdexcept>

#include "emit/position.h"

namespace dblog::emit {

// A consumer broke the ack rules (an ack going backwards). The owner reports it to the client
// (Error.PROTOCOL_VIOLATION) and closes the connection.
class AckError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AckTracker {
 public:
  // confirmed_lsn: the slot's confirmed_flush_lsn when streaming starts (never goes below it).
  // last_ack: the consumer's resume position (Hello.resume_after); acks before it go backwards.
  explicit AckTracker(std::uint64_t confirmed_lsn, Position last_ack = {})
      : confirmable_(confirmed_lsn), last_ack_(last_ack) {}

  // An acknowledgeable point was sent: acking `position` lets the slot confirm `lsn` (a
  // Commit's end_lsn). Positions must increase (std::logic_error otherwise). Emitter calls it.
  void OnCommitEmitted(Position position, std::uint64_t lsn);

  // The consumer acknowledged everything at or before `ack`. Returns confirmable_lsn().
  // Throws AckError when `ack` is before an earlier ack. An ack beyond what was sent only
  // covers what was sent before it (check it against Emitter::last_position() to refuse it).
  std::uint64_t OnAck(Position ack);

  // Decoding has handed everything up to `wal_end` to the emitter (the walsender's keepalive
  // position, after every message before it was processed). With every emitted point
  // acknowledged and no transaction open (Emitter::in_transaction()), that WAL holds nothing
  // the consumer still needs. Returns confirmable_lsn().
  std::uint64_t OnIdle(std::uint64_t wal_end, bool in_transaction);

  // The LSN the slot may be confirmed to; never decreases.
  std::uint64_t confirmable_lsn() const { return confirmable_; }
  Position last_ack() const { return last_ack_; }
  std::size_t unacknowledged() const { return pending_.size(); }

 private:
  struct Pending {
    Position position;
    std::uint64_t lsn;
  };

  void Confirm(std::uint64_t lsn) {
    if (lsn > confirmable_) confirmable_ = lsn;
  }

  std::uint64_t confirmable_;
  Position last_ack_;
  std::deque<Pending> pending_;  // in position order
};

}  // namespace dblog::emit
