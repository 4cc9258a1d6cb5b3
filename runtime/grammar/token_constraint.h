// The vocabulary mask of a grammar: which tokens can continue the output so far.
//
// One TokenConstraint per generation slot: a GrammarMatcher (preallocated) over a shared
// CompiledGrammar, a shared TokenTrie of the tokenizer, and a mask buffer of vocab_size
// bytes. ApplyMask() walks the trie with the matcher (a subtree is skipped at its first
// dead byte) and sets the logits of every other token to -inf; end-of-generation tokens are
// allowed only where the grammar may end. Accept() advances by the sampled token. Nothing
// allocates after construction (tests/grammar/token_constraint_alloc_test.cc).
//
// Mask cache: the mask is a function of the matcher state alone, so the last `cache_entries`
// masks (bitsets, vocab_size / 8 bytes each) are kept under the state's exact key
// (GrammarMatcher::StateKey) and reused, least recently used replaced. A schema served
// again, or a repetition that returns to the same state (an unbounded string), costs a
// key and a bitset copy instead of a trie walk. Only walks that tried at least
// kCacheMinPushes trie nodes are stored (a cheap walk is faster than the copy). 0 entries:
// no cache.
//
// The sampler uses it through SamplingParams::constraint (runtime/generate/sampler.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/core/types.h"
#include "runtime/grammar/grammar.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/grammar/token_trie.h"

namespace ari::runtime {

class TokenConstraint {
 public:
  static constexpr int32_t kDefaultCacheEntries = 64;
  TokenConstraint(std::shared_ptr<const CompiledGrammar> grammar,
                  std::shared_ptr<const TokenTrie> trie, MatcherLimits limits = {},
                  int32_t cache_entries = kDefaultCacheEntries);

  // A new output (start of a turn).
  void Reset();
  // Serves `grammar` from now on (a pooled constraint reused by another request; the trie
  // stays). The mask cache is kept when the grammar is the same object, else emptied.
  // Allocates nothing (the previous grammar is released here, on the caller's thread).
  void Rebind(std::shared_ptr<const CompiledGrammar> grammar);
  // Fills allowed() for the current state; returns how many tokens are allowed. When no
  // token can continue (a vocabulary that cannot spell what the grammar needs), the EOG
  // tokens are allowed instead and DeadEnd() turns true.
  int32_t ComputeMask();
  std::span<const uint8_t> allowed() const { return allowed_; }
  // ComputeMask(), then logits[id] = -inf for every token not allowed. Returns the count.
  int32_t ApplyMask(std::span<float> logits);
  // Advances by `id`'s bytes (an EOG token ends the output). false when `id` is not allowed
  // here (the state is unchanged).
  bool Accept(TokenId id);

  // The output is a complete sentence and the turn should end: nothing can follow it, or
  // an EOG token was accepted where the grammar may end.
  bool Complete() const { return complete_; }
  bool DeadEnd() const { return dead_end_; }
  bool Finished() const { return complete_ || dead_end_; }
  // The output so far is a complete sentence (more may follow).
  bool Accepting() const { return matcher_.IsAccepting(); }
  const GrammarMatcher& matcher() const { return matcher_; }
  const TokenTrie& trie() const { return *trie_; }
  int64_t cache_hits() const { return hits_; }
  int64_t cache_misses() const { return misses_; }

 private:
  static constexpr size_t kMaxKey = 256;
  // Walks of fewer trie nodes than this are cheaper than the cache's copy: not stored.
  static constexpr int64_t kCacheMinPushes = 4096;
  struct CacheEntry {
    std::vector<uint32_t> key;  // kMaxKey words, key_len used
    std::vector<uint64_t> bits;
    int32_t key_len = -1;  // -1: empty
    uint64_t hash = 0, last_used = 0;
    int32_t count = 0;
  };
  void Walk(const TokenTrie& trie, uint32_t node);
  // The mask of the current state by the plain fast path (see token_trie.h), or the whole
  // trie walk when the state is not uniform over plain characters.
  void WalkAll();
  // How many plain characters the state takes in a row, or -1 (not uniform all along).
  int32_t PlainRun();
  // The trie walk's mask for the current state, from the cache when there.
  void WalkCached();

  std::shared_ptr<const TokenTrie> trie_;
  GrammarMatcher matcher_;
  std::vector<uint8_t> allowed_;
  int32_t count_ = 0;
  bool complete_ = false;
  bool dead_end_ = false;
  std::vector<CacheEntry> cache_;
  std::vector<uint32_t> key_;  // kMaxKey words
  uint64_t tick_ = 0;
  int64_t hits_ = 0, misses_ = 0;
  int64_t pushes_ = 0;  // trie nodes tried by the current walk
};

}  // namespace ari::runtime
