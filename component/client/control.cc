// Controller side of ari/v2/control; see control.h.
#include "component/client/control.h"

#include <chrono>
#include <thread>

namespace ari::component {

Result<std::unique_ptr<ControlSender>> ControlSender::Create(std::shared_ptr<dds::Domain> domain,
                                                             std::string sender_id) {
  if (sender_id.empty() || sender_id.size() >= ari_kClientIdLen) {
    return MakeError(
        ErrorCode::kInvalidArgument,
        "control: sender id must be 1.." + std::to_string(ari_kClientIdLen - 1) + " bytes");
  }
  std::unique_ptr<ControlSender> s(new ControlSender());
  s->sender_id_ = std::move(sender_id);
  auto pp = dds::Participant::Create(std::move(domain));
  if (!pp) return std::unexpected(pp.error());
  s->participant_ = std::move(*pp);
  auto t = dds::Topic::Create(s->participant_, dds::TopicKind::kControl);
  if (!t) return std::unexpected(t.error());
  s->topic_ = std::move(*t);
  auto w = dds::Writer::Create(s->participant_, s->topic_);
  if (!w) {
    if (w.error().dds_rc == DDS_RETCODE_NOT_ALLOWED_BY_SECURITY) {
      return MakeError(ErrorCode::kDds,
                       "control: this identity may not publish on ari/v2/control (not "
                       "allowed by DDS Security: the permissions document grants it only to "
                       "controllers, scripts/security/gen.sh --controller)");
    }
    return std::unexpected(w.error());
  }
  s->writer_ = std::move(*w);
  return s;
}

Result<void> ControlSender::Send(std::string_view node_id, ari_ControlCommand command,
                                 dds::Duration match_timeout) {
  if (node_id.empty() || node_id.size() >= ari_kNodeIdLen) {
    return MakeError(ErrorCode::kInvalidArgument, "control: bad node id");
  }
  const auto until = std::chrono::steady_clock::now() + match_timeout;
  for (;;) {
    auto m = writer_.MatchedReaders();
    if (!m) return std::unexpected(m.error());
    if (*m > 0) break;
    if (std::chrono::steady_clock::now() >= until) {
      return MakeError(ErrorCode::kTimeout,
                       "control: no node reads ari/v2/control (standby not enabled in its "
                       "config, or not permitted to by DDS Security)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ari_Control c{};
  const dds::InstanceKey key = dds::KeyOfName(node_id);
  c.key_hi = key.hi;
  c.key_lo = key.lo;
  dds::CopyFixed(node_id, c.node_id);
  dds::CopyFixed(sender_id_, c.sender_id);
  c.seq = ++seq_;
  c.command = command;
  return writer_.Write(&c);
}

}  // namespace ari::component
