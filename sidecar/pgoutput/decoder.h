// sidecar/pgoutput/decoder.h: the bytes of PostgreSQL's built-in pgoutput plugin (the logical
// replication protocol, "Logical Replication Message Formats" in the server's documentation),
// as they arrive in the XLogData payloads of
//   START_REPLICATION SLOT s LOGICAL l (proto_version 'N', publication_names '...',
//                                       messages 'true', binary 'true'|'false', streaming ...)
// Owns: parsing one payload into one message (Begin, Commit, Origin, Relation, Type, Insert,
// Update, Delete, Truncate, Message; protocol 2's Stream Start/Stop/Commit/Abort, protocol 3's
// two-phase messages, protocol 4's parallel-apply abort fields), and the framing rules the
// stream must keep (a change only inside a transaction or a streamed block, the xid field only
// inside a streamed block, every change of a relation announced by a Relation message with the
// same column count). Every byte is untrusted: a length, count or flag the format does not
// allow, a truncated or over-long message, an unknown message type is a DecodeError, never a
// crash or an out-of-bounds read.
// Must not: do I/O, call libpq, or interpret values (text and binary column values are handed
// on as the server's bytes; turning them into dblog Values is the converter's job, issue 23
// item 3). Pure: tested exhaustively in tests/cpp/pgoutput/ and fuzzed in tests/fuzz/.
//
// Not yet used by dblogd (issue 23: `dblogd --source-plugin pgoutput` does not exist yet).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

