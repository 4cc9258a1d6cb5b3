// The node side of ARI's DDS interface, without any engine logic: subscribes to
// Requests (two readers: the default partition and dds::kCriticalPartition, where
// DDS Security lets only identities granted the CRITICAL right write) and Cancels
// (one receive thread on a waitset, woken for shutdown by a
// guard condition) and publishes TokenChunks and NodeStatus. Whoever owns the
// scheduler hands requests from the callbacks to its queues and calls Publish().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ari.h"
#include "component/client/dds.h"
#include "component/client/error.h"
#include "component/client/function_ref.h"

namespace ari::component {

struct NodeTransportOptions {
  std::string node_id = "ari-node";
  // AUTOMATIC liveliness lease offered by the NodeStatus writer: clients see the node
  // as lost this long after it dies.
  dds::Duration liveliness_lease = dds::kDefaultLivelinessLease;
  // A request is handed on once the requester's TokenChunk reader is matched, so the
  // first chunks of the answer cannot be lost. Until then it waits in a bounded pending
  // list (checked on every match event, never blocking the receive thread); after this
  // long it is handed on with requester_matched = false (the node answers REJECTED).
  dds::Duration requester_match_timeout = std::chrono::seconds(2);
  // Requests waiting for their requester's match at once; more are handed on at once
  // with requester_matched = false and pending_full = true.
  int max_pending_match = 64;
  // Chunks queued while the chunk writer is throttled (see PublishInPlace), preallocated.
  int chunk_outbox = 512;
  // Tests: a KEEP_ALL chunk writer, which a stuck reader throttles (the production KEEP_LAST
  // writer is never throttled on Cyclone 0.10.2: docs/reliability.md "A stuck reader").
  bool chunk_keep_all = false;
};

struct RequestInfo {
  int64_t source_timestamp_ns = 0;  // writer's clock at publication (deadline origin)
  int64_t reception_timestamp_ns = 0;
  bool requester_matched = true;  // false: requester's chunk reader not seen in time
  bool pending_full = false;      // unmatched because the pending-match list was full
  int64_t match_wait_ns = 0;      // time spent in the pending-match list
  bool requester_known = false;   // requester below is valid
  dds_guid_t requester{};         // participant GUID of the writer (identity under DDS Security)
  // Taken by the reader in DDS partition ari-critical (dds::kCriticalPartition), whose
  // writers DDS access control has checked for the CRITICAL right.
  bool critical_partition = false;
};

struct NodeTransportStats {
  uint64_t requests = 0;
  uint64_t critical_partition_requests = 0;  // of which from partition ari-critical
  // Requests that reached a reader under shared memory from a writer of the other
  // partition (iceoryx ignores partitions), dropped there: the right reader has them.
  uint64_t foreign_partition_dropped = 0;
  uint64_t cancels = 0;
  uint64_t chunks = 0;
  uint64_t chunks_loaned = 0;  // written via iceoryx loans
  uint64_t statuses = 0;
  uint64_t receive_errors = 0;
  uint64_t publish_retries = 0;      // chunk writes repeated after a TIMEOUT (back-pressure)
  uint64_t requester_unmatched = 0;  // requests handed on with requester_matched = false
  uint64_t pending_match_max = 0;    // most requests ever waiting for a match at once
  uint64_t for_other_nodes = 0;      // requests ignored: addressed to another node
  uint64_t chunks_queued = 0;        // chunks that went through the outbox (writer throttled)
  uint64_t outbox_max = 0;           // most chunks queued at once
  uint64_t outbox_full = 0;          // chunks refused: the outbox was full
};

class NodeTransport {
 public:
  using RequestHandler = std::function<void(const ari_Request&, const RequestInfo&)>;
  using CancelHandler = std::function<void(const ari_Cancel&)>;
  // A queued chunk that could not be written after the retries (publisher thread).
  using PublishFailureHandler = std::function<void(const Error&, const ari_TokenChunk&)>;

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
  // Same, filling the sample in place (zero copy into a loaned sample under shm). `fill`
  // is called during the call only, possibly more than once (a FunctionRef: no heap,
  // whatever the lambda captures). Never retries on the caller's thread: when the writer
  // is throttled (a write TIMEOUT after max_blocking_time, 100 ms) the chunk goes to a
  // preallocated FIFO outbox, and so does every chunk after it while the outbox is not
  // empty (the order of every stream is kept); a publisher thread writes the outbox with
  // the retries (up to 10 s per chunk) and hands a chunk that still fails to the failure
  // handler. Returns an error only for a chunk not written nor queued (a non-timeout
  // write error; the outbox full: DDS_RETCODE_OUT_OF_RESOURCES).
  Result<void> PublishInPlace(FunctionRef<void(ari_TokenChunk&)> fill);
  // Before Start(): who hears of queued chunks that were finally lost.
  void SetPublishFailureHandler(PublishFailureHandler handler) {
    on_publish_failure_ = std::move(handler);
  }
  // Waits up to `timeout` until the outbox is empty; true when it is.
  bool FlushOutbox(std::chrono::milliseconds timeout);
  // Publishes the node's state (transient-local: late joiners get the latest one).
  Result<void> PublishStatus(const ari_NodeStatus& status);

