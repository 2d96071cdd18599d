// tests/cpp/pg/pg_protocol_test.cc: the pure parts of sidecar/pg, no database: replication
// CopyData parsing (crafted, truncated, over-long and unknown messages), the standby status
// update's bytes, the protocol clock, LSN text format and slot name validation.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <variant>

#include "pg/replication_stream.h"
#include "pg/slot.h"

namespace dblog::pg {
namespace {

void AppendBE64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}

std::string XLogDataBytes(std::uint64_t start, std::uint64_t end, std::int64_t time,
                          const std::string& payload) {
  std::string out = "w";
  AppendBE64(out, start);
  AppendBE64(out, end);
  AppendBE64(out, static_cast<std::uint64_t>(time));
  return out + payload;
}

std::string KeepaliveBytes(std::uint64_t end, std::int64_t time, char reply) {
  std::string out = "k";
  AppendBE64(out, end);
  AppendBE64(out, static_cast<std::uint64_t>(time));
  out.push_back(reply);
  return out;
}

TEST(ParseCopyMessage, XLogData) {
  const std::string payload("\x0a\x00\xff payload", 11);
  const std::string bytes =
      XLogDataBytes(0x0000001600000001ull, 0x16B374D848ull, 765432101234567, payload);
  ASSERT_EQ(bytes.size(), kXLogDataHeaderSize + payload.size());
  const CopyMessage msg = ParseCopyMessage(bytes);
  ASSERT_TRUE(std::holds_alternative<XLogData>(msg));
  const auto& data = std::get<XLogData>(msg);
  EXPECT_EQ(data.wal_start, 0x0000001600000001ull);
  EXPECT_EQ(data.wal_end, 0x16B374D848ull);
  EXPECT_EQ(data.send_time, 765432101234567);
  EXPECT_EQ(data.payload, payload);
  EXPECT_EQ(data.payload.data(), bytes.data() + kXLogDataHeaderSize) << "a view, not a copy";
}

TEST(ParseCopyMessage, XLogDataWithEmptyPayloadAndHighBits) {
  const auto msg = ParseCopyMessage(XLogDataBytes(~0ull, 0x8000000000000000ull, -1, ""));
  const auto& data = std::get<XLogData>(msg);
  EXPECT_EQ(data.wal_start, ~0ull);
  EXPECT_EQ(data.wal_end, 0x8000000000000000ull);
  EXPECT_EQ(data.send_time, -1);
  EXPECT_TRUE(data.payload.empty());
}

TEST(ParseCopyMessage, Keepalive) {
  for (char reply : {'\0', '\1'}) {
    const auto msg = ParseCopyMessage(KeepaliveBytes(0x1ABCDEF0123ull, 42, reply));
    ASSERT_TRUE(std::holds_alternative<Keepalive>(msg));
    const auto& k = std::get<Keepalive>(msg);
    EXPECT_EQ(k.wal_end, 0x1ABCDEF0123ull);
    EXPECT_EQ(k.send_time, 42);
    EXPECT_EQ(k.reply_requested, reply != 0);
  }
}

TEST(ParseCopyMessage, EveryTruncationIsAnError) {
  const std::string xlog = XLogDataBytes(1, 2, 3, "");
  for (std::size_t len = 0; len < xlog.size(); ++len)
    EXPECT_THROW(ParseCopyMessage(std::string_view(xlog.data(), len)), ProtocolError)
        << "XLogData cut to " << len << " bytes";
  const std::string keepalive = KeepaliveBytes(1, 2, 1);
  for (std::size_t len = 0; len < keepalive.size(); ++len)
    EXPECT_THROW(ParseCopyMessage(std::string_view(keepalive.data(), len)), ProtocolError)
        << "keepalive cut to " << len << " bytes";
}

TEST(ParseCopyMessage, OverlongKeepaliveIsAnError) {
  EXPECT_THROW(ParseCopyMessage(KeepaliveBytes(1, 2, 0) + "x"), ProtocolError);
}

TEST(ParseCopyMessage, UnknownTypesAreErrors) {
  // 's' (primary status update, newer servers) and 'r' (a client message) included: neither
  // may reach us on a logical stream we did not ask for it.
  for (char type : {'r', 's', 'p', 'W', '\0', '\xff'}) {
    std::string msg(1, type);
    msg += std::string(40, '\0');
    try {
      ParseCopyMessage(msg);
      ADD_FAILURE() << "type " << static_cast<int>(type) << " was accepted";
    } catch (const ProtocolError& e) {
      EXPECT_NE(std::string(e.what()).find("unknown replication message type"), std::string::npos)
          << e.what();
    }
  }
}

TEST(StandbyStatusUpdate, Bytes) {
  const std::string msg =
      BuildStandbyStatusUpdate(0x0102030405060708ull, 0x1112131415161718ull, 0x2122232425262728ull,
                               0x3132333435363738ll, true);
  const std::string expected =
      "r"
      "\x01\x02\x03\x04\x05\x06\x07\x08"
      "\x11\x12\x13\x14\x15\x16\x17\x18"
      "\x21\x22\x23\x24\x25\x26\x27\x28"
      "\x31\x32\x33\x34\x35\x36\x37\x38"
      "\x01";
  EXPECT_EQ(msg, expected);
  EXPECT_EQ(msg.size(), kStandbyStatusSize);
  EXPECT_EQ(BuildStandbyStatusUpdate(0, 0, 0, 0, false).back(), '\0');
}

TEST(ReplicationClock, CountsFrom2000) {
  const auto unix_micros = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  const std::int64_t pg = ReplicationClockNow();
  const std::int64_t offset = unix_micros - pg;
  EXPECT_NEAR(static_cast<double>(offset), 946684800.0 * 1e6, 5e6);
}

TEST(Lsn, FormatsLikePostgres) {
  EXPECT_EQ(common::FormatLsn(0), "0/0");
  EXPECT_EQ(common::FormatLsn(0x16B374D848ull), "16/B374D848");
  EXPECT_EQ(common::FormatLsn(0x100000000ull), "1/0");
  EXPECT_EQ(common::FormatLsn(~0ull), "FFFFFFFF/FFFFFFFF");
}

TEST(Lsn, ParsesWhatPostgresAccepts) {
  EXPECT_EQ(common::ParseLsn("16/B374D848"), 0x16B374D848ull);
  EXPECT_EQ(common::ParseLsn("16/b374d848"), 0x16B374D848ull);
  EXPECT_EQ(common::ParseLsn("0/0"), 0u);
  EXPECT_EQ(common::ParseLsn("00000001/00000002"), 0x100000002ull);
  EXPECT_EQ(common::ParseLsn("FFFFFFFF/FFFFFFFF"), ~0ull);
  for (std::uint64_t v : {0ull, 1ull, 0xFFFFFFFFull, 0x123456789ABCDEFull, ~0ull})
    EXPECT_EQ(common::ParseLsn(common::FormatLsn(v)), v);
}

TEST(Lsn, RejectsEverythingElse) {
  for (const char* bad : {"", "/", "0/", "/0", "16", "16/B374D848/", "16/B374D848 ", " 16/1",
                          "123456789/0", "0/123456789", "g/0", "0/-1", "+1/0", "0x1/0", "1//0"})
    EXPECT_THROW(common::ParseLsn(bad), std::invalid_argument) << '"' << bad << '"';
}

TEST(SlotName, Validation) {
  EXPECT_NO_THROW(ValidateSlotName("a"));
  EXPECT_NO_THROW(ValidateSlotName("dblog_orders_1"));
  EXPECT_NO_THROW(ValidateSlotName(std::string(63, 'x')));
  for (const std::string& bad :
       {std::string(), std::string(64, 'x'), std::string("Upper"), std::string("with-dash"),
        std::string("sp ace"), std::string("quo\"te")})
    EXPECT_THROW(ValidateSlotName(bad), std::invalid_argument) << bad;
}

}  // namespace
}  // namespace dblog::pg
