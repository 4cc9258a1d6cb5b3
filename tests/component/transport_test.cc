// Client <-> node transport over real DDS on loopback (own domain id). The node runs
// in a forked child with FakeEngine, a test double for the engine only.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "component/client/client.h"
#include "component/node/node_transport.h"
#include "tests/common/dds_test_util.h"
#include "tests/component/fake_node.h"

namespace {

using ari::component::Client;
using ari::component::ClientOptions;
using ari::component::ErrorCode;
using ari::component::NodeLiveliness;
using ari::testing::FakeNodeConfig;
using ari::testing::FakeNodeProcess;
using ari::testing::NodeReport;
namespace dds = ari::component::dds;
using namespace std::chrono_literals;

ari::component::AskParams Prompt(std::string text) {
  ari::component::AskParams p;
  p.prompt = std::move(text);
  return p;
}

dds::DomainOptions LoopbackDomain() {
  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(ari::testing::TestDomainId());
  d.config = ari::testing::LoopbackConfigUri();
  return d;
}

FakeNodeConfig NodeConfig(uint32_t status_seq = 1) {
  FakeNodeConfig c;
  c.domain = LoopbackDomain();
  c.status_seq = status_seq;
  return c;
}

ClientOptions ClientOpts(const char* id = "test-client") {
  ClientOptions o;
  o.domain = LoopbackDomain();
  o.client_id = id;
  o.node_timeout = 10s;
  return o;
}

TEST(Transport, StreamsChunksInOrderWithOneTerminal) {
  FakeNodeProcess node(NodeConfig());
  ASSERT_TRUE(node.WaitReady()) << "fake node did not start";
  auto client = Client::Connect(ClientOpts());
  ASSERT_TRUE(client) << client.error().ToString();
  auto stream = (*client)->Ask([] {
    auto p = Prompt("stream:40");
    p.urgency = ari_URGENCY_HIGH;
    p.max_tokens = 40;
    return p;
  }());
  ASSERT_TRUE(stream) << stream.error().ToString();
  EXPECT_EQ(stream->request_id().rfind("test-client-1-", 0), 0u) << stream->request_id();

  uint32_t expect_seq = 0, terminals = 0;
  std::string text;
  for (const ari_TokenChunk& c : *stream) {
    EXPECT_EQ(c.sequence_number, expect_seq++);
    EXPECT_EQ(dds::FixedView(c.request_id), stream->request_id());
    if (c.terminal) ++terminals;
    text.append(c.text, c.text_len);
    if (!c.terminal) {
      ASSERT_EQ(c.n_tokens, 1u);
      EXPECT_EQ(c.token_ids[0], 1000 + static_cast<int>(c.sequence_number));
    }
  }
  EXPECT_FALSE(stream->error()) << stream->error()->ToString();
  EXPECT_EQ(terminals, 1u);
  EXPECT_EQ(expect_seq, 41u);
  std::string want;
  for (int i = 0; i < 40; ++i) want += "t" + std::to_string(i) + " ";
  EXPECT_EQ(text, want);

  // Second request, callback style; ids are unique per Ask.
  auto s2 = (*client)->Ask(Prompt("stream:3"));
  ASSERT_TRUE(s2);
  EXPECT_NE(s2->request_id(), stream->request_id());
  int calls = 0;
  auto sum = s2->Wait([&](const ari_TokenChunk&) { ++calls; }, 20s);
  ASSERT_TRUE(sum) << sum.error().ToString();
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(sum->status, ari_STATUS_DONE);
  EXPECT_EQ(sum->text, "t0 t1 t2 ");
  EXPECT_EQ(sum->tokens, (std::vector<int32_t>{1000, 1001, 1002}));
  EXPECT_EQ(sum->gaps, 0u);
  client->reset();

  NodeReport rep;
  EXPECT_EQ(node.Stop(&rep), 0);
  EXPECT_EQ(rep.requests, 2u);
  EXPECT_EQ(rep.chunks, 45u);
}

TEST(Transport, RejectAndDeadlineAreClearErrors) {
  FakeNodeProcess node(NodeConfig());
  ASSERT_TRUE(node.WaitReady());
  auto client = Client::Connect(ClientOpts());
  ASSERT_TRUE(client) << client.error().ToString();
  auto s = (*client)->Ask(Prompt("reject"));
  ASSERT_TRUE(s);
  auto r = s->Wait({}, 20s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kRejected) << r.error().ToString();
  EXPECT_EQ(r.error().status, ari_STATUS_REJECTED);
  EXPECT_NE(r.error().message.find("test double rejects"), std::string::npos);

  auto d = (*client)->Ask([] {
    auto p = Prompt("deadline");
    p.deadline_ms = 1;
    return p;
  }());
  ASSERT_TRUE(d);
  auto rd = d->Wait({}, 20s);
  ASSERT_FALSE(rd);
  EXPECT_EQ(rd.error().code, ErrorCode::kDeadlineMissed) << rd.error().ToString();
  client->reset();
  EXPECT_EQ(node.Stop(nullptr), 0);
}

TEST(Transport, CancelIsDelivered) {
  FakeNodeProcess node(NodeConfig());
  ASSERT_TRUE(node.WaitReady());
  auto client = Client::Connect(ClientOpts());
  ASSERT_TRUE(client);
  auto s = (*client)->Ask(Prompt("wait-cancel"));
  ASSERT_TRUE(s);
  auto first = s->Next(20s);  // streaming has begun
  ASSERT_TRUE(first) << first.error().ToString();
  ASSERT_TRUE((*client)->Cancel(s->request_id()));
  auto r = s->Wait({}, 20s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kCancelled) << r.error().ToString();
  client->reset();
  NodeReport rep;
  EXPECT_EQ(node.Stop(&rep), 0);
  EXPECT_EQ(rep.cancels, 1u);
}

TEST(Transport, LateJoinerSeesNodeStatus) {
  FakeNodeProcess node(NodeConfig(/*status_seq=*/7));
  ASSERT_TRUE(node.WaitReady());  // status already published before the client exists
  auto client = Client::Connect(ClientOpts("late-joiner"));
  ASSERT_TRUE(client);
  auto st = (*client)->WaitForNode(10s);
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_EQ(st->status_seq, 7u);
  EXPECT_EQ(dds::FixedView(st->node_id), "fake-node");
  EXPECT_EQ(dds::FixedView(st->model), "tiny-test-model");
  EXPECT_EQ(st->queue_depth[ari_URGENCY_NORMAL], 2u);
  EXPECT_EQ(st->state, ari_NODE_READY);
  client->reset();
  EXPECT_EQ(node.Stop(nullptr), 0);
}

TEST(Transport, KilledNodeLosesLivelinessAndRestartIsSeen) {
  auto node = std::make_unique<FakeNodeProcess>(NodeConfig(1));
  ASSERT_TRUE(node->WaitReady());
  auto client = Client::Connect(ClientOpts());
  ASSERT_TRUE(client);
  ASSERT_TRUE((*client)->WaitForNode(10s));
  ASSERT_TRUE((*client)->WaitForLiveliness(NodeLiveliness::kAlive, 10s));
  auto s = (*client)->Ask(Prompt("wait-cancel"));  // in flight when the node dies
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->Next(20s));

