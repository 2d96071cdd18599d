// sidecar/pgoutput/decoder.cc: see decoder.h. Field order and widths follow the server's
// writer (src/backend/replication/logical/proto.c, logicalrep_write_*), all integers network
// byte order; every read goes through Reader, which checks the bytes are there first.
#include "pgoutput/decoder.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

namespace dblog::pgoutput {
namespace {

const char* TypeName(char type) {
  switch (type) {
    case 'B':
      return "Begin";
    case 'C':
      return "Commit";
    case 'O':
      return "Origin";
    case 'R':
      return "Relation";
    case 'Y':
      return "Type";
    case 'I':
      return "Insert";
    case 'U':
      return "Update";
    case 'D':
      return "Delete";
    case 'T':
      return "Truncate";
    case 'M':
      return "Message";
    case 'S':
      return "Stream Start";
    case 'E':
      return "Stream Stop";
    case 'c':
      return "Stream Commit";
    case 'A':
      return "Stream Abort";
    case 'b':
      return "Begin Prepare";
    case 'P':
      return "Prepare";
    case 'K':
      return "Commit Prepared";
    case 'r':
      return "Rollback Prepared";
    case 'p':
      return "Stream Prepare";
    default:
      return nullptr;
  }
}

std::string Printable(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x21 && u <= 0x7e) return std::string("'") + c + "'";
  static const char kHex[] = "0123456789abcdef";
  return std::string("0x") + kHex[u >> 4] + kHex[u & 15];
}

// Bounds-checked big-endian reads over one payload; errors name the message and the offset.
class Reader {
 public:
  Reader(std::string_view bytes, const char* message) : bytes_(bytes), message_(message) {}

  [[noreturn]] void Fail(const std::string& what) const {
    throw DecodeError(std::string("pgoutput ") + message_ + ": " + what + " (at byte " +
                      std::to_string(pos_) + " of " + std::to_string(bytes_.size()) + ")");
  }

  std::size_t left() const { return bytes_.size() - pos_; }

  void Need(std::size_t n, const char* field) const {
    if (left() < n) {
      Fail(std::string("truncated: ") + field + " needs " + std::to_string(n) + " bytes, " +
           std::to_string(left()) + " left");
    }
  }

  std::uint8_t U8(const char* field) {
    Need(1, field);
    return static_cast<std::uint8_t>(bytes_[pos_++]);
  }
  char Char(const char* field) { return static_cast<char>(U8(field)); }

  std::uint64_t BigEndian(std::size_t n, const char* field) {
    Need(n, field);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<std::uint8_t>(bytes_[pos_ + i]);
    pos_ += n;
    return v;
  }
  std::uint16_t U16(const char* field) { return static_cast<std::uint16_t>(BigEndian(2, field)); }
  std::uint32_t U32(const char* field) { return static_cast<std::uint32_t>(BigEndian(4, field)); }
  std::int32_t I32(const char* field) { return static_cast<std::int32_t>(U32(field)); }
  std::uint64_t U64(const char* field) { return BigEndian(8, field); }
  std::int64_t I64(const char* field) { return static_cast<std::int64_t>(U64(field)); }

