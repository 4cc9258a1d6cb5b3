// Parked sessions on disk in the real engine (stories260K): an idle conversation spilled
// (zstd file) and restored into another slot continues its next turn token for token as a
// never-spilled one (fixed seed, F16 and INT8 KV); a truncated, byte-flipped, foreign-model
// or other-session file is ignored with a reason and the session restarts fresh (output
// equal to a fresh run); the disk bound is a clear kIo error that leaves the slot as it was.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"
#include "tests/runtime/engine_fixture.h"

namespace ari::runtime {
namespace {

namespace fs = std::filesystem;

const std::vector<TokenId> kPrompt = {1, 403, 407, 261, 378, 432, 383, 286, 290, 300};
const std::vector<TokenId> kNext = {320, 270, 402, 301};
const std::vector<TokenId> kOther = {1, 290, 300, 261};
constexpr uint64_t kSession = 0x42;

TurnSpec Turn(std::span<const TokenId> prompt, uint64_t seed, bool keep) {
  TurnSpec t;
  t.prompt = prompt;
  t.max_tokens = 24;
  t.keep_context = keep;
  t.sampling.temperature = 0.9f;
  t.sampling.top_k = 40;
  t.sampling.seed = seed;
  return t;
}

std::vector<TokenId> RunTurn(Engine& e, int slot, const TurnSpec& t) {
  std::vector<TokenId> out;
  auto st = e.StartTurn(slot, t);
  EXPECT_TRUE(st.has_value()) << (st ? "" : st.error().ToString());
  if (!st) return out;
  ChunkKnobs k;
  k.prefill_tokens = 4;
  k.decode_tokens = 4;
  k.threads = 1;
  k.kv_type = e.SlotKvType(slot) == KvType::kInt8 ? KvType::kInt8 : KvType::kF16;
  for (int c = 0; c < 1000; ++c) {
    auto r = e.RunChunk(slot, k);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().ToString());
    if (!r) break;
    out.insert(out.end(), r->tokens.begin(), r->tokens.end());
    if (r->finished) break;
  }
  return out;
}

Result<std::unique_ptr<Engine>> MakeEngine(const fs::path& model, KvType kv, const fs::path& dir,
                                           uint64_t max_bytes = 1ull << 30) {
  EngineOptions o;
  o.model_path = model;
  o.context_length = 256;
  o.threads = 1;
  o.kv_type = kv;
  o.spill.dir = dir;
  o.spill.max_bytes = max_bytes;
  return Engine::Create(o);
}

fs::path SpillDir(const std::string& tag) {
  fs::path d = testing::TempDir("spill") / tag;
  std::error_code ec;
  fs::remove_all(d, ec);
  return d;
}

// What the second turn of the session gives when never spilled.
std::vector<TokenId> Reference(const fs::path& model, KvType kv) {
  auto e = MakeEngine(model, kv, {});
  EXPECT_TRUE(e.has_value());
  if (!e) return {};
  RunTurn(**e, 0, Turn(kPrompt, 7, false));
  return RunTurn(**e, 0, Turn(kNext, 8, true));
}

// Spills the session after its first turn (slot 0); other turns overwrite both slots.
void SpillFirstTurn(Engine& e) {
  RunTurn(e, 0, Turn(kPrompt, 7, false));
  const int32_t pos = e.SlotPosition(0);
  auto n = e.SpillSlot(0, kSession);
  ASSERT_TRUE(n.has_value()) << n.error().ToString();
  EXPECT_GT(*n, 88u);
  EXPECT_EQ(e.SlotPosition(0), 0);
  EXPECT_GT(pos, 0);
  for (int slot : {0, 1}) RunTurn(e, slot, Turn(kOther, 99, false));
}

TEST(EngineSpill, RestoredSessionContinuesTokenForToken) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  for (KvType kv : {KvType::kF16, KvType::kInt8}) {
    SCOPED_TRACE(kv == KvType::kF16 ? "F16" : "INT8");
    const std::vector<TokenId> want = Reference(mp.pack, kv);
    ASSERT_GT(want.size(), 4u);
    const fs::path dir = SpillDir(kv == KvType::kF16 ? "f16" : "int8");
    auto e = MakeEngine(mp.pack, kv, dir);
    ASSERT_TRUE(e.has_value()) << e.error().ToString();
    SpillFirstTurn(**e);
    std::error_code ec;
    ASSERT_EQ(std::distance(fs::directory_iterator(dir, ec), fs::directory_iterator{}), 1);
    std::string why;
    auto ok = (*e)->RestoreSession(1, kSession, &why);
    ASSERT_TRUE(ok.has_value());
    EXPECT_TRUE(*ok) << why;
    EXPECT_EQ((*e)->SlotKvType(1), kv);
    EXPECT_EQ(RunTurn(**e, 1, Turn(kNext, 8, true)), want);
    EXPECT_TRUE(fs::is_empty(dir, ec));  // restored: the file is gone
    const EngineCounters c = (*e)->Counters();
    EXPECT_EQ(c.spills, 1u);
    EXPECT_EQ(c.restores, 1u);
    EXPECT_EQ(c.spill_bytes, 0u);
    // No file: a fresh start, no reason.
    ok = (*e)->RestoreSession(0, kSession, &why);
    ASSERT_TRUE(ok.has_value());
    EXPECT_FALSE(*ok);
    EXPECT_TRUE(why.empty());
  }
}

