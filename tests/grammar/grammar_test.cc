// The grammar syntax (runtime/grammar/grammar.h) and the byte-level matcher
// (grammar_matcher.h): each construct accepts what it should and refuses the rest; bad
// grammars are refused with the problem and its line:column.
#include "runtime/grammar/grammar.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/grammar/grammar_matcher.h"

namespace ari::runtime {
namespace {

std::shared_ptr<const CompiledGrammar> Compile(const std::string& text) {
  auto g = CompiledGrammar::Parse(text);
  EXPECT_TRUE(g.has_value()) << (g ? "" : g.error().ToString());
  return g ? *g : nullptr;
}

// Whether `input` is a complete sentence of `grammar`.
bool Matches(const std::string& grammar, std::string_view input) {
  auto g = Compile(grammar);
  if (!g) return false;
  GrammarMatcher m(g);
  return m.AcceptBytes(input) && m.IsAccepting();
}

// Whether `input` is a prefix of some sentence.
bool Prefix(const std::string& grammar, std::string_view input) {
  auto g = Compile(grammar);
  if (!g) return false;
  GrammarMatcher m(g);
  return m.AcceptBytes(input);
}

std::string ErrorOf(const std::string& text, const GrammarLimits& limits = {}) {
  auto g = CompiledGrammar::Parse(text, limits);
  EXPECT_FALSE(g.has_value()) << "accepted: " << text;
  if (g) return "";
  EXPECT_EQ(g.error().code, ErrorCode::kInvalidArgument);
  return g.error().message;
}

TEST(Grammar, LiteralsAndSequences) {
  EXPECT_TRUE(Matches(R"(root ::= "ab" "c")", "abc"));
  EXPECT_FALSE(Matches(R"(root ::= "ab" "c")", "ab"));
  EXPECT_TRUE(Prefix(R"(root ::= "ab" "c")", "ab"));
  EXPECT_FALSE(Prefix(R"(root ::= "ab" "c")", "abd"));
  EXPECT_FALSE(Matches(R"(root ::= "ab" "c")", "abcc"));
  EXPECT_TRUE(Matches(R"(root ::= "")", ""));
}

TEST(Grammar, Escapes) {
  EXPECT_TRUE(Matches(R"(root ::= "a\n\t\"\\")", "a\n\t\"\\"));
  EXPECT_TRUE(Matches(R"(root ::= "\x41\u00e9\U0001F600")", "A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_TRUE(Matches(R"(root ::= [\u00e0-\u00ff])", "\xC3\xA9"));   // é
  EXPECT_FALSE(Matches(R"(root ::= [\u00e0-\u00ff])", "\xC3\x80"));  // À
}

TEST(Grammar, AlternativesAndGroups) {
  const std::string g = R"(root ::= ("yes" | "no") ("!" | ""))";
  EXPECT_TRUE(Matches(g, "yes"));
  EXPECT_TRUE(Matches(g, "no!"));
  EXPECT_FALSE(Matches(g, "maybe"));
}

TEST(Grammar, RulesAcrossLinesAndComments) {
  const std::string g =
      "# a comment\n"
      "root ::= greeting \" \" name  # trailing comment\n"
      "greeting ::= \"hi\"\n"
      "  | \"hello\"\n"
      "name ::= [a-z]+\n";
  EXPECT_TRUE(Matches(g, "hello bob"));
  EXPECT_TRUE(Matches(g, "hi x"));
  EXPECT_FALSE(Matches(g, "hi "));
  EXPECT_FALSE(Matches(g, "hey bob"));
}

TEST(Grammar, Repetitions) {
  EXPECT_TRUE(Matches(R"(root ::= "a"?)", ""));
  EXPECT_TRUE(Matches(R"(root ::= "a"?)", "a"));
  EXPECT_FALSE(Matches(R"(root ::= "a"?)", "aa"));
  EXPECT_TRUE(Matches(R"(root ::= "ab"*)", "ababab"));
  EXPECT_FALSE(Matches(R"(root ::= "ab"*)", "aba"));
  EXPECT_FALSE(Matches(R"(root ::= "a"+)", ""));
  EXPECT_TRUE(Matches(R"(root ::= "a"+)", "aaaa"));
  EXPECT_TRUE(Matches(R"(root ::= [0-9]{3})", "123"));
  EXPECT_FALSE(Matches(R"(root ::= [0-9]{3})", "12"));
  EXPECT_FALSE(Prefix(R"(root ::= [0-9]{3})", "1234"));
  EXPECT_TRUE(Matches(R"(root ::= [0-9]{2,4})", "12"));
  EXPECT_TRUE(Matches(R"(root ::= [0-9]{2,4})", "1234"));
  EXPECT_FALSE(Prefix(R"(root ::= [0-9]{2,4})", "12345"));
  EXPECT_TRUE(Matches(R"(root ::= [0-9]{2,})", "1234567"));
  EXPECT_FALSE(Matches(R"(root ::= [0-9]{2,})", "1"));
  EXPECT_TRUE(Matches(R"(root ::= ("a" | "b"){0,3} "c")", "abac"));
  EXPECT_FALSE(Matches(R"(root ::= ("a" | "b"){0,3} "c")", "ababc"));
  EXPECT_TRUE(Matches(R"(root ::= ("a" | "b"){0,3} "c")", "abc"));
}

TEST(Grammar, ClassesAndNegation) {
  EXPECT_TRUE(Matches(R"(root ::= [a-cx]+)", "abxc"));
  EXPECT_FALSE(Matches(R"(root ::= [a-cx]+)", "abd"));
  EXPECT_TRUE(Matches(R"(root ::= [^"\\]*)", "anything \xE2\x82\xAC but"));
  EXPECT_FALSE(Prefix(R"(root ::= [^"\\]*)", "no\"quote"));
  EXPECT_TRUE(Matches(R"(root ::= .)", "\xE2\x82\xAC"));  // one code point, three bytes
  EXPECT_FALSE(Matches(R"(root ::= .)", "ab"));
  EXPECT_TRUE(Matches(R"(root ::= [\-\]])", "]"));
}

TEST(Grammar, Utf8BytesOneAtATime) {
  auto g = Compile(R"(root ::= "\u20AC" | "\u00e9")");
  GrammarMatcher m(g);
  ASSERT_TRUE(m.PushByte(0xE2));   // can still become €
  EXPECT_FALSE(m.PushByte(0xA9));  // E2 A9 .. is no prefix of €
  EXPECT_FALSE(m.IsAccepting());   // in the middle of a character
  ASSERT_TRUE(m.PushByte(0x82));
  ASSERT_TRUE(m.PushByte(0xAC));
  EXPECT_TRUE(m.IsAccepting());
  m.Reset();
  EXPECT_FALSE(m.PushByte(0xF0));  // no 4-byte character in the grammar
  EXPECT_FALSE(m.PushByte(0xC0));  // never valid UTF-8
  EXPECT_FALSE(m.AcceptBytes("\xC3\x28"));
  EXPECT_FALSE(m.AcceptBytes("\xED\xA0\x80"));  // a surrogate
}

TEST(Grammar, PopFrameRestoresState) {
  auto g = Compile(R"(root ::= "ab" | "ac")");
  GrammarMatcher m(g);
  ASSERT_TRUE(m.PushByte('a'));
  ASSERT_TRUE(m.PushByte('b'));
  EXPECT_TRUE(m.IsAccepting());
  m.PopFrame();
  ASSERT_TRUE(m.PushByte('c'));
  EXPECT_TRUE(m.IsAccepting());
  m.PopFrame();
  m.PopFrame();
  EXPECT_EQ(m.frames(), 1);
  EXPECT_TRUE(m.AcceptBytes("ac"));
  EXPECT_FALSE(m.CanContinue());
}

TEST(Grammar, RecursionAndLongInputStaysBounded) {
  const std::string g = "root ::= \"(\" root \")\" | \"x\"";
  EXPECT_TRUE(Matches(g, "((x))"));
  EXPECT_FALSE(Matches(g, "((x)"));
  // Right recursion through a repetition runs in constant stack depth (tail calls).
  auto c = Compile(R"(root ::= ("ab" | "c")*)");
  GrammarMatcher m(c);
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(m.AcceptBytes(i % 2 ? "ab" : "c")) << i;
  EXPECT_TRUE(m.IsAccepting());
  EXPECT_EQ(m.dropped_paths(), 0);
  // Nesting beyond max_depth is refused, not accepted unchecked.
  MatcherLimits lim;
  lim.max_depth = 16;
  GrammarMatcher deep(Compile(g), lim);
  bool refused = false;
  for (int i = 0; i < 40 && !refused; ++i) refused = !deep.AcceptBytes("(");
  EXPECT_TRUE(refused);
}

TEST(GrammarErrors, NamePositionAndProblem) {
  EXPECT_NE(ErrorOf("root ::= \"abc").find("line 1, column 10: unterminated string"),
            std::string::npos);
  EXPECT_NE(ErrorOf("root ::= a\n").find("line 1, column 10: rule 'a' is used but not defined"),
            std::string::npos);
  EXPECT_NE(ErrorOf("x ::= \"a\"\n").find("no rule named 'root'"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= \"a\"\nroot ::= \"b\"")
                .find("line 2, column 1: rule 'root' is "
                      "defined twice"),
            std::string::npos);
  EXPECT_NE(ErrorOf("root ::= [z-a]").find("line 1, column 11"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= \"\\uD800\"").find("not a Unicode scalar"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= (\"a\"").find("line 1, column 10: unclosed '('"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= \"a\"{3,2}").find("n < m"), std::string::npos);
  EXPECT_NE(ErrorOf("root ::= \n  \"a\" @").find("line 2, column 7: unexpected character"),
            std::string::npos);
  EXPECT_NE(ErrorOf("").find("empty"), std::string::npos);
}

TEST(GrammarErrors, LeftRecursionAndEmptyLanguage) {
  EXPECT_NE(ErrorOf("root ::= root \"a\" | \"b\"").find("'root' is left-recursive"),
            std::string::npos);
  EXPECT_NE(ErrorOf("root ::= e x\ne ::= \"\"?\nx ::= root").find("left-recursive"),
            std::string::npos);
  EXPECT_NE(ErrorOf("root ::= \"(\" root \")\"").find("line 1, column 1: empty language"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"(root ::= [^\x00-\U0010FFFF])").find("empty language"), std::string::npos);
  // An unproductive alternative next to a productive one is fine (and dropped).
  EXPECT_TRUE(Matches("root ::= \"a\" loop | \"b\"\nloop ::= \"x\" loop", "b"));
}

TEST(GrammarErrors, Limits) {
  GrammarLimits l;
  l.max_text_bytes = 16;
  EXPECT_NE(ErrorOf("root ::= \"aaaaaaaaaaaaaa\"", l).find("more than the limit of 16"),
            std::string::npos);
  l = {};
  l.max_nesting = 3;
  EXPECT_NE(ErrorOf("root ::= ((((\"a\"))))", l).find("line 1, column 13: groups nested deeper"),
            std::string::npos);
  l = {};
  l.max_repeat = 100;
  EXPECT_NE(ErrorOf("root ::= \"a\"{101}", l).find("repetition count above 100"),
            std::string::npos);
  l = {};
  l.max_rules = 4;
  EXPECT_NE(ErrorOf("root ::= \"a\"{0,9}", l).find("more than 4 rules"), std::string::npos);
  l = {};
  l.max_elements = 1000;
  EXPECT_NE(ErrorOf("root ::= (\"aaaaaaaaaa\"{100}){100}", l).find("grammar elements"),
            std::string::npos);
}

}  // namespace
}  // namespace ari::runtime
