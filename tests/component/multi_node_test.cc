// Several ari-node processes on one DDS domain (issue 20, docs/routing.md): the client
// library routes each request to one node, and that node alone answers. Proof from the
// wire, not from the client's choice: an observer participant maps every TokenChunk to
// the participant that wrote it, and that participant to a node by its NodeStatus
// writer; each node's stop line counts the requests it ignored as addressed elsewhere.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "component/client/client.h"
#include "tests/component/node_fixture.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
using component::AskParams;
using component::Client;
using namespace std::chrono_literals;

std::string GuidKey(const dds_guid_t& g) {
  return std::string(reinterpret_cast<const char*>(g.v), sizeof g.v);
}

// A story prompt of `tokens` tokens at `urgency`, pinned to `node` when given.
AskParams Story(uint32_t tokens, ari_UrgencyClass urgency = ari_URGENCY_NORMAL,
                const std::string& node = "") {
  AskParams p;
  p.prompt = "Once upon a time";
  p.max_tokens = tokens;
  p.urgency = urgency;
  p.target_node = node;
  return p;
}

// Every TokenChunk and NodeStatus on the domain, by writer participant.
class Observer {
 public:
  bool Open(std::shared_ptr<dds::Domain> domain) {
    auto p = dds::Participant::Create(std::move(domain));
    if (!p) return false;
    participant_ = std::move(*p);
    auto ct = dds::Topic::Create(participant_, dds::TopicKind::kTokenChunk);
    auto st = dds::Topic::Create(participant_, dds::TopicKind::kNodeStatus);
    if (!ct || !st) return false;
    chunk_topic_ = std::move(*ct);
    status_topic_ = std::move(*st);
    auto cr = dds::Reader::Create(participant_, chunk_topic_);
    auto sr = dds::Reader::Create(participant_, status_topic_);
    if (!cr || !sr) return false;
    chunks_ = std::move(*cr);
    statuses_ = std::move(*sr);
    return true;
  }
  // Takes what arrived: node of each writer participant, and per request id the nodes
  // that wrote its chunks and its terminal count.
  void Drain() {
    for (;;) {
      auto n = statuses_.TakeLoaned(16, [&](const void* s, const dds_sample_info_t& info) {
        if (s == nullptr) return;
        if (auto who = statuses_.WriterParticipant(info.publication_handle)) {
          node_of_[GuidKey(*who)] =
              std::string(dds::FixedView(static_cast<const ari_NodeStatus*>(s)->node_id));
        }
      });
      if (!n || *n == 0) break;
    }
    for (;;) {
      auto n = chunks_.TakeLoaned(16, [&](const void* s, const dds_sample_info_t& info) {
        if (s == nullptr) return;
        const auto* c = static_cast<const ari_TokenChunk*>(s);
        auto who = chunks_.WriterParticipant(info.publication_handle);
        const std::string node =
            who && node_of_.contains(GuidKey(*who)) ? node_of_[GuidKey(*who)] : std::string("?");
        Seen& seen = requests_[std::string(dds::FixedView(c->request_id))];
        seen.nodes.insert(node);
        seen.terminals += c->terminal ? 1 : 0;
      });
      if (!n || *n == 0) break;
    }
  }
  struct Seen {
    std::set<std::string> nodes;
    int terminals = 0;
  };
  std::map<std::string, Seen> requests_;

 private:
  dds::Participant participant_;
  dds::Topic chunk_topic_, status_topic_;
  dds::Reader chunks_, statuses_;
  std::map<std::string, std::string> node_of_;
};

class MultiNode : public NodeTestBase {
 protected:
  MultiNode() : NodeTestBase("multi_node") {}

