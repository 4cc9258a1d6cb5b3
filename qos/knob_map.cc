// Governor knobs -> runtime::ChunkKnobs (see docs/scheduler.md, "Knob mapping").
#include <algorithm>

#include "qos/scheduler.h"

namespace ari::qos {

std::string_view TerminalStatusName(TerminalStatus s) {
  switch (s) {
    case TerminalStatus::kDone: return "DONE";
    case TerminalStatus::kCancelled: return "CANCELLED";
    case TerminalStatus::kDeadlineMissed: return "DEADLINE_MISSED";
    case TerminalStatus::kRejected: return "REJECTED";
    case TerminalStatus::kFailed: return "FAILED";
    case TerminalStatus::kShutdown: return "SHUTDOWN";
  }
  return "?";
}

std::string_view SubmitStatusName(SubmitStatus s) {
  switch (s) {
    case SubmitStatus::kAdmitted: return "ADMITTED";
    case SubmitStatus::kBusy: return "BUSY";
    case SubmitStatus::kDuplicate: return "DUPLICATE";
    case SubmitStatus::kInvalid: return "INVALID";
    case SubmitStatus::kShutdown: return "SHUTDOWN";
  }
  return "?";
}

std::vector<int> CpusFor(CoreClass c, const thermal::CpuTopology& topology) {
  switch (c) {
    case CoreClass::kPerformance:
      if (!topology.performance.empty()) return topology.performance;
      return topology.efficiency;
    case CoreClass::kEfficiency:
      if (!topology.efficiency.empty()) return topology.efficiency;
      return topology.performance;
    case CoreClass::kAny: {
      std::vector<int> all = topology.performance;
      all.insert(all.end(), topology.efficiency.begin(), topology.efficiency.end());
      std::sort(all.begin(), all.end());
      return all;
    }
  }
  return {};
}

namespace {

runtime::kernels::IsaTier MapIsa(IsaTier t) {
  using runtime::kernels::IsaTier;
  switch (t) {
    case qos::IsaTier::kBest: return runtime::kernels::kTopIsaTier;  // x86: AMX where present
    case qos::IsaTier::kAvx512: return IsaTier::kAvx512Vnni;         // AVX-512 without AMX
    case qos::IsaTier::kAvx2: return IsaTier::kAvx2;
    case qos::IsaTier::kNeonDotprod: return IsaTier::kNeonDotprod;
    case qos::IsaTier::kNeon: return IsaTier::kNeon;
    case qos::IsaTier::kScalar: return IsaTier::kScalar;
  }
  return IsaTier::kScalar;
}

}  // namespace

runtime::ChunkKnobs MapKnobs(const Knobs& knobs, const MemoryActions& memory,
                             const thermal::CpuTopology& topology, runtime::KvType base_kv,
                             int32_t max_prefill_chunk) {
  runtime::ChunkKnobs k;
  k.precision = knobs.precision == WeightPrecision::kW4A8 ? runtime::Precision::kW4A8
                                                          : runtime::Precision::kW8A16;
  k.max_isa = MapIsa(knobs.isa);
  // The CPU set of the class; no allocation: walk the topology lists directly.
  uint64_t mask = 0;
  int ncpus = 0;
  auto add = [&](const std::vector<int>& ids) {
    for (int id : ids) {
      if (id >= 0 && id < 64 && !(mask & (uint64_t{1} << id))) {
        mask |= uint64_t{1} << id;
        ++ncpus;
      }
    }
  };
  switch (knobs.core_class) {
    case CoreClass::kPerformance:
      add(topology.performance.empty() ? topology.efficiency : topology.performance);
      break;
    case CoreClass::kEfficiency:
      add(topology.efficiency.empty() ? topology.performance : topology.efficiency);
      break;
    case CoreClass::kAny:
      add(topology.performance);
      add(topology.efficiency);
      break;
  }
  k.cpu_mask = mask;
  const int32_t want = static_cast<int32_t>(std::max<uint32_t>(knobs.threads, 1));
  k.threads = ncpus > 0 ? std::min<int32_t>(want, ncpus) : want;
  int32_t prefill = static_cast<int32_t>(std::max<uint32_t>(knobs.prefill_chunk, 1));
  if (max_prefill_chunk > 0) prefill = std::min(prefill, max_prefill_chunk);
  k.prefill_tokens = prefill;
  k.decode_tokens = static_cast<int32_t>(std::max<uint32_t>(knobs.decode_tokens_per_chunk, 1));
  k.layer_drop = static_cast<int32_t>(knobs.layer_drop);
  k.kv_type = (knobs.kv_precision == KvPrecision::kInt8 || memory.kv_int8) ? runtime::KvType::kInt8
                                                                           : base_kv;
  k.greedy_only = memory.greedy_only;
  k.context_cap = static_cast<int32_t>(memory.context_cap);
  k.output_cap = static_cast<int32_t>(memory.output_cap);  // the scheduler also clamps max_tokens
  return k;
}

}  // namespace ari::qos
