// JSON Schema subset -> grammar text (json_schema.h).
#include "runtime/grammar/json_schema.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace ari::runtime {

namespace {

using Json = nlohmann::ordered_json;
using schema_internal::DecimalRange;
using schema_internal::IntegerRange;

constexpr int64_t kUnboundedMax = 999'999'999'999'999;  // 10^15 - 1

// The fixed part: whitespace, string characters, any JSON value.
constexpr std::string_view kPrelude = R"(ws ::= ( " " | "\n" " "{0,12} )?
json-char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" json-u4 )
json-u4 ::= [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ( "0" | [1-9] [0-9]{0,14} )
json-number ::= json-int ( "." [0-9]{1,15} )? ( [eE] [+\-]? [0-9]{1,3} )?
json-value ::= json-object | json-array | json-string | json-number | "true" | "false" | "null"
json-object ::= "{" ws ( json-string ws ":" ws json-value ( ws "," ws json-string ws ":" ws json-value )* )? ws "}"
json-array ::= "[" ws ( json-value ( ws "," ws json-value )* )? ws "]"
)";

// Keywords that would constrain the value in ways the grammar does not enforce.
const std::set<std::string, std::less<>>& Refused() {
  static const std::set<std::string, std::less<>> k = {"pattern",
                                                       "format",
                                                       "$ref",
                                                       "allOf",
                                                       "not",
                                                       "if",
                                                       "then",
                                                       "else",
                                                       "multipleOf",
                                                       "uniqueItems",
                                                       "contains",
                                                       "patternProperties",
                                                       "minProperties",
                                                       "maxProperties",
                                                       "dependentRequired",
                                                       "dependentSchemas",
                                                       "propertyNames",
                                                       "prefixItems",
                                                       "unevaluatedProperties",
                                                       "additionalItems",
                                                       "$defs",
                                                       "definitions"};
  return k;
}

// Concatenation by append (no temporaries; "x" + std::string also trips a GCC 12
// -Wrestrict false positive).
template <class... T>
std::string Cat(const T&... parts) {
  std::string s;
  ((s += parts), ...);
  return s;
}

// A grammar literal for raw bytes.
std::string Literal(std::string_view bytes) {
  std::string out = "\"";
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      static constexpr char kHex[] = "0123456789ABCDEF";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

class Converter {
 public:
  explicit Converter(const GrammarLimits& limits) : limits_(limits) {}

  Result<std::string> Run(const Json& schema) {
    auto root = Value(schema, "", 0);
    if (!root) return std::unexpected(root.error());
    return "root ::= " + *root + "\n" + std::string(kPrelude) + rules_;
  }

 private:
  std::unexpected<Error> Fail(const std::string& ptr, const std::string& what) const {
    return MakeError(ErrorCode::kInvalidArgument,
                     "json schema: at '" + (ptr.empty() ? std::string("/") : ptr) + "': " + what);
  }

  std::string NewRule(const std::string& body) {
    std::string name = "s";  // by append: "s" + to_string trips GCC 12 -Wrestrict
    name += std::to_string(next_++);
    rules_ += name + " ::= " + body + "\n";
    return name;
  }

  // Grammar expression for `s` at JSON pointer `ptr`.
  Result<std::string> Value(const Json& s, const std::string& ptr, int depth) {
    if (depth > limits_.max_nesting) {
      return Fail(ptr, "schema nested deeper than " + std::to_string(limits_.max_nesting));
    }
    if (s.is_boolean()) {
      if (s.get<bool>()) return std::string("json-value");
      return Fail(ptr, "schema 'false' admits no value (empty language)");
    }
    if (!s.is_object()) return Fail(ptr, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      if (Refused().contains(k))
        return Fail(Cat(ptr, "/", k), Cat("keyword '", k, "' is not supported"));
    }
    if (s.contains("const")) return Literal(s["const"].dump(-1, ' ', false));
    if (s.contains("enum")) return Enum(s["enum"], ptr + "/enum");
    for (const char* kw : {"anyOf", "oneOf"}) {
      if (s.contains(kw)) return AnyOf(s[kw], ptr + "/" + kw, depth);
    }
    if (!s.contains("type")) return std::string("json-value");
    const Json& t = s["type"];
    if (t.is_string()) return Typed(s, t.get<std::string>(), ptr, depth);
    if (!t.is_array() || t.empty()) return Fail(ptr + "/type", "must be a string or a list");
    std::string out = "(";
    for (size_t i = 0; i < t.size(); ++i) {
      if (!t[i].is_string()) return Fail(ptr + "/type/" + std::to_string(i), "must be a string");
      auto v = Typed(s, t[i].get<std::string>(), ptr, depth);
      if (!v) return v;
      out += (i ? " | " : " ") + *v;
    }
    return out + " )";
  }

  Result<std::string> Enum(const Json& e, const std::string& ptr) {
    if (!e.is_array() || e.empty()) return Fail(ptr, "must be a non-empty list");
    std::string out = "(";
    for (size_t i = 0; i < e.size(); ++i) {
      out += (i ? " | " : " ") + Literal(e[i].dump(-1, ' ', false));
    }
    return out + " )";
  }

  Result<std::string> AnyOf(const Json& e, const std::string& ptr, int depth) {
    if (!e.is_array() || e.empty()) return Fail(ptr, "must be a non-empty list");
    std::string out = "(";
    for (size_t i = 0; i < e.size(); ++i) {
      auto v = Value(e[i], ptr + "/" + std::to_string(i), depth + 1);
      if (!v) return v;
      out += (i ? " | " : " ") + *v;
    }
    return out + " )";
  }

  Result<std::string> Typed(const Json& s, const std::string& type, const std::string& ptr,
                            int depth) {
    if (type == "object") return Object(s, ptr, depth);
    if (type == "array") return Array(s, ptr, depth);
    if (type == "string") return String(s, ptr);
    if (type == "integer") return Integer(s, ptr);
    if (type == "number") return Number(s, ptr);
    if (type == "boolean") return std::string("( \"true\" | \"false\" )");
    if (type == "null") return std::string("\"null\"");
    return Fail(ptr + "/type", "unknown type '" + type + "'");
  }

  // A non-negative integer keyword, or `fallback` when absent.
  Result<int64_t> Count(const Json& s, const char* key, const std::string& ptr, int64_t fallback) {
    if (!s.contains(key)) return fallback;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return Fail(ptr + "/" + key, "must be a non-negative integer");
    }
    if (v.get<int64_t>() > limits_.max_repeat) {
      return Fail(ptr + "/" + key, "above the limit of " + std::to_string(limits_.max_repeat));
    }
    return v.get<int64_t>();
  }

  Result<std::string> String(const Json& s, const std::string& ptr) {
    auto lo = Count(s, "minLength", ptr, 0);
    if (!lo) return std::unexpected(lo.error());
    auto hi = Count(s, "maxLength", ptr, -1);
    if (!hi) return std::unexpected(hi.error());
    if (*hi >= 0 && *hi < *lo) return Fail(ptr, "maxLength < minLength (empty language)");
    if (*lo == 0 && *hi < 0) return std::string("json-string");
    std::string rep = "{";
    rep += std::to_string(*lo);
    rep += ',';
    if (*hi >= 0) rep += std::to_string(*hi);
    rep += '}';
    return NewRule("\"\\\"\" json-char" + rep + " \"\\\"\"");
  }

  Result<std::pair<int64_t, int64_t>> Bounds(const Json& s, const std::string& ptr, bool integer) {
    int64_t lo = -kUnboundedMax, hi = kUnboundedMax;
    for (const char* key : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (!s.contains(key)) continue;
      const Json& v = s[key];
      const bool excl = key[0] == 'e';
      if (!v.is_number()) return Fail(ptr + "/" + key, "must be a number");
      if (excl && !integer) return Fail(ptr + "/" + key, "supported for integers only");
      const double d = v.get<double>();
      if (!(std::fabs(d) <= static_cast<double>(kUnboundedMax))) {
        return Fail(ptr + "/" + key, "beyond +-(10^15 - 1)");
      }
      const bool is_min = std::string_view(key).find("inimum") != std::string_view::npos;
      if (is_min) {
        int64_t b = static_cast<int64_t>(std::ceil(d));
        if (excl && static_cast<double>(b) == d) ++b;
        lo = std::max(lo, b);
      } else {
        int64_t b = static_cast<int64_t>(std::floor(d));
        if (excl && static_cast<double>(b) == d) --b;
        hi = std::min(hi, b);
      }
    }
    if (lo > hi)
      return Fail(ptr,
                  "the range [minimum, maximum] holds no value the grammar can "
                  "produce (empty language; bounds are rounded inward to integers)");
    return std::make_pair(lo, hi);
  }

  Result<std::string> Integer(const Json& s, const std::string& ptr) {
    auto b = Bounds(s, ptr, true);
    if (!b) return std::unexpected(b.error());
    if (b->first == -kUnboundedMax && b->second == kUnboundedMax) return std::string("json-int");
    return NewRule(IntegerRange(b->first, b->second));
  }

  Result<std::string> Number(const Json& s, const std::string& ptr) {
    auto b = Bounds(s, ptr, false);
    if (!b) return std::unexpected(b.error());
    if (b->first == -kUnboundedMax && b->second == kUnboundedMax) return std::string("json-number");
    return NewRule(DecimalRange(b->first, b->second));
  }

  Result<std::string> Array(const Json& s, const std::string& ptr, int depth) {
    std::string item = "json-value";
    if (s.contains("items")) {
      auto v = Value(s["items"], ptr + "/items", depth + 1);
      if (!v) return v;
      item = *v;
    }
    auto lo = Count(s, "minItems", ptr, 0);
    if (!lo) return std::unexpected(lo.error());
    auto hi = Count(s, "maxItems", ptr, -1);
    if (!hi) return std::unexpected(hi.error());
    if (*hi >= 0 && *hi < *lo) return Fail(ptr, "maxItems < minItems (empty language)");
    const std::string it = NewRule(item);
    std::string more = "( ws \",\" ws " + it + " )";
    const int64_t m1 = std::max<int64_t>(*lo - 1, 0);
    more += '{';
    more += std::to_string(m1);
    more += ',';
    if (*hi >= 0) more += std::to_string(*hi - 1);
    more += '}';
    std::string body = "\"[\" ws " + it + " " + more + " ws \"]\"";
    if (*hi == 0) return std::string("( \"[\" ws \"]\" )");
    if (*lo == 0) body = "\"[\" ws \"]\" | " + body;
    return NewRule(body);
  }

  Result<std::string> Object(const Json& s, const std::string& ptr, int depth) {
    std::set<std::string> required;
    if (s.contains("required")) {
      const Json& r = s["required"];
      if (!r.is_array()) return Fail(ptr + "/required", "must be a list of names");
      for (const Json& n : r) {
        if (!n.is_string()) return Fail(ptr + "/required", "must be a list of names");
        required.insert(n.get<std::string>());
      }
    }
    std::vector<std::pair<std::string, bool>> kvs;  // rule, required
    if (s.contains("properties")) {
      const Json& props = s["properties"];
      if (!props.is_object()) return Fail(ptr + "/properties", "must be an object");
      for (const auto& [name, sub] : props.items()) {
        auto v = Value(sub, Cat(ptr, "/properties/", name), depth + 1);
        if (!v) return v;
        const std::string key = Literal(Json(name).dump(-1, ' ', false));
        kvs.emplace_back(NewRule(Cat(key, " ws \":\" ws ", *v)), required.erase(name) > 0);
      }
    }
    if (!required.empty()) {
      return Fail(ptr + "/required",
                  "'" + *required.begin() + "' is required but not in properties");
    }
    // tail_i: properties i.. after one was written; first_i: when none was written yet.
    std::string tail = "\"\"", first = "\"\"";
    for (size_t i = kvs.size(); i-- > 0;) {
      const auto& [kv, req] = kvs[i];
      const std::string t = NewRule(req ? Cat("ws \",\" ws ", kv, " ", tail)
                                        : Cat("( ws \",\" ws ", kv, " )? ", tail));
      const std::string f = NewRule(req ? Cat(kv, " ", tail) : Cat(kv, " ", tail, " | ", first));
      tail = t;
      first = f;
    }
    return NewRule("\"{\" ws " + first + " ws \"}\"");
  }

  GrammarLimits limits_;
  std::string rules_;
  int next_ = 0;
};

}  // namespace

