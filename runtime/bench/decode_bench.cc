// Decode-path micro-benchmarks with the persistent thread pool (docs/benchmarks.md, "Profile"):
// where the time of one decoded token goes between the single-thread GEMV kernels
// (kernels_bench) and the end-to-end decode (ari-bench).
//
//   decode_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// - MemRead/threads:N: N pool participants stream disjoint halves of a 512 MiB buffer
//   (AVX2 loads where available): the machine's N-thread read bandwidth.
// - DecodeGemvs/<prec>/t<N>/<split>: one "token" of GEMVs over a TinyLlama-1.1B-shaped
//   layer stack (q, k, v, o, gate, up, down per layer; enough layers for >= 256 MiB, so every
//   token streams from DRAM as in real decoding). Splits:
//     one    - the whole stack in ONE pool dispatch, each participant its share of every
//              matrix (no barriers: the streaming bound of the kernels with N threads);
//     engineP - the engine's dispatches: per layer [q,k,v] [o] [gate,up] [down], each cut
//              into whole 8-row-block pieces handed out by ThreadPool::RunUnits, as
//              runtime/engine/fast_forward.cc does, with P pieces per participant.
//   bytes_per_second = packed weight bytes per second; "dispatches" per token.
// - PoolDispatch/threads:N: an empty static dispatch (ThreadPool::Run): the round trip.
// Real time (wall clock) is what these measure: the machine must be otherwise idle for
// the figures to mean anything (uptime next to each figure in the docs).
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/bench/read_sum.h"
#include "runtime/core/thread_pool.h"
#include "runtime/kernels/kernels.h"

