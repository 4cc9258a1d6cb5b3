// Node: admission. A request sample is checked (draining, its requester's chunk reader,
// validation, the permission for a CRITICAL request, duplicate ids, an earlier cancel,
// the client's rate), tokenized, its output format prepared and submitted to the
// scheduler, or refused with a terminal chunk that says why. Cancels and disposed
// instances end live requests. Streaming: node_stream.cc.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "component/client/dds.h"
#include "component/node/node.h"
#include "component/node/node_log.h"
#include "runtime/core/utf8.h"

namespace ari::component {

namespace node_internal {

qos::Urgency ToQos(ari_UrgencyClass u) {
  switch (dds::RawEnum(u)) {
    case ari_URGENCY_CRITICAL: return qos::Urgency::kCritical;
    case ari_URGENCY_HIGH: return qos::Urgency::kHigh;
    case ari_URGENCY_BACKGROUND: return qos::Urgency::kBackground;
    default: return qos::Urgency::kNormal;
  }
}

}  // namespace node_internal

namespace {

using node_internal::Log;
using node_internal::NowNs;
using node_internal::ToQos;

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The scheduler's request for an admitted one; its deadline counts from the sample's
// source timestamp when there is one.
qos::SchedRequest MakeSchedRequest(const ari_Request& request, const RequestInfo& info, int64_t now,
                                   std::vector<runtime::TokenId> tokens) {
  qos::SchedRequest sr;
  sr.urgency = ToQos(request.urgency);
  sr.prompt = std::move(tokens);
  sr.max_tokens = static_cast<int32_t>(request.max_tokens);
  sr.session_id = request.session_id;
  if (request.deadline_ms > 0) {
    const int64_t age = info.source_timestamp_ns > 0
                            ? std::max<int64_t>(0, RealtimeNs() - info.source_timestamp_ns)
                            : 0;
    sr.deadline_ns = now - age + static_cast<int64_t>(request.deadline_ms) * 1'000'000;
  }
  const ari_SamplingParams& s = request.sampling;
  sr.sampling.temperature = s.temperature;
  sr.sampling.top_p = (s.top_p <= 0.0f) ? 1.0f : s.top_p;
  sr.sampling.top_k = static_cast<int32_t>(std::min<uint32_t>(s.top_k, INT32_MAX));
  sr.sampling.repeat_penalty = s.repetition_penalty <= 0.0f ? 1.0f : s.repetition_penalty;
  sr.sampling.seed = s.seed;
  return sr;
}

}  // namespace

void Node::Refuse(const ari_Request& request, ari_ChunkStatus status, std::string_view message) {
  const std::string_view rid = dds::FixedView(request.request_id);
  Log("refused %.*s: %s %.*s", static_cast<int>(rid.size()), rid.data(),
      status == ari_STATUS_BUSY       ? "BUSY"
      : status == ari_STATUS_INVALID  ? "INVALID"
      : status == ari_STATUS_SHUTDOWN ? "SHUTDOWN"
                                      : "REJECTED",
      static_cast<int>(message.size()), message.data());
  auto r = transport_->PublishInPlace([&](ari_TokenChunk& c) {
    c = ari_TokenChunk{};
    c.key_hi = request.key_hi;
    c.key_lo = request.key_lo;
    std::memcpy(c.request_id, request.request_id, sizeof c.request_id);
    c.request_id[sizeof c.request_id - 1] = '\0';
    std::memcpy(c.client_id, request.client_id, sizeof c.client_id);
    c.client_id[sizeof c.client_id - 1] = '\0';
    c.sequence_number = 0;
    c.terminal = true;
    c.status = status;
    dds::CopyFixed(message.substr(0, runtime::Utf8Prefix(message, sizeof c.message - 1)),
                   c.message);
  });
  CheckTerminalPublish(r, rid);
}

Result<std::vector<runtime::TokenId>> Node::Tokenize(const ari_Request& r) const {
  runtime::Result<std::vector<runtime::TokenId>> ids;
  if (r.n_turns > 0) {
    if (!chat_kind_) return MakeError(ErrorCode::kInvalidArgument, "chat turns: " + chat_error_);
    std::vector<runtime::ChatMessage> messages;
    messages.reserve(r.n_turns);
    for (uint32_t t = 0; t < r.n_turns; ++t) {  // roles were checked by ValidateRequest
      const int32_t role = dds::RawEnum(r.turns[t].role);
      messages.push_back({role == ari_ROLE_SYSTEM ? "system"
                          : role == ari_ROLE_USER ? "user"
                                                  : "assistant",
                          std::string(r.turns[t].text, r.turns[t].text_len)});
    }
    ids = runtime::EncodeChat(*tokenizer_, *chat_kind_, messages);
  } else {
    ids = tokenizer_->Encode(std::string_view(r.prompt, r.prompt_len), runtime::EncodeOptions{});
  }
  if (!ids) return MakeError(ErrorCode::kInvalidArgument, ids.error().ToString());
  if (ids->empty()) return MakeError(ErrorCode::kInvalidArgument, "prompt has no tokens");
  return std::move(*ids);
}

void Node::OnRequest(const ari_Request& request, const RequestInfo& info) {
  if (draining_.load()) return Refuse(request, ari_STATUS_SHUTDOWN, "node is shutting down");
  if (!info.requester_matched) {  // parked by the transport, never blocking the others
    return Refuse(request, ari_STATUS_REJECTED,
                  info.pending_full ? "too many requests waiting for their requester's chunk reader"
                                    : "requester's chunk reader never matched within " +
                                          std::to_string(info.match_wait_ns / 1'000'000) + " ms");
  }
  Verdict v = ValidateRequest(request, limits_);
  if (!v.ok()) return Refuse(request, v.status, v.message);
  if (std::string_view why = CriticalRefusal(request, info); !why.empty()) {
    return Refuse(request, ari_STATUS_FORBIDDEN, why);
  }
  const std::string rid(dds::FixedView(request.request_id));
  const std::string cid(dds::FixedView(request.client_id));
  const int64_t now = NowNs();
  // Refusals are published after mu_ is released (lock order: transport, then mu_).
  ari_ChunkStatus refuse = ari_STATUS_OK;
  std::string why;
  if (!ScreenRequest(rid, cid, now, &refuse, &why)) return;
  if (refuse != ari_STATUS_OK) return Refuse(request, refuse, why);
  auto tokens = Tokenize(request);
  if (!tokens) return Refuse(request, ari_STATUS_INVALID, tokens.error().message);
  if (static_cast<int64_t>(tokens->size()) + request.max_tokens >
      (config_.max_context() ? config_.max_context() : 512)) {
    return Refuse(request, ari_STATUS_INVALID, "prompt tokens + max_tokens exceed the context");
  }

  int32_t slot = -1;  // compiled here, on the receive thread, not on the scheduler's
  if (Verdict f = PrepareFormat(request, &slot); !f.ok()) {
    return Refuse(request, f.status, f.message);
  }
  qos::SchedRequest sr = MakeSchedRequest(request, info, now, std::move(*tokens));
  if (slot >= 0) sr.sampling.constraint = structured_->pool().Get(slot);
  const uint64_t id = AddLive(request, rid, cid, now, slot, sr);
  const qos::Urgency sr_urgency = sr.urgency;
  const qos::SubmitStatus st = [&] {
    std::lock_guard<std::mutex> l(admit_mu_);
    return scheduler_->Submit(std::move(sr));
  }();
  if (st == qos::SubmitStatus::kAdmitted) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    live_.erase(id);
    by_request_id_.erase(rid);
    EraseKey({request.key_hi, request.key_lo}, id);
  }
  structured_->pool().Release(slot);  // no-op for -1
  RefuseNotSubmitted(request, st, sr_urgency);
}

