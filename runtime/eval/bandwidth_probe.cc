#include "runtime/eval/bandwidth_probe.h"

#include <sched.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "runtime/kernels/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ari::runtime::eval {
namespace {

using Clock = std::chrono::steady_clock;

// Each stream reads `per` words from its own contiguous part of [p, p + streams * per);
// the words after that are the tail, summed by the reference.
template <int S>
uint64_t SumScalarStreams(const uint64_t* p, uint64_t n) {
  constexpr uint64_t kStep = 4;
  const uint64_t per = n / S / kStep * kStep;
  uint64_t acc[S][kStep] = {};
  for (uint64_t i = 0; i < per; i += kStep) {
    for (int s = 0; s < S; ++s) {
      const uint64_t* q = p + static_cast<uint64_t>(s) * per + i;
      for (uint64_t k = 0; k < kStep; ++k) acc[s][k] += q[k];
    }
  }
  uint64_t sum = ProbeSumReference(p + S * per, n - S * per);
  for (int s = 0; s < S; ++s) {
    for (uint64_t k = 0; k < kStep; ++k) sum += acc[s][k];
  }
  return sum;
}

#if defined(__x86_64__)
// 128 bytes per stream per step: four 32-byte loads into the stream's accumulator.
template <int S>
__attribute__((target("avx2"))) uint64_t SumAvx2Streams(const uint64_t* p, uint64_t n) {
  constexpr uint64_t kStep = 16;
  const uint64_t per = n / S / kStep * kStep;
  __m256i acc[S];
  for (auto& a : acc) a = _mm256_setzero_si256();
  for (uint64_t i = 0; i < per; i += kStep) {
    for (int s = 0; s < S; ++s) {
      const auto* q = reinterpret_cast<const __m256i*>(p + static_cast<uint64_t>(s) * per + i);
      const __m256i a = _mm256_add_epi64(_mm256_loadu_si256(q), _mm256_loadu_si256(q + 1));
      const __m256i b = _mm256_add_epi64(_mm256_loadu_si256(q + 2), _mm256_loadu_si256(q + 3));
      acc[s] = _mm256_add_epi64(acc[s], _mm256_add_epi64(a, b));
    }
  }
  uint64_t sum = ProbeSumReference(p + S * per, n - S * per);
  for (int s = 0; s < S; ++s) {
    alignas(32) uint64_t v[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(v), acc[s]);
    sum += v[0] + v[1] + v[2] + v[3];
  }
  return sum;
}

// 256 bytes per stream per step: four 64-byte loads.
template <int S>
__attribute__((target("avx512f"))) uint64_t SumAvx512Streams(const uint64_t* p, uint64_t n) {
  constexpr uint64_t kStep = 32;
  const uint64_t per = n / S / kStep * kStep;
  __m512i acc[S];
  for (auto& a : acc) a = _mm512_setzero_si512();
  for (uint64_t i = 0; i < per; i += kStep) {
    for (int s = 0; s < S; ++s) {
      const uint64_t* q = p + static_cast<uint64_t>(s) * per + i;
      const __m512i a = _mm512_add_epi64(_mm512_loadu_si512(q), _mm512_loadu_si512(q + 8));
      const __m512i b = _mm512_add_epi64(_mm512_loadu_si512(q + 16), _mm512_loadu_si512(q + 24));
      acc[s] = _mm512_add_epi64(acc[s], _mm512_add_epi64(a, b));
    }
  }
  uint64_t sum = ProbeSumReference(p + S * per, n - S * per);
  for (int s = 0; s < S; ++s) {  // a store, not _mm512_reduce_add_epi64 (GCC 12 warns in it)
    alignas(64) uint64_t v[8];
    _mm512_store_si512(v, acc[s]);
    for (uint64_t x : v) sum += x;
  }
  return sum;
}
#endif

uint64_t Dispatch(const uint64_t* p, uint64_t n, int streams, [[maybe_unused]] ProbeIsa isa) {
#if defined(__x86_64__)
  if (isa == ProbeIsa::kAvx512) {
    switch (streams) {
      case 1: return SumAvx512Streams<1>(p, n);
      case 2: return SumAvx512Streams<2>(p, n);
      case 4: return SumAvx512Streams<4>(p, n);
      default: return SumAvx512Streams<8>(p, n);
    }
  }
  if (isa == ProbeIsa::kAvx2) {
    switch (streams) {
      case 1: return SumAvx2Streams<1>(p, n);
      case 2: return SumAvx2Streams<2>(p, n);
      case 4: return SumAvx2Streams<4>(p, n);
      default: return SumAvx2Streams<8>(p, n);
    }
  }
#endif
  switch (streams) {
    case 1: return SumScalarStreams<1>(p, n);
    case 2: return SumScalarStreams<2>(p, n);
    case 4: return SumScalarStreams<4>(p, n);
    default: return SumScalarStreams<8>(p, n);
  }
}

// The CPUs this process may run on, in order.
std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  return cpus;
}

