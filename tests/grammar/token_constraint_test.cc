// The token trie and the vocabulary mask (runtime/grammar/token_trie.h,
// token_constraint.h): the mask equals a token-by-token check without the trie, tokens may
// span grammar elements and split UTF-8 characters, EOG only where the grammar may end, and
// nothing allocates once constructed (counting allocator).
#include "runtime/grammar/token_constraint.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "runtime/gguf/gguf.h"
#include "runtime/grammar/json_schema.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/common/counting_allocator.h"
#include "tests/common/test_util.h"

namespace ari::runtime {
namespace {

std::shared_ptr<const CompiledGrammar> Grammar(const std::string& text) {
  auto g = CompiledGrammar::Parse(text);
  EXPECT_TRUE(g.has_value()) << (g ? "" : g.error().ToString());
  return g ? *g : nullptr;
}

// The mask without the trie: every token's bytes tried on a matcher fed `prefix`.
std::vector<uint8_t> BruteMask(const std::shared_ptr<const CompiledGrammar>& g,
                               const TokenTrie& trie, const std::string& prefix) {
  GrammarMatcher m(g);
  EXPECT_TRUE(m.AcceptBytes(prefix));
  std::vector<uint8_t> mask(static_cast<size_t>(trie.vocab_size()), 0);
  for (TokenId id = 0; id < trie.vocab_size(); ++id) {
    if (trie.IsEog(id)) {
      mask[static_cast<size_t>(id)] = m.IsAccepting();
      continue;
    }
    const std::string_view p = trie.Piece(id);
    if (p.empty()) continue;
    int pushed = 0;
    bool ok = true;
    for (char c : p) {
      if (!m.PushByte(static_cast<uint8_t>(c))) {
        ok = false;
        break;
      }
      ++pushed;
    }
    for (; pushed > 0; --pushed) m.PopFrame();
    mask[static_cast<size_t>(id)] = ok;
  }
  return mask;
}

std::vector<uint8_t> MaskOf(TokenConstraint& c) {
  c.ComputeMask();
  return std::vector<uint8_t>(c.allowed().begin(), c.allowed().end());
}

// Random walk over allowed tokens; at every step the trie mask equals the brute force.
void WalkAndCompare(const std::shared_ptr<const CompiledGrammar>& g,
                    const std::shared_ptr<const TokenTrie>& trie, uint32_t seed, int steps,
                    bool expect_complete) {
  TokenConstraint c(g, trie);
  std::mt19937 rng(seed);
  std::string text;
  for (int step = 0; step < steps && !c.Finished(); ++step) {
    const std::vector<uint8_t> mask = MaskOf(c);
    ASSERT_EQ(mask, BruteMask(g, *trie, text)) << "step " << step << " after '" << text << "'";
    std::vector<TokenId> ok;
    for (size_t i = 0; i < mask.size(); ++i) {
      if (mask[i]) ok.push_back(static_cast<TokenId>(i));
    }
    ASSERT_FALSE(ok.empty()) << text;
    const TokenId pick = ok[rng() % ok.size()];
    ASSERT_TRUE(c.Accept(pick));
    if (!trie->IsEog(pick)) text += trie->Piece(pick);
  }
  if (expect_complete) {
    EXPECT_TRUE(c.Complete()) << text;
  }
}

TEST(TokenTrie, PiecesAndEog) {
  auto t = TokenTrie::FromPieces({"a", "ab", "", "abc", "b", "<eos>"}, {5});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ((*t)->vocab_size(), 6);
  EXPECT_EQ((*t)->Piece(3), "abc");
  EXPECT_TRUE((*t)->IsEog(5));
  EXPECT_EQ((*t)->max_depth(), 3);
  EXPECT_EQ((*t)->tokens().size(), 4u);  // the empty piece and the EOG are not in the trie
  EXPECT_FALSE(TokenTrie::FromPieces({"a"}, {3}).has_value());
}

TEST(TokenConstraint, TokensSpanElementsAndSplitCharacters) {
  auto g = Grammar(R"(root ::= "{\"k\": \"" [^"]{1,3} "\"}")");
  // "\xE2" + "\x82\xAC" spell a euro sign in two tokens; "\": \"" spans three elements.
  auto t = TokenTrie::FromPieces(
      {"{", "\"k", "\": \"", "\xE2", "\x82\xAC", "x", "\"}", "\"", "}", "k", ": ", "<eos>", "\xFF"},
      {11});
  ASSERT_TRUE(t.has_value());
  TokenConstraint c(g, *t);
  for (TokenId id : {0, 1, 2, 3, 4, 5, 6}) {
    const std::vector<uint8_t> mask = MaskOf(c);
    ASSERT_TRUE(mask[static_cast<size_t>(id)]) << id;
    EXPECT_FALSE(mask[11]) << "EOG before the end";
    EXPECT_FALSE(mask[12]) << "never valid UTF-8";
    ASSERT_TRUE(c.Accept(id));
  }
  EXPECT_TRUE(c.Complete());
  for (uint32_t seed = 0; seed < 50; ++seed) WalkAndCompare(g, *t, seed, 40, true);
}

// The plain-token fast path (states uniform over plain characters take plain tokens by
// character count) against the brute force, also where uniformity ends mid-token.
TEST(TokenConstraint, PlainFastPathMatchesTheBruteForce) {
  std::vector<std::string> pieces = {
      "\"",   "a",  "ab",  "abc", "abcd", "abcdefgh", "\xC3\xA9", "\xC3\xA9x", "\xE2\x82",
      "\xAC", "\\", "\\n", "x\"", "Z9",   " ",        "\n",       "<eos>"};
  auto t = TokenTrie::FromPieces(pieces, {16});
  ASSERT_TRUE(t.has_value());
  EXPECT_GT((*t)->plain_tokens().size(), 5u);
  ASSERT_NE((*t)->others(), nullptr);
  for (const char* g : {R"(root ::= "\"" [^"\\]{0,3} [a-z]* "\"")",
                        R"(root ::= "\"" ( [^"\\] | "\\" [n"] ){0,6} "\"")",
                        R"(root ::= .{2,5} "\"")", R"(root ::= [^"\\\x00-\x1F]* "\"" "a"?)"}) {
    auto cg = Grammar(g);
    ASSERT_NE(cg, nullptr) << g;
    for (uint32_t seed = 0; seed < 40; ++seed) WalkAndCompare(cg, *t, seed, 20, false);
  }
}

TEST(TokenConstraint, EogOnlyWhereTheGrammarMayEnd) {
  auto g = Grammar(R"(root ::= [0-9]+)");
  auto t = TokenTrie::FromPieces({"1", "23", "a", "<eos>"}, {3});
  ASSERT_TRUE(t.has_value());
  TokenConstraint c(g, *t);
  EXPECT_FALSE(MaskOf(c)[3]);
  ASSERT_TRUE(c.Accept(1));
  EXPECT_FALSE(c.Finished());  // more digits may follow
  EXPECT_TRUE(MaskOf(c)[3]);
  EXPECT_FALSE(c.Accept(2));  // not allowed: state unchanged
  ASSERT_TRUE(c.Accept(3));
  EXPECT_TRUE(c.Complete());
  c.Reset();
  EXPECT_FALSE(c.Finished());
}

TEST(TokenConstraint, DeadEndForcesEog) {
  auto g = Grammar(R"(root ::= "a" "z")");
  auto t = TokenTrie::FromPieces({"a", "b", "<eos>"}, {2});
  ASSERT_TRUE(t.has_value());
  TokenConstraint c(g, *t);
  ASSERT_TRUE(c.Accept(0));
  EXPECT_EQ(c.ComputeMask(), 1);  // nothing spells "z": only the EOG, and a dead end
  EXPECT_TRUE(c.DeadEnd());
  EXPECT_FALSE(c.Complete());
  EXPECT_TRUE(c.allowed()[2]);
}

const char* kSchema = R"({"type":"object","properties":{
  "destination":{"type":"string","maxLength":24},
  "stops":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":2},
  "temperature":{"type":"number","minimum":16,"maximum":30},
  "unit":{"enum":["celsius","fahrenheit"]},
  "confirm":{"type":"boolean"}},"required":["destination","unit"]})";

// A real vocabulary from the shared vocab GGUFs.
std::shared_ptr<const TokenTrie> VocabTrie(const std::string& rel) {
  const auto path = testing::ModelFile(rel);
  if (path.empty()) return nullptr;
  auto f = GgufFile::Open(path);
  if (!f) return nullptr;
  auto tok = Tokenizer::FromGguf(*f);
  if (!tok) return nullptr;
  auto t = TokenTrie::Build(**tok);
  return t ? *t : nullptr;
}

TEST(TokenConstraint, RealVocabulariesMatchTheBruteForce) {
  for (const char* rel : {"vocab/ggml-vocab-llama-spm.gguf", "vocab/ggml-vocab-gpt-2.gguf"}) {
    auto trie = VocabTrie(rel);
    if (!trie) GTEST_SKIP() << "vocab not found: " << rel << " (set ARI_MODELS_DIR)";
    auto g = CompileJsonSchema(kSchema);
    ASSERT_TRUE(g.has_value()) << g.error().ToString();
    for (uint32_t seed = 0; seed < 4; ++seed) WalkAndCompare(*g, trie, seed, 30, false);
  }
}

TEST(TokenConstraint, MaskCacheGivesTheWalkedMask) {
  auto trie = VocabTrie("vocab/ggml-vocab-gpt-2.gguf");
  if (!trie) GTEST_SKIP() << "vocab not found (set ARI_MODELS_DIR)";
  // A string value that must hold 6+ characters: the walk passes states where nearly the
  // whole vocabulary is allowed (the walks the cache stores).
  auto g = CompileJsonSchema(
      R"({"type":"object","properties":{"d":{"type":"string","minLength":6,"maxLength":12}},
          "required":["d"]})");
  ASSERT_TRUE(g.has_value());
  TokenConstraint cached(*g, trie, {}, 64);
  TokenConstraint cold(*g, trie, {}, 0);
  for (int run = 0; run < 3; ++run) {
    cached.Reset();
    cold.Reset();
    std::mt19937 rng(3);  // the same walk each run: the second and third hit the cache
    for (int step = 0; step < 60 && !cold.Finished(); ++step) {
      const std::vector<uint8_t> a = MaskOf(cached), b = MaskOf(cold);
      ASSERT_EQ(a, b) << "run " << run << " step " << step;
      std::vector<TokenId> ok;
      for (size_t i = 0; i < b.size(); ++i) {
        if (b[i] && !trie->IsEog(static_cast<TokenId>(i))) ok.push_back(static_cast<TokenId>(i));
      }
      if (ok.empty()) break;
      const TokenId pick = ok[rng() % ok.size()];
      ASSERT_TRUE(cached.Accept(pick));
      ASSERT_TRUE(cold.Accept(pick));
    }
  }
  EXPECT_GT(cached.cache_hits(), 0) << cached.cache_misses();
  EXPECT_EQ(cold.cache_hits(), 0);
}

