// Test helpers for the llama2.c golden tests: a minimal JSON reader for
// reference_outputs.json and in-process conversion of a llama2.c checkpoint to a Model.
#pragma once

#include <cctype>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/convert/llama2c_import.h"
#include "runtime/core/mapped_file.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/model.h"

namespace ari::testing {

// JSON value: enough for reference_outputs.json (objects, arrays, strings, numbers).
struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  double number = 0;
  bool boolean = false;
  std::string str;
  std::vector<Json> items;
  std::map<std::string, Json> fields;

  const Json& operator[](const std::string& k) const {
    static const Json null;
    auto it = fields.find(k);
    return it == fields.end() ? null : it->second;
  }
  std::vector<int> Ints() const {
    std::vector<int> v;
    v.reserve(items.size());
    for (const Json& j : items) v.push_back(static_cast<int>(j.number));
    return v;
  }
};

class JsonParser {
 public:
  explicit JsonParser(std::string text) : s_(std::move(text)) {}
  bool Parse(Json& out) {
    bool ok = Value(out);
    Ws();
    return ok && i_ == s_.size();
  }

 private:
  void Ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool Value(Json& v) {
    Ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') {
      v.kind = Json::kObject;
      ++i_;
      Ws();
      if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
      while (true) {
        Json key;
        Ws();
        if (!String(key.str)) return false;
        Ws();
        if (i_ >= s_.size() || s_[i_++] != ':') return false;
        if (!Value(v.fields[key.str])) return false;
        Ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == '}') return ++i_, true;
        return false;
      }
    }
    if (c == '[') {
      v.kind = Json::kArray;
      ++i_;
      Ws();
      if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
      while (true) {
        v.items.emplace_back();
        if (!Value(v.items.back())) return false;
        Ws();
        if (i_ < s_.size() && s_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < s_.size() && s_[i_] == ']') return ++i_, true;
        return false;
      }
    }
    if (c == '"') {
      v.kind = Json::kString;
      return String(v.str);
    }
    if (s_.compare(i_, 4, "true") == 0) {
      v.kind = Json::kBool;
      v.boolean = true;
      i_ += 4;
      return true;
    }
    if (s_.compare(i_, 5, "false") == 0) {
      v.kind = Json::kBool;
      i_ += 5;
      return true;
    }
    if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
      return true;
    }
    size_t used = 0;
    try {
      v.number = std::stod(s_.substr(i_, 64), &used);
    } catch (...) {
      return false;
    }
    v.kind = Json::kNumber;
    i_ += used;
    return used > 0;
  }
  static void AppendUtf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  bool String(std::string& out) {
    if (i_ >= s_.size() || s_[i_] != '"') return false;
    ++i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      char c = s_[i_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      char e = s_[i_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) return false;
          unsigned cp = static_cast<unsigned>(std::stoul(s_.substr(i_, 4), nullptr, 16));
          i_ += 4;
          if (cp >= 0xD800 && cp < 0xDC00 && i_ + 6 <= s_.size() && s_[i_] == '\\') {
            unsigned lo = static_cast<unsigned>(std::stoul(s_.substr(i_ + 2, 4), nullptr, 16));
            i_ += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            AppendUtf8(out, cp);
          }
          break;
        }
        default: out += e;
      }
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    return true;
  }
  std::string s_;
  size_t i_ = 0;
};

inline bool ReadJsonFile(const std::filesystem::path& p, Json& out) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return f.good() && JsonParser(ss.str()).Parse(out);
}

// Converts checkpoint + tokenizer.bin in memory and loads the result.
inline runtime::Result<std::unique_ptr<runtime::Model>> ConvertAndLoad(
    const std::filesystem::path& checkpoint, const std::filesystem::path& tokenizer,
    const runtime::Llama2cImportOptions& opts = {}, runtime::Llama2cImportReport* report = nullptr,
    bool runq_drop_ffn_tail = false) {
  auto ck = runtime::MappedFile::Open(checkpoint);
  if (!ck) return std::unexpected(ck.error());
  auto tk = runtime::MappedFile::Open(tokenizer);
  if (!tk) return std::unexpected(tk.error());
  runtime::GgufWriter w;
  auto rep = runtime::ImportLlama2cCheckpoint(ck->bytes(), opts, w);
  if (!rep) return std::unexpected(rep.error());
  if (report) *report = *rep;
  auto t = runtime::ImportLlama2cTokenizer(tk->bytes(), rep->header.vocab_size, w);
  if (!t) return std::unexpected(t.error());
  auto bytes = w.WriteToMemory();
  if (!bytes) return std::unexpected(bytes.error());
  if (runq_drop_ffn_tail) {
    // runq.c's matmul only sums whole groups of 32 inputs: for ffn_down with 172 inputs the
    // last 172 % 32 = 12 are ignored. Zeroing those columns reproduces that (F32 tensors).
    auto f = runtime::GgufFile::Parse(*bytes, "patch");
    if (!f) return std::unexpected(f.error());
    for (const runtime::TensorInfo& t : f->tensors()) {
      if (!t.name.ends_with("ffn_down.weight") || t.type != runtime::TensorType::kF32) continue;
      auto* base = bytes->data() + (t.data - bytes->data());
      const int64_t cols = t.ne[0], kept = cols / 32 * 32;
      for (int64_t r = 0; r < t.ne[1]; ++r) {
        std::memset(base + (r * cols + kept) * 4, 0, static_cast<size_t>(cols - kept) * 4);
      }
    }
  }
  return runtime::Model::FromBytes(std::move(*bytes), checkpoint.filename().string() + ".gguf");
}

}  // namespace ari::testing
