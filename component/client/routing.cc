#include "component/client/routing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "component/client/dds.h"

namespace ari::component {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// A sample stamped later than now by more than this is from a broken clock.
constexpr int64_t kFutureToleranceNs = 1'000'000'000;
// No node queues more than this per class (the node's queues are bounded far lower).
constexpr uint32_t kMaxQueue = 1u << 20;
constexpr uint32_t kMaxSlots = 1u << 16;
constexpr int32_t kMaxBands = 64;
constexpr uint32_t kMaxMemoryLevel = 64;  // no policy has more bands (qos: 16 thermal)

enum class Band { kNormal, kWarm, kHot };

Band ThermalBand(const RouteNode& n, const RoutingWeights& w) {
  if (!n.sensor_ok) return Band::kWarm;  // no reading: assume the worse of the usable bands
  if (n.temperature_c >= w.hot_celsius) return Band::kHot;
  if (n.temperature_c >= w.warm_celsius) return Band::kWarm;
  return Band::kNormal;
}

bool Eligible(const RouteNode& n, const RouteRequest& r, const RoutingWeights& w) {
  if (!n.alive || !n.ready || n.age_ms > w.stale_ms) return false;
  if (!r.pin_node.empty() && n.node_id != r.pin_node) return false;
  if (!r.pin_model.empty() && n.model != r.pin_model &&
      (n.model_hash == 0 || ModelHashText(n.model_hash) != r.pin_model)) {
    return false;
  }
  if (!r.session_node.empty() && n.node_id != r.session_node) return false;
  return true;
}

// Waiting and busy work per slot: what "load" means for load balancing.
double Load(const RouteNode& n) {
  double waiting = 0;
  for (uint32_t q : n.queue) waiting += q;
  return (waiting + n.slots_busy) / std::max<uint32_t>(1, n.slots_total);
}

// A fixed-size NUL-terminated text field -> *out; false when it has no NUL.
bool CopyField(const char* field, size_t cap, std::string* out) {
  const void* nul = std::memchr(field, '\0', cap);
  if (nul == nullptr) return false;
  out->assign(field, static_cast<const char*>(nul));
  return true;
}

}  // namespace

double ExpectedTtftMs(const RouteNode& n, ari_UrgencyClass urgency, const RoutingWeights& w) {
  if (!n.alive || !n.ready) return kInf;
  // One request's rate there, shared with the turns in progress (the cores are).
  const double rate = n.decode_tokens_per_s > 0 ? n.decode_tokens_per_s : w.unknown_tokens_per_s;
  const double token_ms = 1000.0 * (1 + std::min(n.slots_busy, n.slots_total)) / rate;
  // Served before it: every waiting request of its class (FIFO) or higher.
  double ahead = 0;
  for (int c = urgency; c < ari_kUrgencyClasses; ++c) ahead += n.queue[c];
  double wait_tokens = ahead * w.turn_tokens;
  if (n.slots_busy >= n.slots_total) {
    // No free slot: CRITICAL parks the lowest turn at its next chunk boundary; the rest
    // wait for a turn to end.
    wait_tokens += urgency == ari_URGENCY_CRITICAL ? w.chunk_tokens : w.turn_tokens;
  }
  double slowdown = 1;
  switch (ThermalBand(n, w)) {
    case Band::kWarm: slowdown = w.warm_slowdown; break;
    case Band::kHot: slowdown = w.hot_slowdown; break;
    case Band::kNormal: break;
  }
  return (wait_tokens + 1) * token_ms * slowdown;
}

std::expected<RouteChoice, NoRoute> ChooseNode(std::span<const RouteNode> nodes,
                                               const RouteRequest& r,
                                               const RoutingWeights& weights) {
  // A node that has not finished a turn yet is taken to be as fast as the fastest one
  // that has (not as the guess unknown_tokens_per_s): a node that just joined must not
  // look slower than a busy one.
  RoutingWeights w = weights;
  float fastest = 0;
  for (const RouteNode& n : nodes) fastest = std::max(fastest, n.decode_tokens_per_s);
  if (fastest > 0) w.unknown_tokens_per_s = fastest;
  std::vector<int> cand;       // eligible, in node id order (the answer must not depend on
  cand.reserve(nodes.size());  // the order samples arrived in)
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (Eligible(nodes[i], r, w)) cand.push_back(static_cast<int>(i));
  }
  if (cand.empty()) {
    const bool pinned = !r.pin_node.empty() || !r.pin_model.empty() || !r.session_node.empty();
    return std::unexpected(pinned ? NoRoute::kPinnedAbsent : NoRoute::kNoNodes);
  }
  std::sort(cand.begin(), cand.end(),
            [&](int a, int b) { return nodes[a].node_id < nodes[b].node_id; });
  auto ttft = [&](int i) { return ExpectedTtftMs(nodes[i], r.urgency, w); };

  if (r.urgency == ari_URGENCY_CRITICAL) {  // the fastest answer, whatever the load
    int best = cand[0];
    for (int i : cand) {
      if (ttft(i) < ttft(best)) best = i;
    }
    return RouteChoice{best, ttft(best)};
  }
  // Lower classes: avoid hot nodes, nodes under memory pressure and nodes in standby when
  // any other is eligible.
  auto avoid = [&](int i) {
    return ThermalBand(nodes[i], w) == Band::kHot || nodes[i].memory_level > 0 || nodes[i].standby;
  };
  if (!std::all_of(cand.begin(), cand.end(), avoid)) std::erase_if(cand, avoid);
  // Least loaded, then fastest; equal nodes share by spread_key.
  constexpr double kEps = 1e-9;
  auto better = [&](int a, int b) {
    const double la = Load(nodes[a]), lb = Load(nodes[b]);
    if (std::abs(la - lb) > kEps) return la < lb;
    return ttft(a) < ttft(b) - kEps;
  };
  const int best = *std::min_element(cand.begin(), cand.end(), better);
  std::vector<int> ties;
  ties.reserve(cand.size());
  for (int i : cand) {
    if (!better(best, i) && !better(i, best)) ties.push_back(i);
  }
  const int pick = ties[r.spread_key % ties.size()];
  return RouteChoice{pick, ttft(pick)};
}

