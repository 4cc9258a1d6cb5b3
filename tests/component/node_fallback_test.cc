// ari-node in process, memory ladder's last step: an injected memory source drops
// below the fallback threshold, new requests are served by the fallback model (a
// synthetic model with stories260K's vocabulary) while the main model (stories260K)
// finishes what it started; once the pressure is gone the fallback is unmapped. Every
// request gets exactly one terminal chunk; each transition is logged with its reason.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "component/client/client.h"
#include "component/node/node.h"
#include "runtime/convert/synth.h"
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
constexpr uint64_t kMB = 1024ull * 1024ull;

struct Answer {
  std::string text;
  std::vector<int32_t> tokens;
  uint32_t terminals = 0;
  uint32_t gaps = 0;
  ari_ChunkStatus status = ari_STATUS_OK;
  std::string message;
};

Answer Collect(component::Stream& stream, uint32_t expect = 0) {
  Answer a;
  for (;;) {
    auto c = stream.Next(60s);
    if (!c) break;  // kClosed after the terminal (or a timeout: terminals stays 0)
    if (c->sequence_number != expect) ++a.gaps;
    expect = c->sequence_number + 1;
    a.text.append(c->text, c->text_len);
    a.tokens.insert(a.tokens.end(), c->token_ids, c->token_ids + c->n_tokens);
    if (c->terminal) {
      ++a.terminals;
      a.status = static_cast<ari_ChunkStatus>(dds::RawEnum(c->status));
      a.message = c->message;
    }
  }
  return a;
}

// Greedy output of an in-process engine for the model, prompt and knobs.
std::vector<int32_t> Reference(const std::filesystem::path& model, const std::string& prompt,
                               int max_tokens, const runtime::ChunkKnobs& knobs) {
  runtime::EngineOptions eo;
  eo.model_path = model;
  eo.slots = 1;
  eo.context_length = 512;
  eo.max_output = 256;
  eo.threads = 1;
  eo.require_tokenizer = true;
  auto engine = runtime::Engine::Create(eo);
  EXPECT_TRUE(engine.has_value()) << engine.error().ToString();
  std::vector<int32_t> out;
  if (!engine) return out;
  auto ids = (*engine)->model().tokenizer()->Encode(prompt, runtime::EncodeOptions{});
  EXPECT_TRUE(ids.has_value());
  runtime::TurnSpec turn;
  turn.prompt = *ids;
  turn.max_tokens = max_tokens;
  turn.keep_context = false;
  EXPECT_TRUE((*engine)->StartTurn(0, turn).has_value());
  for (int i = 0; i < 1000; ++i) {
    auto r = (*engine)->RunChunk(0, knobs);
    EXPECT_TRUE(r.has_value());
    if (!r) break;
    out.insert(out.end(), r->tokens.begin(), r->tokens.end());
    if (r->finished) break;
  }
  return out;
}

// Serve() on a thread; stopped and joined on every exit path.
struct Serving {
  explicit Serving(component::Node* n) : node(n), thread([n] { n->Serve(-1); }) {}
  ~Serving() { Stop(); }
  void Stop() {
    if (thread.joinable()) {
      node->RequestStop();
      thread.join();
    }
  }
  component::Node* node;
  std::thread thread;
};

// Every "min_dwell_ms: N" set to 300 ms.
bool WaitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return cond();
}

// A random-weight "tiny" F16 model with the vocabulary of `vocab_from`.
bool WriteTinyF16(const std::filesystem::path& vocab_from, const std::filesystem::path& out) {
  auto preset = runtime::FindSynthPreset("tiny");
  if (!preset) return false;
  runtime::SynthOptions so;
  so.preset = *preset;
  so.type = runtime::TensorType::kF16;
  return runtime::WriteSynthModel(so, vocab_from, out).has_value();
}

runtime::EngineOptions SmallEngine(const std::filesystem::path& model) {
  runtime::EngineOptions eo;
  eo.model_path = model;
  eo.slots = 1;
  eo.context_length = 128;
  eo.threads = 1;
  return eo;
}

class NodeFallback : public ::testing::Test {};

