// Calibration check (live vs model mode); see calibrate.h.
#include "sim/calibrate.h"

#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "sim/report.h"

namespace ari::sim {

double DecodeTps(const RequestReport& r) {
  if (r.status != "DONE" || r.tokens < 2 || r.ttft_s < 0 || !(r.completion_s > r.ttft_s)) return -1;
  return (r.tokens - 1) / (r.completion_s - r.ttft_s);
}

Calibration CompareReports(const ReplayReport& live, const ReplayReport& model, double goal) {
  Calibration c;
  c.goal = goal;
  std::unordered_map<uint64_t, const RequestReport*> by_id;
  for (const RequestReport& r : model.requests) by_id[r.id] = &r;
  struct Acc {
    int tn = 0, dn = 0;
    double tl = 0, tm = 0, dl = 0, dm = 0;
  };
  std::vector<Acc> acc(qos::kNumUrgencies);
  for (const RequestReport& l : live.requests) {
    auto it = by_id.find(l.id);
    if (it == by_id.end()) continue;
    const RequestReport& m = *it->second;
    ++c.matched;
    int rank = -1;
    for (qos::Urgency u : qos::kAllUrgencies) {
      if (qos::UrgencyName(u) == l.urgency) rank = qos::Rank(u);
    }
    if (rank < 0) continue;
    Acc& a = acc[static_cast<size_t>(rank)];
    if (l.ttft_s >= 0 && m.ttft_s >= 0) {
      ++a.tn;
      a.tl += l.ttft_s;
      a.tm += m.ttft_s;
    }
    const double dl_tps = DecodeTps(l), dm_tps = DecodeTps(m);
    if (dl_tps > 0 && dm_tps > 0) {
      ++a.dn;
      a.dl += dl_tps;
      a.dm += dm_tps;
    }
  }
  for (qos::Urgency u : qos::kAllUrgencies) {
    const Acc& a = acc[static_cast<size_t>(qos::Rank(u))];
    ClassCalibration k;
    k.urgency = std::string(qos::UrgencyName(u));
    k.ttft_n = a.tn;
    if (a.tn > 0) {
      k.live_ttft_s = a.tl / a.tn;
      k.model_ttft_s = a.tm / a.tn;
      k.ttft_error = k.live_ttft_s > 0 ? k.model_ttft_s / k.live_ttft_s - 1 : 0;
      if (std::fabs(k.ttft_error) > goal) k.within_goal = false;
    }
    k.decode_n = a.dn;
    if (a.dn > 0) {
      k.live_decode_tps = a.dl / a.dn;
      k.model_decode_tps = a.dm / a.dn;
      k.decode_error = k.model_decode_tps / k.live_decode_tps - 1;
      if (std::fabs(k.decode_error) > goal) k.within_goal = false;
    }
    if (!k.within_goal) c.within_goal = false;
    c.classes.push_back(k);
  }
  return c;
}

dl::DriveLog WithMeasuredTokens(const dl::DriveLog& log, const ReplayReport& live) {
  std::unordered_map<uint64_t, int> tokens;
  for (const RequestReport& r : live.requests) tokens[r.id] = r.tokens;
  dl::DriveLog out = log;
  for (dl::Event& e : *out.mutable_event()) {
    if (!e.has_request()) continue;
    auto it = tokens.find(e.request().request_id());
    if (it != tokens.end() && it->second > 0) {
      e.mutable_request()->set_max_tokens(static_cast<uint32_t>(it->second));
    }
  }
  return out;
}

std::string CalibrationToText(const Calibration& c) {
  std::string s;
  char b[256];
  std::snprintf(b, sizeof b,
                "calibration (model vs live, %d matched requests; error = model / live - 1, goal "
                "+-%.0f %%)\n",
                c.matched, c.goal * 100);
  s += b;
  s += "class         n   TTFT live   model   error     n  decode live  model (tok/s)  error\n";
  for (const ClassCalibration& k : c.classes) {
    if (k.ttft_n == 0 && k.decode_n == 0) continue;
    std::snprintf(b, sizeof b,
                  "%-11s %3d   %8.3f %8.3f %+6.1f %%  %3d   %8.2f %8.2f      %+6.1f %%%s\n",
                  k.urgency.c_str(), k.ttft_n, k.live_ttft_s, k.model_ttft_s, 100 * k.ttft_error,
                  k.decode_n, k.live_decode_tps, k.model_decode_tps, 100 * k.decode_error,
                  k.within_goal ? "" : "  (outside goal)");
    s += b;
  }
  s += c.within_goal ? "all classes within the goal\n" : "NOT within the goal\n";
  return s;
}

std::string CalibrationToJson(const Calibration& c) {
  std::string s = "{\"format\":\"ari-sim-calibration-1\",\"goal\":";
  char b[512];
  std::snprintf(b, sizeof b, "%.6g,\"matched\":%d,\"within_goal\":%s,\"classes\":[", c.goal,
                c.matched, c.within_goal ? "true" : "false");
  s += b;
  for (size_t i = 0; i < c.classes.size(); ++i) {
    const ClassCalibration& k = c.classes[i];
    std::snprintf(b, sizeof b,
                  "%s{\"class\":%s,\"ttft_n\":%d,\"live_ttft_s\":%.6g,\"model_ttft_s\":%.6g,"
                  "\"ttft_error\":%.6g,\"decode_n\":%d,\"live_decode_tps\":%.6g,"
                  "\"model_decode_tps\":%.6g,\"decode_error\":%.6g,\"within_goal\":%s}",
                  i ? "," : "", JsonString(k.urgency).c_str(), k.ttft_n, k.live_ttft_s,
                  k.model_ttft_s, k.ttft_error, k.decode_n, k.live_decode_tps, k.model_decode_tps,
                  k.decode_error, k.within_goal ? "true" : "false");
    s += b;
  }
  return s + "]}\n";
}

}  // namespace ari::sim
