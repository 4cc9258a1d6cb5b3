// Test helpers for the engine tests: stories260K (llama2.c) and tiny random models written
// as plain GGUF + dual-precision pack files in a temp dir.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "runtime/convert/llama2c_import.h"
#include "runtime/core/mapped_file.h"
#include "runtime/gguf/gguf.h"
#include "runtime/model/pack_file.h"
#include "tests/common/test_util.h"
#include "tests/runtime/llama2c_fixture.h"
#include "tests/runtime/tiny_model.h"

namespace ari::testing {

struct ModelPair {
  std::filesystem::path plain, pack;
  bool ok = false;
};

// stories260K as GGUF (F32, as llama2.c) + its pack, converted once per process.
inline const ModelPair& Stories260K(const runtime::PackOptions& popts = {},
                                    const std::string& tag = "s260k") {
  static std::map<std::string, ModelPair> cache;
  auto it = cache.find(tag);
  if (it != cache.end()) return it->second;
  ModelPair& mp = cache[tag];
  auto ck = ModelFile("llama2c/stories260K/stories260K.bin");
  auto tk = ModelFile("llama2c/stories260K/tok512.bin");
  if (ck.empty() || tk.empty()) return mp;
  auto ckm = runtime::MappedFile::Open(ck);
  auto tkm = runtime::MappedFile::Open(tk);
  if (!ckm || !tkm) return mp;
  runtime::GgufWriter w;
  auto rep = runtime::ImportLlama2cCheckpoint(ckm->bytes(), {}, w);
  if (!rep) return mp;
  if (!runtime::ImportLlama2cTokenizer(tkm->bytes(), rep->header.vocab_size, w)) return mp;
  const auto dir = TempDir("engine");
  mp.plain = dir / (tag + ".gguf");
  mp.pack = dir / (tag + ".pack.gguf");
  if (!w.WriteFile(mp.plain)) return mp;
  auto r = runtime::WritePack(mp.plain, mp.pack, popts);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().ToString());
  mp.ok = r.has_value();
  return mp;
}

inline ModelPair TinyPair(const TinySpec& spec, const std::string& tag,
                          const runtime::PackOptions& popts = {}) {
  ModelPair mp;
  const auto dir = TempDir("engine");
  mp.plain = dir / (tag + ".gguf");
  mp.pack = dir / (tag + ".pack.gguf");
  auto bytes = BuildTinyModel(spec, nullptr);
  auto f = runtime::GgufFile::Parse(bytes, tag);
  if (!f) return mp;
  {
    FILE* fp = std::fopen(mp.plain.c_str(), "wb");
    if (!fp) return mp;
    std::fwrite(bytes.data(), 1, bytes.size(), fp);
    std::fclose(fp);
  }
  auto r = runtime::WritePack(mp.plain, mp.pack, popts);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().ToString());
  mp.ok = r.has_value();
  return mp;
}

// Normalized mean squared error sum (a-b)^2 / sum b^2.
inline double Nmse(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return den > 0 ? num / den : num;
}

inline int Argmax(const float* x, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

}  // namespace ari::testing
