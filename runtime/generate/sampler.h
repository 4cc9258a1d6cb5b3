// Token sampling: greedy, repetition penalty, top-k, temperature, top-p, min-p, seeded RNG.
//
// Pipeline: repetition penalty (llama.cpp semantics: over the distinct tokens among the
// last repeat_last_n of `history`, a positive logit is divided by repeat_penalty, a
// negative one multiplied; also applied before greedy, as llama.cpp does) -> if
// temperature <= 0: argmax (first maximum wins), no RNG draw; else top-k -> logits /
// temperature -> softmax -> top-p -> min-p -> one RNG draw -> token. min-p keeps tokens
// with prob >= min_p * max prob (of the nucleus when top-p is on).
//
// With only temperature and top_p set (top_k 0, min_p 0, repeat_penalty 1) the draws are
// exactly those of llama2.c's run.c (xorshift64* RNG, one random_f32 per token,
// sample_mult / sample_topp). llama2.c sorts top-p candidates with qsort, whose order of
// equal probabilities is unspecified; we use a stable sort by descending probability
// (ties keep ascending token id), which agrees with glibc's qsort (a merge sort for
// small element sizes) in practice.
//
// Constrained decoding: with SamplingParams::constraint set, Sample() first sets the logits
// of every token the grammar does not allow to -inf (before the penalty and the rest of the
// pipeline; greedy picks the best allowed token), then advances the constraint by the
// chosen token. SetParams() resets the constraint (a turn starts a new output). The caller
// checks constraint->Finished() after each token (Complete(): a valid, finished output).
//
// All buffers are allocated in the constructor; Sample() does no heap allocation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/core/types.h"

namespace ari::runtime {

class TokenConstraint;  // runtime/grammar/token_constraint.h

struct SamplingParams {
  float temperature = 0.0f;     // 0 -> greedy
  int32_t top_k = 0;            // <= 0 or >= vocab: disabled
  float top_p = 1.0f;           // <= 0 or >= 1: disabled
  float min_p = 0.0f;           // <= 0: disabled
  float repeat_penalty = 1.0f;  // 1: disabled
  int32_t repeat_last_n = 64;   // history window for the penalty (0: disabled, -1: all)
  uint64_t seed = 0;            // RNG state at construction / Reset()
  // Not owned; outlives the turn. nullptr: unconstrained. One per slot (it holds state).
  TokenConstraint* constraint = nullptr;
};

// llama2.c's RNG (xorshift64*), exposed for tests and for reproducing reference runs.
class XorShiftRng {
 public:
  explicit XorShiftRng(uint64_t seed = 0) : state_(seed) {}
  uint32_t NextU32() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return static_cast<uint32_t>((state_ * 0x2545F4914F6CDD1DULL) >> 32);
  }
  float NextF32() { return static_cast<float>(NextU32() >> 8) / 16777216.0f; }  // [0, 1)
  uint64_t state() const { return state_; }
  void set_state(uint64_t s) { state_ = s; }

 private:
  uint64_t state_;
};

class Sampler {
 public:
  Sampler(int32_t vocab_size, const SamplingParams& p);

  // Resets the RNG state to `seed` (params keep their other values; params().seed updated).
  void Reset(uint64_t seed);
  void SetParams(const SamplingParams& p);  // also resets the RNG to p.seed
  const SamplingParams& params() const { return params_; }
  int32_t vocab_size() const { return vocab_size_; }

  // Picks the next token. `logits` (size vocab_size) is modified in place (penalty,
  // temperature, and it ends holding probabilities when not greedy). `history` are the
  // tokens so far (prompt + generated), used by the repetition penalty only.
  // Returns -1 if logits.size() != vocab_size, or when a constraint allows no token.
  TokenId Sample(std::span<float> logits, std::span<const TokenId> history);
  // Wall time spent in the constraint (mask + advance) since construction, ns: what
  // constrained decoding costs per token (ChunkResult::mask_ns, the scheduler's accounting).
  int64_t constraint_ns() const { return constraint_ns_; }

 private:
  TokenId SampleUnconstrained(std::span<float> logits, std::span<const TokenId> history);
  struct Candidate {
    float prob;
    int32_t index;
  };
  void ApplyRepeatPenalty(std::span<float> logits, std::span<const TokenId> history);
  void ApplyTopK(std::span<float> logits);
  TokenId SampleMult(std::span<const float> probs, float coin) const;
  TokenId SampleTopP(std::span<const float> probs, float coin);
  TokenId SampleMinPOnly(std::span<const float> probs, float coin);

  int32_t vocab_size_;
  int64_t constraint_ns_ = 0;
  SamplingParams params_;
  XorShiftRng rng_;
  std::vector<Candidate> candidates_;  // vocab_size entries
  std::vector<Candidate> merge_tmp_;   // scratch for the stable sort (vocab_size entries)
  std::vector<float> scratch_;         // vocab_size floats (top-k selection)
  std::vector<uint8_t> seen_;          // vocab_size flags (repetition penalty de-dup)
};

}  // namespace ari::runtime
