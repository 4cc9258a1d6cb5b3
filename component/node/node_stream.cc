// Node: admission, streaming (ChunkSink -> TokenChunks). NodeStatus, signals and the
// drain: node_serve.cc.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "component/client/chunk_trace_text.h"
#include "component/node/chunk_trace.h"
#include "component/node/node.h"
#include "component/node/node_log.h"
#include "runtime/core/utf8.h"
#include "thermal/clock.h"

namespace ari::component {
namespace {

using node_internal::Log;
using node_internal::NowNs;

int64_t RealtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

qos::Urgency ToQos(ari_UrgencyClass u) {
  switch (dds::RawEnum(u)) {
    case ari_URGENCY_CRITICAL: return qos::Urgency::kCritical;
    case ari_URGENCY_HIGH: return qos::Urgency::kHigh;
    case ari_URGENCY_BACKGROUND: return qos::Urgency::kBackground;
    default: return qos::Urgency::kNormal;
  }
}

uint32_t Us(int64_t ns) {
  return ns <= 0 ? 0 : static_cast<uint32_t>(std::min<int64_t>(ns / 1000, UINT32_MAX));
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

void Node::CountPublishFailure(const Error& error) {
  if (error.dds_rc == DDS_RETCODE_TIMEOUT) {
    publish_failures_timeout_.fetch_add(1);
  } else {
    publish_failures_other_.fetch_add(1);
  }
}

void Node::CheckTerminalPublish(const Result<void>& r, std::string_view request_id) {
  if (r) return;
  CountPublishFailure(r.error());
  terminal_undelivered_.fetch_add(1);
  // The request has no terminal on the wire: NodeStatus.terminal_undelivered says so,
  // and a client-side ChunkLedger reports the id as missing.
  Log("terminal of %.*s undelivered: %s", static_cast<int>(request_id.size()), request_id.data(),
      r.error().ToString().c_str());
}

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

void Node::OnChunk(const qos::ChunkEvent& ev) {
  // The scheduler thread, once per chunk: no heap allocation (ids, decision and the log
  // line are copied into fixed buffers; docs/reliability.md "Allocations on the real-time
  // path").
  const int64_t now = NowNs();
  if (ev.ran.prefix_tokens > 0) ++prefix_hits_;
  char rid[sizeof(ari_TokenChunk::request_id)], cid[sizeof(ari_TokenChunk::client_id)];
  char decision[sizeof(ari_TokenChunk::decision)];
  RequestKey key;
  uint32_t seq = 0;
  ari_ChunkTiming timing{};
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = live_.find(ev.id);
    if (it == live_.end()) return;
    LiveRequest& lr = it->second;
    if (lr.first_token_ns < 0 && !ev.tokens.empty()) lr.first_token_ns = now;
    lr.tokens += static_cast<uint32_t>(ev.tokens.size());
    dds::CopyFixed(lr.request_id, rid);
    dds::CopyFixed(lr.client_id, cid);
    dds::CopyFixed(std::string_view(decision_text_).substr(0, sizeof decision - 1), decision);
    key = lr.key;
    seq = lr.seq;
    if (lr.first_token_ns >= 0) {
      timing.time_to_first_token_us = Us(lr.first_token_ns - lr.admitted_ns);
      const double secs = static_cast<double>(now - lr.first_token_ns) * 1e-9;
      timing.tokens_per_s = secs > 0 ? static_cast<float>((lr.tokens - 1) / secs) : 0.0f;
    }
    timing.tokens_generated = lr.tokens;
  }
  tokens_total_.fetch_add(ev.tokens.size());
  std::string_view text = ev.text;
  size_t tok = 0;
  uint32_t published = 0;
  Result<void> failed;  // the first failed write of this event (no allocation when none)
  while (published == 0 || !text.empty() || tok < ev.tokens.size()) {
    const size_t cut = runtime::Utf8Prefix(text, ari_kChunkTextLen - 1);
    const size_t ntok = std::min<size_t>(ev.tokens.size() - tok, ari_kChunkMaxTokens);
    auto r = transport_->PublishInPlace([&](ari_TokenChunk& c) {
      c = ari_TokenChunk{};
      c.key_hi = key.first;
      c.key_lo = key.second;
      std::memcpy(c.request_id, rid, sizeof c.request_id);
      std::memcpy(c.client_id, cid, sizeof c.client_id);
      c.sequence_number = seq + published;
      c.terminal = false;
      c.status = ari_STATUS_OK;
      std::memcpy(c.text, text.data(), cut);
      c.text_len = static_cast<uint32_t>(cut);
      for (size_t i = 0; i < ntok; ++i) c.token_ids[i] = ev.tokens[tok + i];
      c.n_tokens = static_cast<uint32_t>(ntok);
      c.timing = timing;
      std::memcpy(c.decision, decision, sizeof c.decision);
      FillChunkTrace(ev, c);
    });
    if (!r) {
      CountPublishFailure(r.error());
      if (failed) failed = std::move(r);
    }
    text.remove_prefix(cut);
    tok += ntok;
    ++published;
  }
  char trace[kChunkTraceTextCapacity];
  FormatChunkTraceTo(ev, trace, sizeof trace);
  Log("chunk %s #%u: %zu tokens, %.2f ms | %s", rid, seq, ev.tokens.size(),
      static_cast<double>(ev.compute_ns) * 1e-6, trace);
  bool log_failure = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = live_.find(ev.id); it != live_.end()) {
      it->second.seq = seq + published;
      log_failure = !failed && !it->second.publish_failed;
      if (!failed) it->second.publish_failed = true;
    }
  }
  if (log_failure) {  // once per request; every failure is counted in NodeStatus
    Log("chunk %s #%u undelivered (a gap in its stream): %s", rid, seq,
        failed.error().ToString().c_str());
  }
}

