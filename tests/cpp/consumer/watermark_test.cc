// tests/cpp/consumer/watermark_test.cc: the repair window's markers (consumer/watermark.h):
// format, parsing, and which markers a consumer's pipeline takes as its own. Anyone may write a
// logical message with any prefix, so every way a marker can be not ours is checked.
#include "consumer/watermark.h"

#include <gtest/gtest.h>

namespace dblog::consumer {
namespace {

TEST(Watermark, FormatsAndParsesBothKinds) {
  const Watermark lo{Watermark::Kind::kLow, "0123abcd"};
  const Watermark hi{Watermark::Kind::kHigh, "0123abcd"};
  EXPECT_EQ(lo.Content(), "lo:0123abcd");
  EXPECT_EQ(hi.Content(), "hi:0123abcd");
  for (const Watermark& w : {lo, hi}) {
    const std::optional<Watermark> back = Watermark::Parse(w.Content());
    ASSERT_TRUE(back);
    EXPECT_EQ(back->kind, w.kind);
    EXPECT_EQ(back->window_id, w.window_id);
  }
  EXPECT_EQ(Watermark::Prefix("search"), "dblog.watermark/search");
}

TEST(Watermark, RefusesWhatIsNotAMarker) {
  for (const char* content : {"", "lo", "lo:", "hi:", "xx:abc", "LO:abc", " lo:abc"})
    EXPECT_FALSE(Watermark::Parse(content)) << content;
}

class ClassifyTest : public ::testing::Test {
 protected:
  std::set<std::string> abandoned_{"old"};
  MarkerContext context_{"search", std::string("w1"), &abandoned_};
};

TEST_F(ClassifyTest, TheOpenWindowsOwnMarkersAreOurs) {
  EXPECT_EQ(Classify("dblog.watermark/search", true, "lo:w1", context_), MarkerKind::kOurs);
  EXPECT_EQ(Classify("dblog.watermark/search", true, "hi:w1", context_), MarkerKind::kOurs);
}

TEST_F(ClassifyTest, ANonTransactionalCopyOfOurMarkerIsNot) {
  // a window's markers are written inside transactions: one outside any is forged
  EXPECT_EQ(Classify("dblog.watermark/search", false, "hi:w1", context_),
            MarkerKind::kUnknownWindow);
}

TEST_F(ClassifyTest, AnotherConsumersMarkerIsNotOurs) {
  EXPECT_EQ(Classify("dblog.watermark/orders", true, "hi:w1", context_),
            MarkerKind::kOtherConsumer);
  // a consumer whose name starts with ours is another consumer
  EXPECT_EQ(Classify("dblog.watermark/search2", true, "hi:w1", context_),
            MarkerKind::kOtherConsumer);
}

TEST_F(ClassifyTest, APrefixNamingNoConsumerIsNotOurs) {
  EXPECT_EQ(Classify("dblog.watermark", true, "hi:w1", context_), MarkerKind::kNoConsumer);
  EXPECT_EQ(Classify("dblog.watermarks", true, "hi:w1", context_), MarkerKind::kNoConsumer);
}

TEST_F(ClassifyTest, OurPrefixWithAnotherWindowIsNotOurs) {
  EXPECT_EQ(Classify("dblog.watermark/search", true, "hi:w2", context_),
            MarkerKind::kUnknownWindow);
  EXPECT_EQ(Classify("dblog.watermark/search", true, "xx:w1", context_),
            MarkerKind::kUnknownWindow);
  EXPECT_EQ(Classify("dblog.watermark/search", true, "hi:w1x", context_),
            MarkerKind::kUnknownWindow);
  context_.open_window.reset();  // no window open: nothing is ours
  EXPECT_EQ(Classify("dblog.watermark/search", true, "hi:w1", context_),
            MarkerKind::kUnknownWindow);
}

TEST_F(ClassifyTest, AnAbandonedWindowsReplayedMarkerIsNamedSo) {
  EXPECT_EQ(Classify("dblog.watermark/search", true, "lo:old", context_),
            MarkerKind::kAbandonedWindow);
  EXPECT_STREQ(MarkerKindName(MarkerKind::kAbandonedWindow), "abandoned_window");
}

}  // namespace
}  // namespace dblog::consumer
