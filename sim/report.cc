// Replay report: JSON and text; see report.h (HTML in report_html.cc).
#include "sim/report.h"

#include <cstdio>

namespace ari::sim {
namespace {

std::string Num(double x) {
  char b[48];
  std::snprintf(b, sizeof(b), "%.6g", x);
  return b;
}

class Obj {  // tiny JSON object builder
 public:
  explicit Obj(std::string* out) : out_(out) { *out_ += '{'; }
  Obj& Raw(std::string_view k, std::string_view v) {
    Key(k);
    *out_ += v;
    return *this;
  }
  Obj& N(std::string_view k, double v) { return Raw(k, Num(v)); }
  Obj& I(std::string_view k, int64_t v) { return Raw(k, std::to_string(v)); }
  Obj& S(std::string_view k, std::string_view v) { return Raw(k, JsonString(v)); }
  Obj& B(std::string_view k, bool v) { return Raw(k, v ? "true" : "false"); }
  void Close() { *out_ += '}'; }

 private:
  void Key(std::string_view k) {
    if (!first_) *out_ += ',';
    first_ = false;
    *out_ += JsonString(k);
    *out_ += ':';
  }
  std::string* out_;
  bool first_ = true;
};

std::string PercentilesJson(const Percentiles& p) {
  std::string s;
  Obj(&s).I("n", p.n).N("p50", p.p50).N("p95", p.p95).N("p99", p.p99).N("max", p.max).Close();
  return s;
}

std::string DecisionJson(const DecisionRecord& d) {
  std::string s;
  Obj(&s)
      .N("t_s", d.t_s)
      .S("class", d.urgency)
      .B("idle", d.idle)
      .I("band", d.band)
      .I("memory_band", d.memory_band)
      .B("conservative", d.conservative)
      .S("knobs", d.knobs)
      .S("reason", d.reason)
      .Close();
  return s;
}

std::string ChunkJson(const ChunkRecord& c) {
  std::string s;
  Obj o(&s);
  o.N("t_s", c.t_s)
      .I("seq", c.seq)
      .I("tokens", c.tokens)
      .B("terminal", c.terminal)
      .S("status", c.status)
      .S("decision", c.decision)
      .I("band", c.band)
      .N("node_queue_wait_s", c.node_queue_wait_s)
      .N("node_ttft_s", c.node_ttft_s)
      .N("node_tokens_per_s", c.node_tokens_per_s)
      .I("node_tokens_generated", c.node_tokens_generated);
  if (c.has_trace) {
    std::string r, d;
    Obj(&r)
        .S("precision", c.ran_precision)
        .S("isa", c.ran_isa)
        .I("threads", c.ran_threads)
        .I("threads_observed", c.ran_threads_observed)
        .I("tile_gemms", c.ran_tile_gemms)
        .S("gemv_isas", runtime::kernels::IsaTiersText(c.ran_gemv_isas))
        .S("gemm_isas", runtime::kernels::IsaTiersText(c.ran_gemm_isas))
        .Raw("cpus", std::to_string(c.ran_cpus))
        .I("layers_dropped", c.ran_layers_dropped)
        .S("kv", c.ran_kv)
        .I("pin_failures", c.pin_failures)
        .B("isa_refused", c.isa_refused)
        .B("on_fallback", c.on_fallback)
        .Close();
    Obj(&d)
        .S("precision", c.decided_precision)
        .S("isa_max", c.decided_isa)
        .I("threads", c.decided_threads)
        .Raw("cpus", std::to_string(c.decided_cpus))
        .I("layers_dropped", c.decided_layers_dropped)
        .S("kv", c.decided_kv)
        .Close();
    o.Raw("ran", r).Raw("decided", d);
  }
  o.Close();
  return s;
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

std::string JsonString(std::string_view in) {
  std::string s = "\"";
  for (size_t i = 0; i < in.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(in[i]);
    switch (c) {
      case '"': s += "\\\""; break;
      case '\\': s += "\\\\"; break;
      case '\n': s += "\\n"; break;
      case '\t': s += "\\t"; break;
      case '\r': s += "\\r"; break;
      case '/': s += (i > 0 && in[i - 1] == '<') ? "\\/" : "/"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof(b), "\\u%04x", c);
          s += b;
        } else {
          s += static_cast<char>(c);
        }
    }
  }
  return s + "\"";
}

namespace {

std::string SummaryJson(const ReplayReport& r, bool include_wall_time) {
  const ReplaySummary& m = r.summary;
  std::string sum;
  Obj o(&sum);
  o.N("duration_s", m.duration_s)
      .N("busy_s", m.busy_s)
      .N("peak_die_c", m.peak_die_c)
      .N("peak_t_s", m.peak_t_s)
      .N("energy_j", m.energy_j)
      .I("chunks", m.chunks)
      .N("mask_s", m.mask_s)
      .I("masked_tokens", m.masked_tokens)
      .N("quality_loss", m.quality_loss)
      .N("memory_band_time_s", m.memory_band_time_s);
  std::string bands = "{";
  for (size_t i = 0; i < m.band_time_s.size(); ++i) {
    if (i) bands += ',';
    bands += JsonString(i < r.band_names.size() ? r.band_names[i] : std::to_string(i)) + ":" +
             Num(m.band_time_s[i]);
  }
  o.Raw("band_time_s", bands + "}");
  o.Raw("precision_busy_s", "{\"W8A16\":" + Num(m.precision_busy_s[0]) +
                                ",\"W4A8\":" + Num(m.precision_busy_s[1]) + "}");
  o.Raw("precision_tokens", "{\"W8A16\":" + std::to_string(m.precision_tokens[0]) +
                                ",\"W4A8\":" + std::to_string(m.precision_tokens[1]) + "}");
  if (m.reference_tokens > 0) o.I("reference_tokens", m.reference_tokens);
  o.Raw("drop_busy_s", List(m.drop_busy_s, Num));
  o.Raw("drop_tokens", List(m.drop_tokens, [](int64_t x) { return std::to_string(x); }));
  if (m.cap_time_s[0] > 0 || m.cap_time_s[1] > 0) {  // only logs with caps in force
    o.Raw("cap_time_s", "{\"performance\":" + Num(m.cap_time_s[0]) +
                            ",\"efficiency\":" + Num(m.cap_time_s[1]) + "}");
    o.Raw("capped_busy_s", "{\"performance\":" + Num(m.capped_busy_s[0]) +
                               ",\"efficiency\":" + Num(m.capped_busy_s[1]) + "}");
  }
  if (!r.hardware.empty()) {  // hardware profile given: its protection's figures
    o.N("hw_throttle_s", m.hw_throttle_s)
        .N("hw_critical_s", m.hw_critical_s)
        .I("hw_throttle_events", m.hw_throttle_events);
  }
  if (m.parks > 0 || m.resumes > 0) {  // only replays where slot parking happened
    o.I("parks", m.parks).I("resumes", m.resumes).N("park_s", m.park_s);
  }
  if (include_wall_time) o.N("wall_s", m.wall_s);
  o.Close();
  return sum;
}

std::string ClassJson(const ClassReport& c) {
  std::string x;
  Obj(&x)
      .S("class", c.urgency)
      .I("requests", c.requests)
      .I("done", c.done)
      .I("deadline_misses", c.deadline_misses)
      .I("rejected", c.rejected)
      .Raw("ttft_s", PercentilesJson(c.ttft_s))
      .Raw("completion_s", PercentilesJson(c.completion_s))
      .Raw("queue_wait_s", PercentilesJson(c.queue_wait_s))
      .Close();
  return x;
}

std::string RequestJson(const RequestReport& q) {
  std::string x;
  Obj qo(&x);
  qo.I("id", static_cast<int64_t>(q.id))
      .S("class", q.urgency)
      .S("client", q.client)
      .S("category", q.category)
      .N("arrival_s", q.arrival_s)
      .I("prompt_tokens", q.prompt_tokens)
      .I("max_tokens", q.max_tokens)
      .I("tokens", q.tokens)
      .I("chunks", q.chunks)
      .N("deadline_s", q.deadline_s)
      .S("response_format", q.response_format)
      .N("mask_s", q.mask_s)
      .S("status", q.status)
      .S("message", q.message)
      .N("queue_wait_s", q.queue_wait_s)
      .N("ttft_s", q.ttft_s)
      .N("completion_s", q.completion_s)
      .B("deadline_missed", q.deadline_missed)
      .Raw("decisions", List(q.decisions, DecisionJson));
  if (!q.chunk_log.empty()) qo.Raw("chunk_log", List(q.chunk_log, ChunkJson));  // live only
  qo.Close();
  return x;
}

}  // namespace

std::string ReportToJson(const ReplayReport& r, bool include_wall_time) {
  const std::string sum = SummaryJson(r, include_wall_time);
  std::string s;
  Obj o(&s);
  o.S("format", "ari-sim-report-1").S("mode", r.mode);
  if (r.mode != "model") o.N("time_scale", r.time_scale);
  o.S("log", r.log_name)
      .S("scenario", r.scenario)
      .S("policy", r.policy_name)
      .S("cost_model", r.cost_source);
  if (!r.hardware.empty()) o.S("hardware", r.hardware);
  o.Raw("bands", List(r.band_names, [](const std::string& b) { return JsonString(b); }))
      .Raw("summary", sum);
  o.Raw("classes", List(r.classes, ClassJson));
  o.Raw("requests", List(r.requests, RequestJson));
  o.Raw("samples", List(r.samples, [](const Sample& p) {
          char b[160];
          std::snprintf(b, sizeof(b), "[%.6g,%.6g,%.6g,%.6g,%.6g,%d]", p.t_s, p.die_c, p.ambient_c,
                        p.power_w, p.busy, p.band);
          return std::string(b);
        }));
  o.Raw("sample_fields", "[\"t_s\",\"die_c\",\"ambient_c\",\"power_w\",\"busy\",\"band\"]");
  o.Raw("decisions", List(r.decisions, DecisionJson));
  o.Close();
  return s + "\n";
}

std::string ReportToText(const ReplayReport& r) {
  std::string s;
  char b[256];
  const ReplaySummary& m = r.summary;
  std::snprintf(
      b, sizeof(b), "replay %s (%s), policy %s: %.0f s virtual, %lld chunks, busy %.1f %%\n",
      r.log_name.c_str(), r.scenario.c_str(), r.policy_name.c_str(), m.duration_s,
      static_cast<long long>(m.chunks), m.duration_s > 0 ? 100 * m.busy_s / m.duration_s : 0);
  s += b;
  if (m.parks > 0 || m.resumes > 0) {
    std::snprintf(b, sizeof(b), "slot parking: %lld turns parked, %lld resumed, %.3f s\n",
                  static_cast<long long>(m.parks), static_cast<long long>(m.resumes), m.park_s);
    s += b;
  }
  s +=
      "class        reqs  done  miss  rej   TTFT p50/p95/p99 (s)      completion p50/p95/p99 (s)\n";
  for (const ClassReport& c : r.classes) {
    std::snprintf(
        b, sizeof(b), "%-11s %5d %5d %5d %4d   %6.2f %6.2f %6.2f      %7.2f %7.2f %7.2f\n",
        c.urgency.c_str(), c.requests, c.done, c.deadline_misses, c.rejected, c.ttft_s.p50,
        c.ttft_s.p95, c.ttft_s.p99, c.completion_s.p50, c.completion_s.p95, c.completion_s.p99);
    s += b;
  }
  std::snprintf(b, sizeof(b),
                "peak die %.2f C at %.0f s, energy %.0f J (mean %.2f W), quality loss %.3f\n",
                m.peak_die_c, m.peak_t_s, m.energy_j,
                m.duration_s > 0 ? m.energy_j / m.duration_s : 0, m.quality_loss);
  s += b;
  s += "time per band:";
  for (size_t i = 0; i < m.band_time_s.size(); ++i) {
    std::snprintf(b, sizeof(b), " %s %.0f s",
                  i < r.band_names.size() ? r.band_names[i].c_str() : "?", m.band_time_s[i]);
    s += b;
  }
  std::snprintf(b, sizeof(b), "\ncompute per precision: W8A16 %.1f s, W4A8 %.1f s; per drop level:",
                m.precision_busy_s[0], m.precision_busy_s[1]);
  s += b;
  for (size_t d = 0; d < m.drop_busy_s.size(); ++d) {
    if (m.drop_busy_s[d] <= 0) continue;
    std::snprintf(b, sizeof(b), " %zu: %.1f s", d, m.drop_busy_s[d]);
    s += b;
  }
  std::snprintf(b, sizeof(b), "; memory band active %.0f s\n", m.memory_band_time_s);
  s += b;
  if (!r.hardware.empty()) {
    std::snprintf(b, sizeof(b),
                  "hardware %s: throttled (trip) %.0f s, at the critical trip %.0f s, %d trips\n",
                  r.hardware.c_str(), m.hw_throttle_s, m.hw_critical_s, m.hw_throttle_events);
    s += b;
  }
  if (m.cap_time_s[0] > 0 || m.cap_time_s[1] > 0) {
    std::snprintf(b, sizeof(b),
                  "time capped: performance %.0f s (compute slowed %.1f s), efficiency %.0f s "
                  "(compute slowed %.1f s)\n",
                  m.cap_time_s[0], m.capped_busy_s[0], m.cap_time_s[1], m.capped_busy_s[1]);
    s += b;
  }
  return s;
}

}  // namespace ari::sim