void Node::OnTerminal(const qos::TerminalEvent& ev) {
  // The scheduler thread: no heap allocation for a free-text request (the decision and the
  // message stay in fixed buffers; a response format's verdict may allocate).
  LiveRequest lr;
  char decision[sizeof(ari_TokenChunk::decision)];
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = live_.find(ev.id);
    if (it == live_.end()) return;
    dds::CopyFixed(std::string_view(decision_text_).substr(0, sizeof decision - 1), decision);
    lr = std::move(it->second);
    live_.erase(it);
    by_request_id_.erase(lr.request_id);
    EraseKey(lr.key, ev.id);
  }
  const int64_t now = NowNs();
  ari_ChunkStatus status = WireStatus(ev.status);
  std::string_view message = ev.message;
  if (ev.status == qos::TerminalStatus::kDone && ev.deadline_missed) {
    message = "deadline missed; finished degraded";
  }
  ari_FormatState format = ari_FORMAT_NONE;
  FormatVerdict fv;
  if (lr.constraint >= 0) {  // the scheduler no longer touches the constraint
    fv = JudgeFormat(*structured_->pool().Get(lr.constraint), status, message);
    structured_->pool().Release(lr.constraint);
    format = fv.state;
    message = fv.message;
    if (fv.dead_end) status = ari_STATUS_FAILED;  // docs/interface.md "Structured output"
  }
  const std::string_view sname = qos::TerminalStatusName(ev.status);
  const std::string_view uname = qos::UrgencyName(ToQos(lr.urgency));
  Log("%s %.*s (%.*s): %u tokens, %.*s", lr.request_id.c_str(), static_cast<int>(sname.size()),
      sname.data(), static_cast<int>(uname.size()), uname.data(), lr.tokens,
      static_cast<int>(message.size()), message.data());
  if (lr.first_token_ns >= 0 && lr.tokens > 8 && now > lr.first_token_ns) {  // routing's speed
    const auto rate =
        static_cast<float>((lr.tokens - 1) / (static_cast<double>(now - lr.first_token_ns) * 1e-9));
    const float old = decode_tokens_per_s_.load(std::memory_order_relaxed);
    decode_tokens_per_s_.store(old > 0 ? 0.75f * old + 0.25f * rate : rate,
                               std::memory_order_relaxed);
  }
  auto r = transport_->PublishInPlace([&](ari_TokenChunk& c) {
    c = ari_TokenChunk{};
    c.key_hi = lr.key.first;
    c.key_lo = lr.key.second;
    dds::CopyFixed(lr.request_id, c.request_id);
    dds::CopyFixed(lr.client_id, c.client_id);
    c.sequence_number = lr.seq;
    c.terminal = true;
    c.status = status;
    dds::CopyFixed(message.substr(0, runtime::Utf8Prefix(message, sizeof c.message - 1)),
                   c.message);
    c.timing.queue_wait_us = Us(ev.queue_wait_ns);
    c.timing.time_to_first_token_us = Us(ev.first_token_ns);
    c.timing.tokens_generated = static_cast<uint32_t>(std::max(0, ev.tokens_generated));
    if (lr.first_token_ns >= 0 && lr.tokens > 1) {
      c.timing.tokens_per_s = static_cast<float>(
          (lr.tokens - 1) / (static_cast<double>(now - lr.first_token_ns) * 1e-9));
    }
    std::memcpy(c.decision, decision, sizeof c.decision);
    c.format_state = format;
  });
  CheckTerminalPublish(r, lr.request_id);
}

