// Node: the Serve() thread: the periodic NodeStatus, signals (SIGHUP: policy reload;
// SIGTERM / SIGINT: drain) and the shutdown.
#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "component/node/node.h"
#include "component/node/node_log.h"

namespace ari::component {
namespace {

using node_internal::Log;
using node_internal::NowNs;

}  // namespace

void Node::PublishStatus(ari_NodeState state) {
  ari_NodeStatus s{};
  std::lock_guard<std::mutex> sl(status_mu_);
  state_ = state;
  dds::CopyFixed(transport_->node_id(), s.node_id);
  s.state = state;
  s.uptime_ms = static_cast<uint64_t>((NowNs() - start_ns_) / 1'000'000);
  s.status_seq = ++status_seq_;
  s.temperature_c = TemperatureC();
  s.sensor_state = SensorWireState();
  {
    std::lock_guard<std::mutex> l(mu_);
    dds::CopyFixed(std::string_view(decision_text_).substr(0, sizeof s.decision - 1), s.decision);
    const std::string model_fault =
        model_watch_ && model_watch_->changed() ? model_watch_->Check() : std::string();
    const std::string_view reason = model_fault.empty() ? reason_text_ : model_fault;
    dds::CopyFixed(reason.substr(0, sizeof s.reason - 1), s.reason);
    dds::CopyFixed(std::string_view(model_text_).substr(0, sizeof s.model - 1), s.model);
    s.model_hash = model_hash_;
    std::memcpy(s.thermal_band_name, band_name_, sizeof s.thermal_band_name);
  }
  s.thermal_band = thermal_band_.load(std::memory_order_relaxed);
  s.memory_level = static_cast<uint32_t>(memory_band_.load(std::memory_order_relaxed) + 1);
  const auto depths = scheduler_->QueueDepths();
  // ari Urgency index: BACKGROUND 0 .. CRITICAL 3; qos rank: CRITICAL 0 .. BACKGROUND 3.
  for (int r = 0; r < qos::kNumUrgencies; ++r) s.queue_depth[3 - r] = depths[r];
  s.sessions_in_use =
      static_cast<uint32_t>(std::min<size_t>(scheduler_->live_requests(), engine_->num_slots()));
  s.sessions_total = static_cast<uint32_t>(engine_->num_slots());
  s.memory_available_bytes = memory_available_.load();
  s.tokens_per_s = tokens_per_s_;
  s.decode_tokens_per_s = decode_tokens_per_s_.load(std::memory_order_relaxed);
  const std::string_view pack = engine_->has_pack() ? "pack W8A16+W4A8" : "plain (reference)";
  dds::CopyFixed(pack, s.pack);
  s.can_switch_precision = engine_->has_pack();
  const NodeTransportStats ts = transport_->stats();
  s.publish_failures_timeout = publish_failures_timeout_.load();
  s.publish_failures_other = publish_failures_other_.load();
  s.publish_retries = ts.publish_retries;
  s.terminal_undelivered = terminal_undelivered_.load();
  s.requester_unmatched = ts.requester_unmatched;
  s.sessions_spilled = sessions_spilled_.load();
  s.sessions_restored = sessions_restored_.load();
  s.spill_rejected = spill_rejected_.load();
  s.spill_failures = spill_failures_.load();
  s.prefix_hits = prefix_hits_.load();
  s.standby = node_internal::WireStandby(scheduler_->standby_state());
  s.rss_bytes = node_internal::ResidentSetBytes();
  s.standby_entered = standby_entered_.load();
  s.control_ignored = control_ignored_.load();
  if (auto r = transport_->PublishStatus(s); !r) {
    CountPublishFailure(r.error());
    // Logged once: the status is republished every period, the counter keeps counting.
    if (!status_failure_logged_.exchange(true)) {
      Log("NodeStatus not published: %s", r.error().ToString().c_str());
    }
  }
}

Result<void> Node::ReloadPolicy() {
  auto p = qos::LoadPolicyFile(policy_path_);
  if (!p) return MakeError(ErrorCode::kConfig, p.error().ToString());
  if (p->thermal_bands.size() != policy_->thermal_bands.size() ||
      p->memory_bands.size() != policy_->memory_bands.size()) {
    return MakeError(ErrorCode::kConfig, "band count changed: restart the node to apply");
  }
  // The scheduler reads the policy between steps: swap it while its thread is stopped.
  StopScheduler();
  {
    std::lock_guard<std::mutex> l(admit_mu_);
    *policy_ = std::move(*p);
  }
  StartScheduler();
  return {};
}

void Node::RequestStop() { stop_requested_.store(true); }

int Node::Serve(int signal_fd) {
  const int period_ms =
      config_.status_period_ms() ? static_cast<int>(config_.status_period_ms()) : 1000;
  uint64_t last_tokens = tokens_total_.load();
  int64_t last_ns = NowNs();
  bool stop = false;
  while (!stop && !stop_requested_.load()) {
    pollfd pfd{signal_fd, POLLIN, 0};
    const int n = signal_fd >= 0 ? poll(&pfd, 1, std::min(period_ms, 100)) : (usleep(50'000), 0);
    if (n > 0 && (pfd.revents & POLLIN)) {
      signalfd_siginfo si{};
      if (read(signal_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo == SIGHUP) {
          if (auto r = ReloadPolicy(); r) {
            Log("SIGHUP: policy %s reloaded (%s)", policy_path_.c_str(), policy_->name.c_str());
          } else {
            Log("SIGHUP: policy reload failed, keeping the old policy: %s",
                r.error().ToString().c_str());
          }
        } else {
          Log("signal %u: shutting down (%s in-flight requests)", si.ssi_signo,
              config_.shutdown_mode() == config::SHUTDOWN_CANCEL ? "cancel" : "finish");
          stop = true;
        }
      }
    }
    const int64_t now = NowNs();
    if (status_due_.exchange(false)) PublishStatus(ari_NODE_READY);  // a standby transition
    if (now - last_ns >= static_cast<int64_t>(period_ms) * 1'000'000) {
      const uint64_t t = tokens_total_.load();
      tokens_per_s_ = static_cast<float>((t - last_tokens) / ((now - last_ns) * 1e-9));
      last_tokens = t;
      last_ns = now;
      PublishStatus(ari_NODE_READY);
    }
  }
  Drain(signal_fd);
  return 0;
}

void Node::Drain(int signal_fd) {
  draining_.store(true);
  PublishStatus(ari_NODE_DRAINING);
  if (config_.shutdown_mode() == config::SHUTDOWN_FINISH) {
    const int64_t timeout_ns =
        static_cast<int64_t>(config_.shutdown_timeout_ms() ? config_.shutdown_timeout_ms()
                                                           : 30000) *
        1'000'000;
    const int64_t until = NowNs() + timeout_ns;
    // In standby the waiting requests would wait for a RESUME: they end with SHUTDOWN.
    while (scheduler_->live_requests() > 0 && NowNs() < until &&
           scheduler_->standby_state() != qos::StandbyState::kStandby) {
      pollfd pfd{signal_fd, POLLIN, 0};
      if (signal_fd >= 0 && poll(&pfd, 1, 20) > 0) {
        signalfd_siginfo si{};
        if (read(signal_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si) &&
            si.ssi_signo != SIGHUP) {
          Log("second signal: cancelling what remains");
          break;
        }
      } else if (signal_fd < 0) {
        usleep(20'000);
      }
    }
  }
  if (control_) control_->Stop();
  StopScheduler();
  transport_->Stop();  // no more requests after this point
  scheduler_->Shutdown("node shutting down");
  PublishStatus(ari_NODE_STOPPED);
  const NodeTransportStats ts = transport_->stats();
  Log("stopped (%llu tokens served; %llu chunks published, %llu of them via iceoryx loans)",
      static_cast<unsigned long long>(tokens_total_.load()),
      static_cast<unsigned long long>(ts.chunks),
      static_cast<unsigned long long>(ts.chunks_loaned));
  Log("publish: %llu retries, %llu timeouts, %llu other failures, %llu terminals undelivered; "
      "%llu chunks queued behind a throttled writer (at most %llu at once, %llu refused: "
      "outbox full); %llu requesters never matched (at most %llu waiting at once); "
      "%llu requests for other nodes ignored",
      static_cast<unsigned long long>(ts.publish_retries),
      static_cast<unsigned long long>(publish_failures_timeout_.load()),
      static_cast<unsigned long long>(publish_failures_other_.load()),
      static_cast<unsigned long long>(terminal_undelivered_.load()),
      static_cast<unsigned long long>(ts.chunks_queued),
      static_cast<unsigned long long>(ts.outbox_max),
      static_cast<unsigned long long>(ts.outbox_full),
      static_cast<unsigned long long>(ts.requester_unmatched),
      static_cast<unsigned long long>(ts.pending_match_max),
      static_cast<unsigned long long>(ts.for_other_nodes));
  const runtime::EngineCounters ec = engine_->Counters();
  Log("engine: %llu pin failures, %llu refused CPU sets, %llu refused ISA tiers; prefix cache: "
      "%llu hits (%llu prompt tokens not computed), %llu misses",
      static_cast<unsigned long long>(ec.pin_failures),
      static_cast<unsigned long long>(ec.cpu_mask_refusals),
      static_cast<unsigned long long>(ec.isa_refusals),
      static_cast<unsigned long long>(ec.prefix_hits),
      static_cast<unsigned long long>(ec.prefix_tokens),
      static_cast<unsigned long long>(ec.prefix_misses));
}

}  // namespace ari::component
