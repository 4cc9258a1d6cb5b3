// Request queues: class priority, EDF, aging, bounds, CRITICAL eviction, cancel,
// no starvation, and no heap allocation per operation (counting operator new).
#include "qos/request_queue.h"

#include <gtest/gtest.h>

#include "qos/governor.h"
#include "tests/common/counting_allocator.h"
#include "tests/common/test_util.h"

namespace ari::qos {
namespace {

constexpr int64_t kMs = 1000000;
constexpr int64_t kSec = 1000 * kMs;

QueueConfig SmallConfig() {
  QueueConfig c;
  c.capacity = {2, 2, 2, 2};
  c.aging_step_ns = {0, 10 * kSec, 10 * kSec, 10 * kSec};
  c.aging_ceiling = Urgency::kCritical;
  return c;
}

QueueEntry E(uint64_t id, Urgency u, int64_t deadline_ms, int64_t enqueue_ms = 0) {
  return QueueEntry{id, u, deadline_ms * kMs, enqueue_ms * kMs, 0};
}

TEST(RequestQueueTest, ClassPriorityThenEdf) {
  RequestQueue q(SmallConfig());
  EXPECT_EQ(q.storage(), 8u);
  ASSERT_TRUE(q.Push(E(1, Urgency::kBackground, 10)).accepted());
  ASSERT_TRUE(q.Push(E(2, Urgency::kNormal, 900)).accepted());
  ASSERT_TRUE(q.Push(E(3, Urgency::kNormal, 500)).accepted());
  ASSERT_TRUE(q.Push(E(4, Urgency::kCritical, 2000)).accepted());
  ASSERT_TRUE(q.Push(E(5, Urgency::kHigh, 700)).accepted());
  ASSERT_TRUE(q.Push(E(6, Urgency::kCritical, 1000)).accepted());
  EXPECT_EQ(q.Depths(), (std::array<uint32_t, 4>{2, 1, 2, 1}));
  std::vector<uint64_t> order;
  while (auto e = q.Pop(0)) order.push_back(e->id);
  EXPECT_EQ(order, (std::vector<uint64_t>{6, 4, 5, 3, 2, 1}));
  EXPECT_TRUE(q.empty());
}

TEST(RequestQueueTest, EqualDeadlinesKeepArrivalOrder) {
  RequestQueue q(SmallConfig());
  q.Push(E(7, Urgency::kNormal, 100));
  q.Push(E(8, Urgency::kNormal, 100));
  EXPECT_EQ(q.Pop(0)->id, 7u);
  EXPECT_EQ(q.Pop(0)->id, 8u);
}

TEST(RequestQueueTest, AgingMovesBackgroundUp) {
  RequestQueue q(SmallConfig());
  const QueueEntry bg = E(1, Urgency::kBackground, 600000, 0);
  q.Push(bg);
  EXPECT_EQ(q.EffectiveRank(bg, 9 * kSec), 3);
  EXPECT_EQ(q.EffectiveRank(bg, 10 * kSec), 2);
  EXPECT_EQ(q.EffectiveRank(bg, 25 * kSec), 1);
  EXPECT_EQ(q.EffectiveRank(bg, 30 * kSec), 0);
  EXPECT_EQ(q.EffectiveRank(bg, 3000 * kSec), 0);  // never above the ceiling
  // A fresh NORMAL goes first while BACKGROUND is young...
  q.Push(E(2, Urgency::kNormal, 10000, 5000));
  EXPECT_EQ(q.Peek(5 * kSec)->id, 2u);
  // ...but once BACKGROUND aged to NORMAL's level, the aged one goes first.
  EXPECT_EQ(q.Peek(10 * kSec)->id, 1u);
  // Aged to CRITICAL level: ahead of a fresh CRITICAL too.
  q.Cancel(2);
  q.Push(E(3, Urgency::kCritical, 31000, 30000));
  EXPECT_EQ(q.Peek(30 * kSec)->id, 1u);
  EXPECT_EQ(q.Peek(29 * kSec)->id, 3u);
}

TEST(RequestQueueTest, AgingCeilingStopsBelowCritical) {
  QueueConfig c = SmallConfig();
  c.aging_ceiling = Urgency::kHigh;
  RequestQueue q(c);
  const QueueEntry bg = E(1, Urgency::kBackground, 600000, 0);
  q.Push(bg);
  q.Push(E(2, Urgency::kCritical, 700000, 0));
  EXPECT_EQ(q.EffectiveRank(bg, 1000 * kSec), 1);
  EXPECT_EQ(q.Pop(1000 * kSec)->id, 2u);
}

TEST(RequestQueueTest, FullClassRefusesWithoutGrowing) {
  RequestQueue q(SmallConfig());
  EXPECT_EQ(q.Push(E(1, Urgency::kNormal, 100)).status, PushStatus::kAccepted);
  EXPECT_EQ(q.Push(E(2, Urgency::kNormal, 100)).status, PushStatus::kAccepted);
  const PushResult r = q.Push(E(3, Urgency::kNormal, 50));
  EXPECT_EQ(r.status, PushStatus::kFull);
  EXPECT_FALSE(r.accepted());
  EXPECT_FALSE(r.evicted.has_value());
  EXPECT_EQ(q.Depth(Urgency::kNormal), 2u);
  EXPECT_EQ(q.Push(E(4, Urgency::kHigh, 100)).status, PushStatus::kAccepted);  // other class ok
  EXPECT_EQ(q.Push(E(1, Urgency::kHigh, 100)).status, PushStatus::kDuplicate);
  EXPECT_EQ(q.Push(E(9, static_cast<Urgency>(7), 100)).status, PushStatus::kInvalid);
  q.Pop(0);
  q.Pop(0);
  EXPECT_EQ(q.Push(E(3, Urgency::kNormal, 50)).status, PushStatus::kAccepted);
}

TEST(RequestQueueTest, CriticalEvictsLowestClassLatestDeadline) {
  RequestQueue q(SmallConfig());
  q.Push(E(1, Urgency::kCritical, 100));
  q.Push(E(2, Urgency::kCritical, 100));
  q.Push(E(10, Urgency::kNormal, 5000));
  q.Push(E(20, Urgency::kBackground, 9000));
  q.Push(E(21, Urgency::kBackground, 8000));
  PushResult r = q.Push(E(3, Urgency::kCritical, 100));
  EXPECT_EQ(r.status, PushStatus::kAcceptedEvicted);
  ASSERT_TRUE(r.evicted.has_value());
  EXPECT_EQ(r.evicted->id, 20u);
  EXPECT_EQ(q.Push(E(4, Urgency::kCritical, 100)).evicted->id, 21u);
  EXPECT_EQ(q.Push(E(5, Urgency::kCritical, 100)).evicted->id, 10u);
  EXPECT_EQ(q.Depth(Urgency::kCritical), 5u);
  EXPECT_EQ(q.Depth(Urgency::kBackground), 0u);
  // A non-critical class under its own cap is still refused when the storage is
  // taken by CRITICAL entries that borrowed evicted slots.
  q.Push(E(30, Urgency::kHigh, 100));
  q.Push(E(31, Urgency::kHigh, 100));
  q.Push(E(32, Urgency::kNormal, 100));
  EXPECT_EQ(q.size(), q.storage());
  EXPECT_EQ(q.Push(E(33, Urgency::kBackground, 100)).status, PushStatus::kFull);
  // Only CRITICAL left to evict: refused.
  EXPECT_EQ(q.Push(E(6, Urgency::kCritical, 100)).evicted->id, 32u);
  EXPECT_EQ(q.Push(E(7, Urgency::kCritical, 100)).evicted->id, 31u);
  EXPECT_EQ(q.Push(E(8, Urgency::kCritical, 100)).evicted->id, 30u);
  EXPECT_EQ(q.Push(E(9, Urgency::kCritical, 100)).status, PushStatus::kFull);
  EXPECT_EQ(q.size(), 8u);
}

TEST(RequestQueueTest, CancelAndExpire) {
  RequestQueue q(SmallConfig());
  q.Push(E(1, Urgency::kNormal, 100));
  q.Push(E(2, Urgency::kNormal, 300));
  q.Push(E(3, Urgency::kHigh, 200));
  EXPECT_EQ(q.Cancel(2)->id, 2u);
  EXPECT_FALSE(q.Cancel(2).has_value());
  EXPECT_FALSE(q.Contains(2));
  EXPECT_FALSE(q.PopExpired(100 * kMs).has_value());  // deadline == now is not missed
  EXPECT_EQ(q.PopExpired(250 * kMs)->id, 1u);
  EXPECT_EQ(q.PopExpired(250 * kMs)->id, 3u);
  EXPECT_FALSE(q.PopExpired(250 * kMs).has_value());
  EXPECT_TRUE(q.empty());
}

// Steady CRITICAL load: a CRITICAL arrives and one request is served every
// 100 ms. With the default policy's aging, the BACKGROUND request is served
// within its 3 aging steps (30 s); without aging it never is.
int64_t BackgroundServedAtMs(const QueueConfig& config) {
  RequestQueue q(config);
  q.Push(QueueEntry{1000000, Urgency::kBackground, 600 * kSec, 0, 0});
  uint64_t id = 1;
  for (int64_t t = 0; t <= 60 * kSec; t += 100 * kMs) {
    q.Push(QueueEntry{id++, Urgency::kCritical, t + 2 * kSec, t, 0});
    const auto e = q.Pop(t);
    if (e && e->urgency == Urgency::kBackground) return t / kMs;
  }
  return -1;
}

TEST(RequestQueueTest, NoStarvationUnderSteadyCriticalLoad) {
  auto policy = LoadPolicyFile(ari::testing::SourceDir() / "config" / "policy_default.textproto");
  ASSERT_TRUE(policy.has_value()) << policy.error().ToString();
  QueueConfig config = QueueConfig::FromPolicy(*policy);
  const int64_t step_ms = policy->Class(Urgency::kBackground).aging_step_ms;
  const int64_t served = BackgroundServedAtMs(config);
  EXPECT_GE(served, 0) << "BACKGROUND starved";
  EXPECT_LE(served, 3 * step_ms);
  config.aging_step_ns = {};
  EXPECT_EQ(BackgroundServedAtMs(config), -1);
}

TEST(RequestQueueTest, NoHeapAllocationPerOperation) {
  RequestQueue q(SmallConfig());
  ari::testing::CountAllocations allocations;
  for (int round = 0; round < 100; ++round) {
    for (uint64_t i = 0; i < 10; ++i) {
      q.Push(QueueEntry{i, kAllUrgencies[i % 4], static_cast<int64_t>(i) * kMs, 0, 0});
    }
    q.Cancel(3);
    q.PopExpired(5 * kMs);
    while (q.Pop(round * kSec)) {
    }
  }
  EXPECT_EQ(allocations.count(), 0);
}

TEST(RequestQueueTest, GovernorDecideDoesNotAllocate) {
  auto policy = LoadPolicyFile(ari::testing::SourceDir() / "config" / "policy_default.textproto");
  ASSERT_TRUE(policy.has_value());
  GovernorInputs in;
  in.reading.state = thermal::SensorState::kOk;
  in.reading.source = "a source name long enough to live on the heap, surely";
  in.mem_available_bytes = 150ull << 20;
  in.active = Urgency::kCritical;
  GovernorState s;
  ari::testing::CountAllocations allocations;
  for (int i = 0; i < 1000; ++i) {
    in.now_ns = int64_t{i} * 100 * kMs;
    in.reading.celsius = 60.0 + (i % 50);
    in.reading.state = i % 97 == 0 ? thermal::SensorState::kStale : thermal::SensorState::kOk;
    s = Decide(*policy, s, in).state;
  }
  EXPECT_EQ(allocations.count(), 0);
}

}  // namespace
}  // namespace ari::qos
