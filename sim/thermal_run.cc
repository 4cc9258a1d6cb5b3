// Closed-loop thermal run; see thermal_run.h.
#include "sim/thermal_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <utility>

#include "qos/scheduler.h"
#include "thermal/clock.h"

namespace ari::sim {

using qos::ChunkEvent;
using qos::ChunkSink;
using qos::CoreClassName;
using qos::Decision;
using qos::Policy;
using qos::PrecisionName;
using qos::Rank;
using qos::SchedRequest;
using qos::Scheduler;
using qos::SchedulerOptions;
using qos::StepResult;
using qos::TerminalEvent;
using qos::TerminalStatus;
using qos::Urgency;
using qos::UrgencyName;

namespace {

constexpr int64_t kIdlePollNs = 100 * thermal::kNsPerMs;  // longest virtual gap per step

bool AllIn(uint64_t mask, const std::vector<int>& cpus) {
  if (mask == 0 || cpus.empty()) return false;
  uint64_t set = 0;
  for (int c : cpus) {
    if (c >= 0 && c < 64) set |= uint64_t{1} << c;
  }
  return (mask & ~set) == 0;
}

// Runs the real engine, then moves virtual time by the compute time it reports, with
// the RC model heated over that interval by the chunk's cores and precision.
class HeatingRunner final : public runtime::ChunkRunner {
 public:
  HeatingRunner(runtime::ChunkRunner& inner, thermal::ManualClock& clock,
                thermal::RcModelSource& source, const thermal::CpuTopology& topology)
      : inner_(inner), clock_(clock), source_(source), topology_(topology) {}

  int32_t num_slots() const override { return inner_.num_slots(); }
  runtime::Result<void> StartTurn(int32_t slot, const runtime::TurnSpec& turn) override {
    return inner_.StartTurn(slot, turn);
  }
  runtime::Result<runtime::ChunkResult> RunChunk(int32_t slot,
                                                 const runtime::ChunkKnobs& k) override {
    auto r = inner_.RunChunk(slot, k);
    if (!r) return r;
    thermal::RcLoad busy;
    busy.busy_fraction = 1.0;
    busy.active_cores = std::max(1, k.threads);
    busy.precision = k.precision == runtime::Precision::kW4A8 ? thermal::PowerPrecision::kW4A8
                                                              : thermal::PowerPrecision::kW8A16;
    busy.core_class = AllIn(k.cpu_mask, topology_.efficiency) ? thermal::CoreClass::kEfficiency
                                                              : thermal::CoreClass::kPerformance;
    source_.SetLoad(busy);  // the model catches up to now with the previous (idle) load
    const int64_t dt = std::max<int64_t>(r->compute_ns, 1000);
    clock_.AdvanceNs(dt);
    source_.SetLoad(thermal::RcLoad{});  // heats over the chunk; idle from here on
    busy_ns_ += dt;
    ++chunks_;
    return r;
  }

  int64_t busy_ns() const { return busy_ns_; }
  int64_t chunks() const { return chunks_; }

 private:
  runtime::ChunkRunner& inner_;
  thermal::ManualClock& clock_;
  thermal::RcModelSource& source_;
  const thermal::CpuTopology& topology_;
  int64_t busy_ns_ = 0;
  int64_t chunks_ = 0;
};

class RunSink final : public ChunkSink {
 public:
  RunSink(const Policy& policy, const thermal::RcModelSource& source, ThermalRunResult& out)
      : policy_(policy), source_(source), out_(out) {}
  void OnChunk(const ChunkEvent&) override {}
  void OnTerminal(const TerminalEvent& t) override {
    // Ids: odd = NORMAL, even = CRITICAL (see RunThermal).
    if (t.status == TerminalStatus::kShutdown) {
      ++out_.unfinished;  // still live when the run ended
    } else if (t.status != TerminalStatus::kDone) {
      ++out_.other_terminals;
    } else if (t.id % 2 == 0) {
      ++out_.critical_done;
    } else {
      ++out_.normal_done;
    }
  }
  void OnDecision(const Decision& d, int64_t now_ns) override {
    ThermalRunRow row;
    row.t_s = thermal::NsToSeconds(now_ns);
    row.die_c = source_.model().die_celsius();
    row.ambient_c = source_.model().ambient_celsius();
    row.band = policy_.thermal_bands[static_cast<size_t>(d.thermal_band)].name;
    row.urgency = d.urgency;
    row.idle = d.idle;
    row.conservative = d.conservative;
    row.band_changed = last_band_ >= 0 && d.thermal_band != last_band_;
    if (row.band_changed) ++out_.band_changes;
    last_band_ = d.thermal_band;
    row.knobs = d.knobs;
    row.reason.assign(d.Reason());
    out_.rows.push_back(std::move(row));
  }

