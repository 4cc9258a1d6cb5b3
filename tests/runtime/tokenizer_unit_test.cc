// Tokenizer unit tests on small hand-built vocabularies: construction errors, every known
// pre-tokenizer compiles, pre-tokenizer splits, SPM/BPE merge order, byte fallback.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_impl.h"

namespace ari::runtime {
namespace {

std::vector<std::string> Words(std::string_view pre, std::string_view text) {
  auto pt = tok::PreTokenizer::Create(pre);
  EXPECT_TRUE(pt.has_value()) << (pt ? "" : pt.error().ToString());
  if (!pt) return {};
  std::vector<std::pair<size_t, size_t>> ranges;
  auto r = (*pt)->Split(text, ranges);
  EXPECT_TRUE(r.has_value());
  std::vector<std::string> words;
  size_t expect_begin = 0;
  for (auto [b, e] : ranges) {
    EXPECT_EQ(b, expect_begin) << "words must tile the text";
    expect_begin = e;
    words.emplace_back(text.substr(b, e - b));
  }
  EXPECT_EQ(expect_begin, text.size());
  return words;
}

using W = std::vector<std::string>;

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(Words("gpt-2", "Hello, y'all! 1234567"),
            (W{"Hello", ",", " y", "'", "all", "!", " 1234567"}));
  EXPECT_EQ(Words("gpt-2", "a   b\t\tc  "), (W{"a", "  ", " b", "\t", "\t", "c", "  "}));
  EXPECT_EQ(Words("gpt-2", "it's I'LL"), (W{"it", "'s", " I", "'", "LL"}));
}

TEST(PreTokenizer, Llama3AndQwen2) {
  EXPECT_EQ(Words("llama-bpe", "Hello, y'all! 1234567"),
            (W{"Hello", ",", " y", "'all", "!", " ", "123", "456", "7"}));
  EXPECT_EQ(Words("llama-bpe", "I'LL go\n\n  x"), (W{"I", "'LL", " go", "\n\n", " ", " x"}));
  EXPECT_EQ(Words("qwen2", "ab 1234"), (W{"ab", " ", "1", "2", "3", "4"}));
}

TEST(PreTokenizer, MultiRegexListsSplitFragmentsInTurn) {
  // default: punctuation runs first, then the GPT-2 regex inside the rest, then digits.
  EXPECT_EQ(Words("default", "a+b 12345"), (W{"a", "+", "b", " ", "123", "45"}));
  // starcoder: every digit alone first.
  EXPECT_EQ(Words("starcoder", "x 123"), (W{"x", " ", "1", "2", "3"}));
  // deepseek-coder: line breaks alone, letters with one leading space, digits alone.
  EXPECT_EQ(Words("deepseek-coder", "ab\ncd 12"), (W{"ab", "\n", "cd", " ", "1", "2"}));
}

TEST(PreTokenizer, UnicodeWhitespaceAndInvalidBytes) {
  // U+00A0 and U+3000 are White_Space: "\s+(?!\S)" keeps all but the last one.
  EXPECT_EQ(Words("gpt-2", "a\xC2\xA0\xC2\xA0z"), (W{"a", "\xC2\xA0", "\xC2\xA0", "z"}));
  // Invalid UTF-8 bytes keep their bytes (matched as U+FFFD, a symbol).
  EXPECT_EQ(Words("gpt-2", "ab\xFF\xFEz"), (W{"ab", "\xFF\xFE", "z"}));
}

TEST(PreTokenizer, EveryKnownNameCompiles) {
  for (const char* name :
       {"default",   "llama3",    "llama-v3",     "llama-bpe",      "falcon3",
        "dbrx",      "smaug-bpe", "deepseek-llm", "deepseek-coder", "deepseek-v3",
        "falcon",    "starcoder", "refact",       "command-r",      "smollm",
        "codeshell", "exaone",    "minerva-7b",   "gpt-2",          "phi-2",
        "mpt",       "olmo",      "jais",         "roberta-bpe",    "qwen2",
        "stablelm2", "megrez",    "poro-chat",    "bloom",          "gpt3-finnish",
        "viking",    "tekken",    "chameleon"}) {
    auto pt = tok::PreTokenizer::Create(name);
    ASSERT_TRUE(pt.has_value()) << name << ": " << pt.error().ToString();
    std::vector<std::pair<size_t, size_t>> words;
    ASSERT_TRUE((*pt)->Split("Hello wörld 123 ...\n\n 你好 'll", words).has_value()) << name;
    EXPECT_FALSE(words.empty()) << name;
  }
  auto bad = tok::PreTokenizer::Create("no-such-pre");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::kUnsupported);
}

