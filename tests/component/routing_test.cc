// The routing rule (component/client/routing.h): pure function, fed NodeViews as the
// client would build them from NodeStatus samples.
#include "component/client/routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace ari::component {
namespace {

RouteNode Idle(std::string id, float tokens_per_s = 20) {
  RouteNode n;
  n.node_id = std::move(id);
  n.model = "tinyllama";
  n.ready = true;
  n.slots_total = 2;
  n.temperature_c = 50;
  n.sensor_ok = true;
  n.decode_tokens_per_s = tokens_per_s;
  return n;
}

RouteNode Busy(std::string id, uint32_t queued_normal = 0) {
  RouteNode n = Idle(std::move(id));
  n.slots_busy = 2;
  n.queue[ari_URGENCY_NORMAL] = queued_normal;
  return n;
}

std::string Route(const std::vector<RouteNode>& nodes, const RouteRequest& r,
                  const RoutingWeights& w = {}) {
  auto c = ChooseNode(nodes, r, w);
  return c ? nodes[c->index].node_id : std::string(NoRouteName(c.error()));
}

TEST(Routing, CriticalGoesToTheIdleNode) {
  const std::vector<RouteNode> nodes = {Busy("a", 3), Idle("b"), Busy("c")};
  EXPECT_EQ(Route(nodes, {.urgency = ari_URGENCY_CRITICAL}), "b");
  // Wherever the idle node is in the list.
  const std::vector<RouteNode> other = {Idle("b"), Busy("a", 3), Busy("c")};
  EXPECT_EQ(Route(other, {.urgency = ari_URGENCY_CRITICAL}), "b");
  // A node with a free slot but a turn in progress shares its cores: the idle one of the
  // same speed is faster.
  RouteNode one_busy = Idle("a");
  one_busy.slots_busy = 1;
  one_busy.tokens_per_s = 25;  // its current output: not what a newcomer gets
  EXPECT_EQ(Route({one_busy, Idle("b")}, {.urgency = ari_URGENCY_CRITICAL}), "b");
}

TEST(Routing, ANodeThatJustJoinedIsAsFastAsTheFastestMeasured) {
  // n1 served turns at 500 t/s and has one turn in progress; n2 just started (no turn
  // yet). Guessing 20 t/s for n2 would send CRITICAL to the busy node.
  RouteNode n1 = Idle("n1", 500);
  n1.slots_busy = 1;
  RouteNode n2 = Idle("n2", 0);
  EXPECT_EQ(Route({n1, n2}, {.urgency = ari_URGENCY_CRITICAL}), "n2");
  EXPECT_EQ(Route({n1, n2}, {.urgency = ari_URGENCY_NORMAL}), "n2");
}

TEST(Routing, CriticalPrefersAFastBusyNodeToASlowIdleOne) {
  // A busy node parks a turn at its next chunk boundary (chunk_tokens) for CRITICAL: at
  // 100 t/s shared by 3 that is 9 tokens * 30 ms = 270 ms, against 1 token / 2 t/s =
  // 500 ms idle.
  RouteNode fast_busy = Busy("fast");
  fast_busy.decode_tokens_per_s = 100;
  const std::vector<RouteNode> nodes = {fast_busy, Idle("slow", 2)};
  EXPECT_EQ(Route(nodes, {.urgency = ari_URGENCY_CRITICAL}), "fast");
  // NORMAL would wait a whole turn there (65 tokens / 40 t/s): it takes the idle node.
  EXPECT_EQ(Route(nodes, {.urgency = ari_URGENCY_NORMAL}), "slow");
}

TEST(Routing, CriticalWaitsOnlyBehindCriticalQueues) {
  RouteNode a = Idle("a");
  a.queue[ari_URGENCY_NORMAL] = 50;  // NORMAL backlog: CRITICAL jumps it
  RouteNode b = Idle("b");
  b.queue[ari_URGENCY_CRITICAL] = 1;
  const RoutingWeights w;
  EXPECT_LT(ExpectedTtftMs(a, ari_URGENCY_CRITICAL, w), ExpectedTtftMs(b, ari_URGENCY_CRITICAL, w));
  EXPECT_EQ(Route({a, b}, {.urgency = ari_URGENCY_CRITICAL}), "a");
  // Expected TTFT, the numbers: idle at 20 t/s -> one token = 50 ms; one CRITICAL ahead
  // adds a turn (64 tokens).
  EXPECT_DOUBLE_EQ(ExpectedTtftMs(a, ari_URGENCY_CRITICAL, w), 50.0);
  EXPECT_DOUBLE_EQ(ExpectedTtftMs(b, ari_URGENCY_CRITICAL, w), 65 * 50.0);
}

TEST(Routing, HotNodeGetsNoNormalWorkWhileAnotherIsCool) {
  RouteNode hot = Idle("hot");
  hot.temperature_c = 95;
  const RouteNode loaded = Busy("warm-but-busy", 4);
  for (ari_UrgencyClass u : {ari_URGENCY_BACKGROUND, ari_URGENCY_NORMAL, ari_URGENCY_HIGH}) {
    EXPECT_EQ(Route({hot, loaded}, {.urgency = u}), "warm-but-busy") << u;
  }
  // All hot: the work still goes somewhere (the least loaded).
  RouteNode hot2 = Busy("hot2", 1);
  hot2.temperature_c = 99;
  EXPECT_EQ(Route({hot, hot2}, {.urgency = ari_URGENCY_NORMAL}), "hot");
}

TEST(Routing, ThermalBandSlowsTheExpectedTtft) {
  const RoutingWeights w;
  RouteNode n = Idle("n");
  const double cool = ExpectedTtftMs(n, ari_URGENCY_CRITICAL, w);
  n.temperature_c = w.warm_celsius;
  EXPECT_DOUBLE_EQ(ExpectedTtftMs(n, ari_URGENCY_CRITICAL, w), cool * w.warm_slowdown);
  n.temperature_c = w.hot_celsius + 1;
  EXPECT_DOUBLE_EQ(ExpectedTtftMs(n, ari_URGENCY_CRITICAL, w), cool * w.hot_slowdown);
  n.sensor_ok = false;  // no reading: counted warm
  EXPECT_DOUBLE_EQ(ExpectedTtftMs(n, ari_URGENCY_CRITICAL, w), cool * w.warm_slowdown);
}

TEST(Routing, EqualNodesShareTheLoad) {
  const std::vector<RouteNode> nodes = {Idle("a"), Idle("b"), Idle("c")};
  std::map<std::string, int> count;
  for (uint64_t k = 0; k < 300; ++k) {
    ++count[Route(nodes, {.urgency = ari_URGENCY_NORMAL, .spread_key = k})];
  }
  EXPECT_EQ(count.size(), 3u);
  for (const auto& [id, n] : count) EXPECT_EQ(n, 100) << id;
  // Not when one is less loaded: then it takes all.
  const std::vector<RouteNode> uneven = {Busy("a"), Idle("b"), Busy("c")};
  for (uint64_t k = 0; k < 10; ++k) {
    EXPECT_EQ(Route(uneven, {.urgency = ari_URGENCY_NORMAL, .spread_key = k}), "b");
  }
}

TEST(Routing, NodesUnderMemoryPressureGetNoNormalWorkWhileAnotherHasNone) {
  RouteNode pressed = Idle("pressed");
  pressed.memory_level = 1;  // the mildest band of its memory ladder
  const RouteNode loaded = Busy("loaded", 3);
  for (ari_UrgencyClass u : {ari_URGENCY_BACKGROUND, ari_URGENCY_NORMAL, ari_URGENCY_HIGH}) {
    EXPECT_EQ(Route({pressed, loaded}, {.urgency = u}), "loaded") << u;
  }
  // CRITICAL still goes where it is answered first.
  EXPECT_EQ(Route({pressed, loaded}, {.urgency = ari_URGENCY_CRITICAL}), "pressed");
  // Every node pressed (or hot): the least loaded still gets the work.
  RouteNode hot = Busy("hot", 1);
  hot.temperature_c = 95;
  EXPECT_EQ(Route({pressed, hot}, {.urgency = ari_URGENCY_NORMAL}), "pressed");
}

TEST(Routing, AModelIsPinnedByNameOrContentHash) {
  RouteNode a = Idle("a"), b = Idle("b");
  a.model = "tinyllama-q.pack.gguf";
  a.model_hash = 0x0123456789abcdefull;
  b.model = "tinyllama-copy.pack.gguf";  // another name, other content
  b.model_hash = 0xfedcba9876543210ull;
  const std::vector<RouteNode> nodes = {Busy("c", 4), a, b};
  EXPECT_EQ(ModelHashText(a.model_hash), "0123456789abcdef");
  EXPECT_EQ(Route(nodes, {.urgency = ari_URGENCY_NORMAL, .pin_model = "0123456789abcdef"}), "a");
  EXPECT_EQ(Route(nodes, {.urgency = ari_URGENCY_NORMAL, .pin_model = "fedcba9876543210"}), "b");
  EXPECT_EQ(Route(nodes, {.urgency = ari_URGENCY_NORMAL, .pin_model = "tinyllama-copy.pack.gguf"}),
            "b");
  // A node that could not hash its model (0) does not match the text "0000...".
  RouteNode unknown = Idle("u");
  EXPECT_EQ(Route({unknown}, {.pin_model = "0000000000000000"}),
            "the pinned node, model or "
            "session node is not ready");
}

TEST(Routing, PinsAndSessionsAreHonoured) {
  RouteNode other_model = Idle("b");
  other_model.model = "qwen";
  const std::vector<RouteNode> nodes = {Busy("a", 5), other_model, Idle("c")};
  EXPECT_EQ(Route(nodes, {.urgency = ari_URGENCY_NORMAL, .pin_node = "a"}), "a");
  EXPECT_EQ(Route(nodes, {.urgency = ari_URGENCY_CRITICAL, .pin_model = "qwen"}), "b");
  EXPECT_EQ(Route(nodes, {.urgency = ari_URGENCY_NORMAL, .session_node = "a"}), "a");
  auto absent = ChooseNode(nodes, {.pin_node = "zz"}, {});
  ASSERT_FALSE(absent);
  EXPECT_EQ(absent.error(), NoRoute::kPinnedAbsent);
}

TEST(Routing, OnlyLiveReadyFreshNodesAreEligible) {
  RouteNode lost = Idle("lost");
  lost.alive = false;
  RouteNode draining = Idle("draining");
  draining.ready = false;
  RouteNode stale = Idle("stale");
  stale.age_ms = RoutingWeights{}.stale_ms + 1;
  const std::vector<RouteNode> nodes = {lost, draining, stale, Busy("busy", 7)};
  for (ari_UrgencyClass u : {ari_URGENCY_NORMAL, ari_URGENCY_CRITICAL}) {
    EXPECT_EQ(Route(nodes, {.urgency = u}), "busy") << u;
  }
  auto none = ChooseNode(std::vector<RouteNode>{lost, draining, stale}, {}, {});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error(), NoRoute::kNoNodes);
  EXPECT_FALSE(ChooseNode({}, {}, {}));
}

