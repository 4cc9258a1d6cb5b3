// Private to the engine's .cc files (engine.cc, engine_park.cc): one session slot's state.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/core/types.h"
#include "runtime/engine/fast_forward.h"
#include "runtime/generate/sampler.h"
#include "runtime/model/session.h"
#include "runtime/tokenizer/tokenizer.h"

namespace ari::runtime::engine_internal {

struct Slot {
  KvCacheView kv;
  KvType home_kv = KvType::kF16;  // what the slot's bytes were sized for
  uint64_t kv_half = 0;           // bytes of the K (and of the V) half
  int32_t pinned = 0;             // system-prompt tokens a context cap keeps
  std::unique_ptr<Session> ref;   // reference path only
  int32_t position = 0;           // tokens in the KV cache
  TokenId* history = nullptr;     // [ctx]: KV'd tokens, then pending ones
  int32_t hist_len = 0;
  TokenId* out = nullptr;  // [max_output] tokens generated this turn
  int32_t generated = 0;
  int32_t max_tokens = 0;
  int32_t out_cap = 0;  // ChunkKnobs::output_cap of the running chunk (0 = none)
  bool active = false;
  bool finished = true;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<StreamDecoder> decoder;
  std::string text;
};

}  // namespace ari::runtime::engine_internal
