#include "runtime/grammar/grammar_matcher.h"

#include <algorithm>

namespace ari::runtime {

namespace {
using Kind = CompiledGrammar::Kind;
constexpr uint32_t kMinCodePoint[5] = {0, 0, 0x80, 0x800, 0x10000};
}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar,
                               const MatcherLimits& limits)
    : g_(std::move(grammar)), limits_(limits) {
  nodes_.resize(static_cast<size_t>(std::max(limits_.max_nodes, 1)));
  tops_.resize(static_cast<size_t>(std::max(limits_.max_tops, 1)));
  remap_.resize(nodes_.size());
  frames_.reserve(static_cast<size_t>(std::max(limits_.max_frames, 1)) + 1);
  Reset();
}

void GrammarMatcher::Reset() {
  nodes_used_ = tops_used_ = open_tops_begin_ = 0;
  frames_.clear();
  const auto [a0, a1] = g_->rule_alts()[g_->root()];
  for (uint32_t a = a0; a < a1; ++a) Expand(g_->alt_starts()[a], -1, 0);
  frames_.push_back(Frame{0, tops_used_, nodes_used_, 0, 0, 0});
}

void GrammarMatcher::Rebind(std::shared_ptr<const CompiledGrammar> grammar) {
  g_ = std::move(grammar);
  Reset();
}

int32_t GrammarMatcher::NewNode(uint32_t pos, int32_t parent, int32_t depth) {
  if (nodes_used_ >= nodes_.size() || depth >= limits_.max_depth) {
    ++dropped_;
    return -1;
  }
  nodes_[nodes_used_] = Node{pos, parent, depth + 1};
  return static_cast<int32_t>(nodes_used_++);
}

bool GrammarMatcher::SameStack(int32_t a, int32_t b) const {
  while (a >= 0 && b >= 0) {
    if (a == b) return true;
    const Node& na = nodes_[static_cast<size_t>(a)];
    const Node& nb = nodes_[static_cast<size_t>(b)];
    if (na.pos != nb.pos) return false;
    a = na.parent;
    b = nb.parent;
  }
  return a == b;
}

void GrammarMatcher::AddTop(int32_t node) {
  for (uint32_t i = open_tops_begin_; i < tops_used_; ++i) {
    const int32_t t = tops_[i];
    if (t == node || (t >= 0 && node >= 0 && SameStack(t, node))) return;
  }
  if (tops_used_ >= tops_.size()) {
    ++dropped_;
    return;
  }
  tops_[tops_used_++] = node;
}

// depth: of `parent`'s chain (0 for none).
void GrammarMatcher::Expand(uint32_t pos, int32_t parent, int32_t depth) {
  const auto& el = g_->elements();
  const CompiledGrammar::Element e = el[pos];
  if (e.kind == Kind::kEnd) {
    if (parent < 0) {
      AddTop(kAcceptTop);
      return;
    }
    const Node p = nodes_[static_cast<size_t>(parent)];
    const int32_t up = p.parent < 0 ? 0 : nodes_[static_cast<size_t>(p.parent)].depth;
    Expand(p.pos, p.parent, up);
    return;
  }
  if (e.kind == Kind::kClass) {
    const int32_t n = NewNode(pos, parent, depth);
    if (n >= 0) AddTop(n);
    return;
  }
  // A rule call: remember where to go on, unless the call ends this alternative (tail call).
  int32_t cont = parent;
  int32_t cont_depth = depth;
  if (el[pos + 1].kind != Kind::kEnd) {
    cont = NewNode(pos + 1, parent, depth);
    if (cont < 0) return;
    cont_depth = depth + 1;
  }
  const auto [a0, a1] = g_->rule_alts()[e.value];
  for (uint32_t a = a0; a < a1; ++a) Expand(g_->alt_starts()[a], cont, cont_depth);
}

void GrammarMatcher::Advance(const Frame& from, uint32_t cp) {
  const auto& el = g_->elements();
  for (uint32_t i = from.tops_begin; i < from.tops_end; ++i) {
    const int32_t t = tops_[i];
    if (t < 0) continue;
    const Node n = nodes_[static_cast<size_t>(t)];
    if (!g_->ClassMatches(el[n.pos].value, cp)) continue;
    const int32_t depth = n.parent < 0 ? 0 : nodes_[static_cast<size_t>(n.parent)].depth;
    Expand(n.pos + 1, n.parent, depth);
  }
}