 private:
  const Policy& policy_;
  const thermal::RcModelSource& source_;
  ThermalRunResult& out_;
  int last_band_ = -1;
};

SchedRequest MakeReq(uint64_t id, Urgency u, int32_t len, int32_t vocab, int32_t max_tokens) {
  SchedRequest r;
  r.id = id;
  r.urgency = u;
  r.max_tokens = max_tokens;
  r.prompt.resize(static_cast<size_t>(len));
  for (int32_t i = 0; i < len; ++i) {
    r.prompt[static_cast<size_t>(i)] = static_cast<runtime::TokenId>(
        1 + (static_cast<int64_t>(i) * 37 + static_cast<int64_t>(id)) % (vocab - 1));
  }
  return r;
}

double AmbientAt(const ThermalRunOptions& o, double t_s) {
  const double half = o.duration_s / 2.0;
  const double x = t_s <= half ? t_s / half : std::max(0.0, (o.duration_s - t_s) / half);
  return o.ambient_c + (o.ambient_peak_c - o.ambient_c) * std::clamp(x, 0.0, 1.0);
}

Result<void> ValidateOptions(const ThermalRunOptions& o) {
  if (!o.policy || !o.engine) {
    return MakeError(ErrorCode::kInvalidArgument, "thermal run: policy and engine are required");
  }
  if (o.engine->num_slots() < 2) {
    return MakeError(ErrorCode::kInvalidArgument, "thermal run: the engine needs >= 2 slots");
  }
  if (!(o.speedup >= 1.0) || !(o.duration_s > 0.0) || o.vocab_size < 2 || o.normal_prompt < 1 ||
      o.critical_prompt < 1 || o.normal_max_tokens < 1 || o.critical_max_tokens < 1 ||
      !(o.critical_every_s >= 0.0) || !std::isfinite(o.ambient_c) ||
      !std::isfinite(o.ambient_peak_c)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "thermal run: need speedup >= 1, duration > 0, vocab >= 2, prompts and "
                     "max tokens >= 1, critical_every_s >= 0, finite ambients");
  }
  return {};
}

// The RC model's parameters with its capacities divided by the speedup.
thermal::RcParams SpedUpParams(const ThermalRunOptions& o) {
  thermal::RcParams p = o.rc;
  p.c_die_j_per_k /= o.speedup;
  p.c_pkg_j_per_k /= o.speedup;
  p.ambient_celsius = o.ambient_c;
  p.initial_celsius = o.initial_c.value_or(o.ambient_c);
  return p;
}

Result<thermal::CpuTopology> RunTopology(const ThermalRunOptions& o) {
  if (o.topology) return *o.topology;
  auto detected = thermal::DetectTopology();
  if (!detected) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "thermal run: CPU topology: " + detected.error().message);
  }
  return std::move(*detected);
}

