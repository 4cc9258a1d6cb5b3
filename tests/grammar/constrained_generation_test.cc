// Constrained generation end to end through the Engine (the path ari-node runs): with
// stories260K and random-weight models of 32k (llama-spm) and 50k (gpt-2) vocabularies,
// every seed and temperature up to 1.5, each shipped schema (config/schemas/): every
// output that ends with kGrammarDone validates (independent validator, json_validator.h),
// every other ending is kMaxTokens/kContextFull and does not claim validity. Golden: the
// same seed gives the same tokens across runs and across the scalar and best ISA tiers.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/convert/synth.h"
#include "runtime/engine/engine.h"
#include "runtime/generate/generate.h"
#include "runtime/generate/sampler.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/token_constraint.h"
#include "runtime/kernels/cpu_features.h"
#include "runtime/model/model.h"
#include "runtime/model/session.h"
#include "tests/grammar/json_validator.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::vector<std::string>& SchemaNames() {
  static const std::vector<std::string> k = {"navigation_destination", "climate_setting",
                                             "media_command", "yes_no_confirmation"};
  return k;
}

std::string Schema(const std::string& name) {
  return ReadFile(testing::SourceDir() / "config/schemas" / (name + ".json"));
}

// A random-weight model of `preset` with the vocabulary `vocab_rel`, packed.
testing::ModelPair SynthPair(const std::string& preset, const std::string& vocab_rel) {
  testing::ModelPair mp;
  const auto vocab = testing::ModelFile(vocab_rel);
  auto p = FindSynthPreset(preset);
  if (vocab.empty() || !p) return mp;
  const auto dir = testing::TempDir("grammar");
  mp.plain = dir / (preset + ".gguf");
  mp.pack = dir / (preset + ".pack.gguf");
  SynthOptions o;
  o.preset = *p;
  o.type = TensorType::kF16;
  if (!WriteSynthModel(o, vocab, mp.plain)) return mp;
  mp.ok = WritePack(mp.plain, mp.pack, {}).has_value();
  return mp;
}

struct Output {
  std::vector<TokenId> tokens;
  std::string text;
  StopReason stop = StopReason::kMaxTokens;
};

Output RunTurn(Engine& e, const std::vector<TokenId>& prompt, TokenConstraint& c, float temp,
               uint64_t seed, int32_t max_tokens) {
  TurnSpec t;
  t.prompt = prompt;
  t.sampling.temperature = temp;
  t.sampling.top_p = temp > 1.0f ? 1.0f : 0.95f;
  t.sampling.seed = seed;
  t.sampling.constraint = &c;
  t.max_tokens = max_tokens;
  t.keep_context = false;
  Output out;
  if (!e.StartTurn(0, t)) return out;
  ChunkKnobs k;
  k.precision = Precision::kW8A16;
  k.decode_tokens = 16;
  k.threads = 2;
  int64_t masked = 0, mask_ns = 0;
  while (true) {
    auto r = e.RunChunk(0, k);
    if (!r) {
      ADD_FAILURE() << r.error().ToString();
      return out;
    }
    out.tokens.insert(out.tokens.end(), r->tokens.begin(), r->tokens.end());
    out.text.append(r->text);
    // The mask's time is observed inside the chunk and is part of its compute time.
    EXPECT_LE(r->mask_ns, r->compute_ns);
    masked += r->masked_tokens;
    mask_ns += r->mask_ns;
    if (r->finished) {
      out.stop = r->stop_reason;
      // Every sampled token went through the mask (an EOG that ends it included).
      EXPECT_GE(masked, static_cast<int64_t>(out.tokens.size()));
      EXPECT_LE(masked, static_cast<int64_t>(out.tokens.size()) + 1);
      EXPECT_GT(mask_ns, 0);
      return out;
    }
  }
}

struct ModelCase {
  std::string name;
  testing::ModelPair mp;
};

std::vector<ModelCase> Models() {
  std::vector<ModelCase> m;
  if (auto& s = testing::Stories260K(); s.ok) m.push_back({"stories260K", s});
  if (auto s = SynthPair("tiny", "vocab/ggml-vocab-llama-spm.gguf"); s.ok) {
    m.push_back({"tiny llama-spm 32k", s});
  }
  if (auto s = SynthPair("tiny-qwen2", "vocab/ggml-vocab-gpt-2.gguf"); s.ok) {
    m.push_back({"tiny-qwen2 gpt-2 50k", s});
  }
  return m;
}

std::unique_ptr<Engine> MakeEngine(const testing::ModelPair& mp) {
  EngineOptions o;
  o.model_path = mp.pack;
  o.slots = 1;
  o.context_length = 512;
  o.max_output = 480;
  o.threads = 2;
  o.require_tokenizer = true;
  auto e = Engine::Create(o);
  EXPECT_TRUE(e.has_value()) << (e ? "" : e.error().ToString());
  return e ? std::move(*e) : nullptr;
}

