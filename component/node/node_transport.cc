#include "component/node/node_transport.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace ari::component {
namespace {

constexpr dds_attach_t kCookieRequest = 1;
constexpr dds_attach_t kCookieCancel = 2;
constexpr dds_attach_t kCookieStop = 3;
constexpr dds_attach_t kCookieMatch = 4;     // chunk writer's PUBLICATION_MATCHED status
constexpr dds_attach_t kCookieCritical = 5;  // request reader of partition ari-critical
constexpr int kPublishRetries = 100;         // x max_blocking_time (100 ms): 10 s

}  // namespace

Result<std::unique_ptr<NodeTransport>> NodeTransport::Create(
    const dds::DomainOptions& domain_options, NodeTransportOptions options) {
  auto domain = dds::Domain::Create(domain_options);
  if (!domain) return std::unexpected(domain.error());
  return Create(std::move(*domain), std::move(options));
}

Result<std::unique_ptr<NodeTransport>> NodeTransport::Create(std::shared_ptr<dds::Domain> domain,
                                                             NodeTransportOptions options) {
  if (options.node_id.empty() || options.node_id.size() >= ari_kNodeIdLen) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "node id must be 1.." + std::to_string(ari_kNodeIdLen - 1) + " bytes");
  }
  std::unique_ptr<NodeTransport> t(new NodeTransport());
  t->options_ = std::move(options);
  t->status_key_ = dds::KeyOfName(t->options_.node_id);
  auto pp = dds::Participant::Create(std::move(domain));
  if (!pp) return std::unexpected(pp.error());
  t->participant_ = std::move(*pp);
  using dds::TopicKind;
  auto rq = dds::Topic::Create(t->participant_, TopicKind::kRequest);
  if (!rq) return std::unexpected(rq.error());
  auto ch = dds::Topic::Create(t->participant_, TopicKind::kTokenChunk);
  if (!ch) return std::unexpected(ch.error());
  auto ca = dds::Topic::Create(t->participant_, TopicKind::kCancel);
  if (!ca) return std::unexpected(ca.error());
  auto st = dds::Topic::Create(t->participant_, TopicKind::kNodeStatus);
  if (!st) return std::unexpected(st.error());
  t->request_topic_ = std::move(*rq);
  t->chunk_topic_ = std::move(*ch);
  t->cancel_topic_ = std::move(*ca);
  t->status_topic_ = std::move(*st);

  auto rr = dds::Reader::Create(t->participant_, t->request_topic_);
  if (!rr) return std::unexpected(rr.error());
  auto cr = dds::Reader::Create(t->participant_, t->cancel_topic_);
  if (!cr) return std::unexpected(cr.error());
  auto cw = dds::Writer::Create(t->participant_, t->chunk_topic_, dds::kDefaultLivelinessLease, {},
                                t->options_.chunk_keep_all);
  if (!cw) return std::unexpected(cw.error());
  auto sw = dds::Writer::Create(t->participant_, t->status_topic_, t->options_.liveliness_lease);
  if (!sw) return std::unexpected(sw.error());
  t->request_reader_ = std::move(*rr);
  t->cancel_reader_ = std::move(*cr);
  t->chunk_writer_ = std::move(*cw);
  t->status_writer_ = std::move(*sw);

  auto rc1 = dds::ReadCondition::Create(t->request_reader_);
  if (!rc1) return std::unexpected(rc1.error());
  auto rc2 = dds::ReadCondition::Create(t->cancel_reader_);
  if (!rc2) return std::unexpected(rc2.error());
  auto guard = dds::GuardCondition::Create(t->participant_);
  if (!guard) return std::unexpected(guard.error());
  auto ws = dds::WaitSet::Create(t->participant_);
  if (!ws) return std::unexpected(ws.error());
  t->request_cond_ = std::move(*rc1);
  t->cancel_cond_ = std::move(*rc2);
  t->stop_guard_ = std::move(*guard);
  t->waitset_ = std::move(*ws);
  if (dds_return_t rc =
          dds_set_status_mask(t->chunk_writer_.handle(), DDS_PUBLICATION_MATCHED_STATUS);
      rc != DDS_RETCODE_OK) {
    return DdsError(rc, "dds_set_status_mask(chunk writer)");
  }
  for (auto [entity, cookie] : {std::pair{t->request_cond_.handle(), kCookieRequest},
                                std::pair{t->cancel_cond_.handle(), kCookieCancel},
                                std::pair{t->stop_guard_.handle(), kCookieStop},
                                std::pair{t->chunk_writer_.handle(), kCookieMatch}}) {
    if (auto r = t->waitset_.Attach(entity, cookie); !r) return std::unexpected(r.error());
  }
  if (auto r = t->OpenCriticalReader(); !r) return std::unexpected(r.error());
  t->options_.max_pending_match = std::max(1, t->options_.max_pending_match);
  t->pending_ = std::make_unique<Pending[]>(static_cast<size_t>(t->options_.max_pending_match));
  t->outbox_cap_ = static_cast<size_t>(std::max(1, t->options_.chunk_outbox));
  t->outbox_ = std::make_unique<ari_TokenChunk[]>(t->outbox_cap_);
  NodeTransport* self = t.get();
  t->publisher_ = std::thread([self] { self->PublisherLoop(); });
  return t;
}