Verdict Node::PrepareFormat(const ari_Request& request, int32_t* slot) {
  auto grammar = structured_->GrammarFor(request.response_format);
  if (!grammar) return {ari_STATUS_INVALID, grammar.error().message};
  if (*grammar == nullptr) return {};
  *slot = structured_->pool().Acquire(std::move(*grammar));
  if (*slot < 0) {
    return {ari_STATUS_BUSY, "constrained requests at their limit (" +
                                 std::to_string(structured_->pool().size()) +
                                 ", structured_output.max_constrained_in_flight)"};
  }
  return {};
}

std::string_view Node::CriticalRefusal(const ari_Request& request, const RequestInfo& info) const {
  if (dds::RawEnum(request.urgency) != ari_URGENCY_CRITICAL) return {};
  // DDS access control: only identities granted ari/v2/request in partition
  // ari-critical can write there (docs/deployment.md "Security"). Without DDS Security
  // the default partition stays open to CRITICAL (clients before the partition).
  if (dds_security_ && !info.critical_partition) {
    return "CRITICAL requests must come in DDS partition ari-critical under DDS Security";
  }
  if (critical_prefixes_.empty()) return {};
  // Defence in depth: only identities listed in security.critical_identity_certs.
  bool allowed = false;
  for (const GuidPrefix6& p : critical_prefixes_) {
    allowed = allowed || (info.requester_known && GuidHasPrefix(info.requester.v, p));
  }
  if (allowed) return {};
  return "CRITICAL not allowed for this client identity (security.critical_identity_certs)";
}

