// The prompt-prefix cache through ari-node (stories260K pack): a system prompt registered in
// the config (prefix_cache.system_prompts) is computed into its files (plain and chat form,
// both precisions) at the first start and mapped at the next; a request starting with it is served
// from the cache with the same text as a node without the cache; a corrupt file is rebuilt with a
// log line; a folder that cannot be written leaves the node serving, uncached, and says so. The
// stop line counts the hits.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "component/client/client.h"
#include "runtime/model/pack_file.h"
#include "tests/component/node_test_util.h"

namespace ari::testing {
namespace {

namespace dds = component::dds;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

const char kSystem[] = "Once upon a time, there was a little girl named Lily. She loved to play";

struct Served {
  std::string text, log;
  bool done = false;
};

// Starts a node with `extra` config, asks one greedy plain prompt, stops it.
Served Serve(const fs::path& dir, const fs::path& pack, const std::string& extra,
             const std::string& tag) {
  Served out;
  const fs::path run = dir / tag;
  const auto cfg = WriteNodeConfig(run, pack, extra);
  NodeProcess node;
  EXPECT_TRUE(node.Start(cfg, run / "node.log"));
  dds::DomainOptions d;
  d.domain_id = static_cast<uint32_t>(TestDomainId());
  d.config = LoopbackConfigUri();
  auto dom = dds::Domain::Create(d);
  EXPECT_TRUE(dom.has_value());
  if (!dom) return out;
  component::ClientOptions co;
  co.client_id = "prefix-" + tag;
  co.node_timeout = 20s;
  auto client = component::Client::Connect(*dom, co);
  EXPECT_TRUE(client.has_value());
  if (!client || !(*client)->WaitForNode(20s)) {
    ADD_FAILURE() << node.Log();
    return out;
  }
  component::AskParams p;
  p.prompt = std::string(kSystem) + " in the park with her friends.";
  p.max_tokens = 40;
  auto stream = (*client)->Ask(p);
  EXPECT_TRUE(stream.has_value());
  for (; stream;) {
    auto c = stream->Next(30s);
    if (!c) break;
    out.text.append(c->text, c->text_len);
    if (c->terminal) {
      out.done = dds::RawEnum(c->status) == ari_STATUS_DONE;
      break;
    }
  }
  EXPECT_EQ(node.Stop(SIGTERM), 0) << node.Log();
  out.log = node.Log();
  return out;
}

bool Has(const std::string& log, const std::string& s) { return log.find(s) != std::string::npos; }

TEST(NodePrefixCache, RegisteredSystemPromptServedFromCacheSameText) {
  // A file is keyed by the kernels that computed it; the per-process tier measurement
  // can choose differently from one start to the next on a loaded machine (then the next
  // node computes its own file). Every tier's own kernels keep the choice fixed here.
  ASSERT_EQ(setenv("ARI_KERNEL_CHOICE", "own", 1), 0);
  const auto dir = TempDir("node_prefix");
  const auto plain = Stories260K(dir);
  if (plain.empty()) GTEST_SKIP() << "stories260K absent under " << ModelsDir();
  const auto pack = dir / "stories260K.pack.gguf";
  ASSERT_TRUE(runtime::WritePack(plain, pack).has_value());
  const fs::path cache = dir / "prefixes";
  const std::string with_cache = std::string("prefix_cache { system_prompts: \"") + kSystem +
                                 "\" dir: \"" + cache.string() + "\" }\n";

  const Served want = Serve(dir, pack, "", "uncached");
  ASSERT_TRUE(want.done) << want.log;
  ASSERT_FALSE(want.text.empty());

  const Served first = Serve(dir, pack, with_cache, "first");
  EXPECT_TRUE(first.done) << first.log;
  EXPECT_EQ(first.text, want.text);
  EXPECT_TRUE(Has(first.log, "prefix cache: system prompt 0 (plain")) << first.log;
  EXPECT_TRUE(Has(first.log, "computed into")) << first.log;
  EXPECT_TRUE(Has(first.log, "prefix cache: 1 hits")) << first.log;

  const Served second = Serve(dir, pack, with_cache, "second");
  EXPECT_TRUE(second.done) << second.log;
  EXPECT_EQ(second.text, want.text);
  EXPECT_TRUE(Has(second.log, "mapped from")) << second.log;
  EXPECT_TRUE(Has(second.log, "prefix cache: 1 hits")) << second.log;

  // A corrupt file: rebuilt at start, with the reason, and used.
  int files = 0;
  for (const auto& e : fs::directory_iterator(cache)) {
    if (e.path().extension() != ".kvprefix") continue;
    ++files;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-16, std::ios::end);
    f.write("garbage garbage!", 16);
  }
  EXPECT_EQ(files, 4);  // plain and chat form, W8A16 and W4A8
  const Served rebuilt = Serve(dir, pack, with_cache, "rebuilt");
  EXPECT_TRUE(rebuilt.done) << rebuilt.log;
  EXPECT_EQ(rebuilt.text, want.text);
  EXPECT_TRUE(Has(rebuilt.log, "rebuilt: ")) << rebuilt.log;
  EXPECT_TRUE(Has(rebuilt.log, "payload checksum")) << rebuilt.log;
  EXPECT_TRUE(Has(rebuilt.log, "prefix cache: 1 hits")) << rebuilt.log;

  // A folder that cannot be created: logged, served uncached.
  std::ofstream(dir / "a_file") << "x";
  const std::string bad = std::string("prefix_cache { system_prompts: \"") + kSystem +
                          "\" dir: \"" + (dir / "a_file" / "sub").string() + "\" }\n";
  const Served uncached = Serve(dir, pack, bad, "unwritable");
  EXPECT_TRUE(uncached.done) << uncached.log;
  EXPECT_EQ(uncached.text, want.text);
  EXPECT_TRUE(Has(uncached.log, "not cached: ")) << uncached.log;
  EXPECT_TRUE(Has(uncached.log, "its requests run uncached")) << uncached.log;
  EXPECT_TRUE(Has(uncached.log, "prefix cache: 0 hits")) << uncached.log;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ari::testing