// A tiny SPM vocabulary with byte fallback tokens.
VocabSpec SpmSpec() {
  VocabSpec s;
  s.model = "llama";
  s.tokens = {"<unk>", "<s>", "</s>"};
  s.token_types = {2, 3, 3};
  s.scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    s.tokens.emplace_back(buf);
    s.token_types.push_back(6);
    s.scores.push_back(0);
  }
  const std::pair<const char*, float> normal[] = {{"\u2581", -1},  {"a", -2},     {"b", -2},
                                                  {"\u2581a", -3}, {"ab", -1.5f}, {"\u2581ab", -4},
                                                  {"c", -2},       {"bc", -1.5f}};
  for (auto [t, sc] : normal) {
    s.tokens.emplace_back(t);
    s.token_types.push_back(1);
    s.scores.push_back(sc);
  }
  return s;
}

TEST(SpmTokenizer, MergesByScoreAndFallsBackToBytes) {
  auto t = Tokenizer::FromSpec(SpmSpec());
  ASSERT_TRUE(t.has_value()) << t.error().ToString();
  const Tokenizer& tok = **t;
  auto id = [&](std::string_view s) { return tok.FindToken(s); };
  EncodeOptions o;
  auto r = tok.Encode("ab", o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (std::vector<TokenId>{1, id("\u2581ab")}));
  // "abc": a+b and b+c tie at -1.5 -> the leftmost merges first, then ▁+ab (-4); c alone.
  r = tok.Encode("abc", EncodeOptions{.add_bos = false});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (std::vector<TokenId>{id("\u2581ab"), id("c")}));
  // Unknown character -> UTF-8 bytes as <0xXX> tokens; decode gives the text back.
  r = tok.Encode("\xC3\xA9", EncodeOptions{.add_bos = false});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (std::vector<TokenId>{id("\xE2\x96\x81"), id("<0xC3>"), id("<0xA9>")}));
  EXPECT_EQ(tok.Decode(*r), "\xC3\xA9");
  // EOS only on request; empty text gives BOS only.
  r = tok.Encode("", EncodeOptions{.add_bos = true, .add_eos = true});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (std::vector<TokenId>{1, 2}));
  EXPECT_EQ(tok.Decode({1, id("\u2581a"), id("b")}), "ab");
  EXPECT_EQ(tok.Decode({1, id("\u2581a"), 2}, /*special=*/true), "<s>a</s>");
  EXPECT_EQ(tok.Piece(-1), "");
  EXPECT_EQ(tok.Piece(1 << 20), "");
  EXPECT_EQ(tok.Attr(1 << 20), TokenAttr::kUndefined);
  EXPECT_EQ(tok.VocabSize(), 3 + 256 + 8);
}

TEST(SpmTokenizer, NoSpacePrefixWhenDisabled) {
  VocabSpec s = SpmSpec();
  s.add_space_prefix = 0;
  auto t = Tokenizer::FromSpec(std::move(s));
  ASSERT_TRUE(t.has_value());
  auto r = (*t)->Encode("ab", EncodeOptions{.add_bos = false});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (std::vector<TokenId>{(*t)->FindToken("ab")}));
  EXPECT_EQ((*t)->Decode(*r), "ab");
}

VocabSpec BpeSpec() {
  VocabSpec s;
  s.model = "gpt2";
  s.pre = "gpt-2";
  // "\xC4\xA0" "a" is split so that "\xA0a" is not read as one escape (parenthesised: the
  // concatenation is intended).
  s.tokens = {"a",
              "b",
              "c",
              "\xC4\xA0",
              "ab",
              "abc",
              ("\xC4\xA0"
               "a"),
              ("\xC4\xA0"
               "ab"),
              "<|endoftext|>"};
  s.token_types = {1, 1, 1, 1, 1, 1, 1, 1, 3};
  s.merges = {"a b", "ab c", "\xC4\xA0 a",
              ("\xC4\xA0"
               "a b")};
  s.bos = s.eos = 8;
  return s;
}

