// tests/cpp/common/lsn_quote_test.cc: common/lsn.h and common/quote.h, the one LSN text form and
// the one identifier quoting that dblogd and the clients share.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>

#include "common/lsn.h"
#include "common/quote.h"

namespace dblog::common {
namespace {

TEST(Lsn, FormatsAsPostgreSQLPrintsIt) {
  EXPECT_EQ(FormatLsn(0), "0/0");
  EXPECT_EQ(FormatLsn(0x16B374D848ull), "16/B374D848");
  EXPECT_EQ(FormatLsn(~0ull), "FFFFFFFF/FFFFFFFF");
}

TEST(Lsn, ParsesWhatItFormatsForAnyValue) {
  std::mt19937_64 rng(20261201);
  for (int i = 0; i < 10000; ++i) {
    const std::uint64_t lsn = rng() >> (rng() % 64);
    ASSERT_EQ(ParseLsn(FormatLsn(lsn)), lsn) << FormatLsn(lsn);
  }
  EXPECT_EQ(ParseLsn("16/b374d848"), 0x16B374D848ull);  // either case, as pg_lsn reads it
}

TEST(Lsn, RefusesWhatPgLsnRefuses) {
  for (const char* bad : {"", "/", "16", "16/", "/16", "1/2/3", "G/0", "123456789/0", " 1/0",
                          "1/0 ", "-1/0", "0x1/0"})
    EXPECT_THROW(ParseLsn(bad), std::invalid_argument) << bad;
}

TEST(QuoteIdent, AlwaysQuotesAndDoublesQuotes) {
  EXPECT_EQ(QuoteIdent("t"), "\"t\"");
  EXPECT_EQ(QuoteIdent("Order Lines"), "\"Order Lines\"");
  EXPECT_EQ(QuoteIdent("a\"b"), "\"a\"\"b\"");
  EXPECT_EQ(QuoteIdent(""), "\"\"");
  EXPECT_EQ(QuoteIdent("back\\slash"), "\"back\\slash\"");  // not special in identifiers
  EXPECT_EQ(QuoteQualified("my schema", "t\""), "\"my schema\".\"t\"\"\"");
}

}  // namespace
}  // namespace dblog::common
