// JSON Schema subset -> grammar (runtime/grammar/json_schema.h): per feature, sentences of
// the grammar are exactly the valid JSON texts (checked against the independent validator
// of json_validator.h, itself tested here first); bad schemas are refused with the JSON
// pointer or line:column.
#include "runtime/grammar/json_schema.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/grammar/grammar_matcher.h"
#include "tests/grammar/json_validator.h"

namespace ari::runtime {
namespace {

using ari::testing::ValidateJson;

bool Accepts(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.AcceptBytes(text) && m.IsAccepting();
}

// For each candidate: the grammar accepts it exactly when the validator does.
void ExpectAgree(const std::string& schema, const std::vector<std::string>& candidates) {
  auto g = CompileJsonSchema(schema);
  ASSERT_TRUE(g.has_value()) << g.error().ToString();
  for (const std::string& c : candidates) {
    const bool valid = ValidateJson(c, schema).empty();
    EXPECT_EQ(Accepts(*g, c), valid)
        << "schema " << schema << "\ntext " << c << "\nvalidator: " << ValidateJson(c, schema);
  }
}

// Concatenation by append ("x" + std::to_string(n) trips a GCC 12 -Wrestrict false positive).
std::string Cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out += p;
  return out;
}

std::string ErrorOf(const std::string& schema) {
  auto g = CompileJsonSchema(schema);
  EXPECT_FALSE(g.has_value()) << schema;
  return g ? "" : g.error().message;
}

TEST(JsonValidator, ChecksTheSubset) {
  const std::string s = R"({"type":"object","properties":{"a":{"type":"integer","minimum":1},
    "b":{"type":"string","maxLength":2}},"required":["a"]})";
  EXPECT_EQ(ValidateJson(R"({"a":1,"b":"xy"})", s), "");
  EXPECT_NE(ValidateJson(R"({"a":0})", s), "");
  EXPECT_NE(ValidateJson(R"({"b":"x"})", s), "");
  EXPECT_NE(ValidateJson(R"({"a":1,"b":"xyz"})", s), "");
  EXPECT_NE(ValidateJson(R"({"a":1,"c":1})", s), "");
  EXPECT_NE(ValidateJson(R"({"a":1)", s), "");
  EXPECT_NE(ValidateJson(R"({"a":1.5})", s), "");
}

TEST(JsonSchema, BooleanNullConstEnum) {
  ExpectAgree(R"({"type":"boolean"})", {"true", "false", "null", "tru", "1"});
  ExpectAgree(R"({"type":"null"})", {"null", "true"});
  ExpectAgree(R"({"const":"on"})", {"\"on\"", "\"off\"", "on"});
  ExpectAgree(R"({"enum":["play","pause",3,null,"a\"b"]})",
              {"\"play\"", "\"pause\"", "3", "null", "\"stop\"", "\"a\\\"b\"", "4"});
}

TEST(JsonSchema, Strings) {
  ExpectAgree(R"({"type":"string","maxLength":3})",
              {"\"\"", "\"abc\"", "\"abcd\"", "\"\\n\\u00e9x\"", "\"\xC3\xA9\xC3\xA9\xC3\xA9\"",
               "\"\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\"", "\"a\nb\"", "\"\\q\""});
  ExpectAgree(R"({"type":"string","minLength":2})", {"\"a\"", "\"ab\"", "\"abcdefgh\""});
  // Lone surrogate escapes are never produced (nlohmann refuses them too).
  auto g = CompileJsonSchema(R"({"type":"string"})");
  ASSERT_TRUE(g.has_value());
  EXPECT_FALSE(Accepts(*g, "\"\\ud800\""));
  EXPECT_TRUE(Accepts(*g, "\"\\u20ac\""));
}

TEST(JsonSchema, IntegerRangesAreExact) {
  for (auto [lo, hi] : std::vector<std::pair<int, int>>{{0, 0},
                                                        {0, 9},
                                                        {5, 17},
                                                        {16, 30},
                                                        {-40, 85},
                                                        {-273, -3},
                                                        {1, 1000},
                                                        {99, 101},
                                                        {123, 4567},
                                                        {-5, 0}}) {
    const std::string schema = Cat({"{\"type\":\"integer\",\"minimum\":", std::to_string(lo),
                                    ",\"maximum\":", std::to_string(hi), "}"});
    auto g = CompileJsonSchema(schema);
    ASSERT_TRUE(g.has_value()) << g.error().ToString();
    for (int v = lo - 120; v <= hi + 120; ++v) {
      EXPECT_EQ(Accepts(*g, std::to_string(v)), v >= lo && v <= hi) << schema << " " << v;
    }
    EXPECT_FALSE(Accepts(*g, Cat({"0", std::to_string(std::max(lo, 1))})));  // leading zero
    EXPECT_FALSE(Accepts(*g, Cat({std::to_string(lo), ".0"})));
  }
  ExpectAgree(R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":3})",
              {"0", "1", "2", "3"});
  ExpectAgree(R"({"type":"integer"})", {"0", "-0", "12", "-12", "012", "1.5"});
  // Valid but never produced: an integer written with an exponent (the subset is documented).
  EXPECT_FALSE(Accepts(*CompileJsonSchema(R"({"type":"integer"})"), "1e3"));
  ExpectAgree(R"({"type":"integer","minimum":10})", {"9", "10", "999999"});
}

