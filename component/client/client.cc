// ClientCore: the participant, endpoints and dispatch thread behind a Client (client_core.h).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>

#include "component/client/client_core.h"

namespace ari::component {

using internal::WaitUntil;

namespace {

constexpr dds_attach_t kCookieChunk = 1;
constexpr dds_attach_t kCookieStatus = 2;
constexpr dds_attach_t kCookieLiveliness = 3;
constexpr dds_attach_t kCookieStop = 4;
constexpr dds_attach_t kCookieMatched = 5;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

Result<std::shared_ptr<ClientCore>> ClientCore::Create(std::shared_ptr<dds::Domain> domain,
                                                       const ClientOptions& options) {
  if (options.client_id.empty() || options.client_id.size() >= ari_kClientIdLen) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "client id must be 1.." + std::to_string(ari_kClientIdLen - 1) + " bytes");
  }
  auto c = std::make_shared<ClientCore>();
  c->options_ = options;
  c->random_seed_ = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}() ^
                    static_cast<uint64_t>(dds_time());
  auto pp = dds::Participant::Create(std::move(domain));
  if (!pp) return std::unexpected(pp.error());
  c->participant_ = std::move(*pp);
  using dds::TopicKind;
  dds::Topic* topics[] = {&c->request_topic_, &c->chunk_topic_, &c->cancel_topic_,
                          &c->status_topic_};
  const TopicKind kinds[] = {TopicKind::kRequest, TopicKind::kTokenChunk, TopicKind::kCancel,
                             TopicKind::kNodeStatus};
  for (int i = 0; i < 4; ++i) {
    auto t = dds::Topic::Create(c->participant_, kinds[i]);
    if (!t) return std::unexpected(t.error());
    *topics[i] = std::move(*t);
  }
  auto rw = dds::Writer::Create(c->participant_, c->request_topic_);
  if (!rw) return std::unexpected(rw.error());
  auto cw = dds::Writer::Create(c->participant_, c->cancel_topic_);
  if (!cw) return std::unexpected(cw.error());
  auto cr = dds::Reader::Create(c->participant_, c->chunk_topic_, DDS_SUBSCRIPTION_MATCHED_STATUS);
  if (!cr) return std::unexpected(cr.error());
  auto sr = dds::Reader::Create(c->participant_, c->status_topic_, DDS_LIVELINESS_CHANGED_STATUS);
  if (!sr) return std::unexpected(sr.error());
  c->request_writer_ = std::move(*rw);
  c->cancel_writer_ = std::move(*cw);
  c->chunk_reader_ = std::move(*cr);
  c->status_reader_ = std::move(*sr);
  if (dds_return_t rc =
          dds_set_status_mask(c->request_writer_.handle(), DDS_PUBLICATION_MATCHED_STATUS);
      rc != DDS_RETCODE_OK) {
    return DdsError(rc, "dds_set_status_mask(request writer)");
  }
  auto cc = dds::ReadCondition::Create(c->chunk_reader_);
  if (!cc) return std::unexpected(cc.error());
  auto sc = dds::ReadCondition::Create(c->status_reader_);
  if (!sc) return std::unexpected(sc.error());
  auto g = dds::GuardCondition::Create(c->participant_);
  if (!g) return std::unexpected(g.error());
  auto ws = dds::WaitSet::Create(c->participant_);
  if (!ws) return std::unexpected(ws.error());
  c->chunk_cond_ = std::move(*cc);
  c->status_cond_ = std::move(*sc);
  c->stop_guard_ = std::move(*g);
  c->waitset_ = std::move(*ws);
  for (auto [e, cookie] : {std::pair{c->chunk_cond_.handle(), kCookieChunk},
                           std::pair{c->status_cond_.handle(), kCookieStatus},
                           std::pair{c->status_reader_.handle(), kCookieLiveliness},
                           std::pair{c->stop_guard_.handle(), kCookieStop},
                           std::pair{c->request_writer_.handle(), kCookieMatched},
                           std::pair{c->chunk_reader_.handle(), kCookieMatched}}) {
    if (auto r = c->waitset_.Attach(e, cookie); !r) return std::unexpected(r.error());
  }
  if (auto r = c->OpenCriticalWriter(); !r) return std::unexpected(r.error());
  c->thread_ = std::thread([raw = c.get()] { raw->Dispatch(); });
  return c;
}

