#include "runtime/eval/perf_bench.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <thread>

#include "runtime/eval/bandwidth_probe.h"
#include "runtime/model/model.h"

namespace ari::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

Stat MakeStat(std::vector<double> v) {
  Stat s;
  s.values = v;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = v[v.size() / 2];
  s.min = v.front();
  s.max = v.back();
  return s;
}

uint64_t PeakRss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

uint64_t Resident(const void* p, uint64_t n) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) / page * page;
  const uint64_t len = reinterpret_cast<uintptr_t>(p) + n - a;
  std::vector<unsigned char> v((len + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(a), len, v.data()) != 0) return 0;
  uint64_t r = 0;
  for (unsigned char c : v) r += (c & 1) ? page : 0;
  return r;
}

std::string StatJson(const Stat& s) {
  std::string r = "{\"median\":" + std::to_string(s.median) + ",\"min\":" + std::to_string(s.min) +
                  ",\"max\":" + std::to_string(s.max) + ",\"values\":[";
  for (size_t i = 0; i < s.values.size(); ++i) {
    if (i) r += ',';
    r += std::to_string(s.values[i]);
  }
  r += "]}";
  return r;
}

// Drops the page-cache pages of [p, p + n) of the file mapped there (our mapping first,
// then the cache) so that residency afterwards shows what the run itself touched.
bool EvictRange(const std::filesystem::path& file, const std::byte* map_base, const void* p,
                uint64_t n) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) / page * page;
  const uint64_t len = reinterpret_cast<uintptr_t>(p) + n - a;
  if (madvise(reinterpret_cast<void*>(a), len, MADV_DONTNEED) != 0) return false;
  const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const off_t off = static_cast<off_t>(a - reinterpret_cast<uintptr_t>(map_base));
  const bool ok = posix_fadvise(fd, off, static_cast<off_t>(len), POSIX_FADV_DONTNEED) == 0;
  close(fd);
  return ok;
}

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

struct ProbeBuffer {
  uint64_t* p = nullptr;
  uint64_t n = 0;
  // 2 MiB aligned and advised MADV_HUGEPAGE before the first touch: the fewest TLB misses
  // this machine allows (the probe is the fastest read, not a typical one).
  static constexpr size_t kAlign = 2u << 20;
  explicit ProbeBuffer(uint64_t bytes) : n(bytes / sizeof(uint64_t)) {
    p = static_cast<uint64_t*>(::operator new(n * 8, std::align_val_t(kAlign)));
    if (n > 0 && madvise(p, n * 8, MADV_HUGEPAGE) != 0) {
      // Not fatal: transparent huge pages off (or unsupported) leaves 4 kB pages.
    }
    for (uint64_t i = 0; i < n; ++i) p[i] = i;
  }
  ~ProbeBuffer() { ::operator delete(p, std::align_val_t(kAlign)); }
  ProbeBuffer(const ProbeBuffer&) = delete;
  ProbeBuffer& operator=(const ProbeBuffer&) = delete;
};

// Pool dispatches per token, summed over the measured chunks.
struct DispatchCounts {
  double prefill_dispatches = 0, prefill_tokens = 0, decode_dispatches = 0, decode_tokens = 0;
};

// Starts a fresh turn on slot 0 with the first n tokens of `prompt`.
Result<void> StartFreshTurn(Engine& e, const std::vector<TokenId>& prompt, int n, int n_gen) {
  TurnSpec t;
  t.prompt = std::span<const TokenId>(prompt.data(), static_cast<size_t>(n));
  t.max_tokens = n_gen + 1;
  t.keep_context = false;
  return e.StartTurn(0, t);
}

// What the measured chunks ran: the tier in force and the tiers of the matmul kernels called.
struct RanTiers {
  kernels::IsaTier isa = kernels::IsaTier::kScalar;
  uint32_t gemv = 0, gemm = 0;
  void Note(const ChunkResult& c) {
    isa = c.isa;
    gemv |= c.gemv_tiers;
    gemm |= c.gemm_tiers;
  }
};

// Runs chunks until the turn's prompt is prefilled.
Result<void> Prefill(Engine& e, const ChunkKnobs& k, RanTiers& ran) {
  for (bool done = false; !done;) {
    auto c = e.RunChunk(0, k);
    if (!c) return std::unexpected(c.error());
    done = c->prompt_remaining == 0;
    ran.Note(*c);
  }
  return {};
}