void Node::OnDecision(const qos::Decision& d, int64_t /*now_ns*/) {
  // The scheduler thread: the texts are built in fixed buffers and copied into
  // decision_text_ / reason_text_, whose capacity is reserved at start (no allocation).
  char knobs[160];
  qos::FormatKnobs(d.knobs, knobs, sizeof knobs);
  char raw[256];
  const std::string_view urgency = qos::UrgencyName(d.urgency);
  if (d.idle) {
    std::snprintf(raw, sizeof raw, "idle");
  } else {
    std::snprintf(raw, sizeof raw, "%.*s: %s", static_cast<int>(urgency.size()), urgency.data(),
                  knobs);
  }
  // A plain GGUF has no precision to switch: the text does not claim one.
  char text[kDecisionTextCapacity], reason[kReasonTextCapacity];
  const std::string_view tv(text, ShownDecisionTo(raw, engine_->has_pack(), text, sizeof text));
  const std::string_view rv(
      reason, ShownDecisionTo(d.Reason(), engine_->has_pack(), reason, sizeof reason));
  thermal_band_.store(d.thermal_band, std::memory_order_relaxed);
  memory_band_.store(d.memory_band, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> l(mu_);
    const auto band = static_cast<size_t>(d.thermal_band);
    std::string_view name;  // a view of the policy's name: no copy, no allocation
    if (band < policy_->thermal_bands.size()) name = policy_->thermal_bands[band].name;
    std::memset(band_name_, 0, sizeof band_name_);
    std::memcpy(band_name_, name.data(), std::min(name.size(), sizeof band_name_ - 1));
    if (tv == decision_text_ && rv == reason_text_) return;
    decision_text_.assign(tv);
    reason_text_.assign(rv);
  }
  Log("decision %s | %s", text, reason);
  const ari_NodeState st = [this] {
    std::lock_guard<std::mutex> l(status_mu_);
    return state_;
  }();
  PublishStatus(st);
}

void Node::OnPark(const qos::ParkEvent& ev) {
  // The scheduler thread; parks are rare (a higher class arrived, a session evicted).
  const std::string_view what = qos::ParkEventName(ev.kind);
  switch (ev.kind) {
    case qos::ParkEventKind::kParked:
    case qos::ParkEventKind::kResumed:
    case qos::ParkEventKind::kRefused:
    case qos::ParkEventKind::kOffloaded:
    case qos::ParkEventKind::kOffloadFailed:
      Log("slot parking: request %llu %.*s (slot %d, for %llu, %.2f ms)%s%.*s",
          static_cast<unsigned long long>(ev.id), static_cast<int>(what.size()), what.data(),
          ev.slot, static_cast<unsigned long long>(ev.for_id), ev.duration_ns / 1e6,
          ev.message.empty() ? "" : ": ", static_cast<int>(ev.message.size()), ev.message.data());
      return;
    case qos::ParkEventKind::kSpilled: ++sessions_spilled_; break;
    case qos::ParkEventKind::kRestored: ++sessions_restored_; break;
    case qos::ParkEventKind::kSpillRejected: ++spill_rejected_; break;
    case qos::ParkEventKind::kSpillFailed: ++spill_failures_; break;
  }
  Log("session %llu %.*s (slot %d, turn %llu, %.2f ms)%s%.*s%s",
      static_cast<unsigned long long>(ev.session), static_cast<int>(what.size()), what.data(),
      ev.slot, static_cast<unsigned long long>(ev.id), ev.duration_ns / 1e6,
      ev.message.empty() ? "" : ": ", static_cast<int>(ev.message.size()), ev.message.data(),
      ev.kind == qos::ParkEventKind::kSpillRejected ? " (ignored: the session restarts fresh)"
      : ev.kind == qos::ParkEventKind::kSpillFailed ? " (its context is dropped)"
                                                    : "");
}

void Node::OnFallback(const qos::FallbackEvent& ev) {
  const std::string fb = fallback_ ? fallback_->name() : "?";
  const std::string why = ShownDecision(std::string(ev.reason), engine_->has_pack());
  std::string model;
  switch (ev.kind) {
    case qos::FallbackEventKind::kEngaged:
      Log("memory ladder: new requests -> fallback model %s (%s; %d running on it) | %.*s",
          fb.c_str(), ev.mapped_now ? "mapped now" : "still mapped", ev.running,
          static_cast<int>(why.size()), why.data());
      model = fb + " (fallback; main " + model_name_ + ")";
      break;
    case qos::FallbackEventKind::kFailed:
      Log("memory ladder: fallback model unusable, new requests stay on %s: %.*s",
          model_name_.c_str(), static_cast<int>(why.size()), why.data());
      model = model_name_;
      break;
    case qos::FallbackEventKind::kDisengaged:
      Log("memory ladder: pressure gone, new requests -> main model %s (%d still running on "
          "fallback %s) | %.*s",
          model_name_.c_str(), ev.running, fb.c_str(), static_cast<int>(why.size()), why.data());
      model = model_name_ + (ev.running > 0 ? " (fallback " + fb + " draining)" : "");
      break;
    case qos::FallbackEventKind::kReleased:
      Log("memory ladder: fallback model %s unmapped (idle) | %.*s", fb.c_str(),
          static_cast<int>(why.size()), why.data());
      model = model_name_;
      break;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    model_text_ = model;
    model_hash_ =
        ev.kind == qos::FallbackEventKind::kEngaged ? fallback_model_hash_ : main_model_hash_;
  }
  const ari_NodeState st = [this] {
    std::lock_guard<std::mutex> l(status_mu_);
    return state_;
  }();
  PublishStatus(st);
}

}  // namespace ari::component