Result<void> ClientCore::OpenCriticalWriter() {
  auto w = dds::Writer::Create(participant_, request_topic_, dds::kDefaultLivelinessLease,
                               dds::kCriticalPartition);
  if (!w) {
    if (w.error().dds_rc != DDS_RETCODE_NOT_ALLOWED_BY_SECURITY) return std::unexpected(w.error());
    critical_refused_ = w.error().message;  // no CRITICAL right: the rest still works
    return {};
  }
  critical_writer_ = std::move(*w);
  if (dds_return_t rc =
          dds_set_status_mask(critical_writer_.handle(), DDS_PUBLICATION_MATCHED_STATUS);
      rc != DDS_RETCODE_OK) {
    return DdsError(rc, "dds_set_status_mask(critical request writer)");
  }
  return waitset_.Attach(critical_writer_.handle(), kCookieMatched);
}

void ClientCore::Shutdown() {
  if (thread_.joinable()) {
    if (auto r = stop_guard_.Trigger(); !r) {
      std::fprintf(stderr, "ari: client shutdown: %s\n", r.error().ToString().c_str());
    }
    thread_.join();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  for (auto& [id, s] : streams_) {
    std::lock_guard<std::mutex> sl(s->mutex);
    s->closed = true;
    s->cv.notify_all();
  }
  view_cv_.notify_all();
}

void ClientCore::Dispatch() {
  dds_attach_t fired[8];
  for (;;) {
    auto n = waitset_.Wait(fired, dds::Duration::max());
    if (!n) return;
    bool stop = false;
    for (size_t i = 0; i < *n; ++i) {
      switch (fired[i]) {
        case kCookieChunk: OnChunks(); break;
        case kCookieStatus: OnStatus(); break;
        case kCookieLiveliness: OnLiveliness(); break;
        case kCookieStop: stop = true; break;
        case kCookieMatched: OnMatched(); break;
        default: break;
      }
    }
    if (stop) return;
  }
}

void ClientCore::OnChunks() {
  const std::string_view me = options_.client_id;
  for (;;) {
    auto n = chunk_reader_.TakeLoaned(16, [&](const void* sample, const dds_sample_info_t&) {
      if (sample == nullptr) return;
      const auto* c = static_cast<const ari_TokenChunk*>(sample);
      if (dds::FixedView(c->client_id) != me) return;  // another client's answer
      std::shared_ptr<StreamState> s;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = streams_.find(std::string(dds::FixedView(c->request_id)));
        if (it == streams_.end()) return;  // stream already dropped by the app
        s = it->second;
      }
      std::lock_guard<std::mutex> sl(s->mutex);
      s->queue.push_back(*c);
      s->any_chunk = true;
      s->cv.notify_all();
    });
    if (!n || *n == 0) return;
  }
}

void ClientCore::OnStatus() {
  for (;;) {
    auto n = status_reader_.TakeLoaned(
        16,
        [&](const void* sample, const dds_sample_info_t& info) { OnStatusSample(sample, info); },
        true);
    if (!n || *n == 0) return;
  }
}

void ClientCore::OnStatusSample(const void* sample, const dds_sample_info_t& info) {
  if (sample == nullptr) return;
  const auto* s = static_cast<const ari_NodeStatus*>(sample);
  if (!info.valid_data) {  // the node's writer went away (or unregistered): not alive
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [id, k] : nodes_) {
      if (k.status.key_hi != s->key_hi || k.status.key_lo != s->key_lo || !k.alive) continue;
      k.alive = false;
      for (auto& [rid, st] : streams_) {  // its requests fail over (Stream::Next)
        std::lock_guard<std::mutex> sl(st->mutex);
        if (st->node_id != id) continue;
        st->node_lost = true;
        st->lost_node = id;
        st->cv.notify_all();
      }
    }
    ++events_;
    view_cv_.notify_all();
    return;
  }
  auto who = status_reader_.WriterParticipant(info.publication_handle);
  const std::string id(dds::FixedView(s->node_id));
  std::lock_guard<std::mutex> lock(mutex_);
  if (who) node_participant_ = *who;
  ++events_;
  view_.status = *s;
  if (view_.liveliness == NodeLiveliness::kUnknown) view_.liveliness = NodeLiveliness::kAlive;
  KnownNode& k = nodes_[id];
  std::fill(std::begin(k.sent_since), std::end(k.sent_since), 0u);
  k.status = *s;
  k.source_ns = info.source_timestamp;
  k.alive = info.instance_state == DDS_ALIVE_INSTANCE_STATE;
  if (who) k.participant = *who;
  view_cv_.notify_all();
}

