// Live-mode replay; see live_replay.h.
#include "sim/live_replay.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "component/client/chunk_trace_text.h"
#include "component/client/client.h"
#include "sim/live_summary.h"

namespace ari::sim {
namespace {

// The chunk's what-ran trace into the record (docs/interface.md, "What ran").
void RecordTrace(const ari_TokenChunk& c, ChunkRecord& cr) {
  cr.has_trace = c.has_trace;
  if (!c.has_trace) return;
  cr.ran_precision = std::string(component::WirePrecisionName(c.ran.precision));
  cr.decided_precision = std::string(component::WirePrecisionName(c.decided.precision));
  cr.ran_isa = std::string(component::WireIsaName(c.ran.isa));
  cr.decided_isa = std::string(component::WireIsaName(c.decided.isa));
  cr.ran_kv = std::string(component::WireKvName(c.ran.kv_type));
  cr.decided_kv = std::string(component::WireKvName(c.decided.kv_type));
  cr.ran_threads = static_cast<int>(c.ran.threads);
  cr.decided_threads = static_cast<int>(c.decided.threads);
  cr.ran_threads_observed = static_cast<int>(c.ran_threads_observed);
  cr.ran_tile_gemms = static_cast<int>(c.ran_tile_gemms);
  cr.ran_gemv_isas = c.ran_gemv_isas;
  cr.ran_gemm_isas = c.ran_gemm_isas;
  cr.ran_cpus = c.ran.cpus;
  cr.decided_cpus = c.decided.cpus;
  cr.ran_layers_dropped = static_cast<int>(c.ran.layers_dropped);
  cr.decided_layers_dropped = static_cast<int>(c.decided.layers_dropped);
  cr.pin_failures = static_cast<int>(c.pin_failures);
  cr.isa_refused = c.isa_refused;
  cr.on_fallback = c.on_fallback;
}

namespace dds = component::dds;
using SteadyTime = std::chrono::steady_clock::time_point;
using std::chrono::steady_clock;

double Secs(steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

ari_UrgencyClass WireUrgency(qos::Urgency u) {
  switch (u) {
    case qos::Urgency::kCritical: return ari_URGENCY_CRITICAL;
    case qos::Urgency::kHigh: return ari_URGENCY_HIGH;
    case qos::Urgency::kNormal: return ari_URGENCY_NORMAL;
    case qos::Urgency::kBackground: return ari_URGENCY_BACKGROUND;
  }
  return ari_URGENCY_NORMAL;
}

qos::Urgency LogUrgency(const dl::Request& q) {
  const int rank = std::clamp(static_cast<int>(q.urgency()) - 1, 0, qos::kNumUrgencies - 1);
  return qos::UrgencyFromRank(rank);
}

// Client ids are 1..31 bytes without spaces.
std::string ClientId(const std::string& name) {
  std::string id = name.substr(0, ari_kClientIdLen - 1);
  for (char& c : id) {
    if (c == ' ' || static_cast<unsigned char>(c) < 0x20) c = '_';
  }
  return id.empty() ? std::string("ari-sim") : id;
}

// One request in flight: its stream is drained by its own collector thread (the client
// library blocks on a condition variable; nothing polls).
struct LiveRequest {
  size_t index = 0;
  SteadyTime published{};
  std::vector<ChunkRecord> chunks;
  std::string wire_error;  // Ask failed / stream error without a terminal
  std::string message;     // the terminal chunk's message
  std::thread thread;
};

struct Shared {
  std::mutex mutex;
  std::condition_variable cv;
  int running = 0;
};

struct EnvState {
  float soc = NAN, ambient = NAN;
  uint64_t memory = 0;
  uint32_t caps[ari_kMaxFreqClusters] = {};
  uint32_t seq = 0;
};

using live::DecisionClass;
using live::DecisionKnobs;

}  // namespace

std::string WireStatusName(int32_t s) {
  switch (s) {
    case ari_STATUS_OK: return "OK";
    case ari_STATUS_DONE: return "DONE";
    case ari_STATUS_CANCELLED: return "CANCELLED";
    case ari_STATUS_DEADLINE_MISSED: return "DEADLINE_MISSED";
    case ari_STATUS_REJECTED: return "REJECTED";
    case ari_STATUS_BUSY: return "BUSY";
    case ari_STATUS_INVALID: return "INVALID";
    case ari_STATUS_FORBIDDEN: return "FORBIDDEN";
    case ari_STATUS_FAILED: return "FAILED";
    case ari_STATUS_SHUTDOWN: return "SHUTDOWN";
    case ari_STATUS_NODE_LOST: return "NODE_LOST";
    default: return "UNKNOWN(" + std::to_string(s) + ")";
  }
}

int BandFromReason(const qos::Policy& policy, std::string_view reason) {
  const size_t at = reason.find("band ");
  if (at == std::string_view::npos) return -1;
  std::string_view rest = reason.substr(at + 5);
  const size_t end = rest.find_first_of(" (;,");
  return policy.ThermalBandIndex(rest.substr(0, end));
}

namespace {

// One live replay: the connections, the environment in force, the timeline and the
// requests in flight. The steps run in the order of ReplayLive().
class LiveRun {
 public:
  LiveRun(const dl::DriveLog& log, const LiveReplayOptions& o);