namespace dblog::pgoutput {

// Bytes that are not a pgoutput message in this stream's state. what() names the message, the
// field and the byte offset.
class DecodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Protocol versions pgoutput accepts, by server major (checked against the servers in
// tests/cpp/pgoutput/pgoutput_server_test.cc; docs/pgoutput.md has the table).
inline constexpr int kMinProtoVersion = 1;
inline constexpr int kStreamingProtoVersion = 2;       // 14+: streaming of in-progress transactions
inline constexpr int kTwoPhaseProtoVersion = 3;        // 15+: two_phase
inline constexpr int kParallelStreamProtoVersion = 4;  // 16+: streaming 'parallel'
inline constexpr int kMaxProtoVersion = 4;

struct Begin {
  std::uint64_t final_lsn = 0;   // the commit record's LSN (never 0)
  std::int64_t commit_time = 0;  // microseconds since 2000-01-01 00:00 UTC
  std::uint32_t xid = 0;
};

struct Commit {
  std::uint64_t commit_lsn = 0;
  std::uint64_t end_lsn = 0;  // the end of the commit record
  std::int64_t commit_time = 0;
};

struct Origin {
  std::uint64_t origin_lsn = 0;  // the commit LSN on the origin server
  std::string name;
};

struct Column {
  bool key = false;  // part of the replica identity (flags bit 0)
  std::string name;
  std::uint32_t type_oid = 0;
  std::int32_t typmod = -1;
};

struct Relation {
  std::optional<std::uint32_t> xid;  // present inside a streamed block
  std::uint32_t oid = 0;
  std::string nspname;  // "" for pg_catalog, as pgoutput writes it
  std::string relname;
  char replica_identity = 'd';  // 'd' default, 'n' nothing, 'f' full, 'i' index
  std::vector<Column> columns;  // the published columns, in attnum order (no attnum)
};

// A user-defined type's name, sent before the first Relation that uses it.
struct Type {
  std::optional<std::uint32_t> xid;
  std::uint32_t oid = 0;
  std::string nspname;
  std::string name;
};

// One column of a TupleData. `bytes` (text: the type's output function's text, no NUL;
// binary: its send function's bytes) points into the decoded payload and is valid only as
// long as those bytes are.
struct Datum {
  enum class Kind : char { kNull = 'n', kUnchanged = 'u', kText = 't', kBinary = 'b' };
  Kind kind = Kind::kNull;
  std::string_view bytes;
};

using Tuple = std::vector<Datum>;

struct Insert {
  std::optional<std::uint32_t> xid;
  std::uint32_t relation_oid = 0;
  Tuple new_tuple;
};

struct Update {
  std::optional<std::uint32_t> xid;
  std::uint32_t relation_oid = 0;
  // 'K': the old replica identity key (the key changed); 'O': the whole old row (REPLICA
  // IDENTITY FULL); 0: none sent (the key did not change).
  char old_kind = 0;
  std::optional<Tuple> old_tuple;
  Tuple new_tuple;
};

struct Delete {
  std::optional<std::uint32_t> xid;
  std::uint32_t relation_oid = 0;
  char old_kind = 'K';  // 'K' key columns only (others null), 'O' the whole row
  Tuple old_tuple;
};

struct Truncate {
  std::optional<std::uint32_t> xid;
  bool cascade = false;
  bool restart_seqs = false;
  std::vector<std::uint32_t> relation_oids;
};

// pg_logical_emit_message, with messages 'true'.
struct Message {
  std::optional<std::uint32_t> xid;
  bool transactional = false;
  std::uint64_t lsn = 0;
  std::string prefix;
  std::string_view content;  // into the payload, as Datum::bytes
};

struct StreamStart {
  std::uint32_t xid = 0;
  bool first_segment = false;
};

struct StreamStop {};

struct StreamCommit {
  std::uint32_t xid = 0;
  std::uint64_t commit_lsn = 0;
  std::uint64_t end_lsn = 0;
  std::int64_t commit_time = 0;
};

struct StreamAbort {
  std::uint32_t xid = 0;
  std::uint32_t subxid = 0;  // == xid: the whole transaction; else that subtransaction
  // protocol 4 with streaming 'parallel' only
  std::optional<std::uint64_t> abort_lsn;
  std::optional<std::int64_t> abort_time;
};

// Two-phase (protocol 3, two_phase 'true'): BeginPrepare 'b', Prepare 'P', CommitPrepared 'K',
// RollbackPrepared 'r', StreamPrepare 'p'.
struct PreparedTransaction {
  char type = 'P';
  std::uint64_t lsn = 0;           // b, P, p: prepare_lsn; K: commit_lsn; r: prepare_end_lsn
  std::uint64_t end_lsn = 0;       // r: rollback_end_lsn
  std::int64_t time = 0;           // b, P, p: prepare_time; K: commit_time; r: prepare_time
  std::int64_t rollback_time = 0;  // r only
  std::uint32_t xid = 0;
  std::string gid;
};

using LogicalMessage =
    std::variant<Begin, Commit, Origin, Relation, Type, Insert, Update, Delete, Truncate, Message,
                 StreamStart, StreamStop, StreamCommit, StreamAbort, PreparedTransaction>;

// The message's name as the documentation spells it ("Begin", "Stream Abort", ...).
const char* MessageName(const LogicalMessage& message);

class Decoder {
 public:
  struct Options {
    int proto_version = kMinProtoVersion;
    // streaming 'parallel' (protocol 4): Stream Abort carries abort_lsn and abort_time.
    bool parallel_streaming = false;
  };

  // Throws DecodeError for a proto_version outside [kMinProtoVersion, kMaxProtoVersion] or
  // parallel_streaming below protocol 4.
  explicit Decoder(Options options);

  // One XLogData payload. Throws DecodeError; on error the decoder's state is unchanged (the
  // stream is unusable anyway: the caller should stop it).
  LogicalMessage Decode(std::string_view payload);

  // The latest Relation message for `oid`, or null.
  const Relation* FindRelation(std::uint32_t oid) const;
  bool in_transaction() const { return in_transaction_; }
  bool in_stream() const { return in_stream_; }

 private:
  Options options_;
  bool in_transaction_ = false;  // between Begin (or Begin Prepare) and Commit (or Prepare)
  bool in_stream_ = false;       // between Stream Start and Stream Stop
  std::optional<std::uint32_t> stream_xid_;
  std::unordered_map<std::uint32_t, Relation> relations_;
};

}  // namespace dblog::pgoutput
