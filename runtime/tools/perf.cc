// ari-perf: runtime-only benchmark driver over RunModelBench.
//   ari-perf -m model.gguf [--precision w8a16|w4a8|reference] [-t 2] [-p 64,128] [-n 64]
//            [-r 5] [--json] [--bw-mib 512] [--isa TIER]   (--bw-mib 0: skip the bandwidth
//            probe, e.g. under valgrind; --isa: the kernels' tier ceiling, e.g. avx2)
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "runtime/eval/perf_bench.h"

namespace {
void Usage(FILE* f) {
  std::fprintf(f,
               "usage: ari-perf -m MODEL.gguf [--precision w8a16|w4a8|reference] [-t 2]\n"
               "                [-p 64,128] [-n 64] [-r 5] [--json] [--bw-mib 512] [--isa TIER]\n"
               "  --bw-mib 0 skips the bandwidth probe\n"
               "  --isa caps the kernels' ISA tier (scalar, avx2, avx512vnni, amx, neon, ...)\n");
}
}  // namespace

int main(int argc, char** argv) {
  using namespace ari::runtime;
  BenchOptions o;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "-h" || a == "--help") {
      Usage(stdout);
      return 0;
    }
    if (a == "--json") {
      json = true;
      continue;
    }
    if (!v) {
      std::fprintf(stderr, "ari-perf: %s needs a value\n", argv[i]);
      return 2;
    }
    ++i;
    if (a == "-m")
      o.model = v;
    else if (a == "--precision") {
      const std::string_view p = v;
      o.precision = p == "w4a8"        ? Precision::kW4A8
                    : p == "reference" ? Precision::kReference
                                       : Precision::kW8A16;
    } else if (a == "-t")
      o.threads = std::atoi(v);
    else if (a == "-n")
      o.n_gen = std::atoi(v);
    else if (a == "-r")
      o.reps = std::atoi(v);
    else if (a == "--isa") {
      auto t = kernels::ParseIsaCeiling(v);
      if (!t) {
        std::fprintf(stderr, "ari-perf: --isa: %s\n", t.error().ToString().c_str());
        return 2;
      }
      o.max_isa = *t;
    } else if (a == "--bw-mib") {
      o.bandwidth_bytes = static_cast<uint64_t>(std::atoll(v)) << 20;
      o.measure_bandwidth = o.bandwidth_bytes > 0;
    } else if (a == "-p") {
      o.prompt_sizes.clear();
      std::stringstream ss(v);
      for (std::string x; std::getline(ss, x, ',');) o.prompt_sizes.push_back(std::atoi(x.c_str()));
    } else {
      std::fprintf(stderr, "ari-perf: unknown flag %s\n", argv[i - 1]);
      return 2;
    }
  }
  if (o.model.empty()) {
    Usage(stderr);
    return 2;
  }
  auto r = RunModelBench(o);
  if (!r) {
    std::fprintf(stderr, "ari-perf: %s\n", r.error().ToString().c_str());
    return 1;
  }
  std::printf("%s\n", json ? r->ToJson().c_str() : r->ToTable().c_str());
  return 0;
}
