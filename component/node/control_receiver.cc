// The node's ari/v2/control reader; see control_receiver.h.
#include "component/node/control_receiver.h"

namespace ari::component {
ControlReceiver::~ControlReceiver() { Stop(); }

Result<void> ControlReceiver::Start(std::shared_ptr<dds::Domain> domain) {
  auto r = subscription_.Start(
      std::move(domain), dds::TopicKind::kControl,
      [this](const void* s) { Receive(*static_cast<const ari_Control*>(s)); }, "control");
  if (!r && r.error().dds_rc == DDS_RETCODE_NOT_ALLOWED_BY_SECURITY) {
    return MakeError(ErrorCode::kConfig,
                     "standby.enabled, but the node's DDS Security permissions do not let it "
                     "subscribe to ari/v2/control (scripts/security/gen.sh grants it)");
  }
  return r;
}

void ControlReceiver::Stop() { subscription_.Stop(); }

void ControlReceiver::Receive(const ari_Control& c) {
  if (dds::FixedView(c.node_id) != node_id_) {
    other_nodes_.fetch_add(1);
    return;
  }
  received_.fetch_add(1);
  handler_(c);
}

}  // namespace ari::component
