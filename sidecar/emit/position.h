// sidecar/emit/position.h: a stream position (commit_lsn, seq), the total order of everything
// dblogd emits (consumer.proto's Position, as a value type that compares).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <tuple>

#include "common/lsn.h"
#include "dblog/v1/consumer.pb.h"

namespace dblog::emit {

struct Position {
  std::uint64_t commit_lsn = 0;
  std::uint32_t seq = 0;

  static Position FromProto(const dblog::v1::Position& p) { return {p.commit_lsn(), p.seq()}; }
  dblog::v1::Position ToProto() const {
    dblog::v1::Position p;
    p.set_commit_lsn(commit_lsn);
    p.set_seq(seq);
    return p;
  }

  // "16/B374D848:3"
  std::string ToString() const { return common::FormatLsn(commit_lsn) + ":" + std::to_string(seq); }

  friend bool operator<(const Position& a, const Position& b) {
    return std::tie(a.commit_lsn, a.seq) < std::tie(b.commit_lsn, b.seq);
  }
  friend bool operator==(const Position& a, const Position& b) {
    return a.commit_lsn == b.commit_lsn && a.seq == b.seq;
  }
  friend bool operator!=(const Position& a, const Position& b) { return !(a == b); }
  friend bool operator<=(const Position& a, const Position& b) { return !(b < a); }
  friend bool operator>(const Position& a, const Position& b) { return b < a; }
  friend bool operator>=(const Position& a, const Position& b) { return !(a < b); }
};

}  // namespace dblog::emit
