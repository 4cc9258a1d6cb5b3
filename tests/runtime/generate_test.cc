// Generation loop on stories260K (converted in-process): stop strings, budget, callback,
// BOS/EOS handling, streaming equals the whole text, timing fields.
#include "runtime/generate/generate.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/generate/sampler.h"
#include "runtime/model/session.h"
#include "tests/common/test_util.h"
#include "tests/runtime/llama2c_fixture.h"

namespace ari::runtime {
namespace {

class GenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ck = testing::ModelFile("llama2c/stories260K/stories260K.bin");
    auto tk = testing::ModelFile("llama2c/stories260K/tok512.bin");
    if (ck.empty() || tk.empty())
      GTEST_SKIP() << "stories260K not found under " << testing::ModelsDir();
    auto m = testing::ConvertAndLoad(ck, tk);
    ASSERT_TRUE(m.has_value()) << m.error().ToString();
    model_ = std::move(*m);
  }
  GenerateResult Run(const GenerateOptions& g, const TextCallback& cb = {},
                     const std::string& prompt = "Once upon a time") {
    auto s = Session::Create(*model_);
    EXPECT_TRUE(s.has_value());
    Sampler sampler(model_->config().vocab_size, SamplingParams{});  // greedy
    auto r = GenerateFromText(**s, sampler, prompt, EncodeOptions{}, g, cb);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().ToString());
    return r ? std::move(*r) : GenerateResult{};
  }
  std::unique_ptr<Model> model_;
};

TEST_F(GenerateTest, MaxTokensAndStreamingEqualsText) {
  GenerateOptions g;
  g.max_tokens = 40;
  std::string streamed;
  int calls = 0;
  auto r = Run(g, [&](std::string_view p) {
    streamed += p;
    ++calls;
    return true;
  });
  EXPECT_EQ(r.tokens.size(), 40u);
  EXPECT_EQ(r.stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(streamed, r.text);
  EXPECT_GT(calls, 10);
  EXPECT_EQ(r.text.substr(0, 30), ", there was a little girl name");
  EXPECT_EQ(r.prompt_tokens, 5);
  EXPECT_GE(r.prompt_seconds, 0.0);
  EXPECT_GT(r.GenTokensPerSecond(), 0.0);
}

TEST_F(GenerateTest, StopStringCutsTextAndHoldsBackPrefixes) {
  GenerateOptions g;
  g.max_tokens = 200;
  g.stop_strings = {"Lily"};
  std::string streamed;
  auto r = Run(g, [&](std::string_view p) {
    streamed += p;
    // A prefix of the stop string is never streamed before it is known not to match.
    EXPECT_EQ(streamed.find("Lil"), std::string::npos);
    return true;
  });
  EXPECT_EQ(r.stop_reason, StopReason::kStopString);
  EXPECT_EQ(r.text, ", there was a little girl named ");
  EXPECT_EQ(streamed, r.text);
}

TEST_F(GenerateTest, StopStringNotMatchedStreamsEverything) {
  GenerateOptions g;
  g.max_tokens = 12;
  g.stop_strings = {"zebra"};
  std::string streamed;
  auto r = Run(g, [&](std::string_view p) {
    streamed += p;
    return true;
  });
  EXPECT_EQ(r.stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(streamed, r.text);
  EXPECT_FALSE(r.text.empty());
}

TEST_F(GenerateTest, CallbackStops) {
  GenerateOptions g;
  g.max_tokens = 100;
  int calls = 0;
  auto r = Run(g, [&](std::string_view) { return ++calls < 3; });
  EXPECT_EQ(r.stop_reason, StopReason::kCallback);
  EXPECT_EQ(calls, 3);
  EXPECT_LT(r.tokens.size(), 100u);
}

TEST_F(GenerateTest, ZeroBudgetAndContextFull) {
  GenerateOptions g;
  g.max_tokens = 0;
  auto r = Run(g);
  EXPECT_TRUE(r.tokens.empty());
  auto s = Session::Create(*model_, {.context_length = 10});
  ASSERT_TRUE(s.has_value());
  Sampler sampler(model_->config().vocab_size, SamplingParams{});
  g.max_tokens = 50;
  auto full = GenerateFromText(**s, sampler, "Once upon a time", EncodeOptions{}, g);
  ASSERT_TRUE(full.has_value());
  EXPECT_EQ(full->stop_reason, StopReason::kContextFull);
  EXPECT_EQ(full->tokens.size(),
            6u);  // 5 prompt + 5 decoded positions fill the cache; the 6th sample has no room
}

TEST_F(GenerateTest, EosStopsGeneration) {
  // Force EOS by a stop condition: a sampler with a vocab mismatch is rejected, and a
  // sampled EOS (id 2) ends generation with kEndOfGen.
  auto s = Session::Create(*model_);
  ASSERT_TRUE(s.has_value());
  Sampler wrong(100, SamplingParams{});
  GenerateOptions g;
  const TokenId bos[] = {1};
  EXPECT_FALSE(Generate(**s, wrong, bos, g).has_value());
  EXPECT_TRUE(model_->tokenizer()->IsEog(2));
  EXPECT_EQ(model_->tokenizer()->Bos(), 1);
}

}  // namespace
}  // namespace ari::runtime
