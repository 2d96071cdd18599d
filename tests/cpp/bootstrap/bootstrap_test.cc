// tests/cpp/bootstrap/bootstrap_test.cc: CopyRowParser (binary COPY of one bytea column, fed in
// arbitrary pieces), PlanTasks and Copier::Batch.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "bootstrap/copier.h"

namespace dblog::bootstrap {
namespace {

void PutU32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
}

// What `COPY (SELECT bytea_col ...) TO STDOUT (FORMAT binary)` sends, as one string.
std::string CopyStream(const std::vector<std::string>& rows, std::uint32_t extension = 0) {
  std::string out("PGCOPY\n\377\r\n\0", 11);
  PutU32(out, 0);  // flags
  PutU32(out, extension);
  out.append(extension, 'x');
  for (const auto& row : rows) {
    out.push_back(0);
    out.push_back(1);  // one field
    PutU32(out, static_cast<std::uint32_t>(row.size()));
    out += row;
  }
  out.push_back('\xff');
  out.push_back('\xff');  // trailer: -1
  return out;
}

// Feeds `stream` cut at `cuts` (ascending offsets), collecting rows as the worker does: each
// piece lives only until the next Feed, so rows are copied out before it.
std::vector<std::string> Parse(const std::string& stream, const std::vector<std::size_t>& cuts,
                               bool* finished) {
  CopyRowParser parser;
  std::vector<std::string> rows;
  std::size_t at = 0;
  std::vector<std::size_t> ends = cuts;
  ends.push_back(stream.size());
  for (std::size_t end : ends) {
    std::string piece = stream.substr(at, end - at);  // dies after this iteration
    at = end;
    parser.Feed(piece);
    std::string_view row;
    while (parser.Next(&row)) rows.emplace_back(row);
    parser.Feed({});
    piece.assign(piece.size(), '?');  // anything still pointing into it would now read '?'
  }
  *finished = parser.finished();
  return rows;
}

TEST(CopyRowParser, WholeStreamInOnePiece) {
  const std::vector<std::string> rows = {"a", "", std::string(1000, 'b'), std::string("\0z", 2)};
  bool finished = false;
  EXPECT_EQ(Parse(CopyStream(rows, 3), {}, &finished), rows);
  EXPECT_TRUE(finished);
}

TEST(CopyRowParser, EveryCutPointGivesTheSameRows) {
  const std::vector<std::string> rows = {"first", "", "third row", std::string(70, 'q')};
  const std::string stream = CopyStream(rows, 2);
  for (std::size_t cut = 1; cut < stream.size(); ++cut) {
    bool finished = false;
    EXPECT_EQ(Parse(stream, {cut}, &finished), rows) << "cut at " << cut;
    EXPECT_TRUE(finished) << "cut at " << cut;
  }
}

TEST(CopyRowParser, RandomPiecesGiveTheSameRows) {
  std::mt19937 rng(1130);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> rows(rng() % 20);
    for (auto& r : rows) r.assign(rng() % 300, static_cast<char>('a' + rng() % 26));
    const std::string stream = CopyStream(rows);
    std::vector<std::size_t> cuts;
    for (std::size_t at = 0;;) {
      at += 1 + rng() % 40;
      if (at >= stream.size()) break;
      cuts.push_back(at);
    }
    bool finished = false;
    ASSERT_EQ(Parse(stream, cuts, &finished), rows) << "round " << round;
    EXPECT_TRUE(finished);
  }
}

TEST(CopyRowParser, TruncatedStreamIsNotFinished) {
  const std::string stream = CopyStream({"abc", "def"});
  bool finished = true;
  const auto rows = Parse(stream.substr(0, stream.size() - 4), {}, &finished);
  EXPECT_EQ(rows, std::vector<std::string>{"abc"});
  EXPECT_FALSE(finished);
}

TEST(CopyRowParser, RefusesMalformedInput) {
  std::string_view row;
  {
    CopyRowParser p;
    std::string bad = CopyStream({"x"});
    bad[0] = 'X';
    p.Feed(bad);
    EXPECT_THROW(p.Next(&row), std::runtime_error);
  }
  {
    CopyRowParser p;
    std::string two_fields = CopyStream({"x"});
    two_fields[19 + 1] = 2;
    p.Feed(two_fields);
    EXPECT_THROW(p.Next(&row), std::runtime_error);
  }
  {
    CopyRowParser p;
    std::string null_row = CopyStream({"x"});
    for (int i = 0; i < 4; ++i) null_row[19 + 2 + i] = '\xff';
    p.Feed(null_row);
    EXPECT_THROW(p.Next(&row), std::runtime_error);
  }
}

TEST(CopierBatch, RowsAreTheAddedBytesInOrder) {
  Copier::Batch batch;
  batch.Add("one");
  batch.Add("");
  batch.Add("three");
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch.bytes(), 8u);
  const auto rows = batch.Rows();
  EXPECT_EQ(std::vector<std::string>(rows.begin(), rows.end()),
            (std::vector<std::string>{"one", "", "three"}));
}

Table IntKeyed(std::int64_t rows) {
  Table t;
  t.estimated_rows = rows;
  t.single_integer_key = true;
  return t;
}

TEST(PlanTasks, SmallOrUnsplittableTablesAreOneTask) {
  Table text_keyed = IntKeyed(10'000'000);
  text_keyed.single_integer_key = false;
  const auto tasks = PlanTasks({IntKeyed(100), text_keyed}, {std::make_pair(1, 100), std::nullopt},
                               250000);
  ASSERT_EQ(tasks.size(), 2u);
  for (const auto& t : tasks) {
    EXPECT_FALSE(t.from);
    EXPECT_FALSE(t.to);
  }
}

TEST(PlanTasks, LargeTableRangesCoverEveryKeyOnce) {
  const auto tasks = PlanTasks({IntKeyed(1'000'000)}, {std::make_pair(-5, 999'994)}, 250000);
  ASSERT_EQ(tasks.size(), 4u);
  EXPECT_FALSE(tasks.front().from);  // open ends: keys outside the sampled bounds are copied too
  EXPECT_FALSE(tasks.back().to);
  for (std::size_t i = 1; i < tasks.size(); ++i) {
    ASSERT_TRUE(tasks[i].from && tasks[i - 1].to);
    EXPECT_EQ(*tasks[i].from, *tasks[i - 1].to);  // adjacent, no gap, no overlap
    EXPECT_LT(*tasks[i - 1].to, tasks[i].to.value_or(INT64_MAX));
  }
}

}  // namespace
}  // namespace dblog::bootstrap