TEST(JsonSchema, NumbersWithinBounds) {
  ExpectAgree(R"({"type":"number","minimum":16,"maximum":30})",
              {"16", "16.5", "29.999", "30", "30.0", "30.5", "15.9", "31", "22.25", "-16", "1e1",
               "16.", "016"});
  ExpectAgree(R"({"type":"number","minimum":-2,"maximum":2})",
              {"-2", "-2.0", "-2.1", "-1.5", "-0.5", "0", "-0", "1.999", "2", "2.01"});
  ExpectAgree(R"({"type":"number"})", {"1", "-1.5", "1e5", "1.5E-3", "01", "1.", ".5", "-"});
}

TEST(JsonSchema, Arrays) {
  ExpectAgree(R"({"type":"array","items":{"type":"integer","minimum":0,"maximum":9},
      "maxItems":3})",
              {"[]", "[1]", "[1,2,3]", "[1, 2, 3]", "[1,2,3,4]", "[10]", "[1,]", "[,1]"});
  ExpectAgree(R"({"type":"array","items":{"type":"boolean"},"minItems":2,"maxItems":2})",
              {"[]", "[true]", "[true,false]", "[true,false,true]"});
  ExpectAgree(R"({"type":"array","items":{"type":"boolean"},"minItems":1})",
              {"[]", "[true]", "[true,false,true,true]"});
}

TEST(JsonSchema, ObjectsRequiredOptionalNested) {
  const std::string s = R"({"type":"object","properties":{
      "a":{"type":"integer","minimum":0,"maximum":5},
      "b":{"type":"boolean"},
      "c":{"type":"object","properties":{"d":{"enum":["x","y"]}},"required":["d"]}},
    "required":["b"]})";
  ExpectAgree(s, {R"({"b":true})", R"({"a":1,"b":false})", R"({"b":true,"c":{"d":"x"}})",
                  R"({"a":3,"b":true,"c":{"d":"y"}})", R"({ "a": 3, "b": true })", R"({"a":1})",
                  R"({})", R"({"b":true,"c":{}})", R"({"a":1,,"b":true})", R"({,"b":true})",
                  R"({"b":true,})", R"({"b":true,"z":1})"});
  // Valid but never produced: properties out of their declared order.
  EXPECT_FALSE(Accepts(*CompileJsonSchema(s), R"({"b":true,"a":1})"));
  ExpectAgree(R"({"type":"object","properties":{"x":{"type":"null"},"y":{"type":"null"}}})",
              {"{}", R"({"x":null})", R"({"y":null})", R"({"x":null,"y":null})", R"({"x":null,})",
               R"({,"y":null})"});
}

TEST(JsonSchema, TypeListsAnyOfAndAnyValue) {
  ExpectAgree(R"({"type":["string","null"],"maxLength":1})", {"null", "\"a\"", "\"ab\"", "1"});
  ExpectAgree(R"({"anyOf":[{"type":"integer","minimum":0,"maximum":3},{"const":"none"}]})",
              {"0", "3", "4", "\"none\"", "\"some\""});
  ExpectAgree(R"({})", {"1", "\"x\"", R"({"a":[1,{"b":null}]})", "[", "{\"a\"}"});
}

TEST(JsonSchemaErrors, NameThePointerOrPosition) {
  EXPECT_NE(ErrorOf("{\"type\":\n \"object\",}").find("line 2, column 11: malformed JSON"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"string","pattern":"^a"})").find("'/pattern': keyword 'pattern'"),
            std::string::npos);
  EXPECT_NE(
      ErrorOf(R"({"properties":{"a":{"$ref":"#"}},"type":"object"})").find("'/properties/a/$ref'"),
      std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"integer","minimum":5,"maximum":4})").find("empty language"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"number","minimum":0.2,"maximum":0.8})").find("empty language"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"string","minLength":3,"maxLength":2})").find("empty language"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"object","required":["x"]})").find("'x' is required"),
            std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"tuple"})").find("'/type': unknown type"), std::string::npos);
  EXPECT_NE(ErrorOf("false").find("empty language"), std::string::npos);
  // A number too large for a double (found by grammar_fuzz): an error, never a throw.
  EXPECT_NE(
      ErrorOf(R"({"type":"string","maxLength":777777777e7777777777})").find("number overflow"),
      std::string::npos);
  EXPECT_NE(ErrorOf(R"({"type":"string","maxLength":100000})").find("'/maxLength'"),
            std::string::npos);
  std::string deep = R"({"type":"string"})";
  for (int i = 0; i < 80; ++i) deep = Cat({R"({"type":"array","items":)", deep, "}"});
  EXPECT_NE(ErrorOf(deep).find("nested deeper than 64"), std::string::npos);
  GrammarLimits small;
  small.max_text_bytes = 10;
  auto g = CompileJsonSchema(R"({"type":"boolean"})", small);
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.error().message.find("limit of 10"), std::string::npos);
}

}  // namespace
}  // namespace ari::runtime
