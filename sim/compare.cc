// ari-sim compare: runs and JSON/text output; see compare.h (HTML in compare_html.cc).
#include "sim/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <thread>

#include "sim/report.h"

namespace ari::sim {
namespace {

std::string Num(double x) {
  char b[48];
  std::snprintf(b, sizeof(b), "%.6g", x);
  return b;
}

// Knob changes of the global decision timeline, as compact rows.
std::string DecisionRows(const ReplayReport& r) {
  std::string s = "[";
  std::string last;
  int last_band = -1;
  bool first = true;
  for (const DecisionRecord& d : r.decisions) {
    const std::string key = d.idle ? std::string("idle") : d.knobs;
    if (key == last && d.band == last_band) continue;
    last = key;
    last_band = d.band;
    if (!first) s += ',';
    first = false;
    s += '[';
    s += Num(d.t_s);
    s += ',';
    s += std::to_string(d.band);
    s += ',';
    s += JsonString(key);
    s += ',';
    s += JsonString(d.urgency);
    s += d.idle ? ",1]" : ",0]";
  }
  return s + "]";
}

// At most ~600 points per trace (every k-th sample).
std::string TempRows(const ReplayReport& r) {
  const size_t step = std::max<size_t>(1, r.samples.size() / 600);
  std::string s = "[";
  for (size_t i = 0; i < r.samples.size(); i += step) {
    if (i) s += ',';
    s += '[';
    s += Num(r.samples[i].t_s);
    s += ',';
    s += Num(r.samples[i].die_c);
    s += ']';
  }
  return s + "]";
}

std::string ClassRows(const ReplayReport& r) {
  std::string s = "[";
  for (size_t i = 0; i < r.classes.size(); ++i) {
    const ClassReport& c = r.classes[i];
    if (i) s += ',';
    s += "{\"class\":" + JsonString(c.urgency) + ",\"requests\":" + std::to_string(c.requests) +
         ",\"done\":" + std::to_string(c.done) +
         ",\"deadline_misses\":" + std::to_string(c.deadline_misses) +
         ",\"ttft_p95_s\":" + Num(c.ttft_s.p95) +
         ",\"completion_p95_s\":" + Num(c.completion_s.p95) + "}";
  }
  return s + "]";
}

std::string RunJson(const CompareRun& run, bool quality_measured) {
  const ReplaySummary& m = run.report.summary;
  std::string bands = "{";
  for (size_t i = 0; i < m.band_time_s.size(); ++i) {
    if (i) bands += ',';
    bands += JsonString(i < run.report.band_names.size() ? run.report.band_names[i] : "?") + ":" +
             Num(m.band_time_s[i]);
  }
  bands += "}";
  return "{\"policy\":" + JsonString(run.policy) + ",\"log\":" + JsonString(run.log) +
         ",\"limit_c\":" + Num(run.limit_c) + ",\"peak_die_c\":" + Num(m.peak_die_c) +
         ",\"peak_t_s\":" + Num(m.peak_t_s) + ",\"hw_throttle_s\":" + Num(m.hw_throttle_s) +
         ",\"hw_critical_s\":" + Num(m.hw_critical_s) +
         ",\"hw_throttle_events\":" + std::to_string(m.hw_throttle_events) +
         ",\"energy_j\":" + Num(m.energy_j) + ",\"quality_loss\":" + Num(m.quality_loss) +
         ",\"quality_measured\":" + (quality_measured ? "true" : "false") +
         ",\"busy_s\":" + Num(m.busy_s) + ",\"duration_s\":" + Num(m.duration_s) +
         ",\"band_time_s\":" + bands + ",\"classes\":" + ClassRows(run.report) +
         ",\"temps\":" + TempRows(run.report) + ",\"decisions\":" + DecisionRows(run.report) + "}";
}

template <class T, class F>
std::string List(const std::vector<T>& v, F f) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += f(v[i]);
  }
  return s + "]";
}

}  // namespace

