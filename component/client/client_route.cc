// ClientCore: which node a request goes to, and when it can be sent (client_core.h).
// NodeReady: the node is alive and matched both ways (the request writer and the chunk
// reader; the CRITICAL partition's writer too for a CRITICAL request). Over iceoryx a newly
// matched node first gets the settle time (IceoryxReadyAt). Route picks the target among
// the nodes with a valid status (routing.h), and WaitMatched waits for a ready node.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "component/client/client_core.h"

namespace ari::component {

using internal::WaitUntil;

namespace {

// dds::kIceoryxSettle; ARI_ICEORYX_SETTLE_MS overrides it (diagnosis only: 0 brings
// the start-up race back, see docs/interface.md "Shared memory").
dds::Duration IceoryxSettle() {
  static const dds::Duration settle = [] {
    const char* env = std::getenv("ARI_ICEORYX_SETTLE_MS");
    if (env == nullptr || *env == '\0') return dds::kIceoryxSettle;
    return dds::Duration(std::chrono::milliseconds(std::atoi(env)));
  }();
  return settle;
}

}  // namespace

std::chrono::steady_clock::time_point ClientCore::IceoryxReadyAt() {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (!node_participant_) return now;
  if (!settle_node_ ||
      std::memcmp(settle_node_->v, node_participant_->v, sizeof settle_node_->v) != 0) {
    settle_node_ = node_participant_;
    settle_since_ = now;
  }
  return settle_since_ + IceoryxSettle();
}

bool ClientCore::NodeReady(const std::optional<std::string>& target, bool critical) {
  std::optional<dds_guid_t> node;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (view_.liveliness != NodeLiveliness::kAlive) return false;
    node = node_participant_;
    if (target) {
      auto it = nodes_.find(*target);
      if (it == nodes_.end() || !it->second.alive) return false;
      node = it->second.participant;
    }
  }
  if (critical && !(node && critical_writer_.MatchedReaderOf(*node))) return false;
  return node && request_writer_.MatchedReaderOf(*node) && chunk_reader_.MatchedWriterOf(*node);
}

std::vector<RouteNode> ClientCore::RouteNodes(int64_t now_ns) {
  std::vector<RouteNode> out;
  out.reserve(nodes_.size());
  for (auto& [id, k] : nodes_) {
    auto v = ParseNodeStatus(k.status, k.source_ns, now_ns, k.alive);
    if (!v) {
      if (!k.logged_bad) {
        std::fprintf(stderr, "ari client: NodeStatus of node '%s' ignored for routing: %s\n",
                     id.c_str(), v.error().c_str());
      }
      k.logged_bad = true;
      continue;
    }
    k.logged_bad = false;
    for (int c = 0; c < ari_kUrgencyClasses; ++c) v->queue[c] += k.sent_since[c];
    out.push_back(std::move(*v));
  }
  return out;
}

Result<std::string> ClientCore::Route(const AskParams& p, uint64_t spread_key) {
  // Just connected: every matched node's NodeStatus (transient-local) arrives within
  // milliseconds of the match. Until each has, a request could go unaddressed and be
  // answered by two nodes, so wait for them (bounded: a request reader that is not a
  // node never sends one).
  const uint32_t readers = request_writer_.MatchedReaders().value_or(0);
  std::unique_lock<std::mutex> lock(mutex_);
  WaitUntil(view_cv_, lock,
            std::max(dds::Duration::zero(),
                     dds::Duration(created_ + kStatusGrace - std::chrono::steady_clock::now())),
            [&] {
              size_t alive = 0;
              for (const auto& [id, k] : nodes_) alive += k.alive ? 1 : 0;
              return closed_ || alive >= readers;
            });
  if (!p.target_node.empty()) {  // pinned: wait for that node's status (it may be starting)
    WaitUntil(view_cv_, lock, options_.node_timeout,
              [&] { return closed_ || nodes_.contains(p.target_node); });
  }
  std::string session_node;
  if (p.session_id != 0) {
    if (auto it = session_node_.find(p.session_id); it != session_node_.end()) {
      session_node = it->second;
    }
  }
  const std::vector<RouteNode> nodes = RouteNodes(dds_time());
  const RouteRequest req{.urgency = p.urgency,
                         .pin_node = p.target_node,
                         .pin_model = p.target_model,
                         .session_node = session_node,
                         .spread_key = spread_key};
  auto choice = ChooseNode(nodes, req, options_.routing);
  if (!choice) {
    // One node (or none heard of yet): it answers whatever its status says, as with a
    // single node on the domain; its own admission decides.
    if (nodes_.size() <= 1 && p.target_node.empty() && p.target_model.empty()) {
      return std::string();
    }
    return MakeError(ErrorCode::kNodeAbsent, std::string(NoRouteName(choice.error())) + " (" +
                                                 std::to_string(nodes_.size()) + " nodes known, " +
                                                 std::to_string(nodes.size()) +
                                                 " with a valid status)");
  }
  std::string id = nodes[static_cast<size_t>(choice->index)].node_id;
  if (p.session_id != 0) session_node_[p.session_id] = id;
  if (const int u = dds::RawEnum(p.urgency); u >= 0 && u < ari_kUrgencyClasses) {
    ++nodes_[id].sent_since[u];
  }
  return id;
}

Result<void> ClientCore::WaitMatched(const std::optional<std::string>& node, bool critical) {
  // Event driven: the dispatcher bumps events_ on every match/liveliness/status change.
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + options_.node_timeout;
  for (;;) {
    uint64_t seen = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seen = events_;
    }
    if (NodeReady(node, critical)) {
      if (!participant_.domain().shared_memory_enabled()) return {};
      // DDS reports the match before RouDi has connected the iceoryx publisher and
      // subscriber of the two sides (dds.h, kIceoryxSettle): samples sent in between
      // are lost. Wait out the rest of the settle time once per node.
      const auto ready_at = IceoryxReadyAt();
      if (ready_at > std::chrono::steady_clock::now()) std::this_thread::sleep_until(ready_at);
      return {};
    }
    std::unique_lock<std::mutex> lock(mutex_);
    if (!view_cv_.wait_until(lock, until, [&] { return events_ != seen || closed_; })) {
      lock.unlock();
      if (critical && NodeReady(node, false)) {
        return MakeError(ErrorCode::kNodeAbsent,
                         "the ARI node has no request reader in DDS partition ari-critical "
                         "matched (its DDS permissions may lack that subscribe rule): it "
                         "cannot receive CRITICAL requests");
      }
      return MakeError(ErrorCode::kNodeAbsent,
                       "no live ARI node with matched request reader and chunk writer on domain " +
                           std::to_string(participant_.domain().id()) + " within " +
                           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              options_.node_timeout)
                                              .count()) +
                           " ms");
    }
    if (closed_) return MakeError(ErrorCode::kClosed, "client is shut down");
  }
}

}  // namespace ari::component
