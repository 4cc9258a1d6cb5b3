// Layer calibration, drop order, the block loop and perplexity, on stories260K (converted
// in-process) and on hand-made importance vectors.
#include "runtime/eval/layer_calibration.h"

#include <gtest/gtest.h>
#include <math.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "runtime/eval/block_loop.h"
#include "runtime/eval/perplexity.h"
#include "runtime/model/forward.h"
#include "runtime/model/session.h"
#include "tests/common/test_util.h"
#include "tests/runtime/llama2c_fixture.h"

namespace ari::runtime {
namespace {

constexpr float kLogitTolerance = 1e-4f;  // block loop vs Forward (same arithmetic)

TEST(DropOrderTest, LeastInfluentialInnerBlocksFirst) {
  const std::vector<float> imp = {0.01f, 0.1f, 0.3f, 0.05f, 0.9f, 0.02f};
  EXPECT_EQ(DropOrder(imp, 0), std::vector<int32_t>{});
  EXPECT_EQ(DropOrder(imp, -3), std::vector<int32_t>{});
  EXPECT_EQ(DropOrder(imp, 1), (std::vector<int32_t>{3}));  // block 0 and 5 are lower: kept
  EXPECT_EQ(DropOrder(imp, 2), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(DropOrder(imp, 3), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(DropOrder(imp, 4), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(DropOrder(imp, 99), (std::vector<int32_t>{1, 2, 3, 4}));  // clamped to n - 2
}

TEST(DropOrderTest, TiesNanAndTinyModels) {
  EXPECT_EQ(DropOrder(std::vector<float>{0.5f, 0.2f, 0.2f, 0.2f, 0.5f}, 2),
            (std::vector<int32_t>{1, 2}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(DropOrder(std::vector<float>{0.5f, nan, 0.3f, 0.5f}, 1), (std::vector<int32_t>{2}));
  EXPECT_TRUE(DropOrder(std::vector<float>{0.1f, 0.2f}, 1).empty());
  EXPECT_TRUE(DropOrder(std::vector<float>{}, 1).empty());
}

class Stories260K : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto ck = testing::ModelFile("llama2c/stories260K/stories260K.bin");
    const auto tk = testing::ModelFile("llama2c/stories260K/tok512.bin");
    if (ck.empty() || tk.empty()) {
      GTEST_SKIP() << "stories260K not found under " << testing::ModelsDir();
    }
    auto m = testing::ConvertAndLoad(ck, tk);
    ASSERT_TRUE(m) << m.error().ToString();
    model_ = std::move(*m);
    std::ifstream f(testing::SourceDir() / "tests/data/calibration.txt");
    ASSERT_TRUE(f) << "tests/data/calibration.txt missing";
    std::stringstream ss;
    ss << f.rdbuf();
    auto ids = model_->tokenizer()->Encode(ss.str(), EncodeOptions{});
    ASSERT_TRUE(ids) << ids.error().ToString();
    ASSERT_GT(ids->size(), 600u);
    ids->resize(400);  // enough for stable figures, fast under sanitizers too
    tokens_ = std::move(*ids);
  }
  std::unique_ptr<Model> model_;
  std::vector<TokenId> tokens_;
};

TEST_F(Stories260K, BlockLoopMatchesForward) {
  const std::span<const TokenId> window(tokens_.data(), 100);
  auto loop = BlockLoop::Create(*model_, 128);
  ASSERT_TRUE(loop);
  auto mine = (*loop)->Run(window, {}, true);
  ASSERT_TRUE(mine) << mine.error().ToString();
  auto s = Session::Create(*model_, {.context_length = 128, .max_batch = 128, .all_logits = true});
  ASSERT_TRUE(s);
  auto ref = Forward(**s, window);
  ASSERT_TRUE(ref) << ref.error().ToString();
  ASSERT_EQ(mine->size(), ref->size());
  float max_diff = 0;
  for (size_t i = 0; i < ref->size(); ++i)
    max_diff = std::max(max_diff, fabsf((*mine)[i] - (*ref)[i]));
  EXPECT_LE(max_diff, kLogitTolerance);

  // Skipping blocks changes the logits; bad input is an error, not a crash.
  auto dropped = (*loop)->Run(window, std::vector<int32_t>{1, 2}, true);
  ASSERT_TRUE(dropped);
  float diff = 0;
  for (size_t i = 0; i < ref->size(); ++i) diff = std::max(diff, fabsf((*dropped)[i] - (*ref)[i]));
  EXPECT_GT(diff, 0.1f);
  EXPECT_FALSE((*loop)->Run(window, std::vector<int32_t>{5}, true));
  EXPECT_FALSE((*loop)->Run(std::vector<TokenId>{1, 512}, {}, true));
  EXPECT_FALSE((*loop)->Run(std::span<const TokenId>(tokens_.data(), 129), {}, true));
}

TEST_F(Stories260K, ImportanceInRangeDeterministicAndDropOrderKeepsEnds) {
  auto a = CalibrateLayerImportance(*model_, tokens_);
  ASSERT_TRUE(a) << a.error().ToString();
  ASSERT_EQ(a->size(), 5u);
  for (size_t l = 0; l < a->size(); ++l) {
    EXPECT_GE((*a)[l], 0.0f) << "block " << l;
    EXPECT_LE((*a)[l], 2.0f) << "block " << l;
    EXPECT_GT((*a)[l], 0.0f) << "block " << l << " changes nothing?";
  }
  auto b = CalibrateLayerImportance(*model_, tokens_);
  ASSERT_TRUE(b);
  EXPECT_EQ(*a, *b);  // bitwise deterministic
  for (int32_t k = 1; k <= 4; ++k) {
    const auto drop = DropOrder(*a, k);
    EXPECT_EQ(drop.size(), static_cast<size_t>(std::min(k, 3)));
    for (int32_t l : drop) {
      EXPECT_NE(l, 0);
      EXPECT_NE(l, 4);
    }
  }
  // Levels are nested: level k+1 drops what level k drops plus one block.
  for (int32_t k = 1; k < 3; ++k) {
    for (int32_t l : DropOrder(*a, k)) {
      const auto next = DropOrder(*a, k + 1);
      EXPECT_NE(std::find(next.begin(), next.end(), l), next.end());
    }
  }
  EXPECT_FALSE(CalibrateLayerImportance(*model_, std::vector<TokenId>{1}));
  EXPECT_FALSE(CalibrateLayerImportance(*model_, std::vector<TokenId>{1, 9999}));
}

TEST_F(Stories260K, PerplexityReferenceAndBlockLoopAgree) {
  auto ref = ComputePerplexity(*model_, tokens_);
  ASSERT_TRUE(ref) << ref.error().ToString();
  EXPECT_EQ(ref->predictions, static_cast<int64_t>(tokens_.size()) - 1);
  EXPECT_GT(ref->perplexity, 1.0);
  EXPECT_LT(ref->perplexity, 40.0);  // a trained model on its own kind of text (vocab 512)
  PerplexityOptions own;
  own.use_block_loop = true;
  auto mine = ComputePerplexity(*model_, tokens_, own);
  ASSERT_TRUE(mine);
  EXPECT_NEAR(mine->perplexity, ref->perplexity, 1e-4 * ref->perplexity);
  EXPECT_GE(Top1Agreement(ref->top1, mine->top1), 0.99);

  auto imp = CalibrateLayerImportance(*model_, tokens_);
  ASSERT_TRUE(imp);
  PerplexityOptions drop3;
  drop3.skip_layers = DropOrder(*imp, 3);
  auto worst = ComputePerplexity(*model_, tokens_, drop3);
  ASSERT_TRUE(worst);
  EXPECT_GT(worst->perplexity, ref->perplexity);  // dropping 3 of 5 blocks must hurt
  EXPECT_LT(Top1Agreement(ref->top1, worst->top1), 1.0);
  EXPECT_FALSE(ComputePerplexity(*model_, std::vector<TokenId>{1}));
}

TEST(Top1AgreementTest, Fractions) {
  EXPECT_EQ(Top1Agreement(std::vector<TokenId>{}, std::vector<TokenId>{1}), 0.0);
  EXPECT_EQ(Top1Agreement(std::vector<TokenId>{1, 2, 3, 4}, std::vector<TokenId>{1, 2, 0, 4}),
            0.75);
  EXPECT_EQ(Top1Agreement(std::vector<TokenId>{1, 2}, std::vector<TokenId>{1, 2, 3}), 1.0);
}

}  // namespace
}  // namespace ari::runtime
