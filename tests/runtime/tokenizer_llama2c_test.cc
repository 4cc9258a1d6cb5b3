// Tokenizers converted in memory from llama2.c tokenizer.bin files
// (runtime/convert/llama2c_import.h) against llama2.c's own outputs: test.c's Llama 2 encode
// vectors, and the prompt ids and printed texts of run.c in stories260K/aidreams260K
// reference_outputs.json.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/convert/llama2c_import.h"
#include "runtime/gguf/gguf.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/common/mini_json.h"
#include "tests/common/test_util.h"

namespace ari::runtime {
namespace {

std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Converts tokenizer.bin to a GGUF image in memory and builds the tokenizer from it.
struct Converted {
  std::vector<std::byte> image;
  std::unique_ptr<Tokenizer> tok;
};

Converted Convert(const std::filesystem::path& bin, int32_t vocab_size) {
  Converted c;
  const std::string raw = ReadAll(bin);
  GgufWriter w;
  auto imp = ImportLlama2cTokenizer(
      std::span(reinterpret_cast<const std::byte*>(raw.data()), raw.size()), vocab_size, w);
  EXPECT_TRUE(imp.has_value()) << (imp ? "" : imp.error().ToString());
  if (!imp) return c;
  auto img = w.WriteToMemory();
  EXPECT_TRUE(img.has_value());
  if (!img) return c;
  c.image = std::move(*img);
  auto file = GgufFile::Parse(c.image, bin.string());
  EXPECT_TRUE(file.has_value()) << (file ? "" : file.error().ToString());
  if (!file) return c;
  auto tok = Tokenizer::FromGguf(*file);
  EXPECT_TRUE(tok.has_value()) << (tok ? "" : tok.error().ToString());
  if (tok) c.tok = std::move(*tok);
  return c;
}

TEST(Llama2cTokenizer, Llama2EncodeVectorsViaTokenizerBin) {
  ARI_REQUIRE_MODEL(json, "tokenizers/llama2/encode_vectors.json");
  ARI_REQUIRE_MODEL(bin, "tokenizers/llama2/tokenizer.bin");
  Converted c = Convert(bin, 32000);
  ASSERT_NE(c.tok, nullptr);
  const auto vectors = ari::testing::JsonParser::Parse(ReadAll(json));
  int ok = 0;
  for (const auto& v : vectors.arr) {
    EncodeOptions opts;
    opts.add_bos = v["bos"].b;
    opts.add_eos = v["eos"].b;
    auto ids = c.tok->Encode(v["prompt"].str, opts);
    ASSERT_TRUE(ids.has_value()) << ids.error().ToString();
    EXPECT_EQ(*ids, v["expected_ids"].Ints()) << "prompt '" << v["prompt"].str << "'";
    ok += *ids == v["expected_ids"].Ints();
    EXPECT_EQ(c.tok->Decode(*ids), v["prompt"].str);
  }
  std::cout << "[ vectors  ] encode_vectors.json via tokenizer.bin: " << ok << "/"
            << vectors.arr.size() << "\n";
}

// run.c prints the prompt tokens after BOS and then each sampled token with llama2.c's
// decode (leading space dropped after BOS, <0xXX> -> byte); a sample that ends with BOS
// stops there. So the printed text is Decode(prompt ids + generated ids before any BOS).
void CheckReference(const std::string& dir) {
  const std::string rel_json = "llama2c/" + dir + "/reference_outputs.json";
  const std::string rel_tok = "llama2c/" + dir + "/tok512.bin";
  const std::filesystem::path json = ari::testing::ModelFile(rel_json);
  const std::filesystem::path bin = ari::testing::ModelFile(rel_tok);
  if (json.empty() || bin.empty()) GTEST_SKIP() << "model data not found: " << rel_json;
  Converted c = Convert(bin, 512);
  ASSERT_NE(c.tok, nullptr);
  const auto runs = ari::testing::JsonParser::Parse(ReadAll(json));
  int encode_ok = 0, decode_ok = 0;
  for (const auto& run : runs.arr) {
    auto ids = c.tok->Encode(run["prompt"].str, EncodeOptions{});
    ASSERT_TRUE(ids.has_value());
    const auto prompt_ids = run["prompt_ids"].Ints();
    EXPECT_EQ(*ids, prompt_ids) << dir << " prompt '" << run["prompt"].str << "'";
    encode_ok += *ids == prompt_ids;
    std::vector<TokenId> all = prompt_ids;
    for (int32_t id : run["generated_ids"].Ints()) {
      if (id == c.tok->Bos()) break;
      all.push_back(id);
    }
    const std::string text = c.tok->Decode(all);
    EXPECT_EQ(text, run["text"].str) << dir << " " << run["program"].str;
    decode_ok += text == run["text"].str;
  }
  std::cout << "[ vectors  ] " << rel_json << ": prompt ids " << encode_ok << "/" << runs.arr.size()
            << ", decoded text " << decode_ok << "/" << runs.arr.size() << "\n";
}

TEST(Llama2cTokenizer, Stories260KReferenceOutputs) { CheckReference("stories260K"); }
TEST(Llama2cTokenizer, AiDreams260KReferenceOutputs) { CheckReference("aidreams260K"); }

}  // namespace
}  // namespace ari::runtime
