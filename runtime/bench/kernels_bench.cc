// Micro-benchmarks of the matmul kernels per precision and ISA tier on TinyLlama-1.1B
// shaped matrices, plus this machine's single-thread memory read bandwidth for context.
//
//   kernels_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// GEMV (decode) rotates over enough copies of the packed matrix (>= 256 MiB) that every
// call streams its weights from DRAM, as in real decoding where all layers' weights pass
// once per token; bytes_per_second is packed weight bytes per second. GEMM (prefill) uses
// one copy: bytes_per_second counts weight bytes, items_per_second tokens.
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/bench/read_sum.h"
#include "runtime/kernels/kernels.h"
#include "runtime/kernels/pack.h"

namespace ari::runtime::kernels {
namespace {

using bench::SumScalar;
#if defined(__x86_64__)
using bench::SumAvx2;
#endif

constexpr size_t kStreamBytes = size_t{256} << 20;

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte, AlignedFree>;

Buffer Alloc(size_t bytes) {
  return Buffer(static_cast<std::byte*>(std::aligned_alloc(128, (bytes + 127) / 128 * 128)));
}

// Packed copies of one random matrix (kept for the whole run).
struct Weights {
  int64_t rows = 0, cols = 0, bytes = 0, copies = 0;
  Buffer data;
  std::string error;  // the packing failed: the benchmarks using it skip with this
  PackedMatrix At(PackedPrecision p, int64_t i) const {
    return {p, data.get() + i * bytes, rows, cols};
  }
};

const Weights& GetWeights(PackedPrecision p, int64_t rows, int64_t cols, bool streaming) {
  static std::map<std::tuple<int, int64_t, int64_t, bool>, Weights> cache;
  auto key = std::make_tuple(static_cast<int>(p), rows, cols, streaming);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Weights w;
  w.rows = rows;
  w.cols = cols;
  w.bytes = PackedBytes(p, rows, cols);
  w.copies = streaming ? static_cast<int64_t>(kStreamBytes / static_cast<size_t>(w.bytes)) + 1 : 1;
  w.data = Alloc(static_cast<size_t>(w.bytes * w.copies));
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> src(static_cast<size_t>(rows * cols));
  for (auto& v : src) v = dist(rng);
  if (!w.data) {
    w.error = "out of memory for the packed weights";
    w.copies = 0;
  } else if (auto pk =
                 PackF32(p, src.data(), rows, cols, {w.data.get(), static_cast<size_t>(w.bytes)});
             !pk) {
    w.error = pk.error().ToString();
    w.copies = 0;
  }
  for (int64_t i = 1; i < w.copies; ++i) {
    std::memcpy(w.data.get() + i * w.bytes, w.data.get(), static_cast<size_t>(w.bytes));
  }
  return cache.emplace(key, std::move(w)).first->second;
}

struct Activations {
  std::vector<BlockQ16A> q16_store;  // q16: 64-byte aligned inside it, as the engine's arena
  BlockQ16A* q16 = nullptr;
  std::vector<BlockQ8A> q8a;
  int64_t ld16 = 0;  // blocks per token row
  int64_t ldq = 0;
};

Activations MakeActivations(int64_t n, int64_t cols) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(cols));
  Activations a;
  a.ld16 = ActQ16ABlocks(cols);
  a.ldq = ActQ8ABlocks(cols);
  a.q16_store.resize(static_cast<size_t>(n * a.ld16 + 1));
  void* start = a.q16_store.data();
  size_t space = a.q16_store.size() * sizeof(BlockQ16A);
  a.q16 = static_cast<BlockQ16A*>(std::align(64, n * a.ld16 * sizeof(BlockQ16A), start, space));
  a.q8a.resize(static_cast<size_t>(n * a.ldq));
  for (int64_t t = 0; t < n; ++t) {
    for (auto& v : x) v = dist(rng);
    QuantizeActQ16A(KernelsFor(IsaTier::kScalar), x.data(), cols, a.q16 + t * a.ld16);
    QuantizeActQ8A(KernelsFor(IsaTier::kScalar), x.data(), cols, a.q8a.data() + t * a.ldq);
  }
  return a;
}