Result<std::string> JsonSchemaToGrammar(std::string_view schema_json, const GrammarLimits& limits) {
  if (schema_json.size() > limits.max_text_bytes) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "json schema: " + std::to_string(schema_json.size()) +
                         " bytes, more than the limit of " + std::to_string(limits.max_text_bytes));
  }
  Json schema;
  try {  // not on the token loop: schemas are compiled when a request arrives
    schema = Json::parse(schema_json);
  } catch (const Json::parse_error& e) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i + 1 < e.byte && i < schema_json.size(); ++i) {
      col = schema_json[i] == '\n' ? 1 : col + 1;
      line += schema_json[i] == '\n' ? 1 : 0;
    }
    return MakeError(ErrorCode::kInvalidArgument, "json schema: line " + std::to_string(line) +
                                                      ", column " + std::to_string(col) +
                                                      ": malformed JSON (" + e.what() + ")");
  } catch (const Json::exception& e) {  // e.g. out_of_range 406: a number beyond double
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("json schema: unreadable JSON (") + e.what() + ")");
  }
  return Converter(limits).Run(schema);
}

Result<std::shared_ptr<const CompiledGrammar>> CompileJsonSchema(std::string_view schema_json,
                                                                 const GrammarLimits& limits) {
  auto text = JsonSchemaToGrammar(schema_json, limits);
  if (!text) return std::unexpected(text.error());
  auto g = CompiledGrammar::Parse(*text, limits);
  if (!g) {
    return MakeError(g.error().code, "json schema: the generated grammar: " + g.error().message);
  }
  return g;
}

}  // namespace ari::runtime
