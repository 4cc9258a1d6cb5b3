// A minimal JSON reader for test vectors (objects, arrays, strings, numbers, bools, null).
// Test-only: throws std::runtime_error on malformed input.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/core/utf8.h"

namespace ari::testing {

struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> arr;
  std::map<std::string, Json> obj;

  const Json& operator[](const std::string& key) const {
    auto it = obj.find(key);
    if (it == obj.end()) throw std::runtime_error("json: missing key " + key);
    return it->second;
  }
  bool Has(const std::string& key) const { return obj.count(key) != 0; }
  std::vector<int32_t> Ints() const {
    std::vector<int32_t> r;
    r.reserve(arr.size());
    for (const Json& j : arr) r.push_back(static_cast<int32_t>(j.num));
    return r;
  }
};

class JsonParser {
 public:
  static Json Parse(std::string_view text) {
    JsonParser p(text);
    Json j = p.Value();
    p.Ws();
    if (p.i_ != text.size()) throw std::runtime_error("json: trailing data");
    return j;
  }

 private:
  explicit JsonParser(std::string_view t) : t_(t) {}
  void Ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\n' || t_[i_] == '\r' || t_[i_] == '\t'))
      ++i_;
  }
  char Peek() {
    Ws();
    if (i_ >= t_.size()) throw std::runtime_error("json: unexpected end");
    return t_[i_];
  }
  void Expect(char c) {
    if (Peek() != c) throw std::runtime_error(std::string("json: expected ") + c);
    ++i_;
  }
  uint32_t Hex4() {
    if (i_ + 4 > t_.size()) throw std::runtime_error("json: bad \\u");
    uint32_t v = static_cast<uint32_t>(std::stoul(std::string(t_.substr(i_, 4)), nullptr, 16));
    i_ += 4;
    return v;
  }
  std::string String() {
    Expect('"');
    std::string s;
    while (true) {
      if (i_ >= t_.size()) throw std::runtime_error("json: unterminated string");
      char c = t_[i_++];
      if (c == '"') break;
      if (c != '\\') {
        s.push_back(c);
        continue;
      }
      char e = t_[i_++];
      switch (e) {
        case 'n': s.push_back('\n'); break;
        case 't': s.push_back('\t'); break;
        case 'r': s.push_back('\r'); break;
        case 'b': s.push_back('\b'); break;
        case 'f': s.push_back('\f'); break;
        case 'u': {
          uint32_t cp = Hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && t_.substr(i_, 2) == "\\u") {
            i_ += 2;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (Hex4() - 0xDC00);
          }
          runtime::AppendUtf8(cp, s);
          break;
        }
        default: s.push_back(e); break;
      }
    }
    return s;
  }
  Json Value() {
    Json j;
    char c = Peek();
    if (c == '{') {
      j.kind = Json::Kind::kObject;
      ++i_;
      if (Peek() == '}') return ++i_, j;
      while (true) {
        std::string k = String();
        Expect(':');
        j.obj[k] = Value();
        if (Peek() == ',') {
          ++i_;
          continue;
        }
        Expect('}');
        return j;
      }
    }
    if (c == '[') {
      j.kind = Json::Kind::kArray;
      ++i_;
      if (Peek() == ']') return ++i_, j;
      while (true) {
        j.arr.push_back(Value());
        if (Peek() == ',') {
          ++i_;
          continue;
        }
        Expect(']');
        return j;
      }
    }
    if (c == '"') {
      j.kind = Json::Kind::kString;
      j.str = String();
      return j;
    }
    if (t_.substr(i_, 4) == "true") {
      i_ += 4;
      j.kind = Json::Kind::kBool;
      j.b = true;
      return j;
    }
    if (t_.substr(i_, 5) == "false") {
      i_ += 5;
      j.kind = Json::Kind::kBool;
      return j;
    }
    if (t_.substr(i_, 4) == "null") {
      i_ += 4;
      return j;
    }
    size_t n = 0;
    j.kind = Json::Kind::kNumber;
    j.num = std::stod(std::string(t_.substr(i_, 64)), &n);
    i_ += n;
    return j;
  }

  std::string_view t_;
  size_t i_ = 0;
};

}  // namespace ari::testing
