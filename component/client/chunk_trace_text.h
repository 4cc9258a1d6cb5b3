// Text of a TokenChunk's trace (what ran, next to what was decided; docs/interface.md,
// "What ran"): for ari-cli ask --chunks, the node log and the simulator's records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ari.h"

namespace ari::component {

std::string_view WirePrecisionName(ari_PrecisionMode p);  // "W8A16", "W4A8", "fp32-reference"
std::string_view WireIsaName(ari_IsaTier t);              // "scalar", "avx2", "avx512vnni", ...
std::string_view WireKvName(ari_KvType k);                // "f32", "f16", "int8"
// "0-3,6" (bit 63 is shown as "63+": any CPU id >= 63); "-" for an empty mask.
std::string CpuListText(uint64_t mask);
// The same into out[0..cap) without allocating (NUL-terminated, truncated); its length.
inline constexpr size_t kCpuListTextCapacity = 192;  // fits any 64-bit mask
size_t CpuListTextTo(uint64_t mask, char* out, size_t cap);
// "ran W8A16 avx2 x2 (2 seen) cpus 0-1 drop 0 KV f16 | decided W8A16 isa<=avx512vnni x2
// cpus 0-1 drop 0 KV f16", plus the tiers of the matmul kernels called (" | gemv avx2 |
// gemm avx2"; a kind not called is left out), " | n GEMMs on AMX tiles" when the amx tier
// ran (counted inside the kernels: 0 for a decode chunk or one under 16 tokens), " | PIN FAILURES
// n", " | ISA REFUSED", " | fallback model" when they apply; "no trace" without one. When the
// reference path ran (a plain GGUF), the decided precision is shown as "n/a": the model has no
// precision to switch.
std::string ChunkTraceText(const ari_TokenChunk& c);
// The same into out[0..cap) without allocating (the node's per-chunk log line on the
// real-time path): NUL-terminated, truncated; returns its length.
inline constexpr size_t kChunkTraceTextCapacity = 768;
size_t ChunkTraceTextTo(const ari_TokenChunk& c, char* out, size_t cap);

}  // namespace ari::component
