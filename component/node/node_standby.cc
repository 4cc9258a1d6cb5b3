// Node: memory yield on command (topic ari/v2/control, docs/memory.md "Memory yield").
// The control thread forwards STANDBY / RESUME to the scheduler, which acts at its next
// chunk boundary; the scheduler thread reports what it did (OnStandby) and the Serve()
// thread publishes a NodeStatus at once with the new standby state and the RSS.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "component/node/node.h"
#include "component/node/node_log.h"

namespace ari::component {

namespace node_internal {

uint64_t ResidentSetBytes() {
  // /proc/self/statm: "size resident shared ..." in pages. A fixed buffer: no allocation.
  const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  if (::close(fd) != 0 || n <= 0) return 0;
  buf[n] = '\0';
  char* end = nullptr;
  std::strtoull(buf, &end, 10);  // size
  const unsigned long long resident = std::strtoull(end, nullptr, 10);
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<uint64_t>(resident) * static_cast<uint64_t>(page) : 0;
}

ari_StandbyState WireStandby(qos::StandbyState s) {
  switch (s) {
    case qos::StandbyState::kActive: return ari_STANDBY_NONE;
    case qos::StandbyState::kEntering: return ari_STANDBY_ENTERING;
    case qos::StandbyState::kStandby: return ari_STANDBY_IN;
    case qos::StandbyState::kResuming: return ari_STANDBY_RESUMING;
  }
  return ari_STANDBY_NONE;
}

}  // namespace node_internal

using node_internal::Log;
using node_internal::ResidentSetBytes;

Result<void> Node::CheckStandbyConfig() const {
  const config::StandbyConfig& sb = config_.standby();
  if (!sb.enabled() || dds_security_ || sb.accept_without_security()) return {};
  return MakeError(ErrorCode::kConfig,
                   "standby.enabled without DDS Security: any participant on the network "
                   "could put the node in standby. Configure DDS Security in the Cyclone "
                   "config (controllers: scripts/security/gen.sh --controller) or, on a "
                   "closed bench only, set standby { accept_without_security: true }");
}

void Node::OnControl(const ari_Control& c) {
  const std::string_view sender = dds::FixedView(c.sender_id);
  const bool standby = c.command == ari_CONTROL_STANDBY;
  if (!standby && c.command != ari_CONTROL_RESUME) {
    control_ignored_.fetch_add(1);
    Log("control: unknown command %d from %.*s (seq %u) ignored", static_cast<int>(c.command),
        static_cast<int>(sender.size()), sender.data(), c.seq);
    return;
  }
  const qos::StandbyAnswer a = standby ? scheduler_->RequestStandby() : scheduler_->RequestResume();
  if (a != qos::StandbyAnswer::kAccepted) control_ignored_.fetch_add(1);
  const std::string_view what = qos::StandbyAnswerName(a);
  Log("control: %s from %.*s (seq %u): %.*s%s", standby ? "STANDBY" : "RESUME",
      static_cast<int>(sender.size()), sender.data(), c.seq, static_cast<int>(what.size()),
      what.data(),
      a == qos::StandbyAnswer::kInProgress ? " (a RESUME is being carried out: nothing to do)"
      : a == qos::StandbyAnswer::kAlready  ? " (nothing to do)"
                                           : "");
  status_due_.store(true);
}

void Node::OnStandby(const qos::StandbyEvent& ev) {
  // The scheduler thread; transitions are rare (one log line each).
  const std::string_view what = qos::StandbyEventName(ev.kind);
  const auto name = [&] { return static_cast<int>(what.size()); };
  switch (ev.kind) {
    case qos::StandbyEventKind::kEntering:
      Log("standby: entering (%d turns parked; in-flight turns finish first)", ev.parked);
      break;
    case qos::StandbyEventKind::kReleased:
      standby_entered_.fetch_add(1);
      Log("standby: %.*s in %.1f ms: model mapping %.1f MiB, KV %.1f MiB, park areas %.1f "
          "MiB%s; RSS now %.1f MiB",
          name(), what.data(), ev.duration_ns / 1e6, ev.yield.model_bytes / 1048576.0,
          ev.yield.kv_bytes / 1048576.0, ev.yield.park_bytes / 1048576.0,
          ev.yield.page_cache_dropped ? ", page cache dropped" : "",
          ResidentSetBytes() / 1048576.0);
      break;
    case qos::StandbyEventKind::kResumed:
    case qos::StandbyEventKind::kAutoResumed:
      Log("standby: %.*s%s in %.1f ms (%.1f MiB of weights read in); RSS now %.1f MiB", name(),
          what.data(), ev.id ? " for a CRITICAL request" : "", ev.duration_ns / 1e6,
          ev.warmed_bytes / 1048576.0, ResidentSetBytes() / 1048576.0);
      break;
    case qos::StandbyEventKind::kReleaseFailed:
    case qos::StandbyEventKind::kRewarmFailed:
      Log("standby: %.*s: %.*s", name(), what.data(), static_cast<int>(ev.message.size()),
          ev.message.data());
      break;
  }
  status_due_.store(true);
}

}  // namespace ari::component
