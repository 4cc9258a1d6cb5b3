// Golden tests against llama2.c (external oracle): reference_outputs.json was produced by
// karpathy/llama2.c run.c (fp32) and runq.c (Q8_0) on the same checkpoints. We convert the
// checkpoints to GGUF in-process, load them and replay every entry.
//
// fp32 entries (greedy and the seeded temperature/top-p run): generated ids must be EXACTLY
// equal (the reference forward pass uses llama2.c's arithmetic order and the sampler its RNG).
// Q8_0 (runq) entries: runq.c quantizes activations to int8 per group of 32 and, for
// stories260K (hidden 172, not a multiple of 32), its matmul drops the last 12 inputs of
// ffn_down; we run the same int8 weights with fp32 activations over all 172 inputs. The
// tolerance is therefore stated on agreement, see kQ80* below.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "runtime/generate/generate.h"
#include "runtime/generate/sampler.h"
#include "runtime/model/forward.h"
#include "runtime/model/session.h"
#include "tests/common/test_util.h"
#include "tests/runtime/llama2c_fixture.h"

namespace ari::runtime {
namespace {

using testing::Json;

// Q8_0 tolerance (measured values in the comments, both prompts of reference_outputs.json):
//  - free running: the first kQ80MinPrefix generated tokens identical (measured: 2 with no
//    prompt, where runq itself writes "Once upon upon a time"; 24 after "Once upon a time").
//    After the first difference the texts diverge, so later agreement is not meaningful.
//  - teacher forced (the reference sequence fed through our model): runq's token is our
//    argmax at >= kQ80MinTop1 of the positions and in our top 5 at >= kQ80MinTop5
//    (measured 140/252 = 0.56 and 220/252 = 0.87 after the prompt; the no-prompt run is
//    printed by the test). With runq's dropped ffn_down tail emulated (zeroed columns), the
//    only difference left is int8 activations: stricter bounds kQ80Tail* apply (measured
//    186/252 = 0.74 and 237/252 = 0.94).
constexpr size_t kQ80MinPrefix = 2;
constexpr double kQ80MinTop1 = 0.50;
constexpr double kQ80MinTop5 = 0.80;
constexpr double kQ80TailMinTop1 = 0.65;
constexpr double kQ80TailMinTop5 = 0.90;

struct Replay {
  std::vector<TokenId> prompt_ids;
  GenerateResult result;
};

Replay RunEntry(const Model& model, const Json& e) {
  Replay r;
  const std::string prompt = e["prompt"].str;
  EncodeOptions enc;  // add BOS (the vocab says so), no EOS
  auto ids = model.tokenizer()->Encode(prompt, enc);
  EXPECT_TRUE(ids.has_value());
  if (!ids) return r;
  r.prompt_ids = *ids;
  SamplingParams sp;
  sp.temperature = static_cast<float>(e["temperature"].number);
  sp.top_p = static_cast<float>(e["topp"].number);
  sp.seed = static_cast<uint64_t>(e["seed"].number);
  Sampler sampler(model.config().vocab_size, sp);
  auto session = Session::Create(model);
  EXPECT_TRUE(session.has_value());
  if (!session) return r;
  GenerateOptions g;
  // llama2.c runs `steps` positions in total; the prompt occupies all but its last one.
  g.max_tokens = static_cast<int32_t>(e["steps"].number) - static_cast<int32_t>(ids->size()) + 1;
  g.stop_on_bos = true;
  auto res = Generate(**session, sampler, *ids, g);
  EXPECT_TRUE(res.has_value()) << (res ? "" : res.error().ToString());
  if (res) r.result = std::move(*res);
  return r;
}

class GoldenTest : public ::testing::Test {
 protected:
  static std::unique_ptr<Model> Load(const std::string& dir, const std::string& ckpt) {
    auto ck = testing::ModelFile("llama2c/" + dir + "/" + ckpt);
    auto tk = testing::ModelFile("llama2c/" + dir + "/tok512.bin");
    if (ck.empty() || tk.empty()) return nullptr;
    auto m = testing::ConvertAndLoad(ck, tk);
    EXPECT_TRUE(m.has_value()) << (m ? "" : m.error().ToString());
    return m ? std::move(*m) : nullptr;
  }
};

void CheckFp32Entries(const std::string& dir) {
  const auto json_path = testing::ModelFile("llama2c/" + dir + "/reference_outputs.json");
  ASSERT_FALSE(json_path.empty());
  Json ref;
  ASSERT_TRUE(testing::ReadJsonFile(json_path, ref));
  ASSERT_EQ(ref.kind, Json::kArray);
  std::map<std::string, std::unique_ptr<Model>> models;
  int checked = 0;
  for (const Json& e : ref.items) {
    if (e["program"].str != "run") continue;
    const std::string ckpt = e["checkpoint"].str;
    if (!models.count(ckpt)) {
      const std::string folder = std::string("llama2c/").append(dir).append("/");
      auto ck = testing::ModelFile(folder + ckpt);
      auto tk = testing::ModelFile(folder + e["tokenizer"].str);
      ASSERT_FALSE(ck.empty() || tk.empty());
      auto m = testing::ConvertAndLoad(ck, tk);
      ASSERT_TRUE(m.has_value()) << m.error().ToString();
      models[ckpt] = std::move(*m);
    }
    const Model& model = *models[ckpt];
    SCOPED_TRACE(dir + " run prompt='" + e["prompt"].str +
                 "' t=" + std::to_string(e["temperature"].number) +
                 " seed=" + std::to_string(e["seed"].number));
    Replay r = RunEntry(model, e);
    const std::vector<int> want_prompt = e["prompt_ids"].Ints();
    EXPECT_EQ(std::vector<int>(r.prompt_ids.begin(), r.prompt_ids.end()), want_prompt);
    const std::vector<int> want = e["generated_ids"].Ints();
    const std::vector<int> got(r.result.tokens.begin(), r.result.tokens.end());
    EXPECT_EQ(got, want);
    // llama2.c printed the prompt, then every generated piece (BOS ends the text).
    EXPECT_EQ(e["prompt"].str + r.result.text, e["text"].str);
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST_F(GoldenTest, Stories260KFp32MatchesLlama2cExactly) {
  ARI_REQUIRE_MODEL(ckpt, "llama2c/stories260K/stories260K.bin");
  CheckFp32Entries("stories260K");
}

TEST_F(GoldenTest, AiDreams260KFp32MatchesLlama2cExactly) {
  ARI_REQUIRE_MODEL(ckpt, "llama2c/aidreams260K/aidreams260K.bin");
  CheckFp32Entries("aidreams260K");
}

void CheckQ80Entries(Q80Storage storage, bool drop_tail) {
  const auto json_path = testing::ModelFile("llama2c/stories260K/reference_outputs.json");
  ASSERT_FALSE(json_path.empty());
  Json ref;
  ASSERT_TRUE(testing::ReadJsonFile(json_path, ref));
  Llama2cImportOptions opts;
  opts.q80 = storage;
  Llama2cImportReport rep;
  auto m = testing::ConvertAndLoad(testing::ModelFile("llama2c/stories260K/stories260K_q80.bin"),
                                   testing::ModelFile("llama2c/stories260K/tok512.bin"), opts, &rep,
                                   drop_tail);
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  EXPECT_EQ(rep.header.version, 2);
  EXPECT_EQ(rep.header.group_size, 32);
  if (storage == Q80Storage::kQ8_0) {
    // Everything but ffn_down (rows of 172) is row-aligned: embeddings + 6 per layer.
    EXPECT_EQ(rep.tensors_q8_0, 1 + 6 * rep.header.n_layers);
  } else {
    EXPECT_EQ(rep.tensors_q8_0, 0);  // llama2.c's fp32 scales are not fp16-exact here
  }
  int checked = 0;
  for (const Json& e : ref.items) {
    if (e["program"].str != "runq") continue;
    SCOPED_TRACE("runq prompt='" + e["prompt"].str + "'");
    Replay r = RunEntry(**m, e);
    EXPECT_EQ(std::vector<int>(r.prompt_ids.begin(), r.prompt_ids.end()), e["prompt_ids"].Ints());
    const std::vector<int> want = e["generated_ids"].Ints();
    const std::vector<int> got(r.result.tokens.begin(), r.result.tokens.end());
    size_t prefix = 0;
    while (prefix < want.size() && prefix < got.size() && want[prefix] == got[prefix]) ++prefix;
    size_t same = 0;
    for (size_t i = 0; i < std::min(want.size(), got.size()); ++i) same += want[i] == got[i];
    const double agreement = static_cast<double>(same) / static_cast<double>(want.size());
    std::printf("[ q80 %s%s ] prompt '%s': first %zu of %zu tokens identical, agreement %.3f\n",
                storage == Q80Storage::kQ8_0 ? "q8_0" : "exact", drop_tail ? " drop-tail" : "",
                e["prompt"].str.c_str(), prefix, want.size(), agreement);
    EXPECT_GE(prefix, kQ80MinPrefix);
    // Teacher forcing: run the reference sequence through our model in one chunk and rank
    // runq's choice at every position among our logits.
    std::vector<TokenId> seq = r.prompt_ids;
    seq.insert(seq.end(), want.begin(), want.end());
    SessionOptions so;
    so.max_batch = static_cast<int32_t>(seq.size());
    so.all_logits = true;
    auto session = Session::Create(**m, so);
    ASSERT_TRUE(session.has_value());
    auto logits = Forward(**session, std::span<const TokenId>(seq).first(seq.size() - 1));
    ASSERT_TRUE(logits.has_value()) << logits.error().ToString();
    const size_t vocab = static_cast<size_t>((*m)->config().vocab_size);
    size_t top1 = 0, top5 = 0, n = 0;
    for (size_t i = r.prompt_ids.size() - 1; i + 1 < seq.size(); ++i, ++n) {
      const float* row = logits->data() + i * vocab;
      const float target = row[seq[i + 1]];
      size_t rank = 0;
      for (size_t v = 0; v < vocab; ++v) rank += row[v] > target;
      top1 += rank == 0;
      top5 += rank < 5;
    }
    std::printf(
        "           teacher-forced: runq's token is our argmax at %zu/%zu, in our top-5 at "
        "%zu/%zu\n",
        top1, n, top5, n);
    EXPECT_GE(static_cast<double>(top1) / n, drop_tail ? kQ80TailMinTop1 : kQ80MinTop1);
    EXPECT_GE(static_cast<double>(top5) / n, drop_tail ? kQ80TailMinTop5 : kQ80MinTop5);
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

TEST_F(GoldenTest, Stories260KQ80WithinToleranceExactWeights) {
  ARI_REQUIRE_MODEL(ckpt, "llama2c/stories260K/stories260K_q80.bin");
  CheckQ80Entries(Q80Storage::kExact, false);
  CheckQ80Entries(Q80Storage::kExact, true);
}

TEST_F(GoldenTest, Stories260KQ80WithinToleranceGgufQ8_0) {
  ARI_REQUIRE_MODEL(ckpt, "llama2c/stories260K/stories260K_q80.bin");
  CheckQ80Entries(Q80Storage::kQ8_0, false);  // (the drop-tail variant is covered above)
}

TEST_F(GoldenTest, TokenizerEncodesPromptLikeLlama2c) {
  ARI_REQUIRE_MODEL(ckpt, "llama2c/stories260K/stories260K.bin");
  auto m = testing::ConvertAndLoad(ckpt, testing::ModelFile("llama2c/stories260K/tok512.bin"));
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  auto ids = (*m)->tokenizer()->Encode("Once upon a time", EncodeOptions{});
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ(*ids, (std::vector<TokenId>{1, 403, 407, 261, 378}));
}

}  // namespace
}  // namespace ari::runtime