Result<void> NodeTransport::OpenCriticalReader() {
  // CRITICAL requests: partition ari-critical. Under DDS Security the node's own
  // permissions must allow it too; without that rule the node still serves the rest.
  auto crit = dds::Reader::Create(participant_, request_topic_, 0, dds::kCriticalPartition);
  if (!crit) {
    if (crit.error().dds_rc != DDS_RETCODE_NOT_ALLOWED_BY_SECURITY) {
      return std::unexpected(crit.error());
    }
    critical_note_ = crit.error().message;
    return {};
  }
  critical_reader_ = std::move(*crit);
  auto cond = dds::ReadCondition::Create(critical_reader_);
  if (!cond) return std::unexpected(cond.error());
  critical_cond_ = std::move(*cond);
  return waitset_.Attach(critical_cond_.handle(), kCookieCritical);
}

NodeTransport::~NodeTransport() {
  Stop();
  if (!FlushOutbox(std::chrono::milliseconds(2000))) {
    std::fprintf(stderr, "ari: NodeTransport: chunks still queued at shutdown are dropped\n");
  }
  {
    std::lock_guard<std::mutex> lock(chunk_mutex_);
    publisher_stop_ = true;
  }
  outbox_cv_.notify_all();
  if (publisher_.joinable()) publisher_.join();
}

Result<void> NodeTransport::Start(RequestHandler on_request, CancelHandler on_cancel) {
  if (thread_.joinable()) return MakeError(ErrorCode::kClosed, "NodeTransport already started");
  if (!on_request)
    return MakeError(ErrorCode::kInvalidArgument, "NodeTransport: no request handler");
  on_request_ = std::move(on_request);
  on_cancel_ = std::move(on_cancel);
  if (auto r = stop_guard_.TakeTriggered(); !r) return std::unexpected(r.error());
  thread_ = std::thread([this] { ReceiveLoop(); });
  return {};
}

void NodeTransport::Stop() {
  if (!thread_.joinable()) return;
  if (auto r = stop_guard_.Trigger(); !r) {
    std::fprintf(stderr, "ari: NodeTransport::Stop: %s\n", r.error().ToString().c_str());
  }
  thread_.join();
}

void NodeTransport::ReceiveLoop() {
  dds_attach_t fired[5];
  dds::Duration timeout = dds::Duration::max();
  for (;;) {
    auto n = waitset_.Wait(fired, timeout);
    if (!n) {
      receive_errors_.fetch_add(1);
      (void)ServicePending(false, true);  // every parked request gets its answer
      return;                             // the waitset is gone: nothing sensible left to do
    }
    bool stop = false, matched = false;
    for (size_t i = 0; i < *n; ++i) {
      if (fired[i] == kCookieStop) {
        stop = true;
      } else if (fired[i] == kCookieRequest) {
        HandleRequests(false);
      } else if (fired[i] == kCookieCritical) {
        HandleRequests(true);
      } else if (fired[i] == kCookieCancel) {
        HandleCancels();
      } else if (fired[i] == kCookieMatch) {
        // Reading the status resets its trigger; the count itself is not needed.
        dds_publication_matched_status_t st;
        if (dds_get_publication_matched_status(chunk_writer_.handle(), &st) != DDS_RETCODE_OK) {
          receive_errors_.fetch_add(1);
        }
        matched = true;
      }
    }
    timeout = ServicePending(matched, stop);
    if (stop) return;
  }
}

