#include "runtime/grammar/token_constraint.h"

#include <algorithm>
#include <limits>

namespace ari::runtime {

namespace {
MatcherLimits WithFrames(MatcherLimits l, int32_t depth) {
  l.max_frames = std::max(l.max_frames, depth + 2);
  return l;
}
}  // namespace

TokenConstraint::TokenConstraint(std::shared_ptr<const CompiledGrammar> grammar,
                                 std::shared_ptr<const TokenTrie> trie, MatcherLimits limits,
                                 int32_t cache_entries)
    : trie_(std::move(trie)),
      matcher_(std::move(grammar), WithFrames(limits, trie_->max_depth())),
      allowed_(static_cast<size_t>(trie_->vocab_size()), 0),
      cache_(static_cast<size_t>(std::max(cache_entries, 0))),
      key_(kMaxKey) {
  const size_t words = (allowed_.size() + 63) / 64;
  for (CacheEntry& e : cache_) {
    e.key.resize(kMaxKey);
    e.bits.resize(words);
  }
}

void TokenConstraint::WalkCached() {
  const int32_t len = cache_.empty() ? -1 : matcher_.StateKey(key_);
  if (len < 0) {
    WalkAll();
    return;
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the key words
  for (int32_t i = 0; i < len; ++i) h = (h ^ key_[static_cast<size_t>(i)]) * 1099511628211ull;
  CacheEntry* victim = &cache_[0];
  for (CacheEntry& e : cache_) {
    if (e.key_len == len && e.hash == h &&
        std::equal(key_.begin(), key_.begin() + len, e.key.begin())) {
      ++hits_;
      e.last_used = ++tick_;
      count_ = e.count;
      for (size_t w = 0; w < e.bits.size(); ++w) {  // allowed_ is all 0 here
        for (uint64_t b = e.bits[w]; b != 0; b &= b - 1) {
          allowed_[w * 64 + static_cast<size_t>(__builtin_ctzll(b))] = 1;
        }
      }
      return;
    }
    if (e.last_used < victim->last_used) victim = &e;
  }
  ++misses_;
  pushes_ = 0;
  WalkAll();
  if (pushes_ < kCacheMinPushes) return;  // cheap to walk again: keep the entries for others
  std::copy(key_.begin(), key_.begin() + len, victim->key.begin());
  victim->key_len = len;
  victim->hash = h;
  victim->count = count_;
  victim->last_used = ++tick_;
  for (size_t w = 0; w < victim->bits.size(); ++w) {
    uint64_t b = 0;
    const size_t base = w * 64, end = std::min(base + 64, allowed_.size());
    for (size_t i = base; i < end; ++i) b |= static_cast<uint64_t>(allowed_[i] != 0) << (i - base);
    victim->bits[w] = b;
  }
}

void TokenConstraint::Reset() {
  matcher_.Reset();
  complete_ = dead_end_ = false;
}

void TokenConstraint::Rebind(std::shared_ptr<const CompiledGrammar> grammar) {
  if (grammar.get() != &matcher_.grammar()) {
    for (CacheEntry& e : cache_) e.key_len = -1;  // keys are states of the old grammar
  }
  matcher_.Rebind(std::move(grammar));
  complete_ = dead_end_ = false;
}

int32_t TokenConstraint::PlainRun() {
  int32_t k = 0;
  int32_t result = -1;
  while (true) {
    if (!matcher_.UniformOverPlain()) break;                         // result stays -1
    if (k == trie_->max_plain_chars() || !matcher_.PushByte('a')) {  // 'a' stands for all
      result = k;
      break;
    }
    ++k;
  }
  for (int32_t i = 0; i < k; ++i) matcher_.PopFrame();
  return result;
}

void TokenConstraint::WalkAll() {
  const TokenTrie* others = trie_->others();
  const int32_t k = others != nullptr ? PlainRun() : -1;
  if (k < 0) {
    Walk(*trie_, 0);
    return;
  }
  const auto& plain = trie_->plain_tokens();
  const int32_t n = trie_->plain_upto(k);
  for (int32_t i = 0; i < n; ++i) allowed_[static_cast<size_t>(plain[static_cast<size_t>(i)])] = 1;
  count_ += n;
  pushes_ += n;  // what the walk would have tried, at least: the cache keeps such masks
  Walk(*others, 0);
}

void TokenConstraint::Walk(const TokenTrie& trie, uint32_t node) {
  const auto& nodes = trie.nodes();
  const auto& toks = trie.tokens();
  const TokenTrie::Node& n = nodes[node];
  for (uint32_t c = n.child_begin; c < n.child_end; ++c) {
    const TokenTrie::Node& child = nodes[c];
    ++pushes_;
    if (!matcher_.PushByte(child.byte)) continue;
    for (uint32_t t = child.token_begin; t < child.token_end; ++t) {
      allowed_[static_cast<size_t>(toks[t])] = 1;
    }
    count_ += static_cast<int32_t>(child.token_end - child.token_begin);
    if (child.child_begin != child.child_end) Walk(trie, c);
    matcher_.PopFrame();
  }
}

int32_t TokenConstraint::ComputeMask() {
  std::fill(allowed_.begin(), allowed_.end(), 0);
  count_ = 0;
  if (!Finished()) WalkCached();
  if (count_ == 0 && !matcher_.IsAccepting() && !complete_) dead_end_ = true;
  if (matcher_.IsAccepting() || dead_end_) {
    for (TokenId id : trie_->eog_tokens()) allowed_[static_cast<size_t>(id)] = 1;
    count_ += static_cast<int32_t>(trie_->eog_tokens().size());
  }
  return count_;
}

int32_t TokenConstraint::ApplyMask(std::span<float> logits) {
  const int32_t n = ComputeMask();
  const size_t v = std::min(logits.size(), allowed_.size());
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < v; ++i) {
    if (allowed_[i] == 0) logits[i] = kNegInf;
  }
  for (size_t i = v; i < logits.size(); ++i) logits[i] = kNegInf;
  return n;
}

bool TokenConstraint::Accept(TokenId id) {
  if (trie_->IsEog(id) && dead_end_) return true;  // the forced end of a dead end
  if (Finished()) return false;
  if (trie_->IsEog(id)) {
    if (matcher_.IsAccepting()) {
      complete_ = true;
      return true;
    }
    return false;
  }
  const std::string_view piece = trie_->Piece(id);
  if (piece.empty() || !matcher_.AcceptBytes(piece)) return false;
  if (!matcher_.CanContinue()) complete_ = true;  // only the empty stack is left
  return true;
}

}  // namespace ari::runtime