// One decode chunk after a prefill: tokens/s and the share of the threads' CPU time.
Result<void> MeasureDecode(const BenchOptions& o, Engine& e, const ChunkKnobs& k, DispatchCounts& n,
                           std::vector<double>& dec, std::vector<double>& share, RanTiers& ran) {
  const uint64_t dd = e.PoolDispatches();
  const double cpu0 = CpuSeconds();
  const auto d = Clock::now();
  auto c = e.RunChunk(0, k);
  if (!c) return std::unexpected(c.error());
  const double wall = std::chrono::duration<double>(Clock::now() - d).count();
  ran.Note(*c);
  n.decode_dispatches += static_cast<double>(e.PoolDispatches() - dd);
  n.decode_tokens += static_cast<double>(c->tokens.size());
  dec.push_back(static_cast<double>(c->tokens.size()) / wall);
  share.push_back((CpuSeconds() - cpu0) / (wall * std::max(1, o.threads)));
  return {};
}

// Prefill (time to first token, prompt tokens/s) of every prompt size, o.reps times;
// after each prefill of the first size, one decode chunk.
Result<void> MeasurePrompts(const BenchOptions& o, Engine& e, const ChunkKnobs& k,
                            std::vector<TokenId>& prompt, BenchResult& res) {
  const int vocab = e.model().config().vocab_size;
  const int max_p = static_cast<int>(prompt.size());
  std::vector<double> dec, share;
  DispatchCounts n;
  RanTiers ran;
  for (size_t pi = 0; pi < o.prompt_sizes.size(); ++pi) {
    std::vector<double> pt, tt;
    for (int r = 0; r < o.reps; ++r) {
      for (int i = 0; i < max_p; ++i)
        prompt[static_cast<size_t>(i)] = (i * 131 + r * 7 + 5) % vocab;
      if (auto s = StartFreshTurn(e, prompt, o.prompt_sizes[pi], o.n_gen); !s) return s;
      const uint64_t d0 = e.PoolDispatches();
      const auto a = Clock::now();
      if (auto f = Prefill(e, k, ran); !f) return f;
      const double ms = Ms(Clock::now() - a);
      n.prefill_dispatches += static_cast<double>(e.PoolDispatches() - d0);
      n.prefill_tokens += o.prompt_sizes[pi];
      tt.push_back(ms);
      pt.push_back(o.prompt_sizes[pi] / (ms / 1e3));
      if (pi == 0 && o.n_gen > 0) {  // decode after the first prompt size
        if (auto d = MeasureDecode(o, e, k, n, dec, share, ran); !d) return d;
      }
    }
    res.prompt_tps.push_back(MakeStat(pt));
    res.ttft_ms.push_back(MakeStat(tt));
  }
  res.isa = std::string(kernels::IsaTierName(ran.isa));
  res.gemv_isas = kernels::IsaTiersText(ran.gemv);
  res.gemm_isas = kernels::IsaTiersText(ran.gemm);
  res.decode_tps = MakeStat(dec);
  res.decode_cpu_share = MakeStat(share);
  if (n.prefill_tokens > 0)
    res.dispatches_per_prefill_token = n.prefill_dispatches / n.prefill_tokens;
  if (n.decode_tokens > 0) res.dispatches_per_decode_token = n.decode_dispatches / n.decode_tokens;
  return {};
}

// Read bandwidth and the decode rate it allows (weight bytes per token), then paired
// runs: probe, decode, probe, decode, ...
Result<void> MeasureRoofline(const BenchOptions& o, Engine& e, const ChunkKnobs& k,
                             std::vector<TokenId>& prompt, BenchResult& res) {
  const int vocab = e.model().config().vocab_size;
  const ProbeBuffer buf(o.bandwidth_bytes);  // allocated after VmHWM was read
  const double bytes = static_cast<double>(res.weight_bytes_per_token);
  const eval::ProbeResult probe = eval::ProbeReadBandwidth(buf.p, buf.n, o.threads);
  res.bandwidth_gbs = probe.gbs;
  res.probe = probe.ToString();
  res.roofline_tps = res.bandwidth_gbs * 1e9 / bytes;
  res.roofline_fraction = res.roofline_tps > 0 ? res.decode_tps.median / res.roofline_tps : 0;
  res.decode_read_gbs = bytes * res.decode_tps.median / 1e9;
  // Paired runs: probe, decode, probe, decode, ... (a fresh turn with the first prompt
  // size each time; the prefill is not timed).
  std::vector<double> bws, fractions;
  double before = res.bandwidth_gbs;
  const int p0 = o.prompt_sizes.empty() ? 1 : o.prompt_sizes[0];
  for (int r = 0; o.n_gen > 0 && r < o.paired_reps; ++r) {
    for (int i = 0; i < p0; ++i) prompt[static_cast<size_t>(i)] = (i * 131 + r * 11 + 3) % vocab;
    if (auto s = StartFreshTurn(e, prompt, p0, o.n_gen); !s) return s;
    RanTiers ran;
    if (auto f = Prefill(e, k, ran); !f) return f;
    const auto d = Clock::now();
    auto c = e.RunChunk(0, k);
    if (!c) return std::unexpected(c.error());
    const double tps = static_cast<double>(c->tokens.size()) /
                       std::chrono::duration<double>(Clock::now() - d).count();
    const double after = eval::ProbeReadBandwidth(buf.p, buf.n, o.threads).gbs;
    const double bw = (before + after) / 2;
    bws.push_back(bw);
    fractions.push_back(bw > 0 ? tps / (bw * 1e9 / bytes) : 0);
    before = after;
  }
  res.paired_bandwidth_gbs = MakeStat(bws);
  res.paired_fraction = MakeStat(fractions);
  res.probe_too_slow =
      res.roofline_fraction > 1.0 || (!fractions.empty() && res.paired_fraction.median > 1.0);
  return {};
}

}  // namespace

