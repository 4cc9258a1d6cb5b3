// Fleet replay: one drive log, N simulated nodes, the client's routing rule; see fleet.h.
#include "sim/fleet.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <unordered_map>

#include "sim/replay_node.h"
#include "sim/report.h"

namespace ari::sim {
namespace {

constexpr int kMaxNodes = 16;
constexpr int64_t kNsPerMs = 1'000'000;

int64_t MsToNs(uint64_t ms) { return static_cast<int64_t>(ms) * kNsPerMs; }

// One simulated node: its replay, its report, and its last published status.
struct SimNode {
  std::string id;
  ReplayReport report;
  std::unique_ptr<thermal::RcModel> rc;
  std::unique_ptr<internal::ModelReplay> replay;
  component::RouteNode status;  // as last published
  int64_t status_ns = 0;
  std::array<uint32_t, ari_kUrgencyClasses> sent_since{};  // the client's count since
};

// The NodeStatus fields routing reads, as ari-node fills them (node_serve.cc).
component::RouteNode Publish(const SimNode& n) {
  const internal::ModelReplay& r = *n.replay;
  component::RouteNode v;
  v.node_id = n.id;
  v.model = "simulated";
  v.ready = true;
  v.alive = true;
  const auto depths = r.scheduler().QueueDepths();
  // ari UrgencyClass index: BACKGROUND 0 .. CRITICAL 3; qos rank: CRITICAL 0 .. BACKGROUND 3.
  for (int rank = 0; rank < qos::kNumUrgencies; ++rank) v.queue[3 - rank] = depths[rank];
  v.slots_total = static_cast<uint32_t>(r.slots());
  v.slots_busy = static_cast<uint32_t>(
      std::min<size_t>(r.scheduler().live_requests(), static_cast<size_t>(r.slots())));
  v.temperature_c = static_cast<float>(r.die_celsius());
  v.sensor_ok = true;  // SENSOR_SIMULATED
  v.decode_tokens_per_s = static_cast<float>(r.recorder().decode_tokens_per_s());
  v.thermal_band = r.recorder().band();
  v.memory_level = static_cast<uint32_t>(r.recorder().memory_band() + 1);
  return v;
}

class Fleet {
 public:
  Fleet(const dl::DriveLog& log, const FleetOptions& o) : log_(log), o_(o) {}

  Result<void> Start();
  void Play();
  FleetReport Finish(std::chrono::steady_clock::time_point wall0);

 private:
  void AdvanceAll(int64_t t_ns) {
    for (SimNode& n : nodes_) n.replay->AdvanceTo(t_ns);
  }
  void PublishAll(int64_t t_ns) {
    for (SimNode& n : nodes_) {
      n.status = Publish(n);
      n.status_ns = t_ns;
      n.sent_since.fill(0);
    }
  }
  // The node the client library would address this request to.
  size_t Route(const dl::Request& q, int64_t now_ns);

  const dl::DriveLog& log_;
  const FleetOptions& o_;
  std::vector<SimNode> nodes_;
  std::unordered_map<uint64_t, size_t> session_node_;
  std::vector<int> node_of_;  // per request event, in log order
};

Result<void> Fleet::Start() {
  nodes_.resize(static_cast<size_t>(o_.nodes));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    SimNode& n = nodes_[i];
    char id[24];
    std::snprintf(id, sizeof id, "n%zu", i + 1);
    n.id = id;
    const double offset = i < o_.ambient_offset_c.size() ? o_.ambient_offset_c[i] : 0.0;
    thermal::RcParams rc = internal::ReplayRcParams(log_, o_.node);
    rc.ambient_celsius += offset;
    rc.initial_celsius += offset;
    auto model = thermal::RcModel::Create(rc);
    if (!model) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "fleet: node " + n.id + ": RC model: " + model.error().message);
    }
    n.rc = std::make_unique<thermal::RcModel>(*model);
    n.report = internal::StartReplayReport(log_, o_.node);
    n.replay = std::make_unique<internal::ModelReplay>(log_, o_.node, *n.rc, n.report);
    n.replay->set_ambient_offset_c(offset);
    if (auto r = n.replay->CreateScheduler(); !r) return std::unexpected(r.error());
  }
  PublishAll(0);
  return {};
}