// --- ParseNodeStatus: impossible samples are refused, never routed on ---------------------

ari_NodeStatus GoodStatus() {
  ari_NodeStatus s{};
  std::strcpy(s.node_id, "head-unit");
  std::strcpy(s.model, "tinyllama");
  s.state = ari_NODE_READY;
  s.sensor_state = ari_SENSOR_OK;
  s.temperature_c = 60;
  s.sessions_in_use = 1;
  s.sessions_total = 2;
  s.queue_depth[ari_URGENCY_NORMAL] = 3;
  s.tokens_per_s = 31.5f;
  s.decode_tokens_per_s = 12.5f;
  s.model_hash = 0x0123456789abcdefull;
  s.thermal_band = 1;
  std::strcpy(s.thermal_band_name, "warm");
  return s;
}

// An enum field holding a value no enumerator has, as a foreign writer may send.
template <typename E>
void SetRaw(E* field, int32_t value) {
  static_assert(sizeof(E) == sizeof value);
  std::memcpy(field, &value, sizeof value);
}

constexpr int64_t kNow = 1'700'000'000'000'000'000;

TEST(RoutingParse, AGoodSampleBecomesAView) {
  auto v = ParseNodeStatus(GoodStatus(), kNow - 250'000'000, kNow);
  ASSERT_TRUE(v) << v.error();
  EXPECT_EQ(v->node_id, "head-unit");
  EXPECT_EQ(v->model, "tinyllama");
  EXPECT_TRUE(v->ready);
  EXPECT_EQ(v->slots_busy, 1u);
  EXPECT_EQ(v->queue[ari_URGENCY_NORMAL], 3u);
  EXPECT_FLOAT_EQ(v->tokens_per_s, 31.5f);
  EXPECT_FLOAT_EQ(v->decode_tokens_per_s, 12.5f);
  EXPECT_EQ(v->age_ms, 250);
  EXPECT_EQ(v->model_hash, 0x0123456789abcdefull);
  EXPECT_EQ(v->thermal_band, 1);
  EXPECT_EQ(v->thermal_band_name, "warm");
  EXPECT_EQ(v->memory_level, 0u);
  // A sensor that is missing may report NaN.
  ari_NodeStatus s = GoodStatus();
  s.sensor_state = ari_SENSOR_MISSING;
  s.temperature_c = std::numeric_limits<float>::quiet_NaN();
  auto m = ParseNodeStatus(s, kNow, kNow);
  ASSERT_TRUE(m) << m.error();
  EXPECT_FALSE(m->sensor_ok);
}

