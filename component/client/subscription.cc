// One topic on its own receive thread; see subscription.h.
#include "component/client/subscription.h"

#include <cstdio>

namespace ari::component::dds {
namespace {

constexpr dds_attach_t kCookieData = 1;
constexpr dds_attach_t kCookieStop = 2;

}  // namespace

Result<void> Subscription::Start(std::shared_ptr<Domain> domain, TopicKind kind, OnSample on_sample,
                                 std::string tag) {
  if (thread_.joinable()) return MakeError(ErrorCode::kInvalidArgument, tag + ": started twice");
  on_sample_ = std::move(on_sample);
  tag_ = std::move(tag);
  auto pp = Participant::Create(std::move(domain));
  if (!pp) return std::unexpected(pp.error());
  participant_ = std::move(*pp);
  auto t = Topic::Create(participant_, kind);
  if (!t) return std::unexpected(t.error());
  topic_ = std::move(*t);
  auto r = Reader::Create(participant_, topic_);
  if (!r) return std::unexpected(r.error());
  reader_ = std::move(*r);
  auto c = ReadCondition::Create(reader_);
  if (!c) return std::unexpected(c.error());
  cond_ = std::move(*c);
  auto g = GuardCondition::Create(participant_);
  if (!g) return std::unexpected(g.error());
  stop_ = std::move(*g);
  auto w = WaitSet::Create(participant_);
  if (!w) return std::unexpected(w.error());
  waitset_ = std::move(*w);
  if (auto a = waitset_.Attach(cond_.handle(), kCookieData); !a) return a;
  if (auto a = waitset_.Attach(stop_.handle(), kCookieStop); !a) return a;
  thread_ = std::thread([this] { ReceiveLoop(); });
  return {};
}

void Subscription::Stop() {
  if (!thread_.joinable()) return;
  if (auto r = stop_.Trigger(); !r) {
    std::fprintf(stderr, "[ari-node] %s stop: %s\n", tag_.c_str(), r.error().ToString().c_str());
  }
  thread_.join();
}

void Subscription::ReceiveLoop() {
  dds_attach_t fired[4];
  for (;;) {
    auto n = waitset_.Wait(fired, Duration::max());
    if (!n) {
      std::fprintf(stderr, "[ari-node] %s: %s\n", tag_.c_str(), n.error().ToString().c_str());
      return;
    }
    for (size_t i = 0; i < *n; ++i) {
      if (fired[i] == kCookieStop) return;
    }
    auto taken = reader_.TakeLoaned(16, [this](const void* s, const dds_sample_info_t& info) {
      if (s != nullptr && info.valid_data) on_sample_(s);
    });
    if (!taken) {
      std::fprintf(stderr, "[ari-node] %s: %s\n", tag_.c_str(), taken.error().ToString().c_str());
    }
  }
}

}  // namespace ari::component::dds
