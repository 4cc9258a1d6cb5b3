// The preemption scenario's figures as text: the table ari-bench prints and its JSON.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/preempt_run.h"

namespace ari::sim {

double PreemptMedian(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

namespace {

constexpr double kGoal = 1.25;

// The field of every repetition, for the medians and maxima.
template <class F>
std::vector<double> Column(const PreemptRunResult& r, F field) {
  std::vector<double> v;
  v.reserve(r.reps.size());
  for (const PreemptRep& x : r.reps) v.push_back(field(x));
  return v;
}

double Max(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

template <class... T>
std::string Format(const char* fmt, T... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  std::string s(static_cast<size_t>(std::max(n, 0)) + 1, '\0');
  std::snprintf(s.data(), s.size(), fmt, args...);
  s.pop_back();
  return s;
}

}  // namespace

std::string PreemptRunTable(const PreemptRunResult& r) {
  std::string out = "knobs: " + r.knobs + "\n";
  for (size_t i = 0; i < r.reps.size(); ++i) {
    const PreemptRep& x = r.reps[i];
    if (r.busy_slots > 0) {
      out += Format("rep %zu: %d slots busy, %d turn(s) parked for the CRITICAL request\n", i,
                    r.busy_slots, x.parked);
    }
    out += Format(
        "rep %zu: idle TTFT %.3f ms, during %d-token NORMAL prefill (arrival %.1f ms into a "
        "%.1f ms chunk period) %.3f ms, ratio %.3f; NORMAL prefill %.1f tok/s, %.1f ms "
        "compute per chunk | CPU time: idle %.1f ms, loaded %.1f ms, ratio %.3f, NORMAL "
        "%.1f ms/chunk, %.1f tok/s paced\n",
        i, x.idle_ms, r.normal_prompt, x.arrival_offset_ms, x.period_ms, x.loaded_ms, x.ratio,
        x.normal_tok_s, x.normal_chunk_ms, x.cpu_idle_ms, x.cpu_loaded_ms, x.cpu_ratio,
        x.cpu_normal_chunk_ms, x.cpu_normal_tok_s);
  }
  const auto ratios = Column(r, [](const PreemptRep& x) { return x.ratio; });
  const auto cpu_ratios = Column(r, [](const PreemptRep& x) { return x.cpu_ratio; });
  const double m = PreemptMedian(ratios), cm = PreemptMedian(cpu_ratios);
  out += Format(
      "preempt: median idle TTFT %.3f ms, loaded %.3f ms, ratio %.3f (worst arrival phase "
      "%.3f; goal <= 1.25) %s; NORMAL prefill %.1f tok/s (pauses included, CRITICAL steps "
      "excluded), %.1f ms compute per chunk\n",
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.idle_ms; })),
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.loaded_ms; })), m, Max(ratios),
      m <= kGoal ? "OK" : "ABOVE GOAL",
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.normal_tok_s; })),
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.normal_chunk_ms; })));
  out += Format(
      "preempt (CPU time per worker, immune to other processes' load): idle TTFT %.3f ms, "
      "loaded %.3f ms, ratio %.3f (worst phase %.3f) %s; NORMAL %.1f ms per chunk, prefill "
      "%.1f tok/s with pacing\n",
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.cpu_idle_ms; })),
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.cpu_loaded_ms; })), cm,
      Max(cpu_ratios), cm <= kGoal ? "OK" : "ABOVE GOAL",
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.cpu_normal_chunk_ms; })),
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.cpu_normal_tok_s; })));
  return out;
}

std::string PreemptRunJson(const PreemptRunResult& r) {
  const auto ratios = Column(r, [](const PreemptRep& x) { return x.ratio; });
  const auto cpu_ratios = Column(r, [](const PreemptRep& x) { return x.cpu_ratio; });
  std::string out = Format(
      "{\"scenario\":\"preempt\",\"busy_slots\":%d,\"normal_prompt\":%d,\"reps\":%zu,"
      "\"idle_ttft_ms\":%.4f,\"loaded_ttft_ms\":%.4f,\"ratio_median\":%.4f,"
      "\"ratio_max\":%.4f,\"goal\":%.2f,\"normal_prefill_tok_s\":%.2f,"
      "\"normal_chunk_compute_ms\":%.3f,\"cpu_idle_ttft_ms\":%.4f,"
      "\"cpu_loaded_ttft_ms\":%.4f,\"cpu_ratio_median\":%.4f,\"cpu_ratio_max\":%.4f,"
      "\"cpu_normal_chunk_ms\":%.3f,\"cpu_normal_prefill_tok_s\":%.2f,\"rows\":[",
      r.busy_slots, r.normal_prompt, r.reps.size(),
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.idle_ms; })),
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.loaded_ms; })),
      PreemptMedian(ratios), Max(ratios), kGoal,
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.normal_tok_s; })),
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.normal_chunk_ms; })),
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.cpu_idle_ms; })),
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.cpu_loaded_ms; })),
      PreemptMedian(cpu_ratios), Max(cpu_ratios),
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.cpu_normal_chunk_ms; })),
      PreemptMedian(Column(r, [](const PreemptRep& x) { return x.cpu_normal_tok_s; })));
  for (size_t i = 0; i < r.reps.size(); ++i) {
    const PreemptRep& x = r.reps[i];
    out += Format(
        "%s{\"idle_ttft_ms\":%.4f,\"loaded_ttft_ms\":%.4f,\"ratio\":%.4f,"
        "\"arrival_offset_ms\":%.3f,\"period_ms\":%.3f,\"parked\":%d,"
        "\"critical_first\":%s,\"cpu_ratio\":%.4f}",
        i ? "," : "", x.idle_ms, x.loaded_ms, x.ratio, x.arrival_offset_ms, x.period_ms, x.parked,
        x.critical_first ? "true" : "false", x.cpu_ratio);
  }
  return out + "]}\n";
}

}  // namespace ari::sim
