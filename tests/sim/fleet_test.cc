// Fleet replay (sim/fleet.h): one drive log on N simulated nodes routed by the client
// library's rule; and ari-tune's routing weights (sim/tune.h).
#include "sim/fleet.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "sim/scenarios.h"
#include "sim/tune.h"
#include "tests/sim/sim_test_util.h"

namespace ari::sim {
namespace {

using testing::DefaultPolicy;
using testing::ParseLog;
using testing::SimpleCost;

Result<dl::DriveLog> Scenario(const char* name, uint64_t duration_ms, uint64_t seed) {
  ScenarioOptions o;
  o.scenario = name;
  o.duration_ms = duration_ms;
  o.seed = seed;
  return GenerateScenario(o);
}

class Fleet : public ::testing::Test {
 protected:
  FleetOptions Options(int nodes) const {
    FleetOptions f;
    f.node.policy = &policy_;
    f.node.cost = &cost_;
    f.nodes = nodes;
    return f;
  }
  const qos::Policy policy_ = DefaultPolicy();
  const CostModel cost_ = SimpleCost();
};

// A long NORMAL answer, then a CRITICAL prompt 3 s later (replay_test's preemption log).
constexpr const char* kChatThenNav = R"(
  header { ambient_celsius: 25 duration_ms: 60000 }
  event { t_ms: 0 request { request_id: 1 client: "chat" urgency: NORMAL prompt: "Tell me a long story about the sea" max_tokens: 200 } }
  event { t_ms: 3000 request { request_id: 2 client: "nav" urgency: CRITICAL prompt: "Route home" max_tokens: 8 deadline_ms: 3000 } }
)";

TEST_F(Fleet, OneNodeIsTheSingleNodeReplay) {
  // The lock-step driver (status ticks, events fed from outside) must not change what
  // one node computes.
  auto log = Scenario("nav-burst-during-chat", 600'000, 7);
  ASSERT_TRUE(log.has_value()) << log.error().message;
  FleetOptions f = Options(1);
  auto single = ReplayModel(*log, f.node);
  auto fleet = ReplayFleet(*log, f);
  ASSERT_TRUE(single && fleet);
  ASSERT_EQ(fleet->merged.requests.size(), single->requests.size());
  ASSERT_GT(single->requests.size(), 10u);
  for (size_t i = 0; i < single->requests.size(); ++i) {
    const RequestReport &a = single->requests[i], &b = fleet->merged.requests[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(b.node, "n1");
    EXPECT_EQ(a.status, b.status) << a.id;
    EXPECT_EQ(a.tokens, b.tokens) << a.id;
    EXPECT_NEAR(a.ttft_s, b.ttft_s, 1e-3) << a.id;
    EXPECT_NEAR(a.completion_s, b.completion_s, 1e-3) << a.id;
  }
  EXPECT_NEAR(single->summary.peak_die_c, fleet->merged.summary.peak_die_c, 0.05);
}

TEST_F(Fleet, CriticalGoesToTheIdleNodeAndWaitsForNoChunk) {
  const dl::DriveLog log = ParseLog(kChatThenNav);
  auto one = ReplayModel(log, Options(1).node);
  auto two = ReplayFleet(log, Options(2));
  ASSERT_TRUE(one && two);
  const RequestReport &chat = two->merged.requests[0], &nav = two->merged.requests[1];
  EXPECT_EQ(chat.status, "DONE");
  EXPECT_EQ(nav.status, "DONE");
  EXPECT_NE(chat.node, nav.node);  // the chat's node was busy: the other one answers
  EXPECT_LT(nav.queue_wait_s, 1e-3);
  // On one node the CRITICAL prompt waits for the chat's chunk in flight.
  EXPECT_GT(one->requests[1].queue_wait_s, nav.queue_wait_s);
  EXPECT_EQ(two->requests_per_node, (std::vector<int>{1, 1}));
}

TEST_F(Fleet, AHotNodeGetsNoNormalWorkAndSessionsStick) {
  // n2 sits 40 C hotter (its RC model and the ambient events): above hot_celsius soon.
  std::map<int, std::string> events;  // by time: a log is time-ordered
  for (int i = 0; i < 12; ++i) {
    events[5000 + i * 1000] = "request { request_id: " + std::to_string(i + 1) +
                              " client: \"chat\" urgency: NORMAL prompt: \"Tell me about the "
                              "sea\" max_tokens: 24 }";
  }
  // One session of three turns: every turn where the first went.
  for (int i = 0; i < 3; ++i) {
    events[7000 + i * 20000] = "request { request_id: " + std::to_string(100 + i) +
                               " client: \"chat2\" urgency: NORMAL session_id: 9 prompt: "
                               "\"And then?\" max_tokens: 16 }";
  }
  std::string text = R"(header { ambient_celsius: 50 duration_ms: 120000 }
    event { soc_temperature { celsius: 60 } })";
  for (const auto& [t, e] : events) text += " event { t_ms: " + std::to_string(t) + " " + e + " }";
  const dl::DriveLog log = ParseLog(text);
  FleetOptions f = Options(2);
  f.ambient_offset_c = {0, 40};
  auto r = ReplayFleet(log, f);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_GT(r->nodes[1].summary.peak_die_c, f.routing.hot_celsius);
  std::set<std::string> session_nodes;
  for (const RequestReport& q : r->merged.requests) {
    EXPECT_EQ(q.status, "DONE") << q.id;
    if (q.id >= 100) {
      session_nodes.insert(q.node);
    } else {
      EXPECT_EQ(q.node, "n1") << "request " << q.id << " went to the hot node";
    }
  }
  EXPECT_EQ(session_nodes.size(), 1u);
  // Without the offset the same stateless requests spread over both nodes.
  auto cool = ReplayFleet(log, Options(2));
  ASSERT_TRUE(cool.has_value());
  std::map<std::string, int> per;
  for (const RequestReport& q : cool->merged.requests) ++per[q.node];
  EXPECT_GT(per["n2"], 2);
  EXPECT_GT(per["n1"], 2);
}

TEST_F(Fleet, DeterministicAndRefusesBadOptions) {
  auto log = Scenario("traffic-jam-heat", 300'000, 3);
  ASSERT_TRUE(log.has_value());
  FleetOptions f = Options(3);
  f.ambient_offset_c = {0, 10, 20};
  auto a = ReplayFleet(*log, f), b = ReplayFleet(*log, f);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->merged.requests.size(), b->merged.requests.size());
  for (size_t i = 0; i < a->merged.requests.size(); ++i) {
    EXPECT_EQ(a->merged.requests[i].node, b->merged.requests[i].node);
    EXPECT_EQ(a->merged.requests[i].completion_s, b->merged.requests[i].completion_s);
  }
  FleetOptions bad = Options(0);
  EXPECT_FALSE(ReplayFleet(*log, bad));
  bad = Options(2);
  bad.ambient_offset_c = {1, 2, 3};
  EXPECT_FALSE(ReplayFleet(*log, bad));
  bad = Options(2);
  bad.node.policy = nullptr;
  EXPECT_FALSE(ReplayFleet(*log, bad));
  EXPECT_FALSE(ParseNumberList("1,,2"));
  EXPECT_EQ(ParseNumberList("0,-5,12.5").value_or(std::vector<double>{}),
            (std::vector<double>{0, -5, 12.5}));
}

TEST_F(Fleet, TheTunerTunesRoutingWeights) {
  auto log = Scenario("traffic-jam-heat", 300'000, 5);
  ASSERT_TRUE(log.has_value());
  FleetOptions fleet = Options(2);
  fleet.ambient_offset_c = {0, 25};
  auto space = ParseTuneSpace(R"(
    param { name: "routing.hot_celsius" values: "75" values: "85" values: "95" }
    param { name: "routing.turn_tokens" min: 16 max: 128 step: 56 }
  )");
  ASSERT_TRUE(space.has_value()) << space.error().message;
  TuneOptions o;
  o.logs = {&*log};
  o.start = &policy_;
  o.cost = &cost_;
  o.space = *space;
  o.budget = 6;
  o.fleet = &fleet;
  auto res = Tune(o);
  ASSERT_TRUE(res.has_value()) << res.error().message;
  EXPECT_EQ(res->invalid, 0);
  for (const TuneCandidate& c : res->candidates) EXPECT_TRUE(c.error.empty()) << c.error;
  ASSERT_EQ(res->candidates.size(), 6u);
  // The best candidate's score is what its weights give when replayed again.
  FleetOptions best = fleet;
  best.routing = res->best_routing;
  auto again = ScorePolicy(res->best_policy, o.logs, cost_, 0, nullptr, nullptr, &best);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->critical_misses, res->candidates[res->best].score.critical_misses);
  EXPECT_DOUBLE_EQ(again->normal_p95_s, res->candidates[res->best].score.normal_p95_s);
  EXPECT_EQ(RoutingParamValue(res->best_routing, "routing.stale_ms").value_or(""), "3000");
  // Routing parameters without a fleet, unknown names and bad values are refused.
  o.fleet = nullptr;
  EXPECT_FALSE(Tune(o));
  component::RoutingWeights w;
  EXPECT_FALSE(ApplyRoutingParam(w, "routing.no_such_weight", "1"));
  EXPECT_FALSE(ApplyRoutingParam(w, "routing.hot_celsius", "-3"));
  EXPECT_FALSE(ApplyRoutingParam(w, "routing.hot_celsius", "hot"));
  ASSERT_TRUE(ApplyRoutingParam(w, "routing.warm_celsius", "65"));
  EXPECT_FLOAT_EQ(w.warm_celsius, 65);
}

}  // namespace
}  // namespace ari::sim
