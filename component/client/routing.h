// The routing rule: which ARI node on the domain answers a request (docs/routing.md).
//
// A pure function of what the nodes last said about themselves (NodeStatus samples,
// validated into NodeViews) and of the request; no DDS, no clock, no state. The client
// library feeds it; ari-sim can feed it simulated nodes.
//
//   std::vector<RouteNode> nodes;           // one per live node, from ParseNodeStatus
//   RouteRequest req{.urgency = ari_URGENCY_CRITICAL};
//   auto choice = ChooseNode(nodes, req, RoutingWeights{});
//   if (choice) target = nodes[choice->index].node_id;
//
// The rule (RoutingWeights are its only numbers):
//   1. Eligible: alive, READY, not stale, the pinned node / model (its name or its
//      content hash, 16 hex digits) if the request pins one, and the session's node if the request
//      continues a session held there.
//   2. CRITICAL: the smallest expected TTFT (ExpectedTtftMs: the queue ahead of it, a
//      busy node's chunk in flight or a whole turn, the node's measured decode rate
//      shared with the turns in progress, slowed by its thermal band).
//   3. Other classes: nodes below the hot band and without memory pressure first (such
//      a node gets them only when every eligible node is hot or under memory pressure);
//      among those the least loaded (queued + busy slots per
//      slot), then the smaller expected TTFT, then a spread by request id so equal
//      nodes share the load.
#pragma once

#include <cstdint>
#include <expected>
#include <span>
#include <string>
#include <string_view>

#include "ari.h"

namespace ari::component {

// One node as routing sees it: a NodeStatus that passed ParseNodeStatus.
struct RouteNode {
  std::string node_id;
  std::string model;                         // model name (NodeStatus.model)
  uint64_t model_hash = 0;                   // its content digest (0 = unknown)
  bool ready = false;                        // NODE_READY
  bool alive = true;                         // DDS liveliness (the client knows it)
  uint32_t queue[ari_kUrgencyClasses] = {};  // waiting requests per UrgencyClass
  uint32_t slots_busy = 0;
  uint32_t slots_total = 0;
  float temperature_c = 0;        // meaningful when sensor_ok
  bool sensor_ok = false;         // SENSOR_OK or SENSOR_SIMULATED
  float tokens_per_s = 0;         // node-wide output now (0 when idle)
  float decode_tokens_per_s = 0;  // one request's recent decode rate there; 0 = none yet
  int64_t age_ms = 0;             // since the sample was written (source timestamp)
  int thermal_band = -1;          // the node governor's band (informational), -1 unknown
  std::string thermal_band_name;  // its name in the node's policy
  uint32_t memory_level = 0;      // memory ladder: 0 = no pressure, k = k-th band (1 mildest)
  bool standby = false;           // memory yield commanded (NodeStatus.standby not NONE):
                                  // non-CRITICAL work waits there for a RESUME
};

// The model hash as routing and ari-cli print it: 16 lower-case hex digits.
std::string ModelHashText(uint64_t hash);

struct RoutingWeights {
  // The bands of config/policy_default.textproto (warm from 70 C, hot from 85 C).
  float warm_celsius = 70;    // from here a node is "warm": slower, still used
  float hot_celsius = 85;     // from here "hot": no new non-CRITICAL work if avoidable
  float warm_slowdown = 1.5;  // expected time multiplier in the warm band
  float hot_slowdown = 3.0;   // ... in the hot band (the governor throttles hard)
  // Decode rate assumed for a node that has not finished a turn yet when no node has
  // (ChooseNode otherwise assumes the fastest measured node's rate).
  float unknown_tokens_per_s = 20;
  float turn_tokens = 64;   // tokens a busy turn still has to go (estimate)
  float chunk_tokens = 8;   // a chunk in flight (what CRITICAL waits when it parks)
  int64_t stale_ms = 3000;  // a sample older than this: node not eligible
};

struct RouteRequest {
  ari_UrgencyClass urgency = ari_URGENCY_NORMAL;
  std::string_view pin_node{};      // "" = any node
  std::string_view pin_model{};     // "" = any model; else a name or ModelHashText
  std::string_view session_node{};  // the node that holds the session's KV ("" = none)
  uint64_t spread_key = 0;          // e.g. a hash of the request id: spreads equal nodes
};

struct RouteChoice {
  int index = -1;               // into the span given to ChooseNode
  double expected_ttft_ms = 0;  // of the chosen node (ExpectedTtftMs)
};

// Why no node could be chosen (a value, not an error: the caller maps it).
enum class NoRoute {
  kNoNodes,       // nothing eligible: none alive, ready and fresh
  kPinnedAbsent,  // the pinned node / model / session node is not eligible
};

// Expected time to first token, ms, of a request of class `urgency` sent to `node` now.
double ExpectedTtftMs(const RouteNode& node, ari_UrgencyClass urgency, const RoutingWeights& w);

std::expected<RouteChoice, NoRoute> ChooseNode(std::span<const RouteNode> nodes,
                                               const RouteRequest& request,
                                               const RoutingWeights& weights);

std::string_view NoRouteName(NoRoute why);

// A NodeStatus sample -> RouteNode, or why it is impossible (negative or NaN rate, busy >
// total slots, a queue beyond any node's capacity, an unknown enum, a timestamp in the
// future, an empty or unterminated node id). `now_ns` and `source_ns` are on one clock
// (DDS source timestamps: wall time); `alive` is the writer's liveliness.
std::expected<RouteNode, std::string> ParseNodeStatus(const ari_NodeStatus& status,
                                                      int64_t source_ns, int64_t now_ns,
                                                      bool alive = true);

}  // namespace ari::component