// The load: a NORMAL request whenever none is queued, a CRITICAL one every
// critical_every_s; steps the scheduler in virtual time until the run's end. Returns
// the highest die temperature seen.
Result<double> DriveLoad(const ThermalRunOptions& o, Scheduler& s, thermal::ManualClock& clock,
                         thermal::RcModelSource& source) {
  const int64_t end = thermal::SecondsToNs(o.duration_s);
  const int64_t critical_period =
      o.critical_every_s > 0 ? thermal::SecondsToNs(o.critical_every_s) : 0;
  int64_t next_critical =
      critical_period > 0 ? critical_period / 2 : std::numeric_limits<int64_t>::max();
  uint64_t next_normal_id = 1, next_critical_id = 2;
  double max_die = source.model().die_celsius();
  while (clock.NowNs() < end) {
    const int64_t t = clock.NowNs();
    if (auto a = source.SetAmbient(AmbientAt(o, thermal::NsToSeconds(t))); !a) {
      return MakeError(ErrorCode::kInvalidArgument, a.error().message);
    }
    if (s.QueueDepths()[static_cast<size_t>(Rank(Urgency::kNormal))] == 0) {
      s.Submit(MakeReq(next_normal_id, Urgency::kNormal, o.normal_prompt, o.vocab_size,
                       o.normal_max_tokens));
      next_normal_id += 2;
    }
    if (t >= next_critical) {
      s.Submit(MakeReq(next_critical_id, Urgency::kCritical, o.critical_prompt, o.vocab_size,
                       o.critical_max_tokens));
      next_critical_id += 2;
      next_critical += critical_period;
    }
    const StepResult r = s.Step();  // a chunk advances the clock by its compute time
    const int64_t now = clock.NowNs();
    int64_t target = std::min(r.next_step_ns, now + kIdlePollNs);
    if (next_critical > now) target = std::min(target, next_critical);
    if (!r.ran) target = std::max(target, now + thermal::kNsPerMs);  // always progress
    if (target > now) clock.SetNs(std::min(target, std::max(end, now)));
    source.AdvanceToNow();
    max_die = std::max(max_die, source.model().die_celsius());
    if (!r.ran && clock.NowNs() == now) break;  // cannot progress (end reached)
  }
  return max_die;
}

}  // namespace

Result<ThermalRunResult> RunThermal(const ThermalRunOptions& o) {
  if (auto v = ValidateOptions(o); !v) return std::unexpected(v.error());
  auto model = thermal::RcModel::Create(SpedUpParams(o));
  if (!model) {
    return MakeError(ErrorCode::kInvalidArgument, "thermal run: " + model.error().message);
  }
  auto topology = RunTopology(o);
  if (!topology) return std::unexpected(topology.error());
  const thermal::CpuTopology topo = std::move(*topology);

  ThermalRunResult out;
  out.duration_s = o.duration_s;
  out.speedup = o.speedup;
  out.slow_tau_s = model->slow_time_constant_s();
  out.fast_tau_s = model->fast_time_constant_s();
  thermal::ManualClock clock;
  thermal::RcModelSource source(*model, clock);
  HeatingRunner runner(*o.engine, clock, source, topo);
  RunSink sink(*o.policy, source, out);

  SchedulerOptions so;
  so.policy = o.policy;
  so.engine = &runner;
  so.clock = &clock;
  so.sink = &sink;
  so.temperature = &source;
  so.topology = topo;
  so.max_prefill_chunk = o.max_prefill_chunk;
  auto sched = Scheduler::Create(std::move(so));
  if (!sched) return MakeError(ErrorCode::kInvalidArgument, sched.error().message);
  Scheduler& s = **sched;

  const Result<double> max_die = DriveLoad(o, s, clock, source);
  s.Shutdown("thermal run over");
  if (!max_die) return MakeError(max_die.error().code, "thermal run: " + max_die.error().message);
  out.max_die_c = *max_die;
  out.final_die_c = source.model().die_celsius();
  out.chunks = runner.chunks();
  const double virt = thermal::NsToSeconds(std::max<int64_t>(clock.NowNs(), 1));
  out.busy_fraction = thermal::NsToSeconds(runner.busy_ns()) / virt;
  return out;
}

