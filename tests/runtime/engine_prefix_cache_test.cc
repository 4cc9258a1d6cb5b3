// The persistent prompt-prefix cache in the real engine (stories260K pack): a turn whose
// prompt starts with a registered prefix copies its KV from the mmap'd file and computes
// only the rest, and its output equals an uncached run token for token (greedy and sampled
// at a fixed seed, F16 and INT8 KV; prompt = prefix, prefix + rest, diverging mid-prefix;
// a second engine loading the file). Corrupt, truncated (before load and under a mapping),
// foreign and other-model files are never used (rebuilt, with the reason); the folder's
// disk use stays within its bound by LRU eviction; a bound too small or a folder that
// cannot be created is an error value and turns still run, uncached. A turn served from the
// cache performs no heap allocation after warm-up.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "tests/common/counting_allocator.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

namespace fs = std::filesystem;

std::vector<TokenId> Tokens(int n, uint32_t seed) {
  std::vector<TokenId> t{1};
  uint32_t x = seed;
  while (static_cast<int>(t.size()) < n) {
    x = x * 1664525u + 1013904223u;
    t.push_back(static_cast<TokenId>(3 + (x >> 8) % 490));
  }
  return t;
}

std::vector<TokenId> Concat(std::vector<TokenId> a, const std::vector<TokenId>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Result<std::unique_ptr<Engine>> MakeEngine(KvType kv, const fs::path& dir,
                                           uint64_t max_bytes = 64ull << 20) {
  EngineOptions o;
  o.model_path = testing::Stories260K().pack;
  o.context_length = 256;
  o.threads = 1;
  o.kv_type = kv;
  o.max_chunk = 32;
  o.prefix_cache.dir = dir;
  o.prefix_cache.max_bytes = max_bytes;
  return Engine::Create(o);
}

struct TurnOut {
  std::vector<TokenId> tokens;
  int32_t prefix_tokens = 0;  // of the first chunk
};

// One turn in an empty slot 0, prefilled in chunks of 16.
TurnOut RunTurn(Engine& e, const std::vector<TokenId>& prompt, bool greedy) {
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = 24;
  t.keep_context = false;
  t.sampling.temperature = greedy ? 0.0f : 0.9f;
  t.sampling.top_k = 40;
  t.sampling.seed = 11;
  TurnOut out;
  EXPECT_TRUE(e.StartTurn(0, t).has_value());
  ChunkKnobs k;
  k.prefill_tokens = 16;
  k.decode_tokens = 4;
  k.threads = 1;
  k.kv_type = e.SlotKvType(0);
  for (int c = 0; c < 200; ++c) {
    auto r = e.RunChunk(0, k);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().ToString());
    if (!r) break;
    if (c == 0) out.prefix_tokens = r->prefix_tokens;
    out.tokens.insert(out.tokens.end(), r->tokens.begin(), r->tokens.end());
    if (r->finished) break;
  }
  e.ResetSlot(0);
  return out;
}

std::vector<fs::path> Files(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(dir, ec)) {
    if (d.path().extension() == ".kvprefix") out.push_back(d.path());
  }
  return out;
}

fs::path FreshDir(const std::string& tag) {
  fs::path d = testing::TempDir("prefix") / tag;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(EnginePrefixCache, CachedTurnEqualsUncachedTokenForToken) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  ASSERT_TRUE(testing::Stories260K().ok);
  const std::vector<TokenId> prefix = Tokens(40, 5);
  std::vector<TokenId> diverging = prefix;
  diverging.resize(25);
  const std::vector<std::vector<TokenId>> prompts = {Concat(prefix, Tokens(12, 9)), prefix,
                                                     Concat(diverging, Tokens(20, 3))};
  const std::vector<int32_t> want_use = {40, 39, 25};
  for (KvType kv : {KvType::kF16, KvType::kInt8}) {
    SCOPED_TRACE(std::string(KvTypeName(kv)));
    const fs::path dir = FreshDir(std::string("eq_") + std::string(KvTypeName(kv)));
    auto plain = MakeEngine(kv, {});
    ASSERT_TRUE(plain.has_value()) << plain.error().ToString();
    auto cached = MakeEngine(kv, dir);
    ASSERT_TRUE(cached.has_value()) << cached.error().ToString();
    auto info = (*cached)->AddPrefix(prefix);
    ASSERT_TRUE(info.has_value()) << info.error().ToString();
    EXPECT_TRUE(info->built);
    EXPECT_TRUE(fs::exists(info->path));
    EXPECT_EQ(fs::file_size(info->path), info->file_bytes);
    EXPECT_FALSE((*plain)->AddPrefix(prefix).has_value());  // no folder: unsupported
    auto reloaded = MakeEngine(kv, dir);                    // a second engine maps the same file
    ASSERT_TRUE(reloaded.has_value());
    auto again = (*reloaded)->AddPrefix(prefix);
    ASSERT_TRUE(again.has_value()) << again.error().ToString();
    EXPECT_FALSE(again->built);
    EXPECT_EQ(again->path, info->path);
    for (size_t i = 0; i < prompts.size(); ++i) {
      for (bool greedy : {true, false}) {
        SCOPED_TRACE("prompt " + std::to_string(i) + (greedy ? " greedy" : " sampled"));
        const TurnOut want = RunTurn(**plain, prompts[i], greedy);
        EXPECT_EQ(want.prefix_tokens, 0);
        ASSERT_GE(want.tokens.size(), 4u);
        for (Engine* e : {cached->get(), reloaded->get()}) {
          const TurnOut got = RunTurn(*e, prompts[i], greedy);
          EXPECT_EQ(got.prefix_tokens, want_use[i]);
          EXPECT_EQ(got.tokens, want.tokens);
        }
      }
    }
    const EngineCounters c = (*cached)->Counters();
    EXPECT_EQ(c.prefix_hits, prompts.size() * 2);
    EXPECT_EQ(c.prefix_tokens, 2u * (40 + 39 + 25));
    // Other tokens: only the shared BOS comes from the cache; none without it.
    EXPECT_EQ(RunTurn(**cached, Tokens(30, 77), true).prefix_tokens, 1);
    std::vector<TokenId> no_bos = Tokens(30, 77);
    no_bos[0] = 5;
    EXPECT_EQ(RunTurn(**cached, no_bos, true).prefix_tokens, 0);
  }
}