Result<CompareReport> RunCompare(const CompareInput& in, int threads) {
  if (in.logs.empty() || in.policies.empty() || in.logs.size() != in.log_names.size()) {
    return MakeError(ErrorCode::kInvalidArgument, "compare: give logs (named) and policies");
  }
  CompareReport out;
  out.hardware = in.hardware;
  out.model = in.model;
  out.cost_source = in.base.cost ? in.base.cost->source : "";
  out.quality_measured = in.base.quality != nullptr;
  if (in.base.protection.enabled) {
    out.trips_c = {in.base.protection.passive_c, in.base.protection.critical_c};
  }
  out.logs = in.log_names;
  for (const qos::Policy* p : in.policies) out.policies.push_back(p->name);
  const size_t np = in.policies.size();
  std::vector<Result<ReplayReport>> results(in.logs.size() * np,
                                            MakeError(ErrorCode::kInternal, "not run"));
  const size_t workers = static_cast<size_t>(std::max(1, threads));
  for (size_t start = 0; start < results.size(); start += workers) {
    std::vector<std::jthread> pool;
    for (size_t k = start; k < std::min(results.size(), start + workers); ++k) {
      pool.emplace_back([&, k] {
        ReplayOptions o = in.base;
        o.policy = in.policies[k % np];
        results[k] = ReplayModel(*in.logs[k / np], o);
      });
    }
  }
  for (size_t k = 0; k < results.size(); ++k) {
    if (!results[k]) {
      return MakeError(results[k].error().code, "compare: " + in.log_names[k / np] + " with " +
                                                    in.policies[k % np]->name + ": " +
                                                    results[k].error().message);
    }
    CompareRun run;
    run.policy = in.policies[k % np]->name;
    run.log = in.log_names[k / np];
    const auto& bands = in.policies[k % np]->thermal_bands;
    run.limit_c = bands.empty() ? 0 : bands.back().enter_c;
    run.report = std::move(*results[k]);
    run.report.log_name = run.log;
    out.runs.push_back(std::move(run));
  }
  return out;
}

std::string CompareToJson(const CompareReport& r) {
  const auto str = [](const std::string& s) { return JsonString(s); };
  return "{\"format\":\"ari-sim-compare-1\",\"hardware\":" + JsonString(r.hardware) +
         ",\"model\":" + JsonString(r.model) + ",\"cost_model\":" + JsonString(r.cost_source) +
         ",\"trips_c\":" + List(r.trips_c, Num) + ",\"logs\":" + List(r.logs, str) +
         ",\"policies\":" + List(r.policies, str) + ",\"runs\":" +
         List(r.runs, [&](const CompareRun& x) { return RunJson(x, r.quality_measured); }) + "}\n";
}

std::string CompareToText(const CompareReport& r) {
  std::string s = "compare on " + (r.hardware.empty() ? std::string("(no profile)") : r.hardware) +
                  (r.model.empty() ? "" : ", model " + r.model) + "\n";
  char b[320];
  std::snprintf(b, sizeof(b), "%-22s %-20s %5s %5s %5s %5s %8s %8s %7s %7s %6s %8s %7s\n", "log",
                "policy", "CRIT", "HIGH", "NORM", "BACK", "CRIT p95", "NORM p95", "peak C",
                "limit C", "hw s", "energy J", "quality");
  s += b;
  for (const CompareRun& x : r.runs) {
    const auto& c = x.report.classes;
    const ReplaySummary& m = x.report.summary;
    std::snprintf(
        b, sizeof(b), "%-22s %-20s %5d %5d %5d %5d %8.2f %8.2f %7.1f %7.1f %6.0f %8.0f %7.3f\n",
        x.log.c_str(), x.policy.c_str(), c[0].deadline_misses, c[1].deadline_misses,
        c[2].deadline_misses, c[3].deadline_misses, c[0].completion_s.p95, c[2].completion_s.p95,
        m.peak_die_c, x.limit_c, m.hw_throttle_s, m.energy_j, m.quality_loss);
    s += b;
  }
  s += "CRIT..BACK: deadline misses per class; p95: completion p95 (s); hw s: time "
       "hardware-throttled; quality: ";
  s += r.quality_measured ? "measured table (mean per-token loss)\n"
                          : "proxy (share W4A8 + 0.1 x mean layers dropped)\n";
  return s;
}

}  // namespace ari::sim