  node->Kill();  // SIGKILL by PID: no goodbye messages, only the lease expires
  auto lost = (*client)->WaitForLiveliness(NodeLiveliness::kLost, 20s);
  ASSERT_TRUE(lost) << lost.error().ToString();
  EXPECT_EQ((*client)->Node().lost_events, 1u);
  // The in-flight stream ends with kNodeLost (after the chunks that did arrive).
  auto r = s->Wait({}, 20s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kNodeLost) << r.error().ToString();

  FakeNodeProcess restarted(NodeConfig(2));
  ASSERT_TRUE(restarted.WaitReady());
  ASSERT_TRUE((*client)->WaitForLiveliness(NodeLiveliness::kAlive, 20s));
  auto s2 = (*client)->Ask(Prompt("stream:2"));
  ASSERT_TRUE(s2);
  auto sum = s2->Wait({}, 20s);
  ASSERT_TRUE(sum) << sum.error().ToString();
  EXPECT_EQ(sum->text, "t0 t1 ");
  // The new node's transient-local status replaces the dead one's.
  auto st = (*client)->WaitForNode(20s, [](const ari_NodeStatus& s) { return s.status_seq == 2; });
  ASSERT_TRUE(st) << st.error().ToString();
  EXPECT_EQ((*client)->Node().liveliness, NodeLiveliness::kAlive);
  client->reset();
  EXPECT_EQ(restarted.Stop(nullptr), 0);
}

TEST(Transport, AskWithoutNodeFailsWithNodeAbsent) {
  auto opts = ClientOpts("lonely");
  opts.node_timeout = 300ms;
  auto client = Client::Connect(opts);
  ASSERT_TRUE(client);
  auto s = (*client)->Ask(Prompt("stream:1"));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code, ErrorCode::kNodeAbsent) << s.error().ToString();
  EXPECT_EQ((*client)->Node().liveliness, NodeLiveliness::kUnknown);
}

