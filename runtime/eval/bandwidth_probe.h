// The roofline's yardstick (docs/benchmarks.md "Roofline"): the fastest streaming read
// this machine does, so that "decode reaches fraction F of the memory bandwidth" can only
// flatter when the probe says so. The probe reads with the widest loads the CPU has
// (AVX-512 > AVX2 > 64-bit scalar), several sequential streams per thread (more open
// pages, more prefetch streams), one thread per CPU, each pinned to its own CPU of the
// allowed set and started together; it keeps the best (ISA, streams) over several
// repetitions. ProbeSumReference is the spec of every probe kernel: the wrapping sum of
// the 64-bit words, whatever the ISA, stream count, size or alignment.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ari::runtime::eval {

enum class ProbeIsa : uint8_t { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };
std::string_view ProbeIsaName(ProbeIsa isa);

// Whether this CPU (and OS) can run `isa`; the widest one it can.
bool ProbeIsaSupported(ProbeIsa isa);
ProbeIsa BestProbeIsa();

// The spec: sum (mod 2^64) of p[0, n).
uint64_t ProbeSumReference(const uint64_t* p, uint64_t n);
// The same sum, read as `streams` (1, 2, 4 or 8) interleaved sequential streams with
// `isa` loads (unaligned loads; any n). Precondition: ProbeIsaSupported(isa).
uint64_t ProbeSum(const uint64_t* p, uint64_t n, int streams, ProbeIsa isa);

struct ProbeResult {
  double gbs = 0;  // best over the repetitions and stream counts, 1e9 bytes/s
  ProbeIsa isa = ProbeIsa::kScalar;
  int streams = 1;
  int threads = 1;
  int pinned_threads = 0;        // threads whose sched_setaffinity to one CPU succeeded
  uint64_t checksum = 0;         // ProbeSum of the whole buffer (keeps the reads alive)
  std::string ToString() const;  // "24.10 GB/s (AVX2 loads, 4 streams x 2 pinned threads)"
};

// Streams buf[0, n) with `threads` threads (contiguous slices), for each stream count in
// {1, 2, 4, 8} with BestProbeIsa(), best of `reps` each.
ProbeResult ProbeReadBandwidth(const uint64_t* buf, uint64_t n, int threads, int reps = 3);

}  // namespace ari::runtime::eval
