// tests/cpp/common/logfmt_test.cc: the escaping of log lines (common/logfmt.h), shared by
// dblogd's logfmt values and the clients' stderr lines: no name can break or forge a line.
#include "common/logfmt.h"

#include <gtest/gtest.h>

namespace dblog::common {
namespace {

// The security review's name: a table that would forge a line of its own.
constexpr char kForged[] = "new\nts=0 level=error event=forged_by_name";

TEST(Logfmt, ValuesAreQuotedOnlyWhenTheyNeedIt) {
  EXPECT_EQ(LogfmtValue("public.items"), "public.items");
  EXPECT_EQ(LogfmtValue("caf\xc3\xa9"), "caf\xc3\xa9");  // UTF-8 passes
  EXPECT_EQ(LogfmtValue(""), "\"\"");
  EXPECT_EQ(LogfmtValue("a b"), "\"a b\"");
  EXPECT_EQ(LogfmtValue("a=b"), "\"a=b\"");
  EXPECT_EQ(LogfmtValue("say \"hi\" \\"), "\"say \\\"hi\\\" \\\\\"");
  EXPECT_EQ(LogfmtValue("a\tb\x01"), "\"a\\tb\\x01\"");
  EXPECT_EQ(LogfmtValue(kForged), "\"new\\nts=0 level=error event=forged_by_name\"");
}

TEST(Logfmt, LogTextStaysOnOneLine) {
  EXPECT_EQ(LogText("created target table app.items"), "created target table app.items");
  EXPECT_EQ(LogText(std::string("created target table app.") + kForged),
            "created target table app.new\\nts=0 level=error event=forged_by_name");
  EXPECT_EQ(LogText("bad\ntoken\x1b[2J\r\x7f"), "bad\\ntoken\\x1b[2J\\x0d\\x7f");
  EXPECT_EQ(LogText("c1 \xc2\x9b"
                    "2J, \xc2\xa0"),
            "c1 \\xc2\\x9b2J, \xc2\xa0");  // C1 CSI; NBSP
  // a value escaped already comes through as it is: quotes and backslashes are prose here
  const std::string value = LogfmtValue(kForged);
  EXPECT_EQ(LogText("table " + value), "table " + value);
  EXPECT_EQ(LogText("say \"hi\" \\n"), "say \"hi\" \\n");
}

}  // namespace
}  // namespace dblog::common
