// Tokenizer golden tests against external oracles: llama.cpp's test-tokenizer-0 vectors
// (models/ggml-vocab-*.gguf.inp/.out), llama2.c's Llama 2 encode vectors and the prompt ids
// / texts llama2.c produced for stories260K.
#include "runtime/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/gguf/gguf.h"
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

std::unique_ptr<Tokenizer> Load(const std::filesystem::path& p) {
  auto file = GgufFile::Open(p);
  EXPECT_TRUE(file.has_value()) << (file ? "" : file.error().ToString());
  if (!file) return nullptr;
  auto tok = Tokenizer::FromGguf(*file);
  EXPECT_TRUE(tok.has_value()) << (tok ? "" : tok.error().ToString());
  return tok ? std::move(*tok) : nullptr;
}

std::string Show(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) s += std::to_string(id) + " ";
  return s;
}

// llama.cpp's test-tokenizer-0: inputs split by "\n__ggml_vocab_test__\n", one line of
// space-separated ids per input.
struct VocabCase {
  std::string input;
  std::vector<TokenId> expected;
};

std::vector<VocabCase> ReadVocabCases(const std::filesystem::path& gguf) {
  const std::string inp = ReadAll(gguf.string() + ".inp");
  const std::string out = ReadAll(gguf.string() + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t next = inp.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(inp.substr(pos));
      break;
    }
    inputs.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<VocabCase> cases;
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    VocabCase c;
    c.input = i < inputs.size() ? inputs[i] : std::string();
    std::istringstream ids(line);
    for (int v = 0; ids >> v;) c.expected.push_back(v);
    cases.push_back(std::move(c));
    ++i;
  }
  EXPECT_EQ(inputs.size(), cases.size()) << "input/output count mismatch for " << gguf;
  return cases;
}

class VocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabVectors, EncodeMatchesLlamaCppExactly) {
  const std::string rel = std::string("vocab/ggml-vocab-") + GetParam() + ".gguf";
  ARI_REQUIRE_MODEL(path, rel);
  auto tok = Load(path);
  ASSERT_NE(tok, nullptr);
  const auto cases = ReadVocabCases(path);
  ASSERT_FALSE(cases.empty());
  // test-tokenizer-0 calls common_tokenize(ctx, text, add_special=false, parse_special=false).
  EncodeOptions opts;
  opts.add_bos = false;
  opts.add_eos = false;
  opts.parse_special = false;
  int encode_ok = 0, decode_ok = 0, decode_expected_ok = 0;
  for (const VocabCase& c : cases) {
    auto ids = tok->Encode(c.input, opts);
    ASSERT_TRUE(ids.has_value()) << ids.error().ToString();
    EXPECT_EQ(*ids, c.expected) << "input '" << c.input << "'\n got:      " << Show(*ids)
                                << "\n expected: " << Show(c.expected);
    encode_ok += *ids == c.expected;
    const std::string back = tok->Decode(*ids, /*special=*/true);
    EXPECT_EQ(back, c.input) << "decode(encode(x)) != x";
    decode_ok += back == c.input;
    const std::string back2 = tok->Decode(c.expected, /*special=*/true);
    EXPECT_EQ(back2, c.input) << "decode(expected ids) != x";
    decode_expected_ok += back2 == c.input;
  }
  std::cout << "[ vectors  ] " << rel << ": encode " << encode_ok << "/" << cases.size()
            << ", decode(encode) " << decode_ok << "/" << cases.size() << ", decode(.out) "
            << decode_expected_ok << "/" << cases.size() << "\n";
  RecordProperty("encode_pass", encode_ok);
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, VocabVectors, ::testing::Values("gpt-2", "llama-spm", "phi-3"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

// llama2.c's test.c vectors for the Llama 2 vocabulary (ids with BOS, no EOS).
void CheckLlama2Vectors(const Tokenizer& tok, const std::filesystem::path& json_path,
                        const std::string& what) {
  const auto vectors = ari::testing::JsonParser::Parse(ReadAll(json_path));
  ASSERT_EQ(vectors.kind, ari::testing::Json::Kind::kArray);
  int ok = 0;
  for (const auto& v : vectors.arr) {
    EncodeOptions opts;
    opts.add_bos = v["bos"].b;
    opts.add_eos = v["eos"].b;
    auto ids = tok.Encode(v["prompt"].str, opts);
    ASSERT_TRUE(ids.has_value()) << ids.error().ToString();
    const auto expected = v["expected_ids"].Ints();
    EXPECT_EQ(*ids, expected) << what << ": prompt '" << v["prompt"].str << "'";
    ok += *ids == expected;
    EXPECT_EQ(tok.Decode(*ids), v["prompt"].str);
  }
  std::cout << "[ vectors  ] encode_vectors.json via " << what << ": " << ok << "/"
            << vectors.arr.size() << "\n";
}

TEST(Llama2Vectors, LlamaSpmGguf) {
  ARI_REQUIRE_MODEL(json, "tokenizers/llama2/encode_vectors.json");
  ARI_REQUIRE_MODEL(vocab, "vocab/ggml-vocab-llama-spm.gguf");
  auto tok = Load(vocab);
  ASSERT_NE(tok, nullptr);
  CheckLlama2Vectors(*tok, json, "ggml-vocab-llama-spm.gguf");
}

TEST(SpecialTokens, ParsedOnlyWhenAsked) {
  ARI_REQUIRE_MODEL(vocab, "vocab/ggml-vocab-llama-spm.gguf");
  auto tok = Load(vocab);
  ASSERT_NE(tok, nullptr);
  const TokenId hello = tok->FindToken("\xE2\x96\x81Hello");
  ASSERT_GE(hello, 0);
  EncodeOptions opts;
  opts.add_bos = false;
  opts.parse_special = true;
  auto ids = tok->Encode("<s>Hello</s>", opts);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(*ids, (std::vector<TokenId>{1, hello, 2}));
  EXPECT_EQ(tok->Decode(*ids, true), "<s>Hello</s>");
  EXPECT_EQ(tok->Decode(*ids, false), "Hello");
  opts.parse_special = false;
  ids = tok->Encode("<s>Hello</s>", opts);
  ASSERT_TRUE(ids.has_value());
  for (TokenId id : *ids) EXPECT_FALSE(id == 1 || id == 2) << Show(*ids);
  EXPECT_EQ(tok->Decode(*ids), "<s>Hello</s>");
  EXPECT_TRUE(tok->IsEog(2));
  EXPECT_EQ(tok->Attr(1), TokenAttr::kControl);
  EXPECT_EQ(tok->Attr(0), TokenAttr::kUnknown);
  EXPECT_EQ(tok->Attr(3), TokenAttr::kByte);
}

TEST(SpecialTokens, Phi3RightStripsAfterChatTokens) {
  ARI_REQUIRE_MODEL(vocab, "vocab/ggml-vocab-phi-3.gguf");
  auto tok = Load(vocab);
  ASSERT_NE(tok, nullptr);
  const TokenId user = tok->FindToken("<|user|>");
  const TokenId end = tok->FindToken("<|end|>");
  const TokenId hi = tok->FindToken("\xE2\x96\x81Hi");
  ASSERT_GE(user, 0);
  ASSERT_GE(end, 0);
  ASSERT_GE(hi, 0);
  EncodeOptions opts;
  opts.parse_special = true;
  auto ids = tok->Encode("<|user|>\nHi<|end|>", opts);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(*ids, (std::vector<TokenId>{1, user, hi, end}));
  EXPECT_EQ(tok->Eot(), end);
  EXPECT_TRUE(tok->IsEog(end));
  EXPECT_TRUE(tok->IsEog(tok->Eos()));
}

TEST(SpecialTokens, Gpt2EndOfText) {
  ARI_REQUIRE_MODEL(vocab, "vocab/ggml-vocab-gpt-2.gguf");
  auto tok = Load(vocab);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->Model(), "gpt2");
  EXPECT_EQ(tok->Pre(), "gpt-2");
  EXPECT_FALSE(tok->AddBosByDefault());
  EncodeOptions opts;
  opts.parse_special = true;
  auto ids = tok->Encode("Hello<|endoftext|> world", opts);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(*ids, (std::vector<TokenId>{15496, 50256, 995}));
  opts.parse_special = false;
  ids = tok->Encode("Hello<|endoftext|>", opts);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(std::count(ids->begin(), ids->end(), 50256), 0);
  EXPECT_EQ(tok->Decode(*ids), "Hello<|endoftext|>");
  EXPECT_TRUE(tok->IsEog(50256));
}

}  // namespace
}  // namespace ari::runtime
