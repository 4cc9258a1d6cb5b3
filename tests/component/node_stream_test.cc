// ari-node end to end (multi-process): stream integrity against the in-process engine,
// concurrent clients with mixed urgency, cancel, and every bad-request case.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "component/client/client.h"
#include "runtime/engine/engine.h"
#include "runtime/model/model.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
using component::AskParams;
using component::Client;
using component::ClientOptions;
using namespace std::chrono_literals;

std::filesystem::path g_dir, g_model;
NodeProcess* g_node = nullptr;
std::shared_ptr<dds::Domain> g_domain;

class NodeStream : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_dir = TempDir("node_stream");
    g_model = Stories260K(g_dir);
    if (g_model.empty()) return;
    // BACKGROUND queue of 1 so "full queue" is reachable.
    auto cfg = WriteNodeConfig(g_dir, g_model, "",
                               DefaultPolicyWith("queue_capacity: 64", "queue_capacity: 1"));
    g_node = new NodeProcess();
    ASSERT_TRUE(g_node->Start(cfg, g_dir / "node.log"));
    dds::DomainOptions d;
    d.domain_id = static_cast<uint32_t>(TestDomainId());
    d.config = LoopbackConfigUri();
    auto dom = dds::Domain::Create(d);
    ASSERT_TRUE(dom.has_value()) << dom.error().ToString();
    g_domain = *dom;
  }
  static void TearDownTestSuite() {
    if (g_node) {
      EXPECT_EQ(g_node->Stop(SIGTERM), 0) << g_node->Log();
      delete g_node;
      g_node = nullptr;
    }
    g_domain.reset();
    std::filesystem::remove_all(g_dir);
  }
  void SetUp() override {
    if (g_model.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  }
  std::unique_ptr<Client> Connect(const std::string& name) {
    ClientOptions o;
    o.client_id = name;
    o.node_timeout = 20s;
    auto c = Client::Connect(g_domain, o);
    EXPECT_TRUE(c.has_value()) << c.error().ToString();
    if (!c) return nullptr;
    auto s = (*c)->WaitForNode(20s);
    EXPECT_TRUE(s.has_value()) << g_node->Log();
    return std::move(*c);
  }
};

// The node runs without a sensor here, so every chunk uses the policy's conservative table:
// CRITICAL W8A16, the other classes W4A8 (config/policy_default.textproto).
runtime::Precision ConservativePrecision(ari_UrgencyClass u) {
  return u == ari_URGENCY_CRITICAL ? runtime::Precision::kW8A16 : runtime::Precision::kW4A8;
}

// Text of the in-process engine for the same model, prompt and precision.
struct Reference {
  std::string text;
  std::vector<int32_t> tokens;
};
Reference InProcess(const std::string& prompt, int max_tokens, runtime::Precision precision) {
  runtime::EngineOptions eo;
  eo.model_path = g_model;
  eo.slots = 1;
  eo.context_length = 512;
  eo.max_output = 256;
  eo.threads = 1;
  eo.require_tokenizer = true;
  auto engine = runtime::Engine::Create(eo);
  EXPECT_TRUE(engine.has_value());
  Reference ref;
  if (!engine) return ref;
  auto ids = (*engine)->model().tokenizer()->Encode(prompt, runtime::EncodeOptions{});
  EXPECT_TRUE(ids.has_value());
  runtime::TurnSpec turn;
  turn.prompt = *ids;
  turn.max_tokens = max_tokens;
  turn.keep_context = false;
  EXPECT_TRUE((*engine)->StartTurn(0, turn).has_value());
  runtime::ChunkKnobs knobs;
  knobs.precision = precision;
  for (int i = 0; i < 1000; ++i) {
    auto r = (*engine)->RunChunk(0, knobs);
    EXPECT_TRUE(r.has_value());
    if (!r) break;
    ref.text.append(r->text);
    ref.tokens.insert(ref.tokens.end(), r->tokens.begin(), r->tokens.end());
    if (r->finished) break;
  }
  return ref;
}

