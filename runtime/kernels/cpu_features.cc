#include "runtime/kernels/cpu_features.h"

#include <array>
#include <atomic>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#endif
#elif defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace ari::runtime::kernels {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// Linux hands out the 8 KiB tile data state only on request (since 5.16): once per process,
// for all its threads. Refused (older kernel, a too small sigaltstack, a seccomp filter): the
// AMX tier is not supported and the kernels stay on AVX-512.
void RequestAmxTileData(CpuFeatures& f) {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchGetXcompPerm = 0x1022;
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
    f.amx_errno = errno;
    return;
  }
  unsigned long long perm = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &perm) != 0) {
    f.amx_errno = errno;
    return;
  }
  f.amx_permitted = (perm >> kXfeatureXtiledata) & 1u;
#else
  (void)f;
#endif
}

uint64_t ReadXcr0() {
  uint32_t eax = 0;
  uint32_t edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

CpuFeatures DetectX86() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1u;
  const bool cpu_avx = (c >> 28) & 1u;
  const bool cpu_fma = (c >> 12) & 1u;
  const bool cpu_f16c = (c >> 29) & 1u;
  if (!osxsave) return f;
  const uint64_t xcr0 = ReadXcr0();
  const bool os_ymm = (xcr0 & 0x6u) == 0x6u;    // SSE + AVX state
  const bool os_zmm = (xcr0 & 0xe6u) == 0xe6u;  // + opmask, ZMM_Hi256, Hi16_ZMM
  if (!os_ymm) return f;
  f.avx = cpu_avx;
  f.fma = cpu_avx && cpu_fma;
  f.f16c = cpu_avx && cpu_f16c;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = f.avx && ((b >> 5) & 1u);
  if (os_zmm) {
    f.avx512f = (b >> 16) & 1u;
    f.avx512dq = f.avx512f && ((b >> 17) & 1u);
    f.avx512bw = f.avx512f && ((b >> 30) & 1u);
    f.avx512vl = f.avx512f && ((b >> 31) & 1u);
    f.avx512vnni = f.avx512f && ((c >> 11) & 1u);
  }
  // AMX: CPUID.(7,0).EDX bit 24 AMX-TILE, bit 25 AMX-INT8; XCR0 bits 17 (XTILECFG) and 18
  // (XTILEDATA) say the OS manages the tile state.
  const bool os_tiles = (xcr0 & 0x60000u) == 0x60000u;
  f.amx_tile = os_tiles && ((d >> 24) & 1u);
  f.amx_int8 = f.amx_tile && ((d >> 25) & 1u);
  if (f.amx_int8) RequestAmxTileData(f);
  return f;
}
#endif

CpuFeatures Detect() {
#if defined(__x86_64__) || defined(__i386__)
  return DetectX86();
#elif defined(__aarch64__)
  CpuFeatures f;
  f.neon = true;  // ASIMD is mandatory on AArch64
#if defined(__linux__)
  const unsigned long hw = getauxval(AT_HWCAP);
  const unsigned long hw2 = getauxval(AT_HWCAP2);
#ifdef HWCAP_ASIMDDP
  f.neon_dotprod = (hw & HWCAP_ASIMDDP) != 0;
#endif
#ifdef HWCAP2_I8MM
  f.neon_i8mm = (hw2 & HWCAP2_I8MM) != 0;
#endif
  (void)hw;
  (void)hw2;
#endif
  return f;
#else
  return CpuFeatures{};
#endif
}

[[maybe_unused]] bool IsX86Tier(IsaTier t) {
  return t == IsaTier::kAvx2 || t == IsaTier::kAvx512Vnni || t == IsaTier::kAmx;
}
[[maybe_unused]] bool IsArmTier(IsaTier t) {
  return t == IsaTier::kNeon || t == IsaTier::kNeonDotprod || t == IsaTier::kNeonI8mm;
}

struct TierState {
  std::array<IsaTier, kNumIsaTiers> supported{};
  int count = 0;
};

const TierState& Tiers() {
  static const TierState state = [] {
    TierState s;
    for (int i = 0; i < kNumIsaTiers; ++i) {
      const auto t = static_cast<IsaTier>(i);
      if (IsaTierSupported(t)) s.supported[static_cast<size_t>(s.count++)] = t;
    }
    // Sort by rank (x86 and ARM tiers never coexist, so rank order is total here).
    for (int i = 1; i < s.count; ++i) {
      for (int j = i; j > 0 && IsaTierRank(s.supported[static_cast<size_t>(j)]) <
                                   IsaTierRank(s.supported[static_cast<size_t>(j - 1)]);
           --j) {
        std::swap(s.supported[static_cast<size_t>(j)], s.supported[static_cast<size_t>(j - 1)]);
      }
    }
    return s;
  }();
  return state;
}

// Packed (max << 8) | active, so both change together. Constant-initialised (no guard).
std::atomic<uint16_t>& TierWord() {
  static std::atomic<uint16_t> state{0xffffu};  // 0xffff: not initialised yet
  return state;
}

