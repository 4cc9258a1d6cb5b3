// Engine over a pack (FastForward + ThreadPool) or a plain GGUF (reference Forward): turns,
// chunks, knobs and the forward pass. Setting up (Init) and memory locking, yield and rewarm
// are in engine_setup.cc; the class in engine_impl.h.
#include "runtime/engine/engine.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <thread>

#include "runtime/engine/engine_impl.h"
#include "runtime/gguf/gguf.h"
#include "runtime/kernels/layout.h"
#include "runtime/kernels/tier_choice.h"
#include "runtime/model/pack_cache.h"

namespace ari::runtime {
namespace engine_internal {

Result<void> EngineImpl::ApplyKv(Slot& s, KvType want, ChunkResult& r) {
  if (!packed_) {
    r.kv_type = KvType::kF32;  // the reference path keeps its fp32 cache
    return {};
  }
  if (want == KvType::kInt8 && s.kv.type != KvType::kInt8 &&
      KvCacheView::Int8Group(model_->config()) > 0) {
    if (auto cv = ff_.ConvertKv(s.kv, KvType::kInt8, s.position); !cv) return cv;
    // Release the pages the INT8 rows no longer use (anonymous arena memory: they come
    // back zero-filled if the slot returns to F16). One madvise per half, per conversion.
    const uint64_t used = KvCacheView::Bytes(model_->config(), KvType::kInt8, ctx_) / 2;
    for (void* half : {s.kv.k, s.kv.v}) {
      const ByteRange tail =
          PageInterior(reinterpret_cast<uintptr_t>(half) + used, s.kv_half - used, PageSize());
      if (!tail.empty() &&
          ::madvise(reinterpret_cast<void*>(tail.begin), tail.size, MADV_DONTNEED) != 0) {
        // The conversion stands; only the release failed: the pages stay resident.
        std::fprintf(stderr, "ari: engine: INT8 KV: spare pages not released (madvise: %s)\n",
                     std::strerror(errno));
      }
    }
    r.kv_converted = true;
  } else if (want != KvType::kInt8 && s.kv.type != s.home_kv && s.position == 0) {
    s.kv.type = s.home_kv;
  }
  r.kv_type = s.kv.type;
  return {};
}

Result<bool> EngineImpl::Shrink(Slot& s, int32_t cap) {
  if (cap <= 0 || s.hist_len <= cap) return false;
  const int32_t keep = std::max(1, cap - cap / 4);
  const int32_t pin = std::min(s.pinned, keep / 2);
  const int32_t recent = keep - pin;
  std::copy(s.history + s.hist_len - recent, s.history + s.hist_len, s.history + pin);
  s.hist_len = keep;
  s.pinned = pin;
  // KV of positions < pin depends only on tokens < pin (causal): it stays valid. The
  // recent tokens are re-prefilled at their new positions pin, pin + 1, ...
  s.position = std::min(s.position, pin);
  if (s.ref) {
    if (auto t = s.ref->Truncate(s.position); !t) return std::unexpected(t.error());
  }
  return true;
}

uint64_t EngineImpl::WeightBytesPerToken(Precision p) const {
  const ModelWeights& w = model_->weights();
  const uint64_t embd_row = w.token_embd.row_bytes;
  if (p == Precision::kReference || !packed_)
    return w.TotalBytes() - w.token_embd.row_bytes * w.token_embd.rows + embd_row;
  return packed_->BytesPerToken(p == Precision::kW4A8 ? kernels::PackedPrecision::kW4
                                                      : kernels::PackedPrecision::kW8) +
         embd_row;
}

void EngineImpl::ApplyKnobs(const ChunkKnobs& k, ChunkResult& r) {
  // A tier of the other family is refused without building its error (that allocates).
  r.isa_refused =
      !kernels::IsaTierInFamily(k.max_isa) || !kernels::SetMaxIsaTier(k.max_isa).has_value();
  // A refused re-pin is counted per worker (pool_->pin_failures(), in RunChunk) and named
  // by Pinning(); the chunk still runs, wherever the OS lets the workers run.
  if (k.cpu_mask != 0 && !pool_->SetCpuMask(k.cpu_mask)) ++cpu_mask_refusals_;
  if (k.threads > 0) threads_ = std::min(k.threads, pool_->max_participants());
  const int32_t n_layers = model_->config().n_layers;
  const int32_t want = packed_ && !packed_->layer_importance.empty()
                           ? std::clamp(k.layer_drop, 0, std::max(0, n_layers - 2))
                           : 0;
  if (want != drop_level_) {
    // The `want` least influential blocks among 1 .. n_layers-2 (ties: lower index first).
    std::fill(drop_mask_, drop_mask_ + n_layers, uint8_t{0});
    for (int32_t d = 0; d < want; ++d) {
      int32_t best = -1;
      for (int32_t l = 1; l + 1 < n_layers; ++l) {
        if (drop_mask_[l]) continue;
        if (best < 0 || packed_->layer_importance[static_cast<size_t>(l)] <
                            packed_->layer_importance[static_cast<size_t>(best)]) {
          best = l;
        }
      }
      if (best >= 0) drop_mask_[best] = 1;
    }
    drop_level_ = want;
  }
  r.precision = packed_ ? k.precision : Precision::kReference;  // RunChunk refused kReference
  // The reference forward pass is plain C++: it dispatches to no ISA kernels.
  r.isa = packed_ ? kernels::ActiveIsaTier() : kernels::IsaTier::kScalar;
  r.threads = packed_ ? threads_ : 1;
  r.layers_dropped = packed_ ? drop_level_ : 0;
}

Result<void> EngineImpl::StartTurn(int32_t slot, const TurnSpec& turn) {
  if (slot < 0 || slot >= num_slots()) {
    return MakeError(ErrorCode::kInvalidArgument, "engine: slot " + std::to_string(slot));
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (!turn.keep_context) ResetSlot(slot);
  if (s.hist_len + static_cast<int64_t>(turn.prompt.size()) >= ctx_) {  // room for 1 more
    return MakeError(ErrorCode::kOutOfMemory, "engine: prompt does not fit the context");
  }
  const int32_t vocab = model_->config().vocab_size;
  for (TokenId id : turn.prompt) {
    if (id < 0 || id >= vocab) return MakeError(ErrorCode::kInvalidArgument, "engine: token id");
  }
  if (turn.prompt.empty() && s.hist_len == s.position) {
    return MakeError(ErrorCode::kInvalidArgument, "engine: empty prompt");
  }
  if (s.hist_len == 0) {
    const auto n = static_cast<int32_t>(turn.prompt.size());
    s.pinned = turn.pinned_prefix < 0 ? n : std::min(turn.pinned_prefix, n);
  }
  std::copy(turn.prompt.begin(), turn.prompt.end(), s.history + s.hist_len);
  s.hist_len += static_cast<int32_t>(turn.prompt.size());
  s.sampler->SetParams(turn.sampling);
  if (s.decoder) s.decoder->Reset(std::span<const TokenId>(s.history, s.hist_len));  // continues
  s.generated = 0;
  s.max_tokens = std::clamp(turn.max_tokens, 1, opts_.max_output);
  s.active = true;
  s.finished = false;
  return {};
}

Result<float*> EngineImpl::Forward(Slot& s, int32_t n, Precision p) {
  std::span<const TokenId> toks(s.history + s.position, static_cast<size_t>(n));
  if (s.ref) {
    auto r = runtime::Forward(*s.ref, toks);
    if (!r) return std::unexpected(r.error());
    s.position = s.ref->position();
    return s.ref->mutable_last_logits().data();
  }
  precision_used_[p == Precision::kW4A8 ? 1 : 0] = true;
  auto r =
      ff_.Run(toks, s.position, s.kv,
              p == Precision::kW4A8 ? kernels::PackedPrecision::kW4 : kernels::PackedPrecision::kW8,
              drop_level_ > 0 ? drop_mask_ : nullptr, *pool_, threads_);
  if (!r) return std::unexpected(r.error());
  s.position += n;
  return *r;
}

bool EngineImpl::Emit(Slot& s, float* logits, bool greedy, ChunkResult& r) {
  const int32_t vocab = model_->config().vocab_size;
  TokenId next = 0;
  const TokenConstraint* constraint = s.sampler->params().constraint;
  if (greedy && constraint == nullptr) {
    next = static_cast<TokenId>(std::max_element(logits, logits + vocab) - logits);
  } else {
    const int64_t mask_before = s.sampler->constraint_ns();
    next = s.sampler->Sample(std::span<float>(logits, static_cast<size_t>(vocab)),
                             std::span<const TokenId>(s.history, static_cast<size_t>(s.hist_len)));
    if (constraint != nullptr) {
      r.mask_ns += s.sampler->constraint_ns() - mask_before;
      ++r.masked_tokens;
    }
  }
  if (next < 0) {  // a grammar no token can continue, in a vocabulary without EOG
    r.stop_reason = StopReason::kGrammarDeadEnd;
    if (s.decoder) s.decoder->Flush(s.text);
    s.finished = r.finished = true;
    return true;
  }
  s.out[s.generated++] = next;
  s.history[s.hist_len++] = next;
  const Tokenizer* tok = model_->tokenizer();
  bool stop = false;
  if (tok && tok->IsEog(next)) {
    r.stop_reason = StopReason::kEndOfGen;
    stop = true;
  } else if (tok && next == tok->Bos()) {
    r.stop_reason = StopReason::kBos;
    stop = true;
  } else {
    if (s.decoder) s.decoder->Push(next, s.text);
    if (s.generated >= s.max_tokens || (s.out_cap > 0 && s.generated >= s.out_cap)) {
      r.stop_reason = StopReason::kMaxTokens;
      stop = true;
    } else if (s.hist_len >= ctx_) {
      r.stop_reason = StopReason::kContextFull;
      stop = true;
    }
  }
  if (constraint != nullptr && constraint->Finished()) {  // wins over max_tokens: it is valid
    r.stop_reason = constraint->Complete() ? StopReason::kGrammarDone : StopReason::kGrammarDeadEnd;
    stop = true;
  }
  if (stop) {
    if (s.decoder) s.decoder->Flush(s.text);
    s.finished = true;
    r.finished = true;
  }
  return stop;
}

Result<ChunkResult> EngineImpl::RunChunk(int32_t slot, const ChunkKnobs& knobs) {
  if (slot < 0 || slot >= num_slots()) {
    return MakeError(ErrorCode::kInvalidArgument, "engine: slot " + std::to_string(slot));
  }
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.finished) return MakeError(ErrorCode::kInvalidArgument, "engine: no turn running in slot");
  if (packed_ && knobs.precision == Precision::kReference) {  // never W8A16 in its place
    return MakeError(ErrorCode::kInvalidArgument,
                     "engine: the fp32 reference path needs the plain GGUF (a pack keeps no fp32 "
                     "weights): EngineOptions::plain_gguf = kReference");
  }
  const auto t0 = std::chrono::steady_clock::now();
  ChunkResult r;
  ApplyKnobs(knobs, r);
  // The calling thread computes too (participant 0, and all of a threads = 1 chunk): it
  // runs the chunk on the chunk's CPU set and gets its own affinity back afterwards.
  const bool caller_pinned = pool_->PinCaller().has_value();
  r.pin_failures = pool_->pin_failures() + (caller_pinned ? 0 : 1);
  pool_->NoteCallerCpu();
  ff_.ResetMatmulsRan();  // matmuls outside chunks (e.g. prefix-cache scoring) are not this one's
  const int pi = r.precision == Precision::kW4A8 ? 1 : 0;
  if (packed_ && prefetch_ctl_.Recheck(pi)) {
    ff_.SetPrefetch(prefetch_ctl_.Active(0), prefetch_ctl_.Active(1));
  }
  const uint64_t prefetches = ff_.prefetch_calls();
  const Result<void> ran = Compute(s, knobs, r);
  r.layer_prefetches = static_cast<int32_t>(ff_.prefetch_calls() - prefetches);
  prefetch_ctl_.Ran(pi, int64_t{r.prompt_tokens} + static_cast<int64_t>(r.tokens.size()));
  pool_->NoteCallerCpu();
  const ThreadPool::Observed seen = pool_->TakeObserved();
  const FastForward::MatmulsRan mm = ff_.TakeMatmulsRan();
  r.tile_gemms = static_cast<int32_t>(mm.tile_gemms);
  r.gemv_tiers = mm.gemv_tiers;
  r.gemm_tiers = mm.gemm_tiers;
  if (!pool_->RestoreCaller()) ++r.pin_failures;
  r.cpus_ran = seen.cpus;
  r.threads_ran = seen.participants;
  pin_failures_ += static_cast<uint64_t>(r.pin_failures);
  isa_refusals_ += r.isa_refused ? 1 : 0;
  if (!ran) return std::unexpected(ran.error());
  r.compute_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  return r;
}

Result<void> EngineImpl::Compute(Slot& s, const ChunkKnobs& knobs, ChunkResult& r) {
  if (auto kv = ApplyKv(s, knobs.kv_type, r); !kv) return kv;
  s.out_cap = knobs.output_cap;
  s.text.clear();
  const int32_t first = s.generated;
  if (s.out_cap > 0 && s.generated >= s.out_cap) {  // the cap fell below this turn's output
    if (s.decoder) s.decoder->Flush(s.text);
    s.finished = r.finished = true;
    r.stop_reason = StopReason::kMaxTokens;
    r.text = s.text;
    return {};
  }
  auto shrunk = Shrink(s, knobs.context_cap);
  if (!shrunk) return std::unexpected(shrunk.error());
  r.context_shrunk = *shrunk;
  if (s.position == 0 && s.generated == 0 && prefixes_.size() > 0 && !building_prefix_) {
    // The first prefill chunk of an empty slot: the prefix cache (engine_prefix.h).
    r.prefix_tokens = drop_level_ == 0 ? UsePrefix(prefixes_, s, r.precision, model_->config()) : 0;
    prefix_hits_ += r.prefix_tokens > 0 ? 1 : 0;
    prefix_misses_ += r.prefix_tokens > 0 ? 0 : 1;
    prefix_tokens_ += static_cast<uint64_t>(r.prefix_tokens);
  }
  const bool greedy = knobs.greedy_only;
  if (s.generated == 0 || s.hist_len - s.position > 1) {  // prompt, or re-prefill after a cap
    r.phase = ChunkPhase::kPrefill;
    const int32_t pending = s.hist_len - s.position;
    const int32_t n = std::min({pending, std::max(1, knobs.prefill_tokens), opts_.max_chunk});
    auto logits = Forward(s, n, r.precision);
    if (!logits) return std::unexpected(logits.error());
    r.prompt_tokens = n;
    r.prompt_remaining = s.hist_len - s.position;
    if (r.prompt_remaining == 0) Emit(s, *logits, greedy, r);
  } else {
    r.phase = ChunkPhase::kDecode;
    for (int32_t i = 0; i < std::max(1, knobs.decode_tokens) && !s.finished; ++i) {
      if (i > 0) {
        auto cut = Shrink(s, knobs.context_cap);
        if (!cut) return std::unexpected(cut.error());
        if (*cut) {  // re-prefill in the next chunk
          r.context_shrunk = true;
          break;
        }
      }
      auto logits = Forward(s, s.hist_len - s.position, r.precision);
      if (!logits) return std::unexpected(logits.error());
      Emit(s, *logits, greedy, r);
    }
  }
  r.tokens = std::span<const TokenId>(s.out + first, static_cast<size_t>(s.generated - first));
  r.text = s.text;
  return {};
}

}  // namespace engine_internal

Result<std::unique_ptr<Engine>> Engine::Create(const EngineOptions& opts) {
  auto e = std::make_unique<engine_internal::EngineImpl>();
  if (auto r = e->Init(opts); !r) return std::unexpected(r.error());
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace ari::runtime