TEST(RoutingParse, ImpossibleSamplesAreRefused) {
  struct Case {
    const char* what = "";
    void (*spoil)(ari_NodeStatus&) = nullptr;
    int64_t source_ns = kNow;
  };
  const Case cases[] = {
      {"busy > total", [](ari_NodeStatus& s) { s.sessions_in_use = 3; }},
      {"no slots", [](ari_NodeStatus& s) { s.sessions_total = 0; }},
      {"negative rate", [](ari_NodeStatus& s) { s.tokens_per_s = -1; }},
      {"NaN rate", [](ari_NodeStatus& s) { s.tokens_per_s = std::nanf(""); }},
      {"inf rate", [](ari_NodeStatus& s) { s.tokens_per_s = INFINITY; }},
      {"NaN decode rate", [](ari_NodeStatus& s) { s.decode_tokens_per_s = std::nanf(""); }},
      {"negative decode rate", [](ari_NodeStatus& s) { s.decode_tokens_per_s = -5; }},
      {"a negative count (as uint32)",
       [](ari_NodeStatus& s) { s.queue_depth[ari_URGENCY_HIGH] = static_cast<uint32_t>(-1); }},
      {"unknown state", [](ari_NodeStatus& s) { SetRaw(&s.state, 9); }},
      {"unknown sensor state", [](ari_NodeStatus& s) { SetRaw(&s.sensor_state, -3); }},
      {"NaN temperature, sensor OK", [](ari_NodeStatus& s) { s.temperature_c = std::nanf(""); }},
      {"empty node id", [](ari_NodeStatus& s) { s.node_id[0] = '\0'; }},
      {"unterminated node id",
       [](ari_NodeStatus& s) { std::memset(s.node_id, 'x', sizeof s.node_id); }},
      {"unterminated model", [](ari_NodeStatus& s) { std::memset(s.model, 'm', sizeof s.model); }},
      {"from the future", [](ari_NodeStatus&) {}, kNow + 60'000'000'000},
      {"thermal band below -1", [](ari_NodeStatus& s) { s.thermal_band = -7; }},
      {"thermal band beyond any policy", [](ari_NodeStatus& s) { s.thermal_band = 1000; }},
      {"memory level beyond any ladder", [](ari_NodeStatus& s) { s.memory_level = 65; }},
      {"unterminated band name",
       [](ari_NodeStatus& s) {
         std::memset(s.thermal_band_name, 'b', sizeof s.thermal_band_name);
       }},
  };
  for (const Case& c : cases) {
    ari_NodeStatus s = GoodStatus();
    c.spoil(s);
    auto v = ParseNodeStatus(s, c.source_ns, kNow);
    EXPECT_FALSE(v) << c.what;
    if (!v) {
      EXPECT_FALSE(v.error().empty()) << c.what;
    }
  }
}

}  // namespace
}  // namespace ari::component