TEST(ConstrainedGeneration, EveryOutputValidates) {
  const auto models = Models();
  if (models.size() < 3) GTEST_SKIP() << "models not found (set ARI_MODELS_DIR)";
  for (const ModelCase& mc : models) {
    auto e = MakeEngine(mc.mp);
    ASSERT_NE(e, nullptr);
    const Tokenizer& tok = *e->model().tokenizer();
    auto trie = TokenTrie::Build(tok);
    ASSERT_TRUE(trie.has_value());
    auto prompt = tok.Encode("The command as JSON:", EncodeOptions{});
    ASSERT_TRUE(prompt.has_value());
    int done = 0, total = 0;
    int64_t hits = 0, misses = 0;
    for (const std::string& name : SchemaNames()) {
      const std::string schema = Schema(name);
      auto g = CompileJsonSchema(schema);
      ASSERT_TRUE(g.has_value()) << name << ": " << g.error().ToString();
      TokenConstraint c(*g, *trie);
      for (float temp : {0.0f, 0.7f, 1.0f, 1.5f}) {
        for (uint64_t seed = 1; seed <= 3; ++seed) {
          const Output o = RunTurn(*e, *prompt, c, temp, seed, 480);
          ++total;
          const std::string why = testing::ValidateJson(o.text, schema);
          if (o.stop == StopReason::kGrammarDone) {
            ++done;
            EXPECT_EQ(why, "") << mc.name << " " << name << " t=" << temp << " seed " << seed;
          } else {
            EXPECT_TRUE(o.stop == StopReason::kMaxTokens || o.stop == StopReason::kContextFull)
                << StopReasonName(o.stop) << " " << mc.name << " " << name << ": " << o.text;
            EXPECT_NE(why, "") << "an incomplete output must not be valid: " << o.text;
          }
        }
      }
      hits += c.cache_hits();
      misses += c.cache_misses();
    }
    // Bounded schemas end well inside the budget.
    EXPECT_EQ(done, total) << mc.name;
    std::printf("%s: %d/%d outputs complete and valid; mask cache %lld hits, %lld walks\n",
                mc.name.c_str(), done, total, static_cast<long long>(hits),
                static_cast<long long>(misses));
  }
}

// The reference loop (Generate over a Session, fp32) takes the same hook.
TEST(ConstrainedGeneration, ReferenceGenerateLoop) {
  const auto& mp = testing::Stories260K();
  if (!mp.ok) GTEST_SKIP() << "stories260K not found (set ARI_MODELS_DIR)";
  auto model = Model::Load(mp.plain);
  ASSERT_TRUE(model.has_value()) << model.error().ToString();
  SessionOptions so;
  so.context_length = 512;
  auto session = Session::Create(**model, so);
  ASSERT_TRUE(session.has_value());
  auto trie = TokenTrie::Build(*(*model)->tokenizer());
  ASSERT_TRUE(trie.has_value());
  for (const std::string& name : {std::string("media_command"), std::string("climate_setting")}) {
    const std::string schema = Schema(name);
    auto g = CompileJsonSchema(schema);
    ASSERT_TRUE(g.has_value());
    TokenConstraint c(*g, *trie);
    for (float temp : {0.0f, 1.5f}) {
      SamplingParams sp;
      sp.temperature = temp;
      sp.seed = 5;
      sp.constraint = &c;
      Sampler sampler((*model)->config().vocab_size, sp);
      sampler.SetParams(sp);
      (*session)->Reset();
      GenerateOptions go;
      go.max_tokens = 400;
      auto r = GenerateFromText(**session, sampler, "Play some music:", EncodeOptions{}, go);
      ASSERT_TRUE(r.has_value()) << r.error().ToString();
      EXPECT_EQ(r->stop_reason, StopReason::kGrammarDone) << r->text;
      EXPECT_EQ(testing::ValidateJson(r->text, schema), "") << name << " t=" << temp;
    }
  }
  // A budget too small to finish: max_tokens, and the text is not valid.
  const std::string schema = Schema("navigation_destination");
  auto g = CompileJsonSchema(schema);
  ASSERT_TRUE(g.has_value());
  TokenConstraint c(*g, *trie);
  SamplingParams sp;
  sp.constraint = &c;
  Sampler sampler((*model)->config().vocab_size, sp);
  (*session)->Reset();
  GenerateOptions go;
  go.max_tokens = 5;
  auto r = GenerateFromText(**session, sampler, "Go home:", EncodeOptions{}, go);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->stop_reason, StopReason::kMaxTokens);
  EXPECT_NE(testing::ValidateJson(r->text, schema), "");
}

TEST(ConstrainedGeneration, GoldenAcrossRunsAndIsaTiers) {
  const auto models = Models();
  if (models.size() < 3) GTEST_SKIP() << "models not found (set ARI_MODELS_DIR)";
  const std::string schema = Schema("climate_setting");
  auto g = CompileJsonSchema(schema);
  ASSERT_TRUE(g.has_value());
  for (const ModelCase& mc : models) {
    std::vector<std::vector<TokenId>> runs;
    for (kernels::IsaTier tier :
         {kernels::BestIsaTier(), kernels::BestIsaTier(), kernels::IsaTier::kScalar}) {
      ASSERT_TRUE(kernels::SetMaxIsaTier(tier).has_value());
      auto e = MakeEngine(mc.mp);
      ASSERT_NE(e, nullptr);
      auto trie = TokenTrie::Build(*e->model().tokenizer());
      ASSERT_TRUE(trie.has_value());
      auto prompt = e->model().tokenizer()->Encode("Set the climate:", EncodeOptions{});
      ASSERT_TRUE(prompt.has_value());
      TokenConstraint c(*g, *trie);
      std::vector<TokenId> all;
      for (uint64_t seed : {11u, 12u, 13u}) {
        const Output o = RunTurn(*e, *prompt, c, 1.0f, seed, 480);
        EXPECT_EQ(o.stop, StopReason::kGrammarDone) << mc.name << ": " << o.text;
        all.insert(all.end(), o.tokens.begin(), o.tokens.end());
        all.push_back(-1);
      }
      runs.push_back(all);
    }
    ASSERT_TRUE(kernels::SetMaxIsaTier(kernels::BestIsaTier()).has_value());
    EXPECT_EQ(runs[0], runs[1]) << mc.name << ": same seed, different output";
    EXPECT_EQ(runs[0], runs[2]) << mc.name << ": scalar and "
                                << kernels::IsaTierName(kernels::BestIsaTier()) << " differ";
  }
}

}  // namespace
}  // namespace ari::runtime
