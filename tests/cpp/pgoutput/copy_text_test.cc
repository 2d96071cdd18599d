// tests/cpp/pgoutput/copy_text_test.cc: pgoutput::CopyTextParser (sidecar/pgoutput/copy_text.h)
// on bytes written here: COPY TO's escapes, NULL, empty values, rows cut anywhere, and what COPY
// TO never writes refused. pgoutput_values_test.cc reads real COPY output with it on 15-18.
#include <gtest/gtest.h>

#include <string>

#include "pgoutput/copy_text.h"

namespace {

namespace po = dblog::pgoutput;

TEST(CopyTextTest, EscapesNullsAndEmptyValues) {
  po::CopyTextParser p;
  p.Feed("1\t\\N\t\ta\\tb\\nc\\\\d\\r\\b\\f\\v\n\\\\N\n");
  po::Cells cells;
  ASSERT_TRUE(p.Next(&cells));
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(*cells[0], "1");
  EXPECT_FALSE(cells[1].has_value());
  EXPECT_EQ(*cells[2], "");
  EXPECT_EQ(*cells[3], "a\tb\nc\\d\r\b\f\v");
  ASSERT_TRUE(p.Next(&cells));
  ASSERT_EQ(cells.size(), 1u);
  EXPECT_EQ(*cells[0], "\\N") << "a value that reads \\N is not NULL";
  EXPECT_FALSE(p.Next(&cells));
  EXPECT_FALSE(p.pending());
}

TEST(CopyTextTest, RowsCutAnywhereParseTheSame) {
  const po::Cells row = {std::string("x\ty"), std::nullopt, std::string("é\\"), std::string()};
  const std::string line = po::CopyTextLine(row);
  const std::string stream = line + line + line;
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    po::CopyTextParser p;
    po::Cells cells;
    int rows = 0;
    p.Feed(stream.substr(0, cut));
    while (p.Next(&cells)) rows += cells == row;
    p.Feed(stream.substr(cut));
    while (p.Next(&cells)) rows += cells == row;
    EXPECT_EQ(rows, 3) << "cut at " << cut;
    EXPECT_FALSE(p.pending());
  }
}

TEST(CopyTextTest, WhatCopyToNeverWritesIsRefused) {
  for (const std::string bad :
       {"a\\x41\n", "a\\\n", "a\rb\n", "a\fb\n", "\b\n", "\v\n", "\\0\n", "a\\N\n"}) {
    po::CopyTextParser p;
    p.Feed(bad);
    po::Cells cells;
    EXPECT_THROW(p.Next(&cells), po::CopyTextError) << bad;
  }
  po::CopyTextParser small(8);
  small.Feed("123456789");
  po::Cells cells;
  EXPECT_THROW(small.Next(&cells), po::CopyTextError) << "a row past the limit";
  EXPECT_TRUE(po::CopyTextParser(8).pending() == false);
}

}  // namespace