  const dds::Domain& domain() const { return participant_.domain(); }
  dds_entity_t participant() const { return participant_.handle(); }
  const std::string& node_id() const { return options_.node_id; }
  bool chunk_shared_memory() const { return chunk_writer_.shared_memory(); }
  bool request_shared_memory() const { return request_reader_.shared_memory(); }
  // The reader of partition ari-critical exists. Its absence (the node's permissions
  // lack the subscribe rule: Not Allowed By Security) is not fatal: the node then
  // receives no CRITICAL request through DDS access control; critical_reader_note() says why.
  bool critical_reader() const { return critical_reader_.handle() > 0; }
  const std::string& critical_reader_note() const { return critical_note_; }
  NodeTransportStats stats() const;
  // Request instances disposed by their writer (each cancels its request when live).
  uint64_t disposes() const { return disposes_.load(); }
  // "transport: shared memory on ..." line for start-up logs.
  std::string Describe() const;

 private:
  NodeTransport() = default;
  // The request reader of partition ari-critical and its condition in the waitset;
  // refused by DDS Security: none, critical_note_ says why.
  Result<void> OpenCriticalReader();
  void ReceiveLoop();
  // Takes the waiting requests of one reader (critical: the ari-critical one); hands on
  // those whose requester matched, parks the rest.
  void HandleRequests(bool critical);
  void HandleCancels();
  // take_scratch_[i] from `reader`: dispatch now or park until matched.
  void ReceiveRequest(const dds::Reader& reader, int i);
  // Hands on the parked requests whose requester matched (check_match) or whose wait
  // expired (all of them when flush); returns the time until the next expiry.
  dds::Duration ServicePending(bool check_match, bool flush);
  void Dispatch(const ari_Request& request, RequestInfo info);
  bool RequesterMatched(const dds_guid_t& participant);

  NodeTransportOptions options_;
  // Declaration order = destruction in reverse: entities before the participant.
  dds::Participant participant_;
  dds::Topic request_topic_, chunk_topic_, cancel_topic_, status_topic_;
  dds::Reader request_reader_, critical_reader_, cancel_reader_;
  dds::Writer chunk_writer_, status_writer_;
  dds::ReadCondition request_cond_, critical_cond_, cancel_cond_;
  std::string critical_note_;  // why there is no critical reader (else empty)
  dds::GuardCondition stop_guard_;
  dds::WaitSet waitset_;

  struct Pending {
    ari_Request request{};
    RequestInfo info;
    dds_time_t since = 0;
  };
  // Receive thread only. Preallocated at Create: max_pending_match entries (FIFO).
  std::unique_ptr<Pending[]> pending_;
  int pending_n_ = 0;
  ari_Request take_scratch_[16]{};  // HandleRequests' batch (no allocation per take)
  RequestInfo take_info_[16];
  dds_instance_handle_t take_pub_[16]{};
  bool take_valid_[16]{};     // a request (else a state change: only the key is set)
  bool take_disposed_[16]{};  // the instance was disposed: withdraw the request (after it)

  // The publisher thread's outbox (PublishInPlace): a ring of chunk_outbox samples.
  void PublisherLoop();
  Result<void> WriteWithRetries(const ari_TokenChunk& chunk);
  std::unique_ptr<ari_TokenChunk[]> outbox_;
  size_t outbox_cap_ = 0, outbox_head_ = 0, outbox_n_ = 0;  // guarded by chunk_mutex_
  bool publisher_stop_ = false;                             // guarded by chunk_mutex_
  std::condition_variable outbox_cv_;
  std::thread publisher_;
  PublishFailureHandler on_publish_failure_;
  std::atomic<uint64_t> chunks_queued_{0}, outbox_max_{0}, outbox_full_{0};

  RequestHandler on_request_;
  CancelHandler on_cancel_;
  std::thread thread_;
  std::mutex chunk_mutex_;  // one scratch sample for the copying path
  ari_TokenChunk chunk_scratch_{};
  std::atomic<uint64_t> requests_{0}, critical_requests_{0}, cancels_{0}, statuses_{0},
      receive_errors_{0};
  std::atomic<uint64_t> publish_retries_{0};
  std::atomic<uint64_t> requester_unmatched_{0}, pending_match_max_{0};
  std::atomic<uint64_t> for_other_nodes_{0};
  std::atomic<uint64_t> foreign_partition_{0};  // NodeTransportStats::foreign_partition_dropped
  std::atomic<uint64_t> disposes_{0};           // Request instances disposed by their writer
  dds::InstanceKey status_key_;                 // NodeStatus key: KeyOfName(node_id)
};

}  // namespace ari::component