  // n1..nN, one process each, own config and node id; `hot`: node ids whose replayed
  // sensor reads 95 C. Without a sensor the policy's conservative knobs apply.
  void StartNodes(int n, const std::set<std::string>& hot = {},
                  const std::string& policy = DefaultPolicyWith()) {
    for (int i = 1; i <= n; ++i) {
      std::string id = "n";  // not "n" + to_string(i): g++ 12 -Wrestrict false positive
      id += std::to_string(i);
      if (nodes_.contains(id)) continue;  // already running
      auto cfg = WriteNodeConfig(dir_ / id, model_, "", policy, "node_id: \"" + id + "\"");
      if (hot.contains(id)) {
        const auto csv = dir_ / (id + ".csv");
        std::ofstream(csv) << "time_s,celsius\n0,95\n3600,95\n";
        ReplaceInFile(cfg, "sensor { kind: SENSOR_NONE }",
                      "sensor { kind: SENSOR_REPLAY replay_csv: \"" + csv.string() + "\" }");
      }
      nodes_[id] = std::make_unique<NodeProcess>();
      ASSERT_TRUE(nodes_[id]->Start(cfg, dir_ / (id + ".log")));
    }
  }
  static void ReplaceInFile(const std::filesystem::path& f, const std::string& from,
                            const std::string& to) {
    std::ifstream in(f);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    std::ofstream(f) << text;
  }
  std::unique_ptr<Client> Connect(const std::string& name) {
    component::ClientOptions o;
    o.client_id = name;
    o.node_timeout = 20s;
    auto c = Client::Connect(domain_, o);
    EXPECT_TRUE(c.has_value());
    return c ? std::move(*c) : nullptr;
  }
  // Until the client sees `n` ready nodes for which `pred` holds.
  static bool WaitNodes(
      Client& c, size_t n,
      const std::function<bool(const component::RouteNode&)>& pred =
          [](const component::RouteNode&) { return true; }) {
    for (int i = 0; i < 600; ++i) {
      size_t ok = 0;
      for (const auto& v : c.Nodes()) ok += v.ready && v.alive && pred(v) ? 1 : 0;
      if (ok >= n) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  // Stops every node (SIGTERM) and returns each one's "requests for other nodes ignored".
  std::map<std::string, long> StopAll() {
    std::map<std::string, long> ignored;
    for (auto& [id, p] : nodes_) {
      EXPECT_EQ(p->Stop(SIGTERM), 0) << p->Log();
      const std::string log = p->Log();
      const size_t at = log.find(" requests for other nodes ignored");
      EXPECT_NE(at, std::string::npos) << log;
      if (at == std::string::npos) continue;
      const size_t start = log.rfind(' ', at - 1) + 1;
      ignored[id] = std::stol(log.substr(start, at - start));
    }
    return ignored;
  }
  std::map<std::string, std::unique_ptr<NodeProcess>> nodes_;
};

TEST_F(MultiNode, LoadSpreadsAndOnlyTheAddressedNodeAnswers) {
  StartNodes(3);
  Observer obs;
  ASSERT_TRUE(obs.Open(domain_));
  auto client = Connect("spread");
  ASSERT_TRUE(client && WaitNodes(*client, 3));
  constexpr int kRequests = 30;
  std::vector<component::Stream> streams;
  std::map<std::string, int> per_node;
  for (int i = 0; i < kRequests; ++i) {
    auto s = client->Ask(Story(4));
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    ++per_node[s->node_id()];
    streams.push_back(std::move(*s));
  }
  for (auto& s : streams) {
    auto sum = s.Wait({}, 30s);
    EXPECT_TRUE(sum.has_value()) << s.request_id() << ": " << sum.error().ToString();
  }
  // Balanced: the client counts what it sent to a node since that node's last status,
  // so a burst does not herd onto the node that looked idle (a node's rate limit, burst
  // 20 per client, would refuse a herd). About 10 each; a node whose status reports it
  // drained sooner rightly gets a few more (16 seen on a loaded 2-core host), so the
  // bounds are "each node shares the burst" and "none nears the 20 a herd would reach".
  for (const std::string id : {"n1", "n2", "n3"}) {
    EXPECT_GE(per_node[id], 4) << id;
    EXPECT_LE(per_node[id], 17) << id;
  }
  EXPECT_EQ(per_node.count(""), 0u) << "a request went unaddressed";
  // On the wire: each answer came from its addressed node only, with one terminal.
  std::this_thread::sleep_for(300ms);
  obs.Drain();
  for (auto& s : streams) {
    const Observer::Seen& seen = obs.requests_[s.request_id()];
    EXPECT_EQ(seen.nodes, std::set<std::string>{s.node_id()}) << s.request_id();
    EXPECT_EQ(seen.terminals, 1) << s.request_id();
  }
  // And each node ignored exactly the requests addressed to the others.
  const auto ignored = StopAll();
  for (const auto& [id, n] : ignored) EXPECT_EQ(n, kRequests - per_node[id]) << id;
}

TEST_F(MultiNode, CriticalGoesToTheIdleNode) {
  StartNodes(3);
  Observer obs;
  ASSERT_TRUE(obs.Open(domain_));
  auto client = Connect("crit");
  ASSERT_TRUE(client && WaitNodes(*client, 3));
  // One short turn on each node first: each then reports its decode rate.
  for (const std::string id : {"n1", "n2", "n3"}) {
    auto s = client->Ask(Story(16, ari_URGENCY_NORMAL, id));
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    EXPECT_EQ(s->node_id(), id);
    ASSERT_TRUE(s->Wait({}, 30s).has_value());
  }
  ASSERT_TRUE(WaitNodes(*client, 3, [](const auto& v) { return v.decode_tokens_per_s > 0; }));
  // n1 and n2 busy with long turns (2 tokens per chunk, 10 ms pauses: seconds).
  std::vector<component::Stream> busy;
  for (const std::string id : {"n1", "n2"}) {
    auto s = client->Ask(Story(250, ari_URGENCY_NORMAL, id));
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    ASSERT_TRUE(s->Next(20s).has_value());
    busy.push_back(std::move(*s));
  }
  ASSERT_TRUE(WaitNodes(*client, 2, [](const auto& v) { return v.slots_busy >= 1; }));
  AskParams nav;
  nav.prompt = "Turn left";
  nav.max_tokens = 8;
  nav.urgency = ari_URGENCY_CRITICAL;
  auto s = client->Ask(nav);
  ASSERT_TRUE(s.has_value()) << s.error().ToString();
  EXPECT_EQ(s->node_id(), "n3");
  EXPECT_TRUE(s->Wait({}, 20s).has_value());
  for (auto& b : busy) EXPECT_TRUE(b.Wait({}, 60s).has_value());
  std::this_thread::sleep_for(300ms);
  obs.Drain();
  EXPECT_EQ(obs.requests_[s->request_id()].nodes, std::set<std::string>{"n3"});
  EXPECT_EQ(obs.requests_[s->request_id()].terminals, 1);
  StopAll();
}

TEST_F(MultiNode, AHotNodeGetsNoNormalWork) {
  StartNodes(2, {"n1"});
  auto client = Connect("cool");
  ASSERT_TRUE(client && WaitNodes(*client, 2));
  ASSERT_TRUE(WaitNodes(*client, 1, [](const auto& v) { return v.temperature_c >= 90; }))
      << nodes_["n1"]->Log();
  std::vector<component::Stream> streams;
  for (int i = 0; i < 10; ++i) {
    auto s = client->Ask(Story(4));
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    EXPECT_EQ(s->node_id(), "n2");
    streams.push_back(std::move(*s));
  }
  for (auto& s : streams) EXPECT_TRUE(s.Wait({}, 30s).has_value());
  // What the nodes report about themselves: the hot node its governor's band by the
  // policy's name, both the same content hash (one model file).
  std::map<std::string, component::RouteNode> seen;
  for (const auto& v : client->Nodes()) seen[v.node_id] = v;
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen["n1"].thermal_band_name == "hot" || seen["n1"].thermal_band_name == "critical")
      << seen["n1"].thermal_band_name;
  EXPECT_GT(seen["n1"].thermal_band, seen["n2"].thermal_band);
  EXPECT_EQ(seen["n1"].memory_level, 0u);
  EXPECT_NE(seen["n1"].model_hash, 0u);
  EXPECT_EQ(seen["n1"].model_hash, seen["n2"].model_hash);
  // A request pinned to that model (by hash) is answered; one pinned to another is not.
  AskParams pinned = Story(4, ari_URGENCY_HIGH);
  pinned.target_model = component::ModelHashText(seen["n1"].model_hash);
  auto p = client->Ask(pinned);
  ASSERT_TRUE(p.has_value()) << p.error().ToString();
  EXPECT_EQ(p->node_id(), "n2");  // HIGH avoids the hot node too
  EXPECT_TRUE(p->Wait({}, 30s).has_value());
  pinned.target_model = "no-such-model.gguf";
  auto none = client->Ask(pinned);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code, component::ErrorCode::kNodeAbsent) << none.error().ToString();
  const auto ignored = StopAll();
  EXPECT_EQ(ignored.at("n1"), 11);  // every request reached it, addressed to n2
  EXPECT_EQ(ignored.at("n2"), 0);
}

