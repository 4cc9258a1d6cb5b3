// Test oracle for structured output: validates a JSON text against the JSON Schema subset
// of runtime/grammar/json_schema.h. Shares no code with the grammar or the mask builder:
// nlohmann-json parses both texts, the checks below are written from the JSON Schema
// specification. Returns "" when valid, else what is wrong.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace ari::testing {

inline std::string ValidateValue(const nlohmann::json& v, const nlohmann::json& s,
                                 const std::string& at);

inline bool JsonTypeIs(const nlohmann::json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    return v.is_number_integer() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  }
  return false;
}

inline size_t Utf8Length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline std::string ValidateTyped(const nlohmann::json& v, const nlohmann::json& s,
                                 const std::string& t, const std::string& at) {
  if (!JsonTypeIs(v, t)) return at + ": not of type " + t;
  if (v.is_number()) {
    const double d = v.get<double>();
    if (s.contains("minimum") && d < s["minimum"].get<double>()) return at + ": below minimum";
    if (s.contains("maximum") && d > s["maximum"].get<double>()) return at + ": above maximum";
    if (s.contains("exclusiveMinimum") && d <= s["exclusiveMinimum"].get<double>()) {
      return at + ": not above exclusiveMinimum";
    }
    if (s.contains("exclusiveMaximum") && d >= s["exclusiveMaximum"].get<double>()) {
      return at + ": not below exclusiveMaximum";
    }
  }
  if (v.is_string()) {
    const size_t n = Utf8Length(v.get<std::string>());
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return at + ": too long";
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return at + ": too short";
  }
  if (v.is_array()) {
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) {
      return at + ": too many items";
    }
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) {
      return at + ": too few items";
    }
    if (s.contains("items")) {
      for (size_t i = 0; i < v.size(); ++i) {
        std::string e = ValidateValue(v[i], s["items"], at + "/" + std::to_string(i));
        if (!e.empty()) return e;
      }
    }
  }
  if (v.is_object()) {
    const nlohmann::json props = s.value("properties", nlohmann::json::object());
    for (const auto& [k, sub] : v.items()) {
      std::string where = at;
      where += "/";
      where += k;
      if (!props.contains(k)) return where + ": unexpected property";
      std::string e = ValidateValue(sub, props[k], where);
      if (!e.empty()) return e;
    }
    for (const auto& r : s.value("required", nlohmann::json::array())) {
      if (!v.contains(r.get<std::string>())) return at + ": missing " + r.get<std::string>();
    }
  }
  return "";
}

inline std::string ValidateValue(const nlohmann::json& v, const nlohmann::json& s,
                                 const std::string& at) {
  if (s.is_boolean()) return s.get<bool>() ? "" : at + ": schema false";
  if (s.contains("const") && v != s["const"]) return at + ": not the const value";
  if (s.contains("enum")) {
    bool found = false;
    for (const auto& e : s["enum"]) found = found || e == v;
    if (!found) return at + ": not in enum";
  }
  for (const char* kw : {"anyOf", "oneOf"}) {
    if (!s.contains(kw)) continue;
    int ok = 0;
    for (const auto& sub : s[kw]) ok += ValidateValue(v, sub, at).empty();
    if (ok == 0) return at + ": matches no " + kw + " branch";
  }
  if (!s.contains("type")) return "";
  if (s["type"].is_string()) return ValidateTyped(v, s, s["type"].get<std::string>(), at);
  std::string last = at + ": no type matches";
  for (const auto& t : s["type"]) {
    last = ValidateTyped(v, s, t.get<std::string>(), at);
    if (last.empty()) return "";
  }
  return last;
}

// `text` parses as JSON and validates against `schema_text`.
inline std::string ValidateJson(const std::string& text, const std::string& schema_text) {
  nlohmann::json v = nlohmann::json::parse(text, nullptr, false);
  if (v.is_discarded()) return "not JSON: " + text;
  nlohmann::json s = nlohmann::json::parse(schema_text, nullptr, false);
  if (s.is_discarded()) return "schema not JSON";
  std::string e = ValidateValue(v, s, "");
  return e.empty() ? "" : e + " in " + text;
}

}  // namespace ari::testing
