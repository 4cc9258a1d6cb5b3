// What ran, over DDS: an ari-node on a stories260K PACK streams TokenChunks whose trace
// (has_trace, decided, ran, ran_threads_observed, pin_failures) says what the engine ran
// next to what the governor decided, knob by knob; NodeStatus says the model can switch
// precision; the node log has one what-ran line per chunk. (The plain-GGUF side: the
// live replay test, tests/sim/live_replay_test.cc.)
#include <gtest/gtest.h>

#include "component/client/chunk_trace_text.h"
#include "component/client/client.h"
#include "runtime/kernels/cpu_features.h"
#include "runtime/kernels/tier_choice.h"
#include "runtime/model/pack_file.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
using namespace std::chrono_literals;

// The highest tier this CPU supports at or below the decided ceiling.
int ExpectedIsa(int ceiling) {
  int best = 0;
  for (auto t : runtime::kernels::SupportedIsaTiers()) {
    if (static_cast<int>(t) <= ceiling) best = static_cast<int>(t);
  }
  return best;
}

TEST(NodeTrace, EveryChunkOverDdsSaysWhatRanNextToWhatWasDecided) {
  const auto dir = TempDir("node_trace");
  const auto plain = Stories260K(dir);
  if (plain.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  const auto pack = dir / "stories260K.pack.gguf";
  ASSERT_TRUE(runtime::WritePack(plain, pack).has_value());
  const auto cfg = WriteNodeConfig(dir, pack);
  {  // two pool participants, so the governor's x2 decisions can run as decided
    std::ifstream in(cfg);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    text.replace(text.find("threads: 1"), 10, "threads: 2");
    std::ofstream(cfg) << text;
  }
  NodeProcess node;
  ASSERT_TRUE(node.Start(cfg, dir / "node.log"));
  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(TestDomainId());
  d.config = LoopbackConfigUri();
  auto dom = dds::Domain::Create(d);
  ASSERT_TRUE(dom.has_value()) << dom.error().ToString();
  component::ClientOptions co;
  co.client_id = "trace";
  co.node_timeout = 20s;
  auto client = component::Client::Connect(*dom, co);
  ASSERT_TRUE(client.has_value()) << client.error().ToString();
  auto status = (*client)->WaitForNode(20s);
  ASSERT_TRUE(status.has_value()) << node.Log();
  EXPECT_TRUE(status->can_switch_precision);

  // The third request's prompt (27 tokens with BOS, stories260K's tokenizer) fits one
  // CRITICAL prefill chunk (32 tokens in the conservative knobs of a node without a
  // sensor): 16 tokens or more, so on a CPU with AMX its GEMMs run on tiles, counted inside
  // the kernels.
  const bool amx = runtime::kernels::IsaTierSupported(runtime::kernels::IsaTier::kAmx);
  const char* const kLong =
      "Once upon a time, there was a little girl named Lily. She liked to play in the park.";
  for (auto [u, prompt] : {std::pair{ari_URGENCY_NORMAL, "Once upon a time"},
                           std::pair{ari_URGENCY_CRITICAL, "Once upon a time"},
                           std::pair{ari_URGENCY_CRITICAL, kLong}}) {
    component::AskParams p;
    p.prompt = prompt;
    p.max_tokens = 30;
    p.urgency = u;
    auto stream = (*client)->Ask(p);
    ASSERT_TRUE(stream.has_value()) << stream.error().ToString();
    int traced = 0;
    uint64_t tile_gemms = 0;
    int gemm_chunks = 0;
    bool ran_amx = false;
    bool amx_gemm = false;  // the host's tier choice put that precision's GEMM on AMX
    for (;;) {
      auto c = stream->Next(30s);
      if (!c) break;
      SCOPED_TRACE(component::ChunkTraceText(*c));
      if (c->terminal) {
        EXPECT_FALSE(c->has_trace);
        EXPECT_EQ(dds::RawEnum(c->status), ari_STATUS_DONE) << c->message;
        continue;
      }
      ASSERT_TRUE(c->has_trace);
      ++traced;
      const ari_KnobTrace& dec = c->decided;
      const ari_KnobTrace& ran = c->ran;
      EXPECT_NE(dds::RawEnum(ran.precision), ari_PRECISION_REFERENCE);
      EXPECT_EQ(dds::RawEnum(ran.precision), dds::RawEnum(dec.precision));
      EXPECT_EQ(dds::RawEnum(ran.isa), ExpectedIsa(dds::RawEnum(dec.isa)));
      EXPECT_FALSE(c->isa_refused);
      EXPECT_EQ(ran.threads, dec.threads);
      EXPECT_GE(c->ran_threads_observed, 1u);
      EXPECT_LE(c->ran_threads_observed, ran.threads);
      EXPECT_NE(ran.cpus, 0u);
      EXPECT_NE(dec.cpus, 0u);
      EXPECT_EQ(ran.cpus & ~dec.cpus, 0u);
      EXPECT_EQ(c->pin_failures, 0u);
      // The default pack has no layer importance: nothing can be dropped, and says so.
      EXPECT_EQ(ran.layers_dropped, 0u);
      if (dds::RawEnum(dec.kv_type) == ari_KV_INT8) {
        EXPECT_EQ(dds::RawEnum(ran.kv_type), ari_KV_INT8);
      }
      EXPECT_FALSE(c->on_fallback);
      // Tiles only where the amx tier ran, and the count is in the trace line.
      if (dds::RawEnum(ran.isa) == ari_ISA_AMX) {
        ran_amx = true;
        // The node reads the tier timings the test does (ARI_KERNEL_TIMINGS_FILE).
        const auto family = dds::RawEnum(ran.precision) == ari_PRECISION_W4A8
                                ? runtime::kernels::MatmulFamily::kGemmW4A8
                                : runtime::kernels::MatmulFamily::kGemmW8A16;
        amx_gemm = amx_gemm || runtime::kernels::ChosenTiers(
                                   runtime::kernels::IsaTier::kAmx)[static_cast<size_t>(family)] ==
                                   runtime::kernels::IsaTier::kAmx;
        EXPECT_NE(component::ChunkTraceText(*c).find(" GEMMs on AMX tiles"), std::string::npos);
      } else {
        EXPECT_EQ(c->ran_tile_gemms, 0u);
      }
      tile_gemms += c->ran_tile_gemms;
      // The matmul kernels the chunk called: none above the tier that ran, in the text;
      // tiles counted only where the GEMMs were the AMX ones.
      const uint32_t kernels = c->ran_gemv_isas | c->ran_gemm_isas;
      EXPECT_NE(kernels, 0u);
      for (int t = 0; t < runtime::kernels::kNumIsaTiers; ++t) {
        if ((kernels >> t & 1u) == 0) continue;
        EXPECT_LE(runtime::kernels::IsaTierRank(static_cast<runtime::kernels::IsaTier>(t)),
                  runtime::kernels::IsaTierRank(
                      static_cast<runtime::kernels::IsaTier>(dds::RawEnum(ran.isa))));
      }
      const std::string text = component::ChunkTraceText(*c);
      EXPECT_TRUE(text.find(" | gemv ") != std::string::npos ||
                  text.find(" | gemm ") != std::string::npos);
      if (c->ran_tile_gemms > 0) {
        EXPECT_NE(c->ran_gemm_isas & (1u << ari_ISA_AMX), 0u);
        EXPECT_NE(text.find(" | gemm amx"), std::string::npos);
      }
      gemm_chunks += c->ran_gemm_isas != 0 ? 1 : 0;
    }
    if (prompt == kLong) {
      EXPECT_GT(gemm_chunks, 0) << "a 27-token prefill without a GEMM";
    }
    EXPECT_GT(traced, 0);
    if (prompt == kLong && ran_amx && amx_gemm) {
      EXPECT_GT(tile_gemms, 0u) << "a 27-token prompt's prefill ran without the AMX tiles";
    }
    if (!amx) {
      EXPECT_EQ(tile_gemms, 0u);
    }
  }
  EXPECT_EQ(node.Stop(SIGTERM), 0) << node.Log();
  const std::string log = node.Log();
  // One what-ran line per chunk in the node log.
  EXPECT_NE(log.find("| ran W"), std::string::npos) << log;
  EXPECT_NE(log.find(" | decided W"), std::string::npos) << log;
  EXPECT_NE(log.find("engine: 0 pin failures, 0 refused CPU sets, 0 refused ISA tiers"),
            std::string::npos)
      << log;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ari::testing