  // One client per log client name, the environment writer, a node that answers.
  Result<void> Connect();
  void StartReport();
  // Publishes the log's events at their (scaled) times.
  void PlayEvents();
  // Keeps the environment fresh and the timeline going until every answer ended.
  void Drain();
  // Per request, from the chunks; the summary.
  ReplayReport Finish();

 private:
  SteadyTime WallAt(uint64_t t_ms) const {
    return start_ +
           std::chrono::duration_cast<steady_clock::duration>(
               std::chrono::duration<double>(static_cast<double>(t_ms) * 1e-3 / o_.time_scale));
  }
  double LogS(SteadyTime t) const { return Secs(t - start_) * o_.time_scale; }
  static std::unexpected<Error> Fail(const std::string& what, const component::Error& e) {
    return MakeError(ErrorCode::kIo, "live replay: " + what + ": " + e.ToString());
  }

  Result<void> ConnectClients();
  Result<void> OpenEnvironmentWriter();
  void PublishEnv(SteadyTime now);
  void TakeSample(SteadyTime now);
  void NoteStatus(const ari_NodeStatus& st, Sample& sm);
  void Periodic(SteadyTime now) {
    if (now >= next_env_) PublishEnv(now);
    if (now >= next_sample_) TakeSample(now);
  }
  void WaitUntil(SteadyTime t, bool until_all_done) {
    std::unique_lock<std::mutex> l(shared_.mutex);
    shared_.cv.wait_until(l, t, [&] { return until_all_done && shared_.running == 0; });
  }
  bool ApplyEnvironment(const dl::Event& e, SteadyTime now);  // false: not an environment event
  void StartRequest(const dl::Event& e);
  void CollectAnswer(LiveRequest* raw, component::Client& client, component::Stream s);

  const dl::DriveLog& log_;
  const LiveReplayOptions& o_;
  const qos::Policy& policy_;
  std::shared_ptr<dds::Domain> domain_;
  std::map<std::string, std::unique_ptr<component::Client>> clients_;
  // The environment writer (own participant).
  std::optional<dds::Participant> env_pp_;
  dds::Topic env_topic_;
  dds::Writer env_writer_;
  component::Client* status_client_ = nullptr;

  ReplayReport report_;
  EnvState env_;
  SteadyTime start_{};
  uint64_t end_ms_ = 0;
  SteadyTime drain_until_{};
  std::chrono::milliseconds env_period_{};
  steady_clock::duration sample_period_{};
  SteadyTime next_env_{}, next_sample_{};
  std::string last_decision_, last_reason_;
  int last_band_ = 0;

