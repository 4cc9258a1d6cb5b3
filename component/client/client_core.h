// Internal to the client library: the state shared by a Client and its Streams (one
// participant, the request writer, the chunk and status readers, a dispatch thread on a
// waitset) and the per-request stream state. client.cc implements ClientCore,
// client_stream.cc the public Stream and Client on top of it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "component/client/client.h"

namespace ari::component {

struct StreamState {
  std::string request_id;
  std::string node_id;    // the addressed node ("" = any)
  dds::InstanceKey key;   // the request's instance key (Request.key_hi / key_lo)
  bool critical = false;  // written by the ari-critical writer (its instance lives there)
  // Failover (docs/routing.md): the request as sent, for one resubmission.
  std::unique_ptr<ari_Request> sent;
  bool pinned = false;      // AskParams.target_node: never moved
  bool restart_ok = false;  // AskParams.restart_on_node_loss, resolved
  bool any_chunk = false;   // a chunk of the current answer arrived
  int resubmits = 0;
  uint32_t restarts = 0;
  std::string lost_node;  // the node whose loss ended or moved the request
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<ari_TokenChunk> queue;
  bool node_lost = false;
  bool closed = false;  // client shut down
  uint32_t next_seq = 0;
  uint32_t gaps = 0;
};

// A node this client has heard of (its NodeStatus instance).
struct KnownNode {
  ari_NodeStatus status{};  // latest sample
  int64_t source_ns = 0;    // its source timestamp (dds_time clock)
  std::optional<dds_guid_t> participant;
  bool alive = false;       // the instance has a live writer
  bool logged_bad = false;  // an impossible sample was logged (once until a good one)
  // Requests this client sent there since that sample, per UrgencyClass: counted as
  // queued until the node's next status says where they are (no herding onto the node
  // that looked idle in a sample 200 ms old).
  uint32_t sent_since[ari_kUrgencyClasses] = {};
};

namespace internal {

template <class Pred>
bool WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
               dds::Duration timeout, Pred pred) {
  if (timeout == dds::Duration::max() || timeout.count() < 0) {
    cv.wait(lock, pred);
    return true;
  }
  return cv.wait_for(lock, timeout, pred);
}

}  // namespace internal

// ------------------------------------------------------------------ core
class ClientCore {
 public:
  static Result<std::shared_ptr<ClientCore>> Create(std::shared_ptr<dds::Domain> domain,
                                                    const ClientOptions& options);
  ClientCore() = default;
  ClientCore(const ClientCore&) = delete;
  ClientCore& operator=(const ClientCore&) = delete;
  ~ClientCore() { Shutdown(); }
  void Shutdown();
  Result<Stream> Ask(std::shared_ptr<ClientCore> self, const AskParams& params);
  Result<void> Cancel(std::string_view request_id);
  void Forget(const std::string& request_id);
  // Until the node (nullopt: any node) has its request reader (critical: also the one in
  // partition ari-critical) and chunk writer matched, within options_.node_timeout.
  Result<void> WaitMatched(const std::optional<std::string>& node, bool critical);
  // The node to address (routing rule, docs/routing.md); "" = any node.
  Result<std::string> Route(const AskParams& params, uint64_t spread_key);
  // Sends the stream's request once more, to another live node (failover).
  Result<void> Resubmit(StreamState& s);
  std::vector<RouteNode> RouteNodes(int64_t now_ns);  // caller holds mutex_

  ClientOptions options_;
  dds::Participant participant_;
  dds::Topic request_topic_, chunk_topic_, cancel_topic_, status_topic_;
  dds::Writer request_writer_, cancel_writer_;
  // CRITICAL requests: a writer in DDS partition ari-critical (dds::kCriticalPartition),
  // created at connect so it is matched before the first CRITICAL ask. Under DDS
  // Security only identities granted that partition get one; otherwise it stays empty
  // and critical_refused_ holds Cyclone's reason (Ask CRITICAL answers kRejected).
  dds::Writer critical_writer_;
  std::string critical_refused_;
  dds::Reader chunk_reader_, status_reader_;
  dds::ReadCondition chunk_cond_, status_cond_;
  dds::GuardCondition stop_guard_;
  dds::WaitSet waitset_;
  std::thread thread_;

  std::mutex write_mutex_;  // request scratch + id counter + match waitset
  ari_Request request_scratch_{};
  uint64_t counter_ = 0;
  uint64_t random_seed_ = 0;

  mutable std::mutex mutex_;  // streams_, view_, closed_
  std::condition_variable view_cv_;
  std::unordered_map<std::string, std::shared_ptr<StreamState>> streams_;
  NodeView view_;
  std::map<std::string, KnownNode> nodes_;                  // by node id
  std::unordered_map<uint64_t, std::string> session_node_;  // session id -> its node
  bool closed_ = false;
  // Participant of the node that most recently became alive / published its status:
  // Ask sends only when that node's request reader and chunk writer are matched (a
  // dead node's endpoints stay matched until its participant lease expires).
  std::optional<dds_guid_t> node_participant_;
  uint64_t events_ = 0;  // bumped on every match/liveliness/status event
  // Route waits up to created_ + kStatusGrace for the NodeStatus of every matched node.
  static constexpr dds::Duration kStatusGrace = std::chrono::milliseconds(1000);
  std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  // Shared memory: when the current node's endpoints were first seen matched (see
  // dds::kIceoryxSettle); requests wait until the iceoryx connections are up.
  std::optional<dds_guid_t> settle_node_;
  std::chrono::steady_clock::time_point settle_since_{};

 private:
  // The ari-critical writer (critical_writer_ / critical_refused_), attached to the waitset.
  Result<void> OpenCriticalWriter();
  void Dispatch();
  void OnChunks();
  void OnStatus();
  void OnLiveliness();
  void OnMatched();
  bool NodeReady(const std::optional<std::string>& node, bool critical);
  void OnStatusSample(const void* sample, const dds_sample_info_t& info);
  // Under shared memory: records when the current node was first seen matched and
  // returns when iceoryx has surely connected (that time + kIceoryxSettle).
  std::chrono::steady_clock::time_point IceoryxReadyAt();
};

}  // namespace ari::component
