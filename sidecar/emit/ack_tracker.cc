// sidecar/emit/ack_tracker.cc: acknowledgements to confirmable LSN (see ack_tracker.h).
#include "emit/ack_tracker.h"

namespace dblog::emit {

void AckTracker::OnCommitEmitted(Position position, std::uint64_t lsn) {
  if (!pending_.empty() && position <= pending_.back().position)
    throw std::logic_error("dblog ack tracker: commit at " + position.ToString() +
                           " is not after " + pending_.back().position.ToString());
  // Recorded even when an earlier ack already lies beyond it: only an ack that arrives after
  // the point was sent can mean the consumer has it.
  pending_.push_back({position, lsn});
}

std::uint64_t AckTracker::OnAck(Position ack) {
  if (ack < last_ack_)
    throw AckError("ack of " + ack.ToString() + " goes back before the earlier ack of " +
                   last_ack_.ToString());
  last_ack_ = ack;
  while (!pending_.empty() && pending_.front().position <= ack) {
    Confirm(pending_.front().lsn);
    pending_.pop_front();
  }
  return confirmable_;
}

std::uint64_t AckTracker::OnIdle(std::uint64_t wal_end, bool in_transaction) {
  if (!in_transaction && pending_.empty()) Confirm(wal_end);
  return confirmable_;
}

}  // namespace dblog::emit