bool Node::ScreenRequest(const std::string& rid, const std::string& cid, int64_t now,
                         ari_ChunkStatus* refuse, std::string* why) {
  std::lock_guard<std::mutex> l(mu_);
  if (by_request_id_.contains(rid)) {
    // Answering would put a second terminal into the live request's stream (same key).
    Log("duplicate of live request %s ignored", rid.c_str());
    return false;
  }
  if (!recent_ids_.Insert(rid)) {
    *refuse = ari_STATUS_REJECTED;
    *why = "duplicate request id";
  } else if (early_cancels_.Contains(rid)) {  // its cancel came first (separate topics)
    early_cancels_.Erase(rid);
    *refuse = ari_STATUS_CANCELLED;
    *why = "cancelled before admission";
  } else if (!rate_->Allow(cid, now)) {
    *refuse = ari_STATUS_REJECTED;
    *why = "rate limit for client " + cid;
  }
  return true;
}

uint64_t Node::AddLive(const ari_Request& request, const std::string& rid, const std::string& cid,
                       int64_t now, int32_t constraint, qos::SchedRequest& sr) {
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    id = next_id_++;
    if (sr.sampling.seed == 0) sr.sampling.seed = 0x9e3779b97f4a7c15ull ^ id;
    LiveRequest lr;
    lr.request_id = rid;
    lr.client_id = cid;
    lr.key = {request.key_hi, request.key_lo};
    lr.urgency = request.urgency;
    lr.admitted_ns = now;
    lr.constraint = constraint;
    live_.emplace(id, std::move(lr));
    by_request_id_.emplace(rid, id);
    by_key_.emplace(RequestKey{request.key_hi, request.key_lo}, id);
  }
  sr.id = id;
  return id;
}

void Node::RefuseNotSubmitted(const ari_Request& request, qos::SubmitStatus st,
                              qos::Urgency urgency) {
  switch (st) {
    case qos::SubmitStatus::kBusy:
      // A CRITICAL request is refused only when no lower-class request is left to evict
      // (qos/request_queue.h): say so, the overload test relies on it.
      return Refuse(request, ari_STATUS_BUSY,
                    urgency == qos::Urgency::kCritical
                        ? "queue full: every queued request is CRITICAL (nothing to evict)"
                        : "queue full");
    case qos::SubmitStatus::kShutdown:
      return Refuse(request, ari_STATUS_SHUTDOWN, "node is shutting down");
    case qos::SubmitStatus::kInvalid:
      return Refuse(request, ari_STATUS_INVALID, "refused by the scheduler");
    default: return Refuse(request, ari_STATUS_REJECTED, qos::SubmitStatusName(st));
  }
}

void Node::OnCancel(const ari_Cancel& cancel) {
  if (cancel.request_id[0] == '\0') return OnDispose(cancel.key_hi, cancel.key_lo);
  const std::string rid(dds::FixedView(cancel.request_id));
  const std::string_view cid = dds::FixedView(cancel.client_id);
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = by_request_id_.find(rid);
    if (it == by_request_id_.end()) {
      // Unknown: finished already, or the cancel overtook its request (the topics are
      // independent): remember it so the request is answered CANCELLED on arrival.
      if (!recent_ids_.Contains(rid)) early_cancels_.Insert(rid);
      return;
    }
    if (live_.at(it->second).client_id != cid) {
      Log("cancel of %s by another client ignored", rid.c_str());
      return;
    }
    id = it->second;
  }
  scheduler_->Cancel(id);
}

void Node::EraseKey(const RequestKey& key, uint64_t id) {
  // Two live requests with one key (a client bug) keep the first's entry.
  if (auto it = by_key_.find(key); it != by_key_.end() && it->second == id) by_key_.erase(it);
}

void Node::OnDispose(uint64_t key_hi, uint64_t key_lo) {
  uint64_t id = 0;
  std::string rid;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = by_key_.find({key_hi, key_lo});
    if (it == by_key_.end()) return;  // finished already: nothing to withdraw
    id = it->second;
    rid = live_.at(id).request_id;
  }
  Log("request %s disposed by its writer: cancelling", rid.c_str());
  scheduler_->Cancel(id);
}

}  // namespace ari::component