size_t Fleet::Route(const dl::Request& q, int64_t now_ns) {
  std::vector<component::RouteNode> views;
  views.reserve(nodes_.size());
  // Drive-log urgency: CRITICAL 1 .. BACKGROUND 4 (qos rank + 1, as ReplayModel reads it);
  // ari UrgencyClass: BACKGROUND 0 .. CRITICAL 3.
  const int rank = std::clamp(static_cast<int>(q.urgency()) - 1, 0, qos::kNumUrgencies - 1);
  const int u = ari_kUrgencyClasses - 1 - rank;
  for (const SimNode& n : nodes_) {
    component::RouteNode v = n.status;
    v.age_ms = (now_ns - n.status_ns) / kNsPerMs;
    for (int c = 0; c < ari_kUrgencyClasses; ++c) v.queue[c] += n.sent_since[c];
    views.push_back(std::move(v));
  }
  std::string session_node;
  if (q.session_id() != 0) {
    if (auto it = session_node_.find(q.session_id()); it != session_node_.end()) {
      session_node = nodes_[it->second].id;
    }
  }
  const component::RouteRequest req{.urgency = static_cast<ari_UrgencyClass>(u),
                                    .session_node = session_node,
                                    .spread_key = q.request_id() * 0x9E3779B97F4A7C15ull};
  auto choice = component::ChooseNode(views, req, o_.routing);
  // No eligible node (all stale: a status period longer than stale_ms): the first one
  // answers, as a lone node answers an unaddressed request.
  const size_t k = choice ? static_cast<size_t>(choice->index) : 0;
  if (q.session_id() != 0) session_node_[q.session_id()] = k;
  ++nodes_[k].sent_since[static_cast<size_t>(u)];
  return k;
}

void Fleet::Play() {
  const int64_t period = std::max<int64_t>(1, o_.status_period_ms) * kNsPerMs;
  int64_t next_status = period;
  for (const dl::Event& e : log_.event()) {
    const int64_t t = MsToNs(e.t_ms());
    for (; next_status <= t; next_status += period) {
      AdvanceAll(next_status);
      PublishAll(next_status);
    }
    AdvanceAll(t);
    if (!e.has_request()) {
      for (SimNode& n : nodes_) n.replay->Apply(e, std::max(t, n.replay->now_ns()));
      continue;
    }
    const size_t k = Route(e.request(), t);
    SimNode& n = nodes_[k];
    n.replay->Apply(e, std::max(t, n.replay->now_ns()));
    n.report.requests.back().node = n.id;
    node_of_.push_back(static_cast<int>(k));
  }
  for (SimNode& n : nodes_) n.replay->RunOut();
}