double MeasureReadBandwidth(uint64_t bytes, int threads) {
  ProbeBuffer b(bytes);
  return eval::ProbeReadBandwidth(b.p, b.n, threads).gbs;
}

Result<BenchResult> RunModelBench(const BenchOptions& o) {
  BenchResult res;
  res.model = o.model.string();
  res.precision = std::string(PrecisionName(o.precision));
  res.threads = o.threads;
  res.prompt_sizes = o.prompt_sizes;
  const int max_p =
      o.prompt_sizes.empty() ? 1 : *std::max_element(o.prompt_sizes.begin(), o.prompt_sizes.end());
  EngineOptions eo;
  eo.model_path = o.model;
  eo.slots = 1;
  eo.context_length = max_p + o.n_gen + 8;
  eo.max_chunk = std::max(max_p, 1);
  eo.max_output = o.n_gen + 1;
  eo.threads = o.threads;
  // --precision reference: the plain file's fp32 path (never a pack's W8A16 in its place).
  eo.plain_gguf =
      o.precision == Precision::kReference ? PlainGguf::kReference : PlainGguf::kAutoPack;
  const auto t0 = Clock::now();
  auto eng = Engine::Create(eo);
  if (!eng) return std::unexpected(eng.error());
  res.time_to_ready_ms = Ms(Clock::now() - t0);
  Engine& e = **eng;
  for (const std::string& note : e.memory_plan().notes) {
    if (note.rfind("arena prefaulted", 0) == 0) res.arena_prefault = note;
  }
  const WeightMatrix& em = e.model().weights().token_embd;
  res.embd_table_bytes = em.row_bytes * static_cast<uint64_t>(em.rows);
  res.embd_evicted =
      EvictRange(o.model, e.model().file().bytes().data(), em.data, res.embd_table_bytes);
  res.embd_resident_before_bytes = Resident(em.data, res.embd_table_bytes);
  ChunkKnobs k;
  k.precision = o.precision;
  k.max_isa = o.max_isa;
  k.threads = o.threads;
  k.prefill_tokens = max_p;
  k.decode_tokens = o.n_gen;
  k.greedy_only = true;
  std::vector<TokenId> prompt(static_cast<size_t>(max_p));
  if (auto m = MeasurePrompts(o, e, k, prompt, res); !m) return std::unexpected(m.error());
  res.peak_rss_bytes = PeakRss();
  res.embd_resident_bytes = Resident(em.data, res.embd_table_bytes);
  res.weight_bytes_per_token = e.WeightBytesPerToken(o.precision);
  if (o.measure_bandwidth) {
    if (auto m = MeasureRoofline(o, e, k, prompt, res); !m) return std::unexpected(m.error());
  }
  return res;
}

