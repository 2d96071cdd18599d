// tests/cpp/scope/scope_match_test.cc: the one scope matcher (plugin/scope_match.h): what each
// pattern holds, errors with their position, the canonical text, and a randomized comparison
// against an oracle built from the same patterns as regular expressions.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "config/config.h"
#include "scope_match.h"

namespace {

struct Parsed {
  std::unique_ptr<DblogScope, void (*)(DblogScope*)> scope{nullptr, dblog_scope_free};
  std::string error;
};

Parsed Parse(const std::string& text, int flags = 0) {
  Parsed p;
  char err[256];
  p.scope.reset(dblog_scope_parse(text.c_str(), flags, err, sizeof(err)));
  if (!p.scope) p.error = err;
  return p;
}

bool Holds(const std::string& scope, const std::string& schema, const std::string& table) {
  Parsed p = Parse(scope);
  EXPECT_TRUE(p.scope) << scope << ": " << p.error;
  return p.scope && dblog_scope_holds(p.scope.get(), schema.c_str(), table.c_str());
}

std::string Canonical(const DblogScope* scope, int i = -1) {
  std::string out(dblog_scope_format(scope, i, nullptr, 0), '\0');
  dblog_scope_format(scope, i, out.data(), out.size() + 1);
  return out;
}

std::string Canonical(const std::string& text) {
  Parsed p = Parse(text);
  EXPECT_TRUE(p.scope) << text << ": " << p.error;
  return p.scope ? Canonical(p.scope.get()) : "";
}

TEST(ScopeMatchTest, ScopesWrittenBeforeGlobsMeanWhatTheyMeant) {
  EXPECT_TRUE(Holds("public.*", "public", "anything"));
  EXPECT_FALSE(Holds("public.*", "app", "anything"));
  EXPECT_TRUE(Holds("*.orders", "app", "orders"));
  EXPECT_FALSE(Holds("*.orders", "app", "orders2"));
  EXPECT_TRUE(Holds("*.*", "x", "y"));
  EXPECT_TRUE(Holds("app.a, app.b", "app", "b"));
  EXPECT_TRUE(Holds(" app.a ,app.b ", "app", "a"));
  EXPECT_FALSE(Holds("app.a,app.b", "app", "c"));
  EXPECT_TRUE(Holds("app.*, PUBLIC.c", "public", "c"));  // unquoted: folded, as SQL does
  EXPECT_TRUE(Holds("\"My Schema\".\"T\"", "My Schema", "T"));
  EXPECT_FALSE(Holds("\"My Schema\".\"T\"", "My Schema", "t"));
  EXPECT_TRUE(Holds("\"a\"\"b\".t", "a\"b", "t"));
}

TEST(ScopeMatchTest, StarAnywhereInAPart) {
  EXPECT_TRUE(Holds("public.order_*", "public", "order_a"));
  EXPECT_TRUE(Holds("public.order_*", "public", "order_"));
  EXPECT_FALSE(Holds("public.order_*", "public", "orders"));
  EXPECT_TRUE(Holds("app_*.*", "app_eu", "t"));
  EXPECT_FALSE(Holds("app_*.*", "app", "t"));
  EXPECT_TRUE(Holds("*.*_log", "x", "audit_log"));
  EXPECT_TRUE(Holds("p.a*b*c", "p", "abc"));
  EXPECT_TRUE(Holds("p.a*b*c", "p", "axxbyybc"));
  EXPECT_FALSE(Holds("p.a*b*c", "p", "axxbyybcd"));
  EXPECT_TRUE(Holds("p.**", "p", ""));
  // quoted stars are literal; a quoted run next to an unquoted glob
  EXPECT_TRUE(Holds("p.\"a*\"", "p", "a*"));
  EXPECT_FALSE(Holds("p.\"a*\"", "p", "ab"));
  EXPECT_TRUE(Holds("p.\"Order\"_*", "p", "Order_x"));
  EXPECT_FALSE(Holds("p.\"Order\"_*", "p", "order_x"));
  // non-ASCII names are matched byte for byte, a star takes whole characters with it
  EXPECT_TRUE(Holds("p.\"č\"*", "p", "čaj"));
  EXPECT_TRUE(Holds("p.*ř", "p", "moř"));
}

TEST(ScopeMatchTest, ExclusionsWinWhateverTheOrder) {
  for (const char* scope : {"public.*,!public.audit_log", "!public.audit_log,public.*",
                            " ! public . audit_log , public.*"}) {
    EXPECT_TRUE(Holds(scope, "public", "orders")) << scope;
    EXPECT_FALSE(Holds(scope, "public", "audit_log")) << scope;
    EXPECT_FALSE(Holds(scope, "app", "orders")) << scope;
  }
  EXPECT_FALSE(Holds("*.*,!*.tmp_*", "app", "tmp_1"));
  EXPECT_TRUE(Holds("*.*,!*.tmp_*", "app", "tmp"));
  EXPECT_FALSE(Holds("app.*,*.*,!app.x", "app", "x"));  // an exclusion beats every positive
}

TEST(ScopeMatchTest, ErrorsSayWhereAndWhy) {
  struct Case {
    const char* text;
    int flags;
    const char* error;
  };
  const Case cases[] = {
      {"", 0, "at character 1: empty scope: expected schema.table patterns separated by commas"},
      {"public", 0, "at character 7: expected '.' between schema and table, found the end of the scope"},
      {"public.", 0, "at character 8: expected a name or * at the end of the scope"},
      {".a", 0, "at character 1: expected a name or *, found '.'"},
      {"a b.c", 0, "at character 3: expected '.' between schema and table, found 'b'"},
      {"a.b.c", 0, "at character 4: expected ',' after schema.table, found '.' (quote a name that holds a dot)"},
      {"a.b,", 0, "at character 5: empty pattern: expected schema.table"},
      {"a.b,,c.d", 0, "at character 5: empty pattern: expected schema.table"},
      {"a.\"b", 0, "at character 3: unterminated quoted identifier"},
      {"\"\".b", 0, "at character 1: zero-length quoted identifier"},
      {"!a.b", 0, "at character 1: a scope of exclusions only holds no table: add the tables to exclude from, such as *.*"},
      {"a.*,!a.b", DBLOG_SCOPE_NO_EXCLUSIONS, "at character 5: exclusions (!) are not allowed here"},
  };
  for (const Case& c : cases) {
    Parsed p = Parse(c.text, c.flags);
    EXPECT_FALSE(p.scope) << c.text;
    EXPECT_EQ(p.error, c.error) << c.text;
  }
}

TEST(ScopeMatchTest, KeepCaseMatchesUnquotedNamesAsSpelledAndCanonicalTextAgrees) {
  Parsed kept = Parse("Public.Order_*", DBLOG_SCOPE_KEEP_CASE);
  ASSERT_TRUE(kept.scope) << kept.error;
  EXPECT_TRUE(dblog_scope_holds(kept.scope.get(), "Public", "Order_x"));
  EXPECT_FALSE(dblog_scope_holds(kept.scope.get(), "public", "order_x"));
  const std::string canonical = Canonical(kept.scope.get());
  EXPECT_EQ(canonical, "\"Public\".\"Order_\"*");
  // the canonical text means the same folded or not
  for (int flags : {0, DBLOG_SCOPE_KEEP_CASE}) {
    Parsed again = Parse(canonical, flags);
    ASSERT_TRUE(again.scope) << again.error;
    EXPECT_TRUE(dblog_scope_holds(again.scope.get(), "Public", "Order_x"));
    EXPECT_FALSE(dblog_scope_holds(again.scope.get(), "public", "order_x"));
  }
}

TEST(ScopeMatchTest, CanonicalText) {
  EXPECT_EQ(Canonical("public.*"), "public.*");
  EXPECT_EQ(Canonical(" PUBLIC . Order_* ,! public.audit_log"), "public.order_*,!public.audit_log");
  EXPECT_EQ(Canonical("\"My Schema\".\"a\"\"b\""), "\"My Schema\".\"a\"\"b\"");
  EXPECT_EQ(Canonical("p.\"a*\"*"), "p.\"a*\"*");
  EXPECT_EQ(Canonical("p.\"abc\""), "p.abc");
  EXPECT_EQ(Canonical("p.a\\b"), "p.\"a\\b\"");
  EXPECT_EQ(Canonical("p.my-table"), "p.\"my-table\"");
  Parsed p = Parse("a.*,!a.b");
  ASSERT_TRUE(p.scope);
  ASSERT_EQ(dblog_scope_size(p.scope.get()), 2);
  EXPECT_EQ(Canonical(p.scope.get(), 0), "a.*");
  EXPECT_EQ(Canonical(p.scope.get(), 1), "!a.b");
  char small[4];
  EXPECT_EQ(dblog_scope_format(p.scope.get(), -1, small, sizeof(small)), 8u);
  EXPECT_STREQ(small, "a.*");
}

// Random scopes over a small alphabet rich in the characters that need care (quotes, stars,
// dots, commas, spaces, upper case, a backslash), written with random quoting, folding and
// white space, compared with regular expressions built from the same segments.
TEST(ScopeMatchTest, RandomScopesAgreeWithARegexOracle) {
  std::mt19937 rng(20261201);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const std::string alphabet = "ab_1A\"*., \\";
  auto random_name = [&](int max_len) {
    std::string s;
    for (int i = pick(max_len + 1); i > 0; --i) s += alphabet[pick(static_cast<int>(alphabet.size()))];
    return s;
  };
  auto regex_escape = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) out += '\\';
      out += c;
    }
    return out;
  };
  auto space = [&] { return pick(4) == 0 ? std::string(" ") : std::string(); };
  // A part: 1 to 3 segments, each a wildcard or a literal; its text and its regex.
  auto random_part = [&](std::string* text, std::string* regex) {
    const int segments = 1 + pick(3);
    // Two quoted runs side by side would read as one ("a""b" is a"b), two unquoted ones too:
    // a literal run is never written right after one of its own kind.
    bool previous_unquoted = false, previous_quoted = false;
    for (int i = 0; i < segments; ++i) {
      if (pick(3) == 0) {
        *text += '*';
        *regex += ".*";
        previous_unquoted = previous_quoted = false;
        continue;
      }
      std::string lit = random_name(3);
      bool plain = !lit.empty();
      for (char c : lit) plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
      if (plain && !previous_unquoted && pick(2) == 0) {
        // unquoted: upper case folds, so the name it matches is the lower-case one
        std::string folded;
        for (char c : lit) folded += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (pick(2) == 0) {
          lit = folded;
        }
        *text += lit;
        *regex += regex_escape(folded);
        previous_unquoted = true;
        previous_quoted = false;
      } else if (!previous_quoted) {
        if (lit.empty()) lit = "a";
        std::string quoted = "\"";
        for (char c : lit) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
        *text += quoted + "\"";
        *regex += regex_escape(lit);
        previous_unquoted = false;
        previous_quoted = true;
      }
    }
  };
  int checked = 0, held = 0;
  for (int round = 0; round < 3000; ++round) {
    struct Oracle {
      bool exclude;
      std::regex schema, table;
    };
    std::vector<Oracle> oracle;
    std::string text;
    const int patterns = 1 + pick(3);
    bool positive = false;
    for (int i = 0; i < patterns; ++i) {
      const bool exclude = i > 0 && pick(3) == 0;
      positive = positive || !exclude;
      std::string schema_re, table_re;
      if (i > 0) text += space() + "," + space();
      if (exclude) text += "!" + space();
      random_part(&text, &schema_re);
      text += space() + "." + space();
      random_part(&text, &table_re);
      oracle.push_back({exclude, std::regex(schema_re), std::regex(table_re)});
    }
    ASSERT_TRUE(positive);
    Parsed p = Parse(text);
    ASSERT_TRUE(p.scope) << text << ": " << p.error;
    const std::string canonical = Canonical(p.scope.get());
    Parsed again = Parse(canonical);
    ASSERT_TRUE(again.scope) << canonical << ": " << again.error;
    EXPECT_EQ(Canonical(again.scope.get()), canonical);
    for (int probe = 0; probe < 20; ++probe) {
      const std::string schema = random_name(5), table = random_name(5);
      bool want = false, excluded = false;
      for (const Oracle& o : oracle)
        if (std::regex_match(schema, o.schema) && std::regex_match(table, o.table))
          (o.exclude ? excluded : want) = true;
      want = want && !excluded;
      ASSERT_EQ(dblog_scope_holds(p.scope.get(), schema.c_str(), table.c_str()), want)
          << "scope " << text << " on schema '" << schema << "' table '" << table << "'";
      ASSERT_EQ(dblog_scope_holds(again.scope.get(), schema.c_str(), table.c_str()), want)
          << "canonical " << canonical << " on schema '" << schema << "' table '" << table << "'";
      ++checked;
      held += want;
    }
  }
  // the probes reach both answers often enough to mean something
  EXPECT_GT(held, checked / 100);
  EXPECT_LT(held, checked - checked / 100);
}

TEST(ScopeMatchTest, DblogdConfigKeepsCaseAndStoresCanonicalText) {
  using dblog::config::ConfigError;
  // dblogd matches unquoted names as spelled, as it always did
  EXPECT_TRUE(dblog::config::ParseScope("app.Orders").Holds("app", "Orders"));
  EXPECT_FALSE(dblog::config::ParseScope("app.Orders").Holds("app", "orders"));
  EXPECT_EQ(dblog::config::ParseScope("app.Orders").text(), "app.\"Orders\"");
  try {
    dblog::config::ParseScope("public.*,!");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "scope 'public.*,!': at character 11: expected a name or * at the end of the scope");
  }
  const dblog::config::Scope s = dblog::config::ParseScope(" public.order_* , !public.order_x");
  EXPECT_EQ(s.text(), "public.order_*,!public.order_x");
  EXPECT_EQ(s.patterns(), (std::vector<std::string>{"public.order_*", "!public.order_x"}));
  EXPECT_TRUE(s.Holds("public", "order_a"));
  EXPECT_FALSE(s.Holds("public", "order_x"));
  EXPECT_FALSE(s.Holds("public", "orders"));
  EXPECT_FALSE(dblog::config::Scope().Holds("public", "t"));
}

}  // namespace