namespace ari::runtime::kernels {
namespace {

using bench::SumScalar;
#if defined(__x86_64__)
using bench::SumAvx2;
#endif

constexpr size_t kStreamBytes = size_t{256} << 20;
constexpr int64_t kPiecesPerThread = 4;  // as runtime/engine/fast_forward.cc

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte, AlignedFree>;

Buffer Alloc(size_t bytes) {
  return Buffer(static_cast<std::byte*>(std::aligned_alloc(128, (bytes + 127) / 128 * 128)));
}

ThreadPool& Pool() {
  static std::unique_ptr<ThreadPool> pool = [] {
    auto p = ThreadPool::Create(2);
    return p ? std::move(*p) : nullptr;
  }();
  return *pool;
}

// ---------------------------------------------------------------- memory read

struct ReadJob {
  const std::byte* p;
  size_t bytes;
  bool avx2;
  uint64_t sums[8 * 16];
};

void ReadPart(void* ctx, int i, int n) {
  ReadJob& j = *static_cast<ReadJob*>(ctx);
  const size_t a = j.bytes * static_cast<size_t>(i) / static_cast<size_t>(n) / 128 * 128;
  const size_t e = j.bytes * static_cast<size_t>(i + 1) / static_cast<size_t>(n) / 128 * 128;
#if defined(__x86_64__)
  j.sums[int64_t{16} * i] = j.avx2 ? SumAvx2(j.p + a, e - a) : SumScalar(j.p + a, e - a);
#else
  j.sums[int64_t{16} * i] = SumScalar(j.p + a, e - a);
#endif
}

void BmMemRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const size_t bytes = size_t{512} << 20;
  static Buffer buf = [&] {
    Buffer b = Alloc(bytes);
    std::memset(b.get(), 1, bytes);
    return b;
  }();
  ReadJob job{buf.get(), bytes, IsaTierSupported(IsaTier::kAvx2), {}};
  for (auto _ : state) {
    Pool().Run(&ReadPart, &job, threads);
    benchmark::DoNotOptimize(job.sums);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

// ---------------------------------------------------------------- layer-stack GEMVs

struct Stack {
  PackedPrecision p = PackedPrecision::kW8;
  Buffer data;
  std::vector<PackedMatrix> mats;            // 7 per layer: q k v o gate up down
  std::vector<std::vector<int>> dispatches;  // the engine's groups (indices into mats)
  int64_t bytes = 0;
};

// Random bytes with sane fp16 scales (~0.01) at the start of every 8-row tile.
const Stack& GetStack(PackedPrecision p) {
  static std::unique_ptr<Stack> stacks[2];
  auto& s = stacks[static_cast<int>(p)];
  if (s) return *s;
  s = std::make_unique<Stack>();
  s->p = p;
  const int64_t dim = 2048, kv = 256, ffn = 5632;
  const int64_t shapes[7][2] = {{dim, dim}, {kv, dim},  {kv, dim}, {dim, dim},
                                {ffn, dim}, {ffn, dim}, {dim, ffn}};
  int64_t layer_bytes = 0;
  for (const auto& sh : shapes) layer_bytes += PackedBytes(p, sh[0], sh[1]);
  const int64_t layers = static_cast<int64_t>(kStreamBytes) / layer_bytes + 1;
  s->bytes = layers * layer_bytes;
  s->data = Alloc(static_cast<size_t>(s->bytes));
  std::mt19937 rng(3);
  auto* words = reinterpret_cast<uint32_t*>(s->data.get());
  for (int64_t i = 0; i < s->bytes / 4; ++i) words[i] = rng();
  const int64_t tile = TileBytes(p);
  for (int64_t off = 0; off < s->bytes; off += tile) {
    for (int r = 0; r < kRowInterleave; ++r) {
      const uint16_t d = 0x2000 | static_cast<uint16_t>(rng() & 0x3ff);  // ~0.008..0.016
      std::memcpy(s->data.get() + off + int64_t{2} * r, &d, 2);
    }
  }
  int64_t off = 0;
  for (int64_t l = 0; l < layers; ++l) {
    const int base = static_cast<int>(s->mats.size());
    for (const auto& sh : shapes) {
      s->mats.push_back({p, s->data.get() + off, sh[0], sh[1]});
      off += PackedBytes(p, sh[0], sh[1]);
    }
    s->dispatches.push_back({base, base + 1, base + 2});
    s->dispatches.push_back({base + 3});
    s->dispatches.push_back({base + 4, base + 5});
    s->dispatches.push_back({base + 6});
  }
  return *s;
}

struct GemvJob {
  const Stack* s = nullptr;
  const BlockQ16A* a16 = nullptr;      // a Q16 row of 5632 values (the FFN width)
  const BlockQ16A* a16_dim = nullptr;  // of its first 2048 (the Q16 row has its scales last)
  const BlockQ8A* aq = nullptr;
  float* y = nullptr;  // [2][max rows]: gate and up outputs kept apart, the rest share y[0]
  const std::vector<int>* group = nullptr;
  int64_t pieces = 1;
};

inline void Rows(const GemvJob& j, const PackedMatrix& m, float* y, int64_t r0, int64_t r1) {
  if (m.precision == PackedPrecision::kW8) {
    GemvW8A16(m, m.cols == 5632 ? j.a16 : j.a16_dim, y, r0, r1);
  } else {
    GemvW4A8(m, j.aq, y, r0, r1);
  }
}

inline void PieceRange(int64_t rows, int64_t i, int64_t n, int64_t* r0, int64_t* r1) {
  const int64_t blocks = RowBlocks(rows);
  *r0 = std::min(rows, blocks * i / n * kRowInterleave);
  *r1 = std::min(rows, blocks * (i + 1) / n * kRowInterleave);
}

void WholeStackPart(void* ctx, int i, int n) {
  const GemvJob& j = *static_cast<const GemvJob*>(ctx);
  for (const PackedMatrix& m : j.s->mats) {
    int64_t r0 = 0, r1 = 0;
    PieceRange(m.rows, i, n, &r0, &r1);
    Rows(j, m, j.y, r0, r1);
  }
}

void EngineUnit(void* ctx, int64_t u, int /*who*/) {
  const GemvJob& j = *static_cast<const GemvJob*>(ctx);
  const int k = static_cast<int>(u / j.pieces);
  const PackedMatrix& m = j.s->mats[static_cast<size_t>((*j.group)[static_cast<size_t>(k)])];
  int64_t r0 = 0, r1 = 0;
  PieceRange(m.rows, u % j.pieces, j.pieces, &r0, &r1);
  Rows(j, m, j.y + int64_t{8192} * k, r0, r1);
}

void BmDecodeGemvs(benchmark::State& state, PackedPrecision p, int threads, int64_t per_thread) {
  const bool engine = per_thread > 0;
  const Stack& s = GetStack(p);
  std::vector<float> x(5632);
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : x) v = dist(rng);
  std::vector<BlockQ16A> a16(static_cast<size_t>(ActQ16ABlocks(5632)));
  std::vector<BlockQ16A> a16_dim(static_cast<size_t>(ActQ16ABlocks(2048)));
  std::vector<BlockQ8A> aq(static_cast<size_t>(Groups(5632)));
  QuantizeActQ16A(x.data(), 5632, a16.data());
  QuantizeActQ16A(x.data(), 2048, a16_dim.data());
  QuantizeActQ8A(x.data(), 5632, aq.data());
  std::vector<float> y(size_t{3} * 8192);
  GemvJob job{&s, a16.data(), a16_dim.data(), aq.data(), y.data()};
  ThreadPool& pool = Pool();
  const uint64_t runs0 = pool.runs();
  for (auto _ : state) {
    if (!engine) {
      pool.Run(&WholeStackPart, &job, threads);
    } else {
      for (const auto& g : s.dispatches) {
        int64_t min_blocks = RowBlocks(s.mats[static_cast<size_t>(g[0])].rows);
        for (int m : g)
          min_blocks = std::min(min_blocks, RowBlocks(s.mats[static_cast<size_t>(m)].rows));
        job.group = &g;
        job.pieces = std::clamp<int64_t>(threads * per_thread, 1, min_blocks);
        pool.RunUnits(&EngineUnit, &job, static_cast<int64_t>(g.size()) * job.pieces, threads);
      }
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * s.bytes);
  state.counters["dispatches"] = static_cast<double>(pool.runs() - runs0) /
                                 static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.counters["MiB"] = static_cast<double>(s.bytes) / 1048576.0;
}

// ---------------------------------------------------------------- dispatch cost

void Nop(void* ctx, int i, int /*n*/) { static_cast<volatile int*>(ctx)[int64_t{16} * i] = i; }

// Static Run: every participant must run its index, so this is the full round trip (wake,
// run, barrier) of one dispatch with workers spinning between dispatches.
void BmPoolDispatch(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  alignas(64) int sink[64] = {};  // Nop writes it through a volatile pointer
  ThreadPool& pool = Pool();
  for (auto _ : state) pool.Run(&Nop, sink, threads);
}

void RegisterAll() {
  benchmark::RegisterBenchmark("MemRead", BmMemRead)
      ->Arg(1)
      ->Arg(2)
      ->ArgName("threads")
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (PackedPrecision p : {PackedPrecision::kW4, PackedPrecision::kW8}) {
    const std::string prec = p == PackedPrecision::kW8 ? "W8A16" : "W4A8";
    for (int t : {1, 2}) {
      for (int64_t per_thread : {int64_t{0}, kPiecesPerThread, int64_t{16}}) {
        const std::string split = per_thread == 0 ? "one" : "engine" + std::to_string(per_thread);
        std::string name = "DecodeGemvs/";
        name.append(prec).append("/t").append(std::to_string(t)).append("/").append(split);
        benchmark::RegisterBenchmark(name.c_str(), BmDecodeGemvs, p, t, per_thread)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  benchmark::RegisterBenchmark("PoolDispatch", BmPoolDispatch)
      ->Arg(1)
      ->Arg(2)
      ->ArgName("threads")
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond);
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
