// The memory plan: the arena's layout (engine_plan.h) and the plan's text form
// (runtime/engine/engine.h).
#include "runtime/engine/engine_plan.h"

#include <cstdio>
#include <string>

#include "runtime/engine/fast_forward.h"

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

}  // namespace ari::runtime
