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
#include "sim/quality_table.h"
#include "sim/replay_node.h"
#include "sim/replay_recorder.h"
#include "sim/scenarios.h"
#include "sim/sim_engine.h"

namespace ari::sim {
namespace {

using internal::NsToS;
using internal::Recorder;

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
constexpr int64_t kDrainLimitNs = int64_t{24} * 3600 * thermal::kNsPerSecond;

int64_t MsToNs(uint64_t ms) { return static_cast<int64_t>(ms) * thermal::kNsPerMs; }

int PromptTokens(const std::string& prompt) {
  return static_cast<int>((prompt.size() + 3) / 4) + 8;
}

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

ReplayReport StartReport(const dl::DriveLog& log, const ReplayOptions& o) {
  ReplayReport report;
  report.scenario = log.header().scenario();
  report.policy_name = o.policy->name;
  report.cost_source = o.cost->source;
  report.hardware = o.hardware_name;
  for (const auto& b : o.policy->thermal_bands) {
    report.band_names.push_back(b.name);
    report.band_enter_c.push_back(b.enter_c);
  }
  return report;
}

// The RC model starts at the log's first SoC temperature and ambient.
thermal::RcParams RcParamsFor(const dl::DriveLog& log, const ReplayOptions& o) {
  thermal::RcParams rc = o.rc;
  rc.ambient_celsius = log.header().ambient_celsius();
  rc.idle_power_w = o.base_power_w >= 0                ? o.base_power_w
                    : !log.header().scenario().empty() ? ScenarioBasePowerW(log.header().scenario())
                                                       : o.rc.idle_power_w;
  if (o.scenario_power_on_top) {
    const double extra =
        log.header().scenario().empty()
            ? 0.0
            : ScenarioBasePowerW(log.header().scenario()) - thermal::RcParams{}.idle_power_w;
    rc.idle_power_w = o.rc.idle_power_w + std::max(0.0, extra);
  }
  rc.initial_celsius = rc.ambient_celsius;
  for (const auto& e : log.event()) {
    if (e.has_soc_temperature()) {
      rc.initial_celsius = e.soc_temperature().celsius();
      break;
    }
  }
  return rc;
}

// The log's end: its duration, or its last event when that comes later.
int64_t EndNs(const dl::DriveLog& log) {
  const auto& events = log.event();
  int64_t end_ns = MsToNs(log.header().duration_ms());
  if (!events.empty()) end_ns = std::max(end_ns, MsToNs(events[events.size() - 1].t_ms()));
  return end_ns;
}

}  // namespace

namespace internal {

ReplayReport StartReplayReport(const dl::DriveLog& log, const ReplayOptions& o) {
  return StartReport(log, o);
}
thermal::RcParams ReplayRcParams(const dl::DriveLog& log, const ReplayOptions& o) {
  return RcParamsFor(log, o);
}
int64_t ReplayEndNs(const dl::DriveLog& log) { return EndNs(log); }

ModelReplay::ModelReplay(const dl::DriveLog& log, const ReplayOptions& o,
                         const thermal::RcModel& model, ReplayReport& report)
    : log_(log),
      o_(o),
      report_(report),
      clock_(0),
      source_(model, clock_),
      topo_(SimTopology(o.performance_cpus, o.efficiency_cpus)),
      rec_(o, clock_, source_, topo_, report),
      engine_(*o.cost, clock_, o.slots, rec_.efficiency_mask(), &rec_, 4096, o.park_areas),
      end_ns_(EndNs(log)) {}

void ModelReplay::UpdateProtection() {
  const SocProtection& p = o_.protection;
  if (!p.enabled) return;
  source_.AdvanceToNow();
  const double die = source_.model().die_celsius();
  int level = rec_.hw_level();
  if (die >= p.critical_c) {
    level = 2;
  } else if (die >= p.passive_c) {
    level = level == 2 && die >= p.critical_c - p.critical_hysteresis_c ? 2 : 1;
  } else if (level == 2 && die < p.critical_c - p.critical_hysteresis_c) {
    level = die >= p.passive_c - p.passive_hysteresis_c ? 1 : 0;
  } else if (level == 1 && die < p.passive_c - p.passive_hysteresis_c) {
    level = 0;
  }
  if (level == rec_.hw_level()) return;
  const double fraction = level == 2 ? p.critical_fraction : level == 1 ? p.passive_fraction : 1.0;
  rec_.SetHwLevel(level, std::pow(fraction, p.power_exponent));
  ApplyCaps();
}

// The lower of the log's cap and the hardware trip's cap, per class.
void ModelReplay::ApplyCaps() {
  std::array<uint32_t, 2> caps = log_caps_;
  const SocProtection& p = o_.protection;
  const int level = rec_.hw_level();
  if (p.enabled && level > 0) {
    const double fraction = level == 2 ? p.critical_fraction : p.passive_fraction;
    const std::array<double, 2> nominal = {o_.cost->nominal_khz_performance,
                                           o_.cost->nominal_khz_efficiency};
    for (size_t c = 0; c < 2; ++c) {
      const auto hw = static_cast<uint32_t>(std::lround(nominal[c] * fraction));
      if (hw != 0 && (caps[c] == 0 || hw < caps[c])) caps[c] = hw;
    }
  }
  engine_.SetFrequencyCaps(caps[0], caps[1]);
  rec_.SetCaps(caps);
}

Result<void> ModelReplay::CreateScheduler() {
  qos::SchedulerOptions so;
  so.policy = o_.policy;
  so.engine = &engine_;
  so.clock = &clock_;
  so.sink = &rec_;
  so.temperature = &source_;
  so.topology = topo_;
  so.max_prefill_chunk = o_.max_prefill_chunk;
  so.memory = [&mem_bytes = mem_bytes_]() -> std::optional<thermal::MemoryReading> {
    if (!mem_bytes) return std::nullopt;
    thermal::MemoryReading m;
    m.available_bytes = *mem_bytes;
    m.system_available_bytes = *mem_bytes;
    return m;
  };
  auto sched = qos::Scheduler::Create(so);
  if (!sched)
    return MakeError(ErrorCode::kInvalidArgument, "replay: scheduler: " + sched.error().message);
  sched_ = std::move(*sched);
  rec_.last_decision_ = &sched_->last_decision();
  return {};
}

ModelReplay::StepOut ModelReplay::StepNow() {
  UpdateProtection();
  // Samples on the grid (inside chunks the engine's ticks take them). The loops wake at
  // every sample time, so the governor is also stepped while idle.
  if (clock_.NowNs() >= rec_.next_sample()) rec_.TakeSample();
  const qos::StepResult st = sched_->Step();
  if (st.ran) {
    rec_.Peak();
    UpdateProtection();
  }
  return {st.ran, st.ran && st.next_step_ns <= clock_.NowNs()
                      ? clock_.NowNs()
                      : std::min(st.next_step_ns, rec_.next_sample())};
}

void ModelReplay::Play() {
  const auto& events = log_.event();
  while (true) {
    int64_t now = clock_.NowNs();
    ApplyEvents(now);
    const StepOut st = StepNow();
    now = clock_.NowNs();
    const bool events_left = next_event_ < events.size();
    if (!events_left && now >= end_ns_ && sched_->live_requests() == 0) break;
    if (now > end_ns_ + kDrainLimitNs) break;  // still busy a day after the log: give up
    if (st.ran && st.next_ns <= now) continue;
    int64_t next = st.next_ns;
    if (events_left) next = std::min(next, MsToNs(events[next_event_].t_ms()));
    if (next == kNever) break;
    clock_.SetNs(std::max(next, now + thermal::kNsPerMs / 1000));
  }
}

void ModelReplay::AdvanceTo(int64_t t_ns) {
  while (clock_.NowNs() < t_ns) {
    const StepOut st = StepNow();
    const int64_t now = clock_.NowNs();
    if (st.ran && st.next_ns <= now) continue;
    if (now >= t_ns) break;  // a chunk ran past t
    clock_.SetNs(std::min(t_ns, std::max(st.next_ns, now + thermal::kNsPerMs / 1000)));
  }
}

void ModelReplay::RunOut() {
  while (true) {
    const StepOut st = StepNow();
    const int64_t now = clock_.NowNs();
    if (now >= end_ns_ && sched_->live_requests() == 0) break;
    if (now > end_ns_ + kDrainLimitNs) break;
    if (st.ran && st.next_ns <= now) continue;
    int64_t next = st.next_ns;
    if (now < end_ns_) next = std::min(next, end_ns_);
    if (next == kNever) break;
    clock_.SetNs(std::max(next, now + thermal::kNsPerMs / 1000));
  }
}

void ModelReplay::ApplyEvents(int64_t now) {
  const auto& events = log_.event();
  while (next_event_ < events.size() && MsToNs(events[next_event_].t_ms()) <= now) {
    Apply(events[next_event_++], now);
  }
}

void ModelReplay::Apply(const dl::Event& e, int64_t now) {
  if (e.has_ambient_temperature()) {
    if (auto r = source_.SetAmbient(e.ambient_temperature().celsius() + ambient_offset_c_); !r) {
      std::fprintf(stderr, "ari-sim: ambient %.1f C ignored: %s\n",
                   e.ambient_temperature().celsius(), r.error().message.c_str());
    }
  } else if (e.has_memory_available()) {
    mem_bytes_ = e.memory_available().bytes();
  } else if (e.has_cpu_frequency_cap()) {
    log_caps_ = ClassCaps(e.cpu_frequency_cap());
    ApplyCaps();
  } else if (e.has_request()) {
    SubmitRequest(e, now);
  }
}

void ModelReplay::SubmitRequest(const dl::Event& e, int64_t now) {
  const dl::Request& q = e.request();
  RequestReport r;
  r.id = q.request_id();
  const int rank = std::clamp(static_cast<int>(q.urgency()) - 1, 0, qos::kNumUrgencies - 1);
  const qos::Urgency u = qos::UrgencyFromRank(rank);
  r.urgency = std::string(qos::UrgencyName(u));
  r.client = q.client();
  r.category = dl::PromptCategory_Name(q.category());
  r.arrival_s = NsToS(MsToNs(e.t_ms()));
  r.prompt_tokens =
      o_.prompt_tokens ? std::max(1, o_.prompt_tokens(q.prompt())) : PromptTokens(q.prompt());
  r.max_tokens = static_cast<int>(q.max_tokens());
  const uint32_t dms = q.deadline_ms() ? q.deadline_ms() : o_.policy->Class(u).default_deadline_ms;
  r.deadline_s = dms * 1e-3;
  qos::SchedRequest sr;
  sr.id = q.request_id();
  sr.urgency = u;
  sr.prompt.assign(static_cast<size_t>(r.prompt_tokens), 1);
  sr.max_tokens = static_cast<int32_t>(q.max_tokens());
  sr.deadline_ns = dms ? MsToNs(e.t_ms()) + int64_t{dms} * thermal::kNsPerMs : 0;
  sr.session_id = q.session_id();
  sr.masked = !q.response_format().empty();
  r.response_format = q.response_format();
  const size_t idx = report_.requests.size();
  rec_.index[r.id] = idx;
  rec_.submit_ns.push_back(now);
  rec_.arrival_ns.push_back(MsToNs(e.t_ms()));
  report_.requests.push_back(std::move(r));
  const qos::SubmitStatus st = sched_->Submit(std::move(sr));
  if (st != qos::SubmitStatus::kAdmitted) {
    RequestReport& rr = report_.requests[idx];
    rr.status = std::string(qos::SubmitStatusName(st));
    rr.message = "refused at admission";
    rr.completion_s = NsToS(now - rec_.arrival_ns[idx]);
    rr.deadline_missed = true;
  }
}

int64_t ModelReplay::Finish() {
  rec_.AccountBands();
  rec_.AccountPower();
  rec_.AccountCaps();
  rec_.AccountHw();
  sched_->Shutdown("replay over");
  return clock_.NowNs();
}

// Summary and per class.
void SummarizeReplay(int64_t end_ns, std::chrono::steady_clock::time_point wall0,
                     const QualityTable* quality, ReplayReport& report) {
  ReplaySummary& sum = report.summary;
  sum.duration_s = NsToS(end_ns);
  const double toks = static_cast<double>(sum.precision_tokens[0] + sum.precision_tokens[1]);
  if (toks > 0) sum.quality_loss = QualityLoss(sum, quality) / toks;
  report.classes = SummarizeClasses(report.requests);
  sum.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
}

Result<void> CheckReplayOptions(const ReplayOptions& o) {
  if (!o.policy || !o.cost) {
    return MakeError(ErrorCode::kInvalidArgument, "replay: policy and cost model are required");
  }
  if (o.sample_period_ms < 1 || o.slots < 1 || o.performance_cpus + o.efficiency_cpus < 1 ||
      o.performance_cpus + o.efficiency_cpus > 64) {
    return MakeError(ErrorCode::kInvalidArgument, "replay: bad slots/CPUs/sample period");
  }
  return {};
}

}  // namespace internal

Result<ReplayReport> ReplayModel(const dl::DriveLog& log, const ReplayOptions& o) {
  const auto wall0 = std::chrono::steady_clock::now();
  if (auto r = internal::CheckReplayOptions(o); !r) return std::unexpected(r.error());
  ReplayReport report = StartReport(log, o);
  auto model = thermal::RcModel::Create(RcParamsFor(log, o));
  if (!model)
    return MakeError(ErrorCode::kInvalidArgument, "replay: RC model: " + model.error().message);
  internal::ModelReplay run(log, o, *model, report);
  if (auto r = run.CreateScheduler(); !r) return std::unexpected(r.error());
  run.Play();
  const int64_t end_ns = run.Finish();
  internal::SummarizeReplay(end_ns, wall0, o.quality, report);
  return report;
}

}  // namespace ari::sim
