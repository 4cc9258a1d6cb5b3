#include "component/client/chunk_trace_text.h"

#include <algorithm>
#include <cstdarg>
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
    case ari_ISA_AMX: return "amx";
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

namespace {

// Appends printf output at out[*len] (NUL-terminated, truncated at cap - 1).
__attribute__((format(printf, 4, 5))) void Put(char* out, size_t cap, size_t* len, const char* fmt,
                                               ...) {
  if (*len + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(out + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (n > 0) *len = std::min(cap - 1, *len + static_cast<size_t>(n));
}

}  // namespace

size_t CpuListTextTo(uint64_t mask, char* out, size_t cap) {
  if (cap == 0) return 0;
  size_t len = 0;
  out[0] = '\0';
  if (mask == 0) {
    Put(out, cap, &len, "-");
    return len;
  }
  for (int c = 0; c < 64;) {
    if (!(mask & (uint64_t{1} << c))) {
      ++c;
      continue;
    }
    int end = c;
    while (end + 1 < 63 && (mask & (uint64_t{1} << (end + 1)))) ++end;
    if (len > 0) Put(out, cap, &len, ",");
    if (c == 63) {
      Put(out, cap, &len, "63+");
    } else {
      Put(out, cap, &len, "%d", c);
    }
    if (end > c) Put(out, cap, &len, "-%d", end);
    c = end + 1;
  }
  return len;
}

std::string CpuListText(uint64_t mask) {
  char buf[kCpuListTextCapacity];
  return std::string(buf, CpuListTextTo(mask, buf, sizeof buf));
}

namespace {

// " | gemv avx512vnni" for a kind of matmul the chunk called (bit t = IsaTier t).
void PutKernelTiers(const char* kind, uint32_t mask, char* out, size_t cap, size_t* len) {
  if (mask == 0) return;
  Put(out, cap, len, " | %s ", kind);
  const char* sep = "";
  for (int t = 0; t < 32; ++t) {
    if ((mask >> t & 1u) == 0) continue;
    Put(out, cap, len, "%s%s", sep, WireIsaName(static_cast<ari_IsaTier>(t)).data());
    sep = "+";
  }
}

}  // namespace

size_t ChunkTraceTextTo(const ari_TokenChunk& c, char* out, size_t cap) {
  if (cap == 0) return 0;
  size_t len = 0;
  out[0] = '\0';
  if (!c.has_trace) {
    Put(out, cap, &len, "no trace");
    return len;
  }
  const bool reference = dds::RawEnum(c.ran.precision) == ari_PRECISION_REFERENCE;
  char ran_cpus[kCpuListTextCapacity], decided_cpus[kCpuListTextCapacity];
  CpuListTextTo(c.ran.cpus, ran_cpus, sizeof ran_cpus);
  CpuListTextTo(c.decided.cpus, decided_cpus, sizeof decided_cpus);
  // The name functions return literals, so .data() is NUL-terminated.
  Put(out, cap, &len,
      "ran %s %s x%u (%u seen) cpus %s drop %u KV %s | decided %s isa<=%s x%u cpus %s drop %u "
      "KV %s",
      WirePrecisionName(c.ran.precision).data(), WireIsaName(c.ran.isa).data(), c.ran.threads,
      c.ran_threads_observed, ran_cpus, c.ran.layers_dropped, WireKvName(c.ran.kv_type).data(),
      reference ? "n/a" : WirePrecisionName(c.decided.precision).data(),
      WireIsaName(c.decided.isa).data(), c.decided.threads, decided_cpus, c.decided.layers_dropped,
      WireKvName(c.decided.kv_type).data());
  PutKernelTiers("gemv", c.ran_gemv_isas, out, cap, &len);
  PutKernelTiers("gemm", c.ran_gemm_isas, out, cap, &len);
  if (dds::RawEnum(c.ran.isa) == ari_ISA_AMX) {
    Put(out, cap, &len, " | %u GEMMs on AMX tiles", c.ran_tile_gemms);
  }
  if (c.pin_failures > 0) Put(out, cap, &len, " | PIN FAILURES %u", c.pin_failures);
  if (c.isa_refused) Put(out, cap, &len, " | ISA REFUSED");
  if (c.on_fallback) Put(out, cap, &len, " | fallback model");
  return len;
}

std::string ChunkTraceText(const ari_TokenChunk& c) {
  char buf[kChunkTraceTextCapacity];
  return std::string(buf, ChunkTraceTextTo(c, buf, sizeof buf));
}

}  // namespace ari::component
