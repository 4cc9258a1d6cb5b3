#include "component/node/node_transport.h"

#include <cstdio>
#include <cstring>
#include <vector>

namespace ari::component {
namespace {

constexpr dds_attach_t kCookieRequest = 1;
constexpr dds_attach_t kCookieCancel = 2;
constexpr dds_attach_t kCookieStop = 3;
constexpr int kPublishRetries = 100;  // x max_blocking_time (100 ms): 10 s

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
  auto cw = dds::Writer::Create(t->participant_, t->chunk_topic_);
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
  auto mws = dds::WaitSet::Create(t->participant_);
  if (!mws) return std::unexpected(mws.error());
  t->request_cond_ = std::move(*rc1);
  t->cancel_cond_ = std::move(*rc2);
  t->stop_guard_ = std::move(*guard);
  t->waitset_ = std::move(*ws);
  t->match_waitset_ = std::move(*mws);
  for (auto [entity, cookie] : {std::pair{t->request_cond_.handle(), kCookieRequest},
                                std::pair{t->cancel_cond_.handle(), kCookieCancel},
                                std::pair{t->stop_guard_.handle(), kCookieStop}}) {
    if (auto r = t->waitset_.Attach(entity, cookie); !r) return std::unexpected(r.error());
  }
  if (dds_return_t rc =
          dds_set_status_mask(t->chunk_writer_.handle(), DDS_PUBLICATION_MATCHED_STATUS);
      rc != DDS_RETCODE_OK) {
    return DdsError(rc, "dds_set_status_mask(chunk writer)");
  }
  if (auto r = t->match_waitset_.Attach(t->chunk_writer_.handle(), 0); !r) {
    return std::unexpected(r.error());
  }
  return t;
}

NodeTransport::~NodeTransport() { Stop(); }

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
  dds_attach_t fired[4];
  for (;;) {
    auto n = waitset_.Wait(fired, dds::Duration::max());
    if (!n) {
      receive_errors_.fetch_add(1);
      return;  // the waitset is gone: nothing sensible left to do
    }
    bool stop = false;
    for (size_t i = 0; i < *n; ++i) {
      if (fired[i] == kCookieStop)
        stop = true;
      else if (fired[i] == kCookieRequest)
        HandleRequests();
      else if (fired[i] == kCookieCancel)
        HandleCancels();
    }
    if (stop) return;
  }
}

void NodeTransport::HandleRequests() {
  // Copy out of the loan before calling back: the handler may take its time and the
  // requester check below talks to Cyclone.
  struct Received {
    ari_Request request{};
    RequestInfo info;
    dds_instance_handle_t publication = 0;
    bool valid = true;      // a request (else a state change: only the key is set)
    bool disposed = false;  // the instance was disposed: withdraw the request (after it)
  };
  std::vector<Received> batch;
  auto n = request_reader_.TakeLoaned(
      16,
      [&](const void* sample, const dds_sample_info_t& info) {
        // Unregister (invalid data, NO_WRITERS): the writer lost interest, normal after a
        // request ends. Dispose: the request is withdrawn; a dispose that arrives before
        // its request was taken only marks the request's instance state. The key is 16
        // bytes, so a key-hash-only dispose from any vendor maps back to it.
        const bool disposed = info.instance_state == DDS_NOT_ALIVE_DISPOSED_INSTANCE_STATE;
        if (sample == nullptr || (!info.valid_data && !disposed)) return;
        Received r;
        if (info.valid_data) {
          std::memcpy(&r.request, sample, sizeof r.request);
        } else {
          r.request.key_hi = static_cast<const ari_Request*>(sample)->key_hi;
          r.request.key_lo = static_cast<const ari_Request*>(sample)->key_lo;
        }
        r.valid = info.valid_data;
        r.disposed = disposed;
        r.info.source_timestamp_ns = info.source_timestamp;
        r.info.reception_timestamp_ns = dds_time();
        r.publication = info.publication_handle;
        batch.push_back(r);
      },
      true);
  if (!n) {
    receive_errors_.fetch_add(1);
    return;
  }
  for (Received& r : batch) {
    if (r.valid) {
      if (auto who = request_reader_.WriterParticipant(r.publication); who) {
        r.info.requester = *who;
        r.info.requester_known = true;
        r.info.requester_matched = WaitRequesterMatched(*who);
      }
      requests_.fetch_add(1);
      on_request_(r.request, r.info);
    }
    if (r.disposed) {  // Node::OnCancel -> OnDispose (key only)
      disposes_.fetch_add(1);
      ari_Cancel c{};
      c.key_hi = r.request.key_hi;
      c.key_lo = r.request.key_lo;
      if (on_cancel_) on_cancel_(c);
    }
  }
}