void ClientCore::OnLiveliness() {
  auto st = status_reader_.LivelinessChanged();  // reading resets the status
  if (!st) return;
  std::optional<dds_guid_t> gained;
  if (st->alive_count_change > 0 && st->last_publication_handle != 0) {
    if (auto who = status_reader_.WriterParticipant(st->last_publication_handle)) gained = *who;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++events_;
  if (gained) node_participant_ = gained;
  if (st->alive_count == 0) node_participant_.reset();
  view_.alive_writers = st->alive_count;
  if (st->alive_count > 0) {
    view_.liveliness = NodeLiveliness::kAlive;
  } else if (view_.liveliness == NodeLiveliness::kAlive) {
    view_.liveliness = NodeLiveliness::kLost;
    ++view_.lost_events;
    for (auto& [id, s] : streams_) {
      std::lock_guard<std::mutex> sl(s->mutex);
      s->node_lost = true;
      s->cv.notify_all();
    }
  }
  view_cv_.notify_all();
}

void ClientCore::OnMatched() {
  // Reading the statuses resets them; waiters re-check the matches themselves.
  const auto check = [](const char* what, const Result<uint32_t>& r) {
    if (!r) std::fprintf(stderr, "ari client: %s: %s\n", what, r.error().ToString().c_str());
  };
  check("request writer matches", request_writer_.MatchedReaders());
  if (critical_writer_.handle() > 0) {
    check("critical request writer matches", critical_writer_.MatchedReaders());
  }
  check("chunk reader matches", chunk_reader_.MatchedWriters());
  if (participant_.domain().shared_memory_enabled() && NodeReady(std::nullopt, false)) {
    (void)IceoryxReadyAt();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++events_;
  view_cv_.notify_all();
}

Result<Stream> ClientCore::Ask(std::shared_ptr<ClientCore> self, const AskParams& params) {
  std::lock_guard<std::mutex> wl(write_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return MakeError(ErrorCode::kClosed, "client is shut down");
  }
  const uint64_t n = ++counter_;
  char suffix[40];
  std::snprintf(suffix, sizeof suffix, "-%llu-%08x", static_cast<unsigned long long>(n),
                static_cast<unsigned>(SplitMix64(random_seed_ + n) & 0xffffffffu));
  const std::string id = options_.client_id + suffix;
  if (auto r = EncodeRequest(params, id, options_.client_id, &request_scratch_); !r) {
    return std::unexpected(r.error());
  }
  // Instance key: this client's random nonce + the request counter (docs/interface.md).
  request_scratch_.key_hi = SplitMix64(random_seed_);
  request_scratch_.key_lo = n;
  // CRITICAL goes in partition ari-critical: DDS access control carries the right.
  const bool critical = dds::RawEnum(request_scratch_.urgency) == ari_URGENCY_CRITICAL;
  if (critical && critical_writer_.handle() <= 0) {
    return std::unexpected(Error{ErrorCode::kRejected,
                                 "CRITICAL refused by DDS Security: this identity may not "
                                 "write requests in DDS partition ari-critical (" +
                                     critical_refused_ + ")",
                                 DDS_RETCODE_NOT_ALLOWED_BY_SECURITY, ari_STATUS_FORBIDDEN});
  }
  if (auto r = WaitMatched(std::nullopt, critical); !r) return std::unexpected(r.error());
  // Which node answers (docs/routing.md); then wait for that one's endpoints.
  auto target = Route(params, SplitMix64(random_seed_ ^ (n * 0x9E3779B97F4A7C15ull)));
  if (!target) return std::unexpected(target.error());
  if (!target->empty()) {
    if (!dds::CopyFixed(*target, request_scratch_.target_node_id)) {
      return MakeError(ErrorCode::kInvalidArgument, "node id too long: " + *target);
    }
    if (auto r = WaitMatched(*target, critical); !r) return std::unexpected(r.error());
  }
  auto state = std::make_shared<StreamState>();
  state->request_id = id;
  state->node_id = *target;
  state->sent = std::make_unique<ari_Request>(request_scratch_);
  state->pinned = !params.target_node.empty();
  state->restart_ok = params.restart_on_node_loss.value_or(params.urgency == ari_URGENCY_CRITICAL &&
                                                           params.session_id == 0);
  state->key = {request_scratch_.key_hi, request_scratch_.key_lo};
  state->critical = critical;
  dds::Writer& writer = critical ? critical_writer_ : request_writer_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    streams_[id] = state;  // registered before writing: no chunk can be missed
  }
  if (auto r = writer.Write(&request_scratch_); !r) {
    Forget(id);
    return std::unexpected(r.error());
  }
  return Stream(std::move(self), std::move(state));
}

Result<void> ClientCore::Resubmit(StreamState& s) {
  std::lock_guard<std::mutex> wl(write_mutex_);
  if (s.pinned) return MakeError(ErrorCode::kNodeLost, "pinned to the lost node");
  AskParams p;  // what routing reads of a request
  std::memcpy(&p.urgency, &s.sent->urgency, sizeof p.urgency);
  p.session_id = s.sent->session_id;
  if (p.session_id != 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    session_node_.erase(p.session_id);  // its KV died with the node
  }
  auto target = Route(p, SplitMix64(random_seed_ ^ s.key.lo ^ 0x5bd1e995u));
  if (!target) return std::unexpected(target.error());
  if (target->empty() || *target == s.node_id) {
    return MakeError(ErrorCode::kNodeLost, "no other live node to fail over to");
  }
  if (auto r = WaitMatched(*target, s.critical); !r) return std::unexpected(r.error());
  if (!dds::CopyFixed(*target, s.sent->target_node_id)) {
    return MakeError(ErrorCode::kInvalidArgument, "node id too long: " + *target);
  }
  {
    std::lock_guard<std::mutex> sl(s.mutex);
    s.node_id = *target;
    ++s.resubmits;
  }
  // Same instance, same request id, on the writer that sent it first.
  return (s.critical ? critical_writer_ : request_writer_).Write(s.sent.get());
}

Result<void> ClientCore::Cancel(std::string_view request_id) {
  ari_Cancel c{};
  if (request_id.empty() || !dds::CopyFixed(request_id, c.request_id)) {
    return MakeError(ErrorCode::kInvalidArgument, "bad request id for cancel");
  }
  dds::CopyFixed(options_.client_id, c.client_id);
  // Keyed by the request's key when it is one of ours; else (another client's id) by a
  // hash of the id. The node acts on request_id + client_id.
  dds::InstanceKey key = dds::KeyOfName(request_id);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = streams_.find(std::string(request_id)); it != streams_.end()) {
      key = it->second->key;
    }
  }
  c.key_hi = key.hi;
  c.key_lo = key.lo;
  auto r = cancel_writer_.Write(&c);
  if (!r) return r;
  return cancel_writer_.Unregister(&c);  // one cancel per instance: end it now
}

void ClientCore::Forget(const std::string& request_id) {
  ari_Request key{};  // key fields only
  bool critical = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = streams_.find(request_id);
    if (it == streams_.end()) return;  // forgotten already
    key.key_hi = it->second->key.hi;
    key.key_lo = it->second->key.lo;
    critical = it->second->critical;
    streams_.erase(it);
  }
  // End the request's instance on its writer so caches do not grow per request.
  if (auto r = (critical ? critical_writer_ : request_writer_).Unregister(&key); !r) {
    std::fprintf(stderr, "ari client: unregister of %s: %s\n", request_id.c_str(),
                 r.error().ToString().c_str());
  }
}

}  // namespace ari::component