TEST(BpeTokenizer, MergesLowestRankFirst) {
  auto t = Tokenizer::FromSpec(BpeSpec());
  ASSERT_TRUE(t.has_value()) << t.error().ToString();
  const Tokenizer& tok = **t;
  auto id = [&](std::string_view s) { return tok.FindToken(s); };
  auto r = tok.Encode("abc ab", EncodeOptions{});
  ASSERT_TRUE(r.has_value());
  // " ab": a+b (rank 0) wins over Ġ+a (rank 2); Ġ+ab is not a merge.
  EXPECT_EQ(*r, (std::vector<TokenId>{id("abc"), id("\xC4\xA0"), id("ab")}));
  EXPECT_EQ(tok.Decode(*r), "abc ab");
  EXPECT_TRUE(tok.IsEog(8));
  EXPECT_EQ(tok.Eot(), 8);
  // Characters without tokens are dropped, as llama.cpp does for byte-less vocabularies.
  r = tok.Encode("az", EncodeOptions{});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (std::vector<TokenId>{id("a")}));
}

TEST(TokenizerErrors, BadSpecsAreClearErrors) {
  VocabSpec s = BpeSpec();
  s.model = "t5";
  auto r = Tokenizer::FromSpec(s);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("t5"), std::string::npos);

  s = BpeSpec();
  s.pre = "mystery-pre";
  r = Tokenizer::FromSpec(s);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("mystery-pre"), std::string::npos);

  s = BpeSpec();
  s.pre.clear();  // missing pre -> "default", as llama.cpp
  r = Tokenizer::FromSpec(s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)->Pre(), "default");

  s = BpeSpec();
  s.merges.clear();
  EXPECT_EQ(Tokenizer::FromSpec(s).error().code, ErrorCode::kFormat);

  VocabSpec p = SpmSpec();
  p.scores.pop_back();
  EXPECT_EQ(Tokenizer::FromSpec(p).error().code, ErrorCode::kFormat);
  p = SpmSpec();
  p.token_types.push_back(1);
  EXPECT_EQ(Tokenizer::FromSpec(p).error().code, ErrorCode::kFormat);
  p = VocabSpec{};
  EXPECT_EQ(Tokenizer::FromSpec(p).error().code, ErrorCode::kFormat);
}

TEST(TokenizerErrors, GgufWithoutTokenizerNamesTheFile) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  auto img = w.WriteToMemory();
  ASSERT_TRUE(img.has_value());
  auto file = GgufFile::Parse(*img, "no-vocab.gguf");
  ASSERT_TRUE(file.has_value());
  auto t = Tokenizer::FromGguf(*file);
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.error().message.find("no-vocab.gguf"), std::string::npos) << t.error().message;

  // Wrong type for the token list.
  GgufWriter w2;
  w2.SetString("tokenizer.ggml.model", "llama");
  w2.SetString("tokenizer.ggml.tokens", "not an array");
  auto img2 = w2.WriteToMemory();
  ASSERT_TRUE(img2.has_value());
  auto file2 = GgufFile::Parse(*img2, "bad.gguf");
  ASSERT_TRUE(file2.has_value());
  EXPECT_FALSE(Tokenizer::FromGguf(*file2).has_value());
}

TEST(TokenizerGguf, RoundTripsThroughWriter) {
  VocabSpec s = SpmSpec();
  GgufWriter w;
  w.SetString("tokenizer.ggml.model", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", s.tokens);
  w.SetFloat32Array("tokenizer.ggml.scores", s.scores);
  w.SetInt32Array("tokenizer.ggml.token_type", s.token_types);
  w.SetUint32("tokenizer.ggml.eos_token_id", 2);
  w.SetBool("tokenizer.ggml.add_eos_token", true);
  auto img = w.WriteToMemory();
  ASSERT_TRUE(img.has_value());
  auto file = GgufFile::Parse(*img, "mem.gguf");
  ASSERT_TRUE(file.has_value());
  auto t = Tokenizer::FromGguf(*file);
  ASSERT_TRUE(t.has_value()) << t.error().ToString();
  EXPECT_TRUE((*t)->AddBosByDefault());
  EXPECT_TRUE((*t)->AddEosByDefault());
  EXPECT_TRUE((*t)->AddSpacePrefix());
  EXPECT_EQ((*t)->Unk(), 0);
  auto r = (*t)->Encode("ab", EncodeOptions{});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->size(), 2u);
}

}  // namespace
}  // namespace ari::runtime
