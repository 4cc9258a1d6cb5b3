// Next-layer page-cache prefetch (MADV_WILLNEED on layer l + 1 while layer l computes),
// per precision. EngineOptions::layer_prefetch kOn / kOff fix it. kAuto turns it on while
// the precision's packed layers are not all in the page cache: sampled at Create
// (PlanLayerPrefetch) and again after every `recheck_tokens` tokens run on that precision.
// A model that was cold at start (a car's boot) so stops paying for the madvise once its
// pages are in, and one whose pages were evicted under memory pressure gets it back.
// The madvise walks the page cache of a whole layer even when it is all resident: 6-7% of
// a W4A8 decode token on the Intel Xeon host (`ari-run ... --prefetch on|off -n 256`,
// docs/memory.md "Paging hints and the hot set").
#pragma once

#include <array>
#include <cstdint>

#include "runtime/engine/engine.h"
#include "runtime/engine/paging.h"

namespace ari::runtime {

// kAuto's rule: on while more than 1% of the sampled pages are not resident (a few pages
// come and go; a cold or evicted model is far off).
constexpr bool PrefetchWanted(const PagingAdvisor::Residency& r) {
  return r.resident * 100 < r.samples * 99;
}

class LayerPrefetchControl {
 public:
  // `advisors[pi]`: precision pi's packed layers (not owned, outlive this; null: none);
  // `on`: what PlanLayerPrefetch chose at Create.
  void Init(LayerPrefetch mode, int32_t recheck_tokens,
            std::array<const PagingAdvisor*, 2> advisors, std::array<bool, 2> on);
  // Before a chunk on precision index pi: under kAuto, once `recheck_tokens` tokens ran on
  // it since its last sample, samples again (~0.5 ms on a 1.1B pack) and switches. True
  // when the state of pi changed.
  bool Recheck(int pi);
  // After a chunk: the tokens the forward pass ran on precision pi.
  void Ran(int pi, int64_t tokens) { tokens_[Index(pi)] += tokens > 0 ? tokens : 0; }

  const PagingAdvisor* Active(int pi) const {
    return on_[Index(pi)] ? advisors_[Index(pi)] : nullptr;
  }
  bool on(int pi) const { return on_[Index(pi)]; }
  uint64_t rechecks() const { return rechecks_; }
  uint64_t switches() const { return switches_; }

 private:
  static size_t Index(int pi) { return pi == 0 ? 0 : 1; }
  LayerPrefetch mode_ = LayerPrefetch::kOff;
  int64_t recheck_tokens_ = 0;
  std::array<const PagingAdvisor*, 2> advisors_{nullptr, nullptr};
  std::array<bool, 2> on_{false, false};
  std::array<int64_t, 2> tokens_{0, 0};  // run on each precision since its last sample
  uint64_t rechecks_ = 0;
  uint64_t switches_ = 0;
};

}  // namespace ari::runtime