TEST_F(NodeFallback, NewRequestsGoToTheFallbackWhichIsUnmappedAfterThePressure) {
  const auto dir = TempDir("node_fallback");
  const auto main_model = Stories260K(dir);
  if (main_model.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  // The fallback: a random-weight "tiny" model with stories260K's vocabulary.
  auto preset = runtime::FindSynthPreset("tiny");
  ASSERT_TRUE(preset.has_value());
  runtime::SynthOptions so;
  so.preset = *preset;
  so.type = runtime::TensorType::kF32;
  so.seed = 11;
  const auto fb_model = dir / "tiny-fallback.gguf";
  auto written = runtime::WriteSynthModel(so, main_model, fb_model);
  ASSERT_TRUE(written.has_value()) << written.error().ToString();

  // The default ladder with short dwells (the sensor is off: thermal bands do not matter).
  const std::string policy = ShortDwells(DefaultPolicyWith());
  const auto cfg_path = WriteNodeConfig(
      dir, main_model, "fallback_model_path: \"" + fb_model.string() + "\"\n", policy);
  auto cfg = component::LoadNodeConfig(cfg_path);
  ASSERT_TRUE(cfg.has_value()) << cfg.error().ToString();

  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(TestDomainId());
  d.config = LoopbackConfigUri();
  auto domain = dds::Domain::Create(d);
  ASSERT_TRUE(domain.has_value()) << domain.error().ToString();

  std::atomic<uint64_t> avail{4000 * kMB};
  component::NodeOverrides ov;
  ov.base_dir = dir;
  ov.domain = *domain;
  ov.memory_source = [&avail]() -> std::optional<thermal::MemoryReading> {
    thermal::MemoryReading r;
    r.available_bytes = avail.load();
    r.system_available_bytes = r.available_bytes;
    return r;
  };
  ::testing::internal::CaptureStderr();
  auto node = component::Node::Create(*cfg, ov);
  if (!node) {
    const std::string log = ::testing::internal::GetCapturedStderr();
    FAIL() << node.error().ToString() << "\n" << log;
  }
  Serving serving(node->get());
  const component::FallbackModel* fb = (*node)->fallback_model();
  ASSERT_NE(fb, nullptr);

  ClientOptions o;
  o.client_id = "ladder";
  o.node_timeout = 20s;
  auto client = Client::Connect(*domain, o);
  ASSERT_TRUE(client.has_value()) << client.error().ToString();
  ASSERT_TRUE((*client)->WaitForNode(20s).has_value());

  AskParams p;
  p.prompt = "Once upon a time";
  p.max_tokens = 12;
  // The sensor is off: NORMAL runs the conservative table's W4A8 (policy_default.textproto).
  runtime::ChunkKnobs plain;  // what the node runs without pressure
  plain.precision = runtime::Precision::kW4A8;
  runtime::ChunkKnobs ladder = plain;  // every action of "emergency"
  ladder.greedy_only = true;
  ladder.kv_type = runtime::KvType::kInt8;
  ladder.context_cap = 512;
  const auto main_ref = Reference(main_model, p.prompt, 12, plain);
  const auto fb_ref = Reference(fb_model, p.prompt, 12, ladder);
  ASSERT_EQ(main_ref.size(), 12u);
  ASSERT_NE(main_ref, fb_ref);  // the two models are told apart by their answers

  // 1. No pressure: the main model answers; nothing else is mapped.
  {
    auto s = (*client)->Ask(p);
    ASSERT_TRUE(s.has_value());
    const Answer a = Collect(*s);
    EXPECT_EQ(a.terminals, 1u);
    EXPECT_EQ(a.status, ari_STATUS_DONE) << a.message;
    EXPECT_EQ(a.tokens, main_ref);
  }
  EXPECT_FALSE(fb->mapped());
  EXPECT_EQ(fb->acquisitions(), 0);

  // 2. A long request starts on main, then memory drops below the fallback threshold.
  AskParams longp = p;
  longp.max_tokens = 120;
  auto in_flight = (*client)->Ask(longp);
  ASSERT_TRUE(in_flight.has_value());
  auto first = in_flight->Next(30s);  // it runs (on main) before the pressure arrives
  ASSERT_TRUE(first.has_value());
  avail = 60 * kMB;
  {
    auto s = (*client)->Ask(p);
    ASSERT_TRUE(s.has_value());
    const Answer a = Collect(*s);
    EXPECT_EQ(a.terminals, 1u);
    EXPECT_EQ(a.status, ari_STATUS_DONE) << a.message;
    EXPECT_EQ(a.tokens, fb_ref) << "not served by the fallback model";
  }
  EXPECT_TRUE(fb->mapped());
  EXPECT_EQ(fb->acquisitions(), 1);
  auto st = (*client)->WaitForNode(10s, [](const ari_NodeStatus& s) {
    return std::string(s.model).find("(fallback; main") != std::string::npos;
  });
  EXPECT_TRUE(st.has_value()) << "NodeStatus.model never named the fallback";
  {
    Answer rest =
        Collect(*in_flight, first->sequence_number + 1);  // the in-flight request finished on main
    EXPECT_EQ(rest.terminals, 1u);
    EXPECT_EQ(rest.status, ari_STATUS_DONE) << rest.message;
    EXPECT_EQ(rest.gaps, 0u);
    EXPECT_EQ(first->n_tokens + rest.tokens.size(), 120u);
  }

  // 3. Pressure gone: after the ladder's dwells the fallback is unmapped while idle.
  avail = 4000 * kMB;
  EXPECT_TRUE(WaitFor([&] { return !fb->mapped(); }, 20s)) << "fallback still mapped";
  auto at_rest = (*client)->WaitForNode(20s, [](const ari_NodeStatus& s) {
    return std::string(s.reason).find("memory ok (") != std::string::npos;
  });
  EXPECT_TRUE(at_rest.has_value()) << "the ladder did not relax to the top";
  auto back = (*client)->WaitForNode(10s, [&](const ari_NodeStatus& s) {
    return std::string(s.model) == main_model.filename().string();
  });
  EXPECT_TRUE(back.has_value()) << "NodeStatus.model did not return to the main model";
  {
    auto s = (*client)->Ask(p);
    ASSERT_TRUE(s.has_value());
    const Answer a = Collect(*s);
    EXPECT_EQ(a.terminals, 1u);
    EXPECT_EQ(a.tokens, main_ref);
  }
  EXPECT_FALSE(fb->mapped());

  serving.Stop();
  node->reset();
  const std::string log = ::testing::internal::GetCapturedStderr();
  if (HasFailure()) std::fprintf(stderr, "node log:\n%s\n", log.c_str());
  EXPECT_NE(log.find("memory emergency (60 MB < 100 enter)"), std::string::npos) << log;
  EXPECT_NE(log.find("memory ladder: new requests -> fallback model tiny-fallback.gguf "
                     "(mapped now"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("memory ladder: pressure gone, new requests -> main model"), std::string::npos)
      << log;
  EXPECT_NE(log.find("exit emergency"), std::string::npos) << log;
  EXPECT_NE(log.find("memory ladder: fallback model tiny-fallback.gguf unmapped (idle)"),
            std::string::npos)
      << log;
  client->reset();
  std::filesystem::remove_all(dir);
}

TEST_F(NodeFallback, IncompatibleVocabularyIsRefusedAndTheMainModelServes) {
  // Checked directly on FallbackModel: the node would log it and keep serving on main.
  const auto dir = TempDir("node_fallback_vocab");
  const auto main_model = Stories260K(dir);
  const auto other_vocab = ModelFile("vocab/ggml-vocab-llama-spm.gguf");
  if (main_model.empty() || other_vocab.empty()) GTEST_SKIP() << "models absent";
  const auto fb_model = dir / "other-vocab.gguf";
  ASSERT_TRUE(WriteTinyF16(other_vocab, fb_model));
  auto main_engine = runtime::Engine::Create(SmallEngine(main_model));
  ASSERT_TRUE(main_engine.has_value());
  component::FallbackModel fb(SmallEngine(fb_model), (*main_engine)->model().tokenizer());
  auto e = fb.Acquire();
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().ToString().find("vocabulary size 32000 != main model's 512"),
            std::string::npos)
      << e.error().ToString();
  EXPECT_FALSE(fb.mapped());
  std::filesystem::remove_all(dir);
}

TEST_F(NodeFallback, ChangedFallbackFileFailsTurnsInsteadOfFaulting) {
  // Like the main model (node_faults_test), the fallback's mapped file is watched: once it
  // is truncated in place, turns and chunks on it fail with "model file changed".
  const auto dir = TempDir("node_fallback_guard");
  const auto main_model = Stories260K(dir);
  if (main_model.empty()) GTEST_SKIP() << "stories260K absent";
  const auto fb_model = dir / "guarded-fallback.gguf";
  ASSERT_TRUE(WriteTinyF16(main_model, fb_model));
  auto main_engine = runtime::Engine::Create(SmallEngine(main_model));
  ASSERT_TRUE(main_engine.has_value());
  component::FallbackModel fb(SmallEngine(fb_model), (*main_engine)->model().tokenizer());
  auto runner = fb.Acquire();
  ASSERT_TRUE(runner.has_value()) << runner.error().ToString();
  const std::vector<runtime::TokenId> prompt = {1, 403, 407};
  runtime::TurnSpec turn;
  turn.prompt = prompt;
  turn.max_tokens = 4;
  turn.keep_context = false;
  ASSERT_TRUE((*runner)->StartTurn(0, turn).has_value());
  ASSERT_TRUE((*runner)->RunChunk(0, runtime::ChunkKnobs{}).has_value());
  // Truncate in place (same inode): the next chunk must fail without touching the mapping.
  std::filesystem::resize_file(fb_model, std::filesystem::file_size(fb_model) / 2);
  auto chunk = (*runner)->RunChunk(0, runtime::ChunkKnobs{});
  ASSERT_FALSE(chunk.has_value());
  EXPECT_NE(chunk.error().ToString().find("model file changed"), std::string::npos)
      << chunk.error().ToString();
  EXPECT_FALSE((*runner)->StartTurn(0, turn).has_value());
  fb.Release();
  EXPECT_FALSE(fb.mapped());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::testing