std::string ThermalRunTable(const ThermalRunResult& r) {
  std::string s;
  char line[768];
  s += "    time    die  ambient  band      class       prec   cores    chunk  pause  drop  "
       "reason\n";
  for (const ThermalRunRow& row : r.rows) {
    std::snprintf(line, sizeof(line),
                  "%7.2fs %6.2fC %6.2fC  %-8s  %-10s  %-5s  %-4s x%-2u %4u/%-3u %4ums  %4u  "
                  "%s%s\n",
                  row.t_s, row.die_c, row.ambient_c, row.band.c_str(),
                  row.idle ? "(idle)" : std::string(UrgencyName(row.urgency)).c_str(),
                  std::string(PrecisionName(row.knobs.precision)).c_str(),
                  std::string(CoreClassName(row.knobs.core_class)).substr(0, 4).c_str(),
                  row.knobs.threads, row.knobs.prefill_chunk, row.knobs.decode_tokens_per_chunk,
                  row.knobs.pause_ms, row.knobs.layer_drop, row.band_changed ? "** " : "",
                  row.reason.c_str());
    s += line;
  }
  std::snprintf(line, sizeof(line),
                "thermal: %.1f s virtual (RC speedup x%.0f: time constants %.2f s / %.2f s), "
                "%zu decisions, %d band changes, die max %.2f C, final %.2f C, busy %.0f %%, "
                "%lld chunks, done CRITICAL %d NORMAL %d, other terminals %d, live at end %d\n",
                r.duration_s, r.speedup, r.slow_tau_s, r.fast_tau_s, r.rows.size(), r.band_changes,
                r.max_die_c, r.final_die_c, 100.0 * r.busy_fraction,
                static_cast<long long>(r.chunks), r.critical_done, r.normal_done, r.other_terminals,
                r.unfinished);
  s += line;
  return s;
}

namespace {
void JsonString(std::string& out, std::string_view v) {
  out += '"';
  for (char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", static_cast<unsigned>(c));
      out += esc;
    } else {
      out += c;
    }
  }
  out += '"';
}
}  // namespace

std::string ThermalRunJson(const ThermalRunResult& r) {
  std::string s;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "{\"scenario\":\"thermal\",\"duration_s\":%.3f,\"speedup\":%.3f,"
                "\"slow_tau_s\":%.4f,\"fast_tau_s\":%.4f,\"band_changes\":%d,"
                "\"max_die_c\":%.3f,\"final_die_c\":%.3f,\"busy_fraction\":%.4f,"
                "\"chunks\":%lld,\"critical_done\":%d,\"normal_done\":%d,"
                "\"other_terminals\":%d,\"unfinished\":%d,\"rows\":[",
                r.duration_s, r.speedup, r.slow_tau_s, r.fast_tau_s, r.band_changes, r.max_die_c,
                r.final_die_c, r.busy_fraction, static_cast<long long>(r.chunks), r.critical_done,
                r.normal_done, r.other_terminals, r.unfinished);
  s += buf;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const ThermalRunRow& row = r.rows[i];
    std::snprintf(buf, sizeof(buf),
                  "%s{\"t_s\":%.4f,\"die_c\":%.3f,\"ambient_c\":%.3f,\"band\":", i ? "," : "",
                  row.t_s, row.die_c, row.ambient_c);
    s += buf;
    JsonString(s, row.band);
    std::snprintf(buf, sizeof(buf),
                  ",\"class\":\"%s\",\"idle\":%s,\"conservative\":%s,\"band_changed\":%s,"
                  "\"precision\":\"%s\",\"core_class\":\"%s\",\"threads\":%u,"
                  "\"prefill_chunk\":%u,\"decode_tokens\":%u,\"pause_ms\":%u,"
                  "\"layer_drop\":%u,\"reason\":",
                  std::string(UrgencyName(row.urgency)).c_str(), row.idle ? "true" : "false",
                  row.conservative ? "true" : "false", row.band_changed ? "true" : "false",
                  std::string(PrecisionName(row.knobs.precision)).c_str(),
                  std::string(CoreClassName(row.knobs.core_class)).c_str(), row.knobs.threads,
                  row.knobs.prefill_chunk, row.knobs.decode_tokens_per_chunk, row.knobs.pause_ms,
                  row.knobs.layer_drop);
    s += buf;
    JsonString(s, row.reason);
    s += '}';
  }
  s += "]}\n";
  return s;
}

}  // namespace ari::sim