TEST(Transport, InProcessNodeAndClientShareOneDomain) {
  auto domain = dds::Domain::Create(LoopbackDomain());
  ASSERT_TRUE(domain) << domain.error().ToString();
  EXPECT_FALSE((*domain)->shared_memory_enabled());
  auto node = ari::component::NodeTransport::Create(*domain);
  ASSERT_TRUE(node) << node.error().ToString();
  {
    ari::testing::FakeEngine engine(node->get());
    ASSERT_TRUE((*node)->Start(
        [&](const ari_Request& r, const ari::component::RequestInfo& info) {
          EXPECT_TRUE(info.requester_matched);
          EXPECT_GT(info.source_timestamp_ns, 0);
          engine.OnRequest(r);
        },
        [&](const ari_Cancel& c) { engine.OnCancel(c); }));
    auto client = Client::Connect(*domain, ClientOpts("inproc"));
    ASSERT_TRUE(client) << client.error().ToString();
    auto s = (*client)->Ask([] {
      ari::component::AskParams p;
      p.turns = {{ari_ROLE_SYSTEM, "be brief"}, {ari_ROLE_USER, "stream:5"}};
      return p;
    }());
    ASSERT_TRUE(s);
    // The test double reads only the prompt field: turns-only requests get INVALID.
    auto r = s->Wait({}, 20s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().status, ari_STATUS_INVALID);
    auto s2 = (*client)->Ask(Prompt("stream:5"));
    ASSERT_TRUE(s2);
    auto sum = s2->Wait({}, 20s);
    ASSERT_TRUE(sum) << sum.error().ToString();
    EXPECT_EQ(sum->chunks, 6u);
    (*node)->Stop();
  }
  EXPECT_EQ((*node)->stats().requests, 2u);
  EXPECT_EQ((*node)->stats().chunks_loaned, 0u);  // no shared memory on the loopback config
}

// CRITICAL travels in DDS partition ari-critical (docs/interface.md "QoS"): the client
// library writes it there, the node's second reader takes it and says so
// (RequestInfo::critical_partition); other urgencies stay in the default partition. A
// writer of the default partition (a client from before the partition) still reaches
// the node with CRITICAL, flagged as not from the partition.
TEST(Transport, CriticalRequestsTravelInTheirOwnPartition) {
  auto domain = dds::Domain::Create(LoopbackDomain());
  ASSERT_TRUE(domain) << domain.error().ToString();
  auto node = ari::component::NodeTransport::Create(*domain);
  ASSERT_TRUE(node) << node.error().ToString();
  EXPECT_TRUE((*node)->critical_reader()) << (*node)->critical_reader_note();
  std::mutex mu;
  std::map<std::string, std::pair<int32_t, bool>> seen;  // request id -> urgency, partition
  {
    ari::testing::FakeEngine engine(node->get());
    ASSERT_TRUE((*node)->Start(
        [&](const ari_Request& r, const ari::component::RequestInfo& info) {
          {
            std::lock_guard<std::mutex> l(mu);
            seen[std::string(dds::FixedView(r.request_id))] = {dds::RawEnum(r.urgency),
                                                               info.critical_partition};
          }
          if (info.requester_matched) engine.OnRequest(r);
        },
        [&](const ari_Cancel& c) { engine.OnCancel(c); }));
    auto client = Client::Connect(*domain, ClientOpts("parts"));
    ASSERT_TRUE(client) << client.error().ToString();
    std::string ids[2];
    for (int i = 0; i < 2; ++i) {
      auto p = Prompt("stream:3");
      p.urgency = i == 0 ? ari_URGENCY_CRITICAL : ari_URGENCY_NORMAL;
      auto s = (*client)->Ask(p);
      ASSERT_TRUE(s) << s.error().ToString();
      ids[i] = s->request_id();
      auto sum = s->Wait({}, 20s);
      ASSERT_TRUE(sum) << sum.error().ToString();
      EXPECT_EQ(sum->chunks, 4u);
    }
    EXPECT_EQ((*client)->request_stats().writes, 2u);  // both writers counted
    // An old-style writer: default partition, CRITICAL.
    auto pp = dds::Participant::Create(*domain);
    ASSERT_TRUE(pp);
    auto topic = dds::Topic::Create(*pp, dds::TopicKind::kRequest);
    ASSERT_TRUE(topic);
    auto w = dds::Writer::Create(*pp, *topic);
    ASSERT_TRUE(w);
    for (int i = 0; i < 400 && w->MatchedReaders().value_or(0) == 0; ++i) {
      std::this_thread::sleep_for(10ms);
    }
    ari_Request r{};
    ASSERT_TRUE(ari::component::EncodeRequest(
        [] {
          auto p = Prompt("stream:1");
          p.urgency = ari_URGENCY_CRITICAL;
          return p;
        }(),
        "old-1", "old", &r));
    r.key_lo = 1;
    ASSERT_TRUE(w->Write(&r));
    for (int i = 0; i < 400; ++i) {
      {
        std::lock_guard<std::mutex> l(mu);
        if (seen.contains("old-1")) break;
      }
      std::this_thread::sleep_for(10ms);
    }
    (*node)->Stop();
    std::lock_guard<std::mutex> l(mu);
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[ids[0]], std::make_pair(int32_t{ari_URGENCY_CRITICAL}, true));
    EXPECT_EQ(seen[ids[1]], std::make_pair(int32_t{ari_URGENCY_NORMAL}, false));
    EXPECT_EQ(seen["old-1"], std::make_pair(int32_t{ari_URGENCY_CRITICAL}, false));
  }
  EXPECT_EQ((*node)->stats().requests, 3u);
  EXPECT_EQ((*node)->stats().critical_partition_requests, 1u);
}

}  // namespace
