// The node side of ARI's DDS interface, without any engine logic: subscribes to
// Requests and Cancels (one receive thread on a waitset, woken for shutdown by a
// guard condition) and publishes TokenChunks and NodeStatus. Whoever owns the
// scheduler hands requests from the callbacks to its queues and calls Publish().
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ari.h"
#include "component/client/dds.h"
#include "component/client/error.h"

namespace ari::component {

struct NodeTransportOptions {
  std::string node_id = "ari-node";
  // AUTOMATIC liveliness lease offered by the NodeStatus writer: clients see the node
  // as lost this long after it dies.
  dds::Duration liveliness_lease = dds::kDefaultLivelinessLease;
  // Before a request is handed on, wait (at most this long) until the requester's
  // TokenChunk reader is matched, so the first chunks of the answer cannot be lost.
  dds::Duration requester_match_timeout = std::chrono::seconds(2);
};

struct RequestInfo {
  int64_t source_timestamp_ns = 0;  // writer's clock at publication (deadline origin)
  int64_t reception_timestamp_ns = 0;
  bool requester_matched = true;  // false: requester's chunk reader not seen in time
  bool requester_known = false;   // requester below is valid
  dds_guid_t requester{};         // participant GUID of the writer (identity under DDS Security)
};

struct NodeTransportStats {
  uint64_t requests = 0;
  uint64_t cancels = 0;
  uint64_t chunks = 0;
  uint64_t chunks_loaned = 0;  // written via iceoryx loans
  uint64_t statuses = 0;
  uint64_t receive_errors = 0;
  uint64_t publish_retries = 0;  // chunk writes repeated after a TIMEOUT (back-pressure)
};

class NodeTransport {
 public:
  using RequestHandler = std::function<void(const ari_Request&, const RequestInfo&)>;
  using CancelHandler = std::function<void(const ari_Cancel&)>;

  // Creates its own Domain from `domain_options`, or uses a shared one.
  static Result<std::unique_ptr<NodeTransport>> Create(const dds::DomainOptions& domain_options,
                                                       NodeTransportOptions options = {});
  static Result<std::unique_ptr<NodeTransport>> Create(std::shared_ptr<dds::Domain> domain,
                                                       NodeTransportOptions options = {});
  ~NodeTransport();
  NodeTransport(const NodeTransport&) = delete;
  NodeTransport& operator=(const NodeTransport&) = delete;

  // Starts the receive thread. Handlers run on it: keep them short (enqueue). A disposed
  // Request instance reaches on_cancel as a Cancel with only its key set (request_id
  // empty).
  Result<void> Start(RequestHandler on_request, CancelHandler on_cancel);
  // Stops and joins the receive thread (idempotent). Writers stay usable.
  void Stop();

  // Publishes one chunk (thread-safe). After a terminal chunk the request's instance
  // is unregistered so caches do not grow with the number of requests served.
  Result<void> Publish(const ari_TokenChunk& chunk);
  // Same, filling the sample in place (zero copy into a loaned sample under shm).
  Result<void> PublishInPlace(const std::function<void(ari_TokenChunk&)>& fill);
  // Publishes the node's state (transient-local: late joiners get the latest one).
  Result<void> PublishStatus(const ari_NodeStatus& status);

  const dds::Domain& domain() const { return participant_.domain(); }
  const std::string& node_id() const { return options_.node_id; }
  bool chunk_shared_memory() const { return chunk_writer_.shared_memory(); }
  bool request_shared_memory() const { return request_reader_.shared_memory(); }
  NodeTransportStats stats() const;
  // Request instances disposed by their writer (each cancels its request when live).
  uint64_t disposes() const { return disposes_.load(); }
  // "transport: shared memory on ..." line for start-up logs.
  std::string Describe() const;

 private:
  NodeTransport() = default;
  void ReceiveLoop();
  void HandleRequests();
  void HandleCancels();
  bool WaitRequesterMatched(const dds_guid_t& participant);
  bool RequesterMatched(const dds_guid_t& participant);

  NodeTransportOptions options_;
  // Declaration order = destruction in reverse: entities before the participant.
  dds::Participant participant_;
  dds::Topic request_topic_, chunk_topic_, cancel_topic_, status_topic_;
  dds::Reader request_reader_, cancel_reader_;
  dds::Writer chunk_writer_, status_writer_;
  dds::ReadCondition request_cond_, cancel_cond_;
  dds::GuardCondition stop_guard_;
  dds::WaitSet waitset_;
  dds::WaitSet match_waitset_;  // chunk writer's PUBLICATION_MATCHED status

  RequestHandler on_request_;
  CancelHandler on_cancel_;
  std::thread thread_;
  std::mutex chunk_mutex_;  // one scratch sample for the copying path
  ari_TokenChunk chunk_scratch_{};
  std::atomic<uint64_t> requests_{0}, cancels_{0}, statuses_{0}, receive_errors_{0};
  std::atomic<uint64_t> publish_retries_{0};
  std::atomic<uint64_t> disposes_{0};  // Request instances disposed by their writer
  dds::InstanceKey status_key_;        // NodeStatus key: KeyOfName(node_id)
};

}  // namespace ari::component