void NodeTransport::HandleRequests(bool critical) {
  // Copy out of the loan first: the match check below talks to Cyclone. Nothing here
  // waits: a request whose requester's chunk reader is not matched yet is parked.
  dds::Reader& reader = critical ? critical_reader_ : request_reader_;
  int got = 0;
  auto n = reader.TakeLoaned(
      16,
      [&](const void* sample, const dds_sample_info_t& info) {
        // Unregister (invalid data, NO_WRITERS): the writer lost interest, normal after a
        // request ends. Dispose: the request is withdrawn; a dispose that arrives before
        // its request was taken only marks the request's instance state. The key is 16
        // bytes, so a key-hash-only dispose from any vendor maps back to it.
        const bool disposed = info.instance_state == DDS_NOT_ALIVE_DISPOSED_INSTANCE_STATE;
        if (sample == nullptr || got >= 16 || (!info.valid_data && !disposed)) return;
        ari_Request& r = take_scratch_[got];
        if (info.valid_data) {
          std::memcpy(&r, sample, sizeof r);
        } else {
          r = ari_Request{};
          r.key_hi = static_cast<const ari_Request*>(sample)->key_hi;
          r.key_lo = static_cast<const ari_Request*>(sample)->key_lo;
        }
        take_valid_[got] = info.valid_data;
        take_disposed_[got] = disposed;
        take_info_[got] = RequestInfo{};
        take_info_[got].source_timestamp_ns = info.source_timestamp;
        take_info_[got].reception_timestamp_ns = dds_time();
        take_info_[got].critical_partition = critical;
        take_pub_[got] = info.publication_handle;
        ++got;
      },
      true);
  if (!n) {
    receive_errors_.fetch_add(1);
    return;
  }
  for (int i = 0; i < got; ++i) {
    if (take_valid_[i]) ReceiveRequest(reader, i);
    if (take_disposed_[i]) {  // Node::OnCancel -> OnDispose (key only)
      disposes_.fetch_add(1);
      ari_Cancel c{};
      c.key_hi = take_scratch_[i].key_hi;
      c.key_lo = take_scratch_[i].key_lo;
      if (on_cancel_) on_cancel_(c);
    }
  }
}

void NodeTransport::ReceiveRequest(const dds::Reader& reader, int i) {
  // Addressed to another node (docs/routing.md): that node answers, this one stays
  // silent. No allocation: compares in place.
  RequestInfo& info = take_info_[i];
  auto who = reader.WriterParticipant(take_pub_[i]);
  if (!who && reader.shared_memory()) {
    // Iceoryx delivers by topic, whatever the partition: a sample of a writer this
    // reader is not matched with (the other partition's) arrives here too. Drop it:
    // the reader of its own partition gets the same sample. (Checked first, so such a
    // copy is not counted again below: component.multi_node_shm.)
    foreign_partition_.fetch_add(1);
    return;
  }
  const std::string_view target = dds::FixedView(take_scratch_[i].target_node_id);
  if (!target.empty() && target != options_.node_id) {
    for_other_nodes_.fetch_add(1);
    return;
  }
  if (who) {
    info.requester = *who;
    info.requester_known = true;
    info.requester_matched = RequesterMatched(*who);
  }
  if (info.requester_matched) {
    Dispatch(take_scratch_[i], info);
  } else if (pending_n_ < options_.max_pending_match) {
    Pending& p = pending_[static_cast<size_t>(pending_n_++)];
    std::memcpy(&p.request, &take_scratch_[i], sizeof p.request);
    p.info = info;
    p.since = dds_time();
    if (static_cast<uint64_t>(pending_n_) > pending_match_max_.load()) {
      pending_match_max_.store(static_cast<uint64_t>(pending_n_));
    }
  } else {
    info.pending_full = true;
    Dispatch(take_scratch_[i], info);
  }
}