  Shared shared_;
  std::vector<std::unique_ptr<LiveRequest>> live_;
};

LiveRun::LiveRun(const dl::DriveLog& log, const LiveReplayOptions& o)
    : log_(log), o_(o), policy_(*o.policy) {}

Result<void> LiveRun::Connect() {
  auto domain = dds::Domain::Create(o_.domain);
  if (!domain) return Fail("DDS domain", domain.error());
  domain_ = std::move(*domain);
  if (auto r = ConnectClients(); !r) return r;
  if (auto r = OpenEnvironmentWriter(); !r) return r;
  // A node must be there; its status is the timeline's source.
  if (clients_.empty()) {  // no requests: still watch the node through one client
    component::ClientOptions co;
    co.client_id = "ari-sim";
    auto c = component::Client::Connect(domain_, co);
    if (!c) return Fail("client", c.error());
    clients_["ari-sim"] = std::move(*c);
  }
  for (auto& [id, c] : clients_) {
    if (auto s = c->WaitForNode(o_.node_timeout); !s)
      return Fail("waiting for ari-node", s.error());
  }
  status_client_ = clients_.begin()->second.get();
  return {};
}

Result<void> LiveRun::ConnectClients() {
  // One client per log client name.
  for (const dl::Event& e : log_.event()) {
    if (!e.has_request()) continue;
    const std::string id = ClientId(e.request().client());
    if (clients_.count(id)) continue;
    component::ClientOptions co;
    co.client_id = id;
    co.node_timeout = o_.node_timeout;
    auto c = component::Client::Connect(domain_, co);
    if (!c) return Fail("client " + id, c.error());
    clients_[id] = std::move(*c);
  }
  return {};
}

Result<void> LiveRun::OpenEnvironmentWriter() {
  if (!o_.send_environment) return {};
  auto pp = dds::Participant::Create(domain_);
  if (!pp) return Fail("participant", pp.error());
  env_pp_.emplace(std::move(*pp));
  auto t = dds::Topic::Create(*env_pp_, dds::TopicKind::kSimEnvironment);
  if (!t) return Fail("environment topic", t.error());
  env_topic_ = std::move(*t);
  auto w = dds::Writer::Create(*env_pp_, env_topic_);
  if (!w) return Fail("environment writer", w.error());
  env_writer_ = std::move(*w);
  return {};
}

void LiveRun::StartReport() {
  report_.mode = "live";
  report_.time_scale = o_.time_scale;
  report_.scenario = log_.header().scenario();
  report_.policy_name = policy_.name;
  report_.cost_source = "measured (live)";
  for (const auto& b : policy_.thermal_bands) {
    report_.band_names.push_back(b.name);
    report_.band_enter_c.push_back(b.enter_c);
  }
  ReplaySummary& sum = report_.summary;
  sum.band_time_s.assign(policy_.thermal_bands.size(), 0.0);
  sum.drop_busy_s.assign(1, 0.0);
  sum.drop_tokens.assign(1, 0);

  env_.ambient = static_cast<float>(log_.header().ambient_celsius());
  start_ = steady_clock::now();
  const auto& events = log_.event();
  end_ms_ = log_.header().duration_ms();
  if (!events.empty()) end_ms_ = std::max<uint64_t>(end_ms_, events[events.size() - 1].t_ms());
  drain_until_ = WallAt(end_ms_) + o_.drain_timeout;
  env_period_ = std::chrono::milliseconds(std::max<int64_t>(10, o_.env_period_ms));
  sample_period_ = std::chrono::duration_cast<steady_clock::duration>(std::chrono::duration<double>(
      std::max<int64_t>(10, o_.sample_period_ms) * 1e-3 / o_.time_scale));
  next_env_ = start_;
  next_sample_ = start_;
}

void LiveRun::PublishEnv(SteadyTime now) {
  if (!o_.send_environment) return;
  ari_SimEnvironment s{};
  dds::CopyFixed(o_.source_id, s.source_id);
  const dds::InstanceKey key = dds::KeyOfName(o_.source_id);
  s.key_hi = key.hi;
  s.key_lo = key.lo;
  s.seq = ++env_.seq;
  s.log_time_ms = static_cast<uint64_t>(std::max(0.0, LogS(now) * 1e3));
  s.soc_temperature_c = env_.soc;
  s.ambient_c = env_.ambient;
  s.memory_available_bytes = env_.memory;
  std::copy(std::begin(env_.caps), std::end(env_.caps), s.cpu_freq_cap_khz);
  if (auto r = env_writer_.Write(&s); !r && o_.progress) {
    o_.progress("environment write: " + r.error().ToString());
  }
  next_env_ = now + env_period_;
}

void LiveRun::TakeSample(SteadyTime now) {
  const component::NodeView view = status_client_->Node();
  Sample sm;
  sm.t_s = LogS(now);
  sm.ambient_c = std::isnan(env_.ambient) ? 0.0 : env_.ambient;
  sm.die_c = std::isnan(env_.soc) ? sm.ambient_c : env_.soc;
  if (view.status) NoteStatus(*view.status, sm);
  sm.band = last_band_;
  ReplaySummary& sum = report_.summary;
  const double period_s = std::max<int64_t>(10, o_.sample_period_ms) * 1e-3;
  if (!report_.samples.empty()) {
    sum.band_time_s[static_cast<size_t>(report_.samples.back().band)] += period_s;
    sum.busy_s += report_.samples.back().busy * period_s;
  }
  if (report_.samples.empty() || sm.die_c > sum.peak_die_c) {
    sum.peak_die_c = sm.die_c;
    sum.peak_t_s = sm.t_s;
  }
  report_.samples.push_back(sm);
  next_sample_ += sample_period_;
  if (next_sample_ <= now) next_sample_ = now + sample_period_;
}

// The node's status into the sample; a changed decision or reason into the timeline.
void LiveRun::NoteStatus(const ari_NodeStatus& st, Sample& sm) {
  if (std::isfinite(st.temperature_c)) sm.die_c = st.temperature_c;
  const std::string decision(dds::FixedView(st.decision)), reason(dds::FixedView(st.reason));
  if (int b = BandFromReason(policy_, reason); b >= 0) last_band_ = b;
  bool busy = st.sessions_in_use > 0;
  for (uint32_t q : st.queue_depth) busy = busy || q > 0;
  sm.busy = busy ? 1 : 0;
  if (decision != last_decision_ || reason != last_reason_) {
    DecisionRecord d;
    d.t_s = sm.t_s;
    d.idle = decision == "idle";
    d.urgency = std::string(DecisionClass(decision));
    d.band = last_band_;
    d.conservative = reason.find("CONSERVATIVE") != std::string::npos;
    d.knobs = std::string(DecisionKnobs(decision));
    d.reason = reason;
    report_.decisions.push_back(std::move(d));
    last_decision_ = decision;
    last_reason_ = reason;
  }
}

void LiveRun::PlayEvents() {
  const auto& events = log_.event();
  int next_event = 0;
  while (next_event < events.size()) {
    const dl::Event& e = events[next_event];
    const SteadyTime due = WallAt(e.t_ms());
    SteadyTime now = steady_clock::now();
    Periodic(now);
    if (now < due) {
      WaitUntil(std::min({due, next_env_, next_sample_}), false);
      continue;
    }
    ++next_event;
    if (!ApplyEnvironment(e, now) && e.has_request()) StartRequest(e);
  }
}

bool LiveRun::ApplyEnvironment(const dl::Event& e, SteadyTime now) {
  if (e.has_soc_temperature()) {
    env_.soc = static_cast<float>(e.soc_temperature().celsius());
    PublishEnv(now);
  } else if (e.has_ambient_temperature()) {
    env_.ambient = static_cast<float>(e.ambient_temperature().celsius());
    PublishEnv(now);
  } else if (e.has_memory_available()) {
    env_.memory = e.memory_available().bytes();
    PublishEnv(now);
  } else if (e.has_cpu_frequency_cap()) {
    std::fill(std::begin(env_.caps), std::end(env_.caps), 0u);
    for (const auto& c : e.cpu_frequency_cap().clusters()) {
      if (c.cluster() < static_cast<uint32_t>(ari_kMaxFreqClusters))
        env_.caps[c.cluster()] = c.max_khz();
    }
    PublishEnv(now);
  } else {
    return false;
  }
  return true;
}

void LiveRun::StartRequest(const dl::Event& e) {
  const dl::Request& q = e.request();
  const qos::Urgency u = LogUrgency(q);
  RequestReport r;
  r.id = q.request_id();
  r.urgency = std::string(qos::UrgencyName(u));
  r.client = q.client();
  r.category = dl::PromptCategory_Name(q.category());
  r.arrival_s = static_cast<double>(e.t_ms()) * 1e-3;
  r.max_tokens = static_cast<int>(q.max_tokens());
  if (o_.prompt_tokens) r.prompt_tokens = o_.prompt_tokens(q.prompt());
  const uint32_t dms = q.deadline_ms() ? q.deadline_ms() : policy_.Class(u).default_deadline_ms;
  r.deadline_s = dms * 1e-3;
  auto lr = std::make_unique<LiveRequest>();
  lr->index = report_.requests.size();
  report_.requests.push_back(std::move(r));
  component::AskParams ask;
  ask.prompt = q.prompt();
  ask.urgency = WireUrgency(u);
  ask.max_tokens = q.max_tokens();
  ask.deadline_ms = q.deadline_ms();
  ask.session_id = q.session_id();
  component::Client& client = *clients_.at(ClientId(q.client()));
  lr->published = steady_clock::now();
  auto stream = client.Ask(ask);
  if (!stream) {
    lr->wire_error = stream.error().ToString();
  } else {
    {
      std::lock_guard<std::mutex> l(shared_.mutex);
      ++shared_.running;
    }
    LiveRequest* raw = lr.get();
    lr->thread = std::thread([this, raw, &client, s = std::move(*stream)]() mutable {
      CollectAnswer(raw, client, std::move(s));
    });
  }
  live_.push_back(std::move(lr));
}

// The collector thread of one request: every chunk of its stream until the terminal or
// the end of the drain.
void LiveRun::CollectAnswer(LiveRequest* raw, component::Client& client, component::Stream s) {
  const qos::Policy& policy = policy_;
  auto res = s.Wait(
      [&](const ari_TokenChunk& c) {
        ChunkRecord cr;
        cr.t_s = Secs(steady_clock::now() - raw->published);
        cr.seq = c.sequence_number;
        cr.tokens = static_cast<int>(std::min<uint32_t>(c.n_tokens, ari_kChunkMaxTokens));
        cr.terminal = c.terminal;
        cr.status = WireStatusName(dds::RawEnum(c.status));
        cr.decision = std::string(dds::FixedView(c.decision));
        if (const auto v = client.Node(); v.status) {
          cr.band = BandFromReason(policy, dds::FixedView(v.status->reason));
        }
        cr.node_queue_wait_s = c.timing.queue_wait_us * 1e-6;
        cr.node_ttft_s = c.timing.time_to_first_token_us * 1e-6;
        cr.node_tokens_per_s = std::isfinite(c.timing.tokens_per_s) ? c.timing.tokens_per_s : 0;
        cr.node_tokens_generated = static_cast<int>(c.timing.tokens_generated);
        if (c.terminal) raw->message = std::string(dds::FixedView(c.message));
        RecordTrace(c, cr);
        raw->chunks.push_back(std::move(cr));
      },
      std::max(dds::Duration::zero(),
               std::chrono::duration_cast<dds::Duration>(drain_until_ - steady_clock::now())));
  const bool terminal = !raw->chunks.empty() && raw->chunks.back().terminal;
  if (!res && !terminal) raw->wire_error = res.error().ToString();
  std::lock_guard<std::mutex> l(shared_.mutex);
  --shared_.running;
  shared_.cv.notify_all();
}

void LiveRun::Drain() {
  for (;;) {
    SteadyTime now = steady_clock::now();
    Periodic(now);
    {
      std::lock_guard<std::mutex> l(shared_.mutex);
      if (shared_.running == 0 && now >= WallAt(end_ms_)) break;
    }
    if (now >= drain_until_ + std::chrono::seconds(1)) break;
    WaitUntil(std::min({next_env_, next_sample_, std::max(now, WallAt(end_ms_))}),
              now >= WallAt(end_ms_));
  }
  TakeSample(steady_clock::now());
  for (auto& lr : live_) {
    if (lr->thread.joinable()) lr->thread.join();
  }
  report_.summary.duration_s = LogS(steady_clock::now());
}

ReplayReport LiveRun::Finish() {
  ReplaySummary& sum = report_.summary;
  live::TokenTotals totals;
  for (auto& lr : live_) {
    RequestReport& r = report_.requests[lr->index];
    r.chunk_log = std::move(lr->chunks);
    live::SummarizeRequest(o_.time_scale, lr->message, lr->wire_error, r, sum, totals);
  }
  live::SummarizeQuality(totals, sum);
  report_.classes = SummarizeClasses(report_.requests);
  sum.wall_s = Secs(steady_clock::now() - start_);
  return std::move(report_);
}

}  // namespace

Result<ReplayReport> ReplayLive(const dl::DriveLog& log, const LiveReplayOptions& o) {
  if (o.policy == nullptr) return MakeError(ErrorCode::kInvalidArgument, "live replay: no policy");
  if (!(o.time_scale > 0) || !std::isfinite(o.time_scale)) {
    return MakeError(ErrorCode::kInvalidArgument, "live replay: --time-scale must be > 0");
  }
  LiveRun run(log, o);
  if (auto r = run.Connect(); !r) return std::unexpected(r.error());
  run.StartReport();
  run.PlayEvents();
  run.Drain();
  return run.Finish();
}

}  // namespace ari::sim
