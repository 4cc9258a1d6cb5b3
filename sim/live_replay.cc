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

#include "component/client/client.h"

namespace ari::sim {
namespace {

namespace dds = component::dds;
using SteadyTime = std::chrono::steady_clock::time_point;
using std::chrono::steady_clock;

double Secs(steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

ari_Urgency WireUrgency(qos::Urgency u) {
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

std::string_view DecisionClass(std::string_view d) {
  const size_t colon = d.find(':');
  return colon == std::string_view::npos ? std::string_view() : d.substr(0, colon);
}
std::string_view DecisionKnobs(std::string_view d) {
  const size_t colon = d.find(": ");
  return colon == std::string_view::npos ? d : d.substr(colon + 2);
}
int DropLevel(std::string_view d) {
  const size_t at = d.find("drop ");
  if (at == std::string_view::npos) return -1;
  int v = 0;
  size_t i = at + 5;
  if (i >= d.size() || d[i] < '0' || d[i] > '9') return -1;
  while (i < d.size() && d[i] >= '0' && d[i] <= '9') v = v * 10 + (d[i++] - '0');
  return v;
}

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

Result<ReplayReport> ReplayLive(const dl::DriveLog& log, const LiveReplayOptions& o) {
  if (o.policy == nullptr) return MakeError(ErrorCode::kInvalidArgument, "live replay: no policy");
  if (!(o.time_scale > 0) || !std::isfinite(o.time_scale)) {
    return MakeError(ErrorCode::kInvalidArgument, "live replay: --time-scale must be > 0");
  }
  const qos::Policy& policy = *o.policy;
  auto fail = [](const std::string& what, const component::Error& e) {
    return MakeError(ErrorCode::kIo, "live replay: " + what + ": " + e.ToString());
  };
  auto domain = dds::Domain::Create(o.domain);
  if (!domain) return fail("DDS domain", domain.error());

  // One client per log client name.
  std::map<std::string, std::unique_ptr<component::Client>> clients;
  for (const dl::Event& e : log.event()) {
    if (!e.has_request()) continue;
    const std::string id = ClientId(e.request().client());
    if (clients.count(id)) continue;
    component::ClientOptions co;
    co.client_id = id;
    co.node_timeout = o.node_timeout;
    auto c = component::Client::Connect(*domain, co);
    if (!c) return fail("client " + id, c.error());
    clients[id] = std::move(*c);
  }
  // The environment writer (own participant).
  std::optional<dds::Participant> env_pp;
  dds::Topic env_topic;
  dds::Writer env_writer;
  if (o.send_environment) {
    auto pp = dds::Participant::Create(*domain);
    if (!pp) return fail("participant", pp.error());
    env_pp.emplace(std::move(*pp));
    auto t = dds::Topic::Create(*env_pp, dds::TopicKind::kSimEnvironment);
    if (!t) return fail("environment topic", t.error());
    env_topic = std::move(*t);
    auto w = dds::Writer::Create(*env_pp, env_topic);
    if (!w) return fail("environment writer", w.error());
    env_writer = std::move(*w);
  }
  // A node must be there; its status is the timeline's source.
  component::Client* status_client = nullptr;
  if (clients.empty()) {  // no requests: still watch the node through one client
    component::ClientOptions co;
    co.client_id = "ari-sim";
    auto c = component::Client::Connect(*domain, co);
    if (!c) return fail("client", c.error());
    clients["ari-sim"] = std::move(*c);
  }
  for (auto& [id, c] : clients) {
    if (auto s = c->WaitForNode(o.node_timeout); !s) return fail("waiting for ari-node", s.error());
  }
  status_client = clients.begin()->second.get();

  ReplayReport report;
  report.mode = "live";
  report.time_scale = o.time_scale;
  report.scenario = log.header().scenario();
  report.policy_name = policy.name;
  report.cost_source = "measured (live)";
  for (const auto& b : policy.thermal_bands) {
    report.band_names.push_back(b.name);
    report.band_enter_c.push_back(b.enter_c);
  }
  ReplaySummary& sum = report.summary;
  sum.band_time_s.assign(policy.thermal_bands.size(), 0.0);
  sum.drop_busy_s.assign(1, 0.0);
  sum.drop_tokens.assign(1, 0);

  EnvState env;
  env.ambient = static_cast<float>(log.header().ambient_celsius());
  const SteadyTime start = steady_clock::now();
  auto log_s = [&](SteadyTime t) { return Secs(t - start) * o.time_scale; };
  auto wall_at = [&](uint64_t t_ms) {
    return start + std::chrono::duration_cast<steady_clock::duration>(
                       std::chrono::duration<double>(static_cast<double>(t_ms) * 1e-3 / o.time_scale));
  };
  const auto& events = log.event();
  uint64_t end_ms = log.header().duration_ms();
  if (!events.empty()) end_ms = std::max<uint64_t>(end_ms, events[events.size() - 1].t_ms());
  const SteadyTime drain_until = wall_at(end_ms) + o.drain_timeout;
  const auto env_period = std::chrono::milliseconds(std::max<int64_t>(10, o.env_period_ms));
  const auto sample_period = std::chrono::duration_cast<steady_clock::duration>(
      std::chrono::duration<double>(std::max<int64_t>(10, o.sample_period_ms) * 1e-3 / o.time_scale));
  SteadyTime next_env = start, next_sample = start;
  std::string last_decision, last_reason;
  int last_band = 0;

  auto publish_env = [&](SteadyTime now) {
    if (!o.send_environment) return;
    ari_SimEnvironment s{};
    dds::CopyFixed(o.source_id, s.source_id);
    s.seq = ++env.seq;
    s.log_time_ms = static_cast<uint64_t>(std::max(0.0, log_s(now) * 1e3));
    s.soc_temperature_c = env.soc;
    s.ambient_c = env.ambient;
    s.memory_available_bytes = env.memory;
    std::copy(std::begin(env.caps), std::end(env.caps), s.cpu_freq_cap_khz);
    if (auto r = env_writer.Write(&s); !r && o.progress) {
      o.progress("environment write: " + r.error().ToString());
    }
    next_env = now + env_period;
  };
  auto take_sample = [&](SteadyTime now) {
    const component::NodeView view = status_client->Node();
    Sample sm;
    sm.t_s = log_s(now);
    sm.ambient_c = std::isnan(env.ambient) ? 0.0 : env.ambient;
    sm.die_c = std::isnan(env.soc) ? sm.ambient_c : env.soc;
    if (view.status) {
      const ari_NodeStatus& st = *view.status;
      if (std::isfinite(st.temperature_c)) sm.die_c = st.temperature_c;
      const std::string decision(dds::FixedView(st.decision)), reason(dds::FixedView(st.reason));
      if (int b = BandFromReason(policy, reason); b >= 0) last_band = b;
      bool busy = st.sessions_in_use > 0;
      for (uint32_t q : st.queue_depth) busy = busy || q > 0;
      sm.busy = busy ? 1 : 0;
      if (decision != last_decision || reason != last_reason) {
        DecisionRecord d;
        d.t_s = sm.t_s;
        d.idle = decision == "idle";
        d.urgency = std::string(DecisionClass(decision));
        d.band = last_band;
        d.conservative = reason.find("CONSERVATIVE") != std::string::npos;
        d.knobs = std::string(DecisionKnobs(decision));
        d.reason = reason;
        report.decisions.push_back(std::move(d));
        last_decision = decision;
        last_reason = reason;
      }
    }
    sm.band = last_band;
    const double period_s = std::max<int64_t>(10, o.sample_period_ms) * 1e-3;
    if (!report.samples.empty()) {
      sum.band_time_s[static_cast<size_t>(report.samples.back().band)] += period_s;
      sum.busy_s += report.samples.back().busy * period_s;
    }
    if (report.samples.empty() || sm.die_c > sum.peak_die_c) {
      sum.peak_die_c = sm.die_c;
      sum.peak_t_s = sm.t_s;
    }
    report.samples.push_back(sm);
    next_sample += sample_period;
    if (next_sample <= now) next_sample = now + sample_period;
  };

  Shared shared;
  std::vector<std::unique_ptr<LiveRequest>> live;
  auto wait_until = [&](SteadyTime t, bool until_all_done) {
    std::unique_lock<std::mutex> l(shared.mutex);
    shared.cv.wait_until(l, t, [&] { return until_all_done && shared.running == 0; });
  };
  auto periodic = [&](SteadyTime now) {
    if (now >= next_env) publish_env(now);
    if (now >= next_sample) take_sample(now);
  };

  int next_event = 0;
  while (next_event < events.size()) {
    const dl::Event& e = events[next_event];
    const SteadyTime due = wall_at(e.t_ms());
    SteadyTime now = steady_clock::now();
    periodic(now);
    if (now < due) {
      wait_until(std::min({due, next_env, next_sample}), false);
      continue;
    }
    ++next_event;
    if (e.has_soc_temperature()) {
      env.soc = static_cast<float>(e.soc_temperature().celsius());
      publish_env(now);
    } else if (e.has_ambient_temperature()) {
      env.ambient = static_cast<float>(e.ambient_temperature().celsius());
      publish_env(now);
    } else if (e.has_memory_available()) {
      env.memory = e.memory_available().bytes();
      publish_env(now);
    } else if (e.has_cpu_frequency_cap()) {
      std::fill(std::begin(env.caps), std::end(env.caps), 0u);
      for (const auto& c : e.cpu_frequency_cap().clusters()) {
        if (c.cluster() < static_cast<uint32_t>(ari_kMaxFreqClusters)) env.caps[c.cluster()] = c.max_khz();
      }
      publish_env(now);
    } else if (e.has_request()) {
      const dl::Request& q = e.request();
      const qos::Urgency u = LogUrgency(q);
      RequestReport r;
      r.id = q.request_id();
      r.urgency = std::string(qos::UrgencyName(u));
      r.client = q.client();
      r.category = dl::PromptCategory_Name(q.category());
      r.arrival_s = static_cast<double>(e.t_ms()) * 1e-3;
      r.max_tokens = static_cast<int>(q.max_tokens());
      if (o.prompt_tokens) r.prompt_tokens = o.prompt_tokens(q.prompt());
      const uint32_t dms = q.deadline_ms() ? q.deadline_ms() : policy.Class(u).default_deadline_ms;
      r.deadline_s = dms * 1e-3;
      auto lr = std::make_unique<LiveRequest>();
      lr->index = report.requests.size();
      report.requests.push_back(std::move(r));
      component::AskParams ask;
      ask.prompt = q.prompt();
      ask.urgency = WireUrgency(u);
      ask.max_tokens = q.max_tokens();
      ask.deadline_ms = q.deadline_ms();
      ask.session_id = q.session_id();
      component::Client& client = *clients.at(ClientId(q.client()));
      lr->published = steady_clock::now();
      auto stream = client.Ask(ask);
      if (!stream) {
        lr->wire_error = stream.error().ToString();
      } else {
        {
          std::lock_guard<std::mutex> l(shared.mutex);
          ++shared.running;
        }
        LiveRequest* raw = lr.get();
        lr->thread = std::thread([raw, &shared, &policy, &client, drain_until,
                                  s = std::move(*stream)]() mutable {
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
                raw->chunks.push_back(std::move(cr));
              },
              std::max(dds::Duration::zero(),
                       std::chrono::duration_cast<dds::Duration>(drain_until - steady_clock::now())));
          const bool terminal = !raw->chunks.empty() && raw->chunks.back().terminal;
          if (!res && !terminal) raw->wire_error = res.error().ToString();
          std::lock_guard<std::mutex> l(shared.mutex);
          --shared.running;
          shared.cv.notify_all();
        });
      }
      live.push_back(std::move(lr));
    }
  }
  // Drain: keep the environment fresh and the timeline going until every answer ended.
  for (;;) {
    SteadyTime now = steady_clock::now();
    periodic(now);
    {
      std::lock_guard<std::mutex> l(shared.mutex);
      if (shared.running == 0 && now >= wall_at(end_ms)) break;
    }
    if (now >= drain_until + std::chrono::seconds(1)) break;
    wait_until(std::min({next_env, next_sample, std::max(now, wall_at(end_ms))}), now >= wall_at(end_ms));
  }
  take_sample(steady_clock::now());
  for (auto& lr : live) {
    if (lr->thread.joinable()) lr->thread.join();
  }
  sum.duration_s = log_s(steady_clock::now());

  // Per request, from the chunks.
  int64_t tokens_total = 0;
  double dropped = 0;
  for (auto& lr : live) {
    RequestReport& r = report.requests[lr->index];
    const double arrival_log = r.arrival_s;
    r.chunk_log = std::move(lr->chunks);
    std::string prev;
    for (const ChunkRecord& c : r.chunk_log) {
      if (!c.terminal) ++r.chunks;
      r.tokens += c.tokens;
      if (c.tokens > 0 && r.ttft_s < 0) r.ttft_s = c.t_s;
      if (c.tokens > 0) {
        const bool w4 = c.decision.find("W4A8") != std::string::npos;
        sum.precision_tokens[w4 ? 1 : 0] += c.tokens;
        const int drop = std::max(0, DropLevel(c.decision));
        if (static_cast<size_t>(drop) >= sum.drop_tokens.size()) {
          sum.drop_tokens.resize(static_cast<size_t>(drop) + 1, 0);
          sum.drop_busy_s.resize(static_cast<size_t>(drop) + 1, 0.0);
        }
        sum.drop_tokens[static_cast<size_t>(drop)] += c.tokens;
        tokens_total += c.tokens;
        dropped += static_cast<double>(drop) * c.tokens;
        ++sum.chunks;
      }
      if (!c.terminal && c.decision != prev) {
        DecisionRecord d;
        d.t_s = arrival_log + c.t_s * o.time_scale;
        d.urgency = std::string(DecisionClass(c.decision));
        d.idle = c.decision == "idle";
        d.band = c.band >= 0 ? c.band : 0;
        d.knobs = std::string(DecisionKnobs(c.decision));
        r.decisions.push_back(std::move(d));
        prev = c.decision;
      }
      if (c.terminal) {
        r.status = c.status;
        r.completion_s = c.t_s;
        r.queue_wait_s = c.node_queue_wait_s;
        if (c.node_tokens_generated > r.tokens) r.tokens = c.node_tokens_generated;
      }
    }
    r.message = lr->message;
    if (r.status.empty()) {
      r.status = "NO_TERMINAL";
      r.message = lr->wire_error.empty() ? "no terminal chunk received" : lr->wire_error;
      r.deadline_missed = true;
      continue;
    }
    r.deadline_missed = r.status != "DONE" || (r.deadline_s > 0 && r.completion_s > r.deadline_s + 1e-9);
    if (r.status != "DONE" && r.ttft_s < 0) r.ttft_s = -1;
  }
  if (tokens_total > 0) {
    sum.quality_loss = static_cast<double>(sum.precision_tokens[1]) / static_cast<double>(tokens_total) +
                       0.1 * dropped / static_cast<double>(tokens_total);
  }
  report.classes = SummarizeClasses(report.requests);
  sum.wall_s = Secs(steady_clock::now() - start);
  return report;
}

}  // namespace ari::sim
