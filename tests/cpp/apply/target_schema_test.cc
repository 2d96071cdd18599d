// tests/cpp/apply/target_schema_test.cc: the checks of a target table against the source's
// Relation (client/apply/target_schema.h: CheckTargetColumns, CheckConflictTarget), without a
// database: the catalog rows come in as values. Reading them from a real target, and creating
// tables, is applier_test's and apply_e2e_test's.
#include "client/apply/target_schema.h"

#include <gtest/gtest.h>

namespace dblog::apply {
namespace {

// app.t (id integer, note text), key (id).
dblog::v1::Relation Source() {
  dblog::v1::Relation r;
  r.set_schema("app");
  r.set_name("t");
  auto* id = r.add_columns();
  id->set_name("id");
  id->set_type_name("integer");
  auto* note = r.add_columns();
  note->set_name("note");
  note->set_type_name("text");
  r.add_key_columns(0);
  return r;
}

TargetColumns SameColumns() { return {{"id", {"integer", true}}, {"note", {"text"}}}; }

// The SchemaError `check` throws; fails the test when it throws nothing.
template <typename Check>
std::string ErrorOf(Check check) {
  try {
    check();
  } catch (const SchemaError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no SchemaError";
  return "";
}

TEST(TargetColumns, TheSourcesOwnTypesFitAndCanBeCopied) {
  const TargetTableFit fit = CheckTargetColumns(Source(), SameColumns(), {}, "app.t");
  EXPECT_TRUE(fit.same_types);
  EXPECT_TRUE(fit.lossy.empty());
}

TEST(TargetColumns, AWiderTypeFitsButNotByCopy) {
  TargetColumns columns = SameColumns();
  columns["id"].type = "bigint";
  const TargetTableFit fit = CheckTargetColumns(Source(), columns, {}, "app.t");
  EXPECT_FALSE(fit.same_types);
  EXPECT_TRUE(fit.lossy.empty());
}

TEST(TargetColumns, AMissingOrGeneratedColumnIsRefused) {
  TargetColumns missing = SameColumns();
  missing.erase("note");
  EXPECT_EQ(ErrorOf([&] { CheckTargetColumns(Source(), missing, {}, "app.t"); }),
            "target table app.t has no column \"note\" (source type text); add it or run with"
            " --create-tables");
  TargetColumns generated = SameColumns();
  generated["note"].generated = true;
  EXPECT_EQ(ErrorOf([&] { CheckTargetColumns(Source(), generated, {}, "app.t"); }),
            "target table app.t: column \"note\" is generated in the target and cannot take the"
            " source's values");
}

TEST(TargetColumns, AnExtraColumnMustBeOmittable) {
  TargetColumns columns = SameColumns();
  columns["extra"] = TargetColumn{"text", /*not_null=*/true};
  EXPECT_EQ(ErrorOf([&] { CheckTargetColumns(Source(), columns, {}, "app.t"); }),
            "target table app.t: column \"extra\" is NOT NULL without a default, and the source"
            " has no such column");
  for (TargetColumn omittable :
       {TargetColumn{"text", true, /*has_default=*/true},
        TargetColumn{"text", true, false, /*generated=*/true},
        TargetColumn{"bigint", true, false, false, /*identity=*/true}, TargetColumn{"text"}}) {
    columns["extra"] = omittable;
    EXPECT_NO_THROW(CheckTargetColumns(Source(), columns, {}, "app.t"));
  }
}

TEST(TargetColumns, ALossyColumnIsRefusedUnlessAllowed) {
  TargetColumns columns = SameColumns();
  columns["note"].type = "character varying(10)";
  const std::string error = ErrorOf([&] { CheckTargetColumns(Source(), columns, {}, "app.t"); });
  EXPECT_NE(error.find("target table app.t: column \"note\" is character varying(10), the "
                       "source's is text: it cannot hold every value"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("--allow-lossy-columns"), std::string::npos) << error;

  TargetTableOptions allow;
  allow.allow_lossy_columns = true;
  const TargetTableFit fit = CheckTargetColumns(Source(), columns, allow, "app.t");
  ASSERT_EQ(fit.lossy.size(), 1u);
  EXPECT_EQ(fit.lossy[0].column, "note");
  EXPECT_EQ(fit.lossy[0].source_type, "text");
  EXPECT_EQ(fit.lossy[0].target_type, "character varying(10)");
  EXPECT_FALSE(fit.same_types);
}

TEST(ConflictTarget, AUniqueIndexOnTheKeyInAnyOrderFits) {
  EXPECT_NO_THROW(CheckConflictTarget({{true, {"a", "b"}}}, {"a", "b"}, "app.t"));
  EXPECT_NO_THROW(CheckConflictTarget({{false, {"x"}}, {false, {"b", "a"}}}, {"a", "b"}, "app.t"));
}

TEST(ConflictTarget, AnotherKeyIsRefusedNamingThePrimaryKey) {
  EXPECT_EQ(ErrorOf([&] {
              CheckConflictTarget({{true, {"a"}}}, {"a", "b"}, "app.t");
            }),
            "target table app.t: its primary key (a) differs from the source's key (a, b)");
  // A subset or a superset of the key is not it; nor an index with an expression ("").
  EXPECT_EQ(ErrorOf([&] {
              CheckConflictTarget({{false, {"a"}}, {false, {"a", "b", "c"}}, {false, {"a", ""}}},
                                  {"a", "b"}, "app.t");
            }),
            "target table app.t has no primary key or unique index on (a, b), the source's key");
}

}  // namespace
}  // namespace dblog::apply