bool GrammarMatcher::PushByte(uint8_t b) {
  if (frames_.size() >= static_cast<size_t>(limits_.max_frames)) {
    ++dropped_;
    return false;
  }
  const Frame cur = frames_.back();
  Frame nf{tops_used_, 0, 0, 0, 0, 0};
  open_tops_begin_ = tops_used_;
  bool whole = false;  // a whole code point arrived
  if (cur.remaining == 0) {
    if (b < 0x80) {
      nf.partial = b;
      whole = true;
    } else {
      const int len = (b >= 0xC2 && b <= 0xDF)   ? 2
                      : (b >= 0xE0 && b <= 0xEF) ? 3
                      : (b >= 0xF0 && b <= 0xF4) ? 4
                                                 : 0;
      if (len == 0) return false;
      nf.length = static_cast<uint8_t>(len);
      nf.remaining = static_cast<uint8_t>(len - 1);
      nf.partial = b & (0x7Fu >> len);
    }
  } else {
    if ((b & 0xC0) != 0x80) return false;
    nf.length = cur.length;
    nf.remaining = static_cast<uint8_t>(cur.remaining - 1);
    nf.partial = (cur.partial << 6) | (b & 0x3Fu);
    whole = nf.remaining == 0;
  }
  if (whole) {
    const uint32_t cp = nf.partial;
    if (cp < kMinCodePoint[nf.length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    nf.partial = 0;
    nf.length = 0;
    Advance(cur, cp);
  } else {
    // Keep the stacks whose class can hold a code point starting with these bits.
    const uint32_t shift = 6u * nf.remaining;
    const uint32_t lo = std::max(nf.partial << shift, kMinCodePoint[nf.length]);
    const uint32_t hi = std::min((nf.partial << shift) | ((1u << shift) - 1), 0x10FFFFu);
    if (lo > hi) return false;
    const auto& el = g_->elements();
    for (uint32_t i = cur.tops_begin; i < cur.tops_end; ++i) {
      const int32_t t = tops_[i];
      if (t < 0 || !g_->ClassIntersects(el[nodes_[static_cast<size_t>(t)].pos].value, lo, hi)) {
        continue;
      }
      if (tops_used_ >= tops_.size()) {
        ++dropped_;
        break;
      }
      tops_[tops_used_++] = t;
    }
  }
  nf.tops_end = tops_used_;
  nf.nodes_end = nodes_used_;
  if (nf.tops_end == nf.tops_begin) {
    tops_used_ = cur.tops_end;
    nodes_used_ = cur.nodes_end;
    return false;
  }
  frames_.push_back(nf);
  return true;
}

void GrammarMatcher::PopFrame() {
  if (frames_.size() <= 1) return;
  frames_.pop_back();
  tops_used_ = frames_.back().tops_end;
  nodes_used_ = frames_.back().nodes_end;
}

void GrammarMatcher::Commit() {
  if (frames_.size() <= 1) return;
  const Frame f = frames_.back();
  // Mark the nodes the current stacks reach, then slide them down (a parent always has a
  // lower index than its children, so one forward pass remaps every link).
  std::fill(remap_.begin(), remap_.begin() + nodes_used_, -1);
  for (uint32_t i = f.tops_begin; i < f.tops_end; ++i) {
    for (int32_t n = tops_[i]; n >= 0 && remap_[static_cast<size_t>(n)] < 0;
         n = nodes_[static_cast<size_t>(n)].parent) {
      remap_[static_cast<size_t>(n)] = 0;
    }
  }
  uint32_t kept = 0;
  for (uint32_t i = 0; i < nodes_used_; ++i) {
    if (remap_[i] < 0) continue;
    Node n = nodes_[i];
    if (n.parent >= 0) n.parent = remap_[static_cast<size_t>(n.parent)];
    nodes_[kept] = n;
    remap_[i] = static_cast<int32_t>(kept++);
  }
  uint32_t k = 0;
  for (uint32_t i = f.tops_begin; i < f.tops_end; ++i) {
    const int32_t t = tops_[i];
    tops_[k++] = t < 0 ? t : remap_[static_cast<size_t>(t)];
  }
  nodes_used_ = kept;
  tops_used_ = k;
  frames_.clear();
  frames_.push_back(Frame{0, k, kept, f.partial, f.remaining, f.length});
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  size_t pushed = 0;
  for (char c : bytes) {
    if (!PushByte(static_cast<uint8_t>(c))) {
      for (; pushed > 0; --pushed) PopFrame();
      return false;
    }
    ++pushed;
  }
  Commit();
  return true;
}

int32_t GrammarMatcher::StateKey(std::span<uint32_t> out) const {
  const Frame& f = frames_.back();
  size_t n = 0;
  auto put = [&](uint32_t v) {
    if (n < out.size()) out[n] = v;
    ++n;
  };
  put(f.partial);
  put(static_cast<uint32_t>(f.remaining) << 8 | f.length);
  for (uint32_t i = f.tops_begin; i < f.tops_end; ++i) {
    for (int32_t t = tops_[i]; t >= 0; t = nodes_[static_cast<size_t>(t)].parent) {
      put(nodes_[static_cast<size_t>(t)].pos);
    }
    put(tops_[i] == kAcceptTop ? 0xFFFFFFFFu : 0xFFFFFFFEu);
    if (n > out.size()) return -1;
  }
  return static_cast<int32_t>(n);
}

bool GrammarMatcher::UniformOverPlain() const {
  // The plain characters as ranges (IsPlainCodePoint).
  static constexpr uint32_t kPlain[4][2] = {
      {0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, 0x10FFFF}};
  const Frame& f = frames_.back();
  if (f.remaining != 0) return false;
  const auto& el = g_->elements();
  for (uint32_t i = f.tops_begin; i < f.tops_end; ++i) {
    if (tops_[i] < 0) continue;
    const uint32_t cls = el[nodes_[static_cast<size_t>(tops_[i])].pos].value;
    bool all = true, none = true;
    for (const auto& r : kPlain) {
      all = all && g_->ClassCovers(cls, r[0], r[1]);
      none = none && !g_->ClassIntersects(cls, r[0], r[1]);
    }
    if (!all && !none) return false;
  }
  return true;
}

bool GrammarMatcher::IsAccepting() const {
  const Frame& f = frames_.back();
  if (f.remaining != 0) return false;
  for (uint32_t i = f.tops_begin; i < f.tops_end; ++i) {
    if (tops_[i] == kAcceptTop) return true;
  }
  return false;
}

bool GrammarMatcher::CanContinue() const {
  const Frame& f = frames_.back();
  for (uint32_t i = f.tops_begin; i < f.tops_end; ++i) {
    if (tops_[i] != kAcceptTop) return true;
  }
  return false;
}

}  // namespace ari::runtime