// Writes `bytes` at `off` of the file (or truncates it to `truncate` when >= 0).
void Damage(const fs::path& p, uint64_t off, const std::string& bytes, int64_t truncate = -1) {
  if (truncate >= 0) {
    fs::resize_file(p, static_cast<uintmax_t>(truncate));
    return;
  }
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(off));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(EnginePrefixCache, BadFilesAreRebuiltNeverUsed) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  ASSERT_TRUE(testing::Stories260K().ok);
  const std::vector<TokenId> prefix = Tokens(40, 21);
  const std::vector<TokenId> prompt = Concat(prefix, Tokens(10, 4));
  auto plain = MakeEngine(KvType::kF16, {});
  ASSERT_TRUE(plain.has_value());
  const TurnOut want = RunTurn(**plain, prompt, true);
  const fs::path dir = FreshDir("bad");
  fs::path path;
  uint64_t bytes = 0;
  {
    auto e = MakeEngine(KvType::kF16, dir);
    ASSERT_TRUE(e.has_value());
    auto info = (*e)->AddPrefix(prefix);
    ASSERT_TRUE(info.has_value()) << info.error().ToString();
    path = info->path;
    bytes = info->file_bytes;
  }
  struct Case {
    std::string name, reason;
    uint64_t off;
    std::string bytes;
    int64_t truncate;
  };
  const Case cases[] = {
      {"payload byte flipped", "payload checksum", bytes - 7, std::string("\x5a\xa5", 2), -1},
      {"truncated", "truncated", 0, "", static_cast<int64_t>(bytes) - 100},
      {"truncated header", "truncated", 0, "", 30},
      {"foreign", "not a prefix cache file", 0, std::string(64, 'x'), -1},
      {"other model", "another model", 16, std::string(8, '\x01'), -1},
      {"header field", "header checksum", 60, std::string(4, '\x02'), -1},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.name);
    Damage(path, cs.off, cs.bytes, cs.truncate);
    auto e = MakeEngine(KvType::kF16, dir);
    ASSERT_TRUE(e.has_value());
    auto info = (*e)->AddPrefix(prefix);
    ASSERT_TRUE(info.has_value()) << info.error().ToString();
    EXPECT_TRUE(info->built);
    EXPECT_NE(info->rebuilt_reason.find(cs.reason), std::string::npos) << info->rebuilt_reason;
    EXPECT_EQ(fs::file_size(path), bytes);
    const TurnOut got = RunTurn(**e, prompt, true);
    EXPECT_EQ(got.prefix_tokens, 40);
    EXPECT_EQ(got.tokens, want.tokens);
  }
  // Truncated while mapped: the next turn sees it, runs uncached, and says so.
  auto e = MakeEngine(KvType::kF16, dir);
  ASSERT_TRUE(e.has_value());
  ASSERT_TRUE((*e)->AddPrefix(prefix).has_value());
  fs::resize_file(path, bytes / 2);
  const TurnOut got = RunTurn(**e, prompt, true);
  EXPECT_EQ(got.prefix_tokens, 0);
  EXPECT_EQ(got.tokens, want.tokens);
}