void NodeTransport::HandleCancels() {
  std::vector<ari_Cancel> batch;
  auto n = cancel_reader_.TakeLoaned(16, [&](const void* sample, const dds_sample_info_t&) {
    if (sample == nullptr) return;  // unregister / dispose of a cancel: nothing to do
    ari_Cancel c;
    std::memcpy(&c, sample, sizeof c);
    if (c.request_id[0] == '\0') return;  // not a cancel (empty request id)
    batch.push_back(c);
  });
  if (!n) {
    receive_errors_.fetch_add(1);
    return;
  }
  for (const ari_Cancel& c : batch) {
    cancels_.fetch_add(1);
    if (on_cancel_) on_cancel_(c);
  }
}

bool NodeTransport::RequesterMatched(const dds_guid_t& participant) {
  return chunk_writer_.MatchedReaderOf(participant);
}

bool NodeTransport::WaitRequesterMatched(const dds_guid_t& participant) {
  const dds_time_t until = dds_time() + dds::ToDds(options_.requester_match_timeout);
  while (!RequesterMatched(participant)) {
    const dds_time_t now = dds_time();
    if (now >= until) return false;
    dds_attach_t fired[1];
    // Woken by the writer's PUBLICATION_MATCHED status; reading the status resets it.
    auto n = match_waitset_.Wait(fired, dds::Duration(until - now));
    if (!n) return false;
    dds_publication_matched_status_t st;
    (void)dds_get_publication_matched_status(chunk_writer_.handle(), &st);
  }
  return true;
}

Result<void> NodeTransport::Publish(const ari_TokenChunk& chunk) {
  return PublishInPlace([&](ari_TokenChunk& dst) { std::memcpy(&dst, &chunk, sizeof dst); });
}

Result<void> NodeTransport::PublishInPlace(const std::function<void(ari_TokenChunk&)>& fill) {
  ari_TokenChunk key{};  // key fields only
  bool terminal = false;
  std::lock_guard<std::mutex> lock(chunk_mutex_);
  auto write = [&] {
    return chunk_writer_.WriteInPlace(
        [&](void* sample) {
          auto* c = static_cast<ari_TokenChunk*>(sample);
          fill(*c);
          terminal = c->terminal;
          key.key_hi = c->key_hi;
          key.key_lo = c->key_lo;
        },
        &chunk_scratch_);
  };
  auto r = write();
  // A reliable writer whose history is full of unacknowledged samples (slow or many
  // readers, overload) blocks for max_blocking_time and then drops the sample with
  // TIMEOUT: a lost chunk is a gap, a lost terminal breaks "exactly one terminal per
  // request". Keep trying (back-pressure on the scheduler) for up to kPublishRetries
  // blockings; readers that stopped acknowledging are dropped by their lease meanwhile.
  for (int attempt = 0; !r && r.error().dds_rc == DDS_RETCODE_TIMEOUT && attempt < kPublishRetries;
       ++attempt) {
    publish_retries_.fetch_add(1);
    r = write();
  }
  if (!r) return r;
  if (terminal) return chunk_writer_.Unregister(&key);
  return {};
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
  return {requests_.load(),       cancels_.load(),  w.writes,
          w.loaned_writes,        statuses_.load(), receive_errors_.load(),
          publish_retries_.load()};
}

std::string NodeTransport::Describe() const {
  std::string s =
      "transport: domain " + std::to_string(domain().id()) + ", " + domain().shared_memory_note();
  s += "; chunk writer shm=" + std::to_string(chunk_shared_memory() ? 1 : 0);
  s += ", request reader shm=" + std::to_string(request_shared_memory() ? 1 : 0);
  return s;
}

}  // namespace ari::component