void BmGemv(benchmark::State& state, IsaTier tier, PackedPrecision p, int64_t rows, int64_t cols) {
  const KernelTable& k = KernelsFor(tier);
  const Weights& w = GetWeights(p, rows, cols, /*streaming=*/true);
  if (!w.error.empty()) {
    state.SkipWithError(w.error.c_str());
    return;
  }
  const Activations a = MakeActivations(1, cols);
  std::vector<float> y(static_cast<size_t>(rows));
  int64_t i = 0;
  for (auto _ : state) {
    const PackedMatrix m = w.At(p, i);
    if (p == PackedPrecision::kW8) {
      k.gemv_w8a16(m, a.q16, y.data(), 0, rows);
    } else {
      k.gemv_w4a8(m, a.q8a.data(), y.data(), 0, rows);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    if (++i == w.copies) i = 0;
  }
  state.SetBytesProcessed(state.iterations() * w.bytes);
}

void BmGemm(benchmark::State& state, IsaTier tier, PackedPrecision p, int64_t rows, int64_t cols,
            int64_t n) {
  const KernelTable& k = KernelsFor(tier);
  const Weights& w = GetWeights(p, rows, cols, /*streaming=*/false);
  if (!w.error.empty()) {
    state.SkipWithError(w.error.c_str());
    return;
  }
  const Activations a = MakeActivations(n, cols);
  std::vector<float> y(static_cast<size_t>(rows * n));
  const PackedMatrix m = w.At(p, 0);
  for (auto _ : state) {
    if (p == PackedPrecision::kW8) {
      k.gemm_w8a16(m, a.q16, a.ld16, n, y.data(), rows, 0, rows);
    } else {
      k.gemm_w4a8(m, a.q8a.data(), a.ldq, n, y.data(), rows, 0, rows);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * w.bytes);
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["GMAC/s"] = benchmark::Counter(
      static_cast<double>(rows * cols * n) * static_cast<double>(state.iterations()) * 1e-9,
      benchmark::Counter::kIsRate);
}

// Single-thread streaming read of a 512 MiB buffer (sum of 64-bit words, 4 x 256-bit
// accumulators when AVX2 is available; runtime/bench/read_sum.h).
void BmMemRead(benchmark::State& state) {
  const size_t bytes = size_t{512} << 20;
  static Buffer buf = [&] {
    Buffer b = Alloc(bytes);
    std::memset(b.get(), 1, bytes);
    return b;
  }();
#if defined(__x86_64__)
  const bool avx2 = IsaTierSupported(IsaTier::kAvx2);
#else
  const bool avx2 = false;
  auto SumAvx2 = SumScalar;
#endif
  for (auto _ : state) {
    benchmark::DoNotOptimize(avx2 ? SumAvx2(buf.get(), bytes) : SumScalar(buf.get(), bytes));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

struct Shape {
  const char* name;
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {
    {"2048x2048", 2048, 2048},  // attention projections (K, V are 256x2048)
    {"5632x2048", 5632, 2048},  // FFN gate / up
    {"2048x5632", 2048, 5632},  // FFN down
};

void RegisterAll() {
  benchmark::RegisterBenchmark("MemRead/1thread", BmMemRead)->Unit(benchmark::kMillisecond);
  for (IsaTier tier : SupportedIsaTiers()) {
    if (!IsaTierCompiled(tier)) continue;
    const std::string t(IsaTierName(tier));
    for (PackedPrecision p : {PackedPrecision::kW8, PackedPrecision::kW4}) {
      const std::string prec = p == PackedPrecision::kW8 ? "W8A16" : "W4A8";
      for (const Shape& s : kShapes) {
        std::string gemv = "Gemv";
        gemv.append(prec).append("/").append(t).append("/").append(s.name);
        benchmark::RegisterBenchmark(gemv.c_str(), BmGemv, tier, p, s.rows, s.cols)
            ->Unit(benchmark::kMicrosecond);
        // The scalar GEMM only at a small N (it is the reference, not a prefill path).
        for (int64_t n : tier == IsaTier::kScalar ? std::vector<int64_t>{4}
                                                  : std::vector<int64_t>{16, 32, 64, 128}) {
          std::string gemm = "Gemm";
          gemm.append(prec).append("/").append(t).append("/").append(s.name);
          gemm.append("/n").append(std::to_string(n));
          benchmark::RegisterBenchmark(gemm.c_str(), BmGemm, tier, p, s.rows, s.cols, n)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
}

}  // namespace
}  // namespace ari::runtime::kernels

int main(int argc, char** argv) {
  ari::runtime::kernels::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
