// tests/cpp/apply/column_types_test.cc: which (source type, target type) pairs `dblog apply`
// takes silently and which it refuses without --allow-lossy-columns (client/apply/column_types.h).
// No database: the types are format_type() text, as the Relation and the target's catalog
// print them. What the refusal does end to end is in apply_e2e_test
// (LossyTargetColumnsAreRefusedUnlessAllowed).
#include "client/apply/column_types.h"

#include <gtest/gtest.h>

namespace dblog::apply {
namespace {

struct Pair {
  const char* source;
  const char* target;
  Conversion expected;
};

std::string Name(Conversion c) {
  switch (c) {
    case Conversion::kSame:
      return "same";
    case Conversion::kWidening:
      return "widening";
    case Conversion::kLossy:
      return "lossy";
  }
  return "?";
}

void Check(const std::vector<Pair>& pairs) {
  for (const auto& p : pairs)
    EXPECT_EQ(Name(ClassifyConversion(p.source, p.target)), Name(p.expected))
        << p.source << " -> " << p.target;
}

constexpr Conversion kSame = Conversion::kSame;
constexpr Conversion kWidening = Conversion::kWidening;
constexpr Conversion kLossy = Conversion::kLossy;

TEST(ColumnTypes, IdenticalTypesAreTheSame) {
  Check({
      {"integer", "integer", kSame},
      {"numeric(10,2)", "numeric(10,2)", kSame},
      {"character varying(20)", "character varying(20)", kSame},
      {"timestamp(3) with time zone", "timestamp(3) with time zone", kSame},
      {"app.mood", "app.mood", kSame},
      {"\"Weird\"", "\"Weird\"", kSame},
      {"interval year to month", "interval year to month", kSame},
      {"text[]", "text[]", kSame},
  });
}

TEST(ColumnTypes, IntegersWidenAndNeverNarrow) {
  Check({
      {"smallint", "integer", kWidening},
      {"smallint", "bigint", kWidening},
      {"integer", "bigint", kWidening},
      {"bigint", "integer", kLossy},
      {"bigint", "smallint", kLossy},
      {"integer", "smallint", kLossy},
      {"integer", "numeric", kWidening},
      {"bigint", "numeric", kWidening},
      {"smallint", "numeric(5,0)", kWidening},
      {"smallint", "numeric(4,0)", kLossy},
      {"integer", "numeric(10,0)", kWidening},
      {"integer", "numeric(12,2)", kWidening},
      {"integer", "numeric(11,2)", kLossy},
      {"integer", "numeric(9)", kLossy},
      {"bigint", "numeric(19,0)", kWidening},
      {"bigint", "numeric(18,0)", kLossy},
      {"integer", "numeric(12,-2)", kLossy},  // negative scale rounds to hundreds
      {"smallint", "real", kWidening},
      {"integer", "real", kLossy},
      {"integer", "double precision", kWidening},
      {"bigint", "double precision", kLossy},
      {"oid", "bigint", kWidening},
      {"oid", "integer", kLossy},
      {"integer", "oid", kLossy},
      {"integer", "text", kLossy},  // not a widening this knows of
      {"integer", "boolean", kLossy},
  });
}

TEST(ColumnTypes, NumericNeedsItsDigitsOnBothSidesOfThePoint) {
  Check({
      {"numeric(10,2)", "integer", kLossy},  // 1.25 -> 1: the case that started this
      {"numeric(4,0)", "smallint", kLossy},  // NaN has no integer
      {"numeric", "bigint", kLossy},
      {"numeric(10,2)", "numeric(12,4)", kWidening},
      {"numeric(10,2)", "numeric(11,3)", kWidening},
      {"numeric(10,2)", "numeric(10,3)", kLossy},  // one digit less before the point
      {"numeric(10,2)", "numeric(10,1)", kLossy},  // scale reduced: rounds
      {"numeric(10,2)", "numeric(9,2)", kLossy},
      {"numeric(10)", "numeric(12,2)", kWidening},
      {"numeric(10,2)", "numeric", kWidening},
      {"numeric", "numeric(1000,500)", kLossy},
      {"numeric(5,-2)", "numeric(7,0)", kWidening},
      {"numeric(5,-2)", "numeric(6,0)", kLossy},
      {"numeric(3,5)", "numeric(5,7)", kWidening},  // 0.00xxx
      {"numeric(10,2)", "double precision", kLossy},
      {"numeric(10,2)", "text", kLossy},
  });
}

TEST(ColumnTypes, FloatsWidenOnlyToDoublePrecision) {
  Check({
      {"real", "double precision", kWidening},
      {"double precision", "real", kLossy},
      {"real", "numeric", kLossy},  // PostgreSQL converts with 15 significant digits
      {"double precision", "numeric", kLossy},
      {"double precision", "bigint", kLossy},
      {"real", "integer", kLossy},
  });
}

TEST(ColumnTypes, StringsWidenToLongerOrUnboundedOnes) {
  Check({
      {"character varying(10)", "character varying(20)", kWidening},
      {"character varying(10)", "character varying(10)", kSame},
      {"character varying(20)", "character varying(10)", kLossy},
      {"character varying(10)", "text", kWidening},
      {"character varying(10)", "character varying", kWidening},
      {"character varying", "text", kWidening},
      {"text", "character varying", kWidening},
      {"text", "character varying(100)", kLossy},
      {"text", "character(10)", kLossy},
      {"character varying(5)", "character(10)", kLossy},  // trailing blanks become padding
      {"character(5)", "character(10)", kWidening},
      {"character(10)", "character(5)", kLossy},
      {"character(5)", "text", kLossy},  // trailing blanks are dropped
      {"character(5)", "character varying(5)", kLossy},
      {"bpchar", "text", kLossy},
      {"name", "text", kWidening},
      {"name", "character varying(63)", kWidening},
      {"name", "character varying(62)", kLossy},
      {"text", "name", kLossy},
      {"text", "bytea", kLossy},
      {"json", "jsonb", kLossy},
      {"jsonb", "json", kLossy},
      {"bit(4)", "bit varying(8)", kWidening},
      {"bit varying(8)", "bit varying", kWidening},
      {"bit varying(8)", "bit varying(4)", kLossy},
      {"bit(4)", "bit(8)", kLossy},  // padded with zeros
  });
}

TEST(ColumnTypes, TimesKeepTheirZoneAndFractionalDigits) {
  Check({
      {"timestamp without time zone", "timestamp(6) without time zone", kWidening},
      {"timestamp(3) without time zone", "timestamp without time zone", kWidening},
      {"timestamp without time zone", "timestamp(3) without time zone", kLossy},
      {"timestamp(0) with time zone", "timestamp(2) with time zone", kWidening},
      {"timestamp with time zone", "timestamp without time zone", kLossy},
      {"timestamp with time zone", "date", kLossy},
      {"timestamp without time zone", "date", kLossy},
      {"timestamp without time zone", "timestamp with time zone", kLossy},  // read in a zone
      {"date", "timestamp without time zone", kLossy},  // dates go further than timestamps
      {"time(2) without time zone", "time without time zone", kWidening},
      {"time with time zone", "time without time zone", kLossy},
      {"time without time zone", "time(0) without time zone", kLossy},
      {"interval(3)", "interval", kWidening},
      {"interval", "interval(3)", kLossy},
      {"interval year to month", "interval", kLossy},
      {"interval day to second(3)", "interval day to second", kWidening},
  });
}

TEST(ColumnTypes, ArraysCompareTheirElements) {
  Check({
      {"integer[]", "bigint[]", kWidening},
      {"bigint[]", "integer[]", kLossy},
      {"character varying(10)[]", "text[]", kWidening},
      {"numeric(10,2)[]", "numeric(10,1)[]", kLossy},
      {"integer[]", "integer", kLossy},
      {"integer", "integer[]", kLossy},
      {"integer[]", "text", kLossy},
  });
}

TEST(ColumnTypes, UnknownAndUserDefinedTypesOnlyMatchThemselves) {
  Check({
      {"posint", "integer", kLossy},  // a domain over integer: its check is not known here
      {"integer", "posint", kLossy},
      {"app.mood", "other.mood", kLossy},
      {"\"Weird\"(1)", "\"Weird\"(2)", kLossy},
      {"uuid", "text", kLossy},
      {"boolean", "integer", kLossy},
      {"bytea", "text", kLossy},
      {"", "integer", kLossy},
      {"numeric(a)", "numeric", kLossy},
      {"numeric((1))", "numeric", kLossy},
  });
}

}  // namespace
}  // namespace dblog::apply
