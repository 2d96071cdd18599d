// tests/cpp/consumer/window_rows_test.cc: WindowRows, the merge of a kept key's chunk row with
// what the window's events carried (issue 28, 1b), as pure logic.
#include <gtest/gtest.h>

#include "consumer/window_rows.h"

namespace dblog::consumer {
namespace {

dblog::v1::Value Int(std::int64_t v) {
  dblog::v1::Value out;
  out.set_int_value(v);
  return out;
}
dblog::v1::Value Text(const std::string& v) {
  dblog::v1::Value out;
  out.set_text_value(v);
  return out;
}
dblog::v1::Value Unchanged() {
  dblog::v1::Value out;
  out.set_unchanged(true);
  return out;
}
dblog::v1::Row Row(std::vector<dblog::v1::Value> values) {
  dblog::v1::Row row;
  for (auto& v : values) *row.add_values() = v;
  return row;
}

// (id, n, body, note): id the key; body left unchanged by every event in the window
TEST(WindowRows, TheLastCarriedValuesAndTheFilledColumnsMakeTheWholeRow) {
  WindowRows rows(1 << 20);
  rows.Carried("k", Row({Int(1), Int(5), Unchanged(), Text("first")}));
  rows.Carried("k", Row({Int(1), Int(6), Unchanged(), Unchanged()}));
  bool complete = false;
  const auto merged = rows.Merge("k", Row({Int(1), Int(4), Text("chunk body"), Text("old")}),
                                 {2}, {0}, &complete);
  EXPECT_TRUE(complete);
  EXPECT_EQ(merged.ShortDebugString(),
            Row({Int(1), Int(6), Text("chunk body"), Text("first")}).ShortDebugString());
}

// A value the log sent in pieces (Value.split) reached the consumer after its Change; a chunk row
// has no pieces, so the merge never carries it: "keep yours", the row partial, whatever the
// window carried for that column before.
TEST(WindowRows, AValueSentInPiecesIsNeverCarriedIntoAFill) {
  WindowRows rows(1 << 20);
  dblog::v1::Value split;
  split.mutable_split()->set_kind(dblog::v1::SplitValue::TEXT);
  split.mutable_split()->set_length(5000000);
  rows.Carried("k", Row({Int(1), Int(5), Unchanged(), Text("first")}));
  rows.Carried("k", Row({Int(1), Int(6), Unchanged(), split}));
  bool complete = true;
  const auto merged = rows.Merge("k", Row({Int(1), Int(4), Text("chunk body"), Text("old")}),
                                 {2}, {0}, &complete);
  EXPECT_FALSE(complete);
  EXPECT_EQ(merged.ShortDebugString(),
            Row({Int(1), Int(6), Text("chunk body"), Unchanged()}).ShortDebugString());
}

// A column the window's events never carried, and that is not filled (a widened transaction
// carried it before the window): unchanged, and the row is partial.
TEST(WindowRows, AColumnNothingInTheWindowCarriedStaysUnchanged) {
  WindowRows rows(1 << 20);
  rows.Carried("k", Row({Int(1), Int(5), Unchanged(), Unchanged()}));
  bool complete = true;
  const auto merged =
      rows.Merge("k", Row({Int(1), Int(4), Text("b"), Text("old")}), {2}, {0}, &complete);
  EXPECT_FALSE(complete);
  EXPECT_EQ(merged.ShortDebugString(),
            Row({Int(1), Int(5), Text("b"), Unchanged()}).ShortDebugString());
  // a key the window never saw: only the filled columns and the key
  const auto unseen =
      rows.Merge("other", Row({Int(2), Int(4), Text("b"), Text("old")}), {2}, {0}, &complete);
  EXPECT_FALSE(complete);
  EXPECT_EQ(unseen.ShortDebugString(),
            Row({Int(2), Unchanged(), Text("b"), Unchanged()}).ShortDebugString());
}

// A key the row left (deleted, or moved away) forgets what was carried for it.
TEST(WindowRows, AKeyTheRowLeftForgetsItsValues) {
  WindowRows rows(1 << 20);
  rows.Carried("k", Row({Int(1), Int(5), Unchanged()}));
  rows.Left("k");
  bool complete = true;
  rows.Merge("k", Row({Int(1), Int(4), Text("b")}), {2}, {0}, &complete);
  EXPECT_FALSE(complete);
}

// Past the budget nothing is kept: merges fall back to partial rows, never to wrong values.
TEST(WindowRows, PastTheBudgetMergesArePartial) {
  WindowRows rows(200);
  for (int i = 0; i < 20; ++i)
    rows.Carried("k" + std::to_string(i), Row({Int(i), Text(std::string(20, 'x')), Unchanged()}));
  EXPECT_TRUE(rows.overflowed());
  rows.Carried("k1", Row({Int(1), Text("new"), Unchanged()}));  // ignored now
  bool complete = true;
  const auto merged = rows.Merge("k1", Row({Int(1), Text("old"), Text("b")}), {2}, {0}, &complete);
  EXPECT_FALSE(complete);
  EXPECT_EQ(merged.ShortDebugString(), Row({Int(1), Unchanged(), Text("b")}).ShortDebugString());
}

}  // namespace
}  // namespace dblog::consumer
