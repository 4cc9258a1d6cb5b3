// Model-mode replay; see replay.h.
#include "sim/replay.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <unordered_map>

#include "qos/scheduler.h"
#include "sim/scenarios.h"
#include "sim/sim_engine.h"

namespace ari::sim {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr int64_t kDrainLimitNs = 24 * 3600 * thermal::kNsPerSecond;

int64_t MsToNs(uint64_t ms) { return static_cast<int64_t>(ms) * thermal::kNsPerMs; }
double NsToS(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

int PromptTokens(const std::string& prompt) {
  return static_cast<int>((prompt.size() + 3) / 4) + 8;
}

// Everything the scheduler's callbacks and the engine observer feed into.
class Recorder final : public qos::ChunkSink, public ChunkObserver {
 public:
  Recorder(const ReplayOptions& o, thermal::ManualClock& clock, thermal::RcModelSource& rc,
           const thermal::CpuTopology& topo, ReplayReport& report)
      : o_(o), clock_(clock), rc_(rc), report_(report) {
    for (int c : topo.efficiency) eff_mask_ |= uint64_t{1} << c;
    const size_t nb = o.policy->thermal_bands.size();
    report_.summary.band_time_s.assign(nb, 0.0);
    report_.summary.drop_busy_s.assign(1, 0.0);
    report_.summary.drop_tokens.assign(1, 0);
    idle_power_w_ = rc_.model().PowerW(thermal::RcLoad{});
    power_w_ = idle_power_w_;
    last_power_ns_ = clock_.NowNs();
  }

  uint64_t efficiency_mask() const { return eff_mask_; }
  std::unordered_map<uint64_t, size_t> index;  // request id -> report_.requests index
  std::vector<int64_t> submit_ns, arrival_ns;   // by index

  // --- ChunkObserver: the RC load follows the chunks.
  void OnChunkBegin(const runtime::ChunkKnobs& k, runtime::ChunkPhase phase, int tokens,
                    double seconds, bool eff, uint32_t cap_khz) override {
    thermal::RcLoad load;
    load.busy_fraction = 1.0;
    load.active_cores = std::max(1, k.threads);
    load.precision = k.precision == runtime::Precision::kW4A8 ? thermal::PowerPrecision::kW4A8
                                                               : thermal::PowerPrecision::kW8A16;
    load.core_class = eff ? thermal::CoreClass::kEfficiency : thermal::CoreClass::kPerformance;
    AccountPower();
    rc_.SetLoad(load);
    power_w_ = rc_.model().PowerW(load);
    ReplaySummary& s = report_.summary;
    const int p = k.precision == runtime::Precision::kW4A8 ? 1 : 0;
    s.precision_busy_s[p] += seconds;
    s.precision_tokens[p] += tokens;
    const size_t d = static_cast<size_t>(std::max(0, k.layer_drop));
    if (s.drop_busy_s.size() <= d) {
      s.drop_busy_s.resize(d + 1, 0.0);
      s.drop_tokens.resize(d + 1, 0);
    }
    s.drop_busy_s[d] += seconds;
    s.drop_tokens[d] += tokens;
    s.busy_s += seconds;
    ++s.chunks;
    if (cap_khz != 0 && o_.cost->FrequencyFactor(phase, eff, cap_khz) != 1.0) {
      s.capped_busy_s[eff ? 1 : 0] += seconds;
    }
    if (o_.on_chunk) {
      ChunkTrace t;
      t.t_s = NsToS(clock_.NowNs());
      t.knobs = k;
      t.phase = phase;
      t.tokens = tokens;
      t.seconds = seconds;
      t.efficiency = eff;
      t.cap_khz = cap_khz;
      o_.on_chunk(t);
    }
    in_chunk_ = true;
    chunk_end_ns_ = clock_.NowNs() + std::max<int64_t>(1, thermal::SecondsToNs(seconds));
  }
  void OnChunkEnd() override {
    in_chunk_ = false;
    AccountPower();
    rc_.SetLoad(thermal::RcLoad{});
    power_w_ = idle_power_w_;
    Peak();
  }

  // Energy: integral of the constant power since the last change.
  void AccountPower() {
    const int64_t now = clock_.NowNs();
    report_.summary.energy_j += power_w_ * NsToS(now - last_power_ns_);
    last_power_ns_ = now;
  }
  void Peak() {
    rc_.AdvanceToNow();
    const double t = rc_.model().die_celsius();
    if (t > report_.summary.peak_die_c) {
      report_.summary.peak_die_c = t;
      report_.summary.peak_t_s = NsToS(clock_.NowNs());
    }
  }
  // Frequency caps in force from now on ([0] performance, [1] efficiency).
  void SetCaps(const std::array<uint32_t, 2>& caps) {
    AccountCaps();
    caps_ = caps;
  }
  void AccountCaps() {
    const int64_t now = clock_.NowNs();
    for (size_t c = 0; c < 2; ++c) {
      if (caps_[c] != 0) report_.summary.cap_time_s[c] += NsToS(now - last_cap_ns_);
    }
    last_cap_ns_ = now;
  }
  // Band and memory-band time up to now.
  void AccountBands() {
    const int64_t now = clock_.NowNs();
    const double dt = NsToS(now - last_band_ns_);
    report_.summary.band_time_s[static_cast<size_t>(band_)] += dt;
    if (memory_band_ >= 0) report_.summary.memory_band_time_s += dt;
    last_band_ns_ = now;
  }

  // --- Timeline samples every sample period (also inside chunks).
  int64_t NextTickNs() const override { return next_sample_; }
  void OnTick() override {
    if (clock_.NowNs() >= next_sample_) TakeSample();
  }
  int64_t next_sample() const { return next_sample_; }
  void TakeSample() {
    const int64_t now = clock_.NowNs();
    Peak();
    AccountBands();
    AccountPower();
    if (o_.record_samples) {
      Sample sm;
      sm.t_s = NsToS(now);
      sm.die_c = rc_.model().die_celsius();
      sm.ambient_c = rc_.model().ambient_celsius();
      sm.power_w = power_w_;
      sm.band = band_;
      const double span = NsToS(now - last_sample_ns_);
      // Busy share since the last sample; a chunk in progress counts up to now.
      double busy = report_.summary.busy_s - busy_at_sample_;
      if (in_chunk_) busy -= NsToS(chunk_end_ns_ - now);
      sm.busy = span > 0 ? std::clamp(busy / span, 0.0, 1.0) : 0;
      report_.samples.push_back(sm);
      busy_at_sample_ = report_.summary.busy_s - (in_chunk_ ? NsToS(chunk_end_ns_ - now) : 0.0);
    }
    last_sample_ns_ = now;
    const int64_t period = o_.sample_period_ms * thermal::kNsPerMs;
    while (next_sample_ <= now) next_sample_ += period;
  }

  // --- ChunkSink
  void OnChunk(const qos::ChunkEvent&) override {}
  void OnTerminal(const qos::TerminalEvent& t) override {
    auto it = index.find(t.id);
    if (it == index.end()) return;
    RequestReport& r = report_.requests[it->second];
    const int64_t sub = submit_ns[it->second], arr = arrival_ns[it->second];
    r.status = std::string(qos::TerminalStatusName(t.status));
    r.message = std::string(t.message);
    r.tokens = t.tokens_generated;
    if (t.queue_wait_ns >= 0) r.queue_wait_s = NsToS(sub + t.queue_wait_ns - arr);
    if (t.first_token_ns >= 0) r.ttft_s = NsToS(sub + t.first_token_ns - arr);
    r.completion_s = NsToS(clock_.NowNs() - arr);
    r.deadline_missed = t.status != qos::TerminalStatus::kDone || t.deadline_missed ||
                        (r.deadline_s > 0 && r.completion_s > r.deadline_s + 1e-9);
  }
  void OnDecision(const qos::Decision& d, int64_t now_ns) override {
    AccountBands();
    band_ = d.thermal_band;
    memory_band_ = d.memory_band;
    last_reason_.assign(d.Reason());
    if (o_.record_decisions) report_.decisions.push_back(Record(d, now_ns));
  }
  void OnStep(const qos::StepInfo& s) override {
    auto it = index.find(s.id);
    if (it == index.end()) return;
    RequestReport& r = report_.requests[it->second];
    ++r.chunks;
    if (!o_.record_decisions) return;
    char buf[200];
    const qos::Decision& d = *last_decision_;
    qos::FormatKnobs(d.knobs, buf, sizeof(buf));
    if (r.decisions.empty() || r.decisions.back().knobs != buf ||
        r.decisions.back().band != d.thermal_band) {
      r.decisions.push_back(Record(d, s.start_ns));
    }
  }

  DecisionRecord Record(const qos::Decision& d, int64_t now_ns) const {
    DecisionRecord rec;
    rec.t_s = NsToS(now_ns);
    rec.urgency = std::string(qos::UrgencyName(d.urgency));
    rec.idle = d.idle;
    rec.band = d.thermal_band;
    rec.memory_band = d.memory_band;
    rec.conservative = d.conservative;
    rec.knobs = qos::KnobsToString(d.knobs);
    rec.reason = std::string(d.Reason());
    return rec;
  }

  const qos::Decision* last_decision_ = nullptr;
  int band() const { return band_; }
  double power_w() const { return power_w_; }

 private:
  const ReplayOptions& o_;
  thermal::ManualClock& clock_;
  thermal::RcModelSource& rc_;
  ReplayReport& report_;
  uint64_t eff_mask_ = 0;
  double idle_power_w_ = 0, power_w_ = 0;
  int64_t last_power_ns_ = 0, last_band_ns_ = 0, last_cap_ns_ = 0;
  std::array<uint32_t, 2> caps_{};
  int band_ = 0, memory_band_ = -1;
  std::string last_reason_;
  int64_t next_sample_ = 0, last_sample_ns_ = 0, chunk_end_ns_ = 0;
  double busy_at_sample_ = 0;
  bool in_chunk_ = false;
};

// Caps per class ([0] performance, [1] efficiency) of one cpu_frequency_cap event; see
// replay.h for the cluster -> class mapping.
std::array<uint32_t, 2> ClassCaps(const dl::CpuFrequencyCap& event) {
  std::array<uint32_t, 2> caps{};
  for (const dl::ClusterCap& c : event.clusters()) {
    std::string name = c.name();
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    bool eff = c.cluster() == 0;
    if (name == "big" || name == "prime" || name == "performance") eff = false;
    if (name == "little" || name == "efficiency") eff = true;
    uint32_t& cap = caps[eff ? 1 : 0];
    if (c.max_khz() != 0 && (cap == 0 || c.max_khz() < cap)) cap = c.max_khz();
  }
  return caps;
}

thermal::CpuTopology SimTopology(int perf, int eff) {
  thermal::CpuTopology t;
  for (int i = 0; i < perf + eff; ++i) {
    const auto c = i < perf ? thermal::CoreClass::kPerformance : thermal::CoreClass::kEfficiency;
    t.cpus.push_back(thermal::CpuInfo{i, c, 0, 0});
    (i < perf ? t.performance : t.efficiency).push_back(i);
  }
  t.basis = thermal::TopologyBasis::kConfig;
  return t;
}

}  // namespace

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

Result<ReplayReport> ReplayModel(const dl::DriveLog& log, const ReplayOptions& o) {
  const auto wall0 = std::chrono::steady_clock::now();
  if (!o.policy || !o.cost) {
    return MakeError(ErrorCode::kInvalidArgument, "replay: policy and cost model are required");
  }
  if (o.sample_period_ms < 1 || o.slots < 1 || o.performance_cpus + o.efficiency_cpus < 1 ||
      o.performance_cpus + o.efficiency_cpus > 64) {
    return MakeError(ErrorCode::kInvalidArgument, "replay: bad slots/CPUs/sample period");
  }
  ReplayReport report;
  report.scenario = log.header().scenario();
  report.policy_name = o.policy->name;
  report.cost_source = o.cost->source;
  for (const auto& b : o.policy->thermal_bands) {
    report.band_names.push_back(b.name);
    report.band_enter_c.push_back(b.enter_c);
  }

  // The RC model starts at the log's first SoC temperature and ambient.
  thermal::RcParams rc = o.rc;
  rc.ambient_celsius = log.header().ambient_celsius();
  rc.idle_power_w = o.base_power_w >= 0 ? o.base_power_w
                    : !log.header().scenario().empty() ? ScenarioBasePowerW(log.header().scenario())
                                                     : o.rc.idle_power_w;
  rc.initial_celsius = rc.ambient_celsius;
  for (const auto& e : log.event()) {
    if (e.has_soc_temperature()) {
      rc.initial_celsius = e.soc_temperature().celsius();
      break;
    }
  }
  auto model = thermal::RcModel::Create(rc);
  if (!model) return MakeError(ErrorCode::kInvalidArgument, "replay: RC model: " + model.error().message);
  thermal::ManualClock clock(0);
  thermal::RcModelSource source(std::move(*model), clock);
  const thermal::CpuTopology topo = SimTopology(o.performance_cpus, o.efficiency_cpus);
  Recorder rec(o, clock, source, topo, report);
  SimEngine engine(*o.cost, clock, o.slots, rec.efficiency_mask(), &rec);

  std::optional<uint64_t> mem_bytes;
  qos::SchedulerOptions so;
  so.policy = o.policy;
  so.engine = &engine;
  so.clock = &clock;
  so.sink = &rec;
  so.temperature = &source;
  so.topology = topo;
  so.max_prefill_chunk = o.max_prefill_chunk;
  so.memory = [&mem_bytes]() -> std::optional<thermal::MemoryReading> {
    if (!mem_bytes) return std::nullopt;
    thermal::MemoryReading m;
    m.available_bytes = *mem_bytes;
    m.system_available_bytes = *mem_bytes;
    return m;
  };
  auto sched = qos::Scheduler::Create(so);
  if (!sched) return MakeError(ErrorCode::kInvalidArgument, "replay: scheduler: " + sched.error().message);
  qos::Scheduler& s = **sched;
  rec.last_decision_ = &s.last_decision();

  const auto& events = log.event();
  int64_t end_ns = MsToNs(log.header().duration_ms());
  if (!events.empty()) end_ns = std::max(end_ns, MsToNs(events[events.size() - 1].t_ms()));
  int next_event = 0;

  auto apply_events = [&](int64_t now) {
    while (next_event < events.size() && MsToNs(events[next_event].t_ms()) <= now) {
      const dl::Event& e = events[next_event++];
      if (e.has_ambient_temperature()) {
        (void)source.SetAmbient(e.ambient_temperature().celsius());
      } else if (e.has_memory_available()) {
        mem_bytes = e.memory_available().bytes();
      } else if (e.has_cpu_frequency_cap()) {
        const std::array<uint32_t, 2> caps = ClassCaps(e.cpu_frequency_cap());
        engine.SetFrequencyCaps(caps[0], caps[1]);
        rec.SetCaps(caps);
      } else if (e.has_request()) {
        const dl::Request& q = e.request();
        RequestReport r;
        r.id = q.request_id();
        const int rank = std::clamp(static_cast<int>(q.urgency()) - 1, 0, qos::kNumUrgencies - 1);
        const qos::Urgency u = qos::UrgencyFromRank(rank);
        r.urgency = std::string(qos::UrgencyName(u));
        r.client = q.client();
        r.category = dl::PromptCategory_Name(q.category());
        r.arrival_s = NsToS(MsToNs(e.t_ms()));
        r.prompt_tokens = o.prompt_tokens ? std::max(1, o.prompt_tokens(q.prompt())) : PromptTokens(q.prompt());
        r.max_tokens = static_cast<int>(q.max_tokens());
        const uint32_t dms = q.deadline_ms() ? q.deadline_ms() : o.policy->Class(u).default_deadline_ms;
        r.deadline_s = dms * 1e-3;
        qos::SchedRequest sr;
        sr.id = q.request_id();
        sr.urgency = u;
        sr.prompt.assign(static_cast<size_t>(r.prompt_tokens), 1);
        sr.max_tokens = static_cast<int32_t>(q.max_tokens());
        sr.deadline_ns = dms ? MsToNs(e.t_ms()) + int64_t{dms} * thermal::kNsPerMs : 0;
        sr.session_id = q.session_id();
        const size_t idx = report.requests.size();
        rec.index[r.id] = idx;
        rec.submit_ns.push_back(now);
        rec.arrival_ns.push_back(MsToNs(e.t_ms()));
        report.requests.push_back(std::move(r));
        const qos::SubmitStatus st = s.Submit(std::move(sr));
        if (st != qos::SubmitStatus::kAdmitted) {
          RequestReport& rr = report.requests[idx];
          rr.status = std::string(qos::SubmitStatusName(st));
          rr.message = "refused at admission";
          rr.completion_s = NsToS(now - rec.arrival_ns[idx]);
          rr.deadline_missed = true;
        }
      }
    }
  };

  while (true) {
    int64_t now = clock.NowNs();
    apply_events(now);
    // Samples on the grid (inside chunks the engine's ticks take them). The loop wakes
    // at every sample time, so the governor is also stepped while idle.
    if (now >= rec.next_sample()) rec.TakeSample();
    const qos::StepResult st = s.Step();
    if (st.ran) rec.Peak();
    now = clock.NowNs();
    const bool events_left = next_event < events.size();
    if (!events_left && now >= end_ns && s.live_requests() == 0) break;
    if (now > end_ns + kDrainLimitNs) break;  // still busy a day after the log: give up
    if (st.ran && st.next_step_ns <= now) continue;
    int64_t next = std::min(st.next_step_ns, rec.next_sample());
    if (events_left) next = std::min(next, MsToNs(events[next_event].t_ms()));
    if (next == kNever) break;
    clock.SetNs(std::max(next, now + thermal::kNsPerMs / 1000));
  }
  rec.AccountBands();
  rec.AccountPower();
  rec.AccountCaps();
  s.Shutdown("replay over");

  // Summary and per class.
  ReplaySummary& sum = report.summary;
  sum.duration_s = NsToS(clock.NowNs());
  const double toks = static_cast<double>(sum.precision_tokens[0] + sum.precision_tokens[1]);
  if (toks > 0) {
    double dropped = 0;
    for (size_t d = 0; d < sum.drop_tokens.size(); ++d) dropped += static_cast<double>(d) * static_cast<double>(sum.drop_tokens[d]);
    sum.quality_loss = static_cast<double>(sum.precision_tokens[1]) / toks + 0.1 * dropped / toks;
  }
  report.classes = SummarizeClasses(report.requests);
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return report;
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