void Flip(const fs::path& p, std::streamoff at) {
  std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char b = 0;
  f.read(&b, 1);
  b = static_cast<char>(b ^ 0x5a);
  f.seekp(at);
  f.write(&b, 1);
}

TEST(EngineSpill, CorruptOrForeignFileRestartsFresh) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  PackOptions po;
  po.layer_importance = {0.3f, 0.2f, 0.1f, 0.15f, 0.3f};
  const auto& other = testing::Stories260K(po, "s260k-imp");
  ASSERT_TRUE(other.ok);
  // A fresh session's turn (nothing restored): the prompt alone, empty slot.
  std::vector<TokenId> fresh;
  {
    auto e = MakeEngine(mp.pack, KvType::kF16, {});
    ASSERT_TRUE(e.has_value());
    fresh = RunTurn(**e, 0, Turn(kNext, 8, false));
  }
  struct Bad {
    std::string name, reason;
  };
  for (const Bad& bad : {Bad{"truncated", "truncated"}, Bad{"payload flip", ".kvspill: "},
                         Bad{"header flip", "header checksum"}, Bad{"model", "another model"},
                         Bad{"session", "another session"}, Bad{"empty", "truncated header"}}) {
    SCOPED_TRACE(bad.name);
    const fs::path dir = SpillDir("bad-" + bad.name);
    const fs::path writer_model = bad.name == "model" ? other.pack : mp.pack;
    {
      auto w = MakeEngine(writer_model, KvType::kF16, dir);
      ASSERT_TRUE(w.has_value()) << w.error().ToString();
      SpillFirstTurn(**w);
    }
    auto e = MakeEngine(mp.pack, KvType::kF16, dir);
    ASSERT_TRUE(e.has_value());
    char name[40];
    std::snprintf(name, sizeof name, "%016llx.kvspill", static_cast<unsigned long long>(kSession));
    fs::path file = dir / name;
    ASSERT_TRUE(fs::exists(file));
    const auto size = static_cast<std::streamoff>(fs::file_size(file));
    if (bad.name == "truncated") fs::resize_file(file, static_cast<uintmax_t>(size - 7));
    if (bad.name == "payload flip") Flip(file, size - 5);
    if (bad.name == "header flip") Flip(file, 40);
    if (bad.name == "empty") fs::resize_file(file, 10);
    uint64_t ask = kSession;
    if (bad.name == "session") {  // another session's file under this one's name
      ask = kSession + 1;
      char n2[40];
      std::snprintf(n2, sizeof n2, "%016llx.kvspill", static_cast<unsigned long long>(ask));
      fs::rename(file, dir / n2);
      file = dir / n2;
    }
    std::string why;
    auto ok = (*e)->RestoreSession(0, ask, &why);
    ASSERT_TRUE(ok.has_value());
    EXPECT_FALSE(*ok);
    EXPECT_NE(why.find(bad.reason), std::string::npos) << why;
    EXPECT_FALSE(fs::exists(file));  // never trusted again
    EXPECT_EQ((*e)->Counters().spill_rejected, 1u);
    EXPECT_EQ((*e)->SlotPosition(0), 0);
    EXPECT_EQ(RunTurn(**e, 0, Turn(kNext, 8, false)), fresh);
  }
}

TEST(EngineSpill, DiskBoundIsAClearErrorAndKeepsTheSlot) {
  ARI_REQUIRE_MODEL(ck, "llama2c/stories260K/stories260K.bin");
  const auto& mp = testing::Stories260K();
  ASSERT_TRUE(mp.ok);
  const fs::path dir = SpillDir("bound");
  auto e = MakeEngine(mp.pack, KvType::kF16, dir, 64);
  ASSERT_TRUE(e.has_value());
  RunTurn(**e, 0, Turn(kPrompt, 7, false));
  const int32_t pos = (*e)->SlotPosition(0);
  auto n = (*e)->SpillSlot(0, kSession);
  ASSERT_FALSE(n.has_value());
  EXPECT_EQ(n.error().code, ErrorCode::kIo);
  EXPECT_NE(n.error().message.find("bound"), std::string::npos) << n.error().message;
  EXPECT_EQ((*e)->SlotPosition(0), pos);
  std::error_code ec;
  EXPECT_TRUE(fs::is_empty(dir, ec));
  EXPECT_EQ((*e)->Counters().spill_failures, 1u);
  // A bound of two files' worth: a third spill removes the oldest.
  auto big = MakeEngine(mp.pack, KvType::kF16, SpillDir("bound2"), 1ull << 30);
  ASSERT_TRUE(big.has_value());
  RunTurn(**big, 0, Turn(kPrompt, 7, false));
  auto one = (*big)->SpillSlot(0, 1);
  ASSERT_TRUE(one.has_value());
  auto bounded = MakeEngine(mp.pack, KvType::kF16, SpillDir("bound3"), *one * 2 + *one / 2);
  ASSERT_TRUE(bounded.has_value());
  for (uint64_t s = 1; s <= 3; ++s) {
    RunTurn(**bounded, 0, Turn(kPrompt, 7, false));
    ASSERT_TRUE((*bounded)->SpillSlot(0, s).has_value());
  }
  EXPECT_LE((*bounded)->Counters().spill_bytes, *one * 2 + *one / 2);
  std::string why;
  auto first = (*bounded)->RestoreSession(0, 1, &why);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(*first);  // the oldest went
  auto third = (*bounded)->RestoreSession(0, 3, &why);
  ASSERT_TRUE(third.has_value());
  EXPECT_TRUE(*third) << why;
}

}  // namespace
}  // namespace ari::runtime