TEST_F(NodeStream, StreamIsContiguousWithOneTerminalAndEqualsInProcessEngine) {
  auto client = Connect("integrity");
  ASSERT_TRUE(client);
  AskParams p;
  p.prompt = "Once upon a time";
  p.max_tokens = 40;
  p.sampling.seed = 7;
  auto stream = client->Ask(p);
  ASSERT_TRUE(stream.has_value()) << stream.error().ToString();
  uint32_t expect_seq = 0, terminals = 0;
  std::string text;
  std::vector<int32_t> tokens;
  for (;;) {
    auto c = stream->Next(30s);
    if (!c) {
      EXPECT_EQ(c.error().code, component::ErrorCode::kClosed) << c.error().ToString();
      break;
    }
    EXPECT_EQ(c->sequence_number, expect_seq++);
    text.append(c->text, c->text_len);
    tokens.insert(tokens.end(), c->token_ids, c->token_ids + c->n_tokens);
    if (c->terminal) {
      ++terminals;
      EXPECT_EQ(dds::RawEnum(c->status), ari_STATUS_DONE) << c->message;
      EXPECT_EQ(c->timing.tokens_generated, 40u);
    }
  }
  EXPECT_EQ(terminals, 1u);
  const Reference ref = InProcess(p.prompt, 40, ConservativePrecision(ari_URGENCY_NORMAL));
  EXPECT_EQ(tokens, ref.tokens);
  EXPECT_EQ(text, ref.text);
}

TEST_F(NodeStream, ConcurrentClientsWithMixedUrgencyAllFinishIntact) {
  const ari_UrgencyClass urg[] = {ari_URGENCY_BACKGROUND, ari_URGENCY_NORMAL, ari_URGENCY_HIGH,
                                  ari_URGENCY_CRITICAL};
  const std::string prompt = "The little bird";
  Reference refs[4];
  for (int i = 0; i < 4; ++i) refs[i] = InProcess(prompt, 24, ConservativePrecision(urg[i]));
  ASSERT_NE(refs[0].tokens, refs[3].tokens);  // the two precisions answer differently
  std::vector<std::thread> threads;
  threads.reserve(4);
  std::vector<component::Result<component::StreamSummary>> results(
      4, std::unexpected(component::Error{}));
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto client = Connect("mixed" + std::to_string(i));
      if (!client) return;
      AskParams p;
      p.prompt = prompt;
      p.max_tokens = 24;
      p.urgency = urg[i];
      auto s = client->Ask(p);
      if (!s) return;
      results[i] = s->Wait({}, 60s);
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(results[i].has_value()) << i << ": " << results[i].error().ToString();
    EXPECT_EQ(results[i]->gaps, 0u);
    EXPECT_EQ(results[i]->text, refs[i].text) << "urgency " << i;  // preemption keeps the KV
  }
}

TEST_F(NodeStream, CancelEndsTheStreamWithCancelled) {
  auto client = Connect("canceller");
  ASSERT_TRUE(client);
  AskParams p;
  p.prompt = "Once upon a time";
  p.max_tokens = 250;
  p.urgency = ari_URGENCY_BACKGROUND;
  auto stream = client->Ask(p);
  ASSERT_TRUE(stream.has_value());
  auto first = stream->Next(30s);
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(client->Cancel(stream->request_id()).has_value());
  auto sum = stream->Wait({}, 30s);
  ASSERT_FALSE(sum.has_value());
  EXPECT_EQ(sum.error().code, component::ErrorCode::kCancelled) << sum.error().ToString();
}

// Writes raw Request samples (anything the IDL allows) and reads the answers.
class RawPeer {
 public:
  bool Init() {
    auto pp = dds::Participant::Create(g_domain);
    if (!pp) return false;
    pp_ = std::move(*pp);
    auto rt = dds::Topic::Create(pp_, dds::TopicKind::kRequest);
    auto ct = dds::Topic::Create(pp_, dds::TopicKind::kTokenChunk);
    auto xt = dds::Topic::Create(pp_, dds::TopicKind::kCancel);
    if (!rt || !ct || !xt) return false;
    req_t_ = std::move(*rt);
    chunk_t_ = std::move(*ct);
    cancel_t_ = std::move(*xt);
    auto w = dds::Writer::Create(pp_, req_t_);
    auto x = dds::Writer::Create(pp_, cancel_t_);
    auto r = dds::Reader::Create(pp_, chunk_t_);
    if (!w || !r || !x) return false;
    writer_ = std::move(*w);
    cancel_ = std::move(*x);
    reader_ = std::move(*r);
    for (int i = 0; i < 400; ++i) {  // wait until the node's reader/writer match
      auto m = writer_.MatchedReaders();
      auto n = reader_.MatchedWriters();
      if (m && *m > 0 && n && *n > 0) return true;
      std::this_thread::sleep_for(25ms);
    }
    return false;
  }
  static ari_Request Make(const std::string& id, const std::string& prompt, uint32_t max_tokens,
                          const std::string& client = "raw") {
    ari_Request r{};
    const dds::InstanceKey key = dds::KeyOfName(id);  // one instance per request
    r.key_hi = key.hi;
    r.key_lo = key.lo;
    dds::CopyFixed(id, r.request_id);
    dds::CopyFixed(client, r.client_id);
    r.urgency = ari_URGENCY_NORMAL;
    r.max_tokens = max_tokens;
    std::memcpy(r.prompt, prompt.data(), std::min(prompt.size(), sizeof r.prompt));
    r.prompt_len = static_cast<uint32_t>(prompt.size());
    return r;
  }
  bool Send(const ari_Request& r) { return writer_.Write(&r).has_value(); }
  // Disposes the request's instance (by its 16-byte key): the node cancels it.
  bool Dispose(const ari_Request& r) { return dds_dispose(writer_.handle(), &r) == DDS_RETCODE_OK; }
  void Cancel(const std::string& id, const std::string& client = "raw") {
    ari_Cancel c{};
    const dds::InstanceKey key = dds::KeyOfName(id);
    c.key_hi = key.hi;
    c.key_lo = key.lo;
    dds::CopyFixed(id, c.request_id);
    dds::CopyFixed(client, c.client_id);
    EXPECT_TRUE(cancel_.Write(&c).has_value()) << id;
  }
  // Chunks of `id` until its terminal (or timeout); also counts terminals.
  std::vector<ari_TokenChunk> AwaitTerminal(const std::string& id, std::chrono::seconds t = 30s) {
    const auto end = std::chrono::steady_clock::now() + t;
    for (;;) {
      Drain();
      auto& v = seen_[id];
      if ((!v.empty() && v.back().terminal) || std::chrono::steady_clock::now() >= end) return v;
      std::this_thread::sleep_for(5ms);
    }
  }

