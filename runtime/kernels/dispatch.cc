// Tier resolution and the tier-independent compositions (fusions built from table ops
// on L1-sized chunks, so every tier gets them without extra SIMD code).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "runtime/kernels/kernel_tiers.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/tier_choice.h"

namespace ari::runtime::kernels {

IsaTier internal::LowerTier(IsaTier tier) {
  switch (tier) {
    case IsaTier::kAmx: return IsaTier::kAvx512Vnni;
    case IsaTier::kAvx512Vnni: return IsaTier::kAvx2;
    case IsaTier::kNeonI8mm: return IsaTier::kNeonDotprod;
    case IsaTier::kNeonDotprod: return IsaTier::kNeon;
    default: return IsaTier::kScalar;
  }
}

namespace {

// Tables hold only function addresses (constant-initialized: nothing of an ISA-specific
// file executes until a kernel of a supported tier is called).
#define ARI_KERNEL_TABLE(ns, tier_value, mm)                                              \
  KernelTable {                                                                           \
    .tier = (tier_value), .gemv_w8a16 = internal::mm::GemvW8A16,                          \
    .gemm_w8a16 = internal::mm::GemmW8A16, .gemv_w4a8 = internal::mm::GemvW4A8,           \
    .gemm_w4a8 = internal::mm::GemmW4A8, .gemv_w8a16_tier = (tier_value),                 \
    .gemm_w8a16_tier = (tier_value), .gemv_w4a8_tier = (tier_value),                      \
    .gemm_w4a8_tier = (tier_value), .quantize_q8a = internal::ns::QuantizeQ8A,            \
    .quantize_q16a = internal::ns::QuantizeQ16A, .convert_f16 = internal::ns::ConvertF16, \
    .convert_bf16 = internal::ns::ConvertBf16, .sum_squares = internal::ns::SumSquares,   \
    .scale_mul = internal::ns::ScaleMul, .swiglu = internal::ns::SwiGlu,                  \
    .attn_scores_f16 = internal::ns::AttnScoresF16,                                       \
    .attn_scores_f32 = internal::ns::AttnScoresF32, .softmax = internal::ns::Softmax,     \
    .attn_values_f16 = internal::ns::AttnValuesF16,                                       \
    .attn_values_f32 = internal::ns::AttnValuesF32,                                       \
  }

constexpr KernelTable kScalarTable = ARI_KERNEL_TABLE(scalar, IsaTier::kScalar, scalar);
#if defined(__x86_64__)
constexpr KernelTable kAvx2Table = ARI_KERNEL_TABLE(avx2, IsaTier::kAvx2, avx2);
// AVX-512 tier: own matmuls, AVX2 element-wise/attention kernels (not bandwidth critical;
// 512-bit versions can replace them without touching callers).
constexpr KernelTable kAvx512Table = ARI_KERNEL_TABLE(avx2, IsaTier::kAvx512Vnni, avx512);
// AMX tier: the AVX-512 table with the prefill GEMMs on tiles.
constexpr KernelTable kAmxTable = [] {
  KernelTable t = kAvx512Table;
  t.tier = IsaTier::kAmx;
  t.gemm_w8a16 = internal::amx::GemmW8A16;
  t.gemm_w8a16_tier = IsaTier::kAmx;
  t.gemm_w4a8 = internal::amx::GemmW4A8;
  t.gemm_w4a8_tier = IsaTier::kAmx;
  return t;
}();
#endif
#if defined(__aarch64__)
// NEON tiers share the baseline element-wise kernels and the W8A16 matmuls (int8 x int16
// widening multiply-adds: sdot takes int8 only); they differ in W4A8:
// widening multiplies (kNeon), sdot (kNeonDotprod), smmla GEMM + sdot GEMV (kNeonI8mm).
constexpr KernelTable kNeonTable = ARI_KERNEL_TABLE(neon, IsaTier::kNeon, neon);
constexpr KernelTable kNeonDotprodTable = [] {
  KernelTable t = kNeonTable;
  t.tier = IsaTier::kNeonDotprod;
  t.gemv_w4a8 = internal::dotprod::GemvW4A8;
  t.gemv_w4a8_tier = IsaTier::kNeonDotprod;
  t.gemm_w4a8 = internal::dotprod::GemmW4A8;
  t.gemm_w4a8_tier = IsaTier::kNeonDotprod;
  return t;
}();
#if defined(ARI_KERNELS_I8MM)
constexpr KernelTable kNeonI8mmTable = [] {
  KernelTable t = kNeonDotprodTable;
  t.tier = IsaTier::kNeonI8mm;
  t.gemm_w4a8 = internal::i8mm::GemmW4A8;
  t.gemm_w4a8_tier = IsaTier::kNeonI8mm;
  return t;
}();
#endif
#endif
#undef ARI_KERNEL_TABLE

// Own table of a tier, or nullptr when this build has no kernels for it.
const KernelTable* OwnTable(IsaTier tier) {
  switch (tier) {
    case IsaTier::kScalar: return &kScalarTable;
#if defined(__x86_64__)
    case IsaTier::kAvx2: return &kAvx2Table;
    case IsaTier::kAvx512Vnni: return &kAvx512Table;
    case IsaTier::kAmx: return &kAmxTable;
#endif
#if defined(__aarch64__)
    case IsaTier::kNeon: return &kNeonTable;
    case IsaTier::kNeonDotprod: return &kNeonDotprodTable;
#if defined(ARI_KERNELS_I8MM)
    case IsaTier::kNeonI8mm: return &kNeonI8mmTable;
#endif
#endif
    default: return nullptr;  // the other architecture's tiers (or i8mm without compiler support)
  }
}

constexpr int64_t kChunk = 256;  // fused ops work on chunks of this many values (1 KiB)

}  // namespace

const KernelTable& KernelsFor(IsaTier tier) {
  static const std::array<const KernelTable*, kNumIsaTiers> resolved = [] {
    std::array<const KernelTable*, kNumIsaTiers> r{};
    for (int i = 0; i < kNumIsaTiers; ++i) {
      IsaTier t = static_cast<IsaTier>(i);
      while (OwnTable(t) == nullptr) t = internal::LowerTier(t);
      r[static_cast<size_t>(i)] = OwnTable(t);
    }
    return r;
  }();
  return *resolved[static_cast<size_t>(tier)];
}

// The active tier's table with each matmul from its measured-fastest tier (tier_choice.h).
const KernelTable& ActiveKernels() { return ChosenKernelsFor(ActiveIsaTier()); }

bool IsaTierCompiled(IsaTier tier) { return OwnTable(tier) != nullptr; }

namespace {
// Zero-initialised and trivially destructible: static TLS, no allocation, no guard.
uint64_t& TileGemms() {
  thread_local uint64_t n = 0;
  return n;
}
}  // namespace

uint64_t TileGemmsOnThisThread() { return TileGemms(); }
void internal::NoteTileGemm() { ++TileGemms(); }

Result<void> CheckMatmulArgs(const PackedMatrix& w, PackedPrecision expected, int64_t r0,
                             int64_t r1) {
  if (w.precision != expected) {
    return MakeError(ErrorCode::kInvalidArgument, "packed matrix has the wrong precision");
  }
  if (w.data == nullptr || w.rows <= 0 || w.cols <= 0) {
    return MakeError(ErrorCode::kInvalidArgument, "packed matrix is empty (rows " +
                                                      std::to_string(w.rows) + ", cols " +
                                                      std::to_string(w.cols) + ")");
  }
  if (r0 < 0 || r0 > r1 || r1 > w.rows) {
    return MakeError(ErrorCode::kInvalidArgument, "row range [" + std::to_string(r0) + ", " +
                                                      std::to_string(r1) + ") outside [0, " +
                                                      std::to_string(w.rows) + ")");
  }
  return {};
}

namespace {

// Quantizes `cols` values into Groups(cols) groups with `quantize(x, n, g)` (a table entry
// taking a multiple of 32 values, writing groups g ..), the last group zero padded.
template <class Quantize>
void QuantizeRow(Quantize quantize, const float* x, int64_t cols) {
  const int64_t full = cols / kGroup;
  if (full > 0) quantize(x, full * kGroup, 0);
  const int64_t tail = cols - full * kGroup;
  if (tail > 0) {
    alignas(64) float buf[kGroup] = {};
    std::memcpy(buf, x + full * kGroup, static_cast<size_t>(tail) * sizeof(float));
    quantize(buf, kGroup, full);
  }
}

// A Q16 row's quantizer for the table's entry: groups g .. of `out` and of its scales; the
// scales' padding to whole blocks zeroed (layout.h).
auto Q16Writer(const KernelTable& k, int64_t cols, BlockQ16A* out) {
  const int64_t groups = Groups(cols);
  float* d = Q16Scales(out, groups);
  std::fill(d + groups, reinterpret_cast<float*>(out + ActQ16ABlocks(cols)), 0.0f);
  return
      [&k, out, d](const float* x, int64_t n, int64_t g) { k.quantize_q16a(x, n, out + g, d + g); };
}

auto Q8Writer(const KernelTable& k, BlockQ8A* out) {
  return [&k, out](const float* x, int64_t n, int64_t g) { k.quantize_q8a(x, n, out + g); };
}

}  // namespace

void QuantizeActQ16A(const KernelTable& k, const float* x, int64_t cols, BlockQ16A* out) {
  QuantizeRow(Q16Writer(k, cols, out), x, cols);
}

void QuantizeActQ8A(const KernelTable& k, const float* x, int64_t cols, BlockQ8A* out) {
  QuantizeRow(Q8Writer(k, out), x, cols);
}

namespace {

float RmsScale(const KernelTable& k, const float* x, int64_t cols, float eps) {
  const float ss = k.sum_squares(x, cols);
  return 1.0f / std::sqrt(ss / static_cast<float>(cols) + eps);
}

// Runs `make(c, len, buf)` to produce values [c, c + len) into buf, then `emit` them.
template <class Make, class Emit>
void Chunked(int64_t cols, Make make, Emit emit) {
  alignas(128) float buf[kChunk];
  for (int64_t c = 0; c < cols; c += kChunk) {
    const int64_t len = std::min(kChunk, cols - c);
    make(c, len, buf);
    emit(c, len, buf);
  }
}

// Emits values [c, c + len) as groups with `write` (a Q16Writer / Q8Writer; a chunk is a
// multiple of 32 except the last one: pad it).
template <class Write>
void EmitGroups(const Write& write, int64_t c, int64_t len, float* buf) {
  const int64_t padded = PaddedCols(len);
  std::fill(buf + len, buf + padded, 0.0f);
  write(buf, padded, c / kGroup);
}

}  // namespace

void RmsNorm(const KernelTable& k, const float* x, const float* weight, int64_t cols, float eps,
             float* out) {
  k.scale_mul(x, weight, RmsScale(k, x, cols, eps), cols, out);
}

void RmsNormToQ16A(const KernelTable& k, const float* x, const float* weight, int64_t cols,
                   float eps, BlockQ16A* out) {
  const float s = RmsScale(k, x, cols, eps);
  Chunked(
      cols,
      [&](int64_t c, int64_t len, float* buf) { k.scale_mul(x + c, weight + c, s, len, buf); },
      [&, write = Q16Writer(k, cols, out)](int64_t c, int64_t len, float* buf) {
        EmitGroups(write, c, len, buf);
      });
}

void RmsNormToQ8A(const KernelTable& k, const float* x, const float* weight, int64_t cols,
                  float eps, BlockQ8A* out) {
  const float s = RmsScale(k, x, cols, eps);
  Chunked(
      cols,
      [&](int64_t c, int64_t len, float* buf) { k.scale_mul(x + c, weight + c, s, len, buf); },
      [&, write = Q8Writer(k, out)](int64_t c, int64_t len, float* buf) {
        EmitGroups(write, c, len, buf);
      });
}

void SwiGluToQ16A(const KernelTable& k, const float* gate, const float* up, int64_t cols,
                  BlockQ16A* out) {
  Chunked(
      cols, [&](int64_t c, int64_t len, float* buf) { k.swiglu(gate + c, up + c, len, buf); },
      [&, write = Q16Writer(k, cols, out)](int64_t c, int64_t len, float* buf) {
        EmitGroups(write, c, len, buf);
      });
}

void SwiGluToQ8A(const KernelTable& k, const float* gate, const float* up, int64_t cols,
                 BlockQ8A* out) {
  Chunked(
      cols, [&](int64_t c, int64_t len, float* buf) { k.swiglu(gate + c, up + c, len, buf); },
      [&, write = Q8Writer(k, out)](int64_t c, int64_t len, float* buf) {
        EmitGroups(write, c, len, buf);
      });
}

}  // namespace ari::runtime::kernels
