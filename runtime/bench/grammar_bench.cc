// Per-token cost of the grammar mask (runtime/grammar/token_constraint.h,
// docs/structured_output.md): TokenConstraint::ApplyMask over a whole vocabulary at fixed
// points of a JSON-schema output, for 32k (llama-spm), 50k (gpt-2) and 152k vocabularies.
//
//   ARI_MODELS_DIR=/path/to/shared/models grammar_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
//
// The 152k vocabulary is synthetic (no Qwen2 vocab GGUF in the models snapshot): the gpt-2
// pieces plus 102k pieces made by joining two or three random gpt-2 pieces and 2-6 random
// CJK characters (3-byte UTF-8), the mix of long merges and multi-byte tokens of Qwen2's.
// States (the bytes written so far, climate_setting-like schema):
//   start   - nothing yet: only tokens starting with "{" live (cheap: most subtrees die)
//   key     - after "{": a property name (only a few prefixes live)
//   string  - inside a free string value: nearly every token is allowed (the worst case)
//   number  - inside a bounded number
// Each without the mask cache (/walk: computed, the fast path or the trie walk, as on a
// state's first visit) and with it
// (/cached: the state seen before, e.g. the same schema served again).
// Also Accept/<vocab>: advancing the matcher by one token (the other per-token cost).
// Real time on an idle machine is what counts; figures measured while other builds run
// are labelled contended in the docs.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/grammar/token_constraint.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ari::runtime {
namespace {

constexpr const char* kSchema = R"({"type":"object","properties":{
  "destination":{"type":"string","maxLength":64},
  "zone":{"enum":["driver","passenger","rear","all"]},
  "temperature_c":{"type":"number","minimum":16,"maximum":30}},
  "required":["destination","zone"]})";

std::vector<std::string> VocabPieces(const std::string& rel, std::vector<TokenId>& eog) {
  const char* dir = std::getenv("ARI_MODELS_DIR");
  const std::filesystem::path p = std::filesystem::path(dir ? dir : "../shared/models") / rel;
  auto f = GgufFile::Open(p);
  if (!f) return {};
  auto tok = Tokenizer::FromGguf(*f);
  if (!tok) return {};
  std::vector<std::string> pieces;
  for (TokenId id = 0; id < (*tok)->VocabSize(); ++id) {
    if ((*tok)->IsEog(id)) eog.push_back(id);
    pieces.emplace_back((*tok)->IsEog(id) ? "" : (*tok)->Piece(id));
  }
  return pieces;
}

std::shared_ptr<const TokenTrie> Vocab(int which) {
  static std::shared_ptr<const TokenTrie> cache[3];
  if (cache[which]) return cache[which];
  std::vector<TokenId> eog;
  std::vector<std::string> pieces = VocabPieces(
      which == 0 ? "vocab/ggml-vocab-llama-spm.gguf" : "vocab/ggml-vocab-gpt-2.gguf", eog);
  if (pieces.empty()) return nullptr;
  if (which == 2) {  // synthetic 152k (see the file comment)
    std::mt19937 rng(152);
    const size_t base = pieces.size();
    while (pieces.size() < 152064) {
      std::string s;
      if (rng() % 3 == 0) {
        for (int i = 0, n = 2 + static_cast<int>(rng() % 5); i < n; ++i) {
          const uint32_t cp = 0x4E00 + rng() % 0x5000;
          s += static_cast<char>(0xE0 | (cp >> 12));
          s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          s += static_cast<char>(0x80 | (cp & 0x3F));
        }
      } else {
        for (int i = 0, n = 2 + static_cast<int>(rng() % 2); i < n; ++i) s += pieces[rng() % base];
      }
      pieces.push_back(s);
    }
  }
  auto t = TokenTrie::FromPieces(pieces, eog);
  cache[which] = t ? *t : nullptr;
  return cache[which];
}

constexpr char kNumberState[] = "{\"destination\": \"x\", \"zone\": \"all\", \"temperature_c\": 2";
constexpr std::array<const char*, 3> kVocabNames = {"spm32k", "gpt2_50k", "synth152k"};
constexpr std::array<const char*, 4> kStates = {"", "{", "{\"destination\": \"Main Str",
                                                kNumberState};
constexpr std::array<const char*, 4> kStateNames = {"start", "key", "string", "number"};

void BM_Mask(benchmark::State& state) {
  const int vocab = static_cast<int>(state.range(0));
  const int where = static_cast<int>(state.range(1));
  const bool cached = state.range(2) != 0;
  state.SetLabel(std::string(kVocabNames[static_cast<size_t>(vocab)]) + "/" +
                 kStateNames[static_cast<size_t>(where)] + (cached ? "/cached" : "/walk"));
  auto trie = Vocab(vocab);
  auto g = CompileJsonSchema(kSchema);
  if (!trie || !g) {
    state.SkipWithError("vocab GGUF not found (set ARI_MODELS_DIR) or schema failed");
    return;
  }
  TokenConstraint c(*g, trie, {}, cached ? TokenConstraint::kDefaultCacheEntries : 0);
  GrammarMatcher check(*g);
  if (!check.AcceptBytes(kStates[static_cast<size_t>(where)])) {
    state.SkipWithError("state text is not a prefix");
    return;
  }
  // Reach the state through tokens of one byte where possible: feed the text byte by byte
  // through the matcher the constraint owns (its bytes are in every vocab used here).
  std::vector<float> logits(static_cast<size_t>(trie->vocab_size()), 0.0f);
  for (char ch : std::string_view(kStates[static_cast<size_t>(where)])) {
    TokenId id = -1;
    for (TokenId t = 0; t < trie->vocab_size() && id < 0; ++t) {
      if (trie->Piece(t) == std::string_view(&ch, 1)) id = t;
    }
    if (id < 0 || !c.Accept(id)) {
      state.SkipWithError("cannot reach the state with one-byte tokens");
      return;
    }
  }
  int64_t allowed = 0;
  for (auto _ : state) {
    allowed = c.ApplyMask(logits);
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["allowed"] = static_cast<double>(allowed);
  state.counters["vocab"] = trie->vocab_size();
}
BENCHMARK(BM_Mask)
    ->ArgsProduct({{0, 1, 2}, {0, 1, 2, 3}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_Accept(benchmark::State& state) {
  const int vocab = static_cast<int>(state.range(0));
  state.SetLabel(kVocabNames[static_cast<size_t>(vocab)]);
  auto trie = Vocab(vocab);
  auto g = CompiledGrammar::Parse(R"(root ::= [a-z ]*)");
  if (!trie || !g) {
    state.SkipWithError("vocab GGUF not found (set ARI_MODELS_DIR)");
    return;
  }
  std::vector<TokenId> words;
  for (TokenId t = 0; t < trie->vocab_size(); ++t) {
    const std::string_view p = trie->Piece(t);
    if (p.size() >= 3 && p.find_first_not_of("abcdefghijklmnopqrstuvwxyz ") == p.npos) {
      words.push_back(t);
    }
  }
  TokenConstraint c(*g, trie);
  size_t i = 0;
  for (auto _ : state) {
    if (!c.Accept(words[i++ % words.size()])) state.SkipWithError("refused");
  }
}
BENCHMARK(BM_Accept)->DenseRange(0, 2)->Unit(benchmark::kNanosecond)->UseRealTime();

}  // namespace
}  // namespace ari::runtime

BENCHMARK_MAIN();
