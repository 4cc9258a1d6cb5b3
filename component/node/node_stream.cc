// Node: streaming (ChunkSink -> TokenChunks), and the decision, park and fallback events.
// Admission: node_admission.cc; NodeStatus, signals and the drain: node_serve.cc.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "component/client/chunk_trace_text.h"
#include "component/node/chunk_trace.h"
#include "component/node/node.h"
#include "component/node/node_log.h"
#include "runtime/core/utf8.h"

namespace ari::component {
namespace {

using node_internal::Log;
using node_internal::NowNs;
using node_internal::ToQos;

uint32_t Us(int64_t ns) {
  return ns <= 0 ? 0 : static_cast<uint32_t>(std::min<int64_t>(ns / 1000, UINT32_MAX));
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