FleetReport Fleet::Finish(std::chrono::steady_clock::time_point wall0) {
  FleetReport out;
  out.merged = internal::StartReplayReport(log_, o_.node);
  ReplaySummary& m = out.merged.summary;
  m.band_time_s.assign(o_.node.policy->thermal_bands.size(), 0.0);
  double loss_tokens = 0;
  for (SimNode& n : nodes_) {
    const int64_t end = n.replay->Finish();
    internal::SummarizeReplay(end, wall0, o_.node.quality, n.report);
    const ReplaySummary& s = n.report.summary;
    m.duration_s = std::max(m.duration_s, s.duration_s);
    m.busy_s += s.busy_s;
    m.energy_j += s.energy_j;
    if (s.peak_die_c > m.peak_die_c) {
      m.peak_die_c = s.peak_die_c;
      m.peak_t_s = s.peak_t_s;
    }
    for (size_t b = 0; b < m.band_time_s.size() && b < s.band_time_s.size(); ++b) {
      m.band_time_s[b] += s.band_time_s[b];
    }
    for (size_t p = 0; p < 2; ++p) {
      m.precision_busy_s[p] += s.precision_busy_s[p];
      m.precision_tokens[p] += s.precision_tokens[p];
      auto& pd = m.precision_drop_tokens[p];
      const auto& sd = s.precision_drop_tokens[p];
      if (pd.size() < sd.size()) pd.resize(sd.size(), 0);
      for (size_t d = 0; d < sd.size(); ++d) pd[d] += sd[d];
    }
    if (m.drop_busy_s.size() < s.drop_busy_s.size()) {
      m.drop_busy_s.resize(s.drop_busy_s.size(), 0.0);
      m.drop_tokens.resize(s.drop_busy_s.size(), 0);
    }
    for (size_t d = 0; d < s.drop_busy_s.size(); ++d) {
      m.drop_busy_s[d] += s.drop_busy_s[d];
      m.drop_tokens[d] += s.drop_tokens[d];
    }
    const double toks = static_cast<double>(s.precision_tokens[0] + s.precision_tokens[1]);
    m.quality_loss += s.quality_loss * toks;
    loss_tokens += toks;
    m.chunks += s.chunks;
    m.parks += s.parks;
    m.resumes += s.resumes;
    m.park_s += s.park_s;
    m.memory_band_time_s += s.memory_band_time_s;
    out.node_ids.push_back(n.id);
    out.requests_per_node.push_back(static_cast<int>(n.report.requests.size()));
  }
  if (loss_tokens > 0) m.quality_loss /= loss_tokens;
  // Requests back in log order: the k-th request event went to node node_of_[k], and
  // each node's report lists its requests in arrival order.
  std::vector<size_t> next(nodes_.size(), 0);
  for (int k : node_of_) {
    SimNode& n = nodes_[static_cast<size_t>(k)];
    out.merged.requests.push_back(n.report.requests[next[static_cast<size_t>(k)]++]);
  }
  out.merged.classes = SummarizeClasses(out.merged.requests);
  for (SimNode& n : nodes_) out.nodes.push_back(std::move(n.report));
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return out;
}

}  // namespace

Result<std::vector<double>> ParseNumberList(std::string_view text) {
  std::vector<double> out;
  size_t b = 0;
  while (b <= text.size()) {
    const size_t e = std::min(text.find(',', b), text.size());
    const std::string item(text.substr(b, e - b));
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !std::isfinite(v)) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "\"" + std::string(text) + "\": not a comma-separated list of numbers");
    }
    out.push_back(v);
    b = e + 1;
  }
  return out;
}

Result<FleetReport> ReplayFleet(const dl::DriveLog& log, const FleetOptions& o) {
  const auto wall0 = std::chrono::steady_clock::now();
  if (auto r = internal::CheckReplayOptions(o.node); !r) return std::unexpected(r.error());
  if (o.nodes < 1 || o.nodes > kMaxNodes) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "fleet: --nodes must be 1.." + std::to_string(kMaxNodes));
  }
  if (o.ambient_offset_c.size() > static_cast<size_t>(o.nodes)) {
    return MakeError(ErrorCode::kInvalidArgument, "fleet: more ambient offsets than nodes");
  }
  Fleet fleet(log, o);
  if (auto r = fleet.Start(); !r) return std::unexpected(r.error());
  fleet.Play();
  return fleet.Finish(wall0);
}

std::string FleetToText(const FleetReport& r) {
  std::string out;
  char line[256];
  for (size_t i = 0; i < r.nodes.size(); ++i) {
    const ReplayReport& n = r.nodes[i];
    const ClassReport& crit = n.Class(qos::Urgency::kCritical);
    const double busy = n.summary.duration_s > 0 ? n.summary.busy_s / n.summary.duration_s : 0;
    std::snprintf(line, sizeof line,
                  "node %s: %d requests (CRITICAL %d, %d missed) | busy %.0f%% | peak die "
                  "%.1f C | parks %lld\n",
                  r.node_ids[i].c_str(), r.requests_per_node[i], crit.requests,
                  crit.deadline_misses, 100 * busy, n.summary.peak_die_c,
                  static_cast<long long>(n.summary.parks));
    out += line;
  }
  return out + ReportToText(r.merged);
}

}  // namespace ari::sim