std::string BenchResult::ToTable() const {
  char b[1024];
  std::string s;
  std::snprintf(b, sizeof(b),
                "model %s  precision %s  isa %s (GEMV kernels %s, GEMM kernels %s)  threads %d\n",
                model.c_str(), precision.c_str(), isa.c_str(), gemv_isas.c_str(), gemm_isas.c_str(),
                threads);
  s += b;
  std::snprintf(b, sizeof(b), "%-22s %10s %10s %10s\n", "metric", "median", "min", "max");
  s += b;
  auto row = [&](const std::string& n, const Stat& st) {
    std::snprintf(b, sizeof(b), "%-22s %10.2f %10.2f %10.2f\n", n.c_str(), st.median, st.min,
                  st.max);
    s += b;
  };
  for (size_t i = 0; i < prompt_sizes.size(); ++i) {
    row("pp" + std::to_string(prompt_sizes[i]) + " t/s", prompt_tps[i]);
    row("ttft pp" + std::to_string(prompt_sizes[i]) + " ms", ttft_ms[i]);
  }
  row("decode t/s", decode_tps);
  std::snprintf(
      b, sizeof(b),
      "time to ready %.1f ms, peak RSS %.1f MiB, embedding resident %.2f of %.2f MiB (%.2f before "
      "the runs)\n"
      "pool dispatches per decoded token %.1f, per prompt token %.2f%s\n",
      time_to_ready_ms, peak_rss_bytes / 1048576.0, embd_resident_bytes / 1048576.0,
      embd_table_bytes / 1048576.0, embd_resident_before_bytes / 1048576.0,
      dispatches_per_decode_token, dispatches_per_prefill_token,
      embd_evicted
          ? ""
          : "\n(embedding pages could not be evicted first: residency is the page cache's)");
  s += b;
  if (!arena_prefault.empty()) s += arena_prefault + "\n";
  if (bandwidth_gbs > 0) {
    std::snprintf(b, sizeof(b),
                  "probe %s; decode read %.1f MiB/token x %.2f t/s = %.2f GB/s; roofline %.1f "
                  "t/s, fraction %.2f%s\n",
                  probe.c_str(), weight_bytes_per_token / 1048576.0, decode_tps.median,
                  decode_read_gbs, roofline_tps, roofline_fraction,
                  probe_too_slow
                      ? "\nWARNING: fraction above 1: decode read faster than the probe, "
                        "so the probe is too slow here and the fraction flatters"
                      : "");
    s += b;
  }
  std::snprintf(
      b, sizeof(b), "decode CPU share %.2f (%.2f..%.2f) of %d threads%s\n", decode_cpu_share.median,
      decode_cpu_share.min, decode_cpu_share.max, threads,
      decode_cpu_share.median > 0 && decode_cpu_share.median < 0.85
          ? ": the run did not get its CPUs (loaded machine), wall-clock figures measure the load"
          : "");
  s += b;
  if (!paired_fraction.values.empty()) {
    std::snprintf(b, sizeof(b),
                  "paired probe+decode runs (%zu): bandwidth %.2f GB/s (%.2f..%.2f), roofline "
                  "fraction %.2f (%.2f..%.2f)\n",
                  paired_fraction.values.size(), paired_bandwidth_gbs.median,
                  paired_bandwidth_gbs.min, paired_bandwidth_gbs.max, paired_fraction.median,
                  paired_fraction.min, paired_fraction.max);
    s += b;
  }
  return s;
}

std::string BenchResult::ToJson() const {
  std::string s = "{\"model\":\"" + model + "\",\"precision\":\"" + precision + "\",\"isa\":\"" +
                  isa + "\",\"gemv_isas\":\"" + gemv_isas + "\",\"gemm_isas\":\"" + gemm_isas +
                  "\",\"threads\":" + std::to_string(threads) +
                  ",\"time_to_ready_ms\":" + std::to_string(time_to_ready_ms) +
                  ",\"arena_prefault\":\"" + arena_prefault + "\"" + ",\"prompt\":[";
  for (size_t i = 0; i < prompt_sizes.size(); ++i) {
    if (i) s += ',';
    s += "{\"tokens\":";
    s += std::to_string(prompt_sizes[i]);
    s += ",\"tps\":";
    s += StatJson(prompt_tps[i]);
    s += ",\"ttft_ms\":";
    s += StatJson(ttft_ms[i]);
    s += '}';
  }
  s += "],\"decode_tps\":" + StatJson(decode_tps) +
       ",\"peak_rss_bytes\":" + std::to_string(peak_rss_bytes) +
       ",\"embd_resident_bytes\":" + std::to_string(embd_resident_bytes) +
       ",\"embd_table_bytes\":" + std::to_string(embd_table_bytes) +
       ",\"embd_evicted_before_run\":" + (embd_evicted ? "true" : "false") +
       ",\"embd_resident_before_run_bytes\":" + std::to_string(embd_resident_before_bytes) +
       ",\"dispatches_per_decode_token\":" + std::to_string(dispatches_per_decode_token) +
       ",\"dispatches_per_prompt_token\":" + std::to_string(dispatches_per_prefill_token) +
       ",\"weight_bytes_per_token\":" + std::to_string(weight_bytes_per_token) +
       ",\"bandwidth_gbs\":" + std::to_string(bandwidth_gbs) +
       ",\"roofline_tps\":" + std::to_string(roofline_tps) +
       ",\"roofline_fraction\":" + std::to_string(roofline_fraction) + ",\"probe\":\"" + probe +
       "\",\"decode_read_gbs\":" + std::to_string(decode_read_gbs) +
       ",\"probe_too_slow\":" + (probe_too_slow ? "true" : "false") +
       ",\"decode_cpu_share\":" + StatJson(decode_cpu_share) +
       ",\"paired_bandwidth_gbs\":" + StatJson(paired_bandwidth_gbs) +
       ",\"paired_roofline_fraction\":" + StatJson(paired_fraction) + "}";
  return s;
}

}  // namespace ari::runtime
