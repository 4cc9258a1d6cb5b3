// CPU feature detection and the ISA tier the kernels dispatch on.
//
// The tier actually used is min(best available, max tier): the governor may lower the max
// tier between chunks (e.g. AVX-512 VNNI -> AVX2 -> scalar to shed heat), and raise it again.
// Reading and setting the tier is lock-free (one atomic), so it is safe to call from any
// thread; kernels that already started finish on the tier they began with.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "runtime/core/error.h"

namespace ari::runtime::kernels {

// Ordered within a family: x86 kScalar < kAvx2 < kAvx512Vnni < kAmx; ARM kScalar < kNeon <
// kNeonDotprod < kNeonI8mm. kScalar belongs to both families.
enum class IsaTier : uint8_t {
  kScalar = 0,
  kAvx2 = 1,         // AVX2 + FMA + F16C
  kAvx512Vnni = 2,   // AVX-512 F/BW/VL/DQ + VNNI
  kNeon = 3,         // AArch64 ASIMD + fp16 conversions
  kNeonDotprod = 4,  // + SDOT/UDOT
  kNeonI8mm = 5,     // + SMMLA/USMMLA
  kAmx = 6,          // kAvx512Vnni + AMX-TILE/AMX-INT8 (prefill GEMMs on tiles), granted by
                     // the OS (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA))
};
inline constexpr int kNumIsaTiers = 7;

// The highest tier of this build's family: the default ceiling ("best"; the engine and the
// CPU clamp it to what the machine has).
#if defined(__aarch64__)
inline constexpr IsaTier kTopIsaTier = IsaTier::kNeonI8mm;
#else
inline constexpr IsaTier kTopIsaTier = IsaTier::kAmx;
#endif

struct CpuFeatures {
  // x86 (each requires OS support of the register state, checked with xgetbv).
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512vnni = false;
  // AMX: the CPU has the tiles and INT8 dot products, XCR0 enables the tile state, and the
  // kernel granted this process the tile data (requested once, at detection).
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_permitted = false;
  int amx_errno = 0;  // why the kernel refused the tile data (0: not asked, or granted)
  // AArch64.
  bool neon = false;
  bool neon_dotprod = false;
  bool neon_i8mm = false;
};

// Detected once (thread-safe static), then cached.
const CpuFeatures& DetectCpuFeatures();

std::string_view IsaTierName(IsaTier tier);
// The tiers of a mask (bit t = IsaTier t) as "avx2", "avx2+amx" (lowest first), "none" for
// 0: ChunkResult::gemv_tiers / gemm_tiers.
std::string IsaTiersText(uint32_t mask);
// Parses the names IsaTierName returns ("scalar", "avx2", "avx512vnni", "amx", "neon", ...).
Result<IsaTier> ParseIsaTier(std::string_view name);

// Position of the tier in its family's order (kScalar = 0).
int IsaTierRank(IsaTier tier);
// True if `tier` can run on this CPU (kScalar always can).
bool IsaTierSupported(IsaTier tier);
// Highest supported tier of this machine.
IsaTier BestIsaTier();
// Supported tiers, lowest first (always starts with kScalar).
std::span<const IsaTier> SupportedIsaTiers();

// Upper bound for dispatch. Default: BestIsaTier(). Setting a tier this CPU does not have
// clamps to the best supported tier below it in the same family; a tier of the other
// family (e.g. kNeon on x86) is rejected with kInvalidArgument.
Result<void> SetMaxIsaTier(IsaTier tier);
// True if `tier` belongs to this build's architecture family (kScalar always does), i.e.
// SetMaxIsaTier(tier) succeeds. Allocation-free, so a hot path can check it instead of
// building the error (e.g. knobs written for x86 reaching an aarch64 engine).
bool IsaTierInFamily(IsaTier tier);
// ParseIsaTier, refusing a tier of the other family (a command line's ceiling, e.g. --isa).
Result<IsaTier> ParseIsaCeiling(std::string_view name);
IsaTier MaxIsaTier();
// The tier kernels dispatch to right now: the highest supported tier <= MaxIsaTier().
IsaTier ActiveIsaTier();

}  // namespace ari::runtime::kernels
