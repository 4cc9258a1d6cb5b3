// A byte-level pushdown matcher over a CompiledGrammar.
//
// The parse state is a set of stacks. A stack is what is left to match: its top is a
// character class, below it the positions to continue at when the enclosing rules end.
// Stacks are persistent linked lists in a node pool (a node: element position + parent
// node), so stacks share tails and a state is a list of top nodes. Input is UTF-8 bytes: a
// multi-byte character is matched when its last byte arrives; before that, the stacks are
// pruned to those whose class can still hold a character with the bytes seen so far.
//
// States form a stack of frames: PushByte() makes a new frame from the current one
// (allocating nodes and tops at the ends of the pools), PopFrame() drops it and what it
// allocated. The vocabulary mask walks the token trie this way; Commit() keeps the current
// frame as the new base and compacts the pools. All memory is allocated in the constructor;
// nothing afterwards allocates. A path that would overflow a pool or the stack depth limit
// is dropped (the matcher refuses input rather than accept it unchecked) and counted.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/grammar/grammar.h"

namespace ari::runtime {

struct MatcherLimits {
  int32_t max_nodes = 1 << 16;  // stack nodes alive at once (all frames)
  int32_t max_tops = 1 << 15;   // stacks alive at once (all frames)
  int32_t max_depth = 256;      // nesting of one stack (rule calls still open)
  int32_t max_frames = 1024;    // bytes pushed without Commit (>= the longest token)
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar,
                          const MatcherLimits& limits = {});

  // Back to the start of `root`, one frame.
  void Reset();
  // Runs `grammar` from now on (Reset included). The pools are the limits' size whatever
  // the grammar, so nothing allocates: a matcher can be preallocated and serve any grammar.
  void Rebind(std::shared_ptr<const CompiledGrammar> grammar);

  // Advances the current frame by one byte into a new frame. false (and no frame pushed)
  // when no stack survives the byte.
  bool PushByte(uint8_t b);
  void PopFrame();
  // Makes the current frame the only one (the bytes pushed so far are accepted).
  void Commit();
  // PushByte for each byte then Commit; on failure the state is unchanged and false.
  bool AcceptBytes(std::string_view bytes);

  // The input so far is a complete sentence of the grammar (no partial character).
  bool IsAccepting() const;
  // Some continuation exists (a stack with a character still to match).
  bool CanContinue() const;
  int32_t frames() const { return static_cast<int32_t>(frames_.size()); }
  // Writes a key that identifies the current state exactly (every stack's positions, a
  // partial character) into `out`; returns its length, or -1 when it does not fit. Two
  // states with the same key accept the same continuations (the mask cache's key).
  int32_t StateKey(std::span<uint32_t> out) const;
  // No partial character, and every stack's class holds either every plain character
  // (TokenTrie::IsPlainCodePoint) or none: then any plain character leads to the same state.
  bool UniformOverPlain() const;
  int64_t dropped_paths() const { return dropped_; }
  const CompiledGrammar& grammar() const { return *g_; }

 private:
  static constexpr int32_t kAcceptTop = -1;  // an empty stack: the sentence may end here
  struct Node {
    uint32_t pos;    // element index (a class) or, for continuations, where to go on
    int32_t parent;  // -1: bottom
    int32_t depth;
  };
  struct Frame {
    uint32_t tops_begin, tops_end, nodes_end;
    uint32_t partial;  // code point bits of a character still arriving
    uint8_t remaining, length;
  };

  // Adds the stacks that continue at element `pos` with `parent` below to the open frame.
  void Expand(uint32_t pos, int32_t parent, int32_t depth);
  void AddTop(int32_t node);
  bool SameStack(int32_t a, int32_t b) const;
  int32_t NewNode(uint32_t pos, int32_t parent, int32_t depth);
  // Advances by one whole code point from `from` (the tops are written after it).
  void Advance(const Frame& from, uint32_t cp);

  std::shared_ptr<const CompiledGrammar> g_;
  MatcherLimits limits_;
  std::vector<Node> nodes_;
  std::vector<int32_t> tops_;
  std::vector<Frame> frames_;
  std::vector<int32_t> remap_;  // Commit's compaction
  uint32_t nodes_used_ = 0, tops_used_ = 0;
  uint32_t open_tops_begin_ = 0;  // tops of the frame being built start here
  int64_t dropped_ = 0;
};

}  // namespace ari::runtime