// Failover (docs/routing.md): n1 is killed (SIGKILL) holding a streaming CRITICAL
// request (restarts by default), a streaming NORMAL one (does not) and a NORMAL one
// queued behind it (not started: moved). n2 finishes the two that move; the NORMAL
// stream ends with the client's own terminal STATUS_NODE_LOST; nothing hangs and no
// request is answered twice.
TEST_F(MultiNode, FailoverAfterSigkillMovesWhatCanMoveAndEndsTheRest) {
  // Conservative knobs (no sensor): NORMAL 1 token per chunk, 12 ms pauses (250 tokens:
  // ~3 s); CRITICAL's pause raised from 5 to 60 ms (4 tokens per chunk: ~4 s), so both
  // are still streaming when n1 dies.
  const std::string crit_knobs =
      "urgency: CRITICAL   knobs { core_class: PERFORMANCE threads: 2 "
      "precision: W8A16 prefill_chunk: 32 decode_tokens_per_chunk: 4 ";
  const std::string policy =
      DefaultPolicyWith(crit_knobs + "pause_ms: 5 ", crit_knobs + "pause_ms: 60 ");
  ASSERT_NE(policy.find(crit_knobs + "pause_ms: 60 "), std::string::npos);
  StartNodes(1, {}, policy);
  Observer obs;
  ASSERT_TRUE(obs.Open(domain_));
  auto client = Connect("failover");
  ASSERT_TRUE(client && WaitNodes(*client, 1));
  auto ask = [&](ari_UrgencyClass u, uint32_t tokens) {
    AskParams p = Story(tokens, u);
    p.deadline_ms = u == ari_URGENCY_CRITICAL ? 20000 : 0;
    auto s = client->Ask(p);
    EXPECT_TRUE(s.has_value()) << s.error().ToString();
    EXPECT_TRUE(!s || s->node_id() == "n1");
    return s;
  };
  auto normal = ask(ari_URGENCY_NORMAL, 250);
  ASSERT_TRUE(normal && normal->Next(20s).has_value());
  auto queued = ask(ari_URGENCY_NORMAL, 16);
  auto crit = ask(ari_URGENCY_CRITICAL, 250);
  ASSERT_TRUE(queued && crit && crit->Next(20s).has_value());
  // The second NORMAL waits behind the first (one NORMAL turn at a time here).
  auto held = client->WaitForNode(
      20s, [](const ari_NodeStatus& st) { return st.queue_depth[ari_URGENCY_NORMAL] >= 1; });
  ASSERT_TRUE(held.has_value()) << nodes_["n1"]->Log();
  StartNodes(2, {}, policy);  // n2 (n1 runs already)
  ASSERT_TRUE(WaitNodes(*client, 2));
  obs.Drain();  // n1's chunks so far, while its writer is still known
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(nodes_["n1"]->Stop(SIGKILL), 128 + SIGKILL);

  // The NORMAL stream: its own terminal, NODE_LOST, after the chunks that came.
  auto ended = normal->Wait({}, 30s);
  ASSERT_FALSE(ended.has_value());
  EXPECT_EQ(ended.error().code, component::ErrorCode::kNodeLost) << ended.error().ToString();
  // The queued one, moved: answered by n2 alone.
  auto first = queued->Next(30s);
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  const double failover_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_EQ(queued->node_id(), "n2");
  EXPECT_EQ(queued->restarts(), 0u);
  auto qsum = queued->Wait({}, 30s);
  EXPECT_TRUE(qsum.has_value()) << qsum.error().ToString();
  // The CRITICAL one, restarted on n2: a whole answer, inside its deadline.
  auto csum = crit->Wait({}, 30s);
  ASSERT_TRUE(csum.has_value()) << csum.error().ToString();
  EXPECT_EQ(crit->node_id(), "n2");
  EXPECT_EQ(crit->restarts(), 1u);
  EXPECT_EQ(csum->tokens.size(), 250u);
  std::printf(
      "[ measure  ] failover: SIGKILL of n1 -> first chunk of the moved request from n2: "
      "%.0f ms (liveliness lease 500 ms)\n",
      failover_ms);
  std::this_thread::sleep_for(300ms);
  obs.Drain();
  EXPECT_EQ(obs.requests_[queued->request_id()].nodes, std::set<std::string>{"n2"});
  EXPECT_EQ(obs.requests_[queued->request_id()].terminals, 1);
  // n1 never finished either (chunks it wrote after the last Drain show as "?": a dead
  // writer's participant cannot be looked up any more).
  EXPECT_EQ(obs.requests_[crit->request_id()].terminals, 1);
  EXPECT_TRUE(obs.requests_[crit->request_id()].nodes.contains("n2"));
  EXPECT_EQ(obs.requests_[normal->request_id()].terminals, 0);
  EXPECT_FALSE(obs.requests_[normal->request_id()].nodes.contains("n2"));
  nodes_.erase("n1");
  StopAll();
}

// A client that asks the moment it connects (as ari-cli does) must not send an
// unaddressed request that both nodes answer: Route waits (at most 1 s after connect)
// for the NodeStatus of every matched node.
TEST_F(MultiNode, AClientAskingAtOnceStillAddressesOneNode) {
  StartNodes(2);
  Observer obs;
  ASSERT_TRUE(obs.Open(domain_));
  {
    auto first = Connect("first");
    ASSERT_TRUE(first && WaitNodes(*first, 2));
  }
  for (int i = 0; i < 3; ++i) {
    auto client = Connect("eager" + std::to_string(i));
    ASSERT_TRUE(client);
    auto s = client->Ask(Story(4));
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    EXPECT_FALSE(s->node_id().empty()) << "sent unaddressed";
    EXPECT_TRUE(s->Wait({}, 20s).has_value());
    std::this_thread::sleep_for(200ms);
    obs.Drain();
    EXPECT_EQ(obs.requests_[s->request_id()].nodes.size(), 1u) << s->request_id();
    EXPECT_EQ(obs.requests_[s->request_id()].terminals, 1);
  }
  StopAll();
}

}  // namespace
}  // namespace ari::testing