TEST(EnginePrefixCache, DiskUseBoundedLeastRecentlyUsedEvicted) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  ASSERT_TRUE(testing::Stories260K().ok);
  const fs::path dir = FreshDir("lru");
  const std::vector<TokenId> p1 = Tokens(40, 1), p2 = Tokens(40, 2), p3 = Tokens(40, 3);
  uint64_t bytes = 0;
  fs::path f1, f2;
  {
    auto e = MakeEngine(KvType::kF16, dir);
    ASSERT_TRUE(e.has_value());
    auto a = (*e)->AddPrefix(p1);
    auto b = (*e)->AddPrefix(p2);
    ASSERT_TRUE(a.has_value() && b.has_value());
    bytes = a->file_bytes;
    f1 = a->path;
    f2 = b->path;
  }
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(f1, now - std::chrono::seconds(100));  // p1 least recently used ...
  fs::last_write_time(f2, now - std::chrono::seconds(50));
  const uint64_t bound = bytes * 2 + bytes / 2;  // room for two files
  auto e = MakeEngine(KvType::kF16, dir, bound);
  ASSERT_TRUE(e.has_value());
  auto a = (*e)->AddPrefix(p1);  // ... until used again: p2 is now the LRU file
  ASSERT_TRUE(a.has_value());
  EXPECT_FALSE(a->built);
  auto c = (*e)->AddPrefix(p3);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_TRUE(fs::exists(f1));
  EXPECT_FALSE(fs::exists(f2));
  EXPECT_TRUE(fs::exists(c->path));
  EXPECT_EQ(Files(dir).size(), 2u);
  // Both files are mapped by this engine: a fourth does not fit and is refused.
  auto d = (*e)->AddPrefix(p2);
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code, ErrorCode::kOutOfMemory);
  EXPECT_NE(d.error().message.find("bound"), std::string::npos) << d.error().message;
  EXPECT_EQ(Files(dir).size(), 2u);
}

TEST(EnginePrefixCache, NoRoomOrUnwritableFolderServesUncached) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  ASSERT_TRUE(testing::Stories260K().ok);
  const std::vector<TokenId> prefix = Tokens(40, 8);
  const std::vector<TokenId> prompt = Concat(prefix, Tokens(10, 6));
  auto plain = MakeEngine(KvType::kF16, {});
  ASSERT_TRUE(plain.has_value());
  const TurnOut want = RunTurn(**plain, prompt, true);
  const fs::path base = FreshDir("noroom");
  const fs::path file = base / "a_file";
  std::ofstream(file) << "x";
  struct Case {
    std::string name;
    fs::path dir;
    uint64_t bound;
    ErrorCode code;
  };
  for (const Case& cs : {Case{"tiny bound", base / "tiny", 100, ErrorCode::kOutOfMemory},
                         Case{"folder under a file", file / "sub", 64 << 20, ErrorCode::kIo}}) {
    SCOPED_TRACE(cs.name);
    auto e = MakeEngine(KvType::kF16, cs.dir, cs.bound);
    ASSERT_TRUE(e.has_value()) << e.error().ToString();
    auto info = (*e)->AddPrefix(prefix);
    ASSERT_FALSE(info.has_value());
    EXPECT_EQ(info.error().code, cs.code) << info.error().ToString();
    EXPECT_NE(info.error().message.find("prefix cache"), std::string::npos);
    EXPECT_TRUE(Files(cs.dir).empty());
    const TurnOut got = RunTurn(**e, prompt, true);
    EXPECT_EQ(got.prefix_tokens, 0);
    EXPECT_EQ(got.tokens, want.tokens);
  }
}

TEST(EnginePrefixCache, NoHeapAllocationWhenServedFromCache) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  ASSERT_TRUE(testing::Stories260K().ok);
  const fs::path dir = FreshDir("alloc");
  const std::vector<TokenId> prefix = Tokens(40, 13);
  const std::vector<TokenId> prompt = Concat(prefix, Tokens(10, 2));
  for (KvType kv : {KvType::kF16, KvType::kInt8}) {
    auto e = MakeEngine(kv, dir);
    ASSERT_TRUE(e.has_value());
    Engine& eng = **e;
    ASSERT_TRUE(eng.AddPrefix(prefix).has_value());
    TurnSpec t;
    t.prompt = prompt;
    t.max_tokens = 8;
    t.keep_context = false;
    ChunkKnobs k;
    k.prefill_tokens = 16;
    k.threads = 1;
    k.kv_type = kv;
    int32_t reused = 0;
    auto turns = [&](int n) {
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(eng.StartTurn(0, t).has_value());
        for (int c = 0; c < 50; ++c) {
          auto r = eng.RunChunk(0, k);
          ASSERT_TRUE(r.has_value());
          reused += r->prefix_tokens;
          if (r->finished) break;
        }
      }
    };
    turns(1);  // warm-up
    reused = 0;
    testing::CountAllocations allocations;
    turns(3);
    EXPECT_EQ(allocations.count(), 0) << KvTypeName(kv);
    EXPECT_EQ(reused, 3 * 40);
  }
}

}  // namespace
}  // namespace ari::runtime