dds::Duration NodeTransport::ServicePending(bool check_match, bool flush) {
  const dds_time_t now = dds_time();
  const dds_duration_t limit = dds::ToDds(options_.requester_match_timeout);
  dds_time_t next = DDS_NEVER;
  int kept = 0;
  for (int i = 0; i < pending_n_; ++i) {
    Pending& p = pending_[static_cast<size_t>(i)];
    const bool matched = check_match && RequesterMatched(p.info.requester);
    if (matched || flush || now - p.since >= limit) {
      p.info.requester_matched = matched;
      p.info.match_wait_ns = now - p.since;
      Dispatch(p.request, p.info);
      continue;
    }
    next = std::min(next, p.since + limit);
    if (kept != i) {
      Pending& dst = pending_[static_cast<size_t>(kept)];
      std::memcpy(&dst.request, &p.request, sizeof dst.request);
      dst.info = p.info;
      dst.since = p.since;
    }
    ++kept;
  }
  pending_n_ = kept;
  if (next == DDS_NEVER) return dds::Duration::max();
  return dds::Duration(std::max<dds_time_t>(next - now, 1'000'000));  // >= 1 ms
}

void NodeTransport::Dispatch(const ari_Request& request, RequestInfo info) {
  requests_.fetch_add(1);
  if (info.critical_partition) critical_requests_.fetch_add(1);
  if (!info.requester_matched) requester_unmatched_.fetch_add(1);
  on_request_(request, info);
}

void NodeTransport::HandleCancels() {
  ari_Cancel batch[16];
  int got = 0;
  auto n = cancel_reader_.TakeLoaned(16, [&](const void* sample, const dds_sample_info_t&) {
    if (sample == nullptr || got >= 16) return;  // unregister / dispose of a cancel
    std::memcpy(&batch[got], sample, sizeof batch[0]);
    if (batch[got].request_id[0] == '\0') return;  // not a cancel (empty request id)
    ++got;
  });
  if (!n) {
    receive_errors_.fetch_add(1);
    return;
  }
  for (int i = 0; i < got; ++i) {
    cancels_.fetch_add(1);
    if (on_cancel_) on_cancel_(batch[i]);
  }
}

bool NodeTransport::RequesterMatched(const dds_guid_t& participant) {
  return chunk_writer_.MatchedReaderOf(participant);
}

Result<void> NodeTransport::Publish(const ari_TokenChunk& chunk) {
  return PublishInPlace([&](ari_TokenChunk& dst) { std::memcpy(&dst, &chunk, sizeof dst); });
}

Result<void> NodeTransport::PublishInPlace(FunctionRef<void(ari_TokenChunk&)> fill) {
  ari_TokenChunk key{};  // key fields only
  bool terminal = false;
  std::unique_lock<std::mutex> lock(chunk_mutex_);
  if (outbox_n_ == 0) {
    auto r = chunk_writer_.WriteInPlace(
        [&](void* sample) {
          auto* c = static_cast<ari_TokenChunk*>(sample);
          fill(*c);
          terminal = c->terminal;
          key.key_hi = c->key_hi;
          key.key_lo = c->key_lo;
        },
        &chunk_scratch_);
    if (r) return terminal ? chunk_writer_.Unregister(&key) : Result<void>{};
    if (r.error().dds_rc != DDS_RETCODE_TIMEOUT) return r;
    // A reliable writer whose history is full of unacknowledged samples (a stuck or slow
    // reader, overload) blocked for max_blocking_time and dropped the sample: the chunk
    // goes to the outbox, and the publisher thread retries it off the caller's thread.
  }
  if (outbox_n_ == outbox_cap_) {
    outbox_full_.fetch_add(1);
    return DdsError(DDS_RETCODE_OUT_OF_RESOURCES, "chunk outbox full (" +
                                                      std::to_string(outbox_cap_) +
                                                      " chunks queued: the writer is throttled)");
  }
  ari_TokenChunk& slot = outbox_[(outbox_head_ + outbox_n_) % outbox_cap_];
  fill(slot);
  ++outbox_n_;
  chunks_queued_.fetch_add(1);
  if (outbox_n_ > outbox_max_.load()) outbox_max_.store(outbox_n_);
  lock.unlock();
  outbox_cv_.notify_all();
  return {};
}

