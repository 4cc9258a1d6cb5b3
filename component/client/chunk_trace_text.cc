#include "component/client/chunk_trace_text.h"

#include <algorithm>
#include <cstdio>

#include "component/client/dds.h"

namespace ari::component {

std::string_view WirePrecisionName(ari_PrecisionMode p) {
  switch (dds::RawEnum(p)) {
    case ari_PRECISION_REFERENCE: return "fp32-reference";
    case ari_PRECISION_W8A16: return "W8A16";
    case ari_PRECISION_W4A8: return "W4A8";
    default: return "?";
  }
}

std::string_view WireIsaName(ari_IsaTier t) {
  switch (dds::RawEnum(t)) {
    case ari_ISA_SCALAR: return "scalar";
    case ari_ISA_AVX2: return "avx2";
    case ari_ISA_AVX512_VNNI: return "avx512vnni";
    case ari_ISA_NEON: return "neon";
    case ari_ISA_NEON_DOTPROD: return "neon-dotprod";
    case ari_ISA_NEON_I8MM: return "neon-i8mm";
    default: return "?";
  }
}

std::string_view WireKvName(ari_KvType k) {
  switch (dds::RawEnum(k)) {
    case ari_KV_F32: return "f32";
    case ari_KV_F16: return "f16";
    case ari_KV_INT8: return "int8";
    default: return "?";
  }
}

std::string CpuListText(uint64_t mask) {
  if (mask == 0) return "-";
  std::string out;
  for (int c = 0; c < 64;) {
    if (!(mask & (uint64_t{1} << c))) {
      ++c;
      continue;
    }
    int end = c;
    while (end + 1 < 63 && (mask & (uint64_t{1} << (end + 1)))) ++end;
    if (!out.empty()) out += ',';
    out += c == 63 ? "63+" : std::to_string(c);
    if (end > c) {
      out += '-';
      out += std::to_string(end);
    }
    c = end + 1;
  }
  return out;
}

std::string ChunkTraceText(const ari_TokenChunk& c) {
  if (!c.has_trace) return "no trace";
  const bool reference = dds::RawEnum(c.ran.precision) == ari_PRECISION_REFERENCE;
  const std::string ran_cpus = CpuListText(c.ran.cpus), decided_cpus = CpuListText(c.decided.cpus);
  // The name functions return literals, so .data() is NUL-terminated.
  char buf[384];
  const int n = std::snprintf(
      buf, sizeof buf,
      "ran %s %s x%u (%u seen) cpus %s drop %u KV %s | decided %s isa<=%s x%u cpus %s drop %u "
      "KV %s",
      WirePrecisionName(c.ran.precision).data(), WireIsaName(c.ran.isa).data(), c.ran.threads,
      c.ran_threads_observed, ran_cpus.c_str(), c.ran.layers_dropped,
      WireKvName(c.ran.kv_type).data(),
      reference ? "n/a" : WirePrecisionName(c.decided.precision).data(),
      WireIsaName(c.decided.isa).data(), c.decided.threads, decided_cpus.c_str(),
      c.decided.layers_dropped, WireKvName(c.decided.kv_type).data());
  std::string s(buf, n < 0 ? 0 : std::min<size_t>(static_cast<size_t>(n), sizeof buf - 1));
  if (c.pin_failures > 0) {
    s += " | PIN FAILURES ";
    s += std::to_string(c.pin_failures);
  }
  if (c.isa_refused) s += " | ISA REFUSED";
  if (c.on_fallback) s += " | fallback model";
  return s;
}

}  // namespace ari::component