 private:
  void Drain() {
    // Our own sample buffers (no loans: a fixed-size type needs no allocation).
    static ari_TokenChunk samples[16];
    void* buf[16];
    for (int i = 0; i < 16; ++i) buf[i] = &samples[i];
    dds_sample_info_t info[16];
    for (;;) {
      const int n = dds_take(reader_.handle(), buf, info, 16, 16);
      if (n <= 0) return;
      for (int i = 0; i < n; ++i) {
        if (info[i].valid_data) {
          seen_[std::string(dds::FixedView(samples[i].request_id))].push_back(samples[i]);
        }
      }
    }
  }
  dds::Participant pp_;
  dds::Topic req_t_, chunk_t_, cancel_t_;
  dds::Writer writer_, cancel_;
  dds::Reader reader_;
  std::map<std::string, std::vector<ari_TokenChunk>> seen_;
};

void ExpectOneTerminal(const std::vector<ari_TokenChunk>& chunks, ari_ChunkStatus status,
                       const std::string& needle, const std::string& what) {
  ASSERT_FALSE(chunks.empty()) << what << ": no answer";
  ASSERT_EQ(chunks.size(), 1u) << what;
  EXPECT_TRUE(chunks[0].terminal) << what;
  EXPECT_EQ(dds::RawEnum(chunks[0].status), status) << what << ": " << chunks[0].message;
  EXPECT_NE(std::string(dds::FixedView(chunks[0].message)).find(needle), std::string::npos)
      << what << ": " << chunks[0].message;
}

