// The memory plan: the arena's layout (engine_plan.h), the plan's text form
// (runtime/engine/engine.h) and the packed layers' prefetch advisors.
#include "runtime/engine/engine_plan.h"

#include <array>
#include <cstdio>
#include <string>

#include "runtime/engine/fast_forward.h"
#include "runtime/engine/layer_prefetch.h"
#include "runtime/gguf/gguf.h"
#include "runtime/kernels/layout.h"

namespace ari::runtime {
namespace {

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

ArenaLayout PlanArena(const ModelConfig& c, const EngineOptions& o, int32_t ctx, int participants,
                      size_t align, bool packed, MemoryPlan& plan) {
  ArenaLayout a;
  a.ws = packed ? FastForward::WorkspaceBytes(c, o.max_chunk, ctx, participants, align) : 0;
  a.kv = packed ? AlignUp(KvCacheView::Bytes(c, o.kv_type, ctx), align) : 0;
  a.hist = AlignUp(static_cast<uint64_t>(ctx) * sizeof(TokenId), align);
  a.outb = AlignUp(static_cast<uint64_t>(o.max_output) * sizeof(TokenId), align);
  a.mask = AlignUp(static_cast<uint64_t>(c.n_layers), align);
  plan.parts.push_back({"activations + scratch", a.ws});
  for (int32_t i = 0; i < o.slots; ++i) {
    plan.parts.push_back(
        {"slot " + std::to_string(i) + " KV (" + std::string(KvTypeName(o.kv_type)) + ")", a.kv});
    plan.parts.push_back({"slot " + std::to_string(i) + " tokens", a.hist + a.outb});
  }
  plan.parts.push_back({"layer drop mask", a.mask});
  if (packed && o.kv_type != KvType::kInt8 && KvCacheView::Int8Group(c) > 0) {
    plan.notes.push_back("a slot converted to INT8 KV in place uses " +
                         std::to_string(KvCacheView::Bytes(c, KvType::kInt8, ctx)) + " of its " +
                         std::to_string(KvCacheView::Bytes(c, o.kv_type, ctx)) +
                         " KV bytes (group " + std::to_string(KvCacheView::Int8Group(c)) +
                         "); the rest is released (MADV_DONTNEED)");
  }
  plan.total_bytes = 0;
  for (const auto& p : plan.parts) plan.total_bytes += p.bytes;
  return a;
}

std::string MemoryPlan::ToString() const {
  std::string s;
  char line[160];
  for (const Part& p : parts) {
    std::snprintf(line, sizeof(line), "  %-28s %12llu B  (%.2f MiB)\n", p.name.c_str(),
                  static_cast<unsigned long long>(p.bytes),
                  static_cast<double>(p.bytes) / 1048576.0);
    s += line;
  }
  std::snprintf(line, sizeof(line), "  %-28s %12llu B  (%.2f MiB)\n  %-28s %12llu B (mapped)\n",
                "arena total", static_cast<unsigned long long>(total_bytes),
                static_cast<double>(total_bytes) / 1048576.0, "model file",
                static_cast<unsigned long long>(model_file_bytes));
  s += line;
  for (const std::string& n : notes) s += "  note: " + n + "\n";
  return s;
}

std::array<bool, 2> PlanLayerPrefetch(const GgufFile& f, const PackedWeights& packed,
                                      LayerPrefetch mode,
                                      std::optional<PagingAdvisor> (&prefetch)[2],
                                      MemoryPlan& plan) {
  std::array<bool, 2> on{false, false};
  std::string detail;
  for (int pi = 0; pi < 2; ++pi) {
    const auto prec = pi == 0 ? kernels::PackedPrecision::kW8 : kernels::PackedPrecision::kW4;
    ModelRegions regions;
    regions.file = ByteRange{reinterpret_cast<uintptr_t>(f.bytes().data()), f.bytes().size()};
    for (const PackedLayer& L : packed.layers[static_cast<size_t>(PrecisionIndex(prec))]) {
      std::vector<ByteRange> ranges;
      for (const kernels::PackedMatrix* m : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) {
        ranges.push_back({reinterpret_cast<uintptr_t>(m->data),
                          static_cast<size_t>(kernels::PackedBytes(prec, m->rows, m->cols))});
      }
      regions.layers.push_back(MergeRanges(std::move(ranges)));
    }
    // Residency is sampled (PagingAdvisor::SampleLayerResidency): mincore over every page
    // of both precisions cost ~67 ms of time to ready on a 1.1B pack; the sample ~1 ms.
    prefetch[PrecisionIndex(prec)].emplace(f, std::move(regions));
    const PagingAdvisor::Residency res = prefetch[PrecisionIndex(prec)]->SampleLayerResidency();
    const uint64_t resident = res.resident, total = res.samples;
    // kAuto, per precision: on when more than 1% of its sampled packed layer pages were not
    // resident at Create() (a few pages come and go; a cold or evicted model is far off).
    // Per precision: the madvise walks the page cache of the whole next layer even when it
    // is all resident (~5% of a W8A16 decode token on the EPYC VM), so a resident W8A16
    // half does not pay for the W4A8 half that was never read.
    on[static_cast<size_t>(pi)] =
        mode == LayerPrefetch::kOn || (mode == LayerPrefetch::kAuto && PrefetchWanted(res));
    detail += std::string(pi == 0 ? "W8A16 " : ", W4A8 ") + std::to_string(resident) + " of " +
              std::to_string(total);
  }
  const std::string state =
      on[0] && on[1]   ? "on"
      : on[0] || on[1] ? (on[0] ? "on for W8A16, off for W4A8" : "on for W4A8, off for W8A16")
                       : "off";
  plan.notes.push_back("layer prefetch (MADV_WILLNEED on the next layer) " + state +
                       (mode == LayerPrefetch::kAuto
                            ? " (auto: " + detail + " sampled packed layer pages resident)"
                            : ""));
  return on;
}

}  // namespace ari::runtime