  // A NUL-terminated string (pq_sendstring); the NUL must be within the payload.
  std::string String(const char* field) {
    const void* nul = pos_ < bytes_.size()
                          ? std::memchr(bytes_.data() + pos_, '\0', bytes_.size() - pos_)
                          : nullptr;
    if (nul == nullptr) Fail(std::string("truncated: ") + field + " has no terminating NUL");
    std::size_t end = static_cast<const char*>(nul) - bytes_.data();
    std::string s(bytes_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }

  // A 4-byte signed length, then that many bytes.
  std::string_view LengthPrefixed(const char* field) {
    std::int32_t n = I32(field);
    if (n < 0) Fail(std::string(field) + " length " + std::to_string(n) + " is negative");
    Need(static_cast<std::size_t>(n), field);
    std::string_view v = bytes_.substr(pos_, static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return v;
  }

  void End() const {
    if (left() != 0) Fail(std::to_string(left()) + " bytes after the message's last field");
  }

 private:
  std::string_view bytes_;
  const char* message_;
  std::size_t pos_ = 1;  // after the type byte
};

Tuple ReadTuple(Reader& in) {
  std::uint16_t natts = in.U16("TupleData column count");
  if (natts > 0x7fff) in.Fail("TupleData column count " + std::to_string(natts) + " is negative");
  Tuple tuple;
  // Each column takes at least its kind byte: never reserve more than the bytes could hold.
  tuple.reserve(std::min<std::size_t>(natts, in.left()));
  for (std::uint16_t i = 0; i < natts; ++i) {
    Datum d;
    char kind = in.Char("TupleData column kind");
    switch (kind) {
      case 'n':
        d.kind = Datum::Kind::kNull;
        break;
      case 'u':
        d.kind = Datum::Kind::kUnchanged;
        break;
      case 't':
        d.kind = Datum::Kind::kText;
        d.bytes = in.LengthPrefixed("TupleData text value");
        break;
      case 'b':
        d.kind = Datum::Kind::kBinary;
        d.bytes = in.LengthPrefixed("TupleData binary value");
        break;
      default:
        in.Fail("TupleData column " + std::to_string(i) + " has unknown kind " + Printable(kind));
    }
    tuple.push_back(d);
  }
  return tuple;
}

}  // namespace

const char* MessageName(const LogicalMessage& message) {
  return std::visit(
      [](const auto& m) -> const char* {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Begin>) return "Begin";
        if constexpr (std::is_same_v<T, Commit>) return "Commit";
        if constexpr (std::is_same_v<T, Origin>) return "Origin";
        if constexpr (std::is_same_v<T, Relation>) return "Relation";
        if constexpr (std::is_same_v<T, Type>) return "Type";
        if constexpr (std::is_same_v<T, Insert>) return "Insert";
        if constexpr (std::is_same_v<T, Update>) return "Update";
        if constexpr (std::is_same_v<T, Delete>) return "Delete";
        if constexpr (std::is_same_v<T, Truncate>) return "Truncate";
        if constexpr (std::is_same_v<T, Message>) return "Message";
        if constexpr (std::is_same_v<T, StreamStart>) return "Stream Start";
        if constexpr (std::is_same_v<T, StreamStop>) return "Stream Stop";
        if constexpr (std::is_same_v<T, StreamCommit>) return "Stream Commit";
        if constexpr (std::is_same_v<T, StreamAbort>) return "Stream Abort";
        if constexpr (std::is_same_v<T, PreparedTransaction>) return TypeName(m.type);
      },
      message);
}

Decoder::Decoder(Options options) : options_(options) {
  if (options.proto_version < kMinProtoVersion || options.proto_version > kMaxProtoVersion) {
    throw DecodeError("pgoutput: proto_version " + std::to_string(options.proto_version) +
                      " is not one this decoder reads (" + std::to_string(kMinProtoVersion) +
                      " to " + std::to_string(kMaxProtoVersion) + ")");
  }
  if (options.parallel_streaming && options.proto_version < kParallelStreamProtoVersion) {
    throw DecodeError("pgoutput: streaming 'parallel' needs proto_version " +
                      std::to_string(kParallelStreamProtoVersion));
  }
}

const Relation* Decoder::FindRelation(std::uint32_t oid) const {
  auto it = relations_.find(oid);
  return it == relations_.end() ? nullptr : &it->second;
}

LogicalMessage Decoder::Decode(std::string_view payload) {
  if (payload.empty()) throw DecodeError("pgoutput: empty message");
  const char type = payload[0];
  const char* name = TypeName(type);
  if (name == nullptr) throw DecodeError("pgoutput: unknown message type " + Printable(type));
  Reader in(payload, name);

  const bool streaming_type = type == 'S' || type == 'E' || type == 'c' || type == 'A';
  const bool two_phase_type =
      type == 'b' || type == 'P' || type == 'K' || type == 'r' || type == 'p';
  if (streaming_type && options_.proto_version < kStreamingProtoVersion) {
    in.Fail("needs proto_version " + std::to_string(kStreamingProtoVersion) + ", stream is " +
            std::to_string(options_.proto_version));
  }
  if (two_phase_type && options_.proto_version < kTwoPhaseProtoVersion) {
    in.Fail("needs proto_version " + std::to_string(kTwoPhaseProtoVersion) + ", stream is " +
            std::to_string(options_.proto_version));
  }

  // A change (and Relation, Type, a transactional Message) is inside a transaction or a
  // streamed block; inside a streamed block it starts with the xid of its (sub)transaction.
  auto change_xid = [&](const char* what) -> std::optional<std::uint32_t> {
    if (in_stream_) return in.U32("xid");
    if (!in_transaction_) in.Fail(std::string(what) + " outside a transaction");
    return std::nullopt;
  };
  auto no_block_open = [&]() {
    if (in_stream_) in.Fail("inside a streamed block (no Stream Stop yet)");
    if (in_transaction_) in.Fail("inside a transaction (no Commit yet)");
  };
  // A changed row must match its Relation's columns: the column count is the one field the
  // two share, and a consumer indexes columns by it.
  auto check_tuple = [&](std::uint32_t oid, const Tuple& tuple, const char* which) {
    auto it = relations_.find(oid);
    if (it == relations_.end()) {
      in.Fail("relation " + std::to_string(oid) + " before its Relation message");
    }
    if (tuple.size() != it->second.columns.size()) {
      in.Fail(std::string(which) + " has " + std::to_string(tuple.size()) + " columns, relation " +
              std::to_string(oid) + " has " + std::to_string(it->second.columns.size()));
    }
  };

  switch (type) {
    case 'B': {
      no_block_open();
      Begin m;
      m.final_lsn = in.U64("final_lsn");
      if (m.final_lsn == 0) in.Fail("final_lsn is 0");
      m.commit_time = in.I64("commit_time");
      m.xid = in.U32("xid");
      in.End();
      in_transaction_ = true;
      return m;
    }
    case 'C': {
      if (in_stream_) in.Fail("inside a streamed block");
      if (!in_transaction_) in.Fail("without a Begin");
      std::uint8_t flags = in.U8("flags");
      if (flags != 0) in.Fail("unknown flags " + std::to_string(flags));
      Commit m;
      m.commit_lsn = in.U64("commit_lsn");
      m.end_lsn = in.U64("end_lsn");
      m.commit_time = in.I64("commit_time");
      in.End();
      in_transaction_ = false;
      return m;
    }
    case 'O': {
      if (!in_transaction_ || in_stream_) in.Fail("outside a transaction");
      Origin m;
      m.origin_lsn = in.U64("origin_lsn");
      m.name = in.String("origin name");
      in.End();
      return m;
    }
    case 'R': {
      Relation m;
      m.xid = change_xid("Relation");
      m.oid = in.U32("relation oid");
      if (m.oid == 0) in.Fail("relation oid is 0");
      m.nspname = in.String("namespace");
      m.relname = in.String("relation name");
      if (m.relname.empty()) in.Fail("relation name is empty");
      m.replica_identity = in.Char("replica identity");
      if (m.replica_identity != 'd' && m.replica_identity != 'n' && m.replica_identity != 'f' &&
          m.replica_identity != 'i') {
        in.Fail("unknown replica identity " + Printable(m.replica_identity));
      }
      std::uint16_t natts = in.U16("column count");
      if (natts > 0x7fff) in.Fail("column count " + std::to_string(natts) + " is negative");
      // A column takes at least 1 + 1 + 4 + 4 bytes (flags, empty name's NUL, type, typmod).
      if (natts > in.left() / 10) {
        in.Fail(std::to_string(natts) + " columns cannot fit in " + std::to_string(in.left()) +
                " bytes");
      }
      m.columns.reserve(natts);
      for (std::uint16_t i = 0; i < natts; ++i) {
        Column c;
        std::uint8_t flags = in.U8("column flags");
        if (flags & ~1u)
          in.Fail("column " + std::to_string(i) + " has unknown flags " + std::to_string(flags));
        c.key = flags & 1u;
        c.name = in.String("column name");
        if (c.name.empty()) in.Fail("column " + std::to_string(i) + " has an empty name");
        c.type_oid = in.U32("column type oid");
        c.typmod = in.I32("column typmod");
        m.columns.push_back(std::move(c));
      }
      in.End();
      relations_[m.oid] = m;
      return m;
    }
    case 'Y': {
      Type m;
      m.xid = change_xid("Type");
      m.oid = in.U32("type oid");
      m.nspname = in.String("namespace");
      m.name = in.String("type name");
      in.End();
      return m;
    }
    case 'I': {
      Insert m;
      m.xid = change_xid("Insert");
      m.relation_oid = in.U32("relation oid");
      char kind = in.Char("tuple kind");
      if (kind != 'N') in.Fail("expected 'N' (new tuple), got " + Printable(kind));
      m.new_tuple = ReadTuple(in);
      in.End();
      check_tuple(m.relation_oid, m.new_tuple, "new tuple");
      return m;
    }
    case 'U': {
      Update m;
      m.xid = change_xid("Update");
      m.relation_oid = in.U32("relation oid");
      char kind = in.Char("tuple kind");
      if (kind == 'K' || kind == 'O') {
        m.old_kind = kind;
        m.old_tuple = ReadTuple(in);
        kind = in.Char("tuple kind");
      }
      if (kind != 'N') in.Fail("expected 'N' (new tuple), got " + Printable(kind));
      m.new_tuple = ReadTuple(in);
      in.End();
      if (m.old_tuple) check_tuple(m.relation_oid, *m.old_tuple, "old tuple");
      check_tuple(m.relation_oid, m.new_tuple, "new tuple");
      return m;
    }
    case 'D': {
      Delete m;
      m.xid = change_xid("Delete");
      m.relation_oid = in.U32("relation oid");
      m.old_kind = in.Char("tuple kind");
      if (m.old_kind != 'K' && m.old_kind != 'O') {
        in.Fail("expected 'K' or 'O' (old key or tuple), got " + Printable(m.old_kind));
      }
      m.old_tuple = ReadTuple(in);
      in.End();
      check_tuple(m.relation_oid, m.old_tuple, "old tuple");
      return m;
    }
    case 'T': {
      Truncate m;
      m.xid = change_xid("Truncate");
      std::int32_t n = in.I32("relation count");
      if (n < 0) in.Fail("relation count " + std::to_string(n) + " is negative");
      std::uint8_t flags = in.U8("flags");
      if (flags & ~3u) in.Fail("unknown flags " + std::to_string(flags));
      m.cascade = flags & 1u;
      m.restart_seqs = flags & 2u;
      if (static_cast<std::size_t>(n) != in.left() / 4 || in.left() % 4 != 0) {
        in.Fail(std::to_string(n) + " relation oids, " + std::to_string(in.left()) + " bytes");
      }
      m.relation_oids.reserve(static_cast<std::size_t>(n));
      for (std::int32_t i = 0; i < n; ++i) m.relation_oids.push_back(in.U32("relation oid"));
      in.End();
      return m;
    }
    case 'M': {
      Message m;
      // A non-transactional message comes outside any transaction (or, decoded while a
      // transaction is open, between its changes): only inside a streamed block has it an xid.
      if (in_stream_) m.xid = in.U32("xid");
      std::uint8_t flags = in.U8("flags");
      if (flags & ~1u) in.Fail("unknown flags " + std::to_string(flags));
      m.transactional = flags & 1u;
      if (m.transactional && !in_stream_ && !in_transaction_) {
        in.Fail("transactional message outside a transaction");
      }
      m.lsn = in.U64("lsn");
      m.prefix = in.String("prefix");
      m.content = in.LengthPrefixed("content");
      in.End();
      return m;
    }
    case 'S': {
      if (in_stream_) in.Fail("inside a streamed block (no Stream Stop yet)");
      if (in_transaction_) in.Fail("inside a transaction (no Commit yet)");
      StreamStart m;
      m.xid = in.U32("xid");
      if (m.xid == 0) in.Fail("xid is 0");
      std::uint8_t first = in.U8("first_segment");
      if (first > 1) in.Fail("first_segment is " + std::to_string(first));
      m.first_segment = first == 1;
      in.End();
      in_stream_ = true;
      stream_xid_ = m.xid;
      return m;
    }
    case 'E': {
      if (!in_stream_) in.Fail("outside a streamed block");
      in.End();
      in_stream_ = false;
      stream_xid_.reset();
      return StreamStop{};
    }
    case 'c': {
      no_block_open();
      StreamCommit m;
      m.xid = in.U32("xid");
      std::uint8_t flags = in.U8("flags");
      if (flags != 0) in.Fail("unknown flags " + std::to_string(flags));
      m.commit_lsn = in.U64("commit_lsn");
      m.end_lsn = in.U64("end_lsn");
      m.commit_time = in.I64("commit_time");
      in.End();
      return m;
    }
    case 'A': {
      no_block_open();
      StreamAbort m;
      m.xid = in.U32("xid");
      m.subxid = in.U32("subxid");
      if (options_.parallel_streaming) {
        m.abort_lsn = in.U64("abort_lsn");
        m.abort_time = in.I64("abort_time");
      }
      in.End();
      return m;
    }
    case 'b':
    case 'P':
    case 'K':
    case 'r':
    case 'p': {
      if (type == 'P') {
        if (in_stream_ || !in_transaction_) in.Fail("without a Begin Prepare");
      } else {
        no_block_open();
      }
      PreparedTransaction m;
      m.type = type;
      if (type != 'b') {
        std::uint8_t flags = in.U8("flags");
        if (flags != 0) in.Fail("unknown flags " + std::to_string(flags));
      }
      m.lsn = in.U64("lsn");
      m.end_lsn = in.U64("end_lsn");
      m.time = in.I64("time");
      if (type == 'r') m.rollback_time = in.I64("rollback_time");
      m.xid = in.U32("xid");
      m.gid = in.String("gid");
      in.End();
      if (type == 'b') in_transaction_ = true;
      if (type == 'P') in_transaction_ = false;
      return m;
    }
  }
  in.Fail("unhandled message type");  // unreachable: TypeName knows exactly the cases above
}

}  // namespace dblog::pgoutput