bool PinSelf(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace

std::string_view ProbeIsaName(ProbeIsa isa) {
  switch (isa) {
    case ProbeIsa::kAvx512: return "AVX-512";
    case ProbeIsa::kAvx2: return "AVX2";
    case ProbeIsa::kScalar: break;
  }
  return "scalar 64-bit";
}

bool ProbeIsaSupported(ProbeIsa isa) {
  const kernels::CpuFeatures& f = kernels::DetectCpuFeatures();
  switch (isa) {
    case ProbeIsa::kAvx512: return f.avx512f;
    case ProbeIsa::kAvx2: return f.avx2;
    case ProbeIsa::kScalar: break;
  }
  return true;
}

ProbeIsa BestProbeIsa() {
  if (ProbeIsaSupported(ProbeIsa::kAvx512)) return ProbeIsa::kAvx512;
  if (ProbeIsaSupported(ProbeIsa::kAvx2)) return ProbeIsa::kAvx2;
  return ProbeIsa::kScalar;
}

uint64_t ProbeSumReference(const uint64_t* p, uint64_t n) {
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n; ++i) sum += p[i];
  return sum;
}

uint64_t ProbeSum(const uint64_t* p, uint64_t n, int streams, ProbeIsa isa) {
  return Dispatch(p, n, streams, isa);
}

std::string ProbeResult::ToString() const {
  char b[160];
  std::snprintf(b, sizeof b, "%.2f GB/s (%s loads, %d stream%s x %d thread%s, %d pinned)", gbs,
                std::string(ProbeIsaName(isa)).c_str(), streams, streams == 1 ? "" : "s", threads,
                threads == 1 ? "" : "s", pinned_threads);
  return b;
}

namespace {

// One worker's clock readings of one run, a cache line of its own.
struct alignas(64) RunTimes {
  Clock::time_point start, end;
  uint64_t sum = 0;
};

// A run lasts from the first worker's start to the last worker's end, both read by the
// workers themselves: a coordinating thread that is not pinned shares the CPUs with
// the workers and can be scheduled only after they are done (one thread per CPU), so its
// own clock readings would time the wait for a CPU, not the reads.
double RunSeconds(const std::vector<RunTimes>& t) {
  Clock::time_point a = t.front().start, e = t.front().end;
  for (const RunTimes& x : t) {
    a = std::min(a, x.start);
    e = std::max(e, x.end);
  }
  return std::chrono::duration<double>(e - a).count();
}

}  // namespace

ProbeResult ProbeReadBandwidth(const uint64_t* buf, uint64_t n, int threads, int reps) {
  threads = std::max(1, threads);
  reps = std::max(1, reps);
  constexpr int kStreams[] = {1, 2, 4, 8};
  const ProbeIsa isa = BestProbeIsa();
  const std::vector<int> cpus = AllowedCpus();
  ProbeResult best;
  best.isa = isa;
  best.threads = threads;
  // Every worker and the collecting thread meet twice per run: before (the workers start
  // together) and after (the collector reads the workers' times).
  std::barrier sync(threads + 1);
  std::vector<RunTimes> times(static_cast<size_t>(threads));
  std::vector<int> pinned(static_cast<size_t>(threads), 0);
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      if (!cpus.empty()) {
        pinned[static_cast<size_t>(t)] = PinSelf(cpus[static_cast<size_t>(t) % cpus.size()]);
      }
      const uint64_t a = n * static_cast<uint64_t>(t) / static_cast<uint64_t>(threads);
      const uint64_t e = n * static_cast<uint64_t>(t + 1) / static_cast<uint64_t>(threads);
      RunTimes& mine = times[static_cast<size_t>(t)];
      for (int streams : kStreams) {
        for (int r = 0; r < reps; ++r) {
          sync.arrive_and_wait();
          mine.start = Clock::now();
          mine.sum = ProbeSum(buf + a, e - a, streams, isa);
          mine.end = Clock::now();
          sync.arrive_and_wait();
        }
      }
    });
  }
  for (int streams : kStreams) {
    for (int r = 0; r < reps; ++r) {
      sync.arrive_and_wait();
      sync.arrive_and_wait();
      const double s = RunSeconds(times);
      const double gbs = s > 0 ? static_cast<double>(n * sizeof(uint64_t)) / s / 1e9 : 0;
      if (gbs > best.gbs) {
        best.gbs = gbs;
        best.streams = streams;
      }
    }
  }
  for (auto& w : workers) w.join();
  for (int t = 0; t < threads; ++t) {
    best.checksum += times[static_cast<size_t>(t)].sum;
    best.pinned_threads += pinned[static_cast<size_t>(t)];
  }
  return best;
}

}  // namespace ari::runtime::eval
