#include "component/node/chunk_trace.h"

#include <algorithm>

#include "component/client/chunk_trace_text.h"
#include "runtime/core/types.h"
#include "runtime/kernels/cpu_features.h"

namespace ari::component {
namespace {

using runtime::KvType;
using runtime::Precision;
using runtime::kernels::IsaTier;

// The wire enums mirror the runtime's: a value is the same number on both sides.
static_assert(ari_PRECISION_REFERENCE == static_cast<int>(Precision::kReference));
static_assert(ari_PRECISION_W8A16 == static_cast<int>(Precision::kW8A16));
static_assert(ari_PRECISION_W4A8 == static_cast<int>(Precision::kW4A8));
static_assert(ari_ISA_SCALAR == static_cast<int>(IsaTier::kScalar));
static_assert(ari_ISA_AVX2 == static_cast<int>(IsaTier::kAvx2));
static_assert(ari_ISA_AVX512_VNNI == static_cast<int>(IsaTier::kAvx512Vnni));
static_assert(ari_ISA_NEON == static_cast<int>(IsaTier::kNeon));
static_assert(ari_ISA_NEON_DOTPROD == static_cast<int>(IsaTier::kNeonDotprod));
static_assert(ari_ISA_NEON_I8MM == static_cast<int>(IsaTier::kNeonI8mm));
static_assert(ari_ISA_AMX == static_cast<int>(IsaTier::kAmx));
static_assert(ari_KV_F32 == static_cast<int>(KvType::kF32));
static_assert(ari_KV_F16 == static_cast<int>(KvType::kF16));
static_assert(ari_KV_INT8 == static_cast<int>(KvType::kInt8));

uint32_t NonNegative(int32_t v) { return v < 0 ? 0u : static_cast<uint32_t>(v); }

}  // namespace

void FillChunkTrace(const qos::ChunkEvent& ev, ari_TokenChunk& c) {
  c.has_trace = true;
  c.on_fallback = ev.on_fallback;
  c.isa_refused = ev.ran.isa_refused;
  c.decided.precision = static_cast<ari_PrecisionMode>(ev.decided.precision);
  c.decided.isa = static_cast<ari_IsaTier>(ev.decided.max_isa);
  c.decided.threads = NonNegative(ev.decided.threads);
  c.decided.layers_dropped = NonNegative(ev.decided.layer_drop);
  c.decided.cpus = ev.decided.cpu_mask;
  c.decided.kv_type = static_cast<ari_KvType>(ev.decided.kv_type);
  c.ran.precision = static_cast<ari_PrecisionMode>(ev.ran.precision);
  c.ran.isa = static_cast<ari_IsaTier>(ev.ran.isa);
  c.ran.threads = NonNegative(ev.ran.threads);
  c.ran.layers_dropped = NonNegative(ev.ran.layers_dropped);
  c.ran.cpus = ev.ran.cpus;
  c.ran.kv_type = static_cast<ari_KvType>(ev.ran.kv_type);
  c.ran_threads_observed = NonNegative(ev.ran.threads_observed);
  c.pin_failures = NonNegative(ev.ran.pin_failures);
  c.ran_tile_gemms = NonNegative(ev.ran.tile_gemms);
  c.ran_gemv_isas = ev.ran.gemv_tiers;
  c.ran_gemm_isas = ev.ran.gemm_tiers;
}

std::string FormatChunkTrace(const qos::ChunkEvent& ev) {
  ari_TokenChunk c{};
  FillChunkTrace(ev, c);
  return ChunkTraceText(c);
}

size_t FormatChunkTraceTo(const qos::ChunkEvent& ev, char* out, size_t cap) {
  ari_TokenChunk c{};
  FillChunkTrace(ev, c);
  return ChunkTraceTextTo(c, out, cap);
}

size_t ShownDecisionTo(std::string_view text, bool can_switch_precision, char* out, size_t cap) {
  if (cap == 0) return 0;
  size_t len = 0;
  auto put = [&](std::string_view s) {
    const size_t n = std::min(s.size(), cap - 1 - len);
    std::copy_n(s.data(), n, out + len);
    len += n;
  };
  while (!text.empty()) {
    size_t at = std::string_view::npos, word = 0;
    if (!can_switch_precision) {
      for (std::string_view w : {std::string_view("W8A16"), std::string_view("W4A8")}) {
        if (const size_t p = text.find(w); p < at) {
          at = p;
          word = w.size();
        }
      }
    }
    put(text.substr(0, at));
    if (at == std::string_view::npos) break;
    put("fp32 reference");
    text.remove_prefix(at + word);
  }
  out[len] = '\0';
  return len;
}

std::string ShownDecision(std::string text, bool can_switch_precision) {
  if (can_switch_precision) return text;
  for (const char* word : {"W8A16", "W4A8"}) {
    const std::string w(word);
    for (size_t at = text.find(w); at != std::string::npos; at = text.find(w, at)) {
      text.replace(at, w.size(), "fp32 reference");
    }
  }
  return text;
}

}  // namespace ari::component
