// The node's ari/v2/control reader; see control_receiver.h.
#include "component/node/control_receiver.h"

#include <cstdio>
#include <cstring>

namespace ari::component {
namespace {

constexpr dds_attach_t kCookieData = 1;
constexpr dds_attach_t kCookieStop = 2;

}  // namespace

ControlReceiver::~ControlReceiver() { Stop(); }

Result<void> ControlReceiver::Start(std::shared_ptr<dds::Domain> domain) {
  if (thread_.joinable()) return MakeError(ErrorCode::kInvalidArgument, "control: started twice");
  auto pp = dds::Participant::Create(std::move(domain));
  if (!pp) return std::unexpected(pp.error());
  participant_ = std::move(*pp);
  auto t = dds::Topic::Create(participant_, dds::TopicKind::kControl);
  if (!t) return std::unexpected(t.error());
  topic_ = std::move(*t);
  auto r = dds::Reader::Create(participant_, topic_);
  if (!r) {
    if (r.error().dds_rc == DDS_RETCODE_NOT_ALLOWED_BY_SECURITY) {
      return MakeError(ErrorCode::kConfig,
                       "standby.enabled, but the node's DDS Security permissions do not let it "
                       "subscribe to ari/v2/control (scripts/security/gen.sh grants it)");
    }
    return std::unexpected(r.error());
  }
  reader_ = std::move(*r);
  auto c = dds::ReadCondition::Create(reader_);
  if (!c) return std::unexpected(c.error());
  cond_ = std::move(*c);
  auto g = dds::GuardCondition::Create(participant_);
  if (!g) return std::unexpected(g.error());
  stop_ = std::move(*g);
  auto w = dds::WaitSet::Create(participant_);
  if (!w) return std::unexpected(w.error());
  waitset_ = std::move(*w);
  if (auto a = waitset_.Attach(cond_.handle(), kCookieData); !a) return a;
  if (auto a = waitset_.Attach(stop_.handle(), kCookieStop); !a) return a;
  thread_ = std::thread([this] { ReceiveLoop(); });
  return {};
}

void ControlReceiver::Stop() {
  if (!thread_.joinable()) return;
  if (auto r = stop_.Trigger(); !r) {
    std::fprintf(stderr, "[ari-node] control stop: %s\n", r.error().ToString().c_str());
  }
  thread_.join();
}

void ControlReceiver::ReceiveLoop() {
  dds_attach_t fired[4];
  for (;;) {
    auto n = waitset_.Wait(fired, dds::Duration::max());
    if (!n) {
      std::fprintf(stderr, "[ari-node] control: %s\n", n.error().ToString().c_str());
      return;
    }
    for (size_t i = 0; i < *n; ++i) {
      if (fired[i] == kCookieStop) return;
    }
    ari_Control batch[8];
    int got = 0;
    auto taken = reader_.TakeLoaned(8, [&](const void* s, const dds_sample_info_t& info) {
      if (s == nullptr || !info.valid_data || got >= 8) return;
      std::memcpy(&batch[got++], s, sizeof batch[0]);
    });
    if (!taken) {
      std::fprintf(stderr, "[ari-node] control: %s\n", taken.error().ToString().c_str());
      continue;
    }
    for (int i = 0; i < got; ++i) {
      const ari_Control& c = batch[i];
      if (dds::FixedView(c.node_id) != node_id_) {
        other_nodes_.fetch_add(1);
        continue;
      }
      received_.fetch_add(1);
      handler_(c);
    }
  }
}

}  // namespace ari::component