Result<void> NodeTransport::WriteWithRetries(const ari_TokenChunk& chunk) {
  // A lost chunk is a gap, a lost terminal breaks "exactly one terminal per request": keep
  // trying for up to kPublishRetries blockings; readers that stopped acknowledging are
  // dropped by their lease meanwhile.
  auto r = chunk_writer_.Write(&chunk);
  for (int attempt = 0; !r && r.error().dds_rc == DDS_RETCODE_TIMEOUT && attempt < kPublishRetries;
       ++attempt) {
    publish_retries_.fetch_add(1);
    r = chunk_writer_.Write(&chunk);
  }
  if (r && chunk.terminal) return chunk_writer_.Unregister(&chunk);
  return r;
}

void NodeTransport::PublisherLoop() {
  std::unique_lock<std::mutex> lock(chunk_mutex_);
  for (;;) {
    outbox_cv_.wait(lock, [this] { return outbox_n_ > 0 || publisher_stop_; });
    if (outbox_n_ == 0) return;  // stop requested and nothing queued
    // The head slot stays put while it is written: producers append behind it.
    const ari_TokenChunk& head = outbox_[outbox_head_];
    lock.unlock();
    Result<void> r = WriteWithRetries(head);
    if (!r && on_publish_failure_) on_publish_failure_(r.error(), head);
    lock.lock();
    outbox_head_ = (outbox_head_ + 1) % outbox_cap_;
    --outbox_n_;
    if (outbox_n_ == 0) outbox_cv_.notify_all();  // FlushOutbox
  }
}

bool NodeTransport::FlushOutbox(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(chunk_mutex_);
  return outbox_cv_.wait_for(lock, timeout, [this] { return outbox_n_ == 0; });
}

Result<void> NodeTransport::PublishStatus(const ari_NodeStatus& status) {
  ari_NodeStatus copy = status;
  if (copy.node_id[0] == '\0') dds::CopyFixed(options_.node_id, copy.node_id);
  copy.key_hi = status_key_.hi;
  copy.key_lo = status_key_.lo;
  auto r = status_writer_.Write(&copy);
  if (r) statuses_.fetch_add(1);
  return r;
}

NodeTransportStats NodeTransport::stats() const {
  const dds::WriterStats w = chunk_writer_.stats();
  NodeTransportStats s;
  s.requests = requests_.load();
  s.critical_partition_requests = critical_requests_.load();
  s.foreign_partition_dropped = foreign_partition_.load();
  s.cancels = cancels_.load();
  s.chunks_queued = chunks_queued_.load();
  s.outbox_max = outbox_max_.load();
  s.outbox_full = outbox_full_.load();
  s.chunks = w.writes;
  s.chunks_loaned = w.loaned_writes;
  s.statuses = statuses_.load();
  s.receive_errors = receive_errors_.load();
  s.publish_retries = publish_retries_.load();
  s.requester_unmatched = requester_unmatched_.load();
  s.pending_match_max = pending_match_max_.load();
  s.for_other_nodes = for_other_nodes_.load();
  return s;
}

std::string NodeTransport::Describe() const {
  std::string s =
      "transport: domain " + std::to_string(domain().id()) + ", " + domain().shared_memory_note();
  s += "; chunk writer shm=" + std::to_string(chunk_shared_memory() ? 1 : 0);
  s += ", request reader shm=" + std::to_string(request_shared_memory() ? 1 : 0);
  s += critical_reader()
           ? "; CRITICAL requests read in DDS partition " + std::string(dds::kCriticalPartition)
           : "; no reader in DDS partition " + std::string(dds::kCriticalPartition) + " (" +
                 critical_note_ + "): CRITICAL only from old clients, never under DDS Security";
  return s;
}

}  // namespace ari::component
