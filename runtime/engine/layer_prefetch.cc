#include "runtime/engine/layer_prefetch.h"

namespace ari::runtime {

void LayerPrefetchControl::Init(LayerPrefetch mode, int32_t recheck_tokens,
                                std::array<const PagingAdvisor*, 2> advisors,
                                std::array<bool, 2> on) {
  mode_ = mode;
  recheck_tokens_ = recheck_tokens;
  advisors_ = advisors;
  for (size_t i = 0; i < 2; ++i) on_[i] = on[i] && advisors[i] != nullptr;
  tokens_ = {0, 0};
}

bool LayerPrefetchControl::Recheck(int pi) {
  const size_t i = Index(pi);
  if (mode_ != LayerPrefetch::kAuto || recheck_tokens_ <= 0 || advisors_[i] == nullptr ||
      tokens_[i] < recheck_tokens_) {
    return false;
  }
  tokens_[i] = 0;
  ++rechecks_;
  const bool want = PrefetchWanted(advisors_[i]->SampleLayerResidency());
  if (want == on_[i]) return false;
  on_[i] = want;
  ++switches_;
  return true;
}

}  // namespace ari::runtime