TEST_F(NodeStream, EveryBadRequestGetsOneTerminalAtOnce) {
  RawPeer peer;
  ASSERT_TRUE(peer.Init());
  auto r = RawPeer::Make("bad-empty", "", 8);
  ASSERT_TRUE(peer.Send(r));
  ExpectOneTerminal(peer.AwaitTerminal("bad-empty"), ari_STATUS_INVALID, "empty", "empty");

  r = RawPeer::Make("bad-big", std::string(600, 'a'), 8);  // > max_prompt_bytes 512
  ASSERT_TRUE(peer.Send(r));
  ExpectOneTerminal(peer.AwaitTerminal("bad-big"), ari_STATUS_INVALID, "limit", "oversized");

  r = RawPeer::Make("bad-max0", "Hi", 0);
  ASSERT_TRUE(peer.Send(r));
  ExpectOneTerminal(peer.AwaitTerminal("bad-max0"), ari_STATUS_INVALID, "max_tokens", "max 0");
  r = RawPeer::Make("bad-max-big", "Hi", 100000);
  ASSERT_TRUE(peer.Send(r));
  ExpectOneTerminal(peer.AwaitTerminal("bad-max-big"), ari_STATUS_INVALID, "max_tokens", "max");

  // An unknown urgency cannot be sent: Cyclone refuses to serialize an enum value outside
  // the IDL's range (and leaks its serialization buffer doing so, so it is not tried
  // here); the node's own check (request_validator test) is defence in depth.

  r = RawPeer::Make("bad-utf8", "ab\xc3(", 8);
  ASSERT_TRUE(peer.Send(r));
  ExpectOneTerminal(peer.AwaitTerminal("bad-utf8"), ari_STATUS_INVALID, "UTF-8", "utf8");

  // Duplicate id: the first one runs to DONE, the second is refused.
  r = RawPeer::Make("dup-1", "Hi", 4);
  ASSERT_TRUE(peer.Send(r));
  auto first = peer.AwaitTerminal("dup-1");
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(dds::RawEnum(first.back().status), ari_STATUS_DONE);
  const size_t before = first.size();
  ASSERT_TRUE(peer.Send(r));
  std::vector<ari_TokenChunk> again;
  for (int i = 0; i < 600 && again.size() <= before; ++i) {
    again = peer.AwaitTerminal("dup-1", 0s);
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(again.size(), before + 1) << g_node->Log();
  EXPECT_TRUE(again.back().terminal);
  EXPECT_EQ(dds::RawEnum(again.back().status), ari_STATUS_REJECTED);
  EXPECT_NE(std::string(dds::FixedView(again.back().message)).find("duplicate"), std::string::npos);
}

// Disposing a Request instance withdraws the request (docs/interface.md "Keys").
TEST_F(NodeStream, DisposedRequestIsCancelledByKey) {
  RawPeer peer;
  ASSERT_TRUE(peer.Init());
  auto r = RawPeer::Make("disposed-1", "Once upon a time", 250);
  r.urgency = ari_URGENCY_BACKGROUND;  // paced: long enough to be cancelled mid-stream
  ASSERT_TRUE(peer.Send(r));
  // After the first chunk: the writer's KEEP_LAST 1 history would let an immediate dispose
  // replace the unacknowledged request sample (then the node never sees the request).
  for (int i = 0; i < 3000 && peer.AwaitTerminal("disposed-1", 0s).empty(); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(peer.Dispose(r));
  auto chunks = peer.AwaitTerminal("disposed-1");
  ASSERT_FALSE(chunks.empty()) << g_node->Log();
  EXPECT_TRUE(chunks.back().terminal);
  EXPECT_EQ(dds::RawEnum(chunks.back().status), ari_STATUS_CANCELLED) << chunks.back().message;
  EXPECT_LT(chunks.back().timing.tokens_generated, 250u);
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].sequence_number, i);
    EXPECT_EQ(chunks[i].key_hi, r.key_hi);
    EXPECT_EQ(chunks[i].key_lo, r.key_lo);
  }
}

TEST_F(NodeStream, FullQueueAndRateLimitAreRefused) {
  RawPeer peer;
  ASSERT_TRUE(peer.Init());
  // BACKGROUND queue holds 1 (test policy): of 4 long requests sent at once, one runs,
  // one waits, the others are BUSY.
  for (int i = 0; i < 4; ++i) {
    auto r = RawPeer::Make("bg-" + std::to_string(i), "Once upon a time", 200, "bgclient");
    r.urgency = ari_URGENCY_BACKGROUND;
    ASSERT_TRUE(peer.Send(r));
  }
  int busy = 0;
  for (int i = 0; i < 4; ++i) {
    const std::string id = "bg-" + std::to_string(i);
    peer.Cancel(id, "bgclient");
    auto chunks = peer.AwaitTerminal(id);
    ASSERT_FALSE(chunks.empty());
    int terminals = 0;
    for (size_t k = 0; k < chunks.size(); ++k) {
      EXPECT_EQ(chunks[k].sequence_number, k);
      terminals += chunks[k].terminal;
    }
    EXPECT_EQ(terminals, 1);
    busy += dds::RawEnum(chunks.back().status) == ari_STATUS_BUSY;
  }
  EXPECT_GE(busy, 1);

  // Rate limit: burst 20 at 50/s; 40 requests at once from one client hit it.
  int limited = 0;
  for (int i = 0; i < 40; ++i) {
    auto r = RawPeer::Make("rate-" + std::to_string(i), "Hi", 1, "flood");
    r.urgency = ari_URGENCY_CRITICAL;
    ASSERT_TRUE(peer.Send(r));
  }
  for (int i = 0; i < 40; ++i) {
    auto chunks = peer.AwaitTerminal("rate-" + std::to_string(i));
    ASSERT_FALSE(chunks.empty());
    const std::string msg(dds::FixedView(chunks.back().message));
    if (dds::RawEnum(chunks.back().status) == ari_STATUS_REJECTED &&
        msg.find("rate limit") != std::string::npos) {
      ++limited;
    }
  }
  EXPECT_GE(limited, 1) << g_node->Log();
}

}  // namespace
}  // namespace ari::testing
