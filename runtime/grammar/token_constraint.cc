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
                                 std::shared_ptr<const TokenTrie> trie, MatcherLimits limits)
    : trie_(std::move(trie)),
      matcher_(std::move(grammar), WithFrames(limits, trie_->max_depth())),
      allowed_(static_cast<size_t>(trie_->vocab_size()), 0) {}

void TokenConstraint::Reset() {
  matcher_.Reset();
  complete_ = dead_end_ = false;
}

void TokenConstraint::Walk(uint32_t node) {
  const auto& nodes = trie_->nodes();
  const auto& toks = trie_->tokens();
  const TokenTrie::Node& n = nodes[node];
  for (uint32_t c = n.child_begin; c < n.child_end; ++c) {
    const TokenTrie::Node& child = nodes[c];
    if (!matcher_.PushByte(child.byte)) continue;
    for (uint32_t t = child.token_begin; t < child.token_end; ++t) {
      allowed_[static_cast<size_t>(toks[t])] = 1;
    }
    count_ += static_cast<int32_t>(child.token_end - child.token_begin);
    if (child.child_begin != child.child_end) Walk(c);
    matcher_.PopFrame();
  }
}

int32_t TokenConstraint::ComputeMask() {
  std::fill(allowed_.begin(), allowed_.end(), 0);
  count_ = 0;
  if (!Finished()) Walk(0);
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
