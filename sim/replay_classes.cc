// Per-class figures of replay reports, both modes; see replay.h.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim/replay.h"

namespace ari::sim {

Percentiles ComputePercentiles(std::vector<double> v) {
  Percentiles p;
  p.n = static_cast<int>(v.size());
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::clamp<size_t>(k, 1, v.size()) - 1];
  };
  p.p50 = at(0.50);
  p.p95 = at(0.95);
  p.p99 = at(0.99);
  p.max = v.back();
  return p;
}

std::vector<ClassReport> SummarizeClasses(const std::vector<RequestReport>& requests) {
  std::vector<ClassReport> out;
  for (qos::Urgency u : qos::kAllUrgencies) {
    ClassReport c;
    c.urgency = std::string(qos::UrgencyName(u));
    std::vector<double> ttft, comp, wait;
    for (const RequestReport& r : requests) {
      if (r.urgency != c.urgency) continue;
      ++c.requests;
      if (r.status == "DONE") ++c.done;
      if (r.deadline_missed) ++c.deadline_misses;
      if (r.status == "REJECTED" || r.status == "BUSY") ++c.rejected;
      if (r.ttft_s >= 0) ttft.push_back(r.ttft_s);
      if (r.completion_s >= 0 && r.status == "DONE") comp.push_back(r.completion_s);
      if (r.queue_wait_s >= 0) wait.push_back(r.queue_wait_s);
    }
    c.ttft_s = ComputePercentiles(ttft);
    c.completion_s = ComputePercentiles(comp);
    c.queue_wait_s = ComputePercentiles(wait);
    out.push_back(c);
  }
  return out;
}

}  // namespace ari::sim
