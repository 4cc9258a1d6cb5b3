// Model-mode replay of one drive log against N simulated nodes (several ECUs on one DDS
// domain, docs/routing.md), each request sent to the node the client library's routing
// rule picks (component/client/routing.h: the same ChooseNode, fed the same fields a
// node publishes in its NodeStatus).
//
// Each node is a whole model-mode replay of its own (sim/replay.h: real scheduler and
// governor, simulated engine, its own RC thermal model, its own clock). They run in
// lock step on the log's time line:
//   - every status_period_ms each node "publishes" a status: queue depth per class,
//     slots in use (live requests, at most the slots), die temperature, the decode
//     rate one request got there lately (EWMA of finished turns, as ari-node keeps it),
//     memory level; what the client routes on is that snapshot, aged, plus the requests
//     it sent to the node since (as ClientCore::RouteNodes counts them);
//   - a request event goes to the chosen node (sessions stick to their node); ambient,
//     memory and CPU-cap events go to every node (ambient + that node's offset: an ECU
//     behind the dashboard runs hotter than one in the trunk);
//   - a node's chunk in progress can run past the time of the next event, as on a real
//     node: the request then waits for it.
// Deterministic for a log and options. No node loss is modeled (failover: the
// component.multi_node test with real processes).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "component/client/routing.h"
#include "sim/drive_log.h"
#include "sim/error.h"
#include "sim/replay.h"

namespace ari::sim {

struct FleetOptions {
  ReplayOptions node;                    // every node's replay settings (policy, cost, slots...)
  int nodes = 2;                         // 1..16
  std::vector<double> ambient_offset_c;  // per node, added to the log's ambient; missing = 0
  component::RoutingWeights routing;
  int64_t status_period_ms = 1000;  // ari-node's status_period_ms default
};

struct FleetReport {
  // All requests in log order (RequestReport::node says where each ran), the classes
  // over them, and a summary over the nodes: sums of busy time, energy, tokens, chunks
  // and parks; the hottest node's peak; quality loss weighted by tokens.
  ReplayReport merged;
  std::vector<std::string> node_ids;  // "n1".."nN"
  std::vector<ReplayReport> nodes;    // each node's own replay (its requests only)
  std::vector<int> requests_per_node;
};

// "a,b,c" -> {a, b, c} (the command lines' --ambient-offsets); a clear error otherwise.
Result<std::vector<double>> ParseNumberList(std::string_view text);

Result<FleetReport> ReplayFleet(const dl::DriveLog& log, const FleetOptions& options);

// One line per node (requests, CRITICAL misses, busy share, peak die temperature) and
// the classes over the fleet.
std::string FleetToText(const FleetReport& report);

}  // namespace ari::sim