std::string ModelHashText(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

std::string_view NoRouteName(NoRoute why) {
  switch (why) {
    case NoRoute::kNoNodes: return "no ready node";
    case NoRoute::kPinnedAbsent: break;
  }
  return "the pinned node, model or session node is not ready";
}

std::expected<RouteNode, std::string> ParseNodeStatus(const ari_NodeStatus& s, int64_t source_ns,
                                                      int64_t now_ns, bool alive) {
  RouteNode v;
  if (!CopyField(s.node_id, sizeof s.node_id, &v.node_id) || v.node_id.empty()) {
    return std::unexpected("node_id empty or unterminated");
  }
  if (!CopyField(s.model, sizeof s.model, &v.model)) {
    return std::unexpected("model unterminated");
  }
  if (const int state = dds::RawEnum(s.state);
      state < ari_NODE_STARTING || state > ari_NODE_STOPPED) {
    return std::unexpected("unknown state " + std::to_string(dds::RawEnum(s.state)));
  }
  if (const int sensor = dds::RawEnum(s.sensor_state);
      sensor < ari_SENSOR_OK || sensor > ari_SENSOR_SIMULATED) {
    return std::unexpected("unknown sensor_state " + std::to_string(dds::RawEnum(s.sensor_state)));
  }
  for (float rate : {s.tokens_per_s, s.decode_tokens_per_s}) {
    if (!std::isfinite(rate) || rate < 0) {
      return std::unexpected("decode rate not a rate: " + std::to_string(rate));
    }
  }
  if (s.sessions_total == 0 || s.sessions_total > kMaxSlots ||
      s.sessions_in_use > s.sessions_total) {
    return std::unexpected("sessions " + std::to_string(s.sessions_in_use) + " of " +
                           std::to_string(s.sessions_total));
  }
  for (int c = 0; c < ari_kUrgencyClasses; ++c) {
    if (s.queue_depth[c] > kMaxQueue) {
      return std::unexpected("queue_depth[" + std::to_string(c) + "] " +
                             std::to_string(s.queue_depth[c]));
    }
    v.queue[c] = s.queue_depth[c];
  }
  const bool sensor_ok = s.sensor_state == ari_SENSOR_OK || s.sensor_state == ari_SENSOR_SIMULATED;
  if (sensor_ok && !std::isfinite(s.temperature_c)) {
    return std::unexpected("temperature not a number with a working sensor");
  }
  if (source_ns - now_ns > kFutureToleranceNs) {
    return std::unexpected("timestamp " + std::to_string((source_ns - now_ns) / 1'000'000) +
                           " ms in the future");
  }
  if (s.thermal_band < -1 || s.thermal_band >= kMaxBands || s.memory_level > kMaxMemoryLevel) {
    return std::unexpected("band out of range: thermal " + std::to_string(s.thermal_band) +
                           ", memory level " + std::to_string(s.memory_level));
  }
  if (!CopyField(s.thermal_band_name, sizeof s.thermal_band_name, &v.thermal_band_name)) {
    return std::unexpected("thermal_band_name unterminated");
  }
  v.ready = s.state == ari_NODE_READY;
  v.model_hash = s.model_hash;
  v.thermal_band = s.thermal_band;
  if (s.standby < ari_STANDBY_NONE || s.standby > ari_STANDBY_RESUMING) {
    return std::unexpected("standby state " + std::to_string(static_cast<int>(s.standby)));
  }
  v.memory_level = s.memory_level;
  v.standby = s.standby != ari_STANDBY_NONE;
  v.alive = alive;
  v.slots_busy = s.sessions_in_use;
  v.slots_total = s.sessions_total;
  v.sensor_ok = sensor_ok;
  v.temperature_c = sensor_ok ? s.temperature_c : 0;
  v.tokens_per_s = s.tokens_per_s;
  v.decode_tokens_per_s = s.decode_tokens_per_s;
  v.age_ms = std::max<int64_t>(0, (now_ns - source_ns) / 1'000'000);
  return v;
}

}  // namespace ari::component