uint16_t Encode(IsaTier max, IsaTier active) {
  return static_cast<uint16_t>((static_cast<unsigned>(max) << 8) | static_cast<unsigned>(active));
}

// Supported tiers all belong to this CPU's family, so rank order decides.
IsaTier ClampToSupported(IsaTier max) {
  IsaTier best = IsaTier::kScalar;
  for (IsaTier t : SupportedIsaTiers()) {
    if (IsaTierRank(t) <= IsaTierRank(max)) best = t;
  }
  return best;
}

uint16_t LoadState() {
  uint16_t s = TierWord().load(std::memory_order_relaxed);
  if (s == 0xffffu) {
    const IsaTier best = BestIsaTier();
    uint16_t expected = 0xffffu;
    TierWord().compare_exchange_strong(expected, Encode(best, best), std::memory_order_relaxed);
    s = TierWord().load(std::memory_order_relaxed);
  }
  return s;
}

}  // namespace

const CpuFeatures& DetectCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

std::string_view IsaTierName(IsaTier tier) {
  switch (tier) {
    case IsaTier::kScalar: return "scalar";
    case IsaTier::kAvx2: return "avx2";
    case IsaTier::kAvx512Vnni: return "avx512vnni";
    case IsaTier::kNeon: return "neon";
    case IsaTier::kNeonDotprod: return "neon_dotprod";
    case IsaTier::kNeonI8mm: return "neon_i8mm";
    case IsaTier::kAmx: return "amx";
  }
  return "unknown";
}

Result<IsaTier> ParseIsaTier(std::string_view name) {
  for (int i = 0; i < kNumIsaTiers; ++i) {
    const auto t = static_cast<IsaTier>(i);
    if (IsaTierName(t) == name) return t;
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "unknown ISA tier '" + std::string(name) +
                       "' (scalar, avx2, avx512vnni, amx, neon, neon_dotprod, neon_i8mm)");
}

int IsaTierRank(IsaTier tier) {
  switch (tier) {
    case IsaTier::kScalar: return 0;
    case IsaTier::kAvx2: return 1;
    case IsaTier::kAvx512Vnni: return 2;
    case IsaTier::kNeon: return 1;
    case IsaTier::kNeonDotprod: return 2;
    case IsaTier::kNeonI8mm:
    case IsaTier::kAmx: return 3;
  }
  return 0;
}

bool IsaTierSupported(IsaTier tier) {
  const CpuFeatures& f = DetectCpuFeatures();
  switch (tier) {
    case IsaTier::kScalar: return true;
    case IsaTier::kAvx2: return f.avx2 && f.fma && f.f16c;
    case IsaTier::kAvx512Vnni:
      return f.avx2 && f.fma && f.f16c && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq &&
             f.avx512vnni;
    case IsaTier::kAmx:
      return IsaTierSupported(IsaTier::kAvx512Vnni) && f.amx_int8 && f.amx_permitted;
    case IsaTier::kNeon: return f.neon;
    case IsaTier::kNeonDotprod: return f.neon && f.neon_dotprod;
    case IsaTier::kNeonI8mm: return f.neon && f.neon_dotprod && f.neon_i8mm;
  }
  return false;
}

std::span<const IsaTier> SupportedIsaTiers() {
  const TierState& s = Tiers();
  return {s.supported.data(), static_cast<size_t>(s.count)};
}

IsaTier BestIsaTier() { return SupportedIsaTiers().back(); }

bool IsaTierInFamily(IsaTier tier) {
#if defined(__x86_64__) || defined(__i386__)
  return !IsArmTier(tier);
#elif defined(__aarch64__)
  return !IsX86Tier(tier);
#else
  return tier == IsaTier::kScalar;
#endif
}

std::string IsaTiersText(uint32_t mask) {
  std::string s;
  for (int t = 0; t < kNumIsaTiers; ++t) {
    if ((mask >> t & 1u) == 0) continue;
    if (!s.empty()) s += '+';
    s += IsaTierName(static_cast<IsaTier>(t));
  }
  return s.empty() ? "none" : s;
}

Result<IsaTier> ParseIsaCeiling(std::string_view name) {
  auto t = ParseIsaTier(name);
  if (t && !IsaTierInFamily(*t)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "ISA tier " + std::string(name) + " belongs to another CPU architecture");
  }
  return t;
}

Result<void> SetMaxIsaTier(IsaTier tier) {
  if (!IsaTierInFamily(tier)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "ISA tier " + std::string(IsaTierName(tier)) +
                         " belongs to another CPU architecture than this build's");
  }
  TierWord().store(Encode(tier, ClampToSupported(tier)), std::memory_order_relaxed);
  return {};
}

IsaTier MaxIsaTier() { return static_cast<IsaTier>(LoadState() >> 8); }

IsaTier ActiveIsaTier() { return static_cast<IsaTier>(LoadState() & 0xffu); }

}  // namespace ari::runtime::kernels