TEST(TokenConstraint, NoHeapAllocationAfterConstruction) {
  auto trie = VocabTrie("vocab/ggml-vocab-gpt-2.gguf");
  if (!trie) GTEST_SKIP() << "vocab not found (set ARI_MODELS_DIR)";
  auto g = CompileJsonSchema(kSchema);
  ASSERT_TRUE(g.has_value());
  TokenConstraint c(*g, trie);
  std::vector<float> logits(static_cast<size_t>(trie->vocab_size()), 0.0f);
  std::mt19937 rng(7);
  long steps = 0;
  testing::CountAllocations allocations;
  for (int run = 0; run < 3; ++run) {
    c.Reset();
    while (!c.Finished() && steps < 2000) {
      if (c.ApplyMask(logits) == 0) break;
      // The first allowed token from a random start, without allocating.
      size_t i = rng() % logits.size();
      while (c.allowed()[i] == 0) i = (i + 1) % logits.size();
      if (!c.Accept(static_cast<TokenId>(i))) break;
      ++steps;
    }
  }
  EXPECT_EQ(allocations.count(), 0);
  EXPECT_GT(steps, 10);
}

// A pooled constraint (the node's) serves another grammar after Rebind: the same masks
// as a fresh constraint of that grammar, the cache of the old one not reused, and no
// allocation.
TEST(TokenConstraint, RebindServesAnotherGrammarWithoutAllocating) {
  auto t = TokenTrie::FromPieces({"1", "23", "a", "ab", "<eos>"}, {4});
  ASSERT_TRUE(t.has_value());
  auto digits = Grammar(R"(root ::= [0-9]+)");
  auto letters = Grammar(R"(root ::= "a" "b"?)");
  TokenConstraint pooled(digits, *t);
  ASSERT_TRUE(pooled.Accept(1));
  ASSERT_TRUE(pooled.Accept(4));
  ASSERT_TRUE(pooled.Complete());
  {
    testing::CountAllocations allocations;
    pooled.Rebind(letters);
    EXPECT_EQ(allocations.count(), 0);
  }
  EXPECT_FALSE(pooled.Finished());
  TokenConstraint fresh(letters, *t);
  EXPECT_EQ(MaskOf(pooled), MaskOf(fresh));
  EXPECT_EQ(MaskOf(pooled), (std::vector<uint8_t>{0, 0, 1, 1, 0}));
  ASSERT_TRUE(pooled.Accept(3));
  EXPECT_TRUE(pooled.Complete());
  pooled.Rebind(digits);
  EXPECT_EQ(MaskOf(pooled), (std::vector<uint8_t>{1, 1, 0, 0, 0}));
}

}  // namespace
}  // namespace ari::runtime
