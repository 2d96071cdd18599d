// tests/cpp/pgoutput/pgoutput_decoder_test.cc: the pgoutput decoder on bytes built here (no
// server): every message type's fields, every proper prefix and every one-byte extension of each
// message refused, lengths, counts, flags and kinds the format does not allow refused, and the
// framing rules (xid only inside a streamed block, a change only inside a transaction, a change
// only of an announced relation with its column count). pgoutput_server_test.cc checks the same
// decoder against real servers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pgoutput/decoder.h"

namespace {

namespace po = dblog::pgoutput;
using po::DecodeError;
using po::Decoder;

// Big-endian message builder.
struct Bytes {
  std::string s;
  Bytes& c(char v) {
    s.push_back(v);
    return *this;
  }
  Bytes& u16(std::uint16_t v) { return be(v, 2); }
  Bytes& u32(std::uint32_t v) { return be(v, 4); }
  Bytes& u64(std::uint64_t v) { return be(v, 8); }
  Bytes& str(const std::string& v) {
    s += v;
    s.push_back('\0');
    return *this;
  }
  Bytes& raw(const std::string& v) {
    s += v;
    return *this;
  }
  Bytes& be(std::uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }
};

std::string BeginMsg(std::uint32_t xid = 700) {
  return Bytes().c('B').u64(0x1000).u64(12345).u32(xid).s;
}
std::string CommitMsg() { return Bytes().c('C').c(0).u64(0x1000).u64(0x1100).u64(12345).s; }
// items(id int4 key, name text)
std::string RelationMsg(bool streamed = false) {
  Bytes b;
  b.c('R');
  if (streamed) b.u32(900);
  return b.u32(16384)
      .str("public")
      .str("items")
      .c('d')
      .u16(2)
      .c(1)
      .str("id")
      .u32(23)
      .u32(0xffffffff)
      .c(0)
      .str("name")
      .u32(25)
      .u32(0xffffffff)
      .s;
}
std::string Tuple2(const std::string& id, char second_kind, const std::string& second = "") {
  Bytes b;
  b.u16(2).c('t').u32(static_cast<std::uint32_t>(id.size())).raw(id).c(second_kind);
  if (second_kind == 't' || second_kind == 'b') {
    b.u32(static_cast<std::uint32_t>(second.size())).raw(second);
  }
  return b.s;
}
std::string InsertMsg(bool streamed = false) {
  Bytes b;
  b.c('I');
  if (streamed) b.u32(901);
  return b.u32(16384).c('N').raw(Tuple2("1", 'b', std::string("\x00\x01", 2))).s;
}

Decoder InTransaction(int proto = 4, bool parallel = false) {
  Decoder d({proto, parallel});
  d.Decode(BeginMsg());
  d.Decode(RelationMsg());
  return d;
}

TEST(PgoutputDecoder, BeginCommitOriginRelation) {
  Decoder d({1, false});
  auto begin = std::get<po::Begin>(d.Decode(BeginMsg(42)));
  EXPECT_EQ(begin.final_lsn, 0x1000u);
  EXPECT_EQ(begin.commit_time, 12345);
  EXPECT_EQ(begin.xid, 42u);
  EXPECT_TRUE(d.in_transaction());
  auto origin = std::get<po::Origin>(d.Decode(Bytes().c('O').u64(77).str("node_a").s));
  EXPECT_EQ(origin.origin_lsn, 77u);
  EXPECT_EQ(origin.name, "node_a");
  auto rel = std::get<po::Relation>(d.Decode(RelationMsg()));
  EXPECT_FALSE(rel.xid);
  EXPECT_EQ(rel.oid, 16384u);
  EXPECT_EQ(rel.nspname, "public");
  EXPECT_EQ(rel.relname, "items");
  ASSERT_EQ(rel.columns.size(), 2u);
  EXPECT_TRUE(rel.columns[0].key);
  EXPECT_EQ(rel.columns[1].name, "name");
  EXPECT_EQ(rel.columns[1].type_oid, 25u);
  EXPECT_EQ(rel.columns[1].typmod, -1);
  ASSERT_NE(d.FindRelation(16384), nullptr);
  auto commit = std::get<po::Commit>(d.Decode(CommitMsg()));
  EXPECT_EQ(commit.commit_lsn, 0x1000u);
  EXPECT_EQ(commit.end_lsn, 0x1100u);
  EXPECT_FALSE(d.in_transaction());
}

TEST(PgoutputDecoder, ChangesAndTupleKinds) {
  Decoder d = InTransaction();
  const std::string insert = InsertMsg();  // Datum bytes point into it
  auto ins = std::get<po::Insert>(d.Decode(insert));
  ASSERT_EQ(ins.new_tuple.size(), 2u);
  EXPECT_EQ(ins.new_tuple[0].kind, po::Datum::Kind::kText);
  EXPECT_EQ(ins.new_tuple[0].bytes, "1");
  EXPECT_EQ(ins.new_tuple[1].kind, po::Datum::Kind::kBinary);
  EXPECT_EQ(ins.new_tuple[1].bytes, std::string("\x00\x01", 2));

  auto up = std::get<po::Update>(d.Decode(
      Bytes().c('U').u32(16384).c('K').raw(Tuple2("1", 'n')).c('N').raw(Tuple2("2", 'u')).s));
  EXPECT_EQ(up.old_kind, 'K');
  ASSERT_TRUE(up.old_tuple);
  EXPECT_EQ((*up.old_tuple)[1].kind, po::Datum::Kind::kNull);
  EXPECT_EQ(up.new_tuple[1].kind, po::Datum::Kind::kUnchanged);
  auto plain =
      std::get<po::Update>(d.Decode(Bytes().c('U').u32(16384).c('N').raw(Tuple2("2", 't', "x")).s));
  EXPECT_EQ(plain.old_kind, 0);
  EXPECT_FALSE(plain.old_tuple);
  auto del =
      std::get<po::Delete>(d.Decode(Bytes().c('D').u32(16384).c('O').raw(Tuple2("2", 't', "x")).s));
  EXPECT_EQ(del.old_kind, 'O');
  auto tr = std::get<po::Truncate>(d.Decode(Bytes().c('T').u32(2).c(3).u32(1).u32(2).s));
  EXPECT_TRUE(tr.cascade);
  EXPECT_TRUE(tr.restart_seqs);
  EXPECT_EQ(tr.relation_oids, (std::vector<std::uint32_t>{1, 2}));
  auto ty = std::get<po::Type>(d.Decode(Bytes().c('Y').u32(5000).str("public").str("mood").s));
  EXPECT_EQ(ty.name, "mood");
  const std::string message =
      Bytes().c('M').c(1).u64(99).str("p").u32(3).raw(std::string("a\0b", 3)).s;
  auto msg = std::get<po::Message>(d.Decode(message));
  EXPECT_TRUE(msg.transactional);
  EXPECT_EQ(msg.content, std::string("a\0b", 3));
}

TEST(PgoutputDecoder, StreamedBlocksCarryXids) {
  Decoder d({2, false});
  auto start = std::get<po::StreamStart>(d.Decode(Bytes().c('S').u32(900).c(1).s));
  EXPECT_TRUE(start.first_segment);
  EXPECT_TRUE(d.in_stream());
  EXPECT_EQ(std::get<po::Relation>(d.Decode(RelationMsg(true))).xid, 900u);
  EXPECT_EQ(std::get<po::Insert>(d.Decode(InsertMsg(true))).xid, 901u);
  EXPECT_THROW(d.Decode(InsertMsg(false)), DecodeError) << "no xid: 4 bytes short";
  EXPECT_THROW(d.Decode(BeginMsg()), DecodeError) << "Begin inside a streamed block";
  EXPECT_THROW(d.Decode(Bytes().c('c').u32(900).c(0).u64(1).u64(2).u64(3).s), DecodeError);
  d.Decode(Bytes().c('E').s);
  EXPECT_THROW(d.Decode(Bytes().c('E').s), DecodeError) << "Stream Stop twice";
  auto sc =
      std::get<po::StreamCommit>(d.Decode(Bytes().c('c').u32(900).c(0).u64(1).u64(2).u64(3).s));
  EXPECT_EQ(sc.commit_lsn, 1u);
  auto sa = std::get<po::StreamAbort>(d.Decode(Bytes().c('A').u32(900).u32(901).s));
  EXPECT_EQ(sa.subxid, 901u);
  EXPECT_FALSE(sa.abort_lsn);

  Decoder parallel({4, true});
  auto pa = std::get<po::StreamAbort>(
      parallel.Decode(Bytes().c('A').u32(900).u32(900).u64(0x55).u64(66).s));
  EXPECT_EQ(pa.abort_lsn, 0x55u);
  EXPECT_EQ(pa.abort_time, 66);
  EXPECT_THROW(parallel.Decode(Bytes().c('A').u32(900).u32(900).s), DecodeError);
}

TEST(PgoutputDecoder, ProtocolVersionsGateTheirMessages) {
  Decoder v1({1, false});
  EXPECT_THROW(v1.Decode(Bytes().c('S').u32(900).c(1).s), DecodeError);
  Decoder v2({2, false});
  EXPECT_THROW(v2.Decode(Bytes().c('b').u64(1).u64(2).u64(3).u32(4).str("g").s), DecodeError);
  Decoder v3({3, false});
  auto bp = std::get<po::PreparedTransaction>(
      v3.Decode(Bytes().c('b').u64(1).u64(2).u64(3).u32(4).str("g").s));
  EXPECT_EQ(bp.gid, "g");
  EXPECT_TRUE(v3.in_transaction());
  v3.Decode(Bytes().c('P').c(0).u64(1).u64(2).u64(3).u32(4).str("g").s);
  EXPECT_FALSE(v3.in_transaction());
  auto rp = std::get<po::PreparedTransaction>(
      v3.Decode(Bytes().c('r').c(0).u64(1).u64(2).u64(3).u64(5).u32(4).str("g").s));
  EXPECT_EQ(rp.rollback_time, 5);
  EXPECT_THROW(Decoder({0, false}), DecodeError);
  EXPECT_THROW(Decoder({5, false}), DecodeError);
  EXPECT_THROW(Decoder({3, true}), DecodeError);
}

TEST(PgoutputDecoder, FramingRules) {
  Decoder d({4, false});
  EXPECT_THROW(d.Decode(CommitMsg()), DecodeError) << "Commit without Begin";
  EXPECT_THROW(d.Decode(RelationMsg()), DecodeError) << "Relation outside a transaction";
  EXPECT_THROW(d.Decode(Bytes().c('M').c(1).u64(1).str("p").u32(0).s), DecodeError)
      << "transactional message outside a transaction";
  d.Decode(Bytes().c('M').c(0).u64(1).str("p").u32(0).s);  // non-transactional: fine
  d.Decode(BeginMsg());
  EXPECT_THROW(d.Decode(BeginMsg()), DecodeError) << "Begin twice";
  EXPECT_THROW(d.Decode(InsertMsg()), DecodeError) << "change before its Relation";
  d.Decode(RelationMsg());
  EXPECT_THROW(d.Decode(Bytes().c('I').u32(16384).c('N').u16(1).c('n').s), DecodeError)
      << "column count differs from the Relation's";
  d.Decode(InsertMsg());
}

TEST(PgoutputDecoder, HostileFieldsAreRefused) {
  auto refused = [](const std::string& bytes) {
    Decoder d = InTransaction();
    EXPECT_THROW(d.Decode(bytes), DecodeError) << testing::PrintToString(bytes);
  };
  refused("");
  refused("Z");
  refused("\xff");
  refused(Bytes().c('I').u32(16384).c('X').raw(Tuple2("1", 'n')).s);             // not 'N'
  refused(Bytes().c('I').u32(16384).c('N').u16(2).c('t').u32(0x80000000).s);     // negative length
  refused(Bytes().c('I').u32(16384).c('N').u16(2).c('t').u32(1000).raw("1").s);  // past the end
  refused(Bytes().c('I').u32(16384).c('N').u16(2).c('q').s);                     // unknown kind
  refused(Bytes().c('I').u32(16384).c('N').u16(0xffff).s);                       // negative count
  refused(Bytes().c('D').u32(16384).c('N').raw(Tuple2("1", 'n')).s);      // delete needs K or O
  refused(Bytes().c('T').u32(0x7fffffff).c(0).s);                         // more oids than bytes
  refused(Bytes().c('T').u32(0xffffffff).c(0).s);                         // negative count
  refused(Bytes().c('T').u32(1).c(4).u32(1).s);                           // unknown flag
  refused(Bytes().c('C').c(1).u64(1).u64(2).u64(3).s);                    // commit flags
  refused(Bytes().c('R').u32(1).str("s").str("t").c('x').u16(0).s);       // replica identity
  refused(Bytes().c('R').u32(1).str("s").str("t").c('d').u16(0x7fff).s);  // columns can't fit
  refused(Bytes().c('R').u32(1).str("s").raw("t").s);                     // no NUL
  refused(Bytes().c('R').u32(1).str("s").str("t").c('d').u16(1).c(2).str("a").u32(1).u32(1).s);
  refused(Bytes().c('M').c(0).u64(1).str("p").u32(5).raw("abc").s);  // content past the end
  refused(Bytes().c('S').u32(900).c(2).s);                           // first_segment not 0/1
  refused(Bytes().c('B').u64(0).u64(1).u32(2).s);                    // Begin inside a transaction
}

// Every proper prefix of a valid message, and the message with a byte more, is refused; the
// decoder's state is unchanged by a refusal.
TEST(PgoutputDecoder, EveryTruncationAndExtensionIsRefused) {
  struct Case {
    std::string bytes;
    bool in_txn;
    bool in_stream;
  };
  std::vector<Case> cases = {
      {BeginMsg(), false, false},
      {CommitMsg(), true, false},
      {Bytes().c('O').u64(77).str("node_a").s, true, false},
      {RelationMsg(), true, false},
      {RelationMsg(true), false, true},
      {InsertMsg(), true, false},
      {InsertMsg(true), false, true},
      {Bytes().c('U').u32(16384).c('O').raw(Tuple2("1", 'n')).c('N').raw(Tuple2("2", 'u')).s, true,
       false},
      {Bytes().c('D').u32(16384).c('K').raw(Tuple2("1", 'n')).s, true, false},
      {Bytes().c('T').u32(2).c(1).u32(1).u32(2).s, true, false},
      {Bytes().c('Y').u32(5000).str("public").str("mood").s, true, false},
      {Bytes().c('M').c(0).u64(1).str("pre").u32(2).raw("ab").s, false, false},
      {Bytes().c('S').u32(900).c(0).s, false, false},
      {Bytes().c('c').u32(900).c(0).u64(1).u64(2).u64(3).s, false, false},
      {Bytes().c('A').u32(900).u32(901).u64(5).u64(6).s, false, false},
      {Bytes().c('K').c(0).u64(1).u64(2).u64(3).u32(4).str("gid").s, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::PrintToString(c.bytes));
    auto fresh = [&] {
      Decoder d({4, true});
      if (c.in_txn) d.Decode(BeginMsg());
      if (c.in_stream) d.Decode(Bytes().c('S').u32(900).c(1).s);
      if (c.in_txn || c.in_stream) d.Decode(RelationMsg(c.in_stream));
      return d;
    };
    Decoder whole = fresh();
    EXPECT_NO_THROW(whole.Decode(c.bytes));
    for (std::size_t n = 0; n < c.bytes.size(); ++n) {
      Decoder d = fresh();
      EXPECT_THROW(d.Decode(c.bytes.substr(0, n)), DecodeError) << "prefix of " << n;
      EXPECT_EQ(d.in_transaction(), c.in_txn);
      EXPECT_EQ(d.in_stream(), c.in_stream);
    }
    Decoder longer = fresh();
    EXPECT_THROW(longer.Decode(c.bytes + '\0'), DecodeError) << "one byte more";
  }
}

TEST(PgoutputDecoder, ErrorsNameTheMessageAndTheOffset) {
  Decoder d = InTransaction();
  try {
    d.Decode(Bytes().c('I').u32(16384).c('N').u16(2).c('t').u32(1000).raw("1").s);
    FAIL();
  } catch (const DecodeError& e) {
    EXPECT_STREQ(e.what(),
                 "pgoutput Insert: truncated: TupleData text value needs 1000 bytes, 1 left (at "
                 "byte 13 of 14)");
  }
}

}  // namespace
